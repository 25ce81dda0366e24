//go:build unix

package rootfs

import (
	"os"
	"syscall"
)

func sameIno(fi os.FileInfo, dev, ino uint64) (same, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false, false
	}
	return uint64(st.Dev) == dev && uint64(st.Ino) == ino, true
}
