package runtime_test

import (
	"syscall"
	"time"
)

// cpuTime is the user+system CPU time this process has used. Benchmarks
// report it per record besides wall time, because on a shared machine the
// wall time includes waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
