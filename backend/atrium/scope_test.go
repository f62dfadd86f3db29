package atrium

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// Device memory scopes (issue 21 item 4) on the real app, with real
// paired devices: what each scope reads, writes, chats with and is told.

// scopeRules: MEMORY.md is main's and admin's alone; shared/** is what
// paired devices see by default; the writer's folder is the writer's.
const scopeRules = `version: "1.0"
rules:
  MEMORY.md:         {read: [main, admin], write: [main, admin]}
  global/**:         {read: ["*"], write: [admin, main]}
  shared/**:         {read: [authenticated], write: [authenticated, admin]}
  roles/writer/**:   {read: [writer, admin], write: [writer, admin]}
  roles/analyst/**:  {read: [analyst, admin], write: [analyst, admin]}
  roles/code-expert/**: {read: [code-expert, admin], write: [code-expert, admin]}
`

// scopeFiles are the files of scopeRules' workspace; each holds one word
// found nowhere else.
var scopeFiles = map[string]string{
	"memory/.acl":                     scopeRules,
	"MEMORY.md":                       "# Memory\n\nPrivate: the vault codeword is heliotrope.\n",
	"memory/shared/lunch.md":          "# Lunch\n\nShared: pumpernickel sandwiches on Thursday.\n",
	"memory/roles/writer/draft.md":    "# Draft\n\nThe writer's draft mentions marzipan.\n",
	"memory/global/project-status.md": "# Project status\n\nGlobal: the release is called quokka.\n",
}

// scopeApp is the real app on scopeFiles, indexed, and the person's
// connection.
func scopeApp(t *testing.T) (*App, *gateway.Client, context.Context) {
	t.Helper()
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, scopeFiles)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "scope-admin")
	must(t, admin.Call(ctx, "memory.sync", nil, nil))
	return a, admin, ctx
}

// scopedPhone pairs a phone as operator, gives it scope (device.scope.set;
// "" keeps the approval's default) and connects it.
func scopedPhone(ctx context.Context, t *testing.T, a *App, admin *gateway.Client, scope string) (*gateway.Client, string) {
	t.Helper()
	key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleOperator}, nil)
	id := key.Public().ID()
	if scope != "" {
		must(t, admin.Call(ctx, "device.scope.set", map[string]any{"deviceId": id, "scope": scope}, nil))
	}
	phone, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleOperator], Role: gateway.RoleOperator,
		Client: gateway.ClientInfo{ID: "atrium-phone", Version: "test", Platform: "android", Mode: "ui", DisplayName: "Pixel " + scope}})
	must(t, err)
	return phone, id
}

// filesOf lists memory.files' paths for c.
func filesOf(ctx context.Context, t *testing.T, c *gateway.Client) []string {
	t.Helper()
	var res struct{ Files []struct{ Path string } }
	must(t, c.Call(ctx, "memory.files", map[string]any{}, &res))
	var out []string
	for _, f := range res.Files {
		out = append(out, f.Path)
	}
	slices.Sort(out)
	return out
}

// searchPaths lists memory.search's result paths for query.
func searchPaths(ctx context.Context, t *testing.T, c *gateway.Client, query string) []string {
	t.Helper()
	var res struct{ Results []struct{ Path string } }
	must(t, c.Call(ctx, "memory.search", map[string]any{"query": query, "mode": "keyword"}, &res))
	var out []string
	for _, r := range res.Results {
		out = append(out, r.Path)
	}
	return out
}

// TestPairedPhoneCannotReadPrivateMemory: a phone paired as operator with
// the person's default approval no longer reads MEMORY.md marked
// `read: main, admin` — not by memory.get, memory.search or memory.files
// (on main before issue 21 it read everything, as admin) — while the
// person at the desktop still does.
func TestPairedPhoneCannotReadPrivateMemory(t *testing.T) {
	a, admin, ctx := scopeApp(t)
	key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleOperator}, nil)
	phone, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleOperator], Role: gateway.RoleOperator})
	must(t, err)
	if err := phone.Call(ctx, "memory.get", map[string]any{"path": "MEMORY.md"}, nil); errCode(err) != gateway.CodeForbidden {
		t.Errorf("phone memory.get MEMORY.md: %v, want FORBIDDEN", err)
	}
	if got := searchPaths(ctx, t, phone, "heliotrope"); len(got) != 0 {
		t.Errorf("phone memory.search heliotrope found %v, want nothing", got)
	}
	if got := filesOf(ctx, t, phone); slices.Contains(got, "MEMORY.md") {
		t.Errorf("phone memory.files lists MEMORY.md: %v", got)
	}
	must(t, admin.Call(ctx, "memory.get", map[string]any{"path": "MEMORY.md"}, nil))
	if got := searchPaths(ctx, t, admin, "heliotrope"); !slices.Equal(got, []string{"MEMORY.md"}) {
		t.Errorf("admin memory.search heliotrope: %v", got)
	}
}

// TestDeviceScopes: every scope × memory.search, get, files and a write on
// the real app with real paired devices; `as` only narrows; chat,
// history, permission questions and events stay within the scope.
func TestDeviceScopes(t *testing.T) {
	a, admin, ctx := scopeApp(t)
	type scopeCase struct {
		scope      string
		only       string   // every path memory.files lists starts with it
		reads      []string // memory.get allowed and memory.files listed (the others of allRead neither)
		search     map[string]bool
		writes     map[string]bool // memory.write append allowed
		writer     string          // the version vector's writer
		chats      []string        // profiles it may read the history of
		notChats   []string
		permission bool
	}
	allRead := []string{"MEMORY.md", "memory/shared/lunch.md", "memory/roles/writer/draft.md", "memory/global/project-status.md"}
	cases := []scopeCase{
		{scope: "authenticated", only: "memory/shared/", reads: []string{"memory/shared/lunch.md"},
			search: map[string]bool{"heliotrope": false, "pumpernickel": true, "marzipan": false, "quokka": false},
			writes: map[string]bool{"memory/shared/from-phone.md": true, "memory/roles/writer/from-phone.md": false, "MEMORY.md": false},
			writer: "authenticated", notChats: []string{"main", "writer-1"}},
		{scope: "role:writer", reads: []string{"memory/shared/lunch.md", "memory/roles/writer/draft.md", "memory/global/project-status.md"},
			search: map[string]bool{"heliotrope": false, "pumpernickel": true, "marzipan": true, "quokka": true},
			writes: map[string]bool{"memory/shared/from-writer.md": true, "memory/roles/writer/from-phone.md": true, "MEMORY.md": false},
			writer: "writer", chats: []string{"writer-1"}, notChats: []string{"main", "analyst-1"}},
		{scope: "admin", reads: allRead,
			search: map[string]bool{"heliotrope": true, "pumpernickel": true, "marzipan": true, "quokka": true},
			writes: map[string]bool{"memory/shared/from-admin-phone.md": true, "memory/roles/writer/from-admin-phone.md": true, "MEMORY.md": true},
			writer: "admin", chats: []string{"main", "writer-1"},
			permission: true},
	}
	for _, tc := range cases {
		t.Run(tc.scope, func(t *testing.T) {
			phone, id := scopedPhone(ctx, t, a, admin, tc.scope)
			var list struct {
				Devices []struct{ DeviceID, Scope string }
			}
			must(t, admin.Call(ctx, "device.list", map[string]any{}, &list))
			if i := slices.IndexFunc(list.Devices, func(d struct{ DeviceID, Scope string }) bool { return d.DeviceID == id }); i < 0 || list.Devices[i].Scope != tc.scope {
				t.Fatalf("device.list %+v: want %s with scope %s", list.Devices, id, tc.scope)
			}
			listed := filesOf(ctx, t, phone)
			for _, p := range listed {
				if !strings.HasPrefix(p, tc.only) {
					t.Errorf("memory.files lists %s (all: %v)", p, listed)
				}
			}
			for _, p := range allRead {
				if want := slices.Contains(tc.reads, p); slices.Contains(listed, p) != want {
					t.Errorf("memory.files %v: %s listed=%v, want %v", listed, p, !want, want)
				}
			}
			for _, p := range allRead {
				err := phone.Call(ctx, "memory.get", map[string]any{"path": p}, nil)
				if want := slices.Contains(tc.reads, p); (err == nil) != want || (!want && errCode(err) != gateway.CodeForbidden) {
					t.Errorf("memory.get %s: %v, want allowed=%v", p, err, want)
				}
			}
			for q, want := range tc.search {
				if got := searchPaths(ctx, t, phone, q); (len(got) > 0) != want {
					t.Errorf("memory.search %q: %v, want found=%v", q, got, want)
				}
			}
			for p, want := range tc.writes {
				var res struct{ Version string }
				err := phone.Call(ctx, "memory.write", map[string]any{"path": p, "content": "- from the phone\n", "mode": "append"}, &res)
				if (err == nil) != want || (!want && errCode(err) != gateway.CodeForbidden) {
					t.Errorf("memory.write %s: %v, want allowed=%v", p, err, want)
				}
				if err == nil && !strings.Contains(res.Version, tc.writer+"=") {
					t.Errorf("memory.write %s: version %q, want writer %s", p, res.Version, tc.writer)
				}
			}
			for _, prof := range tc.chats {
				if err := phone.Call(ctx, "history.profile", map[string]any{"profileId": prof}, nil); err != nil {
					t.Errorf("history.profile %s: %v, want allowed", prof, err)
				}
			}
			for _, prof := range tc.notChats {
				before := len(deniedEntries(t, a))
				if err := phone.Call(ctx, "history.profile", map[string]any{"profileId": prof}, nil); errCode(err) != gateway.CodeForbidden {
					t.Errorf("history.profile %s: %v, want FORBIDDEN", prof, err)
				}
				if err := phone.Call(ctx, "chat.send", map[string]any{"profileId": prof, "message": "what is the vault codeword?"}, nil); errCode(err) != gateway.CodeForbidden {
					t.Errorf("chat.send %s: %v, want FORBIDDEN", prof, err)
				}
				if d := deniedEntries(t, a); len(d) < before+2 || d[0].Operation != "chat.send" || d[0].Target != "profile "+prof {
					t.Errorf("chat.send %s refusal not audited: %+v", prof, d[:min(2, len(d))])
				}
			}
			err := phone.Call(ctx, "agent.permissions", map[string]any{}, nil)
			if (err == nil) != tc.permission {
				t.Errorf("agent.permissions: %v, want allowed=%v", err, tc.permission)
			}
		})
	}

	// chat.reset (a session closed by /new) reaches a device only for the
	// profiles its scope may chat with: its note path names the closed
	// session's first question.
	t.Run("chat.reset events", func(t *testing.T) {
		phone, _ := scopedPhone(ctx, t, a, admin, "role:writer")
		for _, prof := range []string{"main", "writer-1"} {
			var res struct{ SessionID string }
			must(t, admin.Call(ctx, "chat.send", map[string]any{"profileId": prof, "sessionId": "s-scope-" + prof, "message": "/new"}, &res))
			if res.SessionID == "" {
				t.Fatalf("/new for %s: no next session", prof)
			}
		}
		// Events come in order: the first reset the phone gets must be
		// the writer's, main's withheld before it.
		var ev struct{ ProfileID, ClosedSessionID string }
		must(t, json.Unmarshal(waitEvent(ctx, t, phone, "chat.reset"), &ev))
		if ev.ProfileID != "writer-1" || ev.ClosedSessionID != "s-scope-writer-1" {
			t.Fatalf("a role:writer phone got chat.reset %+v; want only writer-1's", ev)
		}
	})

	// `as` narrows, never widens.
	t.Run("as", func(t *testing.T) {
		auth, _ := scopedPhone(ctx, t, a, admin, "")
		before := len(deniedEntries(t, a))
		err := auth.Call(ctx, "memory.get", map[string]any{"path": "MEMORY.md", "as": "main"}, nil)
		d := deniedEntries(t, a)
		if errCode(err) != gateway.CodeForbidden || len(d) != before+1 || d[0].Role != "authenticated" || d[0].Target != "as main" ||
			!strings.Contains(d[0].Reason, "would widen") {
			t.Errorf("authenticated as main: %v, audit %+v", err, d[:min(1, len(d))])
		}
		writer, _ := scopedPhone(ctx, t, a, admin, "role:writer")
		must(t, writer.Call(ctx, "memory.get", map[string]any{"path": "memory/roles/writer/draft.md", "as": "writer"}, nil))
		if err := writer.Call(ctx, "memory.search", map[string]any{"query": "marzipan", "as": "code-expert"}, nil); errCode(err) != gateway.CodeForbidden {
			t.Errorf("role:writer as code-expert: %v, want FORBIDDEN", err)
		}
		if err := writer.Call(ctx, "memory.get", map[string]any{"path": "MEMORY.md", "as": "admin"}, nil); errCode(err) != gateway.CodeInvalidRequest {
			t.Errorf("as admin: %v, want INVALID_REQUEST", err)
		}
		full, _ := scopedPhone(ctx, t, a, admin, "admin")
		must(t, full.Call(ctx, "memory.get", map[string]any{"path": "memory/roles/writer/draft.md", "as": "writer"}, nil))
		if err := full.Call(ctx, "memory.get", map[string]any{"path": "MEMORY.md", "as": "writer"}, nil); errCode(err) != gateway.CodeForbidden {
			t.Errorf("admin device as writer reads MEMORY.md: %v, want FORBIDDEN (as narrows)", err)
		}
	})

	// The other memory methods act as the scope too.
	t.Run("other memory methods", func(t *testing.T) {
		auth, _ := scopedPhone(ctx, t, a, admin, "")
		for _, c := range []struct {
			method string
			params map[string]any
		}{
			{"memory.import", map[string]any{"name": "leak.md", "content": "x", "layer": "global"}},
			{"memory.note", map[string]any{"text": "a note", "role": "main"}},
			{"collab.list", map[string]any{}},
			{"conflicts.resolve", map[string]any{"id": 1, "choice": "current", "as": "main"}},
		} {
			if err := auth.Call(ctx, c.method, c.params, nil); errCode(err) != gateway.CodeForbidden {
				t.Errorf("authenticated %s: %v, want FORBIDDEN", c.method, err)
			}
		}
		var cf struct{ Conflicts []any }
		must(t, auth.Call(ctx, "conflicts.list", map[string]any{}, &cf))
		writer, _ := scopedPhone(ctx, t, a, admin, "role:writer")
		var imp struct{ Path string }
		must(t, writer.Call(ctx, "memory.import", map[string]any{"name": "imported.md", "content": "# Imported\n"}, &imp))
		if imp.Path != "memory/roles/writer/imported.md" {
			t.Errorf("role:writer import went to %s, want the writer's folder", imp.Path)
		}
	})

	// The scope is checked when the approval is made and when it changes.
	t.Run("invalid scopes", func(t *testing.T) {
		_, id := scopedPhone(ctx, t, a, admin, "")
		for _, bad := range []string{"role:nosuch", "everything", "role:a/b", "Admin"} {
			if err := admin.Call(ctx, "device.scope.set", map[string]any{"deviceId": id, "scope": bad}, nil); errCode(err) != gateway.CodeInvalidRequest {
				t.Errorf("device.scope.set %q: %v, want INVALID_REQUEST", bad, err)
			}
		}
		if err := admin.Call(ctx, "device.scope.set", map[string]any{"deviceId": strings.Repeat("0", 64), "scope": "admin"}, nil); errCode(err) != gateway.CodeNotFound {
			t.Errorf("device.scope.set of an unknown device: %v, want NOT_FOUND", err)
		}
		pending, err := deviceDial(ctx, t, a, newDeviceKey(t), gateway.ClientOptions{SetupCode: pairCode(ctx, t, admin), Role: gateway.RoleOperator})
		must(t, err)
		if err := admin.Call(ctx, "device.pair.approve", map[string]any{"requestId": pending.Auth().RequestID, "scope": "role:nosuch"}, nil); errCode(err) != gateway.CodeInvalidRequest ||
			!strings.Contains(err.Error(), `unknown role "nosuch"`) {
			t.Errorf("approve with an unknown role: %v, want INVALID_REQUEST", err)
		}
		var res struct{ Device struct{ Scope string } }
		must(t, admin.Call(ctx, "device.pair.approve", map[string]any{"requestId": pending.Auth().RequestID, "scope": "role:main"}, &res))
		if res.Device.Scope != "role:main" {
			t.Errorf("approved with role:main: device %+v", res.Device)
		}
	})

	// A change applies to the device's live connection at once.
	t.Run("live change", func(t *testing.T) {
		phone, id := scopedPhone(ctx, t, a, admin, "")
		set := func(scope string) {
			t.Helper()
			must(t, admin.Call(ctx, "device.scope.set", map[string]any{"deviceId": id, "scope": scope}, nil))
			var ev struct{ DeviceID, Scope string }
			must(t, json.Unmarshal(waitEvent(ctx, t, phone, "device.scope.changed"), &ev))
			if ev.DeviceID != id || ev.Scope != scope {
				t.Fatalf("device.scope.changed %+v, want %s", ev, scope)
			}
			es, err := a.Audit.Tail(1, audit.Filter{Operation: "device.scope.set"})
			if err != nil || len(es) != 1 || es[0].Result != audit.Allowed || !strings.HasSuffix(es[0].Reason, "→ "+scope) || es[0].Target != "device:"+id {
				t.Fatalf("device.scope.set audit %+v %v", es, err)
			}
		}
		get := func() error { return phone.Call(ctx, "memory.get", map[string]any{"path": "MEMORY.md"}, nil) }
		if err := get(); errCode(err) != gateway.CodeForbidden {
			t.Fatalf("before: %v, want FORBIDDEN", err)
		}
		set("admin")
		if err := get(); err != nil {
			t.Fatalf("after scope admin, the same connection: %v", err)
		}
		set("role:writer")
		if err := get(); errCode(err) != gateway.CodeForbidden {
			t.Fatalf("after scope role:writer: %v, want FORBIDDEN", err)
		}
		set("authenticated")
		if got := searchPaths(ctx, t, phone, "marzipan"); len(got) != 0 {
			t.Fatalf("after scope authenticated: search found %v", got)
		}
	})

	// Events: a run of main reaches the devices that may chat with main
	// only; memory.changed names only files the device may read.
	t.Run("events", func(t *testing.T) {
		auth, _ := scopedPhone(ctx, t, a, admin, "")
		mainPhone, _ := scopedPhone(ctx, t, a, admin, "role:main")
		writer, _ := scopedPhone(ctx, t, a, admin, "role:writer")
		var sent struct{ RunID string }
		must(t, admin.Call(ctx, "chat.send", map[string]any{"profileId": "main", "message": "what is the vault codeword?"}, &sent))
		waitRun := func(c *gateway.Client) {
			t.Helper()
			for {
				var p struct{ RunID string }
				must(t, json.Unmarshal(waitEvent(ctx, t, c, "chat.final"), &p))
				if p.RunID == sent.RunID {
					return
				}
			}
		}
		waitRun(admin)
		waitRun(mainPhone) // the device scoped to main's role sees main's run
		must(t, admin.Call(ctx, "memory.write", map[string]any{"path": "MEMORY.md", "content": "- heliotrope again\n", "mode": "append"}, nil))
		must(t, admin.Call(ctx, "memory.write", map[string]any{"path": "memory/shared/sentinel.md", "content": "- sentinel\n", "mode": "append"}, nil))
		for name, c := range map[string]*gateway.Client{"authenticated": auth, "role:writer": writer} {
			// Everything before the sentinel's memory.changed: no event of
			// main's run, and no memory.changed naming MEMORY.md.
			for {
				var ev gateway.EventFrame
				select {
				case ev = <-c.Events():
				case <-ctx.Done():
					t.Fatalf("%s: no memory.changed for the sentinel", name)
				}
				body := string(ev.Payload)
				if strings.HasPrefix(ev.Event, "chat.") || strings.HasPrefix(ev.Event, "agent.") || strings.Contains(body, "MEMORY.md") {
					t.Errorf("%s got %s %s", name, ev.Event, body)
				}
				if ev.Event == "memory.changed" && strings.Contains(body, "sentinel") {
					break
				}
			}
		}
	})
}

// deniedEntries are the denied audit entries, newest first.
func deniedEntries(t *testing.T, a *App) []audit.Entry {
	t.Helper()
	es, err := a.Audit.Tail(100000, audit.Filter{Result: audit.Denied})
	must(t, err)
	return es
}
