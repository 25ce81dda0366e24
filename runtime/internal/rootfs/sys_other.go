//go:build !linux

package rootfs

import (
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// futimens is implemented on Linux only: elsewhere os.Root offers only a
// Chtimes by name, which may change the target of a link a concurrent
// rename puts in place.
func futimens(*os.File, int64, int64) experimentalsys.Errno { return experimentalsys.ENOSYS }

func datasync(f *os.File) error { return f.Sync() }
