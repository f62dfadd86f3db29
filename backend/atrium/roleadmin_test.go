package atrium

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
)

// waitReason waits for a memory.changed with reason naming path.
func waitReason(t *testing.T, cl *gateway.Client, reason, path string) memory.ChangeEvent {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-cl.Events():
			var p memory.ChangeEvent
			if ev.Event == "memory.changed" && json.Unmarshal(ev.Payload, &p) == nil && p.Reason == reason && slices.Contains(p.Paths, path) {
				return p
			}
		case <-timeout:
			t.Fatalf("no memory.changed %s naming %s", reason, path)
		}
	}
}

// TestRoleEditDeleteOverGateway drives profiles.update and profiles.delete
// through the real app (issue 24 item 1): an edit reaches config.md,
// roles.list and config.json; a deletion keeps or removes the memory,
// revokes the role's MCP tokens, lists the devices scoped to it, is
// audited and announced; every refusal leaves the role as it was.
func TestRoleEditDeleteOverGateway(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, map[string]string{
		"memory/roles/writer/drafts.md": "# Drafts\n\nRelease notes draft, codeword heronlattice.\n",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "roles-admin")
	must(t, admin.Call(ctx, "memory.sync", nil, nil))

	// Edit: description, capabilities, model.
	var up struct {
		Path, Version   string
		Changed         []string
		RestartRequired []string
	}
	must(t, admin.Call(ctx, "profiles.update", map[string]any{"role": "analyst", "description": "Forecasts quarterly sales 销售预测",
		"capabilities": []string{"forecast", "销售"}, "model": "tiny-model"}, &up))
	if up.Path != "memory/roles/analyst/config.md" || strings.Join(up.Changed, ",") != "description,capabilities,model" || up.Version == "" || len(up.RestartRequired) != 0 {
		t.Fatalf("profiles.update = %+v", up)
	}
	var roles struct{ Roles []memory.RoleInfo }
	must(t, admin.Call(ctx, "roles.list", nil, &roles))
	for _, r := range roles.Roles {
		if r.Role == "analyst" && (r.Description != "Forecasts quarterly sales 销售预测" || strings.Join(r.Capabilities, ",") != "forecast,销售") {
			t.Fatalf("roles.list after the edit: %+v", r)
		}
	}
	if got := a.config().ProfileModel("analyst").Model; got != "tiny-model" {
		t.Fatalf("config.json profiles.analyst.model.model = %q", got)
	}
	// A stale base version: CONFLICT, nothing changed.
	err := admin.Call(ctx, "profiles.update", map[string]any{"role": "analyst", "description": "other", "baseVersion": "admin=1"}, nil)
	if errCode(err) != gateway.CodeConflict {
		t.Fatalf("stale profiles.update: %v, want CONFLICT", err)
	}
	for _, tc := range []struct {
		method string
		params map[string]any
		code   string
	}{
		{"profiles.update", map[string]any{"role": "nobody", "description": "x"}, gateway.CodeNotFound},
		{"profiles.update", map[string]any{"description": "x"}, gateway.CodeInvalidRequest},
		{"profiles.update", map[string]any{"role": "../global", "description": "x"}, gateway.CodeInvalidRequest},
		{"profiles.update", map[string]any{"role": "analyst", "description": " "}, gateway.CodeInvalidRequest},
		{"profiles.update", map[string]any{"role": "analyst", "as": "analyst", "description": "x"}, gateway.CodeForbidden},
		{"profiles.delete", map[string]any{"role": "main"}, gateway.CodeInvalidRequest},
		{"profiles.delete", map[string]any{"role": "nobody"}, gateway.CodeNotFound},
		{"profiles.delete", map[string]any{}, gateway.CodeInvalidRequest},
		{"profiles.delete", map[string]any{"role": "writer", "as": "writer"}, gateway.CodeForbidden},
	} {
		if err := admin.Call(ctx, tc.method, tc.params, nil); errCode(err) != tc.code {
			t.Errorf("%s %v: %v, want %s", tc.method, tc.params, err, tc.code)
		}
	}

	// The role's MCP token and a phone scoped to it.
	var tok struct {
		Info struct{ ID string }
	}
	must(t, admin.Call(ctx, "mcp.token.create", map[string]any{"name": "editor", "role": "writer"}, &tok))
	phone, phoneID := scopedPhone(ctx, t, a, admin, "role:writer")
	// A paired operator device below admin, a node and an unpaired
	// device may not edit or delete roles (the kind refuses them; see
	// TestWhoMayCall for every principal).
	node := gwDial(ctx, t, a, gateway.RoleNode, "roles-node")
	for _, cl := range []*gateway.Client{phone, node} {
		for _, m := range []string{"profiles.update", "profiles.delete"} {
			if err := cl.Call(ctx, m, map[string]any{"role": "writer", "description": "spy"}, nil); errCode(err) != gateway.CodeForbidden {
				t.Errorf("%s by a device: %v, want FORBIDDEN", m, err)
			}
		}
	}

	// Dry run: what the warning says, nothing done.
	var plan struct {
		Files, Notes     int
		Kept             bool
		MCPTokensRevoked []string `json:"mcpTokensRevoked"`
		OrphanedDevices  []struct{ DeviceID string }
	}
	must(t, admin.Call(ctx, "profiles.delete", map[string]any{"role": "writer", "dryRun": true}, &plan))
	if plan.Files != 2 || plan.Notes != 2 || !plan.Kept || !slices.Equal(plan.MCPTokensRevoked, []string{tok.Info.ID}) ||
		len(plan.OrphanedDevices) != 1 || plan.OrphanedDevices[0].DeviceID != phoneID {
		t.Fatalf("dry run = %+v", plan)
	}
	if _, err := os.Stat(filepath.Join(ws, "memory/roles/writer/drafts.md")); err != nil {
		t.Fatal("the dry run moved the role's files")
	}

	// Delete, keeping the memory.
	var del struct {
		Files            int
		Kept             bool
		ArchivePath      string
		MCPTokensRevoked []string `json:"mcpTokensRevoked"`
	}
	must(t, admin.Call(ctx, "profiles.delete", map[string]any{"role": "writer"}, &del))
	if !del.Kept || del.ArchivePath != "memory/archive/roles/writer" || del.Files != 2 || len(del.MCPTokensRevoked) != 1 {
		t.Fatalf("profiles.delete = %+v", del)
	}
	waitReason(t, admin, "archive", "memory/roles/writer/drafts.md")
	if b, err := os.ReadFile(filepath.Join(ws, "memory/archive/roles/writer/drafts.md")); err != nil || !strings.Contains(string(b), "heronlattice") {
		t.Fatalf("kept memory: %q %v", b, err)
	}
	var sr memory.SearchResponse
	must(t, admin.Call(ctx, "memory.search", map[string]any{"query": "heronlattice"}, &sr))
	if len(sr.Results) != 0 {
		t.Fatalf("a deleted role's memory is still searched: %+v", sr.Results)
	}
	must(t, admin.Call(ctx, "roles.list", nil, &roles))
	for _, r := range roles.Roles {
		if r.Role == "writer" {
			t.Fatal("roles.list still lists the deleted role")
		}
	}
	var tl struct {
		Tokens []struct {
			ID        string
			RevokedMs int64
		}
	}
	must(t, admin.Call(ctx, "mcp.token.list", nil, &tl))
	if len(tl.Tokens) != 1 || tl.Tokens[0].RevokedMs == 0 {
		t.Fatalf("the deleted role's MCP token: %+v", tl)
	}
	e, err := a.Audit.Tail(10, audit.Filter{Operation: "profiles.delete", Result: audit.Allowed})
	if err != nil || len(e) != 1 || e[0].Result != audit.Allowed || e[0].Target != "memory/roles/writer" || !strings.Contains(e[0].Reason, "kept in memory/archive/roles/writer") {
		t.Fatalf("audit %+v %v", e, err)
	}

	// Delete with the memory.
	must(t, admin.Call(ctx, "profiles.delete", map[string]any{"role": "analyst", "deleteMemory": true}, &del))
	if del.Kept || del.ArchivePath != "" {
		t.Fatalf("profiles.delete deleteMemory = %+v", del)
	}
	waitReason(t, admin, "delete", "memory/roles/analyst/config.md")
	if _, err := os.Stat(filepath.Join(ws, "memory/roles/analyst")); !os.IsNotExist(err) {
		t.Fatalf("the role's folder: %v", err)
	}
	if _, ok := a.config().Profiles["analyst"]; ok {
		t.Fatal("config.json keeps profiles.analyst")
	}
}

// TestMemoryRenameOverGateway: memory.rename by admin and as roles, with
// the ACL checked on both paths (audited), a stale version and look-alike
// names refused, and the index under the new name.
func TestMemoryRenameOverGateway(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, map[string]string{
		"memory/global/ideas.md":        "# Ideas\n\nThe okapi garden plan.\n",
		"memory/global/notes.md":        "# Notes\n",
		"memory/roles/writer/drafts.md": "# Drafts\n\nPrivate codeword lynxcanopy.\n",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "rename-admin")
	must(t, admin.Call(ctx, "memory.sync", nil, nil))
	var got struct{ Version string }
	must(t, admin.Call(ctx, "memory.get", map[string]any{"path": "memory/global/ideas.md"}, &got))

	var res memory.RenameResult
	must(t, admin.Call(ctx, "memory.rename", map[string]any{"path": "memory/global/ideas.md", "to": "memory/global/garden/okapi.md", "baseVersion": got.Version}, &res))
	if res.Path != "memory/global/garden/okapi.md" || res.From != "memory/global/ideas.md" || res.Version == "" {
		t.Fatalf("memory.rename = %+v", res)
	}
	waitReason(t, admin, "rename", "memory/global/garden/okapi.md")
	var sr memory.SearchResponse
	must(t, admin.Call(ctx, "memory.search", map[string]any{"query": "okapi garden"}, &sr))
	if len(sr.Results) == 0 || sr.Results[0].Path != "memory/global/garden/okapi.md" {
		t.Fatalf("search after the rename: %+v", sr.Results)
	}
	for _, r := range sr.Results {
		if r.Path == "memory/global/ideas.md" {
			t.Fatalf("the old path is still found: %+v", sr.Results)
		}
	}

	for _, tc := range []struct {
		params map[string]any
		code   string
	}{
		{map[string]any{"path": "memory/global/garden/okapi.md", "to": "memory/global/x.md", "baseVersion": got.Version}, gateway.CodeConflict}, // stale
		{map[string]any{"path": "memory/global/garden/okapi.md", "to": "memory/global/nоtes.md"}, gateway.CodeConflict},                         // Cyrillic о
		{map[string]any{"path": "memory/global/garden/okapi.md", "to": "memory/global/notes.md"}, gateway.CodeConflict},                         // exists
		{map[string]any{"path": "memory/global/none.md", "to": "memory/global/y.md"}, gateway.CodeNotFound},
		{map[string]any{"path": "memory/global/garden/okapi.md", "to": "../y.md"}, gateway.CodeInvalidRequest},
		{map[string]any{"path": "memory/global/garden/okapi.md"}, gateway.CodeInvalidRequest},
		// as writer: may write its folder, not global (the new path).
		{map[string]any{"as": "writer", "path": "memory/roles/writer/drafts.md", "to": "memory/global/drafts.md"}, gateway.CodeForbidden},
		// as analyst: may write its folder, not writer's (the old path).
		{map[string]any{"as": "analyst", "path": "memory/roles/writer/drafts.md", "to": "memory/roles/analyst/drafts.md"}, gateway.CodeForbidden},
	} {
		if err := admin.Call(ctx, "memory.rename", tc.params, nil); errCode(err) != tc.code {
			t.Errorf("memory.rename %v: %v, want %s", tc.params, err, tc.code)
		}
	}
	for _, rel := range []string{"memory/roles/writer/drafts.md", "memory/global/notes.md", "memory/global/garden/okapi.md"} {
		if _, err := os.Stat(filepath.Join(ws, rel)); err != nil {
			t.Errorf("%s after the refusals: %v", rel, err)
		}
	}
	e, err := a.Audit.Tail(50, audit.Filter{Operation: "rename"})
	must(t, err)
	var deniedOld, deniedNew, allowed bool
	for _, x := range e {
		switch {
		case x.Result == audit.Denied && x.Role == "analyst" && x.Target == "roles/writer/drafts.md":
			deniedOld = true
		case x.Result == audit.Denied && x.Role == "writer" && x.Target == "global/drafts.md":
			deniedNew = true
		case x.Result == audit.Allowed && x.Target == "global/garden/okapi.md":
			allowed = true
		}
	}
	if !deniedOld || !deniedNew || !allowed {
		t.Fatalf("audit of renames (old denied %v, new denied %v, allowed %v): %+v", deniedOld, deniedNew, allowed, e)
	}

	// A phone scoped authenticated reads global memory but writes none.
	phone, _ := scopedPhone(ctx, t, a, admin, "")
	if err := phone.Call(ctx, "memory.rename", map[string]any{"path": "memory/global/notes.md", "to": "memory/global/n2.md"}, nil); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("memory.rename by a phone scoped authenticated: %v, want FORBIDDEN", err)
	}
	node := gwDial(ctx, t, a, gateway.RoleNode, "rename-node")
	if err := node.Call(ctx, "memory.rename", map[string]any{"path": "memory/global/notes.md", "to": "memory/global/n2.md"}, nil); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("memory.rename by a node: %v, want FORBIDDEN", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "memory/global/notes.md")); err != nil {
		t.Fatal(err)
	}
}
