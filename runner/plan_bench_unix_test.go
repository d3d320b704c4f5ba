//go:build unix

package runner

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the process has used. The
// benchmarks report it next to wall time because on a shared machine wall
// time also counts the other processes' turns.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
