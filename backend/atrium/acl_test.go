package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
)

// aclTestRules are SPEC §5.1's example rules plus a writer folder.
const aclTestRules = `version: "1.0"
rules:
  global/**:              {read: ["*"], write: [admin, main]}
  roles/code-expert/*:    {read: [code-expert, admin, main], write: [code-expert, admin]}
  roles/code-expert/experience.md: {read: [code-expert, writer, admin], write: [code-expert], collaborate: [code-expert, writer]}
  roles/writer/*:         {read: [writer, admin], write: [writer, admin]}
  roles/writer/**:        {read: [writer, admin], write: [writer, admin]}
  sessions/*/*:           {read: [$session_owner, admin], write: [$session_owner], ttl: 86400}
`

// TestACLAdversarial drives attempts by role writer (an operator
// connection with `as`, and a paired device) to read or write
// code-expert's private memory through every gateway entry point over a
// real WebSocket, against the real app (ACL holder, audit log, memory
// engine, state.db). Each attempt must be refused (FORBIDDEN or
// INVALID_REQUEST, or filtered out of a listing or search) and be the
// newest entry of the audit log, as denied for a refusal; allowed calls are
// audited as allowed. A malformed .acl edit keeps the last good rules and
// is reported with its line by memory.status; audit.tail returns the
// entries.
func TestACLAdversarial(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	const secret = "quasarlemon"
	files := map[string]string{
		"memory/.acl":                            aclTestRules,
		"memory/global/user-profile.md":          "# User\n\nThe user writes Go and Svelte.\n",
		"memory/roles/code-expert/secret.md":     "# Perf tips\n\nPrivate performance tip, codeword " + secret + ": pin the pool to 32.\n",
		"memory/roles/code-expert/性能.md":         "# 性能提示\n\n私有的性能提示：连接池固定为三十二，暗号 " + secret + "。\n",
		"memory/roles/code-expert/café.md":       "# Café\n\nPrivate café notes " + secret + ".\n",
		"memory/roles/code-expert/experience.md": "# Experience\n\nShared with the writer: short functions read better.\n",
		"memory/roles/writer/notes.md":           "# Notes\n\nThe writer's own notes about articles.\n",
		"memory/roles/writer/draft.md":           "# Draft\n\nUnpublished article draft, codeword mandarinfox.\n",
	}
	for rel, text := range files {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, rel), []byte(text), 0o644))
	}
	// Links inside the workspace that point into code-expert's folder.
	must(t, os.Symlink(filepath.Join(ws, "memory", "roles", "code-expert", "secret.md"), filepath.Join(ws, "memory", "roles", "writer", "link.md")))
	must(t, os.Symlink(filepath.Join(ws, "memory", "roles", "code-expert"), filepath.Join(ws, "memory", "roles", "writer", "ce")))
	must(t, a.ACL.Reload())
	if st := a.ACL.Status(); st.Source != "file" || st.Err != nil {
		t.Fatalf("acl status %+v", st)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dial := func(role, id string) *gateway.Client {
		cl, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token, Role: role,
			Client: gateway.ClientInfo{ID: id, Version: "test", Platform: "linux", Mode: "test", InstanceID: id}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	op := dial(gateway.RoleOperator, "acl-op")
	node := dial(gateway.RoleNode, "acl-phone")
	code := func(err error) string {
		var ge *gateway.Error
		if errors.As(err, &ge) {
			return ge.Code
		}
		if err != nil {
			return "other: " + err.Error()
		}
		return "ok"
	}
	if err := op.Call(ctx, "memory.sync", nil, nil); err != nil {
		t.Fatal(err)
	}

	// Setup as the rightful owner: a conflict on code-expert's plan, and a
	// session of code-expert with a note.
	plan := "memory/roles/code-expert/plan.md"
	var w1, w2 memory.WriteResult
	must(t, op.Call(ctx, "memory.write", map[string]any{"path": plan, "content": "plan v1 " + secret + "\n", "mode": "replace", "as": "code-expert"}, &w1))
	must(t, op.Call(ctx, "memory.write", map[string]any{"path": plan, "content": "plan v2 " + secret + "\n", "mode": "replace", "as": "code-expert", "baseVersion": w1.Version}, &w2))
	var w3 memory.WriteResult
	must(t, op.Call(ctx, "memory.write", map[string]any{"path": plan, "content": "plan v3 " + secret + "\n", "mode": "replace", "as": "code-expert", "baseVersion": w1.Version}, &w3))
	if w3.Conflict == nil {
		t.Fatalf("no conflict record for a stale replace: %+v", w3)
	}
	must(t, op.Call(ctx, "sessions.create", map[string]any{"id": "ce-1", "owner": "code-expert", "ttl": 3600}, nil))
	must(t, op.Call(ctx, "memory.write", map[string]any{"path": "memory/sessions/ce-1/context.md", "content": "session note " + secret + "\n", "mode": "replace", "as": "code-expert"}, nil))

	nfd := "memory/roles/code-expert/cafe\u0301.md"
	abs := filepath.Join(ws, "memory", "roles", "code-expert", "secret.md")
	type attempt struct {
		name   string
		conn   *gateway.Client
		method string
		params map[string]any
		want   string // FORBIDDEN, INVALID_REQUEST, or "filtered" (ok, but nothing private)
		role   string // the audit entry's role
	}
	w := func(m map[string]any) map[string]any { m["as"] = "writer"; return m }
	attempts := []attempt{
		{"get private file", op, "memory.get", w(map[string]any{"path": "memory/roles/code-expert/secret.md"}), "FORBIDDEN", "writer"},
		{"get chinese private file", op, "memory.get", w(map[string]any{"path": "memory/roles/code-expert/性能.md"}), "FORBIDDEN", "writer"},
		{"get dot-dot", op, "memory.get", w(map[string]any{"path": "memory/roles/writer/../code-expert/secret.md"}), "INVALID_REQUEST", "writer"},
		{"get absolute", op, "memory.get", w(map[string]any{"path": abs}), "INVALID_REQUEST", "writer"},
		{"get percent-encoded dot-dot", op, "memory.get", w(map[string]any{"path": "memory/roles/writer/%2e%2e/code-expert/secret.md"}), "INVALID_REQUEST", "writer"},
		{"get percent-encoded letter", op, "memory.get", w(map[string]any{"path": "memory/%72oles/code-expert/secret.md"}), "INVALID_REQUEST", "writer"},
		{"get backslashes", op, "memory.get", w(map[string]any{"path": `memory\roles\code-expert\secret.md`}), "INVALID_REQUEST", "writer"},
		{"get file symlink", op, "memory.get", w(map[string]any{"path": "memory/roles/writer/link.md"}), "FORBIDDEN", "writer"},
		{"get folder symlink", op, "memory.get", w(map[string]any{"path": "memory/roles/writer/ce/secret.md"}), "FORBIDDEN", "writer"},
		// Case tricks on a folder the caller has no right on are refused by
		// the ACL before the file system is asked (which would tell that
		// the file exists under another case).
		{"get upper-case folder", op, "memory.get", w(map[string]any{"path": "memory/ROLES/code-expert/secret.md"}), "FORBIDDEN", "writer"},
		{"get mixed-case role", op, "memory.get", w(map[string]any{"path": "memory/roles/Code-Expert/secret.md"}), "FORBIDDEN", "writer"},
		{"get case variant of a private file", op, "memory.get", w(map[string]any{"path": "memory/roles/code-expert/SECRET.md"}), "FORBIDDEN", "writer"},
		{"write case variant of a private file", op, "memory.write", w(map[string]any{"path": "memory/roles/code-expert/Secret.md", "content": "x", "mode": "append"}), "FORBIDDEN", "writer"},
		{"get NFD name", op, "memory.get", w(map[string]any{"path": nfd}), "INVALID_REQUEST", "writer"},
		{"get dot segment", op, "memory.get", w(map[string]any{"path": "memory/roles/code-expert/./secret.md"}), "INVALID_REQUEST", "writer"},
		{"get fullwidth solidus", op, "memory.get", w(map[string]any{"path": "memory/roles\uFF0Fcode-expert/secret.md"}), "INVALID_REQUEST", "writer"},
		{"get ACL name outside memory/", op, "memory.get", w(map[string]any{"path": "roles/code-expert/secret.md"}), "INVALID_REQUEST", "writer"},
		{"get the .acl", op, "memory.get", w(map[string]any{"path": "memory/.acl"}), "FORBIDDEN", "writer"},
		{"files listing", op, "memory.files", w(map[string]any{}), "filtered", "writer"},
		{"search english private text", op, "memory.search", w(map[string]any{"query": secret}), "filtered", "writer"},
		{"search chinese private text", op, "memory.search", w(map[string]any{"query": "私有的性能提示 连接池"}), "filtered", "writer"},
		{"write replace private file", op, "memory.write", w(map[string]any{"path": "memory/roles/code-expert/secret.md", "content": "pwned", "mode": "replace"}), "FORBIDDEN", "writer"},
		{"write new private file", op, "memory.write", w(map[string]any{"path": "memory/roles/code-expert/new.md", "content": "pwned", "mode": "append"}), "FORBIDDEN", "writer"},
		{"write readable-not-writable file", op, "memory.write", w(map[string]any{"path": "memory/roles/code-expert/experience.md", "content": "pwned", "mode": "append"}), "FORBIDDEN", "writer"},
		{"write dot-dot", op, "memory.write", w(map[string]any{"path": "memory/roles/writer/../code-expert/secret.md", "content": "pwned", "mode": "append"}), "INVALID_REQUEST", "writer"},
		{"write through file symlink", op, "memory.write", w(map[string]any{"path": "memory/roles/writer/link.md", "content": "pwned", "mode": "append"}), "FORBIDDEN", "writer"},
		{"write through folder symlink", op, "memory.write", w(map[string]any{"path": "memory/roles/writer/ce/new.md", "content": "pwned", "mode": "append"}), "FORBIDDEN", "writer"},
		{"write the .acl", op, "memory.write", w(map[string]any{"path": "memory/.acl", "content": "rules: {}", "mode": "replace"}), "FORBIDDEN", "writer"},
		{"note into code-expert's log", op, "memory.note", w(map[string]any{"role": "code-expert", "text": "pwned"}), "FORBIDDEN", "writer"},
		{"note with dot-dot role", op, "memory.note", w(map[string]any{"role": "../roles/code-expert", "text": "pwned"}), "INVALID_REQUEST", "writer"},
		{"note with slash role", op, "memory.note", w(map[string]any{"role": "writer/../code-expert", "text": "pwned"}), "INVALID_REQUEST", "writer"},
		{"import with dot-dot name", op, "memory.import", w(map[string]any{"name": "../code-expert/x.md", "content": "pwned"}), "INVALID_REQUEST", "writer"},
		{"import with backslash name", op, "memory.import", w(map[string]any{"name": `..\code-expert\x.md`, "content": "pwned"}), "INVALID_REQUEST", "writer"},
		{"import into main's folder", op, "memory.import", w(map[string]any{"name": "x.md", "content": "pwned", "role": "main"}), "FORBIDDEN", "writer"},
		{"import into code-expert's folder", op, "memory.import", w(map[string]any{"name": "x.md", "content": "pwned", "role": "code-expert"}), "FORBIDDEN", "writer"},
		{"import into code-expert's session", op, "memory.import", w(map[string]any{"name": "x.md", "content": "pwned", "layer": "session", "session": "ce-1"}), "FORBIDDEN", "writer"},
		{"import into a dot-dot session", op, "memory.import", w(map[string]any{"name": "x.md", "content": "pwned", "layer": "session", "session": "../roles/code-expert"}), "INVALID_REQUEST", "writer"},
		{"promote from code-expert's session", op, "memory.promote", w(map[string]any{"session": "ce-1", "path": "context.md", "to": "global"}), "FORBIDDEN", "writer"},
		// A conflict on a file the caller may not read does not exist for
		// it (ids are sequential: FORBIDDEN would confirm it and name the file).
		{"resolve code-expert's conflict", op, "conflicts.resolve", w(map[string]any{"id": w3.Conflict.ID, "choice": "other"}), "NOT_FOUND", "writer"},
		{"as from a node", node, "memory.get", w(map[string]any{"path": "memory/roles/code-expert/secret.md"}), "FORBIDDEN", "authenticated"},
		{"node get private file", node, "memory.get", map[string]any{"path": "memory/roles/code-expert/secret.md"}, "FORBIDDEN", "authenticated"},
		{"node write private file", node, "memory.write", map[string]any{"path": "memory/roles/code-expert/secret.md", "content": "pwned", "mode": "append"}, "FORBIDDEN", "authenticated"},
		// Nodes call node methods only (issue 16): memory is refused before the ACL.
		{"node search", node, "memory.search", map[string]any{"query": secret}, "FORBIDDEN", "authenticated"},
		{"audit.tail as writer", op, "audit.tail", w(map[string]any{}), "FORBIDDEN", "writer"},
		{"conflicts.list", op, "conflicts.list", w(map[string]any{}), "filtered", "writer"},
		{"node conflicts.list", node, "conflicts.list", map[string]any{}, "FORBIDDEN", "authenticated"},
	}
	if len(attempts) < 30 {
		t.Fatalf("only %d attempts", len(attempts))
	}
	for _, tc := range attempts {
		t.Run(tc.name, func(t *testing.T) {
			var out json.RawMessage
			err := tc.conn.Call(ctx, tc.method, tc.params, &out)
			newest, terr := a.Audit.Tail(1, audit.Filter{})
			if terr != nil || len(newest) != 1 {
				t.Fatalf("audit tail: %v %v", newest, terr)
			}
			e := newest[0]
			if e.Role != tc.role {
				t.Errorf("audit entry %+v: role %q, want %q", e, e.Role, tc.role)
			}
			if e.IP != "127.0.0.1" {
				t.Errorf("audit entry %+v: ip %q, want the caller's 127.0.0.1 (SPEC §5.1)", e, e.IP)
			}
			if strings.Contains(string(out), secret) || strings.Contains(string(out), "私有") {
				t.Errorf("response reveals private text: %s", out)
			}
			if tc.want == "filtered" {
				if err != nil {
					t.Fatalf("%s: %v", tc.method, err)
				}
				if e.Result != audit.Allowed || strings.Contains(string(out), "code-expert/secret.md") {
					t.Errorf("filtered call: entry %+v, out %s", e, out)
				}
				if (tc.method == "memory.files" || tc.method == "conflicts.list") && (!strings.Contains(e.Reason, "hidden") || strings.HasSuffix(e.Reason, " 0 hidden")) {
					t.Errorf("files entry reason %q: nothing hidden", e.Reason)
				}
				if tc.method == "memory.search" && tc.role == "writer" && (!strings.Contains(e.Reason, "out of scope") || strings.Contains(e.Reason, " 0 files out of scope")) {
					t.Errorf("search entry reason %q: no file out of scope (the scope did not act)", e.Reason)
				}
				return
			}
			if got := code(err); got != tc.want {
				t.Errorf("%s %v: %s, want %s", tc.method, tc.params, got, tc.want)
			}
			if e.Result != audit.Denied {
				t.Errorf("audit entry %+v, want denied", e)
			}
		})
	}
	// A role's import lands in its own folder (QA: it went to main's).
	var imp memory.ImportResult
	if err := op.Call(ctx, "memory.import", w(map[string]any{"name": "mine.md", "content": "# Mine\n\nwriter's own note\n"}), &imp); err != nil || imp.Path != "memory/roles/writer/mine.md" {
		t.Errorf("import as writer: %+v %v, want memory/roles/writer/mine.md", imp, err)
	}
	// The session's owner imports into its live session's folder.
	if err := op.Call(ctx, "memory.import", map[string]any{"name": "brief.md", "content": "# Brief\n", "layer": "session", "session": "ce-1", "as": "code-expert"}, &imp); err != nil || imp.Path != "memory/sessions/ce-1/brief.md" {
		t.Errorf("import into session ce-1 as its owner: %+v %v, want memory/sessions/ce-1/brief.md", imp, err)
	}
	// No existence oracle: a case variant of a real private file and a
	// made-up name get the same answer (but for the name itself).
	msg := func(path string) string {
		err := op.Call(ctx, "memory.get", w(map[string]any{"path": path}), nil)
		return strings.ReplaceAll(fmt.Sprint(err), path[len("memory/"):], "NAME")
	}
	if real, made := msg("memory/roles/code-expert/SECRET.md"), msg("memory/roles/code-expert/NOTHERE.md"); real != made || !strings.Contains(real, "FORBIDDEN") {
		t.Errorf("a case variant of an existing private file answers %q, a made-up name %q", real, made)
	}
	// Nothing was written into code-expert's folder.
	if b, err := os.ReadFile(filepath.Join(ws, "memory", "roles", "code-expert", "secret.md")); err != nil || strings.Contains(string(b), "pwned") {
		t.Errorf("secret.md changed: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "memory", "roles", "code-expert", "new.md")); !os.IsNotExist(err) {
		t.Errorf("new.md written: %v", err)
	}

	// Allowed cases are audited as allowed.
	for _, tc := range []struct {
		method string
		params map[string]any
		op     string
		role   string
	}{
		{"memory.get", w(map[string]any{"path": "memory/roles/code-expert/experience.md"}), "get", "writer"},
		{"memory.get", map[string]any{"path": "memory/roles/code-expert/secret.md"}, "get", "admin"},
		{"memory.write", w(map[string]any{"path": "memory/roles/writer/notes.md", "content": "A new line.", "mode": "append"}), "write", "writer"},
		{"memory.get", map[string]any{"path": "memory/roles/code-expert/secret.md", "as": "code-expert"}, "get", "code-expert"},
	} {
		if err := op.Call(ctx, tc.method, tc.params, nil); err != nil {
			t.Fatalf("%s %v: %v", tc.method, tc.params, err)
		}
		e, err := a.Audit.Tail(1, audit.Filter{})
		if err != nil || len(e) != 1 || e[0].Result != audit.Allowed || e[0].Operation != tc.op || e[0].Role != tc.role {
			t.Errorf("%s %v: audit %+v %v", tc.method, tc.params, e, err)
		}
	}

	// audit.tail over the gateway returns the denials.
	var tail struct {
		Entries []audit.Entry `json:"entries"`
		Corrupt int           `json:"corrupt"`
	}
	must(t, op.Call(ctx, "audit.tail", map[string]any{"n": 1000, "role": "writer", "result": "denied"}, &tail))
	wantWriter := 2 // the two existence-oracle probes
	for _, tc := range attempts {
		if tc.role == "writer" && tc.want != "filtered" {
			wantWriter++
		}
	}
	if len(tail.Entries) != wantWriter || tail.Corrupt != 0 {
		t.Errorf("audit.tail role=writer result=denied: %d entries (corrupt %d), want %d", len(tail.Entries), tail.Corrupt, wantWriter)
	}
	for _, e := range tail.Entries {
		if e.Role != "writer" || e.Result != audit.Denied || e.Reason == "" || e.Timestamp.IsZero() {
			t.Errorf("audit.tail entry %+v", e)
		}
	}
	if err := node.Call(ctx, "audit.tail", nil, nil); code(err) != gateway.CodeForbidden {
		t.Errorf("node audit.tail: %v", err)
	}

	// The agent's own way in: the chat's memory_search (offline provider:
	// it searches memory for every answer) acts as role main, which these
	// rules let read code-expert's folder but not the writer's.
	if a.Model.Provider == "offline" {
		var sent struct{ RunID string }
		must(t, op.Call(ctx, "chat.send", map[string]any{"profileId": "main", "message": "mandarinfox article draft", "idempotencyKey": "acl-chat"}, &sent))
		var final string
		for final == "" {
			select {
			case ev := <-op.Events():
				if !strings.Contains(string(ev.Payload), sent.RunID) {
					continue
				}
				if ev.Event == "chat.final" {
					final = string(ev.Payload)
				} else if ev.Event == "chat.error" {
					t.Fatalf("chat failed: %s", ev.Payload)
				}
			case <-ctx.Done():
				t.Fatal("no chat.final")
			}
		}
		if strings.Contains(final, "roles/writer/") || strings.Contains(final, "Unpublished") {
			t.Errorf("the main agent's answer shows the writer's memory: %s", final)
		}
		es, err := a.Audit.Tail(1, audit.Filter{Operation: "search", Role: "main"})
		if err != nil || len(es) != 1 || !strings.Contains(es[0].Reason, "out of scope") || strings.Contains(es[0].Reason, " 0 files out of scope") {
			t.Errorf("chat memory_search audit: %+v %v (want the writer's files out of scope for role main)", es, err)
		}
	}

	// A malformed .acl edit: the last good rules stay in force and
	// memory.status reports the error with its line.
	must(t, os.WriteFile(filepath.Join(ws, "memory", ".acl"), []byte(aclTestRules+"  roles/writer/x.md: {read: [writer], delete: [writer]}\n"), 0o644))
	var st struct {
		ACL struct {
			Source string `json:"source"`
			Error  string `json:"error"`
			Line   int    `json:"line"`
		} `json:"acl"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		must(t, op.Call(ctx, "memory.status", nil, &st))
		if st.ACL.Error != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.ACL.Error == "" || st.ACL.Line != 9 || st.ACL.Source != "file" {
		t.Fatalf("memory.status acl after a bad edit: %+v", st.ACL)
	}
	if err := op.Call(ctx, "memory.get", w(map[string]any{"path": "memory/roles/code-expert/secret.md"}), nil); code(err) != gateway.CodeForbidden {
		t.Errorf("after a bad .acl edit, writer get: %v, want FORBIDDEN", err)
	}
	if err := op.Call(ctx, "memory.get", w(map[string]any{"path": "memory/roles/code-expert/experience.md"}), nil); err != nil {
		t.Errorf("after a bad .acl edit, the last good rules should still let writer read experience.md: %v", err)
	}
	var health struct {
		ACL struct {
			Error string `json:"error"`
		} `json:"acl"`
	}
	must(t, op.Call(ctx, "health", nil, &health))
	if !strings.Contains(health.ACL.Error, "line 9") {
		t.Errorf("health acl error %q, want line 9", health.ACL.Error)
	}
}
