package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
)

const testToken = "test-operator-token-0123456789abcdef"

// fixture is a real gateway on 127.0.0.1 with the nodes service wired
// through its hooks, as backend/atrium does, and a real audit log.
type fixture struct {
	t     testing.TB
	gw    *gateway.Server
	svc   *Service
	al    *audit.Log
	clock *clock
	url   string
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newFixture(t testing.TB, o Options) *fixture {
	t.Helper()
	return newFixtureGW(t, o, nil)
}

// newFixtureGW is newFixture with gw changing the gateway's options.
func newFixtureGW(t testing.TB, o Options, gw func(*gateway.Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: newClock()}
	var err error
	if f.al, err = audit.New(audit.Options{Dir: filepath.Join(t.TempDir(), "audit"), Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	var svc *Service
	gwo := gateway.Options{
		Addr: "127.0.0.1:0", Token: testToken, Logger: quiet(),
		Snapshot:        func() gateway.Snapshot { return gateway.Snapshot{Presence: svc.PresenceSnapshot()} },
		OnAuthenticated: func(ci gateway.ConnInfo) { svc.Connected(ci) },
		OnClosed:        func(ci gateway.ConnInfo) { svc.Disconnected(ci) },
	}
	if gw != nil {
		gw(&gwo)
	}
	f.gw, err = gateway.New(gwo)
	if err != nil {
		t.Fatal(err)
	}
	o.Gateway, o.Audit, o.Logger = f.gw, f.al, quiet()
	if o.Now == nil {
		o.Now = f.clock.Now
	}
	if o.CoalesceDelay == 0 {
		o.CoalesceDelay = 5 * time.Millisecond
	}
	if svc, err = New(o); err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	svc.Register()
	if err := f.gw.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.gw.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway run: %v", err)
		}
	})
	f.url = "ws://" + f.gw.Addr() + "/ws"
	return f
}

func (f *fixture) dial(o gateway.ClientOptions) *gateway.Client {
	f.t.Helper()
	o.URL, o.Token = f.url, testToken
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := gateway.Dial(ctx, o)
	if err != nil {
		f.t.Fatalf("dial: %v", err)
	}
	f.t.Cleanup(func() { c.Close() })
	// The gateway's OnAuthenticated has run before hello-ok is written:
	// the service knows the connection already.
	id := c.Hello().Server.ConnID
	f.svc.mu.Lock()
	known := f.svc.peers[id] != nil
	f.svc.mu.Unlock()
	if !known {
		f.t.Fatalf("connection %s has hello-ok but the nodes service does not know it", id)
	}
	return c
}

// operator connects as the local operator (admin).
func (f *fixture) operator(instance string) *gateway.Client {
	return f.dial(gateway.ClientOptions{Client: gateway.ClientInfo{ID: "test-ui", InstanceID: instance, Mode: "ui", Platform: "linux"}})
}

// node connects as a local node declaring caps and commands.
func (f *fixture) node(name string, caps, commands []string) *testNode {
	c := f.dial(gateway.ClientOptions{Role: gateway.RoleNode, Caps: caps, Commands: commands,
		Client: gateway.ClientInfo{ID: "atrium-node", DisplayName: name, InstanceID: "inst-" + name, Mode: "node", Platform: "linux", Version: "test"}})
	return &testNode{t: f.t, c: c, id: "local:" + c.Hello().Server.ConnID}
}

// waitFor polls cond until it holds (a generous bound for a loaded
// machine, not a timing assertion).
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// audits returns the audit entries of operation op.
func (f *fixture) audits(op string) []audit.Entry {
	f.t.Helper()
	es, err := f.al.Tail(10000, audit.Filter{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []audit.Entry
	for _, e := range es {
		if e.Operation == op {
			out = append(out, e)
		}
	}
	return out
}

type testNode struct {
	t  testing.TB
	c  *gateway.Client
	id string
}

// next returns the next event named name (others are skipped).
func nextEvent(t testing.TB, c *gateway.Client, name string) gateway.EventFrame {
	t.Helper()
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection closed while waiting for %s", name)
			}
			if ev.Event == name {
				return ev
			}
		case <-timeout.C:
			t.Fatalf("no %s event", name)
		}
	}
}

// request waits for the next node.invoke.request.
func (n *testNode) request() InvokeRequestEvent {
	n.t.Helper()
	var r InvokeRequestEvent
	if err := json.Unmarshal(nextEvent(n.t, n.c, EventInvokeRequest).Payload, &r); err != nil {
		n.t.Fatal(err)
	}
	return r
}

func (n *testNode) answer(id string, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		n.t.Fatal(err)
	}
	return n.c.Call(context.Background(), MethodInvokeResult, ResultParams{ID: id, OK: true, Payload: b}, nil)
}

// serve answers every request with fn's payload until the connection ends.
func (n *testNode) serve(fn func(InvokeRequestEvent) any) {
	go func() {
		for ev := range n.c.Events() {
			if ev.Event != EventInvokeRequest {
				continue
			}
			var r InvokeRequestEvent
			if json.Unmarshal(ev.Payload, &r) != nil {
				continue
			}
			b, _ := json.Marshal(fn(r))
			_ = n.c.Call(context.Background(), MethodInvokeResult, ResultParams{ID: r.ID, OK: true, Payload: b}, nil)
		}
	}()
}

// invoke calls node.invoke and returns the result or the *gateway.Error.
func invoke(c *gateway.Client, p map[string]any) (InvokeResult, error) {
	var r InvokeResult
	err := c.Call(context.Background(), MethodNodeInvoke, p, &r)
	return r, err
}

func wantCode(t testing.TB, err error, code, msgPart string) {
	t.Helper()
	var ge *gateway.Error
	if !errors.As(err, &ge) {
		t.Fatalf("error %v, want %s", err, code)
	}
	if ge.Code != code || !strings.Contains(ge.Message, msgPart) {
		t.Fatalf("error %s: %s, want %s containing %q", ge.Code, ge.Message, code, msgPart)
	}
}
