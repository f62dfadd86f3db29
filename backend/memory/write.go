package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/atrium-dev/atrium/backend/memory/versions"
	"github.com/atrium-dev/atrium/backend/safefile"
)

// This file holds memory_write, memory_note and the concurrent-write rules
// of SPEC §5.3 (version vectors, conflict records, pending decisions).
//
// Rules, in the order Write applies them:
//
//   - Paths: only memory Markdown that would be indexed (classify), never a
//     `*.conflict-<ts>.md` file, and no symlink anywhere below the workspace
//     root (the file and every folder on its way must be real; folders are
//     created as needed under memory/, the workspace itself never).
//   - Authorize (Options.Authorize) is asked before anything else happens.
//   - Writes to one file are serialised (one at a time per path, in this
//     process; the index lock makes this process the workspace's only
//     writer) and atomic: the new text goes to a temp file in the same
//     folder, is fsynced, renamed into place, and the folder fsynced.
//   - The file's version is first brought in line with the disk: a file
//     without a stored version, or whose content differs from the hash the
//     last write recorded, counts as written by admin (a hand edit, SPEC
//     §5.3). The indexer does the same when it sees a file change
//     (observeEdit), so a hand edit is counted even when nobody writes.
//   - BaseVersion "" (none) or equal to the current version: the write is
//     applied. Otherwise (older, concurrent, or newer than anything stored)
//     the base is stale and:
//   - an append is applied to the current text (both sides kept; Merged),
//     unless the file is a decision file: appends never overwrite, so there
//     is nothing to lose;
//   - a decision file (see isDecision) is not changed: a pending conflict
//     holds the proposed text and the person chooses (ResolveConflict);
//   - any other replace is applied (the last write wins) and the text it
//     replaced is saved as a conflict record and as
//     `<stem>.conflict-<UTC ts>.md` beside the file (nothing is recorded
//     when the file did not exist or held the same text: nothing is lost).
//   - The new version is Merge(current, base) with the writer's counter
//     raised, so that it descends from both.
//   - Daily logs (a file name starting with YYYY-MM-DD) are append-only
//     (SPEC §4.1): a replace is refused unless the writer is admin.
//   - The file is indexed before Write returns (a search right after finds
//     it); OnChange fires with reason "write" ("conflict" for a pending
//     conflict, which changes no memory file).
//
// Conflict files are not memory: classify does not index them (they would
// otherwise compete with, or be folded into, the original's search
// results), memory_get does not serve them, and Write refuses them. Their
// text is in the conflict record (ListConflicts); ResolveConflict removes
// the file, whatever the choice, since the record keeps its text.

// Write modes (WriteRequest.Mode).
const (
	WriteAppend  = "append"
	WriteReplace = "replace"
)

// AdminWriter is the writer name of the person at the desktop (SPEC §5.1
// principal `admin`): gateway calls of the operator, hand edits, conflict
// resolutions.
const AdminWriter = "admin"

// Actions passed to Options.Authorize.
const (
	// ActionWrite: Write and Note, on the file written.
	ActionWrite = "write"
	// ActionResolve: ResolveConflict, on the conflict's file.
	ActionResolve = "resolve"
	// ActionImport: Import, on the file it is about to create (the name
	// it chose, after any renaming), before anything is created.
	ActionImport = "import"
	// ActionRead asks whether the caller may read a file (a conflict
	// record holds its text; a conflict on an unreadable file is
	// ErrNotFound to that caller, so ids cannot be probed).
	ActionRead = "read"
)

// Sentinel errors of the write path.
var (
	// ErrForbidden: Options.Authorize refused the call.
	ErrForbidden = errors.New("memory: forbidden")
	// ErrConflict: the conflict is already resolved, or the file's version
	// changed under a write in a way it could not handle (retryable).
	ErrConflict = errors.New("memory: conflict")
)

// Conflict is a conflict record (SPEC §5.3): see versions.Conflict.
type Conflict = versions.Conflict

// WriteRequest is a memory_write (SPEC §4.3). Path is workspace-relative
// ("memory/global/decisions.md"); Content is UTF-8 text (at most
// MaxImportBytes; the resulting file at most MaxFileBytes); Mode is
// WriteAppend (Content is added as its own lines at the end) or
// WriteReplace. BaseVersion is the version (wire form, see package
// versions) the write was based on, "" for none. Writer is who writes (a
// role name or AdminWriter; required); Session is passed to Authorize.
type WriteRequest struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Mode        string `json:"mode"`
	BaseVersion string `json:"baseVersion,omitempty"`
	Writer      string `json:"-"`
	Session     string `json:"-"`
}

// WriteResult says what a write did. Version is the file's version after
// it (unchanged when Pending). Merged: the base was stale and the append
// was applied to the current text. Conflict: the record made (an overwrite
// or a pending decision). Pending: nothing was written; the person decides.
type WriteResult struct {
	Path     string    `json:"path"`
	Version  string    `json:"version"`
	Merged   bool      `json:"merged"`
	Pending  bool      `json:"pending"`
	Conflict *Conflict `json:"conflict,omitempty"`
}

// NoteRequest is a memory_note: Text is appended as one timestamped line
// ("- 15:04:05 text"; further lines of Text indented by two spaces) to
// Role's daily log for Now's date in Now's time zone (zero Now: the
// Manager's clock). Writer defaults to Role; Session goes to Authorize.
type NoteRequest struct {
	Role    string    `json:"role"`
	Text    string    `json:"text"`
	Now     time.Time `json:"-"`
	Writer  string    `json:"-"`
	Session string    `json:"-"`
}

// ConflictFilter selects conflicts: Path (workspace-relative, "" = all),
// State ("" = all, "open", "resolved"), Limit (0 = 100, at most 1000).
type ConflictFilter struct {
	Path  string `json:"path,omitempty"`
	State string `json:"state,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// Resolution is the person's choice for a conflict: Choice "current"
// (keep the file as it is), "other" (write the conflict's other text) or
// "merged" (write Content).
type Resolution struct {
	Choice  string `json:"choice"`
	Content string `json:"content,omitempty"`
}

// conflictName matches the conflict files Write creates:
// <stem>.conflict-<YYYYMMDDTHHMMSS.mmmZ>[-n].md.
var conflictName = regexp.MustCompile(`(?i)\.conflict-\d{8}T\d{6}(\.\d{1,9})?Z(-\d+)?\.md$`)

// conflictStamp is the UTC time format in conflict file names.
const conflictStamp = "20060102T150405.000Z"

// isConflictFile reports whether the base name of rel is a conflict file's.
func isConflictFile(rel string) bool { return conflictName.MatchString(path.Base(rel)) }

// dailyLogName matches daily log file names (SPEC §4.1: YYYY-MM-DD.md, and
// any name starting with that date).
var dailyLogName = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}`)

// isDailyLog reports whether rel is a daily log (append-only, appends merge).
func isDailyLog(rel string) bool { return dailyLogName.MatchString(path.Base(rel)) }

// isDecision reports whether a file is tagged as a decision (SPEC §5.3:
// such files wait for the person): its path is memory/global/decisions*
// (decisions.md, decisions-2026.md, decisions/...), or its front matter
// (a leading "---" YAML block) has `type: decision` or "decision" among its
// `tags` (a list, or a comma-separated string), in any letter case.
func isDecision(rel, text string) bool {
	if strings.HasPrefix(rel, "memory/global/decisions") {
		return true
	}
	fm, ok := frontMatter(text)
	if !ok {
		return false
	}
	var meta struct {
		Type string `yaml:"type"`
		Tags any    `yaml:"tags"`
	}
	if err := yaml.Unmarshal([]byte(fm), &meta); err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(meta.Type), "decision") {
		return true
	}
	var tags []string
	switch t := meta.Tags.(type) {
	case string:
		tags = strings.Split(t, ",")
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				tags = append(tags, s)
			}
		}
	}
	for _, tag := range tags {
		if strings.EqualFold(strings.TrimSpace(tag), "decision") {
			return true
		}
	}
	return false
}

// frontMatter returns the YAML between a first line "---" and the next
// line "---" or "...".
func frontMatter(text string) (string, bool) {
	text = strings.TrimPrefix(text, "\uFEFF")
	first, rest, ok := strings.Cut(text, "\n")
	if !ok || strings.TrimRight(first, " \r") != "---" {
		return "", false
	}
	var b strings.Builder
	for {
		line, more, ok := strings.Cut(rest, "\n")
		if t := strings.TrimRight(line, " \r"); t == "---" || t == "..." {
			return b.String(), true
		}
		if !ok {
			return "", false
		}
		b.WriteString(line)
		b.WriteByte('\n')
		rest = more
	}
}

// pathLocks serialises writes per file path. A path takes two locks, one
// for each of its safefile.Keys and always in that order, so that paths
// that look alike (safefile.Alike: `notes.md`, `ＮＯＴＥＳ.md`, `nоtes.md`
// with a Cyrillic о) share at least one and a write cannot create one
// while another creates the other. A lock entry lives while someone holds
// or waits for it.
type pathLocks struct {
	mu sync.Mutex
	m  map[string]*pathLock
}

type pathLock struct {
	mu   sync.Mutex
	refs int
}

// lockKeys are rel's two lock names, one per kind of safefile.Keys.
func lockKeys(rel string) [2]string {
	k := safefile.Keys(rel)
	return [2]string{"0:" + k[0], "1:" + k[1]}
}

// entries returns (creating them) the lock entries of keys and counts the
// caller in; p.mu is held.
func (p *pathLocks) entries(keys [2]string) [2]*pathLock {
	if p.m == nil {
		p.m = map[string]*pathLock{}
	}
	var ls [2]*pathLock
	for i, k := range keys {
		l := p.m[k]
		if l == nil {
			l = &pathLock{}
			p.m[k] = l
		}
		l.refs++
		ls[i] = l
	}
	return ls
}

// drop counts the caller out of keys' entries, deleting unused ones; p.mu
// is held.
func (p *pathLocks) drop(keys [2]string, ls [2]*pathLock) {
	for i, l := range ls {
		l.refs--
		if l.refs == 0 {
			delete(p.m, keys[i])
		}
	}
}

func (p *pathLocks) release(keys [2]string, ls [2]*pathLock) {
	ls[1].mu.Unlock()
	ls[0].mu.Unlock()
	p.mu.Lock()
	p.drop(keys, ls)
	p.mu.Unlock()
}

// lock waits for rel's locks and returns their release func.
func (p *pathLocks) lock(rel string) func() {
	keys := lockKeys(rel)
	p.mu.Lock()
	ls := p.entries(keys)
	p.mu.Unlock()
	ls[0].mu.Lock()
	ls[1].mu.Lock()
	return func() { p.release(keys, ls) }
}

// tryLock takes rel's locks only if both are free.
func (p *pathLocks) tryLock(rel string) (func(), bool) {
	keys := lockKeys(rel)
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.entries(keys)
	if !ls[0].mu.TryLock() {
		p.drop(keys, ls)
		return nil, false
	}
	if !ls[1].mu.TryLock() {
		ls[0].mu.Unlock()
		p.drop(keys, ls)
		return nil, false
	}
	return func() { p.release(keys, ls) }, true
}

func (m *Manager) now() time.Time {
	if m.opts.Now != nil {
		return m.opts.Now()
	}
	return time.Now()
}

// versionStore returns Options.Versions, or an error when writes are not
// configured.
func (m *Manager) versionStore() (*versions.Store, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if m.opts.Versions == nil {
		return nil, fmt.Errorf("%w: memory writes need a version store (Options.Versions)", ErrUnavailable)
	}
	return m.opts.Versions, nil
}

// authorize asks Options.Authorize; a refusal wraps ErrForbidden.
func (m *Manager) authorize(ctx context.Context, writer, session, action, rel string) error {
	if m.opts.Authorize == nil {
		return nil
	}
	err := m.opts.Authorize(ctx, writer, session, action, rel)
	if err == nil || errors.Is(err, ErrForbidden) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrForbidden, err)
}

// writablePath checks a caller's path for Write (see the file comment).
func writablePath(p string) (string, error) {
	rel, err := cleanRel(p)
	if err != nil {
		return "", err
	}
	if isConflictFile(rel) {
		return "", fmt.Errorf("%w: %q is a conflict file; resolve the conflict instead", ErrInvalidPath, rel)
	}
	if !classify(rel).indexed {
		return "", fmt.Errorf("%w: %q is not memory Markdown", ErrInvalidPath, rel)
	}
	return rel, nil
}

func checkText(what, s string) error {
	switch {
	case len(s) > MaxImportBytes:
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrInvalidInput, what, len(s), MaxImportBytes)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s is binary (NUL byte)", ErrInvalidInput, what)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8 text", ErrInvalidInput, what)
	}
	return nil
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Write runs memory_write (SPEC §4.3, §5.3; the rules are in this file's
// comment). Errors: ErrInvalidPath (path), ErrInvalidInput (mode, writer,
// base version, content, a replace of a daily log by a role, a file that
// is binary or too large), ErrForbidden (Authorize), ErrUnavailable (no
// version store, or the workspace is unavailable), ErrConflict (the stored
// version changed under the write; retry), ErrExists (the path is new and
// it, or a folder on its way, looks like an existing one: see
// checkNewName), ErrClosed. A replaced file keeps its mode and owner; a new
// one gets safefile.DefaultPerm minus the umask (0644 under umask 022).
func (m *Manager) Write(ctx context.Context, r WriteRequest) (WriteResult, error) {
	store, err := m.versionStore()
	if err != nil {
		return WriteResult{}, fmt.Errorf("write: %w", err)
	}
	rel, err := writablePath(r.Path)
	if err != nil {
		return WriteResult{}, fmt.Errorf("write: %w", err)
	}
	if r.Mode != WriteAppend && r.Mode != WriteReplace {
		return WriteResult{}, fmt.Errorf("write %s: %w: mode %q (want %q or %q)", rel, ErrInvalidInput, r.Mode, WriteAppend, WriteReplace)
	}
	if err := versions.ValidateWriter(r.Writer); err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w: writer: %v", rel, ErrInvalidInput, err)
	}
	base, err := versions.Parse(r.BaseVersion)
	if err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w: baseVersion: %v", rel, ErrInvalidInput, err)
	}
	if err := checkText("content", r.Content); err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w", rel, err)
	}
	if r.Mode == WriteAppend && strings.TrimSpace(r.Content) == "" {
		return WriteResult{}, fmt.Errorf("write %s: %w: nothing to append", rel, ErrInvalidInput)
	}
	if r.Mode == WriteReplace && isDailyLog(rel) && r.Writer != AdminWriter {
		return WriteResult{}, fmt.Errorf("write %s: %w: daily logs are append-only (SPEC §4.1)", rel, ErrInvalidInput)
	}
	if err := m.authorize(ctx, r.Writer, r.Session, ActionWrite, rel); err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w", rel, err)
	}
	unlock := m.locks.lock(rel)
	defer unlock()
	res, err := m.writeLocked(ctx, store, rel, r, base)
	if err != nil {
		return WriteResult{}, fmt.Errorf("write %s: %w", rel, err)
	}
	return res, nil
}

// current is a file's content as the write path sees it.
type current struct {
	abs    string
	exists bool
	text   string
	hash   string // "" when the file does not exist
}

// readCurrent prepares rel for writing: its folders exist below memory/
// (created as needed) with no symlink on the way, and the file, if it
// exists, is a regular text file within MaxFileBytes.
func (m *Manager) readCurrent(ctx context.Context, rel string) (current, error) {
	if err := m.importRoots(ctx); err != nil {
		return current{}, err
	}
	if err := m.checkNewName(ctx, rel); err != nil {
		return current{}, err
	}
	dirRel := path.Dir(rel)
	dir := m.ws
	if dirRel != "." {
		var err error
		if dir, err = mkdirNoLinks(m.ws, dirRel); err != nil {
			return current{}, err
		}
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return current{}, err
	}
	if want := filepath.Join(m.wsReal, filepath.FromSlash(dirRel)); real != want {
		return current{}, fmt.Errorf("%w: a folder on the way to %s is a symlink", ErrInvalidPath, rel)
	}
	c := current{abs: filepath.Join(dir, path.Base(rel))}
	info, err := os.Lstat(c.abs)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return current{}, err
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return current{}, fmt.Errorf("%w: %s is a symlink", ErrInvalidPath, rel)
	case !info.Mode().IsRegular():
		return current{}, fmt.Errorf("%w: %s is not a regular file", ErrInvalidPath, rel)
	case info.Size() > MaxFileBytes:
		return current{}, fmt.Errorf("%w: %s is too large (%d bytes)", ErrInvalidInput, rel, info.Size())
	}
	data, err := os.ReadFile(c.abs)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return current{}, err
	}
	if _, _, binary := textContent(data); binary != "" {
		return current{}, fmt.Errorf("%w: %s: %s", ErrInvalidInput, rel, binary)
	}
	c.exists, c.text, c.hash = true, string(data), hashOf(data)
	return c, nil
}

// checkNewName refuses (ErrExists) to create rel, or a folder on its way,
// under a name that looks like an existing one in the same folder
// (safefile.CheckNew and safefile.Alike: NFKC, case folding and the UTS #39
// confusable skeleton), such as `memory/ＮＯＴＥＳ.md` or `memory/nоtes.md`
// (a Cyrillic о) beside `memory/notes.md`, or `memory/Roles/` beside
// `memory/roles/`. The error names the existing file when the caller may
// read it (Options.Readable), else no file. Writes to an
// existing rel pass. Look-alike paths share a write lock (pathLocks), so
// two of them cannot both be created at once.
func (m *Manager) checkNewName(ctx context.Context, rel string) error {
	root, err := os.OpenRoot(m.ws)
	if err != nil {
		return err
	}
	defer root.Close()
	var le *safefile.LookalikeError
	if err := safefile.CheckNew(root, rel); errors.As(err, &le) {
		if m.opts.Readable != nil && !m.opts.Readable(ctx, le.Existing) {
			err = &safefile.LookalikeError{Name: le.Name} // names no file
		}
		return fmt.Errorf("%w: %w", ErrExists, err)
	}
	// Any other error (a symlink on the way that leaves the workspace, a
	// folder that is a file) is reported precisely by the path checks
	// that follow (mkdirNoLinks, readCurrent).
	return nil
}

// mkdirNoLinks creates the folders of rel (slash-separated) below root,
// one at a time, refusing (ErrInvalidPath) any that exists as a symlink or
// a file, so that nothing is ever created through a link. root itself is
// never created.
func mkdirNoLinks(root, rel string) (string, error) {
	dir := root
	for _, seg := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, seg)
		info, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
			continue
		case err != nil:
			return "", err
		case info.Mode()&fs.ModeSymlink != 0:
			return "", fmt.Errorf("%w: %s is a symlink", ErrInvalidPath, dir)
		case !info.IsDir():
			return "", fmt.Errorf("%w: %s is not a folder", ErrInvalidPath, dir)
		}
	}
	return dir, nil
}

// appendText adds add to text as its own lines.
func appendText(text, add string) string {
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if !strings.HasSuffix(add, "\n") {
		add += "\n"
	}
	return text + add
}

// writeLocked applies a validated write; the caller holds rel's path lock.
func (m *Manager) writeLocked(ctx context.Context, store *versions.Store, rel string, r WriteRequest, base versions.Vector) (WriteResult, error) {
	cur, err := m.readCurrent(ctx, rel)
	if err != nil {
		return WriteResult{}, err
	}
	fv, counted, err := store.Reconcile(ctx, rel, cur.hash, AdminWriter, true)
	if err != nil {
		return WriteResult{}, err
	}
	if counted && cur.exists {
		m.log.Info("memory file changed outside the write path; counted as a write by admin", "path", rel, "version", fv.Vector.String())
	}
	curVec := fv.Vector
	newText := r.Content
	if r.Mode == WriteAppend {
		newText = appendText(cur.text, r.Content)
	}
	if len(newText) > MaxFileBytes {
		return WriteResult{}, fmt.Errorf("%w: the file would be %d bytes, limit %d", ErrInvalidInput, len(newText), MaxFileBytes)
	}
	res := WriteResult{Path: rel}
	stale := !base.IsZero() && versions.Compare(base, curVec) != versions.Equal
	decision := isDecision(rel, cur.text) || isDecision(rel, newText)
	var conflict *Conflict
	var conflictText string
	switch {
	case !stale:
	case r.Mode == WriteAppend && !decision:
		res.Merged = true
	case decision:
		res.Pending = true
		conflict = &Conflict{Kind: versions.KindPending, Other: newText}
		conflictText = newText
	case cur.exists && cur.text != newText:
		conflict = &Conflict{Kind: versions.KindOverwrite, Other: cur.text}
		conflictText = cur.text
	}
	// The side that is not kept goes to disk first, beside the file.
	var conflictAbs string
	if conflict != nil {
		conflict.Base, conflict.Current, conflict.Writer, conflict.Session = base, curVec, r.Writer, r.Session
		dir := filepath.Dir(cur.abs)
		stem := strings.TrimSuffix(path.Base(rel), path.Ext(rel))
		name, err := writeNew(dir, stem+".conflict-"+m.now().UTC().Format(conflictStamp), []byte(conflictText))
		if err != nil {
			return WriteResult{}, fmt.Errorf("save the other side of the conflict: %w", err)
		}
		conflictAbs = filepath.Join(dir, name)
		conflict.File = path.Join(path.Dir(rel), name)
	}
	if res.Pending {
		_, added, err := store.Commit(ctx, versions.Commit{Path: rel, Expect: curVec, Conflict: conflict}, nil)
		if err != nil {
			_ = os.Remove(conflictAbs)
			if errors.Is(err, versions.ErrChanged) {
				err = fmt.Errorf("%w: %w", ErrConflict, err)
			}
			return WriteResult{}, err
		}
		res.Version, res.Conflict = curVec.String(), added
		m.log.Info("memory write to a decision file is pending", "path", rel, "writer", r.Writer, "conflict", added.ID)
		m.fire([]string{rel}, "conflict")
		return res, nil
	}

	next := versions.Merge(curVec, base).Inc(r.Writer)
	data := []byte(newText)
	// The temp file has the mode and owner of the file it replaces (a
	// new file: safefile.DefaultPerm minus the umask).
	tmp, err := safefile.TempFor(cur.abs, data, safefile.Options{})
	if err != nil {
		if conflictAbs != "" {
			_ = os.Remove(conflictAbs)
		}
		return WriteResult{}, err
	}
	defer tmp.Close()
	applied := false
	fv, added, err := store.Commit(ctx, versions.Commit{Path: rel, Expect: curVec, Next: next, Hash: hashOf(data), Conflict: conflict}, func() error {
		if err := tmp.Replace(); err != nil {
			return err
		}
		applied = true
		return nil
	})
	if err != nil {
		if conflictAbs != "" && !applied {
			_ = os.Remove(conflictAbs) // nothing was overwritten
		}
		if errors.Is(err, versions.ErrChanged) {
			err = fmt.Errorf("%w: %w", ErrConflict, err)
		}
		if applied {
			// The text is on disk (and the replaced text in the conflict
			// file); the version is not. The next write counts the
			// difference as admin's.
			m.log.Error("memory write applied but its version was not stored", "path", rel, "err", err)
		}
		return WriteResult{}, err
	}
	res.Version, res.Conflict = fv.Vector.String(), added
	if added != nil {
		m.log.Info("memory concurrent write: last write kept, the replaced text saved", "path", rel, "writer", r.Writer,
			"conflict", added.ID, "file", added.File)
	}
	// Closed meanwhile: the write stands (text and version are stored);
	// the next Sync indexes it.
	_, _ = m.indexWritten(ctx, rel)
	m.fire([]string{rel}, "write")
	return res, nil
}

// indexWritten indexes a file the write path (or Import) just changed, so
// that a search right after finds it, and returns its chunk count. When
// indexing fails the file is marked dirty for the next flush or sync (the
// text is safely on disk) and the error is only logged; the error is
// ErrClosed alone, when the Manager was closed.
func (m *Manager) indexWritten(ctx context.Context, rel string) (int, error) {
	ctx = context.WithoutCancel(ctx) // the text is on disk: index it anyway
	m.writeMu.Lock()
	if m.closed.Load() {
		m.writeMu.Unlock()
		return 0, ErrClosed
	}
	chunks := 0
	_, err := m.indexOne(ctx, m.store, rel)
	if err == nil {
		if f, ok, ferr := m.store.File(ctx, rel); ferr == nil && ok {
			chunks = f.Chunks
		}
		if files, all, cerr := m.store.Counts(ctx); cerr == nil {
			m.mu.Lock()
			m.files, m.chunks = files, all
			m.mu.Unlock()
		}
	}
	m.writeMu.Unlock()
	if err != nil {
		m.log.Error("memory written file not indexed yet", "path", rel, "err", err)
		m.markDirty(rel)
	}
	return chunks, nil
}

// observeEdit is the indexer's hand-edit hook: it is called with the hash
// of a file's content whenever the indexer reads it, and counts a content
// that differs from the one the last write recorded as a write by admin
// (SPEC §5.3). Files never written through Write get no version here
// (Write and Version start one when they first need it). A file whose write
// is in progress is left to that write. Callers hold writeMu.
func (m *Manager) observeEdit(ctx context.Context, rel, hash string) {
	if m.opts.Versions == nil {
		return
	}
	unlock, ok := m.locks.tryLock(rel)
	if !ok {
		return
	}
	defer unlock()
	fv, changed, err := m.opts.Versions.Reconcile(ctx, rel, hash, AdminWriter, false)
	if err != nil {
		m.log.Warn("memory hand edit not counted", "path", rel, "err", err)
		return
	}
	if changed {
		m.log.Info("memory hand edit counted as a write by admin", "path", rel, "version", fv.Vector.String())
	}
}

// Version returns the current version of a memory file (wire form; "" for
// a file that does not exist and was never written), counting a hand edit
// first as Write does. Read it before the file's text (memory.get does):
// a write based on it is then never applied over a text its writer has not
// seen. Errors as Write's path errors, ErrUnavailable, ErrClosed.
func (m *Manager) Version(ctx context.Context, p string) (string, error) {
	store, err := m.versionStore()
	if err != nil {
		return "", fmt.Errorf("version: %w", err)
	}
	rel, err := writablePath(p)
	if err != nil {
		return "", fmt.Errorf("version: %w", err)
	}
	unlock := m.locks.lock(rel)
	defer unlock()
	hash, err := m.diskHash(rel)
	if err != nil {
		return "", fmt.Errorf("version %s: %w", rel, err)
	}
	fv, _, err := store.Reconcile(ctx, rel, hash, AdminWriter, true)
	if err != nil {
		return "", fmt.Errorf("version %s: %w", rel, err)
	}
	return fv.Vector.String(), nil
}

// diskHash returns the hash of rel's content ("" when it does not exist),
// with Write's rules: no symlink on the way, a regular file.
func (m *Manager) diskHash(rel string) (string, error) {
	dirRel := path.Dir(rel)
	dir := filepath.Join(m.ws, filepath.FromSlash(dirRel))
	real, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if real != filepath.Join(m.wsReal, filepath.FromSlash(dirRel)) {
		return "", fmt.Errorf("%w: a folder on the way to %s is a symlink", ErrInvalidPath, rel)
	}
	abs := filepath.Join(dir, path.Base(rel))
	info, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrInvalidPath, rel)
	}
	data, err := os.ReadFile(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return hashOf(data), nil
}

// noteRoleName checks a role name used as a folder name.
func noteRoleName(role string) error {
	switch {
	case role == "":
		return fmt.Errorf("%w: role is required", ErrInvalidInput)
	case len(role) > 255, !utf8.ValidString(role), strings.ContainsAny(role, `/\`), strings.HasPrefix(role, "."):
		return fmt.Errorf("%w: role %q is not a valid folder name", ErrInvalidInput, role)
	}
	for _, r := range role {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: role %q contains a control character", ErrInvalidInput, role)
		}
	}
	return nil
}

// NotePath is the daily log a note of role on day lands in (SPEC §4.1):
// memory/roles/<role>/YYYY-MM-DD.md; for the main role of a workspace in
// OpenClaw's layout (no memory/roles/ folder) memory/YYYY-MM-DD.md.
func (m *Manager) NotePath(role string, day time.Time) (string, error) {
	if err := noteRoleName(role); err != nil {
		return "", err
	}
	name := day.Format("2006-01-02") + ".md"
	if role == MainRole {
		if st, err := os.Stat(filepath.Join(m.ws, "memory", "roles")); err != nil || !st.IsDir() {
			return "memory/" + name, nil
		}
	}
	return "memory/roles/" + role + "/" + name, nil
}

// Note runs memory_note (SPEC §4.3): one timestamped line appended to the
// role's daily log (see NoteRequest and NotePath), as a Write in append
// mode without a base version (so it always applies; both sides of
// concurrent notes are kept). Errors as Write's; ErrInvalidInput for an
// empty text or a bad role name.
func (m *Manager) Note(ctx context.Context, r NoteRequest) (WriteResult, error) {
	text := strings.TrimRight(strings.ReplaceAll(r.Text, "\r\n", "\n"), " \t\r\n")
	if strings.TrimSpace(text) == "" {
		return WriteResult{}, fmt.Errorf("note: %w: empty text", ErrInvalidInput)
	}
	now := r.Now
	if now.IsZero() {
		now = m.now()
	}
	rel, err := m.NotePath(r.Role, now)
	if err != nil {
		return WriteResult{}, fmt.Errorf("note: %w", err)
	}
	writer := r.Writer
	if writer == "" {
		writer = r.Role
	}
	line := "- " + now.Format("15:04:05") + " " + strings.ReplaceAll(text, "\n", "\n  ")
	return m.Write(ctx, WriteRequest{Path: rel, Content: line, Mode: WriteAppend, Writer: writer, Session: r.Session})
}

// ListConflicts lists conflict records, newest first (see ConflictFilter).
// ErrInvalidInput: an unknown state; ErrInvalidPath: a bad path.
func (m *Manager) ListConflicts(ctx context.Context, f ConflictFilter) ([]Conflict, error) {
	store, err := m.versionStore()
	if err != nil {
		return nil, fmt.Errorf("list conflicts: %w", err)
	}
	vf := versions.Filter{State: f.State, Limit: f.Limit}
	if f.Path != "" {
		if vf.Path, err = cleanRel(f.Path); err != nil {
			return nil, fmt.Errorf("list conflicts: %w", err)
		}
	}
	if f.State != "" && f.State != versions.StateOpen && f.State != versions.StateResolved {
		return nil, fmt.Errorf("list conflicts: %w: state %q (want %q or %q)", ErrInvalidInput, f.State, versions.StateOpen, versions.StateResolved)
	}
	if f.Limit < 0 {
		return nil, fmt.Errorf("list conflicts: %w: negative limit", ErrInvalidInput)
	}
	list, err := store.Conflicts(ctx, vf)
	if err != nil {
		return nil, fmt.Errorf("list conflicts: %w", err)
	}
	return list, nil
}

// ResolveConflict settles an open conflict as the person (admin) chose:
// "current" keeps the file as it is, "other" writes the conflict's other
// text, "merged" writes r.Content; a text is written as a replace by admin
// on the current version (so daily logs too). The record is marked
// resolved with the choice and the resulting version, and its
// `*.conflict-<ts>.md` file is removed (the record keeps the text).
// Authorize is asked with AdminWriter and ActionResolve. Errors:
// ErrNotFound (no such conflict), ErrConflict (already resolved),
// ErrInvalidInput (unknown choice, merged without content), ErrForbidden,
// and Write's.
func (m *Manager) ResolveConflict(ctx context.Context, id int64, r Resolution) (Conflict, error) {
	store, err := m.versionStore()
	if err != nil {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
	}
	switch r.Choice {
	case versions.ChoiceCurrent, versions.ChoiceOther:
	case versions.ChoiceMerged:
		if r.Content == "" {
			return Conflict{}, fmt.Errorf("resolve conflict %d: %w: choice %q needs content", id, ErrInvalidInput, r.Choice)
		}
		if err := checkText("content", r.Content); err != nil {
			return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
		}
	default:
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w: choice %q (want %q, %q or %q)", id, ErrInvalidInput, r.Choice,
			versions.ChoiceCurrent, versions.ChoiceOther, versions.ChoiceMerged)
	}
	c, err := store.Conflict(ctx, id)
	if errors.Is(err, versions.ErrNotFound) {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
	}
	rel, err := writablePath(c.Path)
	if err != nil {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
	}
	// Before anything else is said about it: a conflict on a file the
	// caller may not read does not exist for the caller.
	if err := m.authorize(ctx, AdminWriter, "", ActionRead, rel); errors.Is(err, ErrForbidden) {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, ErrNotFound)
	} else if err != nil {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
	}
	if c.State != versions.StateOpen {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w: already resolved", id, ErrConflict)
	}
	if err := m.authorize(ctx, AdminWriter, "", ActionResolve, rel); err != nil {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
	}
	unlock := m.locks.lock(rel)
	defer unlock()
	var version string
	switch r.Choice {
	case versions.ChoiceCurrent:
		cur, err := m.readCurrent(ctx, rel)
		if err != nil {
			return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
		}
		fv, _, err := store.Reconcile(ctx, rel, cur.hash, AdminWriter, true)
		if err != nil {
			return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
		}
		version = fv.Vector.String()
	default:
		text := c.Other
		if r.Choice == versions.ChoiceMerged {
			text = r.Content
		}
		res, err := m.writeLocked(ctx, store, rel, WriteRequest{Path: rel, Content: text, Mode: WriteReplace, Writer: AdminWriter}, nil)
		if err != nil {
			return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
		}
		version = res.Version
	}
	vv, err := versions.Parse(version)
	if err != nil {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
	}
	done, err := store.Resolve(ctx, id, versions.Resolution{Choice: r.Choice, By: AdminWriter, Version: vv})
	if errors.Is(err, versions.ErrResolved) {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w: already resolved", id, ErrConflict)
	}
	if err != nil {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
	}
	if c.File != "" {
		if f, err := cleanRel(c.File); err == nil && isConflictFile(f) {
			if err := os.Remove(filepath.Join(m.ws, filepath.FromSlash(f))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				m.log.Warn("memory conflict file not removed", "path", f, "err", err)
			}
		}
	}
	m.log.Info("memory conflict resolved", "id", id, "path", rel, "choice", r.Choice, "version", version)
	if r.Choice == versions.ChoiceCurrent {
		m.fire([]string{rel}, "conflict")
	}
	return done, nil
}
