package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/atrium-dev/atrium/backend/device"
)

const testGatewayID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// testDeviceAuth is an Authenticate hook over real device proofs: it
// verifies the v2 signature for testGatewayID and this connection's
// nonce, then admits by the device token ("tok-operator", "tok-node") or
// a setup code (pending), else NOT_PAIRED.
func testDeviceAuth(_ context.Context, r *AuthRequest) (*AuthResult, error) {
	d := r.Params.Device
	if d == nil {
		return nil, Errorf(CodeUnauthorized, "device proof required")
	}
	key, err := device.DecodePublicKey(d.Algorithm, d.PublicKey)
	if err != nil {
		return nil, Errorf(CodeUnauthorized, "bad key: %v", err)
	}
	sig, err := device.DecodeBase64(d.Signature)
	if err != nil {
		return nil, Errorf(CodeUnauthorized, "bad signature encoding")
	}
	token := r.Params.Auth.DeviceToken
	if token == "" {
		token = strings.ReplaceAll(r.Params.Auth.SetupCode, "-", "")
	}
	id, err := device.VerifyConnect(device.Proof{ID: d.ID, Key: key, Signature: sig, SignedAt: d.SignedAt, Nonce: d.Nonce},
		device.Payload{Version: 2, ClientID: r.Params.Client.ID, Mode: r.Params.Client.Mode, Role: r.Params.Role,
			Scopes: r.Params.Scopes, Token: token},
		device.Expect{GatewayID: testGatewayID, Nonce: r.Nonce, Now: r.Now})
	if err != nil {
		return nil, Errorf(CodeUnauthorized, "device signature: %v", err)
	}
	switch {
	case r.Params.Auth.DeviceToken == "tok-"+r.Params.Role:
		res := &AuthResult{Principal: Principal{Role: r.Params.Role, Device: id}, Status: AuthPaired}
		for _, c := range r.Params.Commands {
			if c != "system.run" { // "approved": everything but system.run
				res.Commands = append(res.Commands, c)
			}
		}
		res.Caps = r.Params.Caps
		return res, nil
	case r.Params.Auth.SetupCode != "":
		return &AuthResult{Principal: Principal{Role: RoleUnpaired, Device: id}, Status: AuthPending, RequestID: "req-1"}, nil
	}
	return nil, Errorf(CodeNotPaired, "device %s is not paired", id)
}

// TestPrincipalsAndCallers: the five principal classes connect (the
// operator token, device tokens, a setup code, all with real device
// keys), hello-ok says how each was admitted, and every method is called
// by every class: those its kind names run, the others are FORBIDDEN
// before the handler and reach OnForbidden.
func TestPrincipalsAndCallers(t *testing.T) {
	var mu sync.Mutex
	var ran, refused []string
	var authed, closed []ConnInfo
	handler := func(_ context.Context, call *Call) (any, error) {
		mu.Lock()
		ran = append(ran, call.Principal.Class().String()+" "+call.Method)
		mu.Unlock()
		return map[string]any{"caps": call.Caps, "commands": call.Commands, "device": call.Principal.Device}, nil
	}
	methods := map[string]Kind{"pub": Read(Everyone), "op": Read(Operators), "adm": Write(Admin),
		"nd": Write(Nodes), "unp": Read(Unpaired), "opdev": Read(OperatorDevice)}
	s, url := newTestServer(t, Options{GatewayID: testGatewayID, Authenticate: testDeviceAuth,
		Snapshot:        func() Snapshot { return Snapshot{Profiles: []any{"main"}, Presence: []any{"desk"}} },
		OnAuthenticated: func(ci ConnInfo) { mu.Lock(); authed = append(authed, ci); mu.Unlock() },
		OnClosed:        func(ci ConnInfo) { mu.Lock(); closed = append(closed, ci); mu.Unlock() },
	}, func(s *Server) {
		for m, k := range methods {
			s.Handle(m, k, handler)
		}
		s.OnForbidden(func(call *Call, reason string) {
			mu.Lock()
			refused = append(refused, call.Principal.Class().String()+" "+call.Method)
			mu.Unlock()
		})
	})
	ctx := context.Background()
	dev := func(role, tok, code string, caps, cmds []string) *Client {
		t.Helper()
		k, err := device.GenerateKey(device.Ed25519)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Dial(ctx, ClientOptions{URL: url, Device: k, GatewayID: testGatewayID, DeviceToken: tok, SetupCode: code,
			Role: role, Caps: caps, Commands: cmds, Client: ClientInfo{ID: "test-" + role, Mode: "test", DisplayName: "Pixel"}})
		if err != nil {
			t.Fatalf("dial %s: %v", role, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	admin, err := Dial(ctx, ClientOptions{URL: url, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	local, err := Dial(ctx, ClientOptions{URL: url, Token: testToken, Role: RoleNode, Caps: []string{"system"}, Commands: []string{"system.run"}})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	clients := map[Callers]*Client{
		Admin:          admin,
		LocalNode:      local,
		OperatorDevice: dev(RoleOperator, "tok-operator", "", nil, nil),
		NodeDevice:     dev(RoleNode, "tok-node", "", []string{"system"}, []string{"system.run", "system.which"}),
		Unpaired:       dev(RoleNode, "", "ABCD-EFGH", nil, nil),
	}
	wantStatus := map[Callers]string{Admin: AuthOperator, LocalNode: AuthOperator, OperatorDevice: AuthPaired, NodeDevice: AuthPaired, Unpaired: AuthPending}
	for cls, c := range clients {
		a := c.Auth()
		if a.Status != wantStatus[cls] || a.GatewayID != testGatewayID || c.Hello().Server.GatewayID != testGatewayID {
			t.Errorf("%s: hello-ok auth %+v server %+v", cls, a, c.Hello().Server)
		}
		if (cls == Unpaired) != (a.RequestID == "req-1") || (a.DeviceID == "") != (cls == Admin || cls == LocalNode) {
			t.Errorf("%s: hello-ok auth %+v", cls, a)
		}
		snap := c.Hello().Snapshot
		if want := Operators.Has(cls); (len(snap.Profiles) == 1 && len(snap.Presence) == 1) != want || snap.Profiles == nil || snap.Presence == nil {
			t.Errorf("%s: hello-ok snapshot %+v (the person's connections only)", cls, snap)
		}
		var callable []string
		for _, m := range []string{"adm", "nd", "op", "opdev", "pub", "unp"} {
			k := methods[m]
			if k.Who.Has(cls) {
				callable = append(callable, m)
			}
			var out struct {
				Commands []string
				Device   string
			}
			err := c.Call(ctx, m, map[string]any{}, &out)
			var ge *Error
			switch {
			case k.Who.Has(cls) && err != nil:
				t.Errorf("%s may call %s: %v", cls, m, err)
			case !k.Who.Has(cls) && (!errors.As(err, &ge) || ge.Code != CodeForbidden):
				t.Errorf("%s calling %s: %v, want FORBIDDEN", cls, m, err)
			case !k.Who.Has(cls) && !strings.Contains(ge.Message, "only "+k.Who.String()+" may call it"):
				t.Errorf("%s calling %s: message %q", cls, m, ge.Message)
			case err == nil && out.Device != c.Auth().DeviceID:
				t.Errorf("%s calling %s: call.Principal.Device %q, want %q", cls, m, out.Device, c.Auth().DeviceID)
			}
			if err == nil && cls == NodeDevice && !slices.Equal(out.Commands, []string{"system.which"}) {
				t.Errorf("node device: call.Commands %v, want the approved [system.which]", out.Commands)
			}
			if err == nil && cls == LocalNode && !slices.Equal(out.Commands, []string{"system.run"}) {
				t.Errorf("local node: call.Commands %v, want the declared [system.run]", out.Commands)
			}
		}
		if got := c.Hello().Features.Callable; !slices.Equal(got, callable) {
			t.Errorf("%s: features.callable %v, want %v", cls, got, callable)
		}
	}
	mu.Lock()
	nRan, nRefused := len(ran), len(refused)
	mu.Unlock()
	if nRan+nRefused != 5*len(methods) || nRefused == 0 {
		t.Errorf("ran %d, refused %d; want %d calls in all", nRan, nRefused, 5*len(methods))
	}

	// ConnInfo hooks and CloseWhere: close the node device with 4001.
	mu.Lock()
	if len(authed) != 5 {
		t.Errorf("OnAuthenticated heard %d connections, want 5", len(authed))
	}
	mu.Unlock()
	nodeDev := clients[NodeDevice].Auth().DeviceID
	if n := s.CloseWhere(func(ci ConnInfo) bool { return ci.Principal.Device == nodeDev }, CloseUnauthorized, "device token revoked"); n != 1 {
		t.Fatalf("CloseWhere closed %d", n)
	}
	<-clients[NodeDevice].Done()
	if code := websocket.CloseStatus(clients[NodeDevice].Err()); code != CloseUnauthorized {
		t.Errorf("closed node device: %v, want 4001", clients[NodeDevice].Err())
	}
	waitFor(t, "OnClosed for the node device", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(closed, func(ci ConnInfo) bool {
			return ci.Principal.Device == nodeDev && slices.Equal(ci.Caps, []string{"system"}) && ci.Client.DisplayName == "Pixel"
		})
	})
	if got := s.Conns(func(ci ConnInfo) bool { return ci.Principal.Device == nodeDev }); len(got) != 0 {
		t.Errorf("Conns still lists the closed device: %+v", got)
	}
	if got := s.Conns(nil); len(got) != 4 {
		t.Errorf("Conns: %d connections, want 4", len(got))
	}
}

// TestOperatorTokenLoopbackOnly: through ExternalHandler (a LAN listener)
// the operator token is FORBIDDEN and the refusal reaches OnForbidden as
// a connect; a device is still admitted there. Handler decides by the
// connection's local address.
func TestOperatorTokenLoopbackOnly(t *testing.T) {
	var mu sync.Mutex
	var refused []string
	s, err := New(Options{Token: testToken, GatewayID: testGatewayID, Authenticate: testDeviceAuth, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("pub", Read(Everyone), echo)
	s.OnForbidden(func(call *Call, reason string) {
		mu.Lock()
		refused = append(refused, call.Method+": "+reason)
		mu.Unlock()
	})
	hs := httptest.NewServer(s.ExternalHandler())
	defer hs.Close()
	url := "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
	c := dial(t, url, nil)
	c.readChallenge()
	f := c.call("c1", MethodConnect, connectParams(testToken))
	if f.OK || f.Error.Code != CodeForbidden || !strings.Contains(f.Error.Message, "loopback only; pair this device") {
		t.Fatalf("operator token on an external listener: %+v", f)
	}
	c.expectClose(CloseUnauthorized, "loopback only")
	mu.Lock()
	if len(refused) != 1 || !strings.HasPrefix(refused[0], "connect: operator token") {
		t.Errorf("OnForbidden heard %q", refused)
	}
	mu.Unlock()
	k, _ := device.GenerateKey(device.ECDSAP256)
	d, err := Dial(context.Background(), ClientOptions{URL: url, Device: k, GatewayID: testGatewayID, DeviceToken: "tok-operator",
		Client: ClientInfo{ID: "phone", Mode: "ui"}})
	if err != nil {
		t.Fatalf("device on an external listener: %v", err)
	}
	d.Close()

	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, true},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 1}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 1}, true},
		{&net.TCPAddr{IP: net.IPv4(192, 168, 1, 5), Port: 1}, false},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 1}, false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/ws", nil)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.addr))
		if got := onLoopbackListener(r); got != tc.want {
			t.Errorf("local address %v: loopback %v, want %v", tc.addr, got, tc.want)
		}
		r = r.WithContext(context.WithValue(r.Context(), externalKey{}, true))
		if onLoopbackListener(r) {
			t.Errorf("local address %v through ExternalHandler counted as loopback", tc.addr)
		}
	}
}

// TestDeviceConnectRefusals: a device proof signed for another gateway,
// a NOT_PAIRED device, and a device connect on a gateway without the
// hook are refused with their codes, closed with 4001 and reported to
// OnForbidden.
func TestDeviceConnectRefusals(t *testing.T) {
	var mu sync.Mutex
	var refused []string
	_, url := newTestServer(t, Options{GatewayID: testGatewayID, Authenticate: testDeviceAuth}, func(s *Server) {
		s.OnForbidden(func(call *Call, reason string) {
			mu.Lock()
			refused = append(refused, call.Method+" "+call.Principal.Device)
			mu.Unlock()
		})
	})
	_, plain := newTestServer(t, Options{}, nil)
	k, _ := device.GenerateKey(device.Ed25519)
	ctx := context.Background()
	for _, tc := range []struct {
		name, url, gw, tok, code string
	}{
		{"another gateway's signature", url, strings.Repeat("f", 64), "tok-operator", CodeUnauthorized},
		{"not paired", url, testGatewayID, "", CodeNotPaired},
		{"no hook", plain, testGatewayID, "tok-operator", CodeUnauthorized},
	} {
		_, err := Dial(ctx, ClientOptions{URL: tc.url, Device: k, GatewayID: tc.gw, DeviceToken: tc.tok, Client: ClientInfo{ID: "x"}})
		var ge *Error
		if !errors.As(err, &ge) || ge.Code != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"connect " + k.Public().ID(), "connect " + k.Public().ID()}; !slices.Equal(refused, want) {
		t.Errorf("OnForbidden heard %q, want %q", refused, want)
	}
}

func TestCloseReason(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	got := closeReason(long)
	if len(got) > maxCloseReason || !utf8.ValidString(got) || !strings.HasPrefix(long, got) || len(got) < maxCloseReason-1 {
		t.Fatalf("closeReason cut to %d bytes: %q", len(got), got)
	}
	if closeReason("short") != "short" {
		t.Fatal("a short reason was changed")
	}
}

// TestHooksRunBeforeHelloOK: a client that has hello-ok is known to the
// OnAuthenticated listeners (node registry, presence), so a call made
// right after connecting finds its connection. The hook waits until the
// client has hello-ok, which it must not have while the hook runs; on a
// gateway that keeps the order that wait runs out (a bound, never the
// check: a slow machine can only hide the fault, not fail the fixed code).
func TestHooksRunBeforeHelloOK(t *testing.T) {
	gotHello, hookDone := make(chan struct{}), make(chan bool, 1)
	_, url := newTestServer(t, Options{OnAuthenticated: func(ConnInfo) {
		bound := time.NewTimer(100 * time.Millisecond)
		defer bound.Stop()
		select {
		case <-gotHello:
			hookDone <- false
		case <-bound.C:
			hookDone <- true
		}
	}}, nil)
	connect(t, url)
	close(gotHello)
	if !<-hookDone {
		t.Fatal("the client had hello-ok while OnAuthenticated was still running")
	}
}
