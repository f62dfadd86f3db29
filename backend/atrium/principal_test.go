package atrium

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// TestIdempotencyAcrossPrincipals is issue 14 item 3 on the real app: a
// node connection that replays the key the operator used gets its own
// answer (the ACL's), not the operator's private file; a reused key with
// other params and a side-effecting call without a key are refused.
func TestIdempotencyAcrossPrincipals(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	const private = "memory/roles/code-expert/perf.md"
	seedWorkspace(t, a, ws, map[string]string{private: "# Perf\n\nPrivate: codeword zebrafinch.\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	op := gwDial(ctx, t, a, gateway.RoleOperator, "idem-op")
	node := gwDial(ctx, t, a, gateway.RoleNode, "idem-phone")

	get := map[string]any{"path": private, "idempotencyKey": "shared-key"}
	var res struct{ Text string }
	must(t, op.Call(ctx, "memory.get", get, &res))
	if !strings.Contains(res.Text, "zebrafinch") {
		t.Fatalf("operator get: %q", res.Text)
	}
	res.Text = ""
	err := node.Call(ctx, "memory.get", get, &res)
	if errCode(err) != gateway.CodeForbidden || strings.Contains(res.Text, "zebrafinch") {
		t.Fatalf("node replaying the operator's key: %v %q, want FORBIDDEN", err, res.Text)
	}

	// chat.send: the same key is the same send for the operator only.
	send := map[string]any{"profileId": "main", "message": "hello there", "idempotencyKey": "send-1"}
	var s1, s2, s3 struct{ RunID string }
	must(t, op.Call(ctx, "chat.send", send, &s1))
	must(t, op.Call(ctx, "chat.send", send, &s2))
	if s1.RunID == "" || s2.RunID != s1.RunID {
		t.Fatalf("operator repeat: run %q then %q, want the same", s1.RunID, s2.RunID)
	}
	if err := node.Call(ctx, "chat.send", send, &s3); err == nil && s3.RunID == s1.RunID {
		t.Fatalf("node replaying the operator's key got the operator's run %q", s3.RunID)
	}
	other := map[string]any{"profileId": "main", "message": "something else", "idempotencyKey": "send-1"}
	if err := op.Call(ctx, "chat.send", other, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Fatalf("reused key, other params: %v, want INVALID_REQUEST", err)
	}

	// Without a key (a raw client that does not add one).
	raw := dial(t, a)
	raw.sideEffects = nil
	for _, m := range []string{"chat.send", "memory.write", "message.delete"} {
		r := raw.call(m, map[string]any{"profileId": "main", "message": "x", "path": "memory/x.md", "content": "x", "mode": "append", "messageId": "m"})
		if r.OK || r.Error.Code != gateway.CodeInvalidRequest || !strings.Contains(r.Error.Message, "idempotencyKey") {
			t.Errorf("%s without idempotencyKey: %+v, want INVALID_REQUEST", m, r)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "memory", "x.md")); !os.IsNotExist(err) {
		t.Error("a write without idempotencyKey was applied")
	}
}

// principalConn is one connection of a principal class for TestWhoMayCall.
type principalConn struct {
	class gateway.Callers
	cl    *gateway.Client
	role  string // audit role of its refusals
}

// TestWhoMayCall: every registered method of the real app is called by
// every principal class it does not admit, each refused with FORBIDDEN
// before it runs and audited (operation: the method); hello-ok
// features.callable is exactly what the kinds admit; and
// docs/PROTOCOL.md's "Who may call" table states every method's kind and
// callers exactly as registered.
func TestWhoMayCall(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conns := []principalConn{
		{gateway.Admin, gwDial(ctx, t, a, gateway.RoleOperator, "who-admin"), "admin"},
		{gateway.LocalNode, gwDial(ctx, t, a, gateway.RoleNode, "who-node"), "authenticated"},
	}
	conns = append(conns, devicePrincipals(ctx, t, a)...)
	f := conns[0].cl.Hello().Features
	if len(f.Methods) < 30 || len(f.SideEffects) < 10 {
		t.Fatalf("features %+v: too few methods", f)
	}
	for _, pc := range conns {
		var want []string
		for _, m := range f.Methods {
			if a.Gateway.MethodKind(m).Who.Has(pc.class) {
				want = append(want, m)
			}
		}
		if got := pc.cl.Hello().Features.Callable; !slices.Equal(got, want) {
			t.Errorf("%s: features.callable %v, want %v", pc.class, got, want)
		}
		for _, m := range f.Methods {
			if a.Gateway.MethodKind(m).Who.Has(pc.class) {
				continue
			}
			err := pc.cl.Call(ctx, m, map[string]any{}, nil)
			if errCode(err) != gateway.CodeForbidden {
				t.Errorf("%s %s: %v, want FORBIDDEN", pc.class, m, err)
				continue
			}
			e, terr := a.Audit.Tail(1, audit.Filter{})
			if terr != nil || len(e) != 1 || e[0].Result != audit.Denied || e[0].Operation != m || e[0].Role != pc.role {
				t.Errorf("%s %s: audit %+v %v, want denied %s by %s", pc.class, m, e, terr, m, pc.role)
			}
		}
	}

	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "PROTOCOL.md"))
	must(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## Who may call\n")
	if !ok {
		t.Fatal(`docs/PROTOCOL.md has no "## Who may call" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9.]+)` \\| ([a-z]+) \\| ([a-z, ]+?) \\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented[m[1]] = m[2] + " | " + m[3]
	}
	for _, m := range f.Methods {
		k := a.Gateway.MethodKind(m)
		if got, want := documented[m], k.String()+" | "+k.Who.String(); got != want {
			t.Errorf("docs/PROTOCOL.md Who may call: %s is %q, registered as %q", m, got, want)
		}
		delete(documented, m)
	}
	// Methods registered only with optional services (instances, collab)
	// are all registered in this app; anything left is not a method.
	for m := range documented {
		if !slices.Contains(f.Methods, m) {
			t.Errorf("docs/PROTOCOL.md Who may call lists %s, which the app does not serve", m)
		}
	}
}
