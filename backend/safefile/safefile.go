// Package safefile writes the files Atrium writes for a person (memory
// notes, conflict copies, the files agents write, the app's own state
// files) one way: atomically, without changing who may read them, and
// without creating a name that only looks new.
//
//   - Atomic: the data goes to a hidden temp file in the destination's
//     folder, is fsynced, then renamed over the destination (Replace) or
//     hard-linked to a name that must not exist yet (Link), and the folder
//     is fsynced. A reader sees the old file or the new one, never a part.
//   - Mode and owner: a file that is replaced keeps its mode (permission
//     bits, setuid, setgid, sticky) and, where the process may set it, its
//     owner and group (root may; others may set the group to one of their
//     own; a refusal, EPERM, is ignored: the data matters more). A new file
//     gets Options.Perm (default DefaultPerm, 0o666) minus the process
//     umask, exactly what an editor or `touch` would create there: 0644
//     under the usual umask 022, 0664 under 002, 0600 under 077. Memory is
//     a folder of the person's Markdown notes, so its files should look
//     like the person's other files; the app's secrets (config.json with
//     its API keys, gateway.json) ask for exactly 0600 with Options.Exact.
//   - Look-alike names: CheckNew refuses a new name that equals an existing
//     one after Unicode NFKC normalisation and case folding (Fold), such as
//     `ＮＯＴＥＳ.md` beside `notes.md`, and names the existing one.
//
// Every path is inside an *os.Root, so no symlink leads a write outside the
// folder the caller opened. The package has no state.
package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// DefaultPerm is the mode of a new file before the process umask is
// applied (see the package comment).
const DefaultPerm fs.FileMode = 0o666

// tempPrefix starts the names of temp files (hidden, never indexed).
const tempPrefix = ".atrium-tmp-"

// ErrNotRegular: the destination exists and is not a regular file (a
// folder, a symlink, a device); it is left alone.
var ErrNotRegular = errors.New("not a regular file")

// Options says how a file is written. The zero value: a new file gets
// DefaultPerm minus the umask, a replaced file keeps its mode and owner.
type Options struct {
	// Perm is the mode of a new file, before the umask (0: DefaultPerm).
	Perm fs.FileMode
	// Exact gives the file exactly Perm, umask or not, whether it is new
	// or replaces a file of another mode (for secrets: Perm 0o600); a
	// replaced file's owner is still kept.
	Exact bool
}

func (o Options) perm() fs.FileMode {
	if o.Perm == 0 {
		return DefaultPerm
	}
	return o.Perm & fs.ModePerm
}

// keptMode is the part of a file's mode a replacement keeps.
const keptMode = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// Temp is data written and fsynced to a temp file beside its destination,
// waiting to be put in place by Replace or Link. Close it when done (it
// removes the temp file unless it was put in place). Not safe for
// concurrent use.
type Temp struct {
	root   *os.Root
	owned  bool   // root was opened by WriteFile or CreateFile
	dir    string // the folder, relative to root ("." for root itself)
	target string // the destination, relative to root
	name   string // the temp file, relative to root
	o      Options
	placed bool
}

// NewTemp writes data to a new temp file in the folder of target (a
// slash-separated path relative to root, whose folder must exist) and
// fsyncs it, for Replace (or Link). The temp file already has the mode and
// owner the destination will have: those of target when it is an existing
// regular file (unless o.Exact), else o's mode for a new file. Errors:
// ErrNotRegular when target exists and is not a regular file, or the file
// system's.
func NewTemp(root *os.Root, target string, data []byte, o Options) (*Temp, error) {
	target = path.Clean(target)
	cur, err := regular(root, target)
	if err != nil {
		return nil, err
	}
	return newTemp(&Temp{root: root, dir: path.Dir(target), target: target, o: o}, cur, data)
}

// NewTempIn writes data to a new temp file in the folder dir (relative to
// root) with o's mode for a new file, for Link under a name chosen later
// (Replace is an error).
func NewTempIn(root *os.Root, dir string, data []byte, o Options) (*Temp, error) {
	return newTemp(&Temp{root: root, dir: path.Clean(dir), o: o}, nil, data)
}

// TempFor is NewTemp for the file at name (an OS path): it opens the
// folder of name as the root, which Close closes.
func TempFor(name string, data []byte, o Options) (*Temp, error) {
	root, err := os.OpenRoot(filepath.Dir(name))
	if err != nil {
		return nil, err
	}
	t, err := NewTemp(root, filepath.Base(name), data, o)
	if err != nil {
		root.Close()
		return nil, err
	}
	t.owned = true
	return t, nil
}

// newTemp creates t's temp file; cur is the file it will replace (nil:
// none yet).
func newTemp(t *Temp, cur fs.FileInfo, data []byte) (*Temp, error) {
	root, o := t.root, t.o
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	t.name = path.Join(t.dir, tempPrefix+hex.EncodeToString(b[:]))
	// A new file is created with its final mode (the kernel applies the
	// umask); one that replaces a file starts private and takes the
	// replaced file's mode below, before any data is written.
	mode := o.perm()
	if cur != nil || o.Exact {
		mode = 0o600
	}
	f, err := root.OpenFile(t.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return nil, err
	}
	err = t.match(f, cur)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = root.Remove(t.name)
		return nil, err
	}
	return t, nil
}

// regular returns the info of name when it is an existing regular file,
// nil when it does not exist, and ErrNotRegular for anything else.
func regular(root *os.Root, name string) (fs.FileInfo, error) {
	info, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, info.Mode().Type())
	}
	return info, nil
}

// match gives the open temp file f the owner and mode of cur (the file it
// will replace; nil: none), or o's exact mode.
// A mode that cannot be set (a FAT or FUSE mount with fixed modes) is
// left as the file system gives it.
func (t *Temp) match(f *os.File, cur fs.FileInfo) error {
	// The owner first: chown clears setuid and setgid.
	if cur != nil {
		if uid, gid, ok := owner(cur); ok {
			if err := ignored(f.Chown(uid, gid)); err != nil {
				return err
			}
		}
	}
	switch {
	case t.o.Exact:
		return ignored(f.Chmod(t.o.perm()))
	case cur == nil:
		return nil
	}
	return ignored(f.Chmod(cur.Mode() & keptMode))
}

// ignored is nil for the errors ignorableChown accepts, else err.
func ignored(err error) error {
	if err != nil && ignorableChown(err) {
		return nil
	}
	return err
}

// rematch re-applies match by name when target changed since NewTemp:
// created (a new file becomes a replacement) or given another mode or
// owner meanwhile.
func (t *Temp) rematch() error {
	cur, err := regular(t.root, t.target)
	if err != nil || cur == nil {
		return err
	}
	tmp, err := t.root.Lstat(t.name)
	if err != nil {
		return err
	}
	uid, gid, ok := owner(cur)
	tuid, tgid, _ := owner(tmp)
	moved := ok && (uid != tuid || gid != tgid)
	if moved {
		if err := ignored(t.root.Lchown(t.name, uid, gid)); err != nil {
			return err
		}
	}
	want := cur.Mode() & keptMode
	if t.o.Exact {
		want = t.o.perm()
	}
	if tmp.Mode()&keptMode != want || moved {
		return ignored(t.root.Chmod(t.name, want))
	}
	return nil
}

// Replace puts the data in place as the target, replacing it if it exists
// (keeping its mode and owner as they are now) and fsyncs the folder.
// Errors: ErrNotRegular (the target became a folder or a link meanwhile),
// or the file system's; the temp file is then still there (Close removes it).
func (t *Temp) Replace() error {
	if t.target == "" {
		return errors.New("safefile: a temp file made by NewTempIn has no target to replace")
	}
	if err := t.rematch(); err != nil {
		return err
	}
	if err := t.root.Rename(t.name, t.target); err != nil {
		return err
	}
	t.placed = true
	t.syncDir()
	return nil
}

// Link puts the data in place under name (a file name in the temp file's
// folder; "" means the target given to NewTemp) only if nothing has that name: an
// existing one is never replaced and the error wraps fs.ErrExist. On file
// systems without hard links the name is checked, then renamed to. After
// a successful Link the temp file is gone; Link again is an error.
func (t *Temp) Link(name string) error {
	if t.placed {
		return errors.New("safefile: the data is already in place")
	}
	dst := t.target
	if name != "" {
		dst = path.Join(t.dir, name)
	}
	if dst == "" {
		return errors.New("safefile: Link needs a name")
	}
	err := t.root.Link(t.name, dst)
	switch {
	case err == nil:
		_ = t.root.Remove(t.name)
	case errors.Is(err, fs.ErrExist):
		return err
	default:
		// No hard links here: check, then rename.
		if _, serr := t.root.Lstat(dst); serr == nil {
			return fmt.Errorf("link %s: %w", dst, fs.ErrExist)
		}
		if err := t.root.Rename(t.name, dst); err != nil {
			return err
		}
	}
	t.placed = true
	t.syncDir()
	return nil
}

func (t *Temp) syncDir() {
	if d, err := t.root.Open(t.dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// Close removes the temp file if it was not put in place, and closes the
// root WriteFile or CreateFile opened. It is safe to call more than once.
func (t *Temp) Close() error {
	if t == nil || t.root == nil {
		return nil
	}
	if !t.placed {
		_ = t.root.Remove(t.name)
		t.placed = true
	}
	var err error
	if t.owned {
		err = t.root.Close()
	}
	t.root = nil
	return err
}

// WriteFile writes data to the file at name (an OS path) atomically,
// replacing it if it exists and keeping its mode and owner (see the
// package comment and Options). The folder must exist. Errors:
// ErrNotRegular, or the file system's.
func WriteFile(name string, data []byte, o Options) error {
	t, err := TempFor(name, data, o)
	if err != nil {
		return err
	}
	defer t.Close()
	return t.Replace()
}

// CreateFile writes data to a new file at name (an OS path) atomically; an
// existing file is never replaced (the error wraps fs.ErrExist). It does
// not check look-alike names (CheckNew does).
func CreateFile(name string, data []byte, o Options) error {
	t, err := TempFor(name, data, o)
	if err != nil {
		return err
	}
	defer t.Close()
	return t.Link("")
}
