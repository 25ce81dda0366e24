// Package rootfs is the file system a Wasm guest sees in a granted
// directory: a wazero experimental sys.FS over an os.Root, so that no path,
// link, `..` or rename race takes the guest outside the directory.
//
// wazero's own directory mount (sysfs.DirFS) joins the guest's path to the
// host directory and hands it to the operating system, which follows
// symbolic links wherever they point. An os.Root instead resolves every
// path one component at a time from a descriptor of the granted directory,
// never following a link that leaves it (an absolute link never resolves),
// so the check and the use are one step and a concurrent rename cannot slip
// a link in between. On top of what os.Root gives, this package refuses to
// create links that point outside, implements utimes on a descriptor it
// opened through the root (os.Root.Chtimes is racy on Unix), honours
// O_NOFOLLOW (os.Root follows a final link even then) and, for a read-only
// grant, refuses every call that would change anything.
package rootfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
)

// FS is a granted directory. It is safe for concurrent use; Close it when
// no guest uses it any more.
type FS struct {
	root     *os.Root
	readOnly bool
}

// Open opens the directory dir as a grant; readOnly refuses every change.
// The grant holds the directory by descriptor: if dir is later renamed or
// replaced, the guest keeps seeing the directory it was given.
func Open(dir string, readOnly bool) (*FS, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &FS{root: r, readOnly: readOnly}, nil
}

// Close releases the directory's descriptor.
func (f *FS) Close() error { return f.root.Close() }

// String returns the host directory, as wazero's DirFS does.
func (f *FS) String() string { return f.root.Name() }

var _ experimentalsys.FS = (*FS)(nil)

// name turns a path from wazero (relative to the grant, already cleaned and
// free of a leading `..`) into an os.Root name.
func name(p string) string {
	if p == "" || p == "/" {
		return "."
	}
	return p
}

// errno maps an error to a WASI errno. Errors os.Root returns for a path
// that would leave the root ("path escapes from parent") are not system
// errors; they become EPERM, as wazero answers a `..` that leaves a mount.
func errno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var se syscall.Errno
	if errors.As(err, &se) {
		return experimentalsys.UnwrapOSError(se)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return experimentalsys.ENOENT
	case errors.Is(err, fs.ErrExist):
		return experimentalsys.EEXIST
	case errors.Is(err, fs.ErrClosed):
		return experimentalsys.EBADF
	case errors.Is(err, fs.ErrInvalid):
		return experimentalsys.EINVAL
	}
	return experimentalsys.EPERM
}

const writeFlags = experimentalsys.O_WRONLY | experimentalsys.O_RDWR | experimentalsys.O_APPEND |
	experimentalsys.O_CREAT | experimentalsys.O_TRUNC

// OpenFile implements experimentalsys.FS.
func (f *FS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if f.readOnly && flag&writeFlags != 0 {
		// O_RDONLY|O_CREAT and O_RDONLY|O_TRUNC change a file too.
		if flag&experimentalsys.O_DIRECTORY != 0 {
			return nil, experimentalsys.EISDIR
		}
		return nil, experimentalsys.EROFS
	}
	n := name(p)
	var link os.FileInfo
	if flag&experimentalsys.O_NOFOLLOW != 0 {
		// os.Root follows a final link even with O_NOFOLLOW: look first,
		// and below make sure the file opened is the one looked at.
		fi, err := f.root.Lstat(n)
		switch {
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			return nil, experimentalsys.ELOOP
		case err == nil:
			link = fi
		case !errors.Is(err, fs.ErrNotExist) || flag&experimentalsys.O_CREAT == 0:
			return nil, errno(err)
		}
	}
	of, err := f.root.OpenFile(n, osFlags(flag), perm&fs.ModePerm)
	if err != nil {
		return nil, errno(err)
	}
	file := &file{fs: f, name: n, flag: flag, perm: perm & fs.ModePerm, f: of}
	if link != nil {
		if fi, err := of.Stat(); err != nil || !os.SameFile(fi, link) {
			_ = of.Close()
			return nil, experimentalsys.ELOOP // it was swapped for a link meanwhile
		}
	}
	if flag&experimentalsys.O_DIRECTORY != 0 {
		if isDir, e := file.IsDir(); e != 0 || !isDir {
			_ = of.Close()
			if e == 0 {
				e = experimentalsys.ENOTDIR
			}
			return nil, e
		}
	}
	return file, 0
}

func osFlags(flag experimentalsys.Oflag) int {
	var o int
	switch flag & (experimentalsys.O_RDONLY | experimentalsys.O_RDWR | experimentalsys.O_WRONLY) {
	case experimentalsys.O_RDWR:
		o = os.O_RDWR
	case experimentalsys.O_WRONLY:
		o = os.O_WRONLY
	default:
		o = os.O_RDONLY
	}
	for _, m := range []struct {
		w experimentalsys.Oflag
		o int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND},
		{experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_EXCL, os.O_EXCL},
		{experimentalsys.O_TRUNC, os.O_TRUNC},
		{experimentalsys.O_SYNC | experimentalsys.O_DSYNC | experimentalsys.O_RSYNC, os.O_SYNC},
	} {
		if flag&m.w != 0 {
			o |= m.o
		}
	}
	return o
}

// Lstat implements experimentalsys.FS.
func (f *FS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := f.root.Lstat(name(p))
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Stat implements experimentalsys.FS.
func (f *FS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := f.root.Stat(name(p))
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Mkdir implements experimentalsys.FS.
func (f *FS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if f.readOnly {
		return experimentalsys.EROFS
	}
	e := errno(f.root.Mkdir(name(p), perm&fs.ModePerm))
	if e == experimentalsys.ENOTDIR { // as wazero's DirFS answers
		e = experimentalsys.ENOENT
	}
	return e
}

// Chmod implements experimentalsys.FS. WASI preview 1 has no chmod, and
// os.Root.Chmod is racy on Unix (it may change the target of a link a
// concurrent rename put in place), so it is not offered.
func (f *FS) Chmod(string, fs.FileMode) experimentalsys.Errno { return experimentalsys.ENOSYS }

// Rename implements experimentalsys.FS.
func (f *FS) Rename(from, to string) experimentalsys.Errno {
	if f.readOnly {
		return experimentalsys.EROFS
	}
	return errno(f.root.Rename(name(from), name(to)))
}

// Rmdir implements experimentalsys.FS.
func (f *FS) Rmdir(p string) experimentalsys.Errno { return f.remove(p, true) }

// Unlink implements experimentalsys.FS.
func (f *FS) Unlink(p string) experimentalsys.Errno { return f.remove(p, false) }

// remove removes p, which must be a directory when dir is true (ENOTDIR
// otherwise) and must not be one when it is false (EISDIR): os.Root.Remove
// removes either.
func (f *FS) remove(p string, dir bool) experimentalsys.Errno {
	if f.readOnly {
		return experimentalsys.EROFS
	}
	n := name(p)
	fi, err := f.root.Lstat(n)
	if err != nil {
		return errno(err)
	}
	switch {
	case dir && !fi.IsDir():
		return experimentalsys.ENOTDIR
	case !dir && fi.IsDir():
		return experimentalsys.EISDIR
	}
	return errno(f.root.Remove(n))
}

// Link implements experimentalsys.FS. Both names are resolved in the root;
// a final link in oldPath is linked itself, not its target.
func (f *FS) Link(oldPath, newPath string) experimentalsys.Errno {
	if f.readOnly {
		return experimentalsys.EROFS
	}
	return errno(f.root.Link(name(oldPath), name(newPath)))
}

// Symlink implements experimentalsys.FS. A link must be relative and point
// inside the root from where it is made (EPERM otherwise), so that a guest
// leaves no link out for another program to follow. (Renaming a link made
// deep in the tree to a higher directory can still make it point out; the
// guest cannot follow it out either way.)
func (f *FS) Symlink(target, link string) experimentalsys.Errno {
	if f.readOnly {
		return experimentalsys.EROFS
	}
	if target == "" || path.IsAbs(target) {
		return experimentalsys.EPERM
	}
	if t := path.Join(path.Dir(link), target); t == ".." || len(t) > 2 && t[:3] == "../" {
		return experimentalsys.EPERM
	}
	return errno(f.root.Symlink(target, name(link)))
}

// Readlink implements experimentalsys.FS.
func (f *FS) Readlink(p string) (string, experimentalsys.Errno) {
	s, err := f.root.Readlink(name(p))
	if err != nil {
		return "", errno(err)
	}
	return s, 0
}

// Utimens implements experimentalsys.FS: it opens the file through the
// root (following links inside it) and sets the times on that descriptor.
func (f *FS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if f.readOnly {
		return experimentalsys.EROFS
	}
	of, err := f.root.OpenFile(name(p), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrPermission) {
		of, err = f.root.OpenFile(name(p), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return errno(err)
	}
	defer func() { _ = of.Close() }()
	return futimens(of, atim, mtim)
}

// file is a file or directory opened through the root.
type file struct {
	fs   *FS
	name string // in the root, to reopen it for SetAppend
	flag experimentalsys.Oflag
	perm fs.FileMode
	f    *os.File

	statted bool // dev, ino and isDir are set
	dev     uint64
	ino     sys.Inode
	isDir   bool
	closed  bool
}

var _ experimentalsys.File = (*file)(nil)

func (f *file) cached() experimentalsys.Errno {
	if !f.statted {
		if _, e := f.Stat(); e != 0 {
			return e
		}
	}
	return 0
}

// Dev implements experimentalsys.File.
func (f *file) Dev() (uint64, experimentalsys.Errno) {
	e := f.cached()
	return f.dev, e
}

// Ino implements experimentalsys.File.
func (f *file) Ino() (sys.Inode, experimentalsys.Errno) {
	e := f.cached()
	return f.ino, e
}

// IsDir implements experimentalsys.File.
func (f *file) IsDir() (bool, experimentalsys.Errno) {
	e := f.cached()
	return f.isDir, e
}

// IsAppend implements experimentalsys.File.
func (f *file) IsAppend() bool { return f.flag&experimentalsys.O_APPEND != 0 }

// SetAppend implements experimentalsys.File. The append mode of an open
// file cannot change, so the file is opened again through the root, and
// kept only if it is the same file.
func (f *file) SetAppend(enable bool) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if enable == f.IsAppend() {
		return 0
	}
	if isDir, e := f.IsDir(); e != 0 {
		return e
	} else if isDir {
		return experimentalsys.EISDIR
	}
	flag := f.flag &^ (experimentalsys.O_CREAT | experimentalsys.O_TRUNC | experimentalsys.O_EXCL)
	if enable {
		flag |= experimentalsys.O_APPEND
	} else {
		flag &^= experimentalsys.O_APPEND
	}
	if f.fs.readOnly && flag&writeFlags != 0 {
		return experimentalsys.EROFS
	}
	off, err := f.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return errno(err)
	}
	nf, err := f.fs.root.OpenFile(f.name, osFlags(flag), 0)
	if err != nil {
		return errno(err)
	}
	a, err1 := f.f.Stat()
	b, err2 := nf.Stat()
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		_ = nf.Close()
		return experimentalsys.ENOENT // renamed or replaced meanwhile
	}
	if _, err := nf.Seek(off, io.SeekStart); err != nil {
		_ = nf.Close()
		return errno(err)
	}
	_ = f.f.Close()
	f.f, f.flag = nf, flag
	return 0
}

// Stat implements experimentalsys.File.
func (f *file) Stat() (sys.Stat_t, experimentalsys.Errno) {
	if f.closed {
		return sys.Stat_t{}, experimentalsys.EBADF
	}
	fi, err := f.f.Stat()
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	st := sys.NewStat_t(fi)
	f.statted, f.dev, f.ino, f.isDir = true, st.Dev, st.Ino, fi.IsDir()
	return st, 0
}

// Read implements experimentalsys.File.
func (f *file) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.Read(buf)
	if err == io.EOF {
		err = nil
	}
	return n, f.fileErr(err)
}

// Pread implements experimentalsys.File.
func (f *file) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.ReadAt(buf, off)
	if err == io.EOF {
		err = nil
	}
	return n, f.fileErr(err)
}

// Seek implements experimentalsys.File. Seeking a directory to 0 rewinds
// it (os.File drops what it read of it), so Readdir reads it afresh.
func (f *file) Seek(offset fileOffset, whence int) (int64, experimentalsys.Errno) {
	n, err := f.f.Seek(offset, whence)
	return n, f.fileErr(err)
}

// Readdir implements experimentalsys.File.
func (f *file) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	fis, err := f.f.Readdir(n)
	if err == io.EOF {
		err = nil
	}
	if err != nil {
		return nil, f.fileErr(err)
	}
	out := make([]experimentalsys.Dirent, len(fis))
	for i, fi := range fis {
		out[i] = experimentalsys.Dirent{Name: fi.Name(), Ino: sys.NewStat_t(fi).Ino, Type: fi.Mode().Type()}
	}
	return out, 0
}

// Write implements experimentalsys.File.
func (f *file) Write(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.Write(buf)
	return n, f.fileErr(err)
}

// Pwrite implements experimentalsys.File.
func (f *file) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.f.WriteAt(buf, off)
	return n, f.fileErr(err)
}

// Truncate implements experimentalsys.File.
func (f *file) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	if f.fs.readOnly {
		return experimentalsys.EROFS
	}
	return f.fileErr(f.f.Truncate(size))
}

// Sync implements experimentalsys.File.
func (f *file) Sync() experimentalsys.Errno { return f.fileErr(f.f.Sync()) }

// Datasync implements experimentalsys.File.
func (f *file) Datasync() experimentalsys.Errno { return f.fileErr(datasync(f.f)) }

// Utimens implements experimentalsys.File.
func (f *file) Utimens(atim, mtim int64) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if f.fs.readOnly {
		return experimentalsys.EROFS
	}
	return futimens(f.f, atim, mtim)
}

// Close implements experimentalsys.File.
func (f *file) Close() experimentalsys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	return errno(f.f.Close())
}

// fileOffset is int64. (go vet's stdmethods check takes any method named
// Seek whose first parameter is spelled int64 for an io.Seeker, which
// wazero's File.Seek, returning an Errno, is not.)
type fileOffset = int64

// fileErr maps an error of a call on the open file; a closed file is EBADF.
func (f *file) fileErr(err error) experimentalsys.Errno {
	if err != nil && f.closed {
		return experimentalsys.EBADF
	}
	return experimentalsys.UnwrapOSError(err)
}
