package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// kind is the classification of a workspace-relative path (SPEC §4.1).
type kind struct {
	indexed bool
	layer   string
	role    string
	// context marks an OpenClaw context file at the workspace root
	// (acl.ContextFiles: SOUL.md ...): role main's standing context,
	// readable but not indexed (context.go).
	context bool
}

// readable reports whether memory_get serves the file: indexed memory and
// the context files.
func (k kind) readable() bool { return k.indexed || k.context }

// MainRole is the role that owns OpenClaw-layout memory (MEMORY.md and
// memory/*.md) and imports that name no layer.
const MainRole = "main"

// classify maps a clean, workspace-relative, slash-separated path to its
// layer and role (SPEC §4.1):
//
//	MEMORY.md, memory.md (workspace root)  → layer role, role main (OpenClaw)
//	SOUL.md, AGENTS.md ... (root, acl.ContextFiles) → role main's context, not indexed
//	memory/global/**                       → layer global
//	memory/roles/<r>/**                    → layer role, role r
//	memory/sessions/<id>/**                → layer session
//	memory/templates/**                    → not indexed
//	memory/archive/sessions/**             → not indexed (archived sessions, sessions.go)
//	memory/archive/roles/**                → not indexed (deleted roles' kept memory, roleadmin.go)
//	any other memory/**                    → layer role, role main
//
// Only ".md" files are indexed; names or folders starting with "." are not,
// nor conflict files (`<stem>.conflict-<UTC ts>.md`, see write.go).
func classify(rel string) kind {
	if rel == "" || !strings.EqualFold(path.Ext(rel), ".md") || isConflictFile(rel) {
		return kind{}
	}
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if p == "" || strings.HasPrefix(p, ".") {
			return kind{}
		}
	}
	if len(parts) == 1 {
		if rel == "MEMORY.md" || rel == "memory.md" {
			return kind{indexed: true, layer: LayerRole, role: MainRole}
		}
		if acl.IsContextFile(rel) {
			return kind{context: true, layer: LayerRole, role: MainRole}
		}
		return kind{}
	}
	if parts[0] != "memory" {
		return kind{}
	}
	if len(parts) >= 3 {
		switch parts[1] {
		case "global":
			return kind{indexed: true, layer: LayerGlobal}
		case "templates":
			return kind{}
		case "archive":
			if len(parts) >= 4 && (parts[2] == "sessions" || parts[2] == "roles") {
				return kind{}
			}
		case "sessions":
			return kind{indexed: true, layer: LayerSession}
		case "roles":
			if len(parts) >= 4 {
				return kind{indexed: true, layer: LayerRole, role: parts[2]}
			}
			// memory/roles/x.md: a file directly in roles/ belongs to no role.
			return kind{indexed: true, layer: LayerRole, role: MainRole}
		}
	}
	return kind{indexed: true, layer: LayerRole, role: MainRole}
}

// cleanRel canonicalises a caller-supplied workspace-relative path: it must be
// relative, use forward slashes, and contain no "." or ".." segment, NUL or
// control characters. It returns the cleaned path or an ErrInvalidPath.
func cleanRel(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: empty path", ErrInvalidPath)
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("%w: %q: use forward slashes", ErrInvalidPath, p)
	case strings.HasPrefix(p, "/") || filepath.IsAbs(p) || filepath.VolumeName(p) != "" || (len(p) >= 2 && p[1] == ':'):
		return "", fmt.Errorf("%w: %q: absolute paths are not allowed", ErrInvalidPath, p)
	}
	for _, r := range p {
		if r == 0 || unicode.IsControl(r) {
			return "", fmt.Errorf("%w: %q: control character in path", ErrInvalidPath, p)
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q: \"..\" is not allowed", ErrInvalidPath, p)
		}
	}
	c := path.Clean(p)
	if c == "." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %q", ErrInvalidPath, p)
	}
	return c, nil
}

// diskFile is one indexable Markdown file found on disk.
type diskFile struct {
	rel   string // workspace-relative, slash-separated
	abs   string
	size  int64
	mtime int64 // Unix ms
}

// within reports whether target (an absolute, symlink-free path) lies inside
// root (also symlink-free).
func within(root, target string) bool {
	r, err := filepath.Rel(root, target)
	if err != nil {
		return false
	}
	return r == "." || (r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r))
}

// resolveInside follows symlinks of abs and checks that the result stays in
// the workspace and is itself an indexable memory path, or a context file
// reached as itself (context.go). It returns the resolved path's Stat info.
func (m *Manager) resolveInside(abs string) (string, fs.FileInfo, error) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", nil, err
	}
	if !within(m.wsReal, real) {
		return "", nil, fmt.Errorf("%w: symlink leaves the workspace", ErrInvalidPath)
	}
	rr, err := filepath.Rel(m.wsReal, real)
	if err != nil {
		return "", nil, fmt.Errorf("%w: symlink target is not memory Markdown", ErrInvalidPath)
	}
	// A context file (SOUL.md ...) is served as itself only, never as the
	// target of a memory path's symlink (which would index it) nor through
	// a symlink of its own.
	k := classify(filepath.ToSlash(rr))
	asItself := false
	if k.context {
		if own, rerr := filepath.Rel(m.ws, abs); rerr == nil && filepath.ToSlash(own) == filepath.ToSlash(rr) {
			li, lerr := os.Lstat(abs)
			asItself = lerr == nil && li.Mode().IsRegular()
		}
	}
	if !k.indexed && !asItself {
		return "", nil, fmt.Errorf("%w: symlink target is not memory Markdown", ErrInvalidPath)
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", nil, err
	}
	if !info.Mode().IsRegular() {
		return "", nil, fmt.Errorf("%w: not a regular file", ErrInvalidPath)
	}
	return real, info, nil
}

// listing is the result of a stat-only walk of the workspace (listFiles).
type listing struct {
	files []diskFile
	// unreadable holds the folders (with a trailing "/") and files that
	// exist but could not be listed or stat'ed. Their index entries are
	// kept: a file that cannot be read is not a deleted file.
	unreadable []string
	// problems describes the unreadable entries for Status.LastError.
	problems []string
}

// keeps reports whether rel is, or lies under, an unreadable entry.
func (l *listing) keeps(rel string) bool {
	for _, u := range l.unreadable {
		if rel == u || (strings.HasSuffix(u, "/") && strings.HasPrefix(rel, u)) {
			return true
		}
	}
	return false
}

func (l *listing) unreadableEntry(rel string, dir bool, err error) {
	if dir {
		l.unreadable = append(l.unreadable, rel+"/")
		l.problems = append(l.problems, fmt.Sprintf("%s: folder unreadable (%v); its notes stay indexed", rel, err))
		return
	}
	l.unreadable = append(l.unreadable, rel)
	l.problems = append(l.problems, fmt.Sprintf("%s: unreadable (%v); its indexed copy is kept", rel, err))
}

// listFiles walks the workspace for indexable memory Markdown without
// reading any file. Symlinked files are never listed: a link that resolves
// to memory Markdown inside the workspace is a second name of a file that is
// listed under its real path, and links leading anywhere else are refused.
// Symlinked folders are not followed.
//
// Never is "cannot read" taken for "deleted" (see checkRoots): a missing or
// unreadable workspace root, or memory/ folder while indexed (in st or in the
// live store) notes lie under it, is an *unavailableError and nothing is
// listed; an unreadable subfolder or file is recorded in the listing, whose
// caller keeps its index entries.
func (m *Manager) listFiles(ctx context.Context, st *index.Store) (*listing, error) {
	memIndexed, err := m.memoryIndexed(ctx, st)
	if err != nil {
		return nil, err
	}
	if err := m.checkRoots(memIndexed); err != nil {
		return nil, err
	}
	l := &listing{}
	add := func(rel, abs string, d fs.DirEntry) {
		if d.Type()&fs.ModeSymlink != 0 {
			m.log.Debug("memory file symlink not indexed", "path", rel)
			return
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return // deleted while we were looking
		}
		if err != nil {
			l.unreadableEntry(rel, false, err)
			return
		}
		if !info.Mode().IsRegular() {
			return
		}
		l.files = append(l.files, diskFile{rel: rel, abs: abs, size: info.Size(), mtime: info.ModTime().UnixMilli()})
	}
	entries, err := os.ReadDir(m.ws)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &unavailableError{reason: fmt.Sprintf("workspace %s is missing", m.ws)}
		}
		return nil, &unavailableError{reason: fmt.Sprintf("workspace %s is unreadable: %v", m.ws, err)}
	}
	for _, e := range entries {
		if !e.IsDir() && classify(e.Name()).indexed {
			add(e.Name(), filepath.Join(m.ws, e.Name()), e)
		}
	}
	root := filepath.Join(m.ws, "memory")
	var rootErr error
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err != nil {
			if p == root {
				if errors.Is(err, fs.ErrNotExist) && !memIndexed {
					return fs.SkipAll // no memory/ folder, and nothing indexed from one
				}
				rootErr = memoryFolderError(root, err)
				return fs.SkipAll
			}
			m.log.Warn("memory walk error", "path", p, "err", err)
			if rel, rerr := filepath.Rel(m.ws, p); rerr == nil && !errors.Is(err, fs.ErrNotExist) {
				l.unreadableEntry(filepath.ToSlash(rel), d != nil && d.IsDir(), err)
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, rerr := filepath.Rel(m.ws, p)
		if rerr != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || rel == "memory/templates" || rel == ArchivedSessionsDir || rel == ArchivedRolesDir) {
				return fs.SkipDir
			}
			return nil
		}
		if p == root {
			// memory is not a folder (a file, or a symlink, which is not
			// followed): nothing under it can be listed.
			if memIndexed {
				rootErr = &unavailableError{reason: fmt.Sprintf("memory folder %s is not a folder", root)}
			}
			return fs.SkipAll
		}
		if classify(rel).indexed {
			add(rel, p, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list workspace: %w", err)
	}
	if rootErr != nil {
		return nil, rootErr
	}
	return l, nil
}

// memoryIndexed reports whether st, or the live store it replaces during a
// rebuild, holds notes under memory/. Callers hold writeMu.
func (m *Manager) memoryIndexed(ctx context.Context, st *index.Store) (bool, error) {
	stores := []*index.Store{st}
	if m.store != nil && m.store != st {
		stores = append(stores, m.store)
	}
	for _, s := range stores {
		ok, err := s.HasFilesUnder(ctx, "memory")
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// detectLayout reports "openclaw", "atrium", "mixed" or "empty" (SPEC §4.1).
func detectLayout(ws string) string {
	isDir := func(p string) bool {
		st, err := os.Stat(filepath.Join(ws, p))
		return err == nil && st.IsDir()
	}
	atrium := isDir("memory/global") || isDir("memory/roles") || isDir("memory/sessions")
	openclaw := false
	for _, n := range []string{"MEMORY.md", "memory.md"} {
		if st, err := os.Stat(filepath.Join(ws, n)); err == nil && st.Mode().IsRegular() {
			openclaw = true
		}
	}
	if !openclaw {
		if es, err := os.ReadDir(filepath.Join(ws, "memory")); err == nil {
			for _, e := range es {
				if !e.IsDir() && classify("memory/"+e.Name()).indexed {
					openclaw = true
					break
				}
			}
		}
	}
	switch {
	case atrium && openclaw:
		return "mixed"
	case atrium:
		return "atrium"
	case openclaw:
		return "openclaw"
	}
	return "empty"
}
