package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/atrium-dev/atrium/backend/acl"
)

// This file holds L3 session memory (SPEC §4.1, §5.2): session folders,
// their record, expiry into the archive, promotion into L2/L1, and the
// owner lookup behind the ACL's $session_owner.
//
// A session is the folder memory/sessions/<id>/. Its record is the front
// matter of memory/sessions/<id>/session.md (SessionRecordName):
//
//	---
//	type: session
//	session: <id>
//	owner: <role>
//	created: 2026-11-29T15:04:05Z
//	ttl: 86400
//	promoted:
//	  - {file: context.md, lines: 3-5, to: memory/roles/<r>/promoted-2026-11-29.md, hash: ..., at: ..., by: admin}
//	---
//
// A folder without session.md (a hand-made session, or the seed's layout
// with front matter on context.md) is read from the first of its Markdown
// files, in name order, whose front matter has `type: session`, `session`,
// `owner` or `ttl`; `role` is accepted for `owner`.
//
// Expiry: a session expires when now ≥ created + ttl (ttl ≤ 0 or absent:
// the ACL rule's ttl for `sessions/<id>/session.md`, else
// DefaultSessionTTL). An expired session is archived: its folder is moved,
// with one rename (atomic on one file system), to
// memory/archive/sessions/<id>/ (<id>-1, <id>-2 ... when taken). Nothing is
// ever deleted; archived files stay on disk, are not indexed (classify),
// so not searched or served by memory_get, and the index drops the old
// paths at once. A session without a readable record (no created time, or
// malformed front matter) never expires by itself: it is reported in
// ListSessions (Session.Error) and can be archived on request.

// Session defaults and names.
const (
	// SessionRecordName is the session record's file name in its folder.
	SessionRecordName = "session.md"
	// DefaultSessionTTL applies when neither the request, the record nor
	// the ACL rule gives a ttl (SPEC §5.1 example: 86400 s).
	DefaultSessionTTL = 24 * time.Hour
	// MaxSessionTTL caps the ttl a sessions.create request may give
	// (7 days, as a collaboration's ttl): an L3 session is short-lived
	// (SPEC §5.2), and a longer one is a role layer file, not a session.
	MaxSessionTTL = 7 * 24 * time.Hour
	// DefaultSessionSweep is how often Run archives expired sessions.
	DefaultSessionSweep = time.Minute
	// SessionsDir is the folder of live sessions (workspace-relative).
	SessionsDir = "memory/sessions"
	// ArchivedSessionsDir is where expired sessions are moved.
	ArchivedSessionsDir = "memory/archive/sessions"
)

// Promotion targets (PromoteRequest.To).
const (
	PromoteToRole   = "role"
	PromoteToGlobal = "global"
)

// ErrExists: the session or role to create already exists, or a file or
// folder a write would create looks like an existing one (the same name
// after NFKC normalisation and case folding; the message names it).
var ErrExists = errors.New("memory: already exists")

// Session describes one session folder. Times are Unix ms (0 = unknown);
// TTL is in seconds (the effective one, defaults applied). Path is the
// folder, workspace-relative. Files are the folder's files, relative to it.
// Error says why the record could not be read ("" when it could).
type Session struct {
	ID       string      `json:"id"`
	Owner    string      `json:"owner,omitempty"`
	Created  int64       `json:"created"`
	TTL      int64       `json:"ttl"`
	Expires  int64       `json:"expires"`
	Expired  bool        `json:"expired"`
	Archived bool        `json:"archived"`
	Path     string      `json:"path"`
	Files    []string    `json:"files"`
	Promoted []Promotion `json:"promoted,omitempty"`
	Error    string      `json:"error,omitempty"`
}

// Promotion records one promoted item in the session record. File is
// relative to the session folder; Lines "N-M" ("" = the whole file); To the
// file it was appended to; Hash the sha256 (hex, 16 chars) of the promoted
// text; At RFC 3339 UTC; By the writer.
type Promotion struct {
	File  string `json:"file" yaml:"file"`
	Lines string `json:"lines,omitempty" yaml:"lines,omitempty"`
	To    string `json:"to" yaml:"to"`
	Hash  string `json:"hash" yaml:"hash"`
	At    string `json:"at" yaml:"at"`
	By    string `json:"by" yaml:"by"`
}

// CreateSessionRequest creates a session. Owner is the owning role
// (required; acl.ValidateRole). ID is optional (generated when empty:
// <owner>-YYYYMMDD-HHMMSS-<4 hex>, or session-... for an owner name that is
// not plain ASCII); a given ID must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}.
// TTL is in seconds, at most MaxSessionTTL; 0 takes the default (see the
// file comment). Writer is
// recorded as the record's writer (default admin).
type CreateSessionRequest struct {
	ID     string `json:"id,omitempty"`
	Owner  string `json:"owner"`
	TTL    int64  `json:"ttl,omitempty"`
	Writer string `json:"-"`
}

// PromoteRequest promotes an item of a session into L2 or L1 (SPEC §5.2).
// Path is the file, relative to the session folder ("context.md") or
// workspace-relative ("memory/sessions/<id>/context.md"); Markdown only.
// Lines is "N" or "N-M" (1-based, inclusive); "" promotes the whole file
// without its front matter. To is PromoteToRole (Role, default the session
// owner) or PromoteToGlobal. Writer writes the target (default admin); a
// writer other than admin must be allowed to read the session file under
// the ACL.
type PromoteRequest struct {
	Session string `json:"session"`
	Path    string `json:"path"`
	Lines   string `json:"lines,omitempty"`
	To      string `json:"to"`
	Role    string `json:"role,omitempty"`
	Writer  string `json:"-"`
}

// PromoteResult says where the item went. Already: the same text of the
// same item was promoted to the same place before; nothing was written.
type PromoteResult struct {
	Path    string `json:"path"`
	Source  string `json:"source"`
	Lines   string `json:"lines,omitempty"`
	Version string `json:"version,omitempty"`
	Already bool   `json:"already"`
}

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// sessionSegment checks an existing session folder name: one clean path
// segment not starting with ".".
func sessionSegment(id string) error {
	switch {
	case id == "", id == ".", id == "..", strings.HasPrefix(id, "."), strings.ContainsAny(id, "/\\\x00"):
		return fmt.Errorf("%w: session id %q", ErrInvalidInput, id)
	}
	if _, err := cleanRel(id); err != nil {
		return fmt.Errorf("%w: session id %q", ErrInvalidInput, id)
	}
	return nil
}

// policy returns the ACL policy in force: Options.ACL's, else memory/.acl
// read now (absent: acl.Defaults). A malformed or unreadable file returns
// acl.AdminOnly with the error (never fail open).
func (m *Manager) policy() (*acl.Policy, error) {
	if m.opts.ACL != nil {
		if p := m.opts.ACL(); p != nil {
			return p, nil
		}
	}
	data, err := os.ReadFile(filepath.Join(m.ws, "memory", ".acl"))
	if errors.Is(err, fs.ErrNotExist) {
		return acl.Defaults(), nil
	}
	if err != nil {
		return acl.AdminOnly(), fmt.Errorf("read memory/.acl: %w", err)
	}
	p, err := acl.Parse(data)
	if err != nil {
		return acl.AdminOnly(), fmt.Errorf("memory/.acl: %w", err)
	}
	return p, nil
}

// defaultTTL is the ACL rule's ttl for the session's record, else
// DefaultSessionTTL.
func (m *Manager) defaultTTL(id string) time.Duration {
	p, err := m.policy()
	if err == nil {
		if r, ok := p.Match("sessions/" + id + "/" + SessionRecordName); ok && r.TTL > 0 {
			return r.TTL
		}
	}
	return DefaultSessionTTL
}

// sessionRecord is the record read from a session folder.
type sessionRecord struct {
	file     string // the file it came from (relative to the folder); "" when none
	fm       FrontMatter
	promoted []Promotion
	err      error
}

// readRecord reads the record of the session folder dir (absolute).
func readRecord(dir string) sessionRecord {
	names := []string{SessionRecordName}
	if es, err := os.ReadDir(dir); err == nil {
		var others []string
		for _, e := range es {
			if e.Type().IsRegular() && e.Name() != SessionRecordName && strings.EqualFold(path.Ext(e.Name()), ".md") && !strings.HasPrefix(e.Name(), ".") {
				others = append(others, e.Name())
			}
		}
		sort.Strings(others)
		names = append(names, others...)
	}
	for i, n := range names {
		abs := filepath.Join(dir, n)
		info, err := os.Lstat(abs)
		if err != nil || !info.Mode().IsRegular() || info.Size() > MaxFileBytes {
			continue
		}
		data, err := os.ReadFile(abs)
		if err != nil {
			continue
		}
		fm, _, _, ok, perr := ParseFrontMatter(string(data))
		if perr != nil {
			var fe *FrontMatterError
			if errors.As(perr, &fe) {
				fe.Path = n
			}
			if i == 0 {
				return sessionRecord{file: n, err: perr}
			}
			continue // a malformed note is not the record
		}
		if !ok {
			if i == 0 {
				return sessionRecord{file: n, err: &FrontMatterError{Path: n, Reason: "no front matter: the session record needs owner, created and ttl"}}
			}
			continue
		}
		_, hasSession := fm.Raw["session"]
		if i == 0 || strings.EqualFold(fm.Type, "session") || hasSession || fm.Owner != "" || fm.TTL > 0 {
			rec := sessionRecord{file: n, fm: fm}
			if raw, ok := fm.Raw["promoted"]; ok {
				b, _ := yaml.Marshal(raw)
				if err := yaml.Unmarshal(b, &rec.promoted); err != nil {
					rec.err = &FrontMatterError{Path: n, Reason: "promoted: expected a list of {file, lines, to, hash, at, by}"}
				}
			}
			return rec
		}
	}
	return sessionRecord{err: errors.New("no session record (session.md with owner, created and ttl)")}
}

// owner is the record's owner (`owner`, else `role`).
func (r sessionRecord) owner() string {
	if r.fm.Owner != "" {
		return r.fm.Owner
	}
	return r.fm.Role
}

// describe builds the Session of folder dir (absolute) at rel.
func (m *Manager) describe(id, dir, rel string, archived bool) Session {
	s := Session{ID: id, Path: rel, Archived: archived, Files: []string{}}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			if r, rerr := filepath.Rel(dir, p); rerr == nil {
				s.Files = append(s.Files, filepath.ToSlash(r))
			}
		}
		return nil
	})
	rec := readRecord(dir)
	if rec.err != nil {
		s.Error = rec.err.Error()
	}
	s.Owner = rec.owner()
	s.Promoted = rec.promoted
	ttl := time.Duration(rec.fm.TTL) * time.Second
	if ttl <= 0 {
		ttl = m.defaultTTL(id)
	}
	s.TTL = int64(ttl / time.Second)
	if !rec.fm.Created.IsZero() {
		s.Created = rec.fm.Created.UnixMilli()
		exp := rec.fm.Created.Add(ttl)
		s.Expires = exp.UnixMilli()
		s.Expired = !m.now().Before(exp)
	} else if s.Error == "" {
		s.Error = "the session record has no created time; it never expires by itself"
	}
	return s
}

// ListSessions lists the live sessions (memory/sessions/*/), and with
// archived the archived ones too, sorted by id. A folder whose record is
// malformed is listed with Error set (never an error of the call).
func (m *Manager) ListSessions(ctx context.Context, archived bool) ([]Session, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	out := []Session{}
	scan := func(dirRel string, arch bool) error {
		es, err := os.ReadDir(filepath.Join(m.ws, filepath.FromSlash(dirRel)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list sessions: %w", err)
		}
		for _, e := range es {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
				continue
			}
			rel := dirRel + "/" + e.Name()
			out = append(out, m.describe(e.Name(), filepath.Join(m.ws, filepath.FromSlash(rel)), rel, arch))
		}
		return nil
	}
	if err := scan(SessionsDir, false); err != nil {
		return nil, err
	}
	if archived {
		if err := scan(ArchivedSessionsDir, true); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// SessionOwner implements acl.SessionOwners from the session records: the
// owner recorded for the live session id. ok is false for an unknown or
// archived session, a record without an owner, or one that cannot be read
// (never guessed).
func (m *Manager) SessionOwner(id string) (string, bool) {
	if sessionSegment(id) != nil {
		return "", false
	}
	dir := filepath.Join(m.ws, "memory", "sessions", id)
	if info, err := os.Lstat(dir); err != nil || !info.IsDir() {
		return "", false
	}
	rec := readRecord(dir)
	if rec.err != nil {
		return "", false
	}
	o := rec.owner()
	return o, o != ""
}

var _ acl.SessionOwners = (*Manager)(nil)

// sessionIDFor generates a session id for owner at t.
func sessionIDFor(owner string, t time.Time) string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	prefix := owner
	if !sessionIDPattern.MatchString(prefix) || len(prefix) > 64 {
		prefix = "session"
	}
	return prefix + "-" + t.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// CreateSession creates memory/sessions/<id>/session.md (see
// CreateSessionRequest) through Write and returns the session. Errors:
// ErrInvalidInput (owner, id, ttl negative or over MaxSessionTTL), ErrExists (the folder exists), Write's.
func (m *Manager) CreateSession(ctx context.Context, r CreateSessionRequest) (Session, error) {
	if err := acl.ValidateRole(r.Owner); err != nil {
		return Session{}, fmt.Errorf("create session: %w: owner: %v", ErrInvalidInput, err)
	}
	if r.TTL < 0 || r.TTL > int64(MaxSessionTTL/time.Second) {
		return Session{}, fmt.Errorf("create session: %w: ttl %d s is out of range (0 for the default, at most %d)", ErrInvalidInput, r.TTL, int64(MaxSessionTTL/time.Second))
	}
	now := m.now()
	id := r.ID
	if id == "" {
		id = sessionIDFor(r.Owner, now)
	}
	if !sessionIDPattern.MatchString(id) {
		return Session{}, fmt.Errorf("create session: %w: id %q (want letters, digits, '.', '_' or '-', at most 128)", ErrInvalidInput, id)
	}
	writer := r.Writer
	if writer == "" {
		writer = AdminWriter
	}
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	dirRel := SessionsDir + "/" + id
	if _, err := os.Lstat(filepath.Join(m.ws, filepath.FromSlash(dirRel))); err == nil {
		return Session{}, fmt.Errorf("create session %s: %w", id, ErrExists)
	}
	ttl := r.TTL
	if ttl == 0 {
		ttl = int64(m.defaultTTL(id) / time.Second)
	}
	head := struct {
		Type    string `yaml:"type"`
		Session string `yaml:"session"`
		Owner   string `yaml:"owner"`
		Created string `yaml:"created"`
		TTL     int64  `yaml:"ttl"`
	}{"session", id, r.Owner, now.UTC().Format(time.RFC3339), ttl}
	y, err := yaml.Marshal(head)
	if err != nil {
		return Session{}, fmt.Errorf("create session %s: %w", id, err)
	}
	exp := now.Add(time.Duration(ttl) * time.Second).UTC().Format(time.RFC3339)
	text := "---\n" + string(y) + "---\n# Session " + id + " / 会话 " + id + "\n\n" +
		"Owner / 所有者: " + r.Owner + ". Expires / 过期: " + exp + " (then archived, never deleted / 到期后归档，不会删除).\n"
	rel := dirRel + "/" + SessionRecordName
	if _, err := m.Write(systemWrite(ctx, rel), WriteRequest{Path: rel, Content: text, Mode: WriteReplace, Writer: writer}); err != nil {
		return Session{}, fmt.Errorf("create session %s: %w", id, err)
	}
	m.log.Info("memory session created", "session", id, "owner", r.Owner, "ttl", ttl)
	return m.describe(id, filepath.Join(m.ws, filepath.FromSlash(dirRel)), dirRel, false), nil
}

// ExpireSessions archives every live session that has expired (see the
// file comment) and returns them as archived. One that cannot be archived
// is logged and left in place for the next sweep; the errors are joined.
func (m *Manager) ExpireSessions(ctx context.Context) ([]Session, error) {
	list, err := m.ListSessions(ctx, false)
	if err != nil {
		return nil, err
	}
	var done []Session
	var errs []error
	for _, s := range list {
		if !s.Expired || s.Error != "" {
			continue
		}
		a, err := m.ArchiveSession(ctx, s.ID)
		if err != nil {
			m.log.Error("memory session not archived", "session", s.ID, "err", err)
			errs = append(errs, err)
			continue
		}
		done = append(done, a)
	}
	return done, errors.Join(errs...)
}

// sweepSessions is Run's periodic ExpireSessions.
func (m *Manager) sweepSessions(ctx context.Context) {
	if m.isUnavailable() {
		return
	}
	done, err := m.ExpireSessions(ctx)
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
		m.log.Warn("memory session sweep incomplete", "err", err)
	}
	for _, s := range done {
		m.log.Info("memory session expired and archived", "session", s.ID, "path", s.Path)
	}
}

// ArchiveSession moves the live session id to the archive now (on expiry,
// or on request) and drops its files from the index; it returns the
// archived session. Nothing is deleted. Errors: ErrInvalidInput (id),
// ErrNotFound, ErrInvalidPath (the folder or the archive folder is a
// symlink), ErrClosed.
func (m *Manager) ArchiveSession(ctx context.Context, id string) (Session, error) {
	if m.closed.Load() {
		return Session{}, ErrClosed
	}
	if err := sessionSegment(id); err != nil {
		return Session{}, fmt.Errorf("archive session: %w", err)
	}
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	srcRel := SessionsDir + "/" + id
	src := filepath.Join(m.ws, filepath.FromSlash(srcRel))
	info, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return Session{}, fmt.Errorf("archive session %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Session{}, fmt.Errorf("archive session %s: %w", id, err)
	}
	if !info.IsDir() {
		return Session{}, fmt.Errorf("archive session %s: %w: %s is not a folder", id, ErrInvalidPath, srcRel)
	}
	// Hold every file's write lock across the move, so that no write of
	// this process lands in a folder that is being moved away.
	var rels []string
	_ = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if r, rerr := filepath.Rel(m.ws, p); rerr == nil {
				rels = append(rels, filepath.ToSlash(r))
			}
		}
		return nil
	})
	sort.Strings(rels)
	for _, r := range rels {
		unlock := m.locks.lock(r)
		defer unlock()
	}
	arch, err := mkdirNoLinks(m.ws, ArchivedSessionsDir)
	if err != nil {
		return Session{}, fmt.Errorf("archive session %s: %w", id, err)
	}
	name := id
	for i := 1; ; i++ {
		if _, err := os.Lstat(filepath.Join(arch, name)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if i > 10000 {
			return Session{}, fmt.Errorf("archive session %s: no free name in %s", id, ArchivedSessionsDir)
		}
		name = id + "-" + strconv.Itoa(i)
	}
	dst := filepath.Join(arch, name)
	if err := os.Rename(src, dst); err != nil {
		return Session{}, fmt.Errorf("archive session %s: %w", id, err)
	}
	syncDir(arch)
	syncDir(filepath.Dir(src))
	dstRel := ArchivedSessionsDir + "/" + name
	m.log.Info("memory session archived", "session", id, "from", srcRel, "to", dstRel, "files", len(rels))
	m.dropIndexed(ctx, rels)
	return m.describe(id, dst, dstRel, true), nil
}

// dropIndexed brings the index in line for paths that left memory (moved
// to the archive): each is indexed again, which drops it now that it is
// gone. OnChange fires with reason "archive".
func (m *Manager) dropIndexed(ctx context.Context, rels []string) {
	m.dropIndexedAs(ctx, rels, "archive")
}

// dropIndexedAs is dropIndexed with the reason OnChange fires with
// ("archive", or "delete" for files removed).
func (m *Manager) dropIndexedAs(ctx context.Context, rels []string, reason string) {
	ctx = context.WithoutCancel(ctx)
	var gone []string
	m.writeMu.Lock()
	if m.closed.Load() {
		m.writeMu.Unlock()
		return
	}
	for _, r := range rels {
		if !classify(r).indexed {
			continue
		}
		res, err := m.indexOne(ctx, m.store, r)
		if err != nil {
			m.log.Error("memory archived file still indexed", "path", r, "err", err)
			m.markDirty(r)
			continue
		}
		if res == resDeleted {
			gone = append(gone, r)
		}
	}
	if files, all, err := m.store.Counts(ctx); err == nil {
		m.mu.Lock()
		m.files, m.chunks = files, all
		m.mu.Unlock()
	}
	m.writeMu.Unlock()
	m.fire(gone, reason)
}

// parseLines parses PromoteRequest.Lines: "N" or "N-M" (1-based).
func parseLines(s string) (from, n int, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, 0, nil
	}
	a, b, isRange := strings.Cut(s, "-")
	from, err1 := strconv.Atoi(strings.TrimSpace(a))
	to := from
	var err2 error
	if isRange {
		to, err2 = strconv.Atoi(strings.TrimSpace(b))
	}
	if err1 != nil || err2 != nil || from < 1 || to < from {
		return 0, 0, fmt.Errorf("%w: lines %q (want N or N-M, 1-based, N ≤ M)", ErrInvalidInput, s)
	}
	return from, to - from + 1, nil
}

// promotedPath is the dated promoted note of a target: memory/global/ or
// the role's folder (OpenClaw layout, role main: memory/).
func (m *Manager) promotedPath(to, role string, day time.Time) (string, error) {
	name := "promoted-" + day.Format("2006-01-02") + ".md"
	switch to {
	case PromoteToGlobal:
		return "memory/global/" + name, nil
	case PromoteToRole:
		if err := acl.ValidateRole(role); err != nil {
			return "", fmt.Errorf("%w: role: %v", ErrInvalidInput, err)
		}
		if role == MainRole {
			if st, err := os.Stat(filepath.Join(m.ws, "memory", "roles")); err != nil || !st.IsDir() {
				return "memory/" + name, nil
			}
		}
		return "memory/roles/" + role + "/" + name, nil
	}
	return "", fmt.Errorf("%w: to %q (want %q or %q)", ErrInvalidInput, to, PromoteToRole, PromoteToGlobal)
}

// Promote copies an item of a session (a whole file, or a line range) into
// the role or global layer (see PromoteRequest): it is appended, through
// Write, to the dated note promoted-YYYY-MM-DD.md of the target, under a
// provenance line "promoted from sessions/<id>/<file> at <RFC 3339 UTC>"
// (with the lines and the writer), and the session record lists it under
// `promoted` (a session without session.md gets one). Promoting the same
// text of the same item to the same target again writes nothing
// (Already). Errors: ErrInvalidInput (session, path, lines, to, role,
// empty text, a malformed record: ErrFrontMatter), ErrNotFound (session or
// file), ErrInvalidPath, ErrForbidden (the writer may not read the file,
// or Write's Authorize), Write's.
func (m *Manager) Promote(ctx context.Context, r PromoteRequest) (PromoteResult, error) {
	if m.closed.Load() {
		return PromoteResult{}, ErrClosed
	}
	if err := sessionSegment(r.Session); err != nil {
		return PromoteResult{}, fmt.Errorf("promote: %w", err)
	}
	writer := r.Writer
	if writer == "" {
		writer = AdminWriter
	}
	file := strings.TrimPrefix(r.Path, SessionsDir+"/"+r.Session+"/")
	file, err := cleanRel(file)
	if err != nil {
		return PromoteResult{}, fmt.Errorf("promote: %w", err)
	}
	if !strings.EqualFold(path.Ext(file), ".md") || isConflictFile(file) {
		return PromoteResult{}, fmt.Errorf("promote: %w: %q is not a Markdown note of the session", ErrInvalidPath, file)
	}
	from, n, err := parseLines(r.Lines)
	if err != nil {
		return PromoteResult{}, fmt.Errorf("promote: %w", err)
	}
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	dirRel := SessionsDir + "/" + r.Session
	dir := filepath.Join(m.ws, filepath.FromSlash(dirRel))
	if info, err := os.Lstat(dir); err != nil || !info.IsDir() {
		return PromoteResult{}, fmt.Errorf("promote: session %s: %w", r.Session, ErrNotFound)
	}
	srcRel := dirRel + "/" + file
	unlockSrc := m.locks.lock(srcRel)
	src, err := m.readCurrent(ctx, srcRel)
	unlockSrc()
	if err != nil {
		return PromoteResult{}, fmt.Errorf("promote %s: %w", srcRel, err)
	}
	if !src.exists {
		return PromoteResult{}, fmt.Errorf("promote %s: %w", srcRel, ErrNotFound)
	}
	if writer != AdminWriter {
		p, perr := m.policy()
		name, _ := acl.Name(srcRel)
		if d := p.Check(acl.Principal{Role: writer}, acl.Read, name, m); !d.Allowed {
			reason := d.Reason
			if perr != nil {
				reason = perr.Error()
			}
			return PromoteResult{}, fmt.Errorf("promote %s: %w: %s", srcRel, ErrForbidden, reason)
		}
	}
	rec := readRecord(dir)
	if rec.err != nil && rec.file != "" {
		return PromoteResult{}, fmt.Errorf("promote: session %s: %w: %w", r.Session, ErrInvalidInput, rec.err)
	}
	var text string
	if from == 0 {
		_, body, _, _, ferr := ParseFrontMatter(src.text)
		text = body
		if ferr != nil {
			text = src.text
		}
	} else {
		text = sliceLines(src.text, from, n)
	}
	text = strings.Trim(text, "\n")
	if strings.TrimSpace(text) == "" {
		return PromoteResult{}, fmt.Errorf("promote %s: %w: nothing to promote in lines %q", srcRel, ErrInvalidInput, r.Lines)
	}
	lines := ""
	if from > 0 {
		lines = fmt.Sprintf("%d-%d", from, from+n-1)
	}
	role := r.Role
	if r.To == PromoteToRole && role == "" {
		role = rec.owner()
		if role == "" {
			return PromoteResult{}, fmt.Errorf("promote: %w: role is required (session %s has no recorded owner)", ErrInvalidInput, r.Session)
		}
	}
	now := m.now()
	target, err := m.promotedPath(r.To, role, now)
	if err != nil {
		return PromoteResult{}, fmt.Errorf("promote: %w", err)
	}
	hash := hashOf([]byte(text))[:16]
	res := PromoteResult{Path: target, Source: srcRel, Lines: lines}
	for _, p := range rec.promoted {
		if p.File == file && p.Lines == lines && p.Hash == hash && path.Dir(p.To) == path.Dir(target) {
			res.Path, res.Already = p.To, true
			return res, nil
		}
	}
	at := now.UTC().Format(time.RFC3339)
	details := []string{}
	if lines != "" {
		details = append(details, "lines "+lines)
	}
	details = append(details, "by "+writer)
	block := "\n> promoted from sessions/" + r.Session + "/" + file + " at " + at + " (" + strings.Join(details, ", ") + ")\n\n" + text + "\n"
	wres, err := m.Write(ctx, WriteRequest{Path: target, Content: block, Mode: WriteAppend, Writer: writer})
	if err != nil {
		return PromoteResult{}, fmt.Errorf("promote %s: %w", srcRel, err)
	}
	res.Version = wres.Version
	rec.promoted = append(rec.promoted, Promotion{File: file, Lines: lines, To: target, Hash: hash, At: at, By: writer})
	if err := m.saveRecord(ctx, r.Session, rec, writer); err != nil {
		// The text is promoted; only the mark is missing (a repeat would
		// promote it again). Say so.
		return res, fmt.Errorf("promote %s: promoted to %s, but the session record was not updated: %w", srcRel, target, err)
	}
	m.log.Info("memory session item promoted", "session", r.Session, "file", file, "lines", lines, "to", target, "writer", writer)
	return res, nil
}

// saveRecord rewrites the session record (session.md) with rec.promoted,
// keeping its other keys, their order and comments, and its body. A
// session whose record was another file (or none) gets a session.md.
func (m *Manager) saveRecord(ctx context.Context, id string, rec sessionRecord, writer string) error {
	rel := SessionsDir + "/" + id + "/" + SessionRecordName
	var doc yaml.Node
	body := "# Session " + id + " / 会话 " + id + "\n"
	cur, err := m.Get(ctx, GetOptions{Path: rel})
	switch {
	case err == nil:
		_, b, _, ok, ferr := ParseFrontMatter(cur.Text)
		if ferr != nil {
			return ferr
		}
		body = b
		if ok {
			fmText, _ := frontMatter(cur.Text)
			if err := yaml.Unmarshal([]byte(fmText), &doc); err != nil {
				return err
			}
		} else {
			body = cur.Text
		}
	case errors.Is(err, ErrNotFound):
	default:
		return err
	}
	if len(doc.Content) == 0 {
		seed := map[string]any{"type": "session", "session": id}
		if o := rec.owner(); o != "" {
			seed["owner"] = o
		}
		if !rec.fm.Created.IsZero() {
			seed["created"] = rec.fm.Created.UTC().Format(time.RFC3339)
		}
		if rec.fm.TTL > 0 {
			seed["ttl"] = rec.fm.TTL
		}
		if err := doc.Encode(seed); err != nil {
			return err
		}
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{&doc}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return &FrontMatterError{Path: rel, Reason: "expected a mapping"}
	}
	var list yaml.Node
	if err := list.Encode(rec.promoted); err != nil {
		return err
	}
	replaced := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "promoted" {
			root.Content[i+1] = &list
			replaced = true
		}
	}
	if !replaced {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "promoted"}, &list)
	}
	y, err := yaml.Marshal(&doc)
	if err != nil {
		return err
	}
	text := "---\n" + string(y) + "---\n" + body
	_, err = m.Write(systemWrite(ctx, rel), WriteRequest{Path: rel, Content: text, Mode: WriteReplace, Writer: writer})
	return err
}

// systemKey marks a context whose write of one path is the memory
// engine's own bookkeeping (a session record), not a principal's: the
// Authorize hook is not asked for it (see Open).
type systemKey struct{}

func systemWrite(ctx context.Context, rel string) context.Context {
	return context.WithValue(ctx, systemKey{}, rel)
}

func isSystemWrite(ctx context.Context, rel string) bool {
	p, ok := ctx.Value(systemKey{}).(string)
	return ok && p == rel
}
