package atrium

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// TestAgentNodesTool: in the real app, a local node connects over the
// gateway (caps system, commands system.run and system.which) and shows in
// presence; an agent's chat run calls the nodes tool to run a command on it
// by caps; the person is asked (kind node, L3) and allows it; the node gets
// node.invoke.request and answers; the answer reaches the model; the tool's
// decision and the invoke are both audited.
func TestAgentNodesTool(t *testing.T) {
	mdl := newScriptModel(t,
		modeltest.Turn{Calls: [][2]string{{"nodes", `{"action":"invoke","caps":["system"],"command":"system.run","params":{"command":["uname","-s"]}}`}}},
		modeltest.Turn{Text: "The node runs Linux."},
	)
	env := map[string]string{"OPENAI_BASE_URL": mdl.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "scripted"}
	a, _ := startApp(t, func(k string) string { return env[k] })
	must(t, a.Memory.Sync(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token, Role: gateway.RoleNode,
		Caps: []string{"system"}, Commands: []string{"system.run", "system.which"},
		Client: gateway.ClientInfo{ID: "atrium-node", DisplayName: "build-box", InstanceID: "node-inst-1", Mode: "node", Platform: "linux", Version: "test"}})
	must(t, err)
	t.Cleanup(func() { node.Close() })
	nodeID := "local:" + node.Hello().Server.ConnID
	for _, err := a.Nodes.Describe(nodeID); err != nil; _, err = a.Nodes.Describe(nodeID) {
		select {
		case <-ctx.Done():
			t.Fatal("node never registered")
		case <-time.After(5 * time.Millisecond):
		}
	}
	got := make(chan nodes.InvokeRequestEvent, 1)
	go func() {
		for ev := range node.Events() {
			if ev.Event != nodes.EventInvokeRequest {
				continue
			}
			var r nodes.InvokeRequestEvent
			if json.Unmarshal(ev.Payload, &r) != nil {
				continue
			}
			got <- r
			_ = node.Call(context.Background(), nodes.MethodInvokeResult, map[string]any{"id": r.ID, "ok": true,
				"payload": map[string]any{"exitCode": 0, "stdout": "Linux\n", "stderr": ""}}, nil)
		}
	}()

	// The node is in the presence list a new operator connection gets.
	var snap []nodes.PresenceEntry
	b, _ := json.Marshal(gwDial(ctx, t, a, gateway.RoleOperator, "watcher").Hello().Snapshot.Presence)
	must(t, json.Unmarshal(b, &snap))
	found := false
	for _, e := range snap {
		if e.InstanceID == "node-inst-1" && e.Connected && e.Host == "build-box" && e.Role == gateway.RoleNode {
			found = true
		}
	}
	if !found {
		t.Fatalf("node not in hello-ok presence: %+v", snap)
	}

	cl := dial(t, a)
	var kinds []string
	var r1 struct{ RunID string }
	cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": "s-n", "message": "which OS does the build box run?"}, &r1)
	follow(t, cl, r1.RunID, onAsk(t, func(p permissionReq) {
		kinds = append(kinds, p.Kind+"/"+string(p.Level))
		if p.Tool != "nodes" || !strings.Contains(p.Reason, "run system.run on a node with caps system: uname -s") {
			t.Errorf("question %+v", p)
		}
		cl.ok("agent.permission.answer", map[string]any{"id": p.ID, "allow": true}, nil)
	}))
	if strings.Join(kinds, ",") != "node/L3" {
		t.Fatalf("questions %v, want one node question at L3", kinds)
	}
	if r := <-got; r.Command != "system.run" || string(r.Params) != `{"command":["uname","-s"]}` {
		t.Fatalf("node got %+v", r)
	}
	for _, c := range mdl.Request(1).ToolMessages() {
		if !strings.Contains(c, `Linux\n`) || !strings.Contains(c, nodeID) {
			t.Fatalf("the model saw %s", c)
		}
	}
	es, err := a.Audit.Tail(50, audit.Filter{})
	must(t, err)
	var tool, inv bool
	for _, e := range es {
		tool = tool || e.Operation == "nodes" && e.Role == "main" && e.Result == audit.Allowed && e.Target == "a node with caps system system.run"
		inv = inv || e.Operation == "node.invoke" && e.Role == "agent:main" && e.Result == audit.Allowed && e.Target == nodeID+" system.run"
	}
	if !tool || !inv {
		t.Fatalf("audit (tool %v, invoke %v): %+v", tool, inv, es)
	}
}
