package nodes

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
)

var sysCommands = []string{"system.run", "system.which", "system.notify"}

func TestInvokeRoundTrip(t *testing.T) {
	f := newFixture(t, Options{})
	n := f.node("build-box", []string{"system"}, sysCommands)
	op := f.operator("ui-1")

	var list struct {
		Nodes []Node `json:"nodes"`
	}
	if err := op.Call(context.Background(), MethodNodeList, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Nodes) != 1 || list.Nodes[0].NodeID != n.id || !list.Nodes[0].Connected || list.Nodes[0].DisplayName != "build-box" ||
		strings.Join(list.Nodes[0].Commands, ",") != "system.notify,system.run,system.which" || strings.Join(list.Nodes[0].Caps, ",") != "system" {
		t.Fatalf("node.list %+v", list.Nodes)
	}
	var d Node
	if err := op.Call(context.Background(), MethodNodeDescribe, map[string]string{"nodeId": n.id}, &d); err != nil || d.NodeID != n.id || d.Platform != "linux" {
		t.Fatalf("node.describe %+v %v", d, err)
	}
	err := op.Call(context.Background(), MethodNodeDescribe, map[string]string{"nodeId": "local:nope"}, nil)
	wantCode(t, err, gateway.CodeNotFound, `no node "local:nope"`)

	type res struct {
		r   InvokeResult
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := invoke(op, map[string]any{"nodeId": n.id, "command": "system.which", "params": map[string]string{"name": "sh"}, "timeoutMs": 60000})
		done <- res{r, err}
	}()
	req := n.request()
	if req.Command != "system.which" || string(req.Params) != `{"name":"sh"}` || req.TimeoutMs != 60000 || req.ID == "" {
		t.Fatalf("request %+v", req)
	}
	if err := n.answer(req.ID, map[string]string{"path": "/usr/bin/sh"}); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || !got.r.OK || got.r.NodeID != n.id || got.r.Command != "system.which" || string(got.r.Payload) != `{"path":"/usr/bin/sh"}` {
		t.Fatalf("invoke %+v %v", got.r, got.err)
	}
	// A late second answer for the same id is refused.
	wantCode(t, n.answer(req.ID, map[string]string{}), gateway.CodeNotFound, "no pending invoke")

	// A failure the node reports is a result, not an error.
	go func() {
		r := n.request()
		_ = n.c.Call(context.Background(), MethodInvokeResult, ResultParams{ID: r.ID, Error: &NodeError{Code: "ENOENT", Message: "no such program"}}, nil)
	}()
	r, err := invoke(op, map[string]any{"nodeId": n.id, "command": "system.which", "params": map[string]string{"name": "nope"}})
	if err != nil || r.OK || r.Error == nil || r.Error.Code != "ENOENT" {
		t.Fatalf("failed command: %+v %v", r, err)
	}
	es := f.audits("node.invoke")
	if len(es) != 2 || es[0].Result != audit.Allowed || es[0].Role != "admin" || es[0].Target != n.id+" system.which" {
		t.Fatalf("audit %+v", es)
	}
}

func TestInvokeIdempotent(t *testing.T) {
	f := newFixture(t, Options{})
	n := f.node("box", []string{"system"}, sysCommands)
	op := f.operator("ui")
	var mu sync.Mutex
	seen := 0
	n.serve(func(r InvokeRequestEvent) any {
		mu.Lock()
		defer mu.Unlock()
		seen++
		return map[string]int{"n": seen}
	})
	p := map[string]any{"nodeId": n.id, "command": "system.which", "params": map[string]string{"name": "git"}, "idempotencyKey": "k-1"}
	a, err := invoke(op, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := invoke(op, p) // a retry: the first result, the node not asked again
	if err != nil || string(a.Payload) != `{"n":1}` || string(b.Payload) != `{"n":1}` {
		t.Fatalf("repeat: %s %s %v", a.Payload, b.Payload, err)
	}
	p["idempotencyKey"] = "k-2"
	if c, err := invoke(op, p); err != nil || string(c.Payload) != `{"n":2}` {
		t.Fatalf("new key: %s %v", c.Payload, err)
	}
}

func TestInvokeCommandNotApproved(t *testing.T) {
	f := newFixture(t, Options{})
	n := f.node("box", []string{"system"}, []string{"system.which"})
	op := f.operator("ui")
	_, err := invoke(op, map[string]any{"nodeId": n.id, "command": "system.run", "params": map[string]any{"command": []string{"rm", "-rf", "/"}}})
	wantCode(t, err, gateway.CodeForbidden, "may not run system.run (allowed: system.which)")
	es := f.audits("node.invoke")
	if len(es) != 1 || es[0].Result != audit.Denied || es[0].Target != n.id+" system.run" || es[0].Role != "admin" {
		t.Fatalf("audit %+v", es)
	}
	// Nothing reached the node: the first request it sees is the next,
	// allowed one (events on a connection arrive in order).
	go func() {
		r := n.request()
		if r.Command != "system.which" {
			t.Errorf("the node saw %s first", r.Command)
		}
		_ = n.answer(r.ID, map[string]string{"path": "/bin/ls"})
	}()
	if r, err := invoke(op, map[string]any{"nodeId": n.id, "command": "system.which", "params": map[string]string{"name": "ls"}}); err != nil || !r.OK {
		t.Fatalf("allowed invoke: %+v %v", r, err)
	}
	// Bad params are refused before anything is sent.
	for _, tc := range []struct {
		p    map[string]any
		want string
	}{
		{map[string]any{"nodeId": n.id}, "command is required"},
		{map[string]any{"command": "system.which"}, "nodeId or selector"},
		{map[string]any{"nodeId": n.id, "selector": map[string]any{"caps": []string{"system"}}, "command": "system.which"}, "not both"},
		{map[string]any{"nodeId": n.id, "command": "system.which", "timeoutMs": 600001}, "timeoutMs must be between"},
		{map[string]any{"nodeId": n.id, "command": "system.which", "params": []int{1}}, "params must be a JSON object"},
		{map[string]any{"selector": map[string]any{"caps": []string{}}, "command": "system.which"}, "selector.caps must name"},
	} {
		_, err := invoke(op, tc.p)
		wantCode(t, err, gateway.CodeInvalidRequest, tc.want)
	}
}

func TestInvokeNodeGoneMidInvoke(t *testing.T) {
	f := newFixture(t, Options{})
	n := f.node("laptop", []string{"system"}, sysCommands)
	op := f.operator("ui")
	go func() {
		n.request()
		n.c.Close() // gone before answering
	}()
	_, err := invoke(op, map[string]any{"nodeId": n.id, "command": "system.run", "params": map[string]any{"command": []string{"sleep", "100"}}})
	wantCode(t, err, gateway.CodeUnavailable, "node laptop disconnected")
	// The node is listed as disconnected, and a new invoke says so.
	f.waitFor("node disconnected", func() bool {
		d, err := f.svc.Describe(n.id)
		return err == nil && !d.Connected
	})
	_, err = invoke(op, map[string]any{"nodeId": n.id, "command": "system.run", "params": map[string]any{"command": []string{"true"}}})
	wantCode(t, err, gateway.CodeUnavailable, "node laptop is not connected")
	if ge := (*gateway.Error)(nil); !errors.As(err, &ge) || ge.Details["reason"] != ReasonNotConnected {
		t.Fatalf("invoke of a disconnected node %+v: want reason %s", err, ReasonNotConnected)
	}
	if f.svc.AnyConnected() {
		t.Fatal("AnyConnected with the only node gone")
	}
}

func TestInvokeTimeout(t *testing.T) {
	f := newFixture(t, Options{})
	n := f.node("slow", []string{"system"}, sysCommands)
	op := f.operator("ui")
	// The node receives the request and never answers.
	_, err := invoke(op, map[string]any{"nodeId": n.id, "command": "system.which", "timeoutMs": 50})
	wantCode(t, err, gateway.CodeTimeout, "node slow did not answer system.which within 50 ms")
	r := n.request()
	wantCode(t, n.answer(r.ID, map[string]string{}), gateway.CodeNotFound, "timed out")
}

func TestResultFromAnotherNodeRefused(t *testing.T) {
	f := newFixture(t, Options{})
	a := f.node("a", []string{"system"}, sysCommands)
	b := f.node("b", []string{"system"}, sysCommands)
	op := f.operator("ui")
	done := make(chan InvokeResult, 1)
	go func() {
		r, err := invoke(op, map[string]any{"nodeId": a.id, "command": "system.which", "params": map[string]string{"name": "x"}})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	req := a.request()
	// b learned the id (here from a's event) and answers for a.
	wantCode(t, b.answer(req.ID, map[string]string{"path": "/evil"}), gateway.CodeForbidden, "sent to another node")
	es := f.audits(MethodInvokeResult)
	if len(es) != 1 || es[0].Result != audit.Denied || es[0].Role != "node" || es[0].Target != req.ID {
		t.Fatalf("audit %+v", es)
	}
	// The invoke still waits for a, and gets a's answer.
	if err := a.answer(req.ID, map[string]string{"path": "/usr/bin/x"}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; !r.OK || r.NodeID != a.id || string(r.Payload) != `{"path":"/usr/bin/x"}` {
		t.Fatalf("result %+v", r)
	}
}

func TestInvokeSelectorByCaps(t *testing.T) {
	f := newFixture(t, Options{})
	comp := f.node("computer", []string{"system"}, sysCommands)
	phone := f.node("phone", []string{"location", "system"}, []string{"location.get", "system.notify"})
	comp.serve(func(InvokeRequestEvent) any { return map[string]string{"from": "computer"} })
	phone.serve(func(InvokeRequestEvent) any { return map[string]float64{"lat": 48.85, "lon": 2.35} })
	op := f.operator("ui")

	r, err := invoke(op, map[string]any{"selector": map[string]any{"caps": []string{"location"}}, "command": "location.get"})
	if err != nil || r.NodeID != phone.id || string(r.Payload) != `{"lat":48.85,"lon":2.35}` {
		t.Fatalf("by caps location: %+v %v", r, err)
	}
	// Both have caps system; only the computer may run system.run.
	r, err = invoke(op, map[string]any{"selector": map[string]any{"caps": []string{"system"}}, "command": "system.run", "params": map[string]any{"command": []string{"true"}}})
	if err != nil || r.NodeID != comp.id {
		t.Fatalf("by caps system: %+v %v", r, err)
	}
	_, err = invoke(op, map[string]any{"selector": map[string]any{"caps": []string{"camera"}}, "command": "camera.snap"})
	wantCode(t, err, gateway.CodeNotFound, "no connected node has caps camera")
	_, err = invoke(op, map[string]any{"selector": map[string]any{"caps": []string{"location"}}, "command": "system.run"})
	wantCode(t, err, gateway.CodeForbidden, "no connected node with caps location may run system.run")
	if es := f.audits("node.invoke"); len(es) != 3 || es[0].Result != audit.Denied || es[0].Target != "caps:location system.run" { // newest first
		t.Fatalf("audit %+v", es)
	}
}

func TestInvokeResultTooLarge(t *testing.T) {
	f := newFixture(t, Options{MaxResultBytes: 1 << 10})
	n := f.node("big", []string{"system"}, sysCommands)
	op := f.operator("ui")
	answered := make(chan error, 1)
	go func() {
		r := n.request()
		answered <- n.answer(r.ID, map[string]string{"blob": strings.Repeat("x", 2<<10)})
	}()
	_, err := invoke(op, map[string]any{"nodeId": n.id, "command": "system.run", "params": map[string]any{"command": []string{"cat", "big"}}})
	wantCode(t, err, gateway.CodePayloadTooLarge, "over the 1024-byte inline limit")
	wantCode(t, <-answered, gateway.CodePayloadTooLarge, "inline limit")
}

// Each node method refuses the principals it is not for (the gateway's
// kinds), and the refusal is audited by the gateway's hook in the app; the
// handler-level checks here are the service's own.
func TestNodeMethodsWhoMayCall(t *testing.T) {
	f := newFixture(t, Options{})
	n := f.node("n", []string{"system"}, sysCommands)
	op := f.operator("ui")
	ctx := context.Background()
	for _, tc := range []struct {
		c      *gateway.Client
		method string
		params any
	}{
		{n.c, MethodNodeList, nil},
		{n.c, MethodNodeDescribe, map[string]string{"nodeId": n.id}},
		{n.c, MethodNodeInvoke, map[string]any{"nodeId": n.id, "command": "system.which"}},
		{n.c, MethodExecAskAnswer, map[string]string{"id": "x", "decision": "allow-once"}},
		{n.c, MethodExecAskList, nil},
		{op, MethodInvokeResult, map[string]any{"id": "x", "ok": true}},
		{op, MethodExecAsk, map[string]any{"command": []string{"ls"}}},
	} {
		err := tc.c.Call(ctx, tc.method, tc.params, nil)
		wantCode(t, err, gateway.CodeForbidden, "")
	}
	// presence.update is for every connection.
	for _, c := range []*gateway.Client{n.c, op} {
		if err := c.Call(ctx, MethodPresenceUpdate, map[string]any{"lastInputSeconds": 3}, nil); err != nil {
			t.Fatal(err)
		}
	}
	err := op.Call(ctx, MethodPresenceUpdate, map[string]any{}, nil)
	wantCode(t, err, gateway.CodeInvalidRequest, "lastInputSeconds")
}
