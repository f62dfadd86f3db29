//go:build unix

package nodehost

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/gwid"
)

func openState(t *testing.T) *State {
	t.Helper()
	s, err := OpenState(filepath.Join(t.TempDir(), "node"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustTarget(t *testing.T, raw string) Target {
	t.Helper()
	tg, err := ParseGatewayURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// waitToken waits until node.json (read from disk) holds a node token other
// than not, and returns it.
func waitToken(t *testing.T, dir, not string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var c Config
		if data, err := os.ReadFile(filepath.Join(dir, ConfigFileName)); err == nil && json.Unmarshal(data, &c) == nil {
			if tok := c.Tokens["node"]; tok != "" && tok != not {
				return tok
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("node.json never got a new token")
	return ""
}

// TestHostPairsServesRotatesRepairs walks a node's life against a real
// gateway over pinned TLS: pairing by the QR URL, approval, invocations
// (system.run asked through node.exec.ask), a rotated token, a gateway
// restart, a stale token that becomes a repair request, never a new key.
func TestHostPairsServesRotatesRepairs(t *testing.T) {
	g := newTestGW(t)
	st := openState(t)
	keyBefore, _ := os.ReadFile(filepath.Join(st.Dir, KeyFileName))
	// Without ffmpeg: the system commands only (TestMediaCommandsNeedFFmpeg has the others).
	stop, _ := runHost(t, Options{State: st, Target: mustTarget(t, g.pairingURL()), DisplayName: "test-node", FFmpeg: "atrium-test-no-ffmpeg"})

	req := g.nextRequest()
	if req.DeviceID != st.DeviceID() || req.Repair {
		t.Fatalf("request %+v, want a pairing request of %s", req, st.DeviceID())
	}
	tok := g.resolve(req, "approved")
	if got := waitToken(t, st.Dir, ""); got != tok {
		t.Fatal("node.json holds another token than the one approved")
	}
	ci := g.nodeConn(st.DeviceID(), "")
	if strings.Join(ci.Commands, ",") != "system.run,system.which,system.notify" || strings.Join(ci.Caps, ",") != "system" {
		t.Fatalf("declared caps %v commands %v", ci.Caps, ci.Commands)
	}
	if ci.Client.DisplayName != "test-node" || ci.Client.Mode != "node" {
		t.Fatalf("client %+v", ci.Client)
	}
	cfg := st.Config()
	if cfg.GatewayID != g.id || cfg.TLSSHA256 != g.cert.Hex() || cfg.GatewayURL != g.url() || cfg.PairedAt == "" {
		t.Fatalf("node.json %+v", cfg)
	}
	if m := mode(t, filepath.Join(st.Dir, ConfigFileName)); m != 0o600 {
		t.Fatalf("node.json mode %v", m)
	}

	r := g.invoke(ci.ConnID, CmdWhich, WhichParams{Name: "sh"})
	if !r.OK || !strings.Contains(string(r.Payload.(json.RawMessage)), `"path":"/`) {
		t.Fatalf("system.which: %+v", r)
	}
	// Mode ask (the default): the person's answer comes through node.exec.ask.
	r = g.invoke(ci.ConnID, CmdRun, RunParams{Command: []string{"echo", "hello"}})
	if r.OK || r.Error == nil || r.Error.Code != CodeForbidden {
		t.Fatalf("denied run: %+v", r)
	}
	g.mu.Lock()
	g.answer = DecisionAllowOnce
	nAsks := len(g.asks)
	g.mu.Unlock()
	r = g.invoke(ci.ConnID, CmdRun, RunParams{Command: []string{"echo", "hello"}})
	var rr RunResult
	if !r.OK || json.Unmarshal(r.Payload.(json.RawMessage), &rr) != nil || rr.Stdout != "hello\n" || rr.ExitCode != 0 {
		t.Fatalf("allowed run: %+v", r)
	}
	g.mu.Lock()
	if len(g.asks) != nAsks+1 || !strings.HasSuffix(g.asks[nAsks].Command[0], "/echo") || g.asks[nAsks].TimeoutMs <= 0 {
		t.Fatalf("asks %+v", g.asks)
	}
	g.mu.Unlock()
	r = g.invoke(ci.ConnID, "sensor.read", nil)
	if r.OK || r.Error.Code != CodeNotFound {
		t.Fatalf("unknown command: %+v", r)
	}
	// A media command sent although it was not declared (no ffmpeg).
	r = g.invoke(ci.ConnID, "camera.snap", nil)
	if r.OK || r.Error.Code != CodeFFmpegNotFound || !strings.Contains(r.Error.Message, "install") {
		t.Fatalf("camera.snap without ffmpeg: %+v", r)
	}

	// The gateway rotates the token: the node keeps the new one.
	newTok := newToken()
	g.mu.Lock()
	g.tokens[st.DeviceID()] = newTok
	g.mu.Unlock()
	if err := g.server().Send(ci.ConnID, EventTokenRotated, map[string]string{"role": "node", "deviceToken": newTok}); err != nil {
		t.Fatal(err)
	}
	if got := waitToken(t, st.Dir, tok); got != newTok {
		t.Fatal("rotated token not kept")
	}

	// The gateway restarts: the node reconnects with its (rotated) token.
	g.stop()
	g.start()
	ci = g.nodeConn(st.DeviceID(), ci.ConnID)
	if r := g.invoke(ci.ConnID, CmdWhich, WhichParams{Name: "sh"}); !r.OK {
		t.Fatalf("after restart: %+v", r)
	}

	// The gateway stops accepting the token while the node is connected
	// (revoked, or rotated while the node was away): the node drops only its
	// token and asks for a repair with its key.
	g.mu.Lock()
	g.tokens[st.DeviceID()] = "something-else"
	g.mu.Unlock()
	g.server().CloseWhere(func(c gateway.ConnInfo) bool { return c.ConnID == ci.ConnID }, 4001, "device token revoked")
	req = g.nextRequest()
	if !req.Repair || req.DeviceID != st.DeviceID() {
		t.Fatalf("request after a stale token %+v, want a repair of %s", req, st.DeviceID())
	}
	if c := st.Config(); c.Tokens["node"] != "" || c.GatewayID != g.id || c.TLSSHA256 != g.cert.Hex() {
		t.Fatalf("after the mismatch node.json is %+v, want only the token dropped", c)
	}
	tok3 := g.resolve(req, "approved")
	if got := waitToken(t, st.Dir, ""); got != tok3 {
		t.Fatal("repair token not kept")
	}
	ci = g.nodeConn(st.DeviceID(), ci.ConnID)
	if r := g.invoke(ci.ConnID, CmdWhich, WhichParams{Name: "sh"}); !r.OK {
		t.Fatalf("after repair: %+v", r)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if keyAfter, _ := os.ReadFile(filepath.Join(st.Dir, KeyFileName)); string(keyAfter) != string(keyBefore) {
		t.Fatal("the device key changed")
	}

	// A restarted host (new process, same state dir) reconnects paired
	// without any pairing input.
	st2, err := OpenState(st.Dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop2, _ := runHost(t, Options{State: st2})
	ci = g.nodeConn(st.DeviceID(), ci.ConnID)
	if r := g.invoke(ci.ConnID, CmdWhich, WhichParams{Name: "sh"}); !r.OK {
		t.Fatalf("restarted host: %+v", r)
	}
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}

func TestHostRejectedAndNotPaired(t *testing.T) {
	g := newTestGW(t)
	st := openState(t)
	_, wait := runHost(t, Options{State: st, Target: mustTarget(t, g.pairingURL())})
	g.resolve(g.nextRequest(), "rejected")
	if err := wait(); !errors.Is(err, ErrRejected) {
		t.Fatalf("Run after a rejection: %v, want ErrRejected", err)
	}
	if c := st.Config(); c.Tokens["node"] != "" {
		t.Fatal("a rejected node holds a token")
	}

	// Without a code, an unknown device is told to pair.
	st2 := openState(t)
	tg := mustTarget(t, g.pairingURL())
	tg.SetupCode = ""
	_, wait = runHost(t, Options{State: st2, Target: tg})
	if err := wait(); !errors.Is(err, ErrNotPaired) {
		t.Fatalf("Run without a code: %v, want ErrNotPaired", err)
	}

	// A wrong code: the gateway refuses; the host says so and stops.
	st3 := openState(t)
	tg.SetupCode = "ZZZZ-ZZZZ"
	_, wait = runHost(t, Options{State: st3, Target: tg})
	if err := wait(); !errors.Is(err, ErrPairing) || !strings.Contains(err.Error(), "setup code") {
		t.Fatalf("Run with a wrong code: %v, want ErrPairing", err)
	}
}

// TestHostApprovedWhileAway: the pending connection drops, the person
// approves meanwhile; the next connection gets the held token in hello-ok
// and the host keeps it and serves.
func TestHostApprovedWhileAway(t *testing.T) {
	g := newTestGW(t)
	st := openState(t)
	_, _ = runHost(t, Options{State: st, Target: mustTarget(t, g.pairingURL())})
	p := g.nextRequest()
	tok := g.approveOffline(p)
	g.server().CloseWhere(func(c gateway.ConnInfo) bool { return c.ConnID == p.ConnID }, websocket.StatusGoingAway, "bye")
	ci := g.nodeConn(st.DeviceID(), "")
	if got := waitToken(t, st.Dir, ""); got != tok {
		t.Fatal("the held token was not kept")
	}
	if r := g.invoke(ci.ConnID, CmdWhich, WhichParams{Name: "sh"}); !r.OK {
		t.Fatalf("invoke: %+v", r)
	}
}

// TestHostPendingRequestGoneWithoutEvent: a request that ends without an
// event reaching the node (expired) is found by device.pair.status: a first
// pairing stops with ErrExpired instead of waiting for ever.
func TestHostPendingRequestGoneWithoutEvent(t *testing.T) {
	g := newTestGW(t)
	st := openState(t)
	_, wait := runHost(t, Options{State: st, Target: mustTarget(t, g.pairingURL()), StatusPoll: 20 * time.Millisecond})
	p := g.nextRequest()
	g.mu.Lock()
	delete(g.pending, p.ID)
	g.mu.Unlock()
	if err := wait(); !errors.Is(err, ErrExpired) {
		t.Fatalf("Run: %v, want ErrExpired", err)
	}
}

func TestHostRefusesAnotherCertificate(t *testing.T) {
	g := newTestGW(t)
	other := newTestGW(t) // another gateway's certificate
	st := openState(t)
	tg := mustTarget(t, g.pairingURL())
	tg.TLSSHA256 = other.cert.Hex()
	_, wait := runHost(t, Options{State: st, Target: tg})
	if err := wait(); !errors.Is(err, ErrPinMismatch) {
		t.Fatalf("Run against an unpinned certificate: %v, want ErrPinMismatch", err)
	}
	if c := st.Config(); c.TLSSHA256 != "" || c.GatewayID != "" {
		t.Fatalf("node.json after a refused first contact: %+v", c)
	}
	select {
	case p := <-g.requests:
		t.Fatalf("the gateway got a request through a refused TLS handshake: %+v", p)
	default:
	}
}

// TestHostCertificateRenewal: a certificate the gateway renewed with its
// key is accepted and re-pinned; a certificate with another key is refused
// (the host keeps retrying and saying so, and nothing reaches the gateway).
func TestHostCertificateRenewal(t *testing.T) {
	g := newTestGW(t)
	st := openState(t)
	statuses := make(chan Status, 1024)
	_, _ = runHost(t, Options{State: st, Target: mustTarget(t, g.pairingURL()), OnStatus: func(s Status) {
		select {
		case statuses <- s:
		default:
		}
	}})
	g.resolve(g.nextRequest(), "approved")
	ci := g.nodeConn(st.DeviceID(), "")
	first := st.Config()
	if first.TLSSPKISHA256 != hex.EncodeToString(g.cert.SPKI[:]) {
		t.Fatalf("node.json pins key %q, want %x", first.TLSSPKISHA256, g.cert.SPKI)
	}

	g.stop()
	g.newCert(true)
	g.start()
	ci = g.nodeConn(st.DeviceID(), ci.ConnID)
	// The host writes node.json right after its handshake, which the
	// gateway may list first.
	deadline := time.Now().Add(60 * time.Second)
	for c := st.Config(); c.TLSSHA256 != g.cert.Hex() || c.TLSSPKISHA256 != first.TLSSPKISHA256; c = st.Config() {
		if time.Now().After(deadline) {
			t.Fatalf("after a renewal with the same key node.json is %+v, want the new fingerprint %s", c, g.cert.Hex())
		}
		time.Sleep(10 * time.Millisecond)
	}

	g.stop()
	g.newCert(false)
	for len(statuses) > 0 {
		<-statuses
	}
	g.start()
	timeout := time.After(60 * time.Second)
	for {
		var s Status
		select {
		case s = <-statuses:
		case <-timeout:
			t.Fatal("the host never reported the refused certificate")
		}
		if s.State == "paired" {
			t.Fatal("the host connected to a certificate with another key")
		}
		if s.State == "disconnected" && errors.Is(s.Err, gwid.ErrFingerprintMismatch) {
			break
		}
	}
	if c := st.Config(); c.TLSSHA256 == g.cert.Hex() {
		t.Fatal("a certificate with another key was pinned")
	}
	if n := len(g.server().Conns(nil)); n != 0 {
		t.Fatalf("%d connections reached the gateway through a refused certificate", n)
	}
}

// TestHostDetectsASilentGateway: a connection that stops carrying frames
// (no tick) without closing is dropped and the host connects again.
func TestHostDetectsASilentGateway(t *testing.T) {
	g := newTestGWTick(t, 100*time.Millisecond)
	proxy := newFreezer(t, g.addr)
	tg := mustTarget(t, g.pairingURL())
	tg.URL = "wss://" + proxy.ln.Addr().String() + "/ws"
	st := openState(t)
	_, _ = runHost(t, Options{State: st, Target: tg})
	g.resolve(g.nextRequest(), "approved")
	ci := g.nodeConn(st.DeviceID(), "")
	proxy.freezeAll()
	// The frozen connection is still open on the gateway's side; the host
	// gives up on it and connects again through the proxy.
	ci2 := g.nodeConn(st.DeviceID(), ci.ConnID)
	if r := g.invoke(ci2.ConnID, CmdWhich, WhichParams{Name: "sh"}); !r.OK {
		t.Fatalf("after reconnecting: %+v", r)
	}
}

func TestHostKeepsPinnedFingerprint(t *testing.T) {
	st := openState(t)
	if err := st.Update(func(c *Config) {
		c.GatewayURL, c.GatewayID, c.TLSSHA256 = "wss://127.0.0.2:1/ws", strings.Repeat("a", 64), strings.Repeat("b", 64)
	}); err != nil {
		t.Fatal(err)
	}
	// A given fingerprint that differs from the pinned one is an error.
	h, _ := New(Options{State: st, Target: Target{TLSSHA256: strings.Repeat("c", 64)}})
	if err := h.resolve(t.Context()); !errors.Is(err, ErrPinMismatch) {
		t.Fatalf("resolve: %v, want ErrPinMismatch", err)
	}
	// Another gateway id: refused.
	h, _ = New(Options{State: st, Target: Target{GatewayID: strings.Repeat("d", 64)}})
	if err := h.resolve(t.Context()); !errors.Is(err, ErrOtherGateway) {
		t.Fatalf("resolve: %v, want ErrOtherGateway", err)
	}
	// A discovered gateway with our id at a new address and another
	// advertised fingerprint: the address is taken, the pin kept.
	h, _ = New(Options{State: st, Discover: func(ctx context.Context) ([]Target, error) {
		return []Target{{URL: "wss://127.0.0.9:5/ws", GatewayID: strings.Repeat("a", 64), TLSSHA256: strings.Repeat("e", 64)}}, nil
	}})
	h.o.Target = Target{}
	if err := h.resolve(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h.target.TLSSHA256 != strings.Repeat("b", 64) || h.target.URL != "wss://127.0.0.2:1/ws" {
		t.Fatalf("target %+v", h.target)
	}
	h.rediscover(t.Context())
	if h.target.TLSSHA256 != strings.Repeat("b", 64) || h.target.URL != "wss://127.0.0.9:5/ws" {
		t.Fatalf("after rediscovery %+v: the address moves, the pin stays", h.target)
	}
}

// TestHostBusyAndRunsStoppedWithTheConnection: beyond MaxConcurrent an
// invocation is answered UNAVAILABLE at once; a run still going when the
// connection ends is stopped (its process group killed).
func TestHostBusyAndRunsStoppedWithTheConnection(t *testing.T) {
	g, st, _ := pairedFullHost(t, Options{MaxConcurrent: 1})
	ci := g.nodeConn(st.DeviceID(), "")

	pidFile := filepath.Join(t.TempDir(), "pid")
	long, _ := json.Marshal(RunParams{Command: []string{"sh", "-c", `sleep 60 & echo $! > "$0"; wait`, pidFile}})
	if err := g.server().Send(ci.ConnID, EventInvokeRequest, invokeRequest{ID: "long", Command: CmdRun, Params: long, TimeoutMs: 600_000}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		data, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(data), "\n")
	})
	r := g.invoke(ci.ConnID, CmdWhich, WhichParams{Name: "sh"})
	if r.OK || r.Error == nil || r.Error.Code != CodeUnavailable {
		t.Fatalf("second invocation while one runs (MaxConcurrent 1): %+v, want UNAVAILABLE", r)
	}
	data, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	g.server().CloseWhere(func(c gateway.ConnInfo) bool { return c.ConnID == ci.ConnID }, websocket.StatusGoingAway, "bye")
	waitGone(t, pid)
	// The host connects again and serves.
	ci = g.nodeConn(st.DeviceID(), ci.ConnID)
	if r := g.invoke(ci.ConnID, CmdWhich, WhichParams{Name: "sh"}); !r.OK {
		t.Fatalf("after reconnecting: %+v", r)
	}
}

// pairedFullHost runs a host with exec approvals "full" (o's State and
// Target are filled in) against a new test gateway, approves its pairing
// and returns the gateway, the host's state and its token.
func pairedFullHost(t *testing.T, o Options) (*testGW, *State, string) {
	t.Helper()
	g := newTestGW(t)
	st := openState(t)
	a := DefaultApprovals()
	a.Mode = ModeFull
	writeApprovals(t, st.Dir, a)
	o.State, o.Target = st, mustTarget(t, g.pairingURL())
	_, _ = runHost(t, o)
	tok := g.resolve(g.nextRequest(), "approved")
	return g, st, tok
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
