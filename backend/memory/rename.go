package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/atrium-dev/atrium/backend/memory/versions"
)

// This file holds Rename: a memory note moved to another name, its version
// record with it (docs/PROTOCOL.md memory.rename).

// ActionRename is passed to Options.Authorize by Rename, once for the old
// path and once for the new one: the writer must be allowed to write both.
const ActionRename = "rename"

// Rename stages, passed to Manager.renameHook (tests simulate a crash there).
const (
	renameLinked = "linked" // the new name exists, the old one too
)

// RenameRequest moves the memory note From to To (both workspace-relative
// memory Markdown paths, as Write takes them). BaseVersion, when set, is
// the version of From the caller saw (memory.get): a file changed since is
// ErrConflict. Writer is who renames (version vectors; Authorize).
type RenameRequest struct {
	From        string
	To          string
	BaseVersion string
	Writer      string
	Session     string
}

// RenameResult is what Rename did: From and Path (the new path, clean) and
// Version, the file's version under its new path.
type RenameResult struct {
	From    string `json:"from"`
	Path    string `json:"path"`
	Version string `json:"version"`
}

// lockAll takes the write locks of every path in rels (their
// safefile.Keys), each key once and all in one global order, so that two
// renames, or a rename and a write, never wait for each other in a
// circle; it returns the release func.
func (p *pathLocks) lockAll(rels ...string) func() {
	seen := map[string]bool{}
	var keys []string
	for _, r := range rels {
		for _, k := range lockKeys(r) {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	p.mu.Lock()
	ls := make([]*pathLock, len(keys))
	for i, k := range keys {
		if p.m == nil {
			p.m = map[string]*pathLock{}
		}
		l := p.m[k]
		if l == nil {
			l = &pathLock{}
			p.m[k] = l
		}
		l.refs++
		ls[i] = l
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.mu.Lock()
	}
	return func() {
		for i := len(ls) - 1; i >= 0; i-- {
			ls[i].mu.Unlock()
		}
		p.mu.Lock()
		for i, l := range ls {
			l.refs--
			if l.refs == 0 {
				delete(p.m, keys[i])
			}
		}
		p.mu.Unlock()
	}
}

// Rename moves a memory note to a new name. The new name is made by a hard
// link and the old one removed after it (each folder synced), so a crash
// in between leaves the note under both names, never under neither; the
// version record moves to the new path in the same transaction as the
// remove (versions.Store.Move), so a failure leaves it with the old path.
// Both paths are then indexed again (the old one drops out of the index)
// and OnChange fires with reason "rename" for both.
//
// Errors: ErrInvalidPath (either path: see Write; a symlink on the way),
// ErrInvalidInput (the same path twice, writer, base version, a file that
// is too large or binary), ErrForbidden (Authorize refused either path),
// ErrNotFound (From does not exist), ErrExists (To exists, or it or a
// folder on its way looks like an existing name: checkNewName), ErrConflict
// (From changed since BaseVersion, or during the rename), ErrUnavailable
// (no version store), ErrClosed.
func (m *Manager) Rename(ctx context.Context, r RenameRequest) (RenameResult, error) {
	store, err := m.versionStore()
	if err != nil {
		return RenameResult{}, fmt.Errorf("rename: %w", err)
	}
	from, err := writablePath(r.From)
	if err != nil {
		return RenameResult{}, fmt.Errorf("rename: %w", err)
	}
	to, err := writablePath(r.To)
	if err != nil {
		return RenameResult{}, fmt.Errorf("rename %s: to: %w", from, err)
	}
	if from == to {
		return RenameResult{}, fmt.Errorf("rename %s: %w: the new name is the old one", from, ErrInvalidInput)
	}
	if err := versions.ValidateWriter(r.Writer); err != nil {
		return RenameResult{}, fmt.Errorf("rename %s: %w: writer: %v", from, ErrInvalidInput, err)
	}
	base, err := versions.Parse(r.BaseVersion)
	if err != nil {
		return RenameResult{}, fmt.Errorf("rename %s: %w: baseVersion: %v", from, ErrInvalidInput, err)
	}
	for _, p := range []string{from, to} {
		if err := m.authorize(ctx, r.Writer, r.Session, ActionRename, p); err != nil {
			return RenameResult{}, fmt.Errorf("rename %s to %s: %w", from, to, err)
		}
	}
	unlock := m.locks.lockAll(from, to)
	defer unlock()
	res, err := m.renameLocked(ctx, store, from, to, r.Writer, base)
	if err != nil {
		return RenameResult{}, fmt.Errorf("rename %s to %s: %w", from, to, err)
	}
	m.log.Info("memory note renamed", "from", from, "to", to, "writer", r.Writer, "version", res.Version)
	_, _ = m.indexWritten(ctx, from) // gone: dropped from the index
	_, _ = m.indexWritten(ctx, to)
	m.fire([]string{from, to}, "rename")
	return res, nil
}

// renameLocked does the rename; the caller holds both paths' locks.
func (m *Manager) renameLocked(ctx context.Context, store *versions.Store, from, to, writer string, base versions.Vector) (RenameResult, error) {
	src, err := m.diskHash(from)
	if err != nil {
		return RenameResult{}, err
	}
	if src == "" {
		return RenameResult{}, fmt.Errorf("%w: %s does not exist", ErrNotFound, from)
	}
	fv, _, err := store.Reconcile(ctx, from, src, AdminWriter, true)
	if err != nil {
		return RenameResult{}, err
	}
	if !base.IsZero() && versions.Compare(base, fv.Vector) != versions.Equal {
		return RenameResult{}, fmt.Errorf("%w: %s is at version %s, not %s (it changed since it was read)", ErrConflict, from, fv.Vector, base)
	}
	// readCurrent makes to's folders (no symlink on the way) and refuses a
	// look-alike of an existing name.
	dst, err := m.readCurrent(ctx, to)
	if err != nil {
		return RenameResult{}, err
	}
	if dst.exists {
		return RenameResult{}, fmt.Errorf("%w: %s exists", ErrExists, to)
	}
	srcAbs := filepath.Join(m.ws, filepath.FromSlash(from))
	info, err := os.Lstat(srcAbs)
	if err != nil {
		return RenameResult{}, err
	}
	if info.Size() > MaxFileBytes {
		return RenameResult{}, fmt.Errorf("%w: %s is too large (%d bytes)", ErrInvalidInput, from, info.Size())
	}
	moved, err := store.Move(ctx, from, to, fv.Vector, writer, src, func() error {
		// Link, then remove: the note always has at least one name.
		if err := os.Link(srcAbs, dst.abs); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%w: %s exists", ErrExists, to)
			}
			return fmt.Errorf("link %s: %w", to, err)
		}
		syncDir(filepath.Dir(dst.abs))
		if m.renameHook != nil {
			if err := m.renameHook(renameLinked); err != nil {
				return err
			}
		}
		if err := os.Remove(srcAbs); err != nil {
			_ = os.Remove(dst.abs) // the old name stays the note's only one
			return fmt.Errorf("remove %s: %w", from, err)
		}
		syncDir(filepath.Dir(srcAbs))
		return nil
	})
	if err != nil {
		if errors.Is(err, versions.ErrChanged) {
			err = fmt.Errorf("%w: %w", ErrConflict, err)
		}
		return RenameResult{}, err
	}
	return RenameResult{From: from, Path: path.Clean(to), Version: moved.Vector.String()}, nil
}
