package api

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
)

// fakeFiles is a Memory whose only working methods are Files and Status.
type fakeFiles struct {
	Memory
	files []memory.FileInfo
}

func (f fakeFiles) Files(context.Context) ([]memory.FileInfo, error) { return f.files, nil }
func (f fakeFiles) Status() memory.Status                            { return memory.Status{State: "ready"} }

// filesRules: the SPEC §5.1 example plus rules to exercise exact path >
// most specific pattern > earlier line.
const filesRules = `version: "1.0"
rules:
  global/user-profile.md: {read: ["*"], write: [admin, main], collaborate: []}
  global/**:              {read: ["*"], write: [admin, main]}
  global/u*.md:           {read: [main, admin], write: [admin]}
  global/*e.md:           {read: [writer, admin], write: [writer]}
  roles/code-expert/*:    {read: [code-expert, admin, main], write: [code-expert, admin]}
  roles/code-expert/experience.md: {read: [code-expert, writer, admin], write: [code-expert], collaborate: [code-expert, writer]}
  sessions/*/*:           {read: [$session_owner, admin], write: [$session_owner], ttl: 86400}
`

// startFiles runs a real gateway with memory.files bound to files, behind
// a guard whose .acl is rules ("" = no .acl: the defaults) and whose
// session s1 is owned by writer, in a workspace with the roles writer and
// code-expert (and main); it returns an operator client and the workspace.
func startFiles(t *testing.T, rules string, files []memory.FileInfo) (*gateway.Client, *audit.Log, string) {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for _, role := range []string{"writer", "code-expert"} { // the roles `as` may name
		if err := os.MkdirAll(filepath.Join(ws, "memory", "roles", role), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	aclPath := filepath.Join(ws, "memory", ".acl")
	if rules != "" {
		if err := os.WriteFile(aclPath, []byte(rules), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	holder := acl.NewHolder(acl.HolderOptions{Logger: quiet})
	if err := holder.Load(aclPath); err != nil {
		t.Fatal(err)
	}
	alog, err := audit.New(audit.Options{Dir: filepath.Join(dir, "audit"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	g, err := guard.New(guard.Options{Workspace: ws, ACL: holder, Audit: alog, Owners: acl.OwnerMap{"s1": "writer"}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Token: "tok", Version: "test", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	Register(Options{Gateway: srv, Memory: fakeFiles{files: files}, Guard: g, Version: "test", Started: time.Now()})
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	cl, err := gateway.Dial(dctx, gateway.ClientOptions{URL: "ws://" + srv.Addr() + "/ws", Token: "tok",
		Client: gateway.ClientInfo{ID: "files-test", Version: "test", Platform: "linux", Mode: "test", InstanceID: "files-test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl, alog, ws
}

// TestMemoryFilesAccess: memory.files lists only the files the caller may
// read, each with its layer and role (unchanged fields) and the readers,
// writers and collaborators the ACL in force grants, with the deciding rule
// (exact path > most specific pattern > earlier line; defaults without .acl).
func TestMemoryFilesAccess(t *testing.T) {
	files := []memory.FileInfo{
		{Path: "memory/global/user-profile.md", Size: 10, MTime: 1, Chunks: 1, Layer: "global"},
		{Path: "memory/global/update.md", Size: 11, MTime: 2, Chunks: 1, Layer: "global"},
		{Path: "memory/global/guide.md", Size: 12, MTime: 3, Chunks: 1, Layer: "global"},
		{Path: "memory/global/决策.md", Size: 13, MTime: 4, Chunks: 2, Layer: "global"},
		{Path: "memory/roles/code-expert/plan.md", Size: 14, MTime: 5, Chunks: 1, Layer: "role", Role: "code-expert"},
		{Path: "memory/roles/code-expert/experience.md", Size: 15, MTime: 6, Chunks: 1, Layer: "role", Role: "code-expert"},
		{Path: "memory/roles/writer/notes.md", Size: 16, MTime: 7, Chunks: 1, Layer: "role", Role: "writer"},
		{Path: "memory/sessions/s1/context.md", Size: 17, MTime: 8, Chunks: 1, Layer: "session", Role: "writer"},
		{Path: "memory/sessions/s2/context.md", Size: 18, MTime: 9, Chunks: 1, Layer: "session"},
		{Path: "MEMORY.md", Size: 19, MTime: 10, Chunks: 1, Layer: "role", Role: "main"},
	}
	type want struct {
		rule         string
		read, write  []string
		collab       []string
		sessionOwner string
		lined        bool // the rule comes from the file (line > 0)
	}
	g := func(rule string, read, write, collab []string) want {
		return want{rule: rule, read: read, write: write, collab: collab}
	}
	s := func(x ...string) []string {
		if x == nil {
			return []string{}
		}
		return x
	}
	defaultsGlobal := g("global/**", s("*"), s("admin", "main"), s("admin", "main"))
	tests := []struct {
		name   string
		rules  string
		as     string
		source string
		want   map[string]want // path → access; exactly these paths are listed
	}{
		{"defaults admin", "", "", "defaults", map[string]want{
			"memory/global/user-profile.md":          defaultsGlobal,
			"memory/global/update.md":                defaultsGlobal,
			"memory/global/guide.md":                 defaultsGlobal,
			"memory/global/决策.md":                    defaultsGlobal,
			"memory/roles/code-expert/plan.md":       g("roles/*/**", s("code-expert", "admin"), s("code-expert", "admin"), s("code-expert", "admin")),
			"memory/roles/code-expert/experience.md": g("roles/*/**", s("code-expert", "admin"), s("code-expert", "admin"), s("code-expert", "admin")),
			"memory/roles/writer/notes.md":           g("roles/*/**", s("writer", "admin"), s("writer", "admin"), s("writer", "admin")),
			"memory/sessions/s1/context.md":          {rule: "sessions/*/**", read: s("$session_owner", "admin"), write: s("$session_owner"), collab: s("$session_owner"), sessionOwner: "writer"},
			"memory/sessions/s2/context.md":          g("sessions/*/**", s("$session_owner", "admin"), s("$session_owner"), s("$session_owner")),
			"MEMORY.md":                              g("**", s("main", "admin"), s("main", "admin"), s("main", "admin")),
		}},
		{"defaults as writer", "", "writer", "defaults", map[string]want{
			"memory/global/user-profile.md": defaultsGlobal,
			"memory/global/update.md":       defaultsGlobal,
			"memory/global/guide.md":        defaultsGlobal,
			"memory/global/决策.md":           defaultsGlobal,
			"memory/roles/writer/notes.md":  g("roles/*/**", s("writer", "admin"), s("writer", "admin"), s("writer", "admin")),
			"memory/sessions/s1/context.md": {rule: "sessions/*/**", read: s("$session_owner", "admin"), write: s("$session_owner"), collab: s("$session_owner"), sessionOwner: "writer"},
		}},
		{"file rules admin", filesRules, "", "file", map[string]want{
			// exact path beats every pattern
			"memory/global/user-profile.md": {rule: "global/user-profile.md", read: s("*"), write: s("admin", "main"), collab: s(), lined: true},
			// u*.md and *e.md tie on specificity: the earlier line wins
			"memory/global/update.md": {rule: "global/u*.md", read: s("main", "admin"), write: s("admin"), collab: s(), lined: true},
			// *e.md is more specific than **
			"memory/global/guide.md": {rule: "global/*e.md", read: s("writer", "admin"), write: s("writer"), collab: s(), lined: true},
			"memory/global/决策.md":    {rule: "global/**", read: s("*"), write: s("admin", "main"), collab: s(), lined: true},
			"memory/roles/code-expert/plan.md": {rule: "roles/code-expert/*", read: s("code-expert", "admin", "main"),
				write: s("code-expert", "admin"), collab: s(), lined: true},
			"memory/roles/code-expert/experience.md": {rule: "roles/code-expert/experience.md", read: s("code-expert", "writer", "admin"),
				write: s("code-expert"), collab: s("code-expert", "writer"), lined: true},
			// no rule for roles/writer/ nor for MEMORY.md: nobody reads them, not even admin
			"memory/sessions/s1/context.md": {rule: "sessions/*/*", read: s("$session_owner", "admin"), write: s("$session_owner"), collab: s(), sessionOwner: "writer", lined: true},
			"memory/sessions/s2/context.md": {rule: "sessions/*/*", read: s("$session_owner", "admin"), write: s("$session_owner"), collab: s(), lined: true},
		}},
		{"file rules as writer", filesRules, "writer", "file", map[string]want{
			"memory/global/user-profile.md":          {rule: "global/user-profile.md", read: s("*"), write: s("admin", "main"), collab: s(), lined: true},
			"memory/global/guide.md":                 {rule: "global/*e.md", read: s("writer", "admin"), write: s("writer"), collab: s(), lined: true},
			"memory/global/决策.md":                    {rule: "global/**", read: s("*"), write: s("admin", "main"), collab: s(), lined: true},
			"memory/roles/code-expert/experience.md": {rule: "roles/code-expert/experience.md", read: s("code-expert", "writer", "admin"), write: s("code-expert"), collab: s("code-expert", "writer"), lined: true},
			"memory/sessions/s1/context.md":          {rule: "sessions/*/*", read: s("$session_owner", "admin"), write: s("$session_owner"), collab: s(), sessionOwner: "writer", lined: true},
		}},
	}
	type entry struct {
		Path   string     `json:"path"`
		Size   int64      `json:"size"`
		MTime  int64      `json:"mtime"`
		Chunks int        `json:"chunks"`
		Layer  string     `json:"layer"`
		Role   string     `json:"role"`
		Access *acl.Grant `json:"access"`
	}
	byPath := map[string]memory.FileInfo{}
	for _, f := range files {
		byPath[f.Path] = f
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl, alog, _ := startFiles(t, tc.rules, files)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			params := map[string]any{}
			if tc.as != "" {
				params["as"] = tc.as
			}
			var res struct {
				Files []entry `json:"files"`
			}
			if err := cl.Call(ctx, "memory.files", params, &res); err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for i, e := range res.Files {
				w, ok := tc.want[e.Path]
				if !ok {
					t.Errorf("listed %s, which %q may not read", e.Path, tc.as)
					continue
				}
				seen[e.Path] = true
				if i > 0 && res.Files[i-1].MTime > e.MTime {
					t.Errorf("order changed at %s", e.Path)
				}
				fi := byPath[e.Path]
				if e.Size != fi.Size || e.MTime != fi.MTime || e.Chunks != fi.Chunks || e.Layer != fi.Layer || e.Role != fi.Role {
					t.Errorf("%s: file fields %+v, want %+v", e.Path, e, fi)
				}
				a := e.Access
				if a == nil {
					t.Errorf("%s: no access", e.Path)
					continue
				}
				if a.Rule != w.rule || a.Source != tc.source || a.SessionOwner != w.sessionOwner || (a.Line > 0) != w.lined {
					t.Errorf("%s: rule %q line %d source %q owner %q; want rule %q source %q owner %q lined %v",
						e.Path, a.Rule, a.Line, a.Source, a.SessionOwner, w.rule, tc.source, w.sessionOwner, w.lined)
				}
				if !reflect.DeepEqual(a.Read, w.read) || !reflect.DeepEqual(a.Write, w.write) || !reflect.DeepEqual(a.Collaborate, w.collab) {
					t.Errorf("%s: read %q write %q collaborate %q; want %q %q %q", e.Path, a.Read, a.Write, a.Collaborate, w.read, w.write, w.collab)
				}
			}
			for p := range tc.want {
				if !seen[p] {
					t.Errorf("%s not listed", p)
				}
			}
			// The listing is one audit entry, as before.
			rep, err := alog.TailReport(1, audit.Filter{Operation: "files"})
			if err != nil || len(rep.Entries) != 1 {
				t.Fatalf("audit: %v %+v", err, rep)
			}
			role := tc.as
			if role == "" {
				role = "admin"
			}
			if e := rep.Entries[0]; e.Role != role || e.Result != audit.Allowed {
				t.Errorf("audit entry %+v", e)
			}
		})
	}
}
