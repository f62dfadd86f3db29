package guard

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/memory"
)

// newGuard builds a guard over a real workspace (defaults: no .acl) and a
// real audit folder.
func newGuard(t *testing.T, owners acl.SessionOwners) (*Guard, string, *audit.Log) {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for _, rel := range []string{"memory/roles/code-expert/tips.md", "memory/roles/writer/notes.md", "memory/global/项目.md", "memory/sessions/s1/context.md"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, rel), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := acl.NewHolder(acl.HolderOptions{Logger: log})
	if err := h.Load(filepath.Join(ws, "memory", ".acl")); err != nil {
		t.Fatal(err)
	}
	al, err := audit.New(audit.Options{Dir: filepath.Join(dir, "audit"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Options{Workspace: ws, ACL: h, Audit: al, Owners: owners, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return g, ws, al
}

func newest(t *testing.T, al *audit.Log) audit.Entry {
	t.Helper()
	e, err := al.Tail(1, audit.Filter{})
	if err != nil || len(e) != 1 {
		t.Fatalf("audit tail: %v %v", e, err)
	}
	return e[0]
}

func TestCheck(t *testing.T) {
	g, _, al := newGuard(t, acl.OwnerMap{"s1": "writer"})
	writer := acl.Principal{Role: "writer", Session: "chat-7"}
	for _, tc := range []struct {
		name   string
		who    acl.Principal
		action acl.Action
		path   string
		want   error // nil, memory.ErrForbidden or memory.ErrInvalidPath
		target string
	}{
		{"own folder", writer, acl.Read, "memory/roles/writer/notes.md", nil, "roles/writer/notes.md"},
		{"other role's folder", writer, acl.Read, "memory/roles/code-expert/tips.md", memory.ErrForbidden, "roles/code-expert/tips.md"},
		{"other role's folder, write", writer, acl.Write, "memory/roles/code-expert/new.md", memory.ErrForbidden, "roles/code-expert/new.md"},
		{"global read", writer, acl.Read, "memory/global/项目.md", nil, "global/项目.md"},
		{"global write", writer, acl.Write, "memory/global/项目.md", memory.ErrForbidden, "global/项目.md"},
		{"own session", writer, acl.Write, "memory/sessions/s1/context.md", nil, "sessions/s1/context.md"},
		{"admin reads a session", acl.Principal{Admin: true}, acl.Read, "memory/sessions/s1/context.md", nil, "sessions/s1/context.md"},
		{"admin may not write a session", acl.Principal{Admin: true}, acl.Write, "memory/sessions/s1/context.md", memory.ErrForbidden, "sessions/s1/context.md"},
		{"device reads nothing by default", acl.Principal{Authenticated: true}, acl.Read, "memory/global/项目.md", memory.ErrForbidden, "global/项目.md"},
		{"dot-dot", writer, acl.Read, "memory/roles/writer/../code-expert/tips.md", memory.ErrInvalidPath, "memory/roles/writer/../code-expert/tips.md"},
		{"percent", writer, acl.Read, "memory/roles/%63ode-expert/tips.md", memory.ErrInvalidPath, "memory/roles/%63ode-expert/tips.md"},
		// A case variant in a folder the caller has no right on is refused
		// by the ACL before the file system is asked (no existence oracle);
		// in its own folder the file system's case check answers.
		{"case, other role's folder", writer, acl.Read, "memory/roles/Code-expert/tips.md", memory.ErrForbidden, "roles/Code-expert/tips.md"},
		{"case, own folder", acl.Principal{Role: "code-expert"}, acl.Read, "memory/roles/code-expert/TIPS.md", memory.ErrInvalidPath, "memory/roles/code-expert/TIPS.md"},
		{"not memory", writer, acl.Read, "config.json", memory.ErrInvalidPath, "config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel, err := g.Check(tc.who, "get", tc.action, tc.path)
			switch {
			case tc.want == nil && (err != nil || rel != tc.path):
				t.Fatalf("Check = %q, %v", rel, err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("Check = %q, %v; want %v", rel, err, tc.want)
			}
			e := newest(t, al)
			wantResult := audit.Allowed
			if tc.want != nil {
				wantResult = audit.Denied
			}
			if e.Result != wantResult || e.Target != tc.target || e.Operation != "get" || e.Role != AuditRole(tc.who) || e.Reason == "" || e.Session != tc.who.Session {
				t.Errorf("audit entry %+v; want %s on %s", e, wantResult, tc.target)
			}
		})
	}
}

func TestAuthorize(t *testing.T) {
	g, _, al := newGuard(t, nil)
	ctx := context.Background()
	count := func() int {
		e, err := al.Tail(audit.MaxTail, audit.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(e)
	}
	// Writer name without a principal in ctx.
	if err := g.Authorize(ctx, "writer", "s", memory.ActionWrite, "memory/roles/writer/notes.md"); err != nil {
		t.Fatal(err)
	}
	if err := g.Authorize(ctx, memory.AdminWriter, "", memory.ActionResolve, "memory/roles/code-expert/tips.md"); err != nil {
		t.Fatal(err)
	}
	if e := newest(t, al); e.Role != AuditAdmin || e.Operation != memory.ActionResolve || e.Result != audit.Allowed {
		t.Errorf("resolve entry %+v", e)
	}
	// The principal in ctx wins over the writer name.
	wctx := WithPrincipal(ctx, acl.Principal{Role: "writer"})
	if err := g.Authorize(wctx, memory.AdminWriter, "", memory.ActionResolve, "memory/roles/code-expert/tips.md"); !errors.Is(err, memory.ErrForbidden) {
		t.Fatalf("resolve as writer: %v", err)
	}
	if e := newest(t, al); e.Role != "writer" || e.Result != audit.Denied {
		t.Errorf("denied resolve entry %+v", e)
	}
	// A write the caller checked is not audited twice; another path is.
	n := count()
	cctx := WithChecked(wctx, "memory/roles/writer/notes.md")
	if err := g.Authorize(cctx, "writer", "", memory.ActionWrite, "memory/roles/writer/notes.md"); err != nil || count() != n {
		t.Fatalf("checked write: %v, %d entries (was %d)", err, count(), n)
	}
	if err := g.Authorize(cctx, "writer", "", memory.ActionWrite, "memory/roles/code-expert/tips.md"); !errors.Is(err, memory.ErrForbidden) || count() != n+1 {
		t.Fatalf("other path: %v, %d entries (was %d)", err, count(), n)
	}
}

func TestFilters(t *testing.T) {
	g, _, al := newGuard(t, nil)
	writer := acl.Principal{Role: "writer"}
	files := []memory.FileInfo{{Path: "memory/roles/writer/notes.md"}, {Path: "memory/roles/code-expert/tips.md"}, {Path: "memory/global/项目.md"}}
	got, err := g.FilterFiles(writer, files)
	if err != nil || len(got) != 2 || got[0].Path != files[0].Path || got[1].Path != files[2].Path {
		t.Fatalf("FilterFiles = %+v, %v", got, err)
	}
	if e := newest(t, al); e.Operation != "files" || e.Reason != "2 listed, 1 hidden" {
		t.Errorf("files entry %+v", e)
	}
	query := strings.Repeat("连接池", 40) // 120 characters
	res, err := g.FilterSearch(writer, query, memory.SearchResponse{Results: []memory.SearchResult{
		{Path: "memory/roles/code-expert/tips.md", AlsoIn: []string{"memory/roles/writer/notes.md"}},
		{Path: "memory/global/项目.md", AlsoIn: []string{"memory/roles/code-expert/tips.md"}},
	}})
	if err != nil || len(res.Results) != 1 || res.Results[0].Path != "memory/global/项目.md" || res.Results[0].AlsoIn != nil {
		t.Fatalf("FilterSearch = %+v, %v", res, err)
	}
	e := newest(t, al)
	if e.Operation != "search" || e.Reason != "1 results, 0 files out of scope, 1 filtered" || e.Result != audit.Allowed {
		t.Errorf("search entry %+v", e)
	}
	if len([]rune(e.Target)) != 80 || !strings.HasPrefix(query, e.Target) {
		t.Errorf("search target %q: want the query's first 80 characters", e.Target)
	}
}

func TestAuditFailureRefuses(t *testing.T) {
	g, _, al := newGuard(t, nil)
	// The audit folder cannot be created: a file stands in its way.
	if err := os.WriteFile(al.Dir(), []byte("not a folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := g.Check(acl.Principal{Role: "writer"}, "get", acl.Read, "memory/roles/writer/notes.md")
	if !errors.Is(err, ErrAudit) || !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("Check with a broken audit log = %v, want ErrAudit", err)
	}
}

func TestDecideNotAudited(t *testing.T) {
	g, _, al := newGuard(t, nil)
	before, err := al.Tail(audit.MaxTail, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if d := g.Decide(acl.Principal{Role: "writer"}, acl.Write, "memory/roles/writer/notes.md"); !d.Allowed {
		t.Errorf("writer writes its folder: %+v", d)
	}
	if d := g.Decide(acl.Principal{Role: "writer"}, acl.Read, "memory/roles/code-expert/tips.md"); d.Allowed {
		t.Errorf("writer reads code-expert's folder: %+v", d)
	}
	if d := g.Decide(acl.Principal{Admin: true}, acl.Read, "config.json"); d.Allowed || d.Reason == "" {
		t.Errorf("not memory: %+v", d)
	}
	after, err := al.Tail(audit.MaxTail, audit.Filter{})
	if err != nil || len(after) != len(before) {
		t.Errorf("Decide wrote audit entries: %d → %d (%v)", len(before), len(after), err)
	}
}
