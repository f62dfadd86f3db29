package mcpserve

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/mcpserve/mcptest"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/versions"
	"github.com/atrium-dev/atrium/backend/statedb"
)

// stack is the real memory stack: workspace, state.db, versions, the ACL
// holder, the audit log, the guard and the memory engine.
type stack struct {
	dir, ws string
	db      *sql.DB
	al      *audit.Log
	g       *guard.Guard
	mem     *memory.Manager
	local   *Local
}

func newStack(t testing.TB) *stack {
	t.Helper()
	return newStackMemory(t, nil)
}

// newStackMemory is newStack with the memory engine's options changed by
// with (when not nil) before it opens.
func newStackMemory(t testing.TB, with func(*memory.Options)) *stack {
	t.Helper()
	dir := t.TempDir()
	s := &stack{dir: dir, ws: filepath.Join(dir, "ws")}
	mcptest.Seed(t, s.ws)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	s.db, err = statedb.Open(filepath.Join(dir, "state.db"))
	must(t, err)
	t.Cleanup(func() { s.db.Close() })
	ws, _ := filepath.Abs(s.ws)
	vs, err := versions.Open(s.db, versions.Options{Workspace: ws})
	must(t, err)
	h := acl.NewHolder(acl.HolderOptions{Logger: log})
	must(t, h.Load(filepath.Join(s.ws, "memory", ".acl")))
	s.al, err = audit.New(audit.Options{Dir: filepath.Join(dir, "audit"), Logger: log})
	must(t, err)
	s.g, err = guard.New(guard.Options{Workspace: s.ws, ACL: h, Audit: s.al, Logger: log})
	must(t, err)
	mo := memory.Options{Workspace: s.ws, IndexDir: filepath.Join(dir, "index"), Versions: vs,
		Authorize: s.g.Authorize, Readable: s.g.ReadableFrom, ACL: h.Policy, Logger: log, DisableWatcher: true}
	if with != nil {
		with(&mo)
	}
	s.mem, err = memory.Open(mo)
	must(t, err)
	t.Cleanup(func() { s.mem.Close() })
	must(t, s.mem.Sync(context.Background()))
	s.local, err = NewLocal(LocalOptions{Sync: true, Acquire: func(context.Context) (Engine, error) {
		return Engine{Memory: s.mem, Guard: s.g}, nil
	}})
	must(t, err)
	return s
}

// connect runs a Server as role over in-memory transports and returns
// the SDK client's session (closed when the test ends).
func (s *stack) connect(t *testing.T, role string, copts *mcp.ClientOptions) (*Server, *mcp.ClientSession) {
	t.Helper()
	srv, err := New(Options{Memory: s.local, Role: role, Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	must(t, err)
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	ss, err := srv.MCP().Connect(ctx, st, nil)
	must(t, err)
	t.Cleanup(func() { ss.Close() })
	cl := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, copts)
	cs, err := cl.Connect(ctx, ct, nil)
	must(t, err)
	t.Cleanup(func() { cs.Close() })
	return srv, cs
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func memWrite(path, text string) memory.WriteRequest {
	return memory.WriteRequest{Path: path, Content: text, Mode: memory.WriteAppend}
}
