//go:build unix

package safefile

import (
	"errors"
	"io/fs"
	"syscall"
)

// owner returns the owner and group of a file.
func owner(info fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// ignorableChown reports whether a failed chown or chmod of the temp file
// may be ignored: the process may not give the file away (EPERM, EACCES),
// the file system has no owners or modes (ENOTSUP, EINVAL on some FUSE and
// FAT mounts), or the id is not mapped in this user namespace (EINVAL).
func ignorableChown(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EINVAL)
}
