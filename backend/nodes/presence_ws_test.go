package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// waitPresence reads presence events until one satisfies ok.
func waitPresence(t *testing.T, c *gateway.Client, what string, ok func(map[string]PresenceEntry) bool) map[string]PresenceEntry {
	t.Helper()
	for {
		var p PresenceEvent
		if err := json.Unmarshal(nextEvent(t, c, EventPresence).Payload, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > DefaultPresenceMax {
			t.Fatalf("presence event with %d entries (max %d)", len(p.Entries), DefaultPresenceMax)
		}
		m := keys(p.Entries)
		if ok(m) {
			return m
		}
		t.Logf("presence event (%d entries) is not yet %s", len(m), what)
	}
}

func TestPresenceOverGateway200Nodes(t *testing.T) {
	f := newFixture(t, Options{})
	const total = 210
	nodes := make([]*testNode, total)
	for i := range total {
		nodes[i] = f.node(fmt.Sprintf("n%03d", i), []string{"system"}, sysCommands)
		f.clock.Add(time.Second)
	}
	op := f.operator("ui-watch")

	// hello-ok carries the list: the 200 newest nodes.
	snap := op.Hello().Snapshot.Presence
	if len(snap) != DefaultPresenceMax {
		t.Fatalf("snapshot has %d entries, want %d", len(snap), DefaultPresenceMax)
	}
	b, _ := json.Marshal(snap)
	var entries []PresenceEntry
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	m := keys(entries)
	for i := range total {
		e, ok := m[fmt.Sprintf("inst-n%03d", i)]
		if want := i >= total-DefaultPresenceMax; ok != want {
			t.Fatalf("snapshot: n%03d present=%v, want %v (oldest dropped)", i, ok, want)
		}
		if ok && (!e.Connected || e.Host != fmt.Sprintf("n%03d", i) || e.Role != gateway.RoleNode || e.Mode != "node" ||
			e.IP != "127.0.0.1" || len(e.Commands) != 3 || e.Caps[0] != "system") {
			t.Fatalf("snapshot entry %+v", e)
		}
	}
	// The operator's own entry is the newest: the oldest node entry goes.
	waitPresence(t, op, "operator entry", func(m map[string]PresenceEntry) bool {
		_, me := m["ui-watch"]
		_, old := m["inst-n010"]
		return me && !old && len(m) == DefaultPresenceMax
	})
	// The registry is not presence: every connected node can be invoked.
	if got := len(f.svc.Nodes()); got != total {
		t.Fatalf("node.list has %d nodes, want %d", got, total)
	}

	// presence.update reaches the operators.
	if err := nodes[200].c.Call(context.Background(), MethodPresenceUpdate, map[string]any{"lastInputSeconds": 12.5}, nil); err != nil {
		t.Fatal(err)
	}
	waitPresence(t, op, "lastInputSeconds", func(m map[string]PresenceEntry) bool {
		e := m["inst-n200"]
		return e.LastInputSeconds != nil && *e.LastInputSeconds == 12.5
	})

	// Ten nodes leave: disconnected now, gone TTL later.
	for _, n := range nodes[100:110] {
		n.c.Close()
	}
	waitPresence(t, op, "ten disconnected", func(m map[string]PresenceEntry) bool {
		for i := 100; i < 110; i++ {
			if e, ok := m[fmt.Sprintf("inst-n%03d", i)]; !ok || e.Connected {
				return false
			}
		}
		return true
	})
	f.clock.Add(DefaultPresenceTTL - time.Second)
	if n := f.svc.Sweep(); n != 0 {
		t.Fatalf("swept %d entries before the TTL", n)
	}
	f.clock.Add(time.Second)
	if n := f.svc.Sweep(); n != 20 { // ten presence entries, ten nodes
		t.Fatalf("swept %d entries at the TTL, want 20", n)
	}
	got := waitPresence(t, op, "expired", func(m map[string]PresenceEntry) bool { return len(m) == DefaultPresenceMax-10 })
	for i := 100; i < 110; i++ {
		if _, ok := got[fmt.Sprintf("inst-n%03d", i)]; ok {
			t.Fatalf("n%d still present after its TTL", i)
		}
	}
	if got := len(f.svc.Nodes()); got != total-10 {
		t.Fatalf("node.list has %d nodes after the TTL, want %d", got, total-10)
	}
}

func TestExecAskRelay(t *testing.T) {
	f := newFixture(t, Options{})
	n := f.node("host", []string{"system"}, sysCommands)
	admin := f.operator("ui")
	ctx := context.Background()
	type res struct {
		d   string
		err error
	}
	ask := func(p map[string]any) chan res {
		done := make(chan res, 1)
		go func() {
			var out struct {
				Decision string `json:"decision"`
			}
			err := n.c.Call(ctx, MethodExecAsk, p, &out)
			done <- res{out.Decision, err}
		}()
		return done
	}
	done := ask(map[string]any{"command": []string{"rm", "-r", "build"}, "cwd": "/tmp/x"})
	var a ExecAsk
	if err := json.Unmarshal(nextEvent(t, admin, EventExecAskRequested).Payload, &a); err != nil {
		t.Fatal(err)
	}
	if a.NodeID != n.id || a.DisplayName != "host" || len(a.Command) != 3 || a.Cwd != "/tmp/x" || a.ExpiresAt-a.At != DefaultAskTimeout.Milliseconds() {
		t.Fatalf("ask %+v", a)
	}
	var list struct {
		Asks []ExecAsk `json:"asks"`
	}
	if err := admin.Call(ctx, MethodExecAskList, nil, &list); err != nil || len(list.Asks) != 1 || list.Asks[0].ID != a.ID {
		t.Fatalf("exec.ask.list %+v %v", list, err)
	}
	wantCode(t, admin.Call(ctx, MethodExecAskAnswer, map[string]string{"id": a.ID, "decision": "yes"}, nil), gateway.CodeInvalidRequest, "decision must be")
	if err := admin.Call(ctx, MethodExecAskAnswer, map[string]string{"id": a.ID, "decision": DecisionAllowOnce}, nil); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.d != DecisionAllowOnce {
		t.Fatalf("node got %+v", r)
	}
	var rs ExecAskResolved
	_ = json.Unmarshal(nextEvent(t, admin, EventExecAskResolved).Payload, &rs)
	if rs.ID != a.ID || rs.Decision != DecisionAllowOnce || rs.By != "person" {
		t.Fatalf("resolved %+v", rs)
	}
	wantCode(t, admin.Call(ctx, MethodExecAskAnswer, map[string]string{"id": a.ID, "decision": DecisionDeny}, nil), gateway.CodeNotFound, "no open ask")
	if es := f.audits(MethodExecAskAnswer); len(es) != 1 || es[0].Result != audit.Allowed || es[0].Target != n.id+": rm -r build" {
		t.Fatalf("audit %+v", es)
	}

	// No answer in time is deny.
	done = ask(map[string]any{"command": []string{"ls"}, "timeoutMs": 50})
	if r := <-done; r.err != nil || r.d != DecisionDeny {
		t.Fatalf("timeout: %+v", r)
	}
	_ = json.Unmarshal(nextEvent(t, admin, EventExecAskResolved).Payload, &rs)
	if rs.Decision != DecisionDeny || rs.By != "timeout" {
		t.Fatalf("resolved %+v", rs)
	}

	wantCode(t, n.c.Call(ctx, MethodExecAsk, map[string]any{"command": []string{}}, nil), gateway.CodeInvalidRequest, "command (argv")

	// The node going away withdraws its ask.
	ask(map[string]any{"command": []string{"make"}})
	if err := json.Unmarshal(nextEvent(t, admin, EventExecAskRequested).Payload, &a); err != nil {
		t.Fatal(err)
	}
	n.c.Close()
	_ = json.Unmarshal(nextEvent(t, admin, EventExecAskResolved).Payload, &rs)
	if rs.ID != a.ID || rs.By != "cancelled" {
		t.Fatalf("resolved %+v", rs)
	}
	if len(f.svc.Asks()) != 0 {
		t.Fatal("ask left open")
	}
}
