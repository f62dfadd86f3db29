package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/nodehost"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// hostRun is an `atrium node` host (package nodehost) paired with the app.
type hostRun struct {
	st       *nodehost.State
	mu       sync.Mutex
	statuses []string
}

func (h *hostRun) saw(state string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.statuses, state)
}

// token is the node token in node.json.
func (h *hostRun) token() string { return h.st.Config().Tokens[gateway.RoleNode] }

// pairHost starts a node host with a setup code from admin, approves its
// request and waits until it is connected as a paired node. o.State and
// o.Target are filled in; exec approvals are "full".
func pairHost(ctx context.Context, t *testing.T, a *App, admin *gateway.Client, o nodehost.Options) *hostRun {
	t.Helper()
	st, err := nodehost.OpenState(filepath.Join(t.TempDir(), "node"), nil)
	must(t, err)
	ap := nodehost.DefaultApprovals()
	ap.Mode = nodehost.ModeFull
	b, _ := json.Marshal(ap)
	must(t, os.WriteFile(filepath.Join(st.Dir, nodehost.ApprovalsFileName), b, 0o600))
	hr := &hostRun{st: st}
	o.State, o.Target = st, nodehost.Target{URL: a.WSURL(), GatewayID: a.Identity.ID, SetupCode: pairCode(ctx, t, admin)}
	o.MinBackoff, o.MaxBackoff, o.DisplayName = 20*time.Millisecond, 200*time.Millisecond, "burst-box"
	o.OnStatus = func(s nodehost.Status) {
		hr.mu.Lock()
		hr.statuses = append(hr.statuses, s.State)
		hr.mu.Unlock()
	}
	h, err := nodehost.New(o)
	must(t, err)
	hctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(hctx) }()
	t.Cleanup(func() { cancel(); <-done })
	approvePending(ctx, t, admin, st.DeviceID())
	waitNode(ctx, t, a, st.DeviceID(), "")
	return hr
}

// approvePending approves the pending request of device dev.
func approvePending(ctx context.Context, t *testing.T, admin *gateway.Client, dev string) {
	t.Helper()
	for {
		var l struct {
			Pending []struct{ RequestID, DeviceID string }
		}
		must(t, admin.Call(ctx, "device.pair.list", map[string]any{}, &l))
		for _, r := range l.Pending {
			if r.DeviceID == dev {
				must(t, admin.Call(ctx, "device.pair.approve", map[string]any{"requestId": r.RequestID}, nil))
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no pairing request of %s", dev)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitNode waits until node id is connected on a connection other than
// notConn and returns its newest connection's id.
func waitNode(ctx context.Context, t *testing.T, a *App, id, notConn string) string {
	t.Helper()
	for {
		cs := a.Gateway.Conns(func(ci gateway.ConnInfo) bool {
			return ci.Principal.Role == gateway.RoleNode && ci.Principal.Device == id && ci.ConnID != notConn
		})
		if d, err := a.Nodes.Describe(id); err == nil && d.Connected && len(cs) > 0 {
			return cs[0].ConnID
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %s never connected", id)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// burst sends n concurrent node.invoke system.run "sleep 1" to node id
// over conns admin connections, calls mid once about half of them have
// been sent, and returns how many ran; every other answer must be
// UNAVAILABLE (the node busy, its queue at the gateway full, or the node
// gone), never a TIMEOUT nor anything else.
func burst(ctx context.Context, t *testing.T, conns []*gateway.Client, id string, n int, mid func()) int {
	t.Helper()
	var ran, busy atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		if i == n/2 {
			mid()
		}
		c := conns[i%len(conns)]
		wg.Go(func() {
			var r nodes.InvokeResult
			err := c.Call(ctx, nodes.MethodNodeInvoke, map[string]any{"nodeId": id, "command": "system.run",
				"params": map[string]any{"command": []string{"sleep", "1"}}, "timeoutMs": 20_000}, &r)
			var ge *gateway.Error
			switch {
			case err == nil && r.OK:
				ran.Add(1)
			case errors.As(err, &ge) && ge.Code == gateway.CodeUnavailable && ge.Retryable:
				busy.Add(1)
			case err == nil:
				errs <- fmt.Errorf("invoke %d: a failed result %+v %s", i, r.Error, r.Payload)
			default:
				errs <- fmt.Errorf("invoke %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("burst of %d: %d ran, %d UNAVAILABLE", n, ran.Load(), busy.Load())
	return int(ran.Load())
}

// TestNodeHostBurstRealGateway (issue 21 item 2): the real app and a real
// `atrium node` host paired with it; 1,000 concurrent node.invoke of
// system.run "sleep 1". Every caller gets the result or an immediate
// UNAVAILABLE, none a TIMEOUT (the host's client used to drop what did
// not fit its 256-event queue, and those callers waited 30 s). A token
// rotation in the middle of the burst reaches the host (it reconnects
// with the new token, no repair), and a revocation in the middle of a
// second burst closes it and makes it ask for a repair.
func TestNodeHostBurstRealGateway(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "burst-admin")
	hr := pairHost(ctx, t, a, admin, nodehost.Options{})
	dev := hr.st.DeviceID()
	var conns []*gateway.Client
	for i := range 4 {
		conns = append(conns, gwDial(ctx, t, a, gateway.RoleOperator, fmt.Sprintf("burst-%d", i)))
	}

	old := hr.token()
	if ran := burst(ctx, t, conns, dev, 1000, func() {
		var r struct{ Delivered int }
		must(t, admin.Call(ctx, "device.token.rotate", map[string]any{"deviceId": dev, "role": gateway.RoleNode}, &r))
		if r.Delivered != 1 {
			t.Errorf("rotation delivered to %d connections", r.Delivered)
		}
	}); ran == 0 {
		t.Fatal("nothing ran")
	}
	for hr.token() == old {
		select {
		case <-ctx.Done():
			t.Fatal("the rotated token never reached node.json")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// The saved token is the gateway's: a reconnect is admitted with it.
	first := waitNode(ctx, t, a, dev, "")
	a.Gateway.CloseWhere(func(ci gateway.ConnInfo) bool { return ci.ConnID == first }, 1001, "test reconnect")
	waitNode(ctx, t, a, dev, first)
	if hr.saw("repair") {
		t.Fatal("the host asked for a repair after the rotation: it kept an old token")
	}

	burst(ctx, t, conns, dev, 1000, func() {
		must(t, admin.Call(ctx, "device.token.revoke", map[string]any{"deviceId": dev, "role": gateway.RoleNode}, nil))
	})
	for !hr.saw("repair") {
		select {
		case <-ctx.Done():
			t.Fatal("the host never saw the revocation")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestNodeConnectionsKeepTheirCommands (issue 21 item 7): two node
// connections of one paired device declare different commands; each keeps
// its own (declared ∩ approved), describe lists both, and an invoke goes
// to the connection that may run the command, by node id or by caps. The
// registry used to take the node's commands, and the invoke target, from
// the newest connection only.
func TestNodeConnectionsKeepTheirCommands(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "conns-admin")
	key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleNode}, []string{"system.run", "system.which"})
	dev := key.Public().ID()
	conn := func(name string, commands []string) *gateway.Client {
		c, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleNode], Role: gateway.RoleNode,
			Caps: []string{"system"}, Commands: commands,
			Client: gateway.ClientInfo{ID: "atrium-node", Version: name, Platform: "linux", Mode: "node", DisplayName: "box", InstanceID: "inst-" + name}})
		must(t, err)
		go func() {
			for ev := range c.Events() {
				var r nodes.InvokeRequestEvent
				if ev.Event != nodes.EventInvokeRequest || json.Unmarshal(ev.Payload, &r) != nil {
					continue
				}
				_ = c.Call(context.Background(), nodes.MethodInvokeResult, map[string]any{"id": r.ID, "ok": true,
					"payload": map[string]string{"from": name, "command": r.Command}}, nil)
			}
		}()
		return c
	}
	older := conn("older", []string{"system.run", "system.notify"}) // system.notify was not approved
	newer := conn("newer", []string{"system.which"})

	d, err := a.Nodes.Describe(dev)
	must(t, err)
	if strings.Join(d.Commands, ",") != "system.run,system.which" || len(d.Connections) != 2 ||
		d.Connections[0].InstanceID != "inst-newer" || strings.Join(d.Connections[0].Commands, ",") != "system.which" ||
		d.Connections[1].InstanceID != "inst-older" || strings.Join(d.Connections[1].Commands, ",") != "system.run" {
		t.Fatalf("describe: %+v", d)
	}
	invoke := func(p map[string]any) (string, error) {
		var r nodes.InvokeResult
		err := admin.Call(ctx, nodes.MethodNodeInvoke, p, &r)
		var out struct{ From string }
		_ = json.Unmarshal(r.Payload, &out)
		return out.From, err
	}
	for _, tc := range []struct {
		p    map[string]any
		want string
	}{
		{map[string]any{"nodeId": dev, "command": "system.run", "params": map[string]any{"command": []string{"true"}}}, "older"},
		{map[string]any{"nodeId": dev, "command": "system.which", "params": map[string]string{"name": "sh"}}, "newer"},
		{map[string]any{"selector": map[string]any{"caps": []string{"system"}}, "command": "system.run"}, "older"},
		{map[string]any{"selector": map[string]any{"caps": []string{"system"}}, "command": "system.which"}, "newer"},
	} {
		if from, err := invoke(tc.p); err != nil || from != tc.want {
			t.Fatalf("invoke %v: answered by %q (%v), want %q", tc.p, from, err, tc.want)
		}
	}
	if _, err := invoke(map[string]any{"nodeId": dev, "command": "system.notify", "params": map[string]string{"title": "x"}}); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("a command declared but not approved: %v, want FORBIDDEN", err)
	}
	// The newer connection goes: the node is what the older one offers.
	must(t, newer.Close())
	for {
		if d, err = a.Nodes.Describe(dev); err == nil && len(d.Connections) == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("describe after a close: %+v %v", d, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if strings.Join(d.Commands, ",") != "system.run" || d.Version != "older" {
		t.Fatalf("describe with the older connection alone: %+v", d)
	}
	if _, err := invoke(map[string]any{"nodeId": dev, "command": "system.which", "params": map[string]string{"name": "sh"}}); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("system.which with no connection offering it: %v, want FORBIDDEN", err)
	}
	_ = older
}

// TestNodeHostReportsLastInput (issue 21 item 7): a paired `atrium node`
// sends presence.update with what its platform says of the person's last
// input; the app's presence list shows it, and a platform that can no
// longer tell clears it (null) instead of leaving an old number.
func TestNodeHostReportsLastInput(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "input-admin")
	var known atomic.Bool
	known.Store(true)
	hr := pairHost(ctx, t, a, admin, nodehost.Options{PresenceInterval: 20 * time.Millisecond,
		LastInput: func() (time.Duration, bool) { return 42 * time.Second, known.Load() }})
	entry := func() *float64 {
		for _, e := range a.Nodes.Presence().List() {
			if e.DeviceID == hr.st.DeviceID() && e.Connected {
				return e.LastInputSeconds
			}
		}
		return nil
	}
	for v := entry(); v == nil || *v != 42; v = entry() {
		select {
		case <-ctx.Done():
			t.Fatal("the node's presence entry never got lastInputSeconds 42")
		case <-time.After(10 * time.Millisecond):
		}
	}
	known.Store(false)
	for entry() != nil {
		select {
		case <-ctx.Done():
			t.Fatal("lastInputSeconds stayed after the platform stopped knowing it")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
