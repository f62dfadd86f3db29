package nodehost

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/gwid"
)

// testGW is a real gateway (gateway.Server over TLS on 127.0.0.2, the LAN
// handler) whose device admission follows the contract of issue 16 with a
// small in-memory store: verified v2 proofs, device tokens per device, one
// setup code, pending requests (pairing or repair), approval delivering the
// token on the pending connection. It survives restarts like a real
// gateway's state.db: the store lives in testGW, the server is rebuilt.
type testGW struct {
	t       *testing.T
	id      string
	cert    *gwid.Cert
	certDir string
	addr    string // host:port, kept across restarts

	mu       sync.Mutex
	code     string
	tokens   map[string]string // deviceId → node token
	held     map[string]string // deviceId → token approved but not yet used (delivered in hello-ok)
	pending  map[string]*pendingReq
	asks     []AskRequest
	answer   string // node.exec.ask decision
	results  chan invokeResult
	requests chan *pendingReq
	srv      *gateway.Server
	hs       *http.Server
	tick     time.Duration // the gateway's tick interval (default 1 h: none in a test)
	// limited setup-code connects are refused rate_limited with
	// retryAfter (retryAfterMs); codeTries are the times of all of them.
	limited    int
	retryAfter time.Duration
	codeTries  []time.Time
}

type pendingReq struct {
	ID, DeviceID, ConnID string
	Repair               bool
}

func newTestGW(t *testing.T) *testGW { return newTestGWTick(t, time.Hour) }

func newTestGWTick(t *testing.T, tick time.Duration) *testGW {
	t.Helper()
	dir := t.TempDir()
	cert, err := gwid.LoadCert(gwid.Options{Dir: dir, Hosts: []string{"127.0.0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 32)
	rand.Read(b)
	g := &testGW{t: t, id: hex.EncodeToString(b), cert: cert, certDir: dir, addr: "127.0.0.2:0", code: "ABCD-EFGH",
		tokens: map[string]string{}, held: map[string]string{}, pending: map[string]*pendingReq{}, answer: DecisionDeny,
		results: make(chan invokeResult, 16), requests: make(chan *pendingReq, 16), tick: tick}
	g.start()
	t.Cleanup(g.stop)
	return g
}

// newCert gives the (stopped) gateway a new certificate: with the same key
// and another name when sameKey (what gwid does when the served names
// change), else with a new key.
func (g *testGW) newCert(sameKey bool) {
	g.t.Helper()
	if !sameKey {
		g.certDir = g.t.TempDir()
	}
	cert, err := gwid.LoadCert(gwid.Options{Dir: g.certDir, Hosts: []string{"127.0.0.2", "renewed.example"}})
	if err != nil {
		g.t.Fatal(err)
	}
	if cert.Hex() == g.cert.Hex() {
		g.t.Fatal("the certificate was not renewed")
	}
	g.cert = cert
}

func (g *testGW) url() string { return "wss://" + g.addr + "/ws" }

// pairingURL is what `atrium pair` would put in the QR code.
func (g *testGW) pairingURL() string {
	return fmt.Sprintf("https://%s/pair#c=%s&g=%s&f=%s", g.addr, g.code, g.id, g.cert.Hex())
}

func (g *testGW) start() {
	g.t.Helper()
	srv, err := gateway.New(gateway.Options{Token: "operator-token-unused", GatewayID: g.id, Authenticate: g.authenticate,
		Logger: testLogger(g.t), TickInterval: g.tick, OnAuthenticated: g.authenticated})
	if err != nil {
		g.t.Fatal(err)
	}
	srv.Handle(MethodInvokeResult, gateway.Write(gateway.Nodes), func(_ context.Context, call *gateway.Call) (any, error) {
		var r invokeResult
		var raw struct {
			ID      string          `json:"id"`
			OK      bool            `json:"ok"`
			Payload json.RawMessage `json:"payload"`
			Error   *CommandError   `json:"error"`
		}
		if err := gateway.DecodeParams(call, &raw); err != nil {
			return nil, err
		}
		r.ID, r.OK, r.Payload, r.Error = raw.ID, raw.OK, raw.Payload, raw.Error
		g.results <- r
		return map[string]any{}, nil
	})
	srv.Handle(MethodExecAsk, gateway.Write(gateway.Nodes), func(_ context.Context, call *gateway.Call) (any, error) {
		var q AskRequest
		if err := gateway.DecodeParams(call, &q); err != nil {
			return nil, err
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.asks = append(g.asks, q)
		return map[string]string{"decision": g.answer}, nil
	})
	srv.Handle(MethodPairStatus, gateway.Read(gateway.Unpaired), func(_ context.Context, call *gateway.Call) (any, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if p := g.pendingForLocked(call.Principal.Device); p != nil {
			return map[string]string{"status": "pending", "requestId": p.ID}, nil
		}
		return map[string]string{"status": "none"}, nil
	})
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		g.t.Fatalf("listen %s: %v", g.addr, err)
	}
	g.addr = ln.Addr().String()
	hs := &http.Server{Handler: srv.ExternalHandler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	go hs.Serve(tls.NewListener(ln, g.cert.ServerConfig()))
	g.mu.Lock()
	g.srv, g.hs = srv, hs
	g.mu.Unlock()
}

// stop closes every connection (1001) and the listener.
func (g *testGW) stop() {
	g.mu.Lock()
	srv, hs := g.srv, g.hs
	g.srv, g.hs = nil, nil
	g.mu.Unlock()
	if srv == nil {
		return
	}
	hs.Close()
	srv.CloseWhere(func(gateway.ConnInfo) bool { return true }, websocket.StatusGoingAway, "server shutting down")
}

func (g *testGW) server() *gateway.Server {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.srv
}

func (g *testGW) authenticate(_ context.Context, r *gateway.AuthRequest) (*gateway.AuthResult, error) {
	p := r.Params
	if p.Device == nil {
		return nil, gateway.Errorf(gateway.CodeUnauthorized, "device proof required")
	}
	key, err := device.DecodePublicKey(p.Device.Algorithm, p.Device.PublicKey)
	if err != nil {
		return nil, gateway.Errorf(gateway.CodeUnauthorized, "bad key: %v", err)
	}
	sig, err := device.DecodeBase64(p.Device.Signature)
	if err != nil {
		return nil, gateway.Errorf(gateway.CodeUnauthorized, "bad signature encoding")
	}
	tok := p.Auth.DeviceToken
	if tok == "" && p.Auth.SetupCode != "" {
		tok = strings.ToUpper(strings.ReplaceAll(p.Auth.SetupCode, "-", "")) // pairing.NormalizeCode
	}
	id, err := device.VerifyConnect(device.Proof{ID: p.Device.ID, Key: key, Signature: sig, SignedAt: p.Device.SignedAt, Nonce: p.Device.Nonce},
		device.Payload{Version: 2, ClientID: p.Client.ID, Mode: p.Client.Mode, Role: p.Role, Scopes: p.Scopes, Token: tok},
		device.Expect{GatewayID: g.id, Nonce: r.Nonce, Now: r.Now})
	if err != nil {
		return nil, gateway.Errorf(gateway.CodeUnauthorized, "device proof: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case p.Auth.DeviceToken != "":
		if want, ok := g.tokens[id]; !ok || want != p.Auth.DeviceToken {
			e := gateway.Errorf(gateway.CodeUnauthorized, "device token does not match")
			e.Details = map[string]any{"reason": "device_token_mismatch", "repairable": true}
			return nil, e
		}
		return &gateway.AuthResult{Principal: gateway.Principal{Role: gateway.RoleNode, Device: id}, Status: gateway.AuthPaired,
			Caps: p.Caps, Commands: p.Commands}, nil
	case p.Auth.SetupCode != "":
		g.codeTries = append(g.codeTries, time.Now())
		if g.limited > 0 {
			g.limited--
			e := gateway.Errorf(gateway.CodeUnauthorized, "too many wrong setup codes; try again in %s", g.retryAfter)
			e.Details = map[string]any{"reason": "rate_limited", "retryAfterMs": g.retryAfter.Milliseconds()}
			return nil, e
		}
		if tok != strings.ReplaceAll(g.code, "-", "") {
			return nil, gateway.Errorf(gateway.CodeUnauthorized, "setup code is wrong, used or expired")
		}
		return g.submitLocked(id, r.ConnID, false), nil
	}
	if tok, ok := g.held[id]; ok {
		delete(g.held, id)
		return &gateway.AuthResult{Principal: gateway.Principal{Role: gateway.RoleNode, Device: id}, Status: gateway.AuthPaired,
			DeviceTokens: map[string]string{"node": tok}, Caps: p.Caps, Commands: p.Commands}, nil
	}
	if _, paired := g.tokens[id]; paired || g.pendingForLocked(id) != nil {
		return g.submitLocked(id, r.ConnID, true), nil
	}
	return nil, gateway.Errorf(gateway.CodeNotPaired, "this device is not paired")
}

// authenticated announces a pending request once its connection can
// receive events (after hello-ok).
func (g *testGW) authenticated(ci gateway.ConnInfo) {
	if ci.Principal.Role != gateway.RoleUnpaired {
		return
	}
	g.mu.Lock()
	p := g.pendingForLocked(ci.Principal.Device)
	g.mu.Unlock()
	if p != nil {
		g.requests <- p
	}
}

func (g *testGW) pendingForLocked(dev string) *pendingReq {
	for _, p := range g.pending {
		if p.DeviceID == dev {
			return p
		}
	}
	return nil
}

func (g *testGW) submitLocked(dev, connID string, repair bool) *gateway.AuthResult {
	p := g.pendingForLocked(dev)
	if p == nil {
		p = &pendingReq{ID: fmt.Sprintf("req-%d", len(g.pending)+1+len(g.tokens)), DeviceID: dev, Repair: repair}
		g.pending[p.ID] = p
	}
	p.ConnID = connID
	return &gateway.AuthResult{Principal: gateway.Principal{Role: gateway.RoleUnpaired, Device: dev}, Status: gateway.AuthPending, RequestID: p.ID}
}

// approveOffline approves p while its device is not connected: the token
// is held and delivered in the hello-ok of its next connection.
func (g *testGW) approveOffline(p *pendingReq) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pending, p.ID)
	tok := newToken()
	g.tokens[p.DeviceID] = tok
	g.held[p.DeviceID] = tok
	return tok
}

// nextRequest waits for a pairing or repair request.
func (g *testGW) nextRequest() *pendingReq {
	g.t.Helper()
	select {
	case p := <-g.requests:
		return p
	case <-time.After(60 * time.Second):
		g.t.Fatal("no pairing request reached the gateway")
	}
	return nil
}

// resolve approves (a new token, delivered to the pending connection) or
// rejects the request.
func (g *testGW) resolve(p *pendingReq, decision string) string {
	g.t.Helper()
	g.mu.Lock()
	delete(g.pending, p.ID)
	ev := map[string]any{"requestId": p.ID, "deviceId": p.DeviceID, "decision": decision}
	var tok string
	if decision == "approved" {
		tok = newToken()
		g.tokens[p.DeviceID] = tok
		ev["deviceTokens"] = map[string]string{"node": tok}
	}
	g.mu.Unlock()
	if err := g.server().Send(p.ConnID, EventPairResolved, ev); err != nil {
		g.t.Fatalf("send %s: %v", EventPairResolved, err)
	}
	return tok
}

func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// nodeConn waits for a paired node connection of dev other than the
// connection not (one that is closing may still be listed).
func (g *testGW) nodeConn(dev, not string) gateway.ConnInfo {
	g.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if s := g.server(); s != nil {
			cs := s.Conns(func(ci gateway.ConnInfo) bool {
				return ci.Principal.Role == gateway.RoleNode && ci.Principal.Device == dev && ci.ConnID != not
			})
			if len(cs) > 0 {
				newest := cs[0]
				for _, c := range cs[1:] {
					if c.ConnectedAt.After(newest.ConnectedAt) {
						newest = c
					}
				}
				return newest
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Fatalf("node %s did not connect", short(dev))
	return gateway.ConnInfo{}
}

// invoke sends node.invoke.request and waits for the node's result.
func (g *testGW) invoke(connID, command string, params any) invokeResult {
	g.t.Helper()
	raw, _ := json.Marshal(params)
	id := newToken()[:16]
	if err := g.server().Send(connID, EventInvokeRequest, invokeRequest{ID: id, Command: command, Params: raw, TimeoutMs: 60_000}); err != nil {
		g.t.Fatalf("send invoke: %v", err)
	}
	select {
	case r := <-g.results:
		if r.ID != id {
			g.t.Fatalf("result for %s, want %s", r.ID, id)
		}
		return r
	case <-time.After(60 * time.Second):
		g.t.Fatalf("no result for %s", command)
	}
	return invokeResult{}
}

// runHost runs a host in the background. stop cancels it and returns
// Run's result; wait returns Run's result without cancelling.
func runHost(t *testing.T, o Options) (stop, wait func() error) {
	t.Helper()
	if o.Log == nil {
		o.Log = testLogger(t)
	}
	if o.MinBackoff == 0 {
		o.MinBackoff, o.MaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var runErr error
	go func() { runErr = h.Run(ctx); close(finished) }()
	wait = func() error {
		select {
		case <-finished:
			return runErr
		case <-time.After(90 * time.Second):
			return errors.New("host did not stop")
		}
	}
	stop = func() error { cancel(); return wait() }
	t.Cleanup(func() { stop() })
	return stop, wait
}

// testLogger collects log lines and prints them only when the test failed
// (goroutines may log after the test returned, where t.Log panics).
func testLogger(t *testing.T) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("log:\n%s", buf.String())
			mu.Unlock()
		}
	})
	return slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// freezer is a TCP proxy in front of the gateway whose connections can be
// frozen: they stay open but carry nothing more, as when a network goes
// away without closing the socket. Connections made later pass.
type freezer struct {
	ln     net.Listener
	mu     sync.Mutex
	frozen []chan struct{}
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			stop := make(chan struct{})
			f.mu.Lock()
			f.frozen = append(f.frozen, stop)
			f.mu.Unlock()
			t.Cleanup(func() { in.Close(); out.Close() })
			go pipe(in, out, stop)
			go pipe(out, in, stop)
		}
	}()
	return f
}

func pipe(dst, src net.Conn, stop <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-stop:
			return // frozen: nothing more goes through; the sockets stay open
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// freezeAll freezes every connection made so far.
func (f *freezer) freezeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.frozen {
		close(c)
	}
	f.frozen = nil
}
