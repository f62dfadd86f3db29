package memory

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
)

// testClock is an injectable clock for session expiry.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newSessionFixture(t *testing.T, files map[string]string, tweak func(*Options)) (*writeFixture, *testClock) {
	t.Helper()
	clk := &testClock{t: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}
	f := newWriteFixture(t, files, func(o *Options) {
		if tweak != nil {
			tweak(o)
		}
		o.Now = clk.now
	})
	return f, clk
}

func TestSessionCreateExpireArchive(t *testing.T) {
	ctx := context.Background()
	f, clk := newSessionFixture(t, map[string]string{
		"memory/global/user-profile.md": "# User\n\nThe user likes tea.\n",
	}, nil)

	s, err := f.m.CreateSession(ctx, CreateSessionRequest{ID: "code-1", Owner: "code-expert", TTL: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if s.Owner != "code-expert" || s.TTL != 3600 || s.Expired || s.Archived || s.Path != "memory/sessions/code-1" {
		t.Fatalf("created %+v", s)
	}
	if s.Expires-s.Created != 3600*1000 {
		t.Fatalf("expires %d created %d", s.Expires, s.Created)
	}
	// A second session with the same id is refused.
	if _, err := f.m.CreateSession(ctx, CreateSessionRequest{ID: "code-1", Owner: "writer"}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	// Default ttl: the ACL defaults have none, so DefaultSessionTTL.
	s2, err := f.m.CreateSession(ctx, CreateSessionRequest{Owner: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	if s2.TTL != int64(DefaultSessionTTL/time.Second) || !strings.HasPrefix(s2.ID, "writer-20261129-080000-") {
		t.Fatalf("default session %+v", s2)
	}
	for _, bad := range []CreateSessionRequest{
		{Owner: ""}, {Owner: "admin"}, {Owner: "a b"}, {Owner: "x", ID: "../up"}, {Owner: "x", ID: ".hidden"}, {Owner: "x", TTL: -1},
	} {
		if _, err := f.m.CreateSession(ctx, bad); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("CreateSession(%+v) = %v, want ErrInvalidInput", bad, err)
		}
	}

	// Session notes are searchable while the session lives.
	note := "memory/sessions/code-1/context.md"
	if _, err := f.m.Write(ctx, WriteRequest{Path: note, Content: "# Context\n\nzebracorn migration plan step one\nstep two: rollback drill\n", Mode: WriteReplace, Writer: "code-expert"}); err != nil {
		t.Fatal(err)
	}
	if !hasPath(f.search(t, "zebracorn migration"), note) {
		t.Fatal("session note not searchable")
	}
	if o, ok := f.m.SessionOwner("code-1"); !ok || o != "code-expert" {
		t.Fatalf("owner %q %v", o, ok)
	}

	// Not yet expired: nothing archived.
	clk.advance(59 * time.Minute)
	if done, err := f.m.ExpireSessions(ctx); err != nil || len(done) != 0 {
		t.Fatalf("early sweep archived %+v %v", done, err)
	}
	// Expired: archived, nothing deleted, not searched, still on disk.
	clk.advance(time.Minute)
	_ = drain(f.changes)
	done, err := f.m.ExpireSessions(ctx)
	if err != nil || len(done) != 1 || done[0].ID != "code-1" || !done[0].Archived || done[0].Path != "memory/archive/sessions/code-1" {
		t.Fatalf("sweep = %+v %v", done, err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory", "sessions", "code-1")); !os.IsNotExist(err) {
		t.Fatalf("live folder still there: %v", err)
	}
	for _, n := range []string{"context.md", "session.md"} {
		b, err := os.ReadFile(filepath.Join(f.ws, "memory", "archive", "sessions", "code-1", n))
		if err != nil || len(b) == 0 {
			t.Fatalf("archived %s: %v", n, err)
		}
	}
	if hasPath(f.search(t, "zebracorn migration"), note) {
		t.Fatal("archived note still searched")
	}
	for _, r := range f.search(t, "zebracorn migration") {
		if strings.Contains(r.Path, "archive") {
			t.Fatalf("archive indexed: %+v", r)
		}
	}
	ev := waitEvent(t, f.changes, "archive")
	if len(ev.Layers) != len(ev.Paths) || ev.Layers[0] != LayerSession || ev.Global {
		t.Fatalf("archive event %+v", ev)
	}
	// A full sync does not bring the archive back into the index.
	f.sync(t)
	if hasPath(f.search(t, "zebracorn migration"), "memory/archive/sessions/code-1/context.md") {
		t.Fatal("sync indexed the archive")
	}
	if _, ok := f.m.SessionOwner("code-1"); ok {
		t.Fatal("an archived session still has an owner")
	}
	if _, err := f.m.Get(ctx, GetOptions{Path: "memory/archive/sessions/code-1/context.md"}); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("get archived: %v", err)
	}

	// Listing: live by default, archived on request.
	live, err := f.m.ListSessions(ctx, false)
	if err != nil || len(live) != 1 || live[0].ID != s2.ID {
		t.Fatalf("live %+v %v", live, err)
	}
	all, err := f.m.ListSessions(ctx, true)
	if err != nil || len(all) != 2 {
		t.Fatalf("all %+v %v", all, err)
	}

	// The same id again, then archived on request: a second name, the
	// first archive untouched.
	if _, err := f.m.CreateSession(ctx, CreateSessionRequest{ID: "code-1", Owner: "code-expert"}); err != nil {
		t.Fatal(err)
	}
	a2, err := f.m.ArchiveSession(ctx, "code-1")
	if err != nil || a2.Path != "memory/archive/sessions/code-1-1" {
		t.Fatalf("archive on request: %+v %v", a2, err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory", "archive", "sessions", "code-1", "context.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.ArchiveSession(ctx, "code-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("archive missing: %v", err)
	}
	if _, err := f.m.ArchiveSession(ctx, "../global"); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("archive ../global: %v", err)
	}
}

func waitEvent(t *testing.T, c chan ChangeEvent, reason string) ChangeEvent {
	t.Helper()
	for {
		select {
		case ev := <-c:
			if ev.Reason == reason {
				return ev
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s event", reason)
		}
	}
}

// TestSessionTTLFromACL: the ACL rule's ttl is the default; a seed-style
// session (front matter on context.md, no session.md) is read; a
// malformed record is reported and never archived by the sweep.
func TestSessionTTLFromACL(t *testing.T) {
	ctx := context.Background()
	f, clk := newSessionFixture(t, map[string]string{
		"memory/.acl": "version: \"1.0\"\nrules:\n  sessions/*/*: {read: [$session_owner, admin], write: [$session_owner], ttl: 600}\n  \"**\": {read: [admin]}\n",
		"memory/sessions/agent-main-20260211/context.md": "---\ntype: session\nsession: agent-main-20260211\nrole: main\ncreated: 2026-11-29T07:30:00Z\nttl: 3600\n---\n\n# 当前会话上下文\n\n- [x] 设计三层记忆架构\n",
		"memory/sessions/broken/session.md":              "---\nowner: [unclosed\n---\nbody\n",
		"memory/sessions/bare/notes.md":                  "just notes\n",
	}, nil)
	s, err := f.m.CreateSession(ctx, CreateSessionRequest{ID: "short", Owner: "writer"})
	if err != nil || s.TTL != 600 {
		t.Fatalf("ttl from the ACL: %+v %v", s, err)
	}
	list, err := f.m.ListSessions(ctx, false)
	if err != nil || len(list) != 4 {
		t.Fatalf("list %+v %v", list, err)
	}
	by := map[string]Session{}
	for _, x := range list {
		by[x.ID] = x
	}
	seed := by["agent-main-20260211"]
	if seed.Owner != "main" || seed.TTL != 3600 || seed.Error != "" || seed.Expired {
		t.Fatalf("seed-style session %+v", seed)
	}
	if b := by["broken"]; b.Error == "" || !strings.Contains(b.Error, "session.md: front matter line") {
		t.Fatalf("broken record %+v", b)
	}
	if b := by["bare"]; b.Error == "" || b.Owner != "" {
		t.Fatalf("bare folder %+v", b)
	}
	if _, ok := f.m.SessionOwner("broken"); ok {
		t.Fatal("owner of a malformed record")
	}
	if _, ok := f.m.SessionOwner("bare"); ok {
		t.Fatal("owner guessed for a folder without a record")
	}
	clk.advance(48 * time.Hour)
	done, err := f.m.ExpireSessions(ctx)
	if err != nil || len(done) != 2 {
		t.Fatalf("sweep %+v %v", done, err)
	}
	for _, id := range []string{"broken", "bare"} {
		if _, err := os.Stat(filepath.Join(f.ws, "memory", "sessions", id)); err != nil {
			t.Errorf("%s was archived without a readable record: %v", id, err)
		}
	}
}

// TestSessionOwnerForACL: the ACL's $session_owner resolves through the
// Manager's records.
func TestSessionOwnerForACL(t *testing.T) {
	ctx := context.Background()
	f, _ := newSessionFixture(t, nil, nil)
	if _, err := f.m.CreateSession(ctx, CreateSessionRequest{ID: "s1", Owner: "writer"}); err != nil {
		t.Fatal(err)
	}
	pol := acl.Defaults()
	for _, tc := range []struct {
		who    acl.Principal
		action acl.Action
		name   string
		want   bool
	}{
		{acl.Principal{Role: "writer"}, acl.Read, "sessions/s1/context.md", true},
		{acl.Principal{Role: "writer"}, acl.Write, "sessions/s1/context.md", true},
		{acl.Principal{Role: "code-expert"}, acl.Read, "sessions/s1/context.md", false},
		{acl.Principal{Admin: true}, acl.Read, "sessions/s1/context.md", true},
		{acl.Principal{Admin: true}, acl.Write, "sessions/s1/context.md", false},
		{acl.Principal{Role: "writer"}, acl.Read, "sessions/unknown/context.md", false},
	} {
		if d := pol.Check(tc.who, tc.action, tc.name, f.m); d.Allowed != tc.want {
			t.Errorf("%v %s %s = %v (%s), want %v", tc.who, tc.action, tc.name, d.Allowed, d.Reason, tc.want)
		}
	}
}

// TestSessionRecordWriteSkipsAuthorize: the session record is the
// engine's bookkeeping; a principal's write still asks Authorize.
func TestSessionRecordWriteSkipsAuthorize(t *testing.T) {
	ctx := context.Background()
	var asked []string
	var mu sync.Mutex
	f, _ := newSessionFixture(t, nil, func(o *Options) {
		o.Authorize = func(ctx context.Context, writer, session, action, path string) error {
			mu.Lock()
			asked = append(asked, path)
			mu.Unlock()
			return errors.New("nobody writes here")
		}
	})
	if _, err := f.m.CreateSession(ctx, CreateSessionRequest{ID: "s1", Owner: "writer"}); err != nil {
		t.Fatalf("session record refused: %v", err)
	}
	if _, err := f.m.Write(ctx, WriteRequest{Path: "memory/sessions/s1/session.md", Content: "owner: me\n", Mode: WriteReplace, Writer: "writer"}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a principal's write of the record: %v", err)
	}
	if len(asked) != 1 {
		t.Fatalf("Authorize asked for %v", asked)
	}
}

func TestPromote(t *testing.T) {
	ctx := context.Background()
	f, clk := newSessionFixture(t, map[string]string{
		"memory/roles/code-expert/notes.md": "# Notes\n",
	}, nil)
	if _, err := f.m.CreateSession(ctx, CreateSessionRequest{ID: "s1", Owner: "code-expert"}); err != nil {
		t.Fatal(err)
	}
	ctxFile := "memory/sessions/s1/context.md"
	f.write(t, WriteRequest{Path: ctxFile, Content: "---\ntype: session\n---\n# 上下文\n\nline five: keep the pool at 32\nline six: 连接池保持 32\nline seven: scratch\n", Mode: WriteReplace, Writer: "code-expert"})

	// A line range into the owner's role layer.
	// Lines: 1 "---", 2 type, 3 "---", 4 heading, 5 empty, 6 five, 7 six, 8 seven.
	r1, err := f.m.Promote(ctx, PromoteRequest{Session: "s1", Path: "context.md", Lines: "7-8", To: PromoteToRole})
	if err != nil {
		t.Fatal(err)
	}
	wantPath := "memory/roles/code-expert/promoted-2026-11-29.md"
	if r1.Path != wantPath || r1.Already || r1.Lines != "7-8" || r1.Source != ctxFile {
		t.Fatalf("promote = %+v", r1)
	}
	got := f.read(t, wantPath)
	if !strings.Contains(got, "> promoted from sessions/s1/context.md at 2026-11-29T08:00:00Z (lines 7-8, by admin)") ||
		!strings.Contains(got, "line six: 连接池保持 32\nline seven: scratch") || strings.Contains(got, "line five") {
		t.Fatalf("promoted note:\n%s", got)
	}
	// Searchable in the role layer at once.
	found := false
	for _, r := range f.search(t, "连接池保持") {
		found = found || (r.Path == wantPath && r.Layer == LayerRole && r.Role == "code-expert")
	}
	if !found {
		t.Fatal("promoted text not searchable in the role layer")
	}
	// Repeating it writes nothing.
	r2, err := f.m.Promote(ctx, PromoteRequest{Session: "s1", Path: ctxFile, Lines: "7-8", To: PromoteToRole})
	if err != nil || !r2.Already || r2.Path != wantPath {
		t.Fatalf("repeat = %+v %v", r2, err)
	}
	if f.read(t, wantPath) != got {
		t.Fatal("a repeated promote changed the note")
	}
	// The whole file into global memory (without its front matter), later.
	clk.advance(2 * time.Hour)
	r3, err := f.m.Promote(ctx, PromoteRequest{Session: "s1", Path: "context.md", To: PromoteToGlobal})
	if err != nil || r3.Path != "memory/global/promoted-2026-11-29.md" || r3.Lines != "" {
		t.Fatalf("whole file = %+v %v", r3, err)
	}
	g := f.read(t, r3.Path)
	if !strings.Contains(g, "> promoted from sessions/s1/context.md at 2026-11-29T10:00:00Z (by admin)") || strings.Contains(g, "type: session") || !strings.Contains(g, "line five") {
		t.Fatalf("global note:\n%s", g)
	}
	// The record lists both.
	list, err := f.m.ListSessions(ctx, false)
	if err != nil || len(list) != 1 || len(list[0].Promoted) != 2 {
		t.Fatalf("record %+v %v", list, err)
	}
	p := list[0].Promoted
	if p[0].File != "context.md" || p[0].Lines != "7-8" || p[0].To != wantPath || p[1].To != r3.Path || p[1].Lines != "" {
		t.Fatalf("promoted %+v", p)
	}
	if rec := f.read(t, "memory/sessions/s1/session.md"); !strings.Contains(rec, "owner: code-expert") || !strings.Contains(rec, "# Session s1") {
		t.Fatalf("record lost its keys or body:\n%s", rec)
	}
	// Changed text of the same lines is a new promotion.
	f.write(t, WriteRequest{Path: ctxFile, Content: "---\ntype: session\n---\n# 上下文\n\nline five: keep the pool at 32\nline six: 连接池改为 64\nline seven: scratch\n", Mode: WriteReplace, Writer: "code-expert"})
	if r4, err := f.m.Promote(ctx, PromoteRequest{Session: "s1", Path: "context.md", Lines: "7-8", To: PromoteToRole}); err != nil || r4.Already {
		t.Fatalf("changed lines = %+v %v", r4, err)
	}

	for _, tc := range []struct {
		r    PromoteRequest
		want error
	}{
		{PromoteRequest{Session: "s1", Path: "context.md", To: "team"}, ErrInvalidInput},
		{PromoteRequest{Session: "s1", Path: "context.md", Lines: "9-3", To: PromoteToRole}, ErrInvalidInput},
		{PromoteRequest{Session: "s1", Path: "context.md", Lines: "x", To: PromoteToRole}, ErrInvalidInput},
		{PromoteRequest{Session: "s1", Path: "context.md", Lines: "400-500", To: PromoteToRole}, ErrInvalidInput},
		{PromoteRequest{Session: "s1", Path: "context.md", Lines: "5", To: PromoteToRole}, ErrInvalidInput}, // an empty line
		{PromoteRequest{Session: "s1", Path: "missing.md", To: PromoteToRole}, ErrNotFound},
		{PromoteRequest{Session: "s1", Path: "../../global/x.md", To: PromoteToRole}, ErrInvalidPath},
		{PromoteRequest{Session: "s1", Path: "temp-state.json", To: PromoteToRole}, ErrInvalidPath},
		{PromoteRequest{Session: "nope", Path: "context.md", To: PromoteToRole}, ErrNotFound},
		{PromoteRequest{Session: "..", Path: "context.md", To: PromoteToRole}, ErrInvalidInput},
		{PromoteRequest{Session: "s1", Path: "context.md", To: PromoteToRole, Role: "admin"}, ErrInvalidInput},
		// A role that may not read the session file.
		{PromoteRequest{Session: "s1", Path: "context.md", To: PromoteToRole, Role: "writer", Writer: "writer"}, ErrForbidden},
	} {
		if _, err := f.m.Promote(ctx, tc.r); !errors.Is(err, tc.want) {
			t.Errorf("Promote(%+v) = %v, want %v", tc.r, err, tc.want)
		}
	}
	// The owner may promote its own session's items.
	if _, err := f.m.Promote(ctx, PromoteRequest{Session: "s1", Path: "context.md", Lines: "6", To: PromoteToRole, Writer: "code-expert"}); err != nil {
		t.Fatalf("owner promote: %v", err)
	}
}

func TestFrontMatter(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		ok         bool
		line       int // error line; 0 = no error
		check      func(t *testing.T, fm FrontMatter, body string)
	}{
		{name: "none", text: "# Title\n\ntext\n"},
		{name: "full", text: "---\ntype: role\nrole: 写作者\ndescription: 写技术文章\ntags: [decision, 项目]\ncapabilities: writing, 翻译\ncreated: 2026-02-11T14:30:22Z\nttl: 3600\n---\n# Body\n", ok: true,
			check: func(t *testing.T, fm FrontMatter, body string) {
				if fm.Type != "role" || fm.Role != "写作者" || fm.Description != "写技术文章" || len(fm.Tags) != 2 || fm.Tags[1] != "项目" ||
					len(fm.Capabilities) != 2 || fm.Capabilities[1] != "翻译" || fm.TTL != 3600 || fm.Created.Hour() != 14 || body != "# Body\n" {
					t.Fatalf("%+v %q", fm, body)
				}
			}},
		{name: "crlf and date", text: "---\r\ncreated: 2026-02-11\r\n---\r\nx\r\n", ok: true,
			check: func(t *testing.T, fm FrontMatter, body string) {
				if fm.Created.Day() != 11 || body != "x\r\n" {
					t.Fatalf("%+v %q", fm, body)
				}
			}},
		{name: "empty block", text: "---\n---\nbody\n", ok: true},
		{name: "unclosed", text: "---\ntype: role\nbody\n", ok: true, line: 1},
		// The YAML library reports a syntax error at the line where the
		// enclosing construct starts.
		{name: "yaml syntax", text: "---\ntype: role\ntags: [a, b\n---\n", ok: true, line: 2},
		{name: "not a mapping", text: "---\n- a\n- b\n---\n", ok: true, line: 2},
		{name: "bad ttl", text: "---\ntype: session\nttl: soon\n---\n", ok: true, line: 3},
		{name: "bad created", text: "---\ncreated: yesterday\n---\n", ok: true, line: 2},
		{name: "tags map", text: "---\ntags: {a: 1}\n---\n", ok: true, line: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm, body, _, ok, err := ParseFrontMatter(tc.text)
			if ok != tc.ok {
				t.Fatalf("ok = %v", ok)
			}
			if tc.line == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if tc.check != nil {
					tc.check(t, fm, body)
				}
				return
			}
			var fe *FrontMatterError
			if !errors.As(err, &fe) || !errors.Is(err, ErrFrontMatter) || fe.Line != tc.line || fe.Reason == "" {
				t.Fatalf("err = %v (%+v), want line %d", err, fe, tc.line)
			}
			if body != tc.text {
				t.Fatal("body of a malformed block is not the whole text")
			}
		})
	}
}

// TestMalformedFrontMatterStillIndexed: a file whose front matter does not
// parse is indexed and searched as text, and reported where front matter
// is read (roles).
func TestMalformedFrontMatterStillIndexed(t *testing.T) {
	f, _ := newSessionFixture(t, map[string]string{
		"memory/roles/writer/config.md": "---\ndescription: [unclosed\n---\n# Writer\n\nquokkaverse prose style\n",
	}, nil)
	if !hasPath(f.search(t, "quokkaverse prose"), "memory/roles/writer/config.md") {
		t.Fatal("file with malformed front matter not searchable")
	}
	roles, err := f.m.ListRoles(context.Background())
	// main (always listed) and writer, listed with the reason.
	if err != nil || len(roles) != 2 || roles[1].Role != "writer" || !strings.Contains(roles[1].Error, "front matter line 2") {
		t.Fatalf("roles %+v %v", roles, err)
	}
}

// TestRunArchivesExpiredSessions: Run's sweep archives a session once the
// injected clock passes its ttl (at start, and on its ticker).
func TestRunArchivesExpiredSessions(t *testing.T) {
	f, clk := newSessionFixture(t, nil, func(o *Options) {
		o.DisableWatcher = true
		o.SessionSweep = 20 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, id := range []string{"early", "later"} {
		if _, err := f.m.CreateSession(ctx, CreateSessionRequest{ID: id, Owner: "main", TTL: 60}); err != nil {
			t.Fatal(err)
		}
		if id == "early" {
			clk.advance(time.Minute) // "early" is expired when Run starts
		}
	}
	done := make(chan error, 1)
	go func() { done <- f.m.Run(ctx) }()
	archived := func(id string) bool {
		_, err := os.Stat(filepath.Join(f.ws, "memory", "archive", "sessions", id, SessionRecordName))
		return err == nil
	}
	deadline := time.Now().Add(20 * time.Second)
	for !archived("early") {
		if time.Now().After(deadline) {
			t.Fatal("Run did not archive the expired session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if archived("later") {
		t.Fatal("a live session was archived")
	}
	clk.advance(time.Minute)
	for !archived("later") {
		if time.Now().After(deadline) {
			t.Fatal("Run's sweep did not archive the session that expired later")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
}
