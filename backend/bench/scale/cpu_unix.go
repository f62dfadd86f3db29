//go:build unix

package scale

import "syscall"

// cpuTime returns the user+system CPU seconds of this process (0 where
// getrusage fails).
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
