//go:build !linux && !darwin && !freebsd && !windows

package media

// freeSpace is unknown here (-1): only write errors report a full disk.
func freeSpace(string) (int64, error) { return -1, nil }

func isQuota(error) bool { return false }
