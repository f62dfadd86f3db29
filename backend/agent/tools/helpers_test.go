package tools

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/versions"
	"github.com/atrium-dev/atrium/backend/statedb"
)

// testFiles is the workspace: no .acl, so the defaults apply
// (roles/<r>/** belongs to <r> and admin; global/** is readable by all).
var testFiles = map[string]string{
	"memory/global/project-status.md":        "# Project status\n\nThe calculator project ships on Friday.\n",
	"memory/roles/code-expert/notes.md":      "# Notes\n\nThe parser needs a rewrite.\n",
	"memory/roles/writer/private.md":         "# Private\n\nThe writer's secret codeword is marmotfig.\n",
	"memory/roles/writer/style-guide.md":     "# Style\n\nShort sentences.\n",
	"notes/todo.txt":                         "line one\nline two\nline three\n",
	".git/config":                            "[core]\n",
	"memory/templates/role-template.md":      "# {{ROLE_NAME}}\n",
	"memory/roles/code-expert/2026-05-01.md": "- 09:00:00 started\n",
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// env is a real stack: workspace, state.db, versions, ACL holder, audit
// log, guard, memory engine, and a registry with the tools of role
// code-expert.
type testEnv struct {
	t       *testing.T
	dir     string
	ws      string
	outside string // a folder outside the workspace
	clock   *clock
	al      *audit.Log
	g       *guard.Guard
	mem     *memory.Manager
	reg     *agent.Registry
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newTestEnv(t *testing.T, o Options) *testEnv {
	t.Helper()
	return newTestEnvMemory(t, o, nil)
}

// newTestEnvMemory is newTestEnv with the memory engine's options changed
// by with (when not nil) before it opens.
func newTestEnvMemory(t *testing.T, o Options, with func(*memory.Options)) *testEnv {
	t.Helper()
	dir := t.TempDir()
	e := &testEnv{t: t, dir: dir, ws: filepath.Join(dir, "ws"), outside: filepath.Join(dir, "outside"),
		clock: &clock{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}}
	for rel, text := range testFiles {
		writeFile(t, filepath.Join(e.ws, filepath.FromSlash(rel)), text)
	}
	writeFile(t, filepath.Join(e.outside, "secret.txt"), "outside secret\n")
	log := quiet()
	db, err := statedb.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ws, _ := filepath.Abs(e.ws)
	vs, err := versions.Open(db, versions.Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	h := acl.NewHolder(acl.HolderOptions{Logger: log})
	if err := h.Load(filepath.Join(e.ws, "memory", ".acl")); err != nil {
		t.Fatal(err)
	}
	if e.al, err = audit.New(audit.Options{Dir: filepath.Join(dir, "audit"), Logger: log}); err != nil {
		t.Fatal(err)
	}
	if e.g, err = guard.New(guard.Options{Workspace: e.ws, ACL: h, Audit: e.al, Logger: log}); err != nil {
		t.Fatal(err)
	}
	mo := memory.Options{Workspace: e.ws, IndexDir: filepath.Join(dir, "index"), Versions: vs,
		Authorize: e.g.Authorize, ACL: h.Policy, Logger: log, DisableWatcher: true, Now: e.clock.Now}
	if with != nil {
		with(&mo)
	}
	if e.mem, err = memory.Open(mo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.mem.Close() })
	if err := e.mem.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	o.Guard, o.Memory, o.Logger, o.Now = e.g, e.mem, log, e.clock.Now
	if o.Principal.Role == "" {
		o.Principal = acl.Principal{Role: "code-expert", Session: "s-1"}
	}
	e.reg = agent.NewRegistry()
	if err := Register(e.reg, o); err != nil {
		t.Fatal(err)
	}
	return e
}

func writeFile(t *testing.T, p, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// call invokes a tool directly (no permission check: the loop does that).
func (e *testEnv) call(tool string, args any) agent.Result {
	e.t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.reg.Invoke(context.Background(), agent.Call{ID: "c", Tool: tool, Args: b}, nil)
}

// newest returns the last audit entry.
func (e *testEnv) newest() audit.Entry {
	e.t.Helper()
	es, err := e.al.Tail(1, audit.Filter{})
	if err != nil || len(es) != 1 {
		e.t.Fatalf("audit tail: %v %v", es, err)
	}
	return es[0]
}

func (e *testEnv) audits(f audit.Filter) []audit.Entry {
	e.t.Helper()
	es, err := e.al.Tail(1000, f)
	if err != nil {
		e.t.Fatal(err)
	}
	return es
}

func dataOf[T any](t *testing.T, r agent.Result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Data, &v); err != nil {
		t.Fatalf("data %s: %v", r.Data, err)
	}
	return v
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
