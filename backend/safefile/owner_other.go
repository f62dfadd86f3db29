//go:build !unix

package safefile

import "io/fs"

// owner: files have no Unix owner here.
func owner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

// ignorableChown: modes are mostly fixed here (read-only is the only bit);
// a failed change is ignored.
func ignorableChown(error) bool { return true }
