package collab

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/versions"
	"github.com/atrium-dev/atrium/backend/statedb"
)

// testRules are SPEC §5.1's example rules for the seed's three roles, plus
// a file code-expert may collaborate on that the writer may not read
// (plan.md) and one only code-expert may collaborate on (notes.md).
const testRules = `version: "1.0"
rules:
  global/**:                       {read: ["*"], write: [admin, main]}
  roles/code-expert/*:             {read: [code-expert, admin, main], write: [code-expert, admin]}
  roles/code-expert/experience.md: {read: [code-expert, writer, admin], write: [code-expert], collaborate: [code-expert, writer]}
  roles/code-expert/plan.md:       {read: [code-expert, admin], write: [code-expert], collaborate: [code-expert, writer]}
  roles/code-expert/notes.md:      {read: [code-expert, writer, admin], write: [code-expert], collaborate: [code-expert]}
  roles/writer/*:                  {read: [writer, admin], write: [writer, admin]}
  roles/writer/style-guide.md:     {read: [writer, code-expert, admin], write: [writer, admin], collaborate: [writer, code-expert]}
  roles/analyst/*:                 {read: [analyst, admin], write: [analyst, admin]}
`

var testFiles = map[string]string{
	"memory/.acl":                            testRules,
	"memory/global/project-status.md":        "# Project status\n\nThe calculator project lives in /srv/calc.\n",
	"memory/roles/code-expert/config.md":     "---\nrole: code-expert\ndescription: code expert\ncapabilities: [code, 代码]\n---\n# code-expert\n",
	"memory/roles/code-expert/experience.md": "# Experience\n\nLoop unrolling made the calculator thirty percent faster.\n",
	"memory/roles/code-expert/perf-tips.md":  "# Perf tips\n\nPrivate tip, codeword zebrafinch: pin the pool to 32.\n",
	"memory/roles/code-expert/plan.md":       "# Plan\n\nUnannounced plan, codeword marmotfig.\n",
	"memory/roles/code-expert/notes.md":      "# Notes\n\nCode-expert's notes on the parser.\n",
	"memory/roles/writer/config.md":          "---\nrole: writer\ndescription: writer\ncapabilities: [write, 写作]\n---\n# writer\n",
	"memory/roles/writer/style-guide.md":     "# Style guide\n\nShort sentences. Active voice.\n",
	"memory/roles/writer/draft.md":           "# Draft\n\nUnpublished draft, codeword mandarinfox.\n",
	"memory/roles/analyst/config.md":         "---\nrole: analyst\ndescription: analyst\ncapabilities: [data, 数据]\n---\n# analyst\n",
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// env is a real stack: workspace, state.db, version store, ACL holder,
// audit log, guard, memory engine and the collaboration service.
type env struct {
	t     *testing.T
	dir   string
	ws    string
	clock *clock
	db    *sql.DB
	al    *audit.Log
	g     *guard.Guard
	mem   *memory.Manager
	svc   *Service
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, ws: filepath.Join(dir, "ws"), clock: &clock{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}}
	for rel, text := range testFiles {
		p := filepath.Join(e.ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.open()
	t.Cleanup(e.close)
	return e
}

// open builds the stack on e's folders (again after close: a restart).
func (e *env) open() {
	t := e.t
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	if e.db, err = statedb.Open(filepath.Join(e.dir, "state.db")); err != nil {
		t.Fatal(err)
	}
	ws, _ := filepath.Abs(e.ws)
	vs, err := versions.Open(e.db, versions.Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	h := acl.NewHolder(acl.HolderOptions{Logger: log})
	if err := h.Load(filepath.Join(e.ws, "memory", ".acl")); err != nil {
		t.Fatal(err)
	}
	if e.al, err = audit.New(audit.Options{Dir: filepath.Join(e.dir, "audit"), Logger: log}); err != nil {
		t.Fatal(err)
	}
	if e.g, err = guard.New(guard.Options{Workspace: e.ws, ACL: h, Audit: e.al, Logger: log}); err != nil {
		t.Fatal(err)
	}
	if e.mem, err = memory.Open(memory.Options{Workspace: e.ws, IndexDir: filepath.Join(e.dir, "index"), Versions: vs,
		Authorize: e.g.Authorize, ACL: h.Policy, Logger: log, DisableWatcher: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.mem.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.svc, err = New(context.Background(), Options{DB: e.db, Guard: e.g, Memory: e.mem, Now: e.clock.Now, Logger: log}); err != nil {
		t.Fatal(err)
	}
}

func (e *env) close() {
	if e.mem != nil {
		e.mem.Close()
		e.mem = nil
	}
	if e.db != nil {
		e.db.Close()
		e.db = nil
	}
}

func (e *env) newest() audit.Entry {
	e.t.Helper()
	es, err := e.al.Tail(1, audit.Filter{})
	if err != nil || len(es) != 1 {
		e.t.Fatalf("audit tail: %v %v", es, err)
	}
	return es[0]
}

func (e *env) read(rel string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.ws, filepath.FromSlash(rel)))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

var (
	codeExpert = acl.Principal{Role: "code-expert"}
	writer     = acl.Principal{Role: "writer"}
	analyst    = acl.Principal{Role: "analyst"}
)

const (
	experience = "memory/roles/code-expert/experience.md"
	styleGuide = "memory/roles/writer/style-guide.md"
	planFile   = "memory/roles/code-expert/plan.md"
	notesFile  = "memory/roles/code-expert/notes.md"
	status     = "memory/global/project-status.md"
)

func (e *env) request(ttl int, ctxFiles ...string) Requested {
	e.t.Helper()
	r, err := e.svc.Request(context.Background(), codeExpert, Request{To: "writer", Task: "把这次优化写成博客文章 / turn the optimisation into a blog post", Context: ctxFiles, TTL: ttl})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func TestHappyPath(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	req := e.request(0, experience, styleGuide)
	if !idPattern.MatchString(req.ID) || len(req.Token) < 40 || req.Collaboration.Status != StatusPending {
		t.Fatalf("request: %+v", req)
	}
	if got := req.Collaboration.ExpiresAt.Sub(req.Collaboration.CreatedAt); got != DefaultTTL {
		t.Errorf("default ttl %v", got)
	}
	if a := e.newest(); a.Operation != OpView || a.Result != audit.Allowed || a.Role != "code-expert" {
		t.Errorf("request's view audit %+v", a)
	}
	// Only the token's hash is stored.
	var stored string
	if err := e.db.QueryRow(`SELECT token_hash FROM collab_collaborations WHERE id = ?`, req.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored == req.Token || stored != hashToken(req.Token) {
		t.Errorf("stored token %q", stored)
	}
	if len(req.Shared.Context) != 2 || req.Shared.Withheld != 0 || !strings.Contains(req.Shared.Context[0].Text, "Loop unrolling") {
		t.Errorf("shared context %+v", req.Shared.Context)
	}

	acc, err := e.svc.Accept(ctx, writer, req.ID, req.Token)
	if err != nil || acc.Collaboration.Status != StatusAccepted || acc.Collaboration.AcceptedAt.IsZero() {
		t.Fatalf("accept: %+v %v", acc, err)
	}
	// The writer may not write experience.md on its own ...
	if _, err := e.mem.Write(guard.WithPrincipal(ctx, writer), memory.WriteRequest{Path: experience, Content: "direct", Mode: memory.WriteAppend, Writer: "writer"}); !errors.Is(err, memory.ErrForbidden) {
		t.Fatalf("writer's direct write of experience.md: %v", err)
	}
	// ... but through the accepted collaboration (both hold collaborate).
	wr, err := e.svc.Write(ctx, writer, req.ID, req.Token, WriteRequest{Path: experience, Content: "Writer: the blog post links here.", Mode: memory.WriteAppend})
	if err != nil || wr.Version == "" {
		t.Fatalf("collab write: %+v %v", wr, err)
	}
	if a := e.newest(); a.Operation != OpWrite || a.Result != audit.Allowed || a.Role != "writer" || a.Target != "roles/code-expert/experience.md" {
		t.Errorf("collab write audit %+v", a)
	}
	if !strings.Contains(e.read(experience), "the blog post links here") {
		t.Error("collab write not on disk")
	}

	done, err := e.svc.Complete(ctx, writer, req.ID, req.Token, Result{Output: "Blog post: how loop unrolling made the calculator faster.", Importance: 0.8, Artifacts: []string{"memory/roles/writer/articles/loop-unrolling.md"}})
	if err != nil || !done.Summary || done.Collaboration.Status != StatusCompleted || done.Collaboration.SummaryPath != status || done.Collaboration.SummaryVersion == "" {
		t.Fatalf("complete: %+v %v", done, err)
	}
	st := e.read(status)
	if !strings.Contains(st, "Collaboration code-expert → writer") || !strings.Contains(st, req.ID) || !strings.Contains(st, "loop-unrolling.md") || !strings.Contains(st, "/srv/calc") {
		t.Errorf("project-status.md after the summary:\n%s", st)
	}
	// The summary is indexed and readable by every role.
	res, err := e.mem.Search(ctx, memory.SearchOptions{Query: "loop unrolling blog post", Readable: func(p string) bool { return e.g.Readable(analyst, p) }})
	if err != nil || len(res.Results) == 0 || res.Results[0].Path != status {
		t.Errorf("analyst search for the summary: %+v %v", res, err)
	}
	list, err := e.svc.List(ctx, codeExpert, ListFilter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	var actions []string
	for _, ev := range list[0].History {
		actions = append(actions, ev.Role+":"+ev.Action)
	}
	if want := []string{"code-expert:request", "writer:accept", "writer:write", "writer:complete", "writer:summary"}; !slices.Equal(actions, want) {
		t.Errorf("history %v, want %v", actions, want)
	}
	if list[0].Result == nil || list[0].Result.Importance != 0.8 || list[0].CompletedBy != "writer" {
		t.Errorf("listed result %+v", list[0])
	}
	if a := e.newest(); a.Operation != OpList || a.Result != audit.Allowed {
		t.Errorf("list audit %+v", a)
	}
	// Roles see only their collaborations; admin all; devices none.
	if l, err := e.svc.List(ctx, analyst, ListFilter{}); err != nil || len(l) != 0 {
		t.Errorf("analyst's list: %+v %v", l, err)
	}
	if l, err := e.svc.List(ctx, acl.Principal{Admin: true}, ListFilter{}); err != nil || len(l) != 1 {
		t.Errorf("admin's list: %+v %v", l, err)
	}
	if _, err := e.svc.List(ctx, acl.Principal{Authenticated: true}, ListFilter{}); !errors.Is(err, ErrForbidden) {
		t.Errorf("device list: %v", err)
	}
}

func TestPersistsAcrossRestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	req := e.request(600, experience)
	if _, err := e.svc.Accept(ctx, writer, req.ID, req.Token); err != nil {
		t.Fatal(err)
	}
	e.close()
	e.open()
	list, err := e.svc.List(ctx, writer, ListFilter{})
	if err != nil || len(list) != 1 || list[0].ID != req.ID || list[0].Status != StatusAccepted || len(list[0].History) != 2 ||
		!slices.Equal(list[0].Context, []string{experience}) || list[0].Task != req.Collaboration.Task {
		t.Fatalf("after restart: %+v %v", list, err)
	}
	// The token still works after the restart; a second accept does not.
	if _, err := e.svc.Accept(ctx, writer, req.ID, req.Token); !errors.Is(err, ErrState) {
		t.Errorf("accept again after restart: %v", err)
	}
	if _, err := e.svc.Complete(ctx, writer, req.ID, req.Token, Result{Output: "done", Importance: 0.2}); err != nil {
		t.Fatal(err)
	}
	e.close()
	e.open()
	if list, err := e.svc.List(ctx, acl.Principal{Admin: true}, ListFilter{Status: StatusCompleted}); err != nil || len(list) != 1 || list[0].Result == nil || list[0].Result.Output != "done" {
		t.Errorf("completed after restart: %+v %v", list, err)
	}
}

func TestAdversarial(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pending := e.request(600, experience, notesFile)
	accepted := e.request(600, experience, notesFile)
	// writer lacks collaborate on notes.md: only the person accepts.
	if _, err := e.svc.Accept(ctx, writer, accepted.ID, accepted.Token); !errors.Is(err, ErrForbidden) {
		t.Fatalf("accept by writer without collaborate on notes.md: %v, want ErrForbidden", err)
	}
	if _, err := e.svc.Decide(ctx, acl.Principal{Admin: true}, accepted.ID, DecisionAccept, ""); err != nil {
		t.Fatal(err)
	}
	completed := e.request(600, experience)
	if _, err := e.svc.Accept(ctx, writer, completed.ID, completed.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Complete(ctx, writer, completed.ID, completed.Token, Result{Output: "ok", Importance: 0.1}); err != nil {
		t.Fatal(err)
	}
	expiring := e.request(60, experience)
	expiringAcc := e.request(60, experience)
	if _, err := e.svc.Accept(ctx, writer, expiringAcc.ID, expiringAcc.Token); err != nil {
		t.Fatal(err)
	}
	forged := "c-" + strings.Repeat("ab", 16)
	res := Result{Output: "x", Importance: 0.9}
	wreq := WriteRequest{Path: experience, Content: "pwned", Mode: memory.WriteAppend}
	type attempt struct {
		name string
		call func() error
		want error
		op   string
	}
	req := func(who acl.Principal, r Request) func() error {
		return func() error { _, err := e.svc.Request(ctx, who, r); return err }
	}
	accept := func(who acl.Principal, id, tok string) func() error {
		return func() error { _, err := e.svc.Accept(ctx, who, id, tok); return err }
	}
	complete := func(who acl.Principal, id, tok string, r Result) func() error {
		return func() error { _, err := e.svc.Complete(ctx, who, id, tok, r); return err }
	}
	write := func(who acl.Principal, id, tok string, w WriteRequest) func() error {
		return func() error { _, err := e.svc.Write(ctx, who, id, tok, w); return err }
	}
	view := func(who acl.Principal, id, tok string) func() error {
		return func() error { _, err := e.svc.View(ctx, who, id, tok, "loop", 0); return err }
	}
	attempts := []attempt{
		{"request without collaborate on a file", req(codeExpert, Request{To: "writer", Task: "t", Context: []string{experience, "memory/roles/code-expert/perf-tips.md"}}), ErrForbidden, OpRequest},
		{"request on another role's file", req(analyst, Request{To: "writer", Task: "t", Context: []string{experience}}), ErrForbidden, OpRequest},
		{"request for another role", req(analyst, Request{From: "code-expert", To: "writer", Task: "t", Context: []string{experience}}), ErrForbidden, OpRequest},
		{"request as admin", req(acl.Principal{Admin: true}, Request{From: "code-expert", To: "writer", Task: "t", Context: []string{experience}}), ErrForbidden, OpRequest},
		{"request as a device", req(acl.Principal{Authenticated: true}, Request{To: "writer", Task: "t", Context: []string{experience}}), ErrForbidden, OpRequest},
		{"request without context", req(codeExpert, Request{To: "writer", Task: "t"}), ErrInvalidInput, OpRequest},
		{"request with a path trick", req(codeExpert, Request{To: "writer", Task: "t", Context: []string{"memory/roles/writer/../code-expert/experience.md"}}), ErrInvalidInput, OpRequest},
		{"request to an unknown role", req(codeExpert, Request{To: "nobody", Task: "t", Context: []string{experience}}), ErrNotFound, OpRequest},
		{"request to itself", req(codeExpert, Request{To: "code-expert", Task: "t", Context: []string{experience}}), ErrInvalidInput, OpRequest},
		{"request with a huge ttl", req(codeExpert, Request{To: "writer", Task: "t", Context: []string{experience}, TTL: 365 * 86400}), ErrInvalidInput, OpRequest},
		{"request with an empty task", req(codeExpert, Request{To: "writer", Task: "  ", Context: []string{experience}}), ErrInvalidInput, OpRequest},
		{"forged collabId", accept(writer, forged, pending.Token), ErrNotFound, OpAccept},
		{"malformed collabId", accept(writer, "../"+pending.ID, pending.Token), ErrNotFound, OpAccept},
		{"wrong token", accept(writer, pending.ID, accepted.Token), ErrForbidden, OpAccept},
		{"empty token", accept(writer, pending.ID, ""), ErrForbidden, OpAccept},
		{"accept by the requester", accept(codeExpert, pending.ID, pending.Token), ErrForbidden, OpAccept},
		{"accept by a third role", accept(analyst, pending.ID, pending.Token), ErrForbidden, OpAccept},
		{"complete before accept", complete(writer, pending.ID, pending.Token, res), ErrState, OpComplete},
		{"write before accept", write(writer, pending.ID, pending.Token, wreq), ErrState, OpWrite},
		{"accept twice", accept(writer, accepted.ID, accepted.Token), ErrState, OpAccept},
		{"complete by a third role", complete(analyst, accepted.ID, accepted.Token, res), ErrForbidden, OpComplete},
		{"complete with the wrong token", complete(writer, accepted.ID, pending.Token, res), ErrForbidden, OpComplete},
		{"complete with importance above 1", complete(writer, accepted.ID, accepted.Token, Result{Output: "x", Importance: 1.5}), ErrInvalidInput, OpComplete},
		{"complete without output", complete(writer, accepted.ID, accepted.Token, Result{Importance: 0.9}), ErrInvalidInput, OpComplete},
		{"write by a third role", write(analyst, accepted.ID, accepted.Token, wreq), ErrForbidden, OpWrite},
		{"write a file outside the context", write(writer, accepted.ID, accepted.Token, WriteRequest{Path: "memory/roles/code-expert/perf-tips.md", Content: "pwned", Mode: memory.WriteAppend}), ErrInvalidInput, OpWrite},
		{"write a file only one side may collaborate on", write(writer, accepted.ID, accepted.Token, WriteRequest{Path: notesFile, Content: "pwned", Mode: memory.WriteAppend}), ErrForbidden, OpWrite},
		{"write with a path trick", write(writer, accepted.ID, accepted.Token, WriteRequest{Path: "memory/roles/writer/../code-expert/experience.md", Content: "pwned", Mode: memory.WriteAppend}), ErrInvalidInput, OpWrite},
		{"token reused: complete again", complete(writer, completed.ID, completed.Token, res), ErrState, OpComplete},
		{"token reused: accept", accept(writer, completed.ID, completed.Token), ErrState, OpAccept},
		{"token reused: write", write(writer, completed.ID, completed.Token, wreq), ErrState, OpWrite},
		{"token reused: view", view(writer, completed.ID, completed.Token), ErrState, OpView},
		{"view by a third role", view(analyst, accepted.ID, accepted.Token), ErrForbidden, OpView},
	}
	run := func(tc attempt) {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			a := e.newest()
			if a.Result != audit.Denied || a.Operation != tc.op || a.Reason == "" {
				t.Errorf("audit %+v, want denied %s", a, tc.op)
			}
		})
	}
	for _, tc := range attempts {
		run(tc)
	}
	// Expiry: 61 s later the 60 s collaborations refuse everything.
	e.clock.Add(61 * time.Second)
	for _, tc := range []attempt{
		{"expired token: accept", accept(writer, expiring.ID, expiring.Token), ErrExpired, OpAccept},
		{"expired token: complete", complete(writer, expiringAcc.ID, expiringAcc.Token, res), ErrExpired, OpComplete},
		{"expired token: write", write(writer, expiringAcc.ID, expiringAcc.Token, wreq), ErrExpired, OpWrite},
	} {
		run(tc)
	}
	if l, err := e.svc.List(ctx, writer, ListFilter{Status: StatusExpired}); err != nil || len(l) != 2 {
		t.Errorf("expired list: %d %v", len(l), err)
	}
	// Nothing was written: no "pwned", and the 0.9 results wrote no summary.
	for _, p := range []string{experience, notesFile, "memory/roles/code-expert/perf-tips.md"} {
		if strings.Contains(e.read(p), "pwned") {
			t.Errorf("%s was written", p)
		}
	}
	if got := e.read(status); got != testFiles[status] {
		t.Errorf("project-status.md changed:\n%s", got)
	}
}

func TestSharedViewOnlyBoth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	req := e.request(0, experience, planFile, styleGuide)
	bothRead := func(p string) bool { return e.g.Readable(codeExpert, p) && e.g.Readable(writer, p) }
	check := func(v View) {
		t.Helper()
		if len(v.Files) == 0 {
			t.Fatal("empty shared view")
		}
		for _, f := range v.Files {
			if !bothRead(f.Path) {
				t.Errorf("view file %s is not readable by both", f.Path)
			}
		}
		for _, c := range v.Context {
			if !bothRead(c.Path) || strings.Contains(c.Text, "marmotfig") {
				t.Errorf("view context %s is not readable by both", c.Path)
			}
		}
		for _, r := range v.Results {
			if !bothRead(r.Path) {
				t.Errorf("view result %s is not readable by both", r.Path)
			}
			for _, a := range r.AlsoIn {
				if !bothRead(a) {
					t.Errorf("view result alsoIn %s is not readable by both", a)
				}
			}
		}
	}
	check(req.Shared)
	if req.Shared.Withheld != 1 || len(req.Shared.Context) != 2 {
		t.Errorf("plan.md (writer may not read it) not withheld: %+v", req.Shared)
	}
	for _, q := range []string{"zebrafinch private tip", "mandarinfox draft", "marmotfig plan", "codeword"} {
		v, err := e.svc.View(ctx, writer, req.ID, req.Token, q, 10)
		if err != nil {
			t.Fatal(err)
		}
		check(v)
		for _, r := range v.Results {
			if strings.Contains(r.Snippet, "zebrafinch") || strings.Contains(r.Snippet, "mandarinfox") || strings.Contains(r.Snippet, "marmotfig") {
				t.Errorf("query %q: private snippet %q", q, r.Snippet)
			}
		}
		if a := e.newest(); a.Operation != OpView || a.Role != "writer" || a.Result != audit.Allowed {
			t.Errorf("view audit %+v", a)
		}
	}
	v, err := e.svc.View(ctx, codeExpert, req.ID, req.Token, "loop unrolling calculator faster", 10)
	if err != nil || len(v.Results) == 0 || v.Results[0].Path != experience {
		t.Errorf("shared search: %+v %v", v.Results, err)
	}
	check(v)
	// Each side's private files exist in the index (the view hides them).
	all, err := e.mem.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hidden := 0
	for _, f := range all {
		if !bothRead(f.Path) {
			hidden++
		}
	}
	if hidden < 4 || len(v.Files)+hidden != len(all) {
		t.Errorf("%d files, %d in the view, %d hidden", len(all), len(v.Files), hidden)
	}
}

func TestImportanceThreshold(t *testing.T) {
	for _, tc := range []struct {
		importance float64
		summary    bool
	}{{0, false}, {0.5, false}, {0.7, false}, {0.71, true}, {1, true}} {
		e := newEnv(t)
		ctx := context.Background()
		req := e.request(0, experience)
		if _, err := e.svc.Accept(ctx, writer, req.ID, req.Token); err != nil {
			t.Fatal(err)
		}
		done, err := e.svc.Complete(ctx, codeExpert, req.ID, req.Token, Result{Output: "重要结果：文章已发布", Importance: tc.importance})
		if err != nil {
			t.Fatal(err)
		}
		got := e.read(status)
		if wrote := got != testFiles[status]; wrote != tc.summary || done.Summary != tc.summary || (done.Collaboration.SummaryPath != "") != tc.summary {
			t.Errorf("importance %v: summary written %v (reported %v), want %v", tc.importance, wrote, done.Summary, tc.summary)
		}
		if tc.summary && (!strings.Contains(got, "文章已发布") || !strings.HasPrefix(got, testFiles[status])) {
			t.Errorf("importance %v: file\n%s", tc.importance, got)
		}
		if tc.summary {
			es, err := e.al.Tail(10, audit.Filter{Operation: OpSummary})
			if err != nil || len(es) != 1 || es[0].Role != "code-expert" || es[0].Target != "global/project-status.md" {
				t.Errorf("summary audit %+v %v", es, err)
			}
		}
	}
}

// TestListNewestFirstWithinOneMillisecond: collaborations created in the
// same millisecond (the test clock stands still) list in reverse order of
// creation, every time; ordering ties by their random ids made
// TestCollabOverGateway flaky.
func TestListNewestFirstWithinOneMillisecond(t *testing.T) {
	e := newEnv(t)
	var want []string
	for range 8 {
		want = append([]string{e.request(0, experience).Collaboration.ID}, want...)
	}
	got, err := e.svc.List(context.Background(), acl.Principal{Admin: true}, ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("list order %v, want newest first %v", ids, want)
	}
}
