package tools

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// nodeNet is a real gateway on 127.0.0.1 with the nodes service on its
// hooks, and one local node connection that answers its requests.
type nodeNet struct {
	svc    *nodes.Service
	nodeID string
	mu     sync.Mutex
	seen   []string // commands the node received
}

func newNodeNet(t *testing.T) *nodeNet {
	t.Helper()
	return newNodeNetWith(t, []string{"system.run", "system.which"}, func(r nodes.InvokeRequestEvent) nodes.ResultParams {
		var p struct {
			Command []string `json:"command"`
		}
		_ = json.Unmarshal(r.Params, &p)
		out, _ := json.Marshal(map[string]any{"exitCode": 0, "stdout": strings.Join(p.Command[1:], " ") + "\n"})
		return nodes.ResultParams{ID: r.ID, OK: true, Payload: out}
	})
}

// newNodeNetWith is newNodeNet with the node's commands and its answer.
func newNodeNetWith(t *testing.T, commands []string, answer func(nodes.InvokeRequestEvent) nodes.ResultParams) *nodeNet {
	t.Helper()
	const token = "tools-test-token-0123456789"
	var svc *nodes.Service
	gw, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Token: token, Logger: quiet(),
		OnAuthenticated: func(ci gateway.ConnInfo) { svc.Connected(ci) },
		OnClosed:        func(ci gateway.ConnInfo) { svc.Disconnected(ci) }})
	if err != nil {
		t.Fatal(err)
	}
	if svc, err = nodes.New(nodes.Options{Gateway: gw, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	svc.Register()
	if err := gw.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	c, err := gateway.Dial(dctx, gateway.ClientOptions{URL: "ws://" + gw.Addr() + "/ws", Token: token, Role: gateway.RoleNode,
		Caps: []string{"system"}, Commands: commands,
		Client: gateway.ClientInfo{ID: "atrium-node", DisplayName: "build-box", InstanceID: "i-1", Mode: "node", Platform: "linux"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	n := &nodeNet{svc: svc, nodeID: "local:" + c.Hello().Server.ConnID}
	deadline := time.Now().Add(60 * time.Second)
	for _, err := svc.Describe(n.nodeID); err != nil; _, err = svc.Describe(n.nodeID) {
		if time.Now().After(deadline) {
			t.Fatal("node never registered")
		}
		time.Sleep(2 * time.Millisecond)
	}
	go func() {
		for ev := range c.Events() {
			if ev.Event != nodes.EventInvokeRequest {
				continue
			}
			var r nodes.InvokeRequestEvent
			if json.Unmarshal(ev.Payload, &r) != nil {
				continue
			}
			n.mu.Lock()
			n.seen = append(n.seen, r.Command)
			n.mu.Unlock()
			_ = c.Call(context.Background(), nodes.MethodInvokeResult, answer(r), nil)
		}
	}()
	return n
}

func (n *nodeNet) received() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.seen...)
}

// asker answers permission questions with yes and records them.
type asker struct {
	mu  sync.Mutex
	yes bool
	qs  []agent.PermissionRequest
}

func (a *asker) Ask(_ context.Context, r agent.PermissionRequest) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.qs = append(a.qs, r)
	return a.yes, nil
}

func (a *asker) questions() []agent.PermissionRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agent.PermissionRequest(nil), a.qs...)
}

func TestNodesToolWithRealNode(t *testing.T) {
	n := newNodeNet(t)
	ask := &asker{}
	perms := agent.NewPermissions(agent.PermissionOptions{Session: "s-1", Role: "code-expert", Asker: ask})
	e := newTestEnv(t, Options{Nodes: &NodesOptions{Nodes: n.svc, Permissions: perms}})

	r := e.call(NodesTool, map[string]any{"action": "list"})
	if r.Status != agent.StatusOK || !contains(string(r.Data), n.nodeID) || r.LogSummary != "1 nodes, 1 connected" {
		t.Fatalf("list: %+v", r)
	}
	if a := e.newest(); a.Operation != NodesTool || a.Target != "list" || a.Result != audit.Allowed || a.Role != "code-expert" {
		t.Fatalf("audit %+v", a)
	}
	if r := e.call(NodesTool, map[string]any{"action": "describe", "nodeId": n.nodeID}); r.Status != agent.StatusOK || !contains(string(r.Data), `"displayName":"build-box"`) {
		t.Fatalf("describe: %+v", r)
	}

	// system.run: the person is asked on every call; "no" stops it before the node.
	run := map[string]any{"action": "invoke", "nodeId": n.nodeID, "command": "system.run", "params": map[string]any{"command": []string{"echo", "hi"}}}
	r = e.call(NodesTool, run)
	if r.Status != agent.StatusDenied || len(n.received()) != 0 {
		t.Fatalf("refused run: %+v, node saw %v", r, n.received())
	}
	if a := e.newest(); a.Result != audit.Denied || a.Target != n.nodeID+" system.run" {
		t.Fatalf("audit %+v", a)
	}
	q := ask.questions()
	if len(q) != 1 || q[0].Kind != KindNode || q[0].Level != agent.L3 || !contains(q[0].Reason, "run system.run on "+n.nodeID+": echo hi") {
		t.Fatalf("question %+v", q)
	}
	if want := map[string]string{"command": "system.run", "node": n.nodeID, "argv": "echo hi"}; q[0].ReasonCode != agent.ReasonCodeNodeRun || !maps.Equal(q[0].ReasonParams, want) {
		t.Fatalf("reason code %q params %v, want %v", q[0].ReasonCode, q[0].ReasonParams, want)
	}
	ask.mu.Lock()
	ask.yes = true
	ask.mu.Unlock()
	for i := range 2 { // asked again each time, never remembered
		r = e.call(NodesTool, run)
		if r.Status != agent.StatusOK || !contains(string(r.Data), `"stdout":"hi\n"`) || r.LogSummary != "system.run on "+n.nodeID+": ok" {
			t.Fatalf("approved run: %+v", r)
		}
		if got := len(ask.questions()); got != 2+i {
			t.Fatalf("%d questions after run %d, want %d", got, i+1, 2+i)
		}
	}
	if got := n.received(); len(got) != 2 {
		t.Fatalf("node saw %v", got)
	}

	// Other commands ride the session's L3 grant: asked once.
	which := map[string]any{"action": "invoke", "caps": []string{"system"}, "command": "system.which", "params": map[string]any{"command": []string{"which", "git"}}}
	for range 2 {
		if r := e.call(NodesTool, which); r.Status != agent.StatusOK {
			t.Fatalf("which: %+v", r)
		}
	}
	q = ask.questions()
	if len(q) != 4 || q[3].Kind != agent.KindLevel || q[3].Level != agent.L3 {
		t.Fatalf("questions %+v", q)
	}

	// Approved by the person but not by the node's pairing: refused by
	// the gateway, status denied, audited by the service.
	r = e.call(NodesTool, map[string]any{"action": "invoke", "nodeId": n.nodeID, "command": "system.notify", "params": map[string]string{"title": "x"}})
	if r.Status != agent.StatusDenied || !contains(r.Error, "may not run system.notify") {
		t.Fatalf("not approved command: %+v", r)
	}
	if got := len(n.received()); got != 4 {
		t.Fatalf("node saw %d requests, want 4", got)
	}
}

func TestNodesToolWithoutPermissions(t *testing.T) {
	n := newNodeNet(t)
	e := newTestEnv(t, Options{Nodes: &NodesOptions{Nodes: n.svc}})
	r := e.call(NodesTool, map[string]any{"action": "invoke", "nodeId": n.nodeID, "command": "system.which"})
	if r.Status != agent.StatusDenied || !contains(r.Error, "nobody to ask") || len(n.received()) != 0 {
		t.Fatalf("%+v", r)
	}
	if a := e.newest(); a.Result != audit.Denied || a.Operation != NodesTool {
		t.Fatalf("audit %+v", a)
	}
	for _, args := range []map[string]any{
		{"action": "invoke", "command": "system.which"},
		{"action": "invoke", "nodeId": n.nodeID},
		{"action": "describe"},
	} {
		if r := e.call(NodesTool, args); r.Status != agent.StatusError {
			t.Fatalf("%v: %+v", args, r)
		}
	}
}
