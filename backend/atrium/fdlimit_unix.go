//go:build unix

package atrium

import (
	"net"
	"syscall"
)

// openFileLimit returns the process's open-file limit (the soft
// RLIMIT_NOFILE), or 0 when it cannot be read or is unlimited. The Go
// runtime raised the soft limit to the hard one when the process started
// (go.dev/issue/46279); whatever limit is in force now applies.
func openFileLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 || lim.Cur > 1<<30 {
		return 0
	}
	return int(lim.Cur)
}

// connFD returns the file descriptor number of c (a TCP connection), or
// -1 when it has none.
func connFD(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if err := raw.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return -1
	}
	return fd
}
