package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// TestInvokeBoundPerConnection (issue 21 item 2): at most
// MaxPendingInvokes invokes wait for one node connection; one more is
// answered UNAVAILABLE (retryable) at once, without reaching the node,
// and once an answer frees a place the next invoke is sent again.
func TestInvokeBoundPerConnection(t *testing.T) {
	f := newFixture(t, Options{MaxPendingInvokes: 3})
	n := f.node("busy", []string{"system"}, sysCommands)
	op := f.operator("ui")
	p := map[string]any{"nodeId": n.id, "command": "system.which", "params": map[string]string{"name": "x"}, "timeoutMs": 600_000}
	results := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := invoke(op, p)
			results <- err
		}()
	}
	var reqs []InvokeRequestEvent
	for range 3 {
		reqs = append(reqs, n.request())
	}
	// node.list and node.describe say how many wait (a caller with several
	// candidates picks the freest).
	var d Node
	if err := op.Call(context.Background(), MethodNodeDescribe, map[string]string{"nodeId": n.id}, &d); err != nil || d.InvokesInFlight != 3 {
		t.Fatalf("node.describe with 3 invokes waiting: invokesInFlight %d (%v)", d.InvokesInFlight, err)
	}
	_, err := invoke(op, p)
	wantCode(t, err, gateway.CodeUnavailable, "node busy is busy: 3 invokes wait for it already")
	var ge *gateway.Error
	if !errors.As(err, &ge) || !ge.Retryable || ge.Details["reason"] != ReasonBusy {
		t.Fatalf("busy refusal %+v: want retryable, reason %s", err, ReasonBusy)
	}
	if err := n.answer(reqs[0].ID, map[string]string{"path": "/bin/x"}); err != nil {
		t.Fatal(err)
	}
	if err := <-results; err != nil {
		t.Fatalf("answered invoke: %v", err)
	}
	go func() {
		r := n.request()
		_ = n.answer(r.ID, map[string]string{"path": "/bin/y"})
	}()
	if r, err := invoke(op, p); err != nil || !r.OK {
		t.Fatalf("invoke after a place was freed: %+v %v", r, err)
	}
	for _, r := range reqs[1:] {
		if err := n.answer(r.ID, map[string]string{"path": "/bin/x"}); err != nil {
			t.Fatal(err)
		}
		<-results
	}
	var l struct{ Nodes []Node }
	if err := op.Call(context.Background(), MethodNodeList, nil, &l); err != nil || len(l.Nodes) != 1 || l.Nodes[0].InvokesInFlight != 0 {
		t.Fatalf("node.list once every invoke was answered: %+v (%v)", l.Nodes, err)
	}
}

// TestInvokeNodeAnswersBusy: a node's retryable UNAVAILABLE answer (it
// runs as many commands as it will) fails node.invoke with UNAVAILABLE,
// retryable, which the idempotency cache does not keep: the same
// request (same key) retried later reaches the node again.
func TestInvokeNodeAnswersBusy(t *testing.T) {
	f := newFixture(t, Options{})
	n := f.node("host", []string{"system"}, sysCommands)
	op := f.operator("ui")
	busy := true
	go func() {
		for range 2 {
			r := n.request()
			res := ResultParams{ID: r.ID, OK: true, Payload: json.RawMessage(`{"path":"/bin/x"}`)}
			if busy {
				res = ResultParams{ID: r.ID, Error: &NodeError{Code: gateway.CodeUnavailable, Message: "node busy: 8 commands running", Retryable: true}}
				busy = false
			}
			_ = n.c.Call(context.Background(), MethodInvokeResult, res, nil)
		}
	}()
	p := map[string]any{"nodeId": n.id, "command": "system.which", "params": map[string]string{"name": "x"}, "idempotencyKey": "k-1"}
	_, err := invoke(op, p)
	wantCode(t, err, gateway.CodeUnavailable, "node host: node busy: 8 commands running")
	if ge := (*gateway.Error)(nil); !errors.As(err, &ge) || ge.Details["reason"] != ReasonBusy {
		t.Fatalf("the node's busy answer %+v: want reason %s", err, ReasonBusy)
	}
	if r, err := invoke(op, p); err != nil || !r.OK {
		t.Fatalf("retry with the same key: %+v %v", r, err)
	}
}

// TestInvokeSlowNodeFailsWaitingInvokesAtOnce: a node that stops reading
// fills its send buffer; the gateway closes it as a slow consumer, and
// every invoke waiting for it fails UNAVAILABLE at once, not when its
// timeout or the close grace (here 10 minutes each) runs out.
func TestInvokeSlowNodeFailsWaitingInvokesAtOnce(t *testing.T) {
	f := newFixtureGW(t, Options{MaxPendingInvokes: 400}, func(o *gateway.Options) {
		o.MaxBufferedBytes, o.CloseGrace = 1<<20, 10*time.Minute
	})
	nodeID := stalledNode(t, f)
	op := f.operator("ui")
	big := strings.Repeat("x", 128<<10)
	const n = 300 // 38 MiB: more than the socket buffers and the send queue hold
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := invoke(op, map[string]any{"nodeId": nodeID, "command": "system.run", "timeoutMs": 600_000,
				"params": map[string]any{"command": []string{"echo", big}}})
			errs <- err
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%d of %d invokes still wait for a node that stopped reading", n-len(errs), n)
	}
	close(errs)
	for err := range errs {
		wantCode(t, err, gateway.CodeUnavailable, "node stalled")
	}
}

// stalledNode connects a local node over a bare WebSocket that completes
// the handshake and never reads again; it returns its node id.
func stalledNode(t *testing.T, f *fixture) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, f.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	if _, _, err := ws.Read(ctx); err != nil { // connect.challenge
		t.Fatal(err)
	}
	params, _ := json.Marshal(gateway.ConnectParams{MinProtocol: gateway.ProtocolVersion, MaxProtocol: gateway.ProtocolVersion,
		Client: gateway.ClientInfo{ID: "atrium-node", DisplayName: "stalled", Mode: "node", Platform: "linux", Version: "test"},
		Role:   gateway.RoleNode, Caps: []string{"system"}, Commands: sysCommands, Auth: gateway.ConnectAuth{Token: testToken}})
	req, _ := json.Marshal(gateway.RequestFrame{Type: "req", ID: "1", Method: gateway.MethodConnect, Params: params})
	if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
		t.Fatal(err)
	}
	_, data, err := ws.Read(ctx)
	var res struct {
		OK      bool
		Payload struct{ Server struct{ ConnID string } }
	}
	if err != nil || json.Unmarshal(data, &res) != nil || !res.OK {
		t.Fatalf("stalled node connect: %v %.300s", err, data)
	}
	return "local:" + res.Payload.Server.ConnID
}
