package atrium

// The adversarial suite of issue 21 item 4: what a paired phone may read.
// The real app bound to 127.0.0.2 (TLS, its own certificate), phones paired
// and connected over WSS from other loopback addresses with real device
// keys. A phone holds exactly the memory scope the person chose; every
// attempt to reach further is refused with its code, audited, and leaks
// nothing (no text, no event).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// scopedOverTLS pairs a phone over WSS from src as operator, gives it
// scope ("" keeps the approval's default) and connects it with opts.
func (k *atk) scopedOverTLS(src, scope string, opts gateway.ClientOptions) (*gateway.Client, *device.PrivateKey, map[string]string) {
	k.t.Helper()
	key, toks := k.pair(src, []string{gateway.RoleOperator}, nil, nil)
	if scope != "" {
		must(k.t, k.admin.Call(k.ctx, "device.scope.set", map[string]any{"deviceId": key.Public().ID(), "scope": scope}, nil))
	}
	opts.Role, opts.DeviceToken = gateway.RoleOperator, toks[gateway.RoleOperator]
	if opts.Client.ID == "" {
		opts.Client = gateway.ClientInfo{ID: "atrium-ui", Version: "test", Platform: "android", Mode: "ui", DisplayName: "Pixel " + scope}
	}
	return k.mustDev(src, key, opts), key, toks
}

// noText fails when a refused call answered anything.
func noText(t *testing.T, what string, err error, res json.RawMessage) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed (%s), want refused", what, res)
	} else if len(res) > 0 && strings.Contains(string(res), "heliotrope") {
		t.Errorf("%s: refused but answered %s", what, res)
	}
}

func TestAdversarialScope(t *testing.T) {
	k := startAttack(t)
	seedWorkspace(t, k.a, k.ws, scopeFiles)
	must(t, k.admin.Call(k.ctx, "memory.sync", nil, nil))
	// The person's own chat with main, in a conversation of the desktop's.
	var sent struct{ RunID, UserMessageID, SessionID string }
	must(t, k.admin.Call(k.ctx, "chat.send", map[string]any{"profileId": "main", "conversationId": "desk-conversation",
		"message": "remember: the vault codeword is heliotrope"}, &sent))
	waitEvent(k.ctx, t, k.admin, "chat.final")

	t.Run("the_default_scope_reads_shared_notes_only", func(t *testing.T) {
		phone, _, _ := k.scopedOverTLS("127.0.0.20", "", gateway.ClientOptions{})
		before := len(k.denied())
		for _, p := range []string{"MEMORY.md", "./MEMORY.md", "memory/../MEMORY.md", "memory.md", "MEMORY.md/", "%4DEMORY.md", "/MEMORY.md",
			"memory/roles/writer/draft.md", "memory/.acl"} {
			var res json.RawMessage
			err := phone.Call(k.ctx, "memory.get", map[string]any{"path": p}, &res)
			noText(t, "memory.get "+p, err, res)
		}
		k.audited("memory.get MEMORY.md", before, "get", "MEMORY.md")
		var res json.RawMessage
		must(t, phone.Call(k.ctx, "memory.search", map[string]any{"query": "heliotrope vault codeword"}, &res))
		if strings.Contains(string(res), "MEMORY.md") || strings.Contains(string(res), "heliotrope") {
			t.Errorf("memory.search answered %s", res)
		}
		must(t, phone.Call(k.ctx, "memory.files", map[string]any{}, &res))
		if strings.Contains(string(res), "MEMORY.md") || strings.Contains(string(res), "roles/") || !strings.Contains(string(res), "memory/shared/lunch.md") {
			t.Errorf("memory.files answered %s", res)
		}
		var got struct{ Text string }
		must(t, phone.Call(k.ctx, "memory.get", map[string]any{"path": "memory/shared/lunch.md"}, &got))
		if !strings.Contains(got.Text, "pumpernickel") {
			t.Errorf("the shared note: %q", got.Text)
		}
	})

	t.Run("connect_scopes_are_not_memory_scopes", func(t *testing.T) {
		phone, _, _ := k.scopedOverTLS("127.0.0.21", "", gateway.ClientOptions{Scopes: []string{"admin", "operator.admin", "role:main"}})
		var res json.RawMessage
		err := phone.Call(k.ctx, "memory.get", map[string]any{"path": "MEMORY.md"}, &res)
		refused(t, "memory.get with connect scopes [admin]", err, gateway.CodeForbidden, "", "")
		noText(t, "memory.get with connect scopes", err, res)
	})

	t.Run("as_never_widens", func(t *testing.T) {
		phone, _, _ := k.scopedOverTLS("127.0.0.22", "", gateway.ClientOptions{})
		for _, c := range []struct {
			method string
			params map[string]any
		}{
			{"memory.get", map[string]any{"path": "MEMORY.md"}},
			{"memory.search", map[string]any{"query": "heliotrope"}},
			{"memory.files", map[string]any{}},
			{"memory.write", map[string]any{"path": "MEMORY.md", "content": "x", "mode": "append"}},
			{"memory.note", map[string]any{"text": "x"}},
			{"memory.import", map[string]any{"name": "x.md", "content": "x"}},
			{"memory.promote", map[string]any{"session": "s1", "path": "context.md", "to": "role"}},
			{"conflicts.list", map[string]any{}},
			{"conflicts.resolve", map[string]any{"id": 1, "choice": "current"}},
			{"sessions.list", map[string]any{}},
			{"collab.list", map[string]any{}},
		} {
			before := len(k.denied())
			c.params["as"] = "main"
			var res json.RawMessage
			err := phone.Call(k.ctx, c.method, c.params, &res)
			refused(t, c.method+" as main", err, gateway.CodeForbidden, "", "would widen")
			noText(t, c.method+" as main", err, res)
			k.audited(c.method+" as main", before, c.method, "as main")
		}
		for _, as := range []string{"admin", "authenticated", "all", "*", "../main"} {
			err := phone.Call(k.ctx, "memory.get", map[string]any{"path": "MEMORY.md", "as": as}, nil)
			refused(t, "as "+as, err, gateway.CodeInvalidRequest, "", "")
		}
		writer, _, _ := k.scopedOverTLS("127.0.0.23", "role:writer", gateway.ClientOptions{})
		for _, as := range []string{"main", "code-expert", "analyst"} {
			var res json.RawMessage
			err := writer.Call(k.ctx, "memory.get", map[string]any{"path": "MEMORY.md", "as": as}, &res)
			refused(t, "role:writer as "+as, err, gateway.CodeForbidden, "", "would widen")
			noText(t, "role:writer as "+as, err, res)
		}
		must(t, writer.Call(k.ctx, "memory.get", map[string]any{"path": "memory/roles/writer/draft.md", "as": "writer"}, nil))
	})

	t.Run("status_and_roles_count_only_what_the_scope_reads", func(t *testing.T) {
		type status struct {
			Workspace     string
			Files, Chunks int
		}
		type roles struct {
			Roles []struct {
				Role  string
				Files int
			}
		}
		var all status
		var allRoles roles
		must(t, k.admin.Call(k.ctx, "memory.status", map[string]any{}, &all))
		must(t, k.admin.Call(k.ctx, "roles.list", map[string]any{}, &allRoles))
		for i, scope := range []string{"", "role:writer"} {
			phone, _, _ := k.scopedOverTLS("127.0.0.4"+string(rune('0'+i)), scope, gateway.ClientOptions{})
			var raw json.RawMessage
			must(t, phone.Call(k.ctx, "memory.status", map[string]any{}, &raw))
			var st status
			must(t, json.Unmarshal(raw, &st))
			if strings.Contains(string(raw), k.ws) || st.Workspace != "" {
				t.Errorf("memory.status by scope %q shows the workspace path: %s", scope, raw)
			}
			if st.Files <= 0 || st.Files >= all.Files || st.Chunks >= all.Chunks {
				t.Errorf("memory.status by scope %q: %d files, %d chunks; the workspace has %d, %d", scope, st.Files, st.Chunks, all.Files, all.Chunks)
			}
			var rs roles
			must(t, phone.Call(k.ctx, "roles.list", map[string]any{}, &rs))
			for j, r := range rs.Roles {
				total := allRoles.Roles[j].Files
				switch {
				case r.Role != "writer":
					if r.Files > total {
						t.Errorf("roles.list by scope %q: role %s has %d files of %d", scope, r.Role, r.Files, total)
					}
				case scope == "" && r.Files != 0, scope != "" && r.Files != total:
					// The writer's draft is readable to role writer only.
					t.Errorf("roles.list by scope %q: role writer has %d files (the workspace: %d)", scope, r.Files, total)
				}
			}
		}
		if all.Workspace == "" {
			t.Errorf("memory.status by admin lacks the workspace")
		}
	})

	t.Run("sessions_follow_the_scope", func(t *testing.T) {
		// A session's record is written by its owner (`sessions/*/*`):
		// a device creates sessions only for the role it is scoped to.
		sessions := func() []string {
			ents, _ := os.ReadDir(filepath.Join(k.ws, "memory", "sessions"))
			var ids []string
			for _, e := range ents {
				ids = append(ids, e.Name())
			}
			return ids
		}
		was := sessions()
		phone, _, _ := k.scopedOverTLS("127.0.0.33", "", gateway.ClientOptions{})
		writer, _, _ := k.scopedOverTLS("127.0.0.34", "role:writer", gateway.ClientOptions{})
		for _, c := range []struct {
			who    string
			dev    *gateway.Client
			params map[string]any
			code   string
		}{
			{"authenticated", phone, map[string]any{"owner": "main"}, gateway.CodeForbidden},
			{"authenticated", phone, map[string]any{"owner": "writer", "ttl": 99999999}, gateway.CodeForbidden},
			{"authenticated", phone, map[string]any{"owner": "writer", "id": "phone-1"}, gateway.CodeForbidden},
			{"role:writer", writer, map[string]any{"owner": "main"}, gateway.CodeForbidden},
			{"role:writer", writer, map[string]any{"owner": "main", "as": "writer"}, gateway.CodeForbidden},
			{"role:writer", writer, map[string]any{"owner": "writer", "ttl": 99999999}, gateway.CodeInvalidRequest},
		} {
			what := fmt.Sprintf("sessions.create %v by %s", c.params, c.who)
			before := len(k.denied())
			var res json.RawMessage
			err := c.dev.Call(k.ctx, "sessions.create", c.params, &res)
			refused(t, what, err, c.code, "", "")
			if c.code == gateway.CodeForbidden {
				k.audited(what, before, "sessions.create", "owner "+c.params["owner"].(string))
			}
		}
		if now := sessions(); len(now) != len(was) {
			t.Errorf("refused sessions.create calls left sessions: %v, were %v", now, was)
		}
		var s struct{ ID, Owner string }
		must(t, writer.Call(k.ctx, "sessions.create", map[string]any{"owner": "writer", "ttl": 3600}, &s))
		if s.Owner != "writer" {
			t.Errorf("the writer's own session: %+v", s)
		}
		everything, _, _ := k.scopedOverTLS("127.0.0.35", "admin", gateway.ClientOptions{})
		must(t, everything.Call(k.ctx, "sessions.create", map[string]any{"owner": "main"}, &s))
		// Archiving stays admin's.
		err := writer.Call(k.ctx, "sessions.archive", map[string]any{"id": s.ID}, nil)
		refused(t, "sessions.archive by role:writer", err, gateway.CodeForbidden, "", "")
	})

	t.Run("refusals_name_no_file_the_scope_may_not_read", func(t *testing.T) {
		// A shared folder the phone writes, with one file in it the
		// phone may not read.
		rules := scopeRules + "  shared/payroll-*.md: {read: [admin], write: [authenticated, admin]}\n"
		must(t, os.WriteFile(filepath.Join(k.ws, "memory", ".acl"), []byte(rules), 0o644))
		must(t, os.WriteFile(filepath.Join(k.ws, "memory", "shared", "payroll-2026.md"), []byte("# Payroll\n"), 0o644))
		must(t, k.a.ACL.Reload())
		t.Cleanup(func() {
			must(t, os.WriteFile(filepath.Join(k.ws, "memory", ".acl"), []byte(scopeRules), 0o644))
			must(t, k.a.ACL.Reload())
		})
		phone, _, _ := k.scopedOverTLS("127.0.0.36", "", gateway.ClientOptions{})
		everything, _, _ := k.scopedOverTLS("127.0.0.37", "admin", gateway.ClientOptions{})
		for _, c := range []struct {
			method string
			params map[string]any
			secret string // the existing name a refusal must not show
		}{
			{"memory.get", map[string]any{"path": "Memory.md"}, "MEMORY.md"},
			{"memory.get", map[string]any{"path": "memory/shared/Payroll-2026.md"}, "payroll-2026"},
			{"memory.write", map[string]any{"path": "memory/shared/Payroll-2026.md", "content": "x", "mode": "replace"}, "payroll-2026"},
			{"memory.write", map[string]any{"path": "memory/shared/p\u0430yroll-2026.md", "content": "x", "mode": "replace"}, "payroll-2026"}, // Cyrillic а
			{"memory.write", map[string]any{"path": "memory/shared/p\u0430yroll-2026.md", "content": "x", "mode": "append"}, "payroll-2026"},  // Cyrillic а
			{"memory.write", map[string]any{"path": "memory/shared/payroll\u28002026.md", "content": "x", "mode": "replace"}, "payroll-2026"}, // not alike: written
		} {
			what := fmt.Sprintf("%s %v", c.method, c.params["path"])
			var res json.RawMessage
			err := phone.Call(k.ctx, c.method, c.params, &res)
			if err != nil && strings.Contains(err.Error(), c.secret) {
				t.Errorf("%s by scope authenticated: %v names the unreadable file", what, err)
			}
			// The same call by a device that may read the file names it,
			// with the same code.
			var resAll json.RawMessage
			errAll := everything.Call(k.ctx, c.method, c.params, &resAll)
			if (err == nil) != (errAll == nil) || err != nil && gwError(err).Code != gwError(errAll).Code {
				t.Errorf("%s: scope authenticated %v, scope admin %v: want the same outcome", what, err, errAll)
			} else if errAll != nil && !strings.Contains(errAll.Error(), c.secret) {
				t.Errorf("%s by scope admin: %v does not name the existing file", what, errAll)
			}
		}
	})

	t.Run("chat_history_and_questions_of_other_profiles", func(t *testing.T) {
		for _, scope := range []string{"", "role:writer"} {
			phone, _, _ := k.scopedOverTLS("127.0.0.24", scope, gateway.ClientOptions{})
			for _, c := range []struct {
				method string
				params map[string]any
			}{
				{"history.profile", map[string]any{"profileId": "main"}},
				{"history.conversation", map[string]any{"conversationId": "desk-conversation"}},
				{"chat.send", map[string]any{"profileId": "main", "message": "what is the vault codeword?"}},
				{"chat.send", map[string]any{"profileId": "main", "conversationId": "desk-conversation", "message": "repeat the codeword"}},
				{"chat.send", map[string]any{"profileId": "main", "sessionId": sent.SessionID, "message": "repeat the codeword"}},
				{"chat.cancel", map[string]any{"profileId": "main", "sessionId": sent.SessionID}},
				{"message.delete", map[string]any{"messageId": sent.UserMessageID}},
				{"agent.permissions", map[string]any{}},
				{"agent.permission.answer", map[string]any{"id": "any", "allow": true}},
			} {
				before := len(k.denied())
				var res json.RawMessage
				err := phone.Call(k.ctx, c.method, c.params, &res)
				refused(t, "scope "+scope+" "+c.method, err, gateway.CodeForbidden, "", "memory scope")
				noText(t, "scope "+scope+" "+c.method, err, res)
				k.audited("scope "+scope+" "+c.method, before, c.method)
			}
		}
		// The person's question is still there.
		var page struct{ Messages []struct{ ID string } }
		must(t, k.admin.Call(k.ctx, "history.conversation", map[string]any{"conversationId": "desk-conversation"}, &page))
		if len(page.Messages) != 2 || page.Messages[0].ID != sent.UserMessageID {
			t.Errorf("the desktop's conversation after the phones' attempts: %+v", page.Messages)
		}
	})

	t.Run("a_device_cannot_change_a_scope", func(t *testing.T) {
		phone, key, _ := k.scopedOverTLS("127.0.0.25", "admin", gateway.ClientOptions{})
		other, otherKey, _ := k.scopedOverTLS("127.0.0.26", "", gateway.ClientOptions{})
		for _, id := range []string{key.Public().ID(), otherKey.Public().ID()} {
			for _, c := range []*gateway.Client{phone, other} {
				before := len(k.denied())
				err := c.Call(k.ctx, "device.scope.set", map[string]any{"deviceId": id, "scope": "admin"}, nil)
				refused(t, "a device's device.scope.set", err, gateway.CodeForbidden, "", "only admin")
				k.audited("a device's device.scope.set", before, "device.scope.set")
			}
		}
		err := other.Call(k.ctx, "memory.get", map[string]any{"path": "MEMORY.md"}, nil)
		refused(t, "after the attempts", err, gateway.CodeForbidden, "", "")
	})

	t.Run("a_downgrade_applies_to_the_live_TLS_connection", func(t *testing.T) {
		phone, key, _ := k.scopedOverTLS("127.0.0.27", "admin", gateway.ClientOptions{})
		must(t, phone.Call(k.ctx, "memory.get", map[string]any{"path": "MEMORY.md"}, nil))
		must(t, k.admin.Call(k.ctx, "device.scope.set", map[string]any{"deviceId": key.Public().ID(), "scope": "authenticated"}, nil))
		waitEvent(k.ctx, t, phone, "device.scope.changed")
		var res json.RawMessage
		err := phone.Call(k.ctx, "memory.get", map[string]any{"path": "MEMORY.md"}, &res)
		refused(t, "memory.get after the downgrade", err, gateway.CodeForbidden, "", "")
		noText(t, "memory.get after the downgrade", err, res)
		// The person's next run of main and a write to MEMORY.md reach the
		// desktop, not the phone: everything it gets before the sentinel
		// (a write to a shared note) is within its scope.
		must(t, k.admin.Call(k.ctx, "chat.send", map[string]any{"profileId": "main", "message": "and the heliotrope codeword again"}, nil))
		waitEvent(k.ctx, t, k.admin, "chat.final")
		must(t, k.admin.Call(k.ctx, "memory.write", map[string]any{"path": "MEMORY.md", "content": "- heliotrope\n", "mode": "append"}, nil))
		must(t, k.admin.Call(k.ctx, "memory.write", map[string]any{"path": "memory/shared/sentinel.md", "content": "- sentinel\n", "mode": "append"}, nil))
		within := map[string]bool{"memory.changed": true, "presence": true, "memory.progress": true, "profiles.instance": true, "tick": true}
		for {
			var ev gateway.EventFrame
			select {
			case ev = <-phone.Events():
			case <-k.ctx.Done():
				t.Fatal("no memory.changed for the shared sentinel")
			}
			body := string(ev.Payload)
			if !within[ev.Event] || strings.Contains(body, "MEMORY.md") || strings.Contains(body, "heliotrope") {
				t.Errorf("the downgraded phone got %s %s", ev.Event, body)
			}
			if ev.Event == "memory.changed" && strings.Contains(body, "sentinel") {
				break
			}
		}
	})

	t.Run("node_commands_need_the_admin_scope", func(t *testing.T) {
		// A node command (system.run on a computer holding the workspace, a
		// camera, a location) reaches past any memory scope but admin.
		for i, scope := range []string{"", "role:main"} {
			phone, _, _ := k.scopedOverTLS("127.0.0.3"+string(rune('0'+i)), scope, gateway.ClientOptions{})
			before := len(k.denied())
			var res json.RawMessage
			err := phone.Call(k.ctx, "node.invoke", map[string]any{"nodeId": "any-node", "command": "system.run",
				"params": map[string]any{"command": []string{"cat", "MEMORY.md"}}}, &res)
			refused(t, "node.invoke by scope "+scope, err, gateway.CodeForbidden, "", "scope admin")
			k.audited("node.invoke by scope "+scope, before, "node.invoke", "any-node system.run")
		}
		everything, _, _ := k.scopedOverTLS("127.0.0.32", "admin", gateway.ClientOptions{})
		err := everything.Call(k.ctx, "node.invoke", map[string]any{"nodeId": "any-node", "command": "system.run",
			"params": map[string]any{"command": []string{"true"}}}, nil)
		if ge := gwError(err); ge == nil || ge.Code == gateway.CodeForbidden {
			t.Errorf("node.invoke by scope admin: %v, want past the scope check (no such node)", err)
		}
	})
}
