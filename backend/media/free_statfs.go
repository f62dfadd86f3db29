//go:build linux || darwin || freebsd

package media

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// freeSpace is the bytes available to an unprivileged process on dir's file system.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, err
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize)), nil
}

func isQuota(err error) bool { return errors.Is(err, syscall.EDQUOT) }
