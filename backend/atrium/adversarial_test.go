package atrium

// The adversarial suite of issue 16: the real app bound to 127.0.0.2
// (HTTPS/WSS with its own certificate, like a LAN bind; the person's plain
// listener on 127.0.0.1) attacked over real TLS WebSockets by real device
// keys, from other loopback source addresses as other machines on the LAN
// would. Every case checks (a) the refusal with its exact code and reason,
// (b) the audit entry the refusal left, and (c) that nothing was lost or
// granted by it.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/device/devicetest"
	"github.com/atrium-dev/atrium/backend/devices"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/gwid"
)

// attackBind is the address the app serves TLS on (tests send traffic only
// to 127.0.0.0/8).
const attackBind = "127.0.0.2"

// syncBuffer is the app's log, read by the leak checks.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// atk is the app under attack and the attacker's tools.
type atk struct {
	t       *testing.T
	ctx     context.Context
	a       *App
	ws      string
	logs    *syncBuffer
	lanAddr string   // 127.0.0.2:<port>, HTTPS/WSS only
	fp      [32]byte // the certificate the devices pin
	admin   *gateway.Client
}

func startAttack(t *testing.T) *atk {
	t.Helper()
	return startAttackWith(t, nil)
}

// startAttackWith is startAttack with edit applied to the app's options.
func startAttackWith(t *testing.T, edit func(*Options)) *atk {
	t.Helper()
	logs := &syncBuffer{}
	a, ws := startAppWith(t, func(string) string { return "" }, func(_ string, o *Options) {
		o.Bind = attackBind
		o.MDNSInterfaces = []string{"atrium-none0"} // advertise nothing
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if edit != nil {
			edit(o)
		}
	})
	seedWorkspace(t, a, ws, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	info := a.LAN()
	if len(info.Addresses) != 1 {
		t.Fatalf("LAN listeners %v, want one on %s", info.Addresses, attackBind)
	}
	raw, err := hex.DecodeString(info.TLSFingerprint)
	if err != nil || len(raw) != 32 {
		t.Fatalf("fingerprint %q", info.TLSFingerprint)
	}
	k := &atk{t: t, ctx: ctx, a: a, ws: ws, logs: logs, lanAddr: info.Addresses[0]}
	copy(k.fp[:], raw)
	k.admin = gwDial(ctx, t, a, gateway.RoleOperator, "attack-admin") // the person, on 127.0.0.1
	return k
}

// from is an HTTPS client of the machine at source address src (another
// loopback address: another host on the LAN), pinning the gateway's
// certificate.
func (k *atk) from(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 30 * time.Second}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext: d.DialContext, TLSClientConfig: gwid.PinnedClientConfig(k.fp), DisableKeepAlives: true}}
}

// rawFrom opens a TCP connection to the LAN listener from src.
func (k *atk) rawFrom(src string) net.Conn {
	k.t.Helper()
	c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext(k.ctx, "tcp", k.lanAddr)
	must(k.t, err)
	return c
}

// get fetches https://<LAN listener><path> from src and returns the status.
func (k *atk) get(src, path string) (int, error) {
	resp, err := k.from(src).Get("https://" + k.lanAddr + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (k *atk) wssURL() string { return "wss://" + k.lanAddr + "/ws" }

// dev connects key over WSS from src as a device (proof for this gateway).
func (k *atk) dev(src string, key *device.PrivateKey, o gateway.ClientOptions) (*gateway.Client, error) {
	o.URL, o.HTTPClient = k.wssURL(), k.from(src)
	if o.GatewayID == "" {
		o.GatewayID = k.a.Identity.ID
	}
	return devicetest.Dial(k.ctx, k.t, key, o)
}

func (k *atk) mustDev(src string, key *device.PrivateKey, o gateway.ClientOptions) *gateway.Client {
	k.t.Helper()
	c, err := k.dev(src, key, o)
	if err != nil {
		k.t.Fatalf("device connect from %s: %v", src, err)
	}
	return c
}

func newDeviceKey(t *testing.T) *device.PrivateKey {
	t.Helper()
	return devicetest.NewKey(t, device.Ed25519)
}

// code asks for a setup code as the person.
func (k *atk) code() (display, norm string) {
	k.t.Helper()
	var pc struct{ Code, Display, URL string }
	must(k.t, k.admin.Call(k.ctx, "device.pair.code", map[string]any{}, &pc))
	return pc.Display, pc.Code
}

// pending lists the pending requests' device ids.
func (k *atk) pending() []string {
	k.t.Helper()
	var l struct {
		Pending []struct{ RequestID, DeviceID string }
	}
	must(k.t, k.admin.Call(k.ctx, "device.pair.list", map[string]any{}, &l))
	var ids []string
	for _, r := range l.Pending {
		ids = append(ids, r.DeviceID)
	}
	return ids
}

// pair pairs a new device over WSS from src for roles with commands
// (approving only approved, nil = all) and returns its key and tokens.
func (k *atk) pair(src string, roles, commands, approved []string) (*device.PrivateKey, map[string]string) {
	k.t.Helper()
	key := newDeviceKey(k.t)
	disp, _ := k.code()
	p := k.mustDev(src, key, gateway.ClientOptions{SetupCode: disp, Role: roles[0], Roles: roles, Commands: commands, Caps: []string{"system"}})
	params := map[string]any{"requestId": p.Auth().RequestID}
	if approved != nil {
		params["commands"] = approved
	}
	must(k.t, k.admin.Call(k.ctx, "device.pair.approve", params, nil))
	var res struct {
		Decision     string
		DeviceTokens map[string]string
	}
	must(k.t, json.Unmarshal(waitEvent(k.ctx, k.t, p, "device.pair.resolved"), &res))
	if res.Decision != "approved" || len(res.DeviceTokens) != len(roles) {
		k.t.Fatalf("device.pair.resolved %+v", res)
	}
	p.Close()
	return key, res.DeviceTokens
}

// deniedSince returns the denied audit entries recorded after mark (an
// earlier len of the denied entries).
func (k *atk) denied() []audit.Entry {
	k.t.Helper()
	es, err := k.a.Audit.Tail(100000, audit.Filter{Result: audit.Denied})
	must(k.t, err)
	return es
}

// audited checks that an entry denying op, whose target holds every one
// of targets, was recorded after the first `before` denied entries.
func (k *atk) audited(what string, before int, op string, targets ...string) {
	k.t.Helper()
	es := k.denied()
	fresh := es[:max(len(es)-before, 0)] // Tail is newest first
	for _, e := range fresh {
		if e.Operation != op {
			continue
		}
		ok := true
		for _, s := range targets {
			ok = ok && strings.Contains(e.Target, s)
		}
		if ok {
			return
		}
	}
	k.t.Errorf("%s: no denied %q audit entry with target %q among %+v", what, op, targets, fresh)
}

func gwError(err error) *gateway.Error {
	var ge *gateway.Error
	if errors.As(err, &ge) {
		return ge
	}
	return nil
}

// refused checks err is code with details.reason (when reason != "") and
// a message holding msg (when msg != "").
func refused(t *testing.T, what string, err error, code, reason, msg string) {
	t.Helper()
	ge := gwError(err)
	switch {
	case ge == nil:
		t.Errorf("%s: %v, want %s", what, err, code)
	case ge.Code != code:
		t.Errorf("%s: %s %q, want %s", what, ge.Code, ge.Message, code)
	case reason != "" && ge.Details["reason"] != reason:
		t.Errorf("%s: details %v, want reason %s", what, ge.Details, reason)
	case msg != "" && !strings.Contains(ge.Message, msg):
		t.Errorf("%s: message %q, want it to say %q", what, ge.Message, msg)
	}
}

// rawConnect opens a WSS connection from src, reads the challenge, sends
// the connect params made from it and returns the response and the close
// status the server ended the connection with.
func (k *atk) rawConnect(src string, make func(gateway.Challenge) gateway.ConnectParams) (gateway.ResponseFrame, gateway.Challenge, websocket.StatusCode) {
	k.t.Helper()
	ws, _, err := websocket.Dial(k.ctx, k.wssURL(), &websocket.DialOptions{HTTPClient: k.from(src)})
	must(k.t, err)
	defer ws.CloseNow()
	var ev gateway.EventFrame
	var ch gateway.Challenge
	_, data, err := ws.Read(k.ctx)
	if err != nil || json.Unmarshal(data, &ev) != nil || json.Unmarshal(ev.Payload, &ch) != nil {
		k.t.Fatalf("challenge: %s %v", data, err)
	}
	b, _ := json.Marshal(gateway.RequestFrame{Type: "req", ID: "c1", Method: gateway.MethodConnect, Params: mustMarshal(k.t, make(ch))})
	must(k.t, ws.Write(k.ctx, websocket.MessageText, b))
	_, data, err = ws.Read(k.ctx)
	must(k.t, err)
	var res gateway.ResponseFrame
	must(k.t, json.Unmarshal(data, &res))
	if res.OK {
		return res, ch, -1
	}
	_, _, err = ws.Read(k.ctx) // the close that follows a refusal
	return res, ch, websocket.CloseStatus(err)
}

func mustMarshal(t *testing.T, v any) json.RawMessage {
	b, err := json.Marshal(v)
	must(t, err)
	return b
}

// signed is operator connect params with key's v2 proof over nonce for gatewayID.
func signed(t *testing.T, key *device.PrivateKey, gatewayID, nonce, token string, auth gateway.ConnectAuth) gateway.ConnectParams {
	t.Helper()
	ci := gateway.ClientInfo{ID: "atrium-ui", Version: "test", Platform: "android", Mode: "ui"}
	p, err := key.SignConnect(device.Payload{Version: 2, GatewayID: gatewayID, ClientID: ci.ID, Mode: ci.Mode, Role: gateway.RoleOperator,
		SignedAtMs: time.Now().UnixMilli(), Token: token, Nonce: nonce})
	must(t, err)
	return gateway.ConnectParams{MinProtocol: 1, MaxProtocol: 1, Role: gateway.RoleOperator, Client: ci, Auth: auth,
		Device: &gateway.DeviceProof{ID: p.ID, Algorithm: string(p.Key.Alg), PublicKey: p.Key.Encode(),
			Signature: base64.RawURLEncoding.EncodeToString(p.Signature), SignedAt: p.SignedAt, Nonce: p.Nonce}}
}

// nextEvent returns the next event on c other than presence and tick
// noise, named one of names.
func nextEvent(ctx context.Context, t *testing.T, c *gateway.Client, names ...string) gateway.EventFrame {
	t.Helper()
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection ended before %v: %v", names, c.Err())
			}
			if slices.Contains(names, ev.Event) {
				return ev
			}
		case <-ctx.Done():
			t.Fatalf("no %v event: %v", names, ctx.Err())
		}
	}
}

// firstEvent delivers the next event named name on c (nothing if the
// connection ends first).
func firstEvent(ctx context.Context, c *gateway.Client, name string) <-chan gateway.EventFrame {
	out := make(chan gateway.EventFrame, 1)
	go func() {
		for {
			select {
			case ev, ok := <-c.Events():
				if !ok {
					return
				}
				if ev.Event == name {
					out <- ev
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// TestAdversarial is the list, each case refused, audited and
// without effect.
func TestAdversarial(t *testing.T) {
	k := startAttack(t)
	id := k.a.Identity.ID

	// The victims: a phone paired as operator and node (location.get and
	// system.notify approved, system.run unticked), a second node.
	phoneKey, phoneToks := k.pair("127.0.0.10", []string{gateway.RoleOperator, gateway.RoleNode},
		[]string{"location.get", "system.notify", "system.run"}, []string{"location.get", "system.notify"})
	phoneID := phoneKey.Public().ID()
	// The person lets the phone run node commands: only the scope admin may
	// (adversarial_scope_test.go shows the narrower scopes refused).
	must(t, k.admin.Call(k.ctx, "device.scope.set", map[string]any{"deviceId": phoneID, "scope": "admin"}, nil))
	nodeCmds := gateway.ClientOptions{Role: gateway.RoleNode, Caps: []string{"system"},
		Commands: []string{"location.get", "system.notify", "system.run"}}
	phoneNodeOpts := nodeCmds
	phoneNodeOpts.DeviceToken = phoneToks[gateway.RoleNode]
	phoneNode := k.mustDev("127.0.0.10", phoneKey, phoneNodeOpts)
	phoneOp := k.mustDev("127.0.0.10", phoneKey, gateway.ClientOptions{Role: gateway.RoleOperator, DeviceToken: phoneToks[gateway.RoleOperator],
		Client: gateway.ClientInfo{ID: "atrium-ui", Version: "test", Platform: "android", Mode: "ui"}})
	waitNodes(k, phoneID)

	cases := []struct {
		name string
		// attack runs the attack and returns its refusal; before is the
		// number of denied audit entries before it.
		attack func(t *testing.T) (error, []string) // refusal, audit target parts
		code   string
		reason string // error.details.reason
		msg    string // in the message
		op     string // audited operation
		// after checks that nothing was lost or granted.
		after func(t *testing.T)
	}{
		{
			name: "setup-code guessing",
			attack: func(t *testing.T) (error, []string) {
				live, _ := k.code()
				var last *device.PrivateKey
				for i := range 5 { // the per-address limit
					last = newDeviceKey(t)
					_, err := k.dev("127.0.0.20", last, gateway.ClientOptions{SetupCode: fmt.Sprintf("ZZZZ-ZZZ%d", i)})
					refused(t, "guess", err, gateway.CodeUnauthorized, "code_invalid", "unknown setup code")
				}
				thief := newDeviceKey(t)
				_, err := k.dev("127.0.0.20", thief, gateway.ClientOptions{SetupCode: live}) // right, but too late
				if ge := gwError(err); ge == nil || ge.Details["retryAfterMs"] == nil {
					t.Errorf("rate-limited refusal without retryAfterMs: %v", err)
				}
				// The right code is not spent by the refused attempt: the
				// person's phone (another address) still pairs with it.
				honest := newDeviceKey(t)
				if c, err := k.dev("127.0.0.21", honest, gateway.ClientOptions{SetupCode: live}); err != nil || c.Auth().Status != gateway.AuthPending {
					t.Errorf("the honest phone after the guesses: %v", err)
				}
				if p := k.pending(); slices.Contains(p, thief.Public().ID()) || slices.Contains(p, last.Public().ID()) {
					t.Errorf("a guesser has a pending request: %v", p)
				}
				return err, []string{"connect", "device:" + thief.Public().ID()}
			},
			code: gateway.CodeUnauthorized, reason: "rate_limited", msg: "too many wrong setup codes", op: "connect",
		},
		{
			name: "used code",
			attack: func(t *testing.T) (error, []string) {
				disp, _ := k.code()
				owner := newDeviceKey(t)
				first := k.mustDev("127.0.0.22", owner, gateway.ClientOptions{SetupCode: disp})
				thief := newDeviceKey(t)
				_, err := k.dev("127.0.0.23", thief, gateway.ClientOptions{SetupCode: disp})
				p := k.pending()
				if slices.Contains(p, thief.Public().ID()) || !slices.Contains(p, owner.Public().ID()) {
					t.Errorf("pending after a used code: %v (owner %s kept, thief none)", p, owner.Public().ID())
				}
				if first.Err() != nil {
					t.Errorf("the owner's pending connection ended: %v", first.Err())
				}
				return err, []string{"device:" + thief.Public().ID()}
			},
			code: gateway.CodeUnauthorized, reason: "code_used", msg: "already used", op: "connect",
		},
		{
			name: "expired code",
			attack: func(t *testing.T) (error, []string) {
				disp, norm := k.code()
				sum := sha256.Sum256([]byte(norm))
				if _, err := k.a.db.ExecContext(k.ctx, `UPDATE pairing_codes SET expires_ms = ? WHERE hash = ?`,
					time.Now().Add(-time.Millisecond).UnixMilli(), hex.EncodeToString(sum[:])); err != nil {
					t.Fatal(err)
				}
				late := newDeviceKey(t)
				_, err := k.dev("127.0.0.24", late, gateway.ClientOptions{SetupCode: disp})
				if slices.Contains(k.pending(), late.Public().ID()) {
					t.Error("an expired code made a pending request")
				}
				return err, []string{"device:" + late.Public().ID()}
			},
			code: gateway.CodeUnauthorized, reason: "code_expired", msg: "expired", op: "connect",
		},
		{
			name: "replayed signature",
			attack: func(t *testing.T) (error, []string) {
				// The phone's own valid connect, captured on one connection
				// (admitted), replayed byte for byte on another.
				var captured gateway.ConnectParams
				res, _, _ := k.rawConnect("127.0.0.10", func(ch gateway.Challenge) gateway.ConnectParams {
					captured = signed(t, phoneKey, id, ch.Nonce, phoneToks[gateway.RoleOperator], gateway.ConnectAuth{DeviceToken: phoneToks[gateway.RoleOperator]})
					return captured
				})
				if !res.OK {
					t.Fatalf("the genuine connect was refused: %+v", res.Error)
				}
				res, _, cl := k.rawConnect("127.0.0.30", func(gateway.Challenge) gateway.ConnectParams { return captured })
				if cl != gateway.CloseUnauthorized {
					t.Errorf("replay: close %d, want 4001", cl)
				}
				return errOf(res), []string{"device:" + phoneID}
			},
			code: gateway.CodeUnauthorized, msg: "nonce", op: "connect",
		},
		{
			name: "signature for another gateway",
			attack: func(t *testing.T) (error, []string) {
				other := strings.Repeat("ab", 32)
				res, _, cl := k.rawConnect("127.0.0.31", func(ch gateway.Challenge) gateway.ConnectParams {
					return signed(t, phoneKey, other, ch.Nonce, phoneToks[gateway.RoleOperator], gateway.ConnectAuth{DeviceToken: phoneToks[gateway.RoleOperator]})
				})
				if cl != gateway.CloseUnauthorized {
					t.Errorf("close %d, want 4001", cl)
				}
				return errOf(res), []string{"device:" + phoneID}
			},
			code: gateway.CodeUnauthorized, msg: "device signature refused", op: "connect",
		},
		{
			name: "device token presented with another key",
			attack: func(t *testing.T) (error, []string) {
				thief := newDeviceKey(t)
				_, err := k.dev("127.0.0.32", thief, gateway.ClientOptions{Role: gateway.RoleNode, DeviceToken: phoneToks[gateway.RoleNode]})
				return err, []string{"device:" + thief.Public().ID()}
			},
			code: gateway.CodeNotPaired, msg: "not paired", op: "connect",
			after: func(t *testing.T) { k.stillPaired(t, phoneKey, phoneToks) },
		},
		{
			name: "a wrong token with the right key",
			attack: func(t *testing.T) (error, []string) {
				_, err := k.dev("127.0.0.10", phoneKey, gateway.ClientOptions{Role: gateway.RoleNode, DeviceToken: phoneToks[gateway.RoleOperator]})
				if ge := gwError(err); ge == nil || ge.Details["repairable"] != true {
					t.Errorf("mismatch not repairable: %v", err)
				}
				return err, []string{"device:" + phoneID}
			},
			code: gateway.CodeUnauthorized, reason: "device_token_mismatch", op: "connect",
			after: func(t *testing.T) { k.stillPaired(t, phoneKey, phoneToks) },
		},
		{
			name: "a node calling operator methods",
			attack: func(t *testing.T) (error, []string) {
				var err error
				for _, m := range []struct {
					method string
					params map[string]any
				}{
					{"memory.get", map[string]any{"path": "MEMORY.md"}},
					{"chat.send", map[string]any{"profileId": "main", "message": "exfiltrate"}},
					{"node.invoke", map[string]any{"nodeId": phoneID, "command": "system.run", "params": map[string]any{}}},
					{"memory.write", map[string]any{"path": "memory/pwned.md", "content": "pwned", "mode": "append"}},
				} {
					err = phoneNode.Call(k.ctx, m.method, m.params, nil)
					refused(t, "node "+m.method, err, gateway.CodeForbidden, "", "only admin, operator device may call it")
				}
				if _, serr := os.Stat(filepath.Join(k.ws, "memory", "pwned.md")); !os.IsNotExist(serr) {
					t.Errorf("the node's memory.write was applied: %v", serr)
				}
				return err, []string{"memory.write", "device:" + phoneID}
			},
			code: gateway.CodeForbidden, msg: "this connection is node device", op: "memory.write",
		},
		{
			name: "a command that was not approved",
			attack: func(t *testing.T) (error, []string) {
				err := phoneOp.Call(k.ctx, "node.invoke", map[string]any{"nodeId": phoneID, "command": "system.run",
					"params": map[string]any{"command": []string{"id"}}}, nil)
				k.invokeAllowed(t, phoneOp, phoneNode, phoneID)
				return err, []string{phoneID, "system.run"}
			},
			code: gateway.CodeForbidden, msg: "may not run system.run", op: "node.invoke",
		},
		{
			name: "a selector matching a node whose command was unticked",
			attack: func(t *testing.T) (error, []string) {
				err := phoneOp.Call(k.ctx, "node.invoke", map[string]any{"selector": map[string]any{"caps": []string{"system"}},
					"command": "system.run", "params": map[string]any{}}, nil)
				k.invokeAllowed(t, phoneOp, phoneNode, phoneID)
				return err, []string{"caps:system", "system.run"}
			},
			code: gateway.CodeForbidden, msg: "may run system.run", op: "node.invoke",
		},
		{
			name: "an unpaired device calling anything but pairing",
			attack: func(t *testing.T) (error, []string) {
				key := newDeviceKey(t)
				disp, _ := k.code()
				u := k.mustDev("127.0.0.33", key, gateway.ClientOptions{SetupCode: disp, Roles: []string{"operator", "node"}, Role: gateway.RoleNode})
				reqID := u.Auth().RequestID
				var err error
				for _, m := range k.admin.Hello().Features.Methods {
					if m == "health" || m == "device.pair.status" {
						continue
					}
					// Its own request id and device id where a method takes one.
					err = u.Call(k.ctx, m, map[string]any{"requestId": reqID, "deviceId": key.Public().ID(), "role": "operator"}, nil)
					if ge := gwError(err); ge == nil || ge.Code != gateway.CodeForbidden {
						t.Errorf("unpaired %s: %v, want FORBIDDEN", m, err)
					}
				}
				// health is open to it: it must tell nothing of this
				// machine (the workspace's path, the ACL's state).
				var h json.RawMessage
				must(t, u.Call(k.ctx, "health", map[string]any{}, &h))
				if strings.Contains(string(h), k.ws) || strings.Contains(string(h), `"acl"`) {
					t.Errorf("health to an unpaired device: %s (it shows the workspace or the ACL)", h)
				}
				if strings.Contains(string(h), `"process"`) {
					t.Errorf("health to an unpaired device: %s (it shows the app process's figures)", h)
				}
				must(t, phoneNode.Call(k.ctx, "health", map[string]any{}, &h))
				if strings.Contains(string(h), k.ws) || strings.Contains(string(h), `"process"`) {
					t.Errorf("health to a node: %s (it shows the workspace or the app process's figures)", h)
				}
				// The app process's goroutines go to admin alone (the
				// soak samples them), not to a paired operator device.
				must(t, phoneOp.Call(k.ctx, "health", map[string]any{}, &h))
				if strings.Contains(string(h), `"process"`) {
					t.Errorf("health to an operator device: %s (it shows the app process's figures)", h)
				}
				var ah struct {
					Process struct{ Goroutines, HeapLiveBytes int }
				}
				must(t, k.admin.Call(k.ctx, "health", map[string]any{}, &ah))
				if ah.Process.Goroutines <= 0 || ah.Process.HeapLiveBytes <= 0 {
					t.Errorf("health to admin: process %+v, want the app process's goroutines and live heap", ah.Process)
				}
				// Its frames stay as small as before the handshake: 16 MiB
				// frames from every connection of a pending device would
				// each be buffered whole.
				big := map[string]any{"pad": strings.Repeat("x", 100<<10)}
				if err := u.Call(k.ctx, "health", big, nil); gwError(err) == nil || gwError(err).Code != gateway.CodePayloadTooLarge {
					t.Errorf("a 100 KiB frame from an unpaired device: %v, want PAYLOAD_TOO_LARGE", err)
				}
				if err := phoneOp.Call(k.ctx, "health", big, nil); err != nil {
					t.Errorf("a 100 KiB frame from a paired device: %v", err)
				}
				var st struct{ Status, RequestID string }
				if err := u.Call(k.ctx, "device.pair.status", map[string]any{}, &st); err != nil || st.Status != "pending" || st.RequestID != reqID {
					t.Errorf("after the attempts its request is %+v %v, want still pending", st, err)
				}
				if _, err := k.a.Pairing.Device(k.ctx, key.Public().ID()); err == nil {
					t.Error("the unpaired device got paired")
				}
				return u.Call(k.ctx, "device.pair.approve", map[string]any{"requestId": reqID}, nil), []string{"device.pair.approve", "device:" + key.Public().ID()}
			},
			code: gateway.CodeForbidden, msg: "only admin may call it (this connection is unpaired)", op: "device.pair.approve",
		},
		{
			// The person reads a request for a node with system.notify
			// (device.pair.list, `atrium nodes pending`); before they approve
			// it, the device reconnects with its proof asking for more under
			// the same request.
			name: "a pending request widened before its approval",
			attack: func(t *testing.T) (error, []string) {
				key := newDeviceKey(t)
				disp, _ := k.code()
				first := k.mustDev("127.0.0.35", key, gateway.ClientOptions{SetupCode: disp, Role: gateway.RoleNode,
					Caps: []string{"location"}, Commands: []string{"system.notify"}})
				reqID := first.Auth().RequestID
				_, err := k.dev("127.0.0.35", key, gateway.ClientOptions{Role: gateway.RoleNode, Roles: []string{"operator", "node"},
					Caps: []string{"location", "system"}, Commands: []string{"system.notify", "system.run"}})
				// The person approves what they saw, by id, with the
				// defaults (every role and command of the request), as
				// `atrium nodes approve <id>` does.
				must(t, k.admin.Call(k.ctx, "device.pair.approve", map[string]any{"requestId": reqID}, nil))
				d, derr := k.a.Pairing.Device(k.ctx, key.Public().ID())
				if derr != nil || !slices.Equal(d.Roles, []string{"node"}) || !slices.Equal(d.Commands, []string{"system.notify"}) ||
					!slices.Equal(d.Caps, []string{"location"}) {
					t.Errorf("approved %+v %v, want only what was shown: node, system.notify, caps location", d, derr)
				}
				return err, []string{"device:" + key.Public().ID()}
			},
			code: gateway.CodeConflict, reason: "request_widened", msg: "cannot ask for more", op: "connect",
		},
		{
			name: "the operator token on the TLS listener",
			attack: func(t *testing.T) (error, []string) {
				_, err := gateway.Dial(k.ctx, gateway.ClientOptions{URL: k.wssURL(), Token: k.a.Token, HTTPClient: k.from("127.0.0.34"),
					Client: gateway.ClientInfo{ID: "atrium-ui", Mode: "ui"}})
				return err, []string{"connect"}
			},
			code: gateway.CodeForbidden, msg: "operator token is accepted on loopback only", op: "connect",
		},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			before := len(k.denied())
			err, target := tc.attack(t)
			refused(t, tc.name, err, tc.code, tc.reason, tc.msg)
			k.audited(tc.name, before, tc.op, target...)
			if tc.after != nil {
				tc.after(t)
			}
		})
	}
}

func errOf(res gateway.ResponseFrame) error {
	if res.OK || res.Error == nil {
		return nil
	}
	return res.Error
}

// stillPaired checks the device's record and both tokens survived.
func (k *atk) stillPaired(t *testing.T, key *device.PrivateKey, toks map[string]string) {
	t.Helper()
	d, err := k.a.Pairing.Device(k.ctx, key.Public().ID())
	if err != nil || len(d.Roles) != 2 {
		t.Fatalf("pairing record after the attack: %+v %v", d, err)
	}
	k.tokensAdmit(t, "127.0.0.10", key, toks)
}

// tokensAdmit checks both of key's tokens still admit it: the operator
// token by a real connection, the node token against the store (a second
// node connection of the device would change which connection invokes
// reach while it closes).
func (k *atk) tokensAdmit(t *testing.T, src string, key *device.PrivateKey, toks map[string]string) {
	t.Helper()
	c, err := k.dev(src, key, gateway.ClientOptions{Role: gateway.RoleOperator, DeviceToken: toks[gateway.RoleOperator],
		Client: gateway.ClientInfo{ID: "atrium-ui", Mode: "ui"}})
	if err != nil || c.Auth().Status != gateway.AuthPaired {
		t.Fatalf("the device's operator token: %v", err)
	}
	c.Close()
	if _, err := k.a.Pairing.CheckToken(k.ctx, key.Public().ID(), gateway.RoleNode, toks[gateway.RoleNode]); err != nil {
		t.Fatalf("the device's node token: %v", err)
	}
}

// invokeAllowed invokes an approved command on the node and checks that
// the first invoke request the node sees is that one (the refused invoke
// sent it nothing).
func (k *atk) invokeAllowed(t *testing.T, op, node *gateway.Client, nodeID string) {
	t.Helper()
	type out struct {
		r   struct{ OK bool }
		err error
	}
	done := make(chan out, 1)
	go func() {
		var o out
		o.err = op.Call(k.ctx, "node.invoke", map[string]any{"nodeId": nodeID, "command": "system.notify",
			"params": map[string]any{"title": "t", "body": "b"}, "timeoutMs": 600000}, &o.r)
		done <- o
	}()
	var ev gateway.EventFrame
	select {
	case ev = <-firstEvent(k.ctx, node, "node.invoke.request"):
	case o := <-done:
		t.Fatalf("the allowed invoke ended before reaching the node: %+v %v", o.r, o.err)
	}
	var req struct{ ID, Command string }
	must(t, json.Unmarshal(ev.Payload, &req))
	if req.Command != "system.notify" {
		t.Errorf("the node was asked to run %q (the refused command reached it)", req.Command)
	}
	must(t, node.Call(k.ctx, "node.invoke.result", map[string]any{"id": req.ID, "ok": true, "payload": map[string]any{"delivered": true}}, nil))
	if o := <-done; o.err != nil || !o.r.OK {
		t.Errorf("the allowed invoke: %+v %v", o.r, o.err)
	}
}

// TestAdversarialLAN: what anyone on the LAN can do without a key — talk
// plaintext to the TLS listener, hold connections before the handshake,
// send a huge first frame, come through a DNS-rebinding name or a foreign
// Origin, open /pair — and whether any secret (operator token, device
// tokens, setup codes) reaches a log, the audit log, state.db or a
// response other than its one delivery.
func TestAdversarialLAN(t *testing.T) {
	k := startAttack(t)
	port := k.lanAddr[strings.LastIndex(k.lanAddr, ":")+1:]

	// A pairing and a pending code make secrets to look for afterwards.
	phoneKey, phoneToks := k.pair("127.0.0.10", []string{gateway.RoleOperator, gateway.RoleNode}, []string{"system.notify"}, nil)
	liveDisplay, liveCode := k.code()
	// A token rotated by the device itself (delivered in the answer) and
	// one rotated by the person (delivered as an event).
	rot := map[string]string{}
	op := k.mustDev("127.0.0.10", phoneKey, gateway.ClientOptions{Role: gateway.RoleOperator, DeviceToken: phoneToks[gateway.RoleOperator],
		Client: gateway.ClientInfo{ID: "atrium-ui", Mode: "ui"}})
	var self struct{ DeviceToken string }
	must(t, op.Call(k.ctx, "device.token.rotate", map[string]any{}, &self))
	rot["operator (self)"] = self.DeviceToken
	must(t, k.admin.Call(k.ctx, "device.token.rotate", map[string]any{"deviceId": phoneKey.Public().ID(), "role": "node"}, nil))
	var ev struct{ Role, DeviceToken string }
	must(t, json.Unmarshal(waitEvent(k.ctx, t, op, "device.token.rotated"), &ev))
	rot["node (admin)"] = ev.DeviceToken
	phoneToks = map[string]string{gateway.RoleOperator: self.DeviceToken, gateway.RoleNode: ev.DeviceToken, "old operator": phoneToks[gateway.RoleOperator],
		"old node": phoneToks[gateway.RoleNode]}

	t.Run("plaintext_on_the_TLS_listener", func(t *testing.T) {
		before := len(k.denied())
		c := k.rawFrom("127.0.0.40")
		defer c.Close()
		// A phone that typed http:// and a code in the query by mistake,
		// and a WebSocket upgrade in the clear.
		_, err := fmt.Fprintf(c, "GET /pair?c=%s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", liveCode, k.lanAddr)
		must(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "this address serves HTTPS only") ||
			strings.Contains(string(body), "<html") || strings.Contains(string(body), "connect.challenge") {
			t.Errorf("plaintext request: %d %q, want 400 this address serves HTTPS only and nothing served", resp.StatusCode, body)
		}
		k.audited("plaintext", before, "gateway.plaintext", k.lanAddr, "GET /pair")
		for _, e := range k.denied() {
			if strings.Contains(e.Target+e.Reason, liveCode) {
				t.Errorf("the setup code in a plaintext request's query reached the audit log: %+v", e)
			}
		}
	})

	t.Run("pre-auth_frame_size_over_TLS", func(t *testing.T) {
		ws, _, err := websocket.Dial(k.ctx, k.wssURL(), &websocket.DialOptions{HTTPClient: k.from("127.0.0.41")})
		must(t, err)
		defer ws.CloseNow()
		if _, _, err := ws.Read(k.ctx); err != nil {
			t.Fatal(err)
		}
		big := `{"type":"req","id":"1","method":"connect","params":{"pad":"` + strings.Repeat("x", 70<<10) + `"}}`
		_ = ws.Write(k.ctx, websocket.MessageText, []byte(big))
		_, _, err = ws.Read(k.ctx)
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != gateway.CloseHandshakeFailed || !strings.Contains(ce.Reason, "at most 65536 bytes") {
			t.Errorf("a 70 KiB first frame over WSS: %v, want close 4002 first frame must be … at most 65536 bytes", err)
		}
	})

	t.Run("pre-auth_connection_cap_over_TLS", func(t *testing.T) {
		var held []*websocket.Conn
		defer func() {
			for _, c := range held {
				c.CloseNow()
			}
		}()
		for range gateway.DefaultMaxUnauthenticatedPerIP {
			c, _, err := websocket.Dial(k.ctx, k.wssURL(), &websocket.DialOptions{HTTPClient: k.from("127.0.0.42")})
			must(t, err)
			held = append(held, c)
		}
		// The LAN listener counts a connection as unauthenticated until its
		// WebSocket is: one more from that address is closed at accept (the
		// gateway's own cap, 503 at the same 16 per address, is behind it).
		before := len(k.denied())
		_, resp, err := websocket.Dial(k.ctx, k.wssURL(), &websocket.DialOptions{HTTPClient: k.from("127.0.0.42")})
		if err == nil || resp != nil {
			t.Errorf("connection %d from one address waiting for its handshake: %v %v, want it closed at accept", len(held)+1, resp, err)
		}
		k.awaitConnlimit(before, "127.0.0.42", "unauthenticated connections from 127.0.0.42")
		// Another machine is not locked out by it.
		if _, err := k.dev("127.0.0.10", phoneKey, gateway.ClientOptions{Role: gateway.RoleOperator, DeviceToken: phoneToks[gateway.RoleOperator]}); err != nil {
			t.Errorf("the phone while another address holds its cap: %v", err)
		}
	})

	t.Run("connections_waiting_for_a_request", func(t *testing.T) {
		pend := k.a.lan.pending
		waitPending := func(n int) {
			t.Helper()
			for pend.count() != n {
				if k.ctx.Err() != nil {
					t.Fatalf("LAN connections waiting for a request: %d, want %d", pend.count(), n)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		// hold opens n connections from src that send nothing.
		hold := func(src string, n int) {
			for range n {
				held = append(held, k.rawFrom(src))
			}
		}
		// refused checks that a new connection from src is closed by the
		// server at once (its read ends, not at the client's deadline), and
		// that the refusal was audited with src and why.
		refused := func(src, why string) {
			t.Helper()
			before := len(k.denied())
			c := k.rawFrom(src)
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
			var ne net.Error
			if _, err := c.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("a connection from %s over the cap (%s): read %v, want it closed by the server", src, why, err)
			}
			for {
				es := k.denied()
				for _, e := range es[:max(len(es)-before, 0)] {
					if e.Operation == "gateway.connlimit" && e.IP == src && e.Target == k.lanAddr && strings.Contains(e.Reason, why) {
						return
					}
				}
				if k.ctx.Err() != nil {
					t.Fatalf("no gateway.connlimit audit entry for %s (%s): %+v", src, why, es[:max(len(es)-before, 0)])
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		waitPending(0) // what the cases above opened has closed
		// One address: idle connections up to its cap, then refused; another
		// address is served meanwhile.
		hold("127.0.0.50", DefaultMaxLANPendingPerAddr)
		waitPending(DefaultMaxLANPendingPerAddr)
		refused("127.0.0.50", fmt.Sprintf("unauthenticated connections from 127.0.0.50 (%d)", DefaultMaxLANPendingPerAddr))
		if code, err := k.get("127.0.0.51", "/healthz"); code != http.StatusOK {
			t.Errorf("another address while 127.0.0.50 holds its cap: %d %v, want 200", code, err)
		}
		waitPending(DefaultMaxLANPendingPerAddr) // that request's connection counted until it closed
		// Many addresses: up to the total cap, then anyone is refused on the
		// LAN; the person's plain listener on 127.0.0.1 is not affected.
		for i := 1; len(held) < DefaultMaxLANPending; i++ {
			hold(fmt.Sprintf("127.0.0.%d", 50+i), min(DefaultMaxLANPendingPerAddr, DefaultMaxLANPending-len(held)))
		}
		waitPending(DefaultMaxLANPending)
		refused("127.0.0.70", fmt.Sprintf("too many unauthenticated connections (%d)", DefaultMaxLANPending))
		resp, err := http.Get("http://" + k.a.Gateway.Addr() + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("the plain listener on 127.0.0.1 while the LAN cap is full: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		must(t, k.admin.Call(k.ctx, "health", map[string]any{}, nil))
		// Closing them gives the slots back.
		for _, c := range held {
			c.Close()
		}
		held = nil
		waitPending(0)
		for _, src := range []string{"127.0.0.50", "127.0.0.70"} {
			if code, err := k.get(src, "/healthz"); code != http.StatusOK {
				t.Errorf("%s after its connections closed: %d %v, want 200", src, code, err)
			}
		}
		// A keep-alive connection idle after its request waits for the next
		// one: it holds a slot too.
		for range DefaultMaxLANPendingPerAddr {
			c := tls.Client(k.rawFrom("127.0.0.71"), gwid.PinnedClientConfig(k.fp))
			held = append(held, c)
			_, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", k.lanAddr)
			must(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			must(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Close {
				t.Fatalf("keep-alive request: %d close=%v", resp.StatusCode, resp.Close)
			}
		}
		waitPending(DefaultMaxLANPendingPerAddr)
		refused("127.0.0.71", "unauthenticated connections from 127.0.0.71")
	})

	t.Run("Host_and_Origin_(DNS_rebinding)", func(t *testing.T) {
		get := func(host, origin, path string, upgrade bool) int {
			req, err := http.NewRequestWithContext(k.ctx, "GET", "https://"+k.lanAddr+path, nil)
			must(t, err)
			req.Host = host
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			if upgrade {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Sec-WebSocket-Version", "13")
				req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			}
			resp, err := k.from("127.0.0.43").Do(req)
			must(t, err)
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, tc := range []struct {
			what, host, origin, path string
			upgrade                  bool
			want                     int
		}{
			{"a rebinding name as Host (UI)", "evil.example:" + port, "", "/", false, http.StatusMisdirectedRequest},
			{"a rebinding name as Host (WebSocket)", "evil.example:" + port, "https://evil.example:" + port, "/ws", true, http.StatusMisdirectedRequest},
			{"a rebinding name as Host (/pair)", "rebind.127.0.0.2.nip.io:" + port, "", "/pair", false, http.StatusMisdirectedRequest},
			{"a foreign Origin", k.lanAddr, "https://evil.example", "/ws", true, http.StatusForbidden},
			{"a null Origin", k.lanAddr, "null", "/ws", true, http.StatusForbidden},
			{"the same origin", k.lanAddr, "https://" + k.lanAddr, "/ws", true, http.StatusSwitchingProtocols},
		} {
			if got := get(tc.host, tc.origin, tc.path, tc.upgrade); got != tc.want {
				t.Errorf("%s: HTTP %d, want %d", tc.what, got, tc.want)
			}
		}
	})

	t.Run("the_pair_page", func(t *testing.T) {
		var pc struct{ Code, URL string }
		must(t, k.admin.Call(k.ctx, "device.pair.code", map[string]any{}, &pc))
		base, frag, ok := strings.Cut(pc.URL, "#")
		if !ok || strings.Contains(base, pc.Code) || !strings.HasPrefix(base, "https://"+k.lanAddr+"/pair") || !strings.Contains(frag, "c="+pc.Code) {
			t.Errorf("pairing URL %q: the code must be in the fragment only", pc.URL)
		}
		resp, err := k.from("127.0.0.44").Get(base)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("Referrer-Policy") != "no-referrer" || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") ||
			h.Get("X-Frame-Options") != "DENY" || strings.Contains(string(body), pc.Code) {
			t.Errorf("/pair: %d, headers %v", resp.StatusCode, h)
		}
	})

	// Last: every secret made above is looked for everywhere it must not be.
	t.Run("no_secret_stored_logged_or_echoed", func(t *testing.T) {
		secrets := map[string]string{"operator token": k.a.Token, "setup code": liveCode, "setup code (display)": liveDisplay}
		for r, tok := range phoneToks {
			secrets["device token "+r] = tok
		}
		for r, tok := range rot {
			secrets["rotated token "+r] = tok
		}
		places := map[string]string{"the app's log": k.logs.String()}
		for _, dir := range []string{k.a.Audit.Dir(), k.a.Layout.Home} {
			_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || filepath.Base(p) == "gateway.token" {
					return nil
				}
				if b, err := os.ReadFile(p); err == nil {
					places[p] = string(b)
				}
				return nil
			})
		}
		for _, m := range []string{"device.list", "device.pair.list", "config.get", "node.list", "audit.tail"} {
			var raw json.RawMessage
			must(t, k.admin.Call(k.ctx, m, map[string]any{"limit": 1000}, &raw))
			places["the answer of "+m] = string(raw)
		}
		for what, sec := range secrets {
			if len(sec) < 8 {
				t.Fatalf("%s %q: too short to look for", what, sec)
			}
			for where, text := range places {
				if strings.Contains(text, sec) {
					t.Errorf("the %s is in %s", what, where)
				}
			}
		}
		if len(places) < 8 {
			t.Errorf("looked in only %d places", len(places))
		}
	})
}

// TestAdversarialPrincipals: paired devices reaching past their rights — an
// operator device calling the person's methods (approving a request,
// config, the audit log, revoking another device, answering an exec ask),
// a node answering another node's invoke, the same idempotency key used by
// two devices, a huge node.invoke.result, and a revoked device's live
// connections.
func TestAdversarialPrincipals(t *testing.T) {
	k := startAttack(t)
	roles := []string{gateway.RoleOperator, gateway.RoleNode}
	aKey, aToks := k.pair("127.0.0.10", roles, []string{"system.notify"}, nil)
	bKey, bToks := k.pair("127.0.0.11", roles, []string{"system.notify"}, nil)
	aID, bID := aKey.Public().ID(), bKey.Public().ID()
	// A may run node commands (scope admin, see adversarial_scope_test.go).
	must(t, k.admin.Call(k.ctx, "device.scope.set", map[string]any{"deviceId": aID, "scope": "admin"}, nil))
	nodeOpts := func(tok string) gateway.ClientOptions {
		return gateway.ClientOptions{Role: gateway.RoleNode, DeviceToken: tok, Caps: []string{"system"}, Commands: []string{"system.notify"}}
	}
	opOpts := func(tok string) gateway.ClientOptions {
		return gateway.ClientOptions{Role: gateway.RoleOperator, DeviceToken: tok, Client: gateway.ClientInfo{ID: "atrium-ui", Mode: "ui"}}
	}
	aOp := k.mustDev("127.0.0.10", aKey, opOpts(aToks[gateway.RoleOperator]))
	aNode := k.mustDev("127.0.0.10", aKey, nodeOpts(aToks[gateway.RoleNode]))
	bNode := k.mustDev("127.0.0.11", bKey, nodeOpts(bToks[gateway.RoleNode]))
	waitNodes(k, aID, bID)

	t.Run("presence_entry_of_another_principal", func(t *testing.T) {
		// Device B takes the instance id of device A's and of the person's
		// UI: each principal keeps its own entry; the person's two UI
		// connections of one instance share one.
		const inst = "shared-instance"
		as := func(key *device.PrivateKey, src, tok, host string) *gateway.Client {
			o := opOpts(tok)
			o.Client.InstanceID, o.Client.DisplayName = inst, host
			return k.mustDev(src, key, o)
		}
		conns := []*gateway.Client{as(aKey, "127.0.0.10", aToks[gateway.RoleOperator], "phone A"),
			gwDial(k.ctx, t, k.a, gateway.RoleOperator, inst), gwDial(k.ctx, t, k.a, gateway.RoleOperator, inst),
			as(bKey, "127.0.0.11", bToks[gateway.RoleOperator], "spoof by B")}
		// Every connection above had its hello-ok, so a new one's snapshot
		// holds them all.
		watch := gwDial(k.ctx, t, k.a, gateway.RoleOperator, "presence-watch")
		b, err := json.Marshal(watch.Hello().Snapshot.Presence)
		must(t, err)
		var entries []struct{ InstanceID, DeviceID, Host string }
		must(t, json.Unmarshal(b, &entries))
		hosts := map[string][]string{}
		for _, e := range entries {
			if e.InstanceID == inst {
				hosts[e.DeviceID] = append(hosts[e.DeviceID], e.Host)
			}
		}
		if len(hosts) != 3 || !slices.Equal(hosts[aID], []string{"phone A"}) ||
			!slices.Equal(hosts[bID], []string{"spoof by B"}) || len(hosts[""]) != 1 {
			t.Errorf("presence entries of instance %q by device: %v, want one each for A, B and the person", inst, hosts)
		}
		for _, c := range conns {
			c.Close()
		}
	})

	t.Run("an_operator_device_calling_the_person's_methods", func(t *testing.T) {
		// A stranger's pending request the device would like approved.
		stranger := newDeviceKey(t)
		disp, _ := k.code()
		pend := k.mustDev("127.0.0.12", stranger, gateway.ClientOptions{SetupCode: disp})
		for _, c := range []struct {
			method string
			params map[string]any
		}{
			{"device.pair.approve", map[string]any{"requestId": pend.Auth().RequestID}},
			{"device.pair.code", map[string]any{}},
			{"device.pair.list", map[string]any{}},
			{"device.list", map[string]any{}},
			{"config.get", map[string]any{}},
			{"config.patch", map[string]any{"patch": map[string]any{"gateway": map[string]any{"bind": "lan"}}}},
			{"audit.tail", map[string]any{}},
			{"device.token.revoke", map[string]any{"deviceId": bID}},
			{"device.remove", map[string]any{"deviceId": bID}},
			{"exec.ask.list", map[string]any{}},
		} {
			before := len(k.denied())
			err := aOp.Call(k.ctx, c.method, c.params, nil)
			refused(t, "operator device "+c.method, err, gateway.CodeForbidden, "", "only admin may call it (this connection is operator device)")
			k.audited("operator device "+c.method, before, c.method, "device:"+aID)
		}
		var st struct{ Status string }
		if err := pend.Call(k.ctx, "device.pair.status", map[string]any{}, &st); err != nil || st.Status != "pending" {
			t.Errorf("the stranger's request after the device tried to approve it: %+v %v", st, err)
		}
		if _, err := k.a.Pairing.Device(k.ctx, stranger.Public().ID()); err == nil {
			t.Error("the stranger got paired")
		}
		k.stillPairedAs(t, "127.0.0.11", bKey, bToks)
		if k.a.LAN().Bind != attackBind {
			t.Errorf("bind changed to %q", k.a.LAN().Bind)
		}
		// Rotating another device's token: its own check, audited.
		before := len(k.denied())
		err := aOp.Call(k.ctx, "device.token.rotate", map[string]any{"deviceId": bID, "role": "node"}, nil)
		refused(t, "rotate another device's token", err, gateway.CodeForbidden, "", "only its own token")
		k.audited("rotate another device's token", before, "device.token.rotate", "device:"+bID)
		k.stillPairedAs(t, "127.0.0.11", bKey, bToks)
	})

	t.Run("exec.ask.answer_by_a_non-admin", func(t *testing.T) {
		asked := make(chan string, 1)
		go func() {
			var d struct{ Decision string }
			err := bNode.Call(k.ctx, "node.exec.ask", map[string]any{"command": []string{"rm", "-rf", "/"}, "cwd": "/"}, &d)
			if err != nil {
				d.Decision = "error: " + err.Error()
			}
			asked <- d.Decision
		}()
		var ask struct{ ID string }
		must(t, json.Unmarshal(waitEvent(k.ctx, t, k.admin, "exec.ask.requested"), &ask))
		for _, who := range []struct {
			name string
			c    *gateway.Client
			dev  string
		}{{"operator device", aOp, aID}, {"node device", aNode, aID}, {"the asking node itself", bNode, bID}} {
			before := len(k.denied())
			err := who.c.Call(k.ctx, "exec.ask.answer", map[string]any{"id": ask.ID, "decision": "allow-always"}, nil)
			refused(t, who.name+" answering", err, gateway.CodeForbidden, "", "only admin may call it")
			k.audited(who.name+" answering", before, "exec.ask.answer", "device:"+who.dev)
		}
		var open struct{ Asks []struct{ ID string } }
		must(t, k.admin.Call(k.ctx, "exec.ask.list", map[string]any{}, &open))
		if len(open.Asks) != 1 || open.Asks[0].ID != ask.ID {
			t.Fatalf("open asks after the refused answers: %+v", open)
		}
		must(t, k.admin.Call(k.ctx, "exec.ask.answer", map[string]any{"id": ask.ID, "decision": "deny"}, nil))
		if d := <-asked; d != "deny" {
			t.Errorf("the node got %q, want the person's deny", d)
		}
	})

	t.Run("a_node_answering_another_node's_invoke", func(t *testing.T) {
		done := make(chan error, 1)
		var res struct {
			OK      bool
			Payload struct{ From string }
		}
		go func() {
			done <- aOp.Call(k.ctx, "node.invoke", map[string]any{"nodeId": aID, "command": "system.notify", "params": map[string]any{}, "timeoutMs": 600000}, &res)
		}()
		var req struct{ ID string }
		must(t, json.Unmarshal(nextEvent(k.ctx, t, aNode, "node.invoke.request").Payload, &req))
		before := len(k.denied())
		err := bNode.Call(k.ctx, "node.invoke.result", map[string]any{"id": req.ID, "ok": true, "payload": map[string]any{"from": "b"}}, nil)
		refused(t, "node B answering A's invoke", err, gateway.CodeForbidden, "", "sent to another node")
		k.audited("node B answering A's invoke", before, "node.invoke.result", req.ID)
		must(t, aNode.Call(k.ctx, "node.invoke.result", map[string]any{"id": req.ID, "ok": true, "payload": map[string]any{"from": "a"}}, nil))
		if err := <-done; err != nil || !res.OK || res.Payload.From != "a" {
			t.Errorf("the invoker got %+v %v, want A's answer", res, err)
		}
	})

	t.Run("one_idempotency_key,_two_devices", func(t *testing.T) {
		bOp := k.mustDev("127.0.0.11", bKey, opOpts(bToks[gateway.RoleOperator]))
		var ra, rb struct{ DeviceID, DeviceToken string }
		must(t, aOp.Call(k.ctx, "device.token.rotate", map[string]any{"idempotencyKey": "same-key"}, &ra))
		must(t, bOp.Call(k.ctx, "device.token.rotate", map[string]any{"idempotencyKey": "same-key"}, &rb))
		if ra.DeviceID != aID || rb.DeviceID != bID || ra.DeviceToken == rb.DeviceToken {
			t.Fatalf("same key from two devices: A got %s, B got %s (B must get its own token, never A's)", ra.DeviceID, rb.DeviceID)
		}
		aToks[gateway.RoleOperator], bToks[gateway.RoleOperator] = ra.DeviceToken, rb.DeviceToken
		k.stillPairedAs(t, "127.0.0.10", aKey, aToks)
		k.stillPairedAs(t, "127.0.0.11", bKey, bToks)
	})

	t.Run("a_huge_node.invoke.result", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			done <- aOp.Call(k.ctx, "node.invoke", map[string]any{"nodeId": bID, "command": "system.notify", "params": map[string]any{}, "timeoutMs": 600000}, nil)
		}()
		var req struct{ ID string }
		must(t, json.Unmarshal(nextEvent(k.ctx, t, bNode, "node.invoke.request").Payload, &req))
		huge := strings.Repeat("x", 6<<20)
		err := bNode.Call(k.ctx, "node.invoke.result", map[string]any{"id": req.ID, "ok": true, "payload": huge}, nil)
		refused(t, "a 6 MiB result (node)", err, gateway.CodePayloadTooLarge, "", "inline limit")
		refused(t, "a 6 MiB result (invoker)", <-done, gateway.CodePayloadTooLarge, "", "inline limit")
		// Both connections carry on.
		k.invokeAllowed(t, aOp, bNode, bID)
	})

	t.Run("a_revoked_device's_live_connections", func(t *testing.T) {
		inv := make(chan error, 1)
		go func() {
			inv <- aOp.Call(k.ctx, "node.invoke", map[string]any{"nodeId": bID, "command": "system.notify", "params": map[string]any{}, "timeoutMs": 600000}, nil)
		}()
		nextEvent(k.ctx, t, bNode, "node.invoke.request") // in flight when the revoke comes
		var rv struct{ Closed int }
		must(t, k.admin.Call(k.ctx, "device.token.revoke", map[string]any{"deviceId": bID}, &rv))
		<-bNode.Done()
		if cl := websocket.CloseStatus(bNode.Err()); cl != gateway.CloseUnauthorized || !strings.Contains(bNode.Err().Error(), "device token revoked") {
			t.Errorf("revoked node's connection ended with %v, want 4001 device token revoked", bNode.Err())
		}
		refused(t, "the invoke in flight on the revoked node", <-inv, gateway.CodeUnavailable, "", "disconnected")
		before := len(k.denied())
		_, err := k.dev("127.0.0.11", bKey, nodeOpts(bToks[gateway.RoleNode]))
		refused(t, "the revoked token", err, gateway.CodeUnauthorized, "device_token_mismatch", "")
		k.audited("the revoked token", before, "connect", "device:"+bID)
		if d, err := k.a.Pairing.Device(k.ctx, bID); err != nil || len(d.Roles) != 2 {
			t.Errorf("the record after a revoke: %+v %v (must stay for a repair)", d, err)
		}
		var st struct{ Status string }
		must(t, aOp.Call(k.ctx, "health", map[string]any{}, &st))
	})
}

// waitNodes waits until node.list shows every id connected (a connection
// is registered just after its hello-ok).
func waitNodes(k *atk, ids ...string) {
	k.t.Helper()
	for {
		var l struct {
			Nodes []struct {
				NodeID    string
				Connected bool
			}
		}
		must(k.t, k.admin.Call(k.ctx, "node.list", map[string]any{}, &l))
		n := 0
		for _, nd := range l.Nodes {
			if nd.Connected && slices.Contains(ids, nd.NodeID) {
				n++
			}
		}
		if n == len(ids) {
			return
		}
		select {
		case <-k.ctx.Done():
			k.t.Fatalf("nodes %v never all connected: %+v", ids, l)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stillPairedAs checks key's record and tokens (each role) still admit it.
func (k *atk) stillPairedAs(t *testing.T, src string, key *device.PrivateKey, toks map[string]string) {
	t.Helper()
	if _, err := k.a.Pairing.Device(k.ctx, key.Public().ID()); err != nil {
		t.Fatalf("pairing record gone: %v", err)
	}
	k.tokensAdmit(t, src, key, toks)
}

// TestAdversarialAuditFlood: refusals of anonymous callers (refused
// connects, unpaired devices) cost an attacker nothing, and each was an
// audit line: a loop of bogus connects filled the disk. They are audited
// one by one up to a budget per address and minute; the rest are counted
// into the next entry. Not a timing test: 1000 refusals make fewer than
// 1000 entries unless they were spread over more than three minutes.
func TestAdversarialAuditFlood(t *testing.T) {
	k := startAttack(t)
	const n = 1000
	before := len(k.denied())
	bogus, _ := json.Marshal(gateway.RequestFrame{Type: "req", ID: "c1", Method: gateway.MethodConnect,
		Params: mustMarshal(t, gateway.ConnectParams{MinProtocol: 1, MaxProtocol: 1, Auth: gateway.ConnectAuth{Token: "guess"}})})
	for i := range n {
		ws, _, err := websocket.Dial(k.ctx, k.a.WSURL(), nil)
		must(t, err)
		if _, _, err := ws.Read(k.ctx); err != nil { // connect.challenge
			t.Fatal(err)
		}
		must(t, ws.Write(k.ctx, websocket.MessageText, bogus))
		_, data, err := ws.Read(k.ctx)
		if err != nil || !strings.Contains(string(data), gateway.CodeUnauthorized) {
			t.Fatalf("bogus connect %d: %s %v", i, data, err)
		}
		ws.CloseNow()
	}
	audited := 0
	for _, e := range k.denied()[:len(k.denied())-before] {
		if e.Operation == "connect" && e.IP == "127.0.0.1" {
			audited++
		}
	}
	if audited < 100 || audited >= n {
		t.Errorf("%d bogus connects made %d audit entries; want the first ones audited and the flood summarised", n, audited)
	}
}

// TestAdversarialPendingLoop: a device with a pending request (one code
// scanned once) reconnecting in a loop with its proof alone. Each
// reconnect refreshes its one request; it may not add an audit line each
// time (the log would grow at the loop's pace) nor keep every connection
// (they left the pre-handshake caps): the request is audited once, and at
// most devices.MaxPendingConns of its connections stay, the oldest closed.
func TestAdversarialPendingLoop(t *testing.T) {
	k := startAttack(t)
	key := newDeviceKey(t)
	disp, _ := k.code()
	first := k.mustDev("127.0.0.50", key, gateway.ClientOptions{SetupCode: disp})
	var conns []*gateway.Client
	for range 10 {
		conns = append(conns, k.mustDev("127.0.0.50", key, gateway.ClientOptions{}))
	}
	// 11 connections, at most MaxPendingConns stay: the oldest ones go.
	all := append([]*gateway.Client{first}, conns...)
	keep := len(all) - devices.MaxPendingConns
	for i, c := range all {
		if i < keep {
			select {
			case <-c.Done():
				if cl := websocket.CloseStatus(c.Err()); cl != gateway.CloseUnauthorized {
					t.Errorf("pending connection %d ended with %v, want 4001", i, c.Err())
				}
			case <-k.ctx.Done():
				t.Fatalf("pending connection %d of one device (oldest first) is still open after %d newer ones", i, len(all)-1-i)
			}
			continue
		}
		var st struct{ Status string }
		if err := c.Call(k.ctx, "device.pair.status", map[string]any{}, &st); err != nil || st.Status != "pending" {
			t.Errorf("pending connection %d (among the newest): %+v %v", i, st, err)
		}
	}
	id := key.Public().ID()
	es, err := k.a.Audit.Tail(100000, audit.Filter{Operation: "device.pair.request"})
	must(t, err)
	n := 0
	for _, e := range es {
		if strings.Contains(e.Target, id) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("11 connects of one pending device made %d device.pair.request audit entries, want 1", n)
	}
}
