package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
)

// TestLayersOverGateway drives profiles.create, roles.list,
// sessions.create/list/archive and memory.promote through the real app over
// a real WebSocket, and checks that memory.changed tells a global change.
func TestLayersOverGateway(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	for rel, text := range map[string]string{
		"memory/global/user-profile.md": "# User\n\nThe user ships a Go backend and a Svelte UI.\n",
		"memory/roles/writer/drafts.md": "# Drafts\n\nGo backend release notes draft, codeword marmotlantern.\n",
	} {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, rel), []byte(text), 0o644))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token,
		Client: gateway.ClientInfo{ID: "layers-test", Version: "test", Platform: "linux", Mode: "test", InstanceID: "l1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, m := range api.LayerMethods {
		found := false
		for _, x := range cl.Hello().Features.Methods {
			found = found || x == m
		}
		if !found {
			t.Errorf("hello-ok does not advertise %s", m)
		}
	}
	call := func(method string, params, out any) error {
		t.Helper()
		return cl.Call(ctx, method, params, out)
	}
	code := func(err error) string {
		var ge *gateway.Error
		if errors.As(err, &ge) {
			return ge.Code
		}
		return ""
	}
	must(t, call("memory.sync", nil, nil))

	// Cold start.
	var cr memory.CreateRoleResult
	if err := call("profiles.create", map[string]any{"role": "release-manager", "description": "Ships Go backend releases and writes release notes",
		"capabilities": []string{"releases"}, "idempotencyKey": "pc-1"}, &cr); err != nil {
		t.Fatal(err)
	}
	if cr.Role != "release-manager" || cr.Path != "memory/roles/release-manager/config.md" || !cr.ACLCreated ||
		!strings.Contains(cr.Summary, "memory/global/user-profile.md") || strings.Contains(cr.Summary, "marmotlantern") {
		t.Fatalf("profiles.create = %+v", cr)
	}
	if _, err := os.Stat(filepath.Join(ws, "memory", ".acl")); err != nil {
		t.Fatal(err)
	}
	// profiles.list names the new role at once (the index is rescanned).
	var pl struct {
		Index []struct {
			ID string `json:"id"`
		} `json:"index"`
	}
	if err := call("profiles.list", nil, &pl); err != nil || !slices.ContainsFunc(pl.Index, func(e struct {
		ID string `json:"id"`
	}) bool {
		return e.ID == "release-manager"
	}) {
		t.Fatalf("profiles.list after create: %+v %v", pl, err)
	}
	// The starting context is saved and is part of the role's persona, so
	// its instances' first turns carry it (issue 24 item 1).
	if cr.ContextPath != "memory/roles/release-manager/MEMORY.md" {
		t.Fatalf("context path %q", cr.ContextPath)
	}
	persona, err := (&poolRunner{workspace: ws, log: slog.New(slog.DiscardHandler)}).Persona("release-manager")
	if err != nil || !strings.Contains(persona, "Ships Go backend releases") || !strings.Contains(persona, "memory/global/user-profile.md") ||
		!strings.Contains(persona, "## Your memory (memory/roles/release-manager/MEMORY.md)") {
		t.Fatalf("persona of the new role (%v):\n%s", err, persona)
	}
	if err := call("profiles.create", map[string]any{"role": "release-manager", "description": "again"}, nil); code(err) != gateway.CodeConflict {
		t.Fatalf("second create: %v", err)
	}
	var roles struct{ Roles []memory.RoleInfo }
	if err := call("roles.list", nil, &roles); err != nil || len(roles.Roles) < 2 {
		t.Fatalf("roles.list = %+v %v", roles, err)
	}

	// Sessions.
	var s memory.Session
	if err := call("sessions.create", map[string]any{"id": "rm-1", "owner": "release-manager", "ttl": 3600}, &s); err != nil || s.Owner != "release-manager" || s.TTL != 3600 {
		t.Fatalf("sessions.create = %+v %v", s, err)
	}
	// The session's owner writes its notes (SPEC §5.1 defaults: admin only reads them).
	must(t, call("memory.write", map[string]any{"path": "memory/sessions/rm-1/context.md", "content": "# Context\n\nRelease 2.1 ships on Thursday.\n", "mode": "replace", "as": "release-manager"}, nil))
	var list struct{ Sessions []memory.Session }
	if err := call("sessions.list", nil, &list); err != nil || len(list.Sessions) != 1 || len(list.Sessions[0].Files) != 2 {
		t.Fatalf("sessions.list = %+v %v", list, err)
	}
	// A session is its owner's: another role does not see it listed.
	var mine, theirs struct{ Sessions []memory.Session }
	if err := call("sessions.list", map[string]any{"as": "release-manager"}, &mine); err != nil || len(mine.Sessions) != 1 {
		t.Fatalf("sessions.list as the owner = %+v %v", mine, err)
	}
	if err := call("sessions.list", map[string]any{"as": "main"}, &theirs); err != nil || len(theirs.Sessions) != 0 {
		t.Fatalf("sessions.list as another role = %+v %v (want none)", theirs, err)
	}

	// Promote into global: memory.changed says it is a global change.
	var pr memory.PromoteResult
	if err := call("memory.promote", map[string]any{"session": "rm-1", "path": "context.md", "lines": "3", "to": "global"}, &pr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pr.Path, "memory/global/promoted-") || pr.Already {
		t.Fatalf("memory.promote = %+v", pr)
	}
	ev := waitGlobal(t, cl, pr.Path)
	if !ev.Global || ev.Layers[0] != memory.LayerGlobal {
		t.Fatalf("memory.changed %+v", ev)
	}
	if err := call("memory.promote", map[string]any{"session": "rm-1", "path": "context.md", "lines": "3", "to": "global"}, &pr); err != nil || !pr.Already {
		t.Fatalf("repeat promote = %+v %v", pr, err)
	}

	// Archive on request.
	if err := call("sessions.archive", map[string]any{"id": "rm-1"}, &s); err != nil || !s.Archived {
		t.Fatalf("sessions.archive = %+v %v", s, err)
	}
	if err := call("sessions.list", map[string]any{"archived": true}, &list); err != nil || len(list.Sessions) != 1 || !list.Sessions[0].Archived {
		t.Fatalf("sessions.list archived = %+v %v", list, err)
	}

	for _, tc := range []struct {
		method string
		params map[string]any
		code   string
	}{
		{"profiles.create", map[string]any{"role": "admin", "description": "x"}, gateway.CodeInvalidRequest},
		{"profiles.create", map[string]any{"description": "x"}, gateway.CodeInvalidRequest},
		{"sessions.create", map[string]any{"owner": "a b"}, gateway.CodeInvalidRequest},
		{"sessions.archive", map[string]any{"id": "rm-1"}, gateway.CodeNotFound},
		{"sessions.archive", map[string]any{}, gateway.CodeInvalidRequest},
		{"memory.promote", map[string]any{"session": "rm-1", "path": "context.md", "to": "global"}, gateway.CodeNotFound},
		{"memory.promote", map[string]any{"session": "..", "path": "context.md", "to": "global"}, gateway.CodeInvalidRequest},
	} {
		if err := call(tc.method, tc.params, nil); code(err) != tc.code {
			t.Errorf("%s %v: %v, want %s", tc.method, tc.params, err, tc.code)
		}
	}

	// A node connection creates nothing.
	node, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token, Role: gateway.RoleNode,
		Client: gateway.ClientInfo{ID: "phone", Version: "test", Platform: "ios", Mode: "node", InstanceID: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	for _, m := range []string{"profiles.create", "sessions.create", "sessions.archive", "memory.promote"} {
		err := node.Call(ctx, m, map[string]any{"role": "spy", "description": "x", "owner": "spy", "id": "x", "session": "x", "path": "x.md", "to": "global"}, nil)
		if code(err) != gateway.CodeForbidden {
			t.Errorf("node %s: %v, want FORBIDDEN", m, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "memory", "roles", "spy")); !os.IsNotExist(err) {
		t.Error("a node created a role")
	}
}

// waitGlobal waits for memory.changed naming path.
func waitGlobal(t *testing.T, cl *gateway.Client, path string) memory.ChangeEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-cl.Events():
			if ev.Event != "memory.changed" {
				continue
			}
			var p memory.ChangeEvent
			if err := json.Unmarshal(ev.Payload, &p); err == nil && len(p.Paths) == 1 && p.Paths[0] == path {
				return p
			}
		case <-timeout:
			t.Fatalf("no memory.changed for %s", path)
		}
	}
}
