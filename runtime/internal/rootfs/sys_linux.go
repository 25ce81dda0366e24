package rootfs

import (
	"os"
	"syscall"
	"unsafe"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// utimeOmit is Linux's UTIME_OMIT: leave this time as it is.
const utimeOmit = 1<<30 - 2

// futimens sets the access and modification times of the open file f, in
// nanoseconds since the epoch (experimentalsys.UTIME_OMIT: unchanged).
func futimens(f *os.File, atim, mtim int64) experimentalsys.Errno {
	if atim == experimentalsys.UTIME_OMIT && mtim == experimentalsys.UTIME_OMIT {
		return 0
	}
	ts := [2]syscall.Timespec{timespec(atim), timespec(mtim)}
	rc, err := f.SyscallConn()
	if err != nil {
		return experimentalsys.UnwrapOSError(err)
	}
	var e syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		// utimensat(fd, NULL, ts, 0) is futimens(fd, ts).
		_, _, e = syscall.Syscall6(syscall.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	}); err != nil {
		return experimentalsys.UnwrapOSError(err)
	}
	if e != 0 {
		return experimentalsys.UnwrapOSError(e)
	}
	return 0
}

func timespec(t int64) syscall.Timespec {
	if t == experimentalsys.UTIME_OMIT {
		return syscall.Timespec{Nsec: utimeOmit}
	}
	return syscall.NsecToTimespec(t)
}

func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var e error
	if err := rc.Control(func(fd uintptr) { e = syscall.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	return e
}
