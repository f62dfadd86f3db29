package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/safefile"
)

// maxImportNameLen caps the length (bytes) of an import file name.
const maxImportNameLen = 200

// Import stores one note in memory (memory.import): Layer "global" writes to
// memory/global/<name>; Layer "" or "role" writes to the main role's folder
// (memory/roles/main/ when the workspace has memory/roles/, else memory/);
// Layer "session" writes to the live session's folder
// memory/sessions/<Session>/ (L3, SPEC §5.2).
// Folders under memory/ are created as needed, the workspace itself never
// (and memory/ not while the index holds notes from a memory/ folder that
// has gone missing: ErrUnavailable). Only notes named *.md, *.markdown or
// *.txt (any case) are accepted; they are stored as ".md". The write is atomic (temp file,
// fsync, hard link into place, fsync of the folder) and never overwrites: a
// name that is taken, or that looks like an existing entry of the folder
// (safefile.Alike: NFKC, case folding and the UTS #39 confusable skeleton,
// so `NOTES.md`, `ＮＯＴＥＳ.md` and `nоtes.md` with a Cyrillic о beside
// `notes.md`), becomes name-1.md, name-2.md, ... (the first free one of
// maxImportNames). Options.Authorize (ActionImport) is asked for the name
// chosen before anything is created. The new file's mode is
// safefile.DefaultPerm minus the umask (0644 under umask 022). The note
// is indexed at once and OnChange fires with reason "import".
//
// ErrInvalidInput: an empty name, a name without one of those extensions,
// with a path separator, "..", a leading ".", or control characters; empty
// content; binary content (NUL bytes or invalid UTF-8); content over
// MaxImportBytes; an unknown layer; layer "session" with a malformed
// session id. ErrNotFound: layer "session" naming no live session.
// ErrExists: a folder on the way that
// does not exist looks like an existing one (`memory/roles/Main/` beside
// `memory/roles/main/`; folders are not renamed). ErrForbidden: Authorize
// refused. ErrInvalidPath: a folder on the way is a symlink leaving the
// workspace.
func (m *Manager) Import(ctx context.Context, r ImportRequest) (ImportResult, error) {
	if m.closed.Load() {
		return ImportResult{}, ErrClosed
	}
	base, err := importName(r.Name)
	if err != nil {
		return ImportResult{}, fmt.Errorf("import: %w", err)
	}
	switch {
	case len(r.Content) == 0 || strings.TrimSpace(r.Content) == "":
		return ImportResult{}, fmt.Errorf("import %s: %w: empty content", r.Name, ErrInvalidInput)
	case len(r.Content) > MaxImportBytes:
		return ImportResult{}, fmt.Errorf("import %s: %w: content is %d bytes, limit %d", r.Name, ErrInvalidInput, len(r.Content), MaxImportBytes)
	case strings.IndexByte(r.Content, 0) >= 0:
		return ImportResult{}, fmt.Errorf("import %s: %w: binary content (NUL byte)", r.Name, ErrInvalidInput)
	case !utf8.ValidString(r.Content):
		return ImportResult{}, fmt.Errorf("import %s: %w: content is not valid UTF-8 text", r.Name, ErrInvalidInput)
	}
	var dirRel string
	switch r.Layer {
	case LayerGlobal:
		dirRel = "memory/global"
	case "", LayerRole:
		dirRel = "memory"
		role := r.Role
		if role == "" {
			role = MainRole
		}
		if err := acl.ValidateRole(role); err != nil {
			return ImportResult{}, fmt.Errorf("import %s: %w: role: %v", r.Name, ErrInvalidInput, err)
		}
		if st, err := os.Stat(filepath.Join(m.ws, "memory", "roles")); err == nil && st.IsDir() {
			dirRel = "memory/roles/" + role
		}
	case LayerSession:
		if !sessionIDPattern.MatchString(r.Session) {
			return ImportResult{}, fmt.Errorf("import %s: %w: session %q (want letters, digits, '.', '_' or '-', at most 128)", r.Name, ErrInvalidInput, r.Session)
		}
		dirRel = SessionsDir + "/" + r.Session
		if st, err := os.Lstat(filepath.Join(m.ws, filepath.FromSlash(dirRel))); err != nil || !st.IsDir() {
			return ImportResult{}, fmt.Errorf("import %s: session %s: %w: no live session", r.Name, r.Session, ErrNotFound)
		}
	default:
		return ImportResult{}, fmt.Errorf("import %s: %w: unknown layer %q (want %q, %q or %q)", r.Name, ErrInvalidInput, r.Layer, LayerRole, LayerGlobal, LayerSession)
	}
	if err := m.importRoots(ctx); err != nil {
		return ImportResult{}, fmt.Errorf("import %s: %w", r.Name, err)
	}
	rel, err := m.importNew(ctx, dirRel, base, []byte(r.Content))
	if err != nil {
		return ImportResult{}, fmt.Errorf("import %s: %w", r.Name, err)
	}
	m.log.Info("memory note imported", "path", rel, "bytes", len(r.Content))

	res := ImportResult{Path: rel, Bytes: len(r.Content)}
	if res.Chunks, err = m.indexWritten(ctx, rel); err != nil {
		return res, err
	}
	m.fire([]string{rel}, "import")
	return res, nil
}

// importName validates a note name (a file name ending in .md, .markdown or
// .txt, any case) and returns its stem, without the extension; the note is
// stored as <stem>.md.
func importName(name string) (string, error) {
	n := strings.TrimSpace(name)
	switch {
	case n == "":
		return "", fmt.Errorf("%w: empty name", ErrInvalidInput)
	case len(n) > maxImportNameLen:
		return "", fmt.Errorf("%w: name longer than %d bytes", ErrInvalidInput, maxImportNameLen)
	case !utf8.ValidString(n):
		return "", fmt.Errorf("%w: name is not valid UTF-8", ErrInvalidInput)
	case strings.ContainsAny(n, `/\`):
		return "", fmt.Errorf("%w: name %q must not contain a path separator", ErrInvalidInput, name)
	case strings.Contains(n, ".."):
		return "", fmt.Errorf("%w: name %q must not contain \"..\"", ErrInvalidInput, name)
	case strings.HasPrefix(n, "."):
		return "", fmt.Errorf("%w: name %q must not start with \".\"", ErrInvalidInput, name)
	case strings.ContainsAny(n, `:*?"<>|`):
		return "", fmt.Errorf("%w: name %q contains a character not allowed in file names", ErrInvalidInput, name)
	}
	for _, r := range n {
		if unicode.IsControl(r) {
			return "", fmt.Errorf("%w: name %q contains a control character", ErrInvalidInput, name)
		}
	}
	ext := path.Ext(n)
	switch strings.ToLower(ext) {
	case ".md", ".txt", ".markdown":
		n = strings.TrimSuffix(n, ext)
	default:
		return "", fmt.Errorf("%w: %q: only .md, .markdown and .txt notes can be imported", ErrInvalidInput, name)
	}
	n = strings.TrimRight(n, ". ")
	if n == "" {
		return "", fmt.Errorf("%w: name %q has no stem", ErrInvalidInput, name)
	}
	return n, nil
}

// maxImportNames bounds the names Import tries: <stem>.md and
// <stem>-1.md up to <stem>-9999.md.
const maxImportNames = 10000

// numberedName is the i-th name tried for a new file: <stem>.md, then
// <stem>-<i>.md.
func numberedName(stem string, i int) string {
	if i == 0 {
		return stem + ".md"
	}
	return stem + "-" + strconv.Itoa(i) + ".md"
}

// importNew writes data to dirRel/<stem>.md, or to <stem>-1.md,
// <stem>-2.md ... when that name is taken or looks like an entry of the
// folder (safefile.Alike), atomically (package safefile) and without ever
// replacing a file; see Import. Each name is checked, authorized and
// linked under its write locks (pathLocks), which every Write and Import
// of a look-alike path shares, so none can create a look-alike meanwhile.
// It returns the workspace-relative path written.
func (m *Manager) importNew(ctx context.Context, dirRel, stem string, data []byte) (string, error) {
	ws, err := os.OpenRoot(m.ws)
	if err != nil {
		return "", err
	}
	defer ws.Close()
	// The folder's names as they are now, to skip those taken without a
	// lock; the check under the lock decides.
	names, err := safefile.ReadNames(ws, dirRel)
	if err != nil {
		names = &safefile.Names{} // a folder still to create (else the checks below say why)
	}
	var tmp *safefile.Temp
	defer func() {
		if tmp != nil {
			tmp.Close()
		}
	}()
	for i := range maxImportNames {
		name := numberedName(stem, i)
		if _, taken := names.Lookalike(name); taken {
			continue
		}
		rel := dirRel + "/" + name
		placed, err := m.importAs(ctx, ws, rel, data, &tmp)
		switch {
		case err != nil:
			return "", err
		case placed:
			return rel, nil
		}
		names.Add(name) // taken meanwhile, or alike under the lock
	}
	return "", fmt.Errorf("%w: no free name for %s.md in %s (tried %d)", ErrExists, stem, dirRel, maxImportNames)
}

// importAs puts data in place as rel under rel's write locks unless rel
// looks like an existing entry (placed false, nil error: try the next
// name): the folders on the way are checked (safefile.CheckNew), the name
// authorized (ActionImport), the folders created and the temp file
// written in the folder (once, kept in *tmp for the next name) and linked.
func (m *Manager) importAs(ctx context.Context, ws *os.Root, rel string, data []byte, tmp **safefile.Temp) (placed bool, err error) {
	unlock := m.locks.lock(rel)
	defer unlock()
	var le *safefile.LookalikeError
	if err := safefile.CheckNew(ws, rel); errors.As(err, &le) {
		if le.Name != rel {
			return false, fmt.Errorf("%w: %w", ErrExists, err) // a folder on the way
		}
		return false, nil
	}
	// Other errors (a folder on the way that is a file or a symlink out of
	// the workspace) are reported precisely by the checks below.
	if err := m.authorize(ctx, AdminWriter, "", ActionImport, rel); err != nil {
		return false, err
	}
	dirRel, name := path.Split(rel)
	dirRel = strings.TrimSuffix(dirRel, "/")
	if *tmp == nil {
		dir, err := mkdirUnder(m.ws, dirRel)
		if err != nil {
			return false, err
		}
		// The folder must not lead out of the workspace through a symlink.
		if real, err := filepath.EvalSymlinks(dir); err != nil || !within(m.wsReal, real) {
			return false, fmt.Errorf("%w: %s leaves the workspace", ErrInvalidPath, dirRel)
		}
		if *tmp, err = safefile.NewTempIn(ws, dirRel, data, safefile.Options{}); err != nil {
			return false, err
		}
	}
	switch err := (*tmp).Link(name); {
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// writeNew writes data to dir/<stem>.md, or <stem>-1.md, <stem>-2.md ... if
// taken, atomically (package safefile) and without ever replacing an
// existing file: the other side of a conflict, beside its file (the
// caller holds that file's write locks). A name that looks like an
// existing one (safefile.CheckNew) counts as taken. The file gets the
// mode of a new file (safefile.DefaultPerm minus the umask). It returns
// the file name used.
func writeNew(dir, stem string, data []byte) (string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	tmp, err := safefile.NewTempIn(root, ".", data, safefile.Options{})
	if err != nil {
		return "", err
	}
	defer tmp.Close()
	for i := range maxImportNames {
		name := numberedName(stem, i)
		if err := safefile.CheckNew(root, name); errors.Is(err, safefile.ErrLookalike) {
			continue
		} else if err != nil {
			return "", err
		}
		err := tmp.Link(name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("no free name for %s.md", stem)
}

// importRoots checks, before Import creates any folder, that the workspace
// exists (it is never created here) and that memory/ is not a folder that
// went missing while the index holds its notes (creating it empty would make
// the next sync drop them all).
func (m *Manager) importRoots(ctx context.Context) error {
	st, release, err := m.currentStore()
	if err != nil {
		return err
	}
	memIndexed, err := st.HasFilesUnder(ctx, "memory")
	release()
	if err != nil {
		return err
	}
	if err := m.checkRoots(memIndexed); err != nil {
		m.markUnavailable(err)
		return err
	}
	return nil
}

// mkdirUnder creates the folders of rel (slash-separated) below root, one
// at a time, and returns the last one. root itself is never created: if it
// vanished, the first Mkdir fails.
func mkdirUnder(root, rel string) (string, error) {
	dir := root
	for _, seg := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, seg)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return dir, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
