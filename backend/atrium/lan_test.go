package atrium

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/discovery"
	"github.com/atrium-dev/atrium/backend/discovery/netnstest"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/gwid"
)

// lanTestBind is the loopback address tests serve TLS on like a LAN bind
// (tests send traffic only to 127.0.0.0/8).
const lanTestBind = "127.0.0.2"

// startLANApp runs the real app bound to 127.0.0.2. Its mDNS advertiser is
// pointed at an interface that does not exist: every attempt fails (and is
// retried) without sending anything.
func startLANApp(t *testing.T) *App {
	t.Helper()
	a, _ := startAppWith(t, func(string) string { return "" }, func(_ string, o *Options) {
		o.Bind = lanTestBind
		o.MDNSInterfaces = []string{"atrium-none0"}
	})
	return a
}

// lanPort is the port of the app's listeners.
func lanPort(t *testing.T, a *App) string {
	_, port, err := net.SplitHostPort(a.Gateway.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// certOnDisk reads keys/tls.pem's certificate and returns its DER SHA-256.
func certOnDisk(t *testing.T, a *App) [32]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(a.Layout.KeysDir(), gwid.TLSFile))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("keys/tls.pem does not start with a certificate")
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(leaf.IPAddresses, net.ParseIP(lanTestBind).Equal) {
		t.Errorf("certificate SANs %v lack %s", leaf.IPAddresses, lanTestBind)
	}
	return sha256.Sum256(blk.Bytes)
}

func httpsClient(conf *tls.Config) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
}

// TestLANBind: bound to 127.0.0.2 the app serves HTTPS/WSS there with the
// certificate of keys/tls.pem and keeps plain HTTP on 127.0.0.1 (same
// port); a client pinning that certificate connects, an unpinned one or
// one pinning another certificate does not; Settings and gateway.json show
// the bind, the address, the fingerprint and the gateway id; the mDNS
// advertiser fails and retries while everything keeps being served.
func TestLANBind(t *testing.T) {
	a := startLANApp(t)
	port := lanPort(t, a)
	lanAddr := net.JoinHostPort(lanTestBind, port)
	fp := certOnDisk(t, a)

	info := a.LAN()
	if info.Bind != lanTestBind || !slices.Equal(info.Addresses, []string{lanAddr}) || !slices.Equal(info.URLs, []string{"https://" + lanAddr + "/"}) ||
		info.TLSFingerprint != hex.EncodeToString(fp[:]) || info.TLSFingerprintWords != gwid.FingerprintWords(fp) ||
		info.GatewayID != a.Identity.ID || len(info.GatewayID) != 64 {
		t.Fatalf("LAN() = %+v", info)
	}
	file, err := ReadGatewayInfo(a.Layout.GatewayFile())
	if err != nil || file.Addr != a.Gateway.Addr() || file.Bind != lanTestBind || !slices.Equal(file.Addresses, info.Addresses) ||
		file.TLSFingerprint != info.TLSFingerprint || file.GatewayID != info.GatewayID {
		t.Fatalf("gateway.json %+v (%v)", file, err)
	}

	// Plain HTTP on 127.0.0.1, same port.
	resp, err := http.Get("http://" + a.Gateway.Addr() + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain healthz on 127.0.0.1: %v %v", resp, err)
	}
	resp.Body.Close()

	// Pinned HTTPS on 127.0.0.2.
	resp, err = httpsClient(gwid.PinnedClientConfig(fp)).Get("https://" + lanAddr + "/healthz")
	if err != nil {
		t.Fatalf("pinned HTTPS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok":true`) || resp.TLS == nil ||
		sha256.Sum256(resp.TLS.PeerCertificates[0].Raw) != fp {
		t.Fatalf("pinned HTTPS: %d %s", resp.StatusCode, body)
	}
	// Unpinned (the system's roots) and wrongly pinned clients fail the handshake.
	if _, err := httpsClient(&tls.Config{}).Get("https://" + lanAddr + "/healthz"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unpinned client: err %v, want a certificate error", err)
	}
	other := fp
	other[0] ^= 1
	if _, err := httpsClient(gwid.PinnedClientConfig(other)).Get("https://" + lanAddr + "/healthz"); !errors.Is(err, gwid.ErrFingerprintMismatch) {
		t.Fatalf("wrong pin: err %v, want ErrFingerprintMismatch", err)
	}

	// WSS with the pin: the handshake starts (connect.challenge).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "wss://"+lanAddr+"/ws", &websocket.DialOptions{HTTPClient: httpsClient(gwid.PinnedClientConfig(fp)),
		HTTPHeader: http.Header{"Origin": {"https://" + lanAddr}}})
	if err != nil {
		t.Fatalf("pinned WSS: %v", err)
	}
	_, data, err := c.Read(ctx)
	c.Close(websocket.StatusNormalClosure, "")
	if err != nil || !strings.Contains(string(data), `"connect.challenge"`) {
		t.Fatalf("WSS: want connect.challenge, got %s (%v)", data, err)
	}
	if _, _, err := websocket.Dial(ctx, "wss://"+lanAddr+"/ws", &websocket.DialOptions{HTTPClient: httpsClient(&tls.Config{})}); err == nil {
		t.Fatal("unpinned WSS connected")
	}
	// The operator token is for this machine: refused over the LAN
	// listener (127.0.0.2 is a loopback address, yet the listener is a LAN
	// one), accepted on the plain 127.0.0.1 one.
	ci := gateway.ClientInfo{ID: "atrium-test", Version: "test", Platform: "linux", Mode: "test", InstanceID: "lan"}
	_, err = gateway.Dial(ctx, gateway.ClientOptions{URL: "wss://" + lanAddr + "/ws", Token: a.Token, Client: ci,
		HTTPClient: httpsClient(gwid.PinnedClientConfig(fp))})
	var gerr *gateway.Error
	if !errors.As(err, &gerr) || gerr.Code != gateway.CodeForbidden || !strings.Contains(gerr.Message, "loopback only") {
		t.Fatalf("operator token over WSS: err %v, want FORBIDDEN loopback only", err)
	}
	plain, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token, Client: ci})
	if err != nil {
		t.Fatalf("operator token on 127.0.0.1: %v", err)
	}
	if h := plain.Hello(); h.Server.GatewayID != a.Identity.ID {
		t.Errorf("hello-ok server.gatewayId %q, want %q", h.Server.GatewayID, a.Identity.ID)
	}
	plain.Close()

	// The settings the UI shows.
	cl := dial(t, a)
	var view struct {
		Gateway struct {
			Addr, Bind, TLSFingerprint, TLSFingerprintWords, GatewayID, MDNS string
			Addresses, URLs                                                  []string
		} `json:"gateway"`
	}
	cl.ok("config.get", map[string]any{}, &view)
	// device.pair.code points phones at the TLS address, with the fingerprint.
	var code struct {
		URL, Fingerprint, FingerprintWords string
		URLs                               []string
		LoopbackOnly                       bool
	}
	cl.ok("device.pair.code", map[string]any{}, &code)
	wantURL := "https://" + lanAddr + "/pair#"
	if !strings.HasPrefix(code.URL, wantURL) || !strings.Contains(code.URL, "&g="+a.Identity.ID+"&f="+info.TLSFingerprint) ||
		len(code.URLs) != 1 || !strings.HasPrefix(code.URLs[0], wantURL) || code.LoopbackOnly ||
		code.Fingerprint != info.TLSFingerprint || code.FingerprintWords != info.TLSFingerprintWords {
		t.Fatalf("device.pair.code = %+v", code)
	}
	g := view.Gateway
	if g.Addr != a.Gateway.Addr() || g.Bind != lanTestBind || !slices.Equal(g.Addresses, []string{lanAddr}) ||
		g.TLSFingerprint != info.TLSFingerprint || g.TLSFingerprintWords != info.TLSFingerprintWords || g.GatewayID != a.Identity.ID {
		t.Fatalf("config.get gateway %+v", g)
	}

	// mDNS: failing (no such interface), retried, never stopping the app.
	deadline := time.Now().Add(30 * time.Second)
	for a.lan.adv.Status().Failures < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("mdns status %+v, want failures", a.lan.adv.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := a.lan.adv.Status(); st.State != discovery.StateRetrying || !strings.Contains(st.LastError, "atrium-none0") || a.LAN().MDNS != discovery.StateRetrying {
		t.Fatalf("mdns status %+v", st)
	}
	resp, err = httpsClient(gwid.PinnedClientConfig(fp)).Get("https://" + lanAddr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTPS after mDNS failures: %v %v", resp, err)
	}
	resp.Body.Close()
	cl.ok("health", map[string]any{}, nil)
}

// TestLANPlaintextRefused: plain HTTP (or anything but a TLS handshake) on
// the TLS address is answered 400 "this address serves HTTPS only", never
// served, and audited; TLS on the plain 127.0.0.1 listener does not work
// either (it is not a TLS listener).
func TestLANPlaintextRefused(t *testing.T) {
	a := startLANApp(t)
	lanAddr := net.JoinHostPort(lanTestBind, lanPort(t, a))

	// A browser-like client.
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + lanAddr + "/healthz?probe=1")
	if err != nil {
		t.Fatalf("plain GET on the TLS address: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "this address serves HTTPS only") ||
		strings.Contains(string(body), `"ok"`) {
		t.Fatalf("plain GET: %d %q", resp.StatusCode, body)
	}
	// A WebSocket upgrade in plaintext, and bytes that are not HTTP.
	if _, _, err := websocket.Dial(context.Background(), "ws://"+lanAddr+"/ws", nil); err == nil {
		t.Fatal("a plaintext WebSocket was accepted on the TLS address")
	}
	raw, err := net.DialTimeout("tcp", lanAddr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
	_, _ = raw.Write([]byte("\x00\x01 not http at all\r\n\r\n"))
	line, err := bufio.NewReader(raw).ReadString('\n')
	raw.Close()
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 400") {
		t.Fatalf("non-HTTP bytes: %q %v", line, err)
	}

	entries, err := a.Audit.Tail(10, audit.Filter{Operation: "gateway.plaintext"})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, e := range entries {
		if e.Result != audit.Denied || e.IP == "" || !strings.HasPrefix(e.Target, lanAddr+" ") {
			t.Errorf("audit entry %+v", e)
		}
		targets = append(targets, e.Target)
	}
	for _, want := range []string{lanAddr + " GET /healthz?…" /* the query is never recorded */, lanAddr + " GET /ws", lanAddr + " (not HTTP)"} {
		if !slices.Contains(targets, want) {
			t.Errorf("audit lacks %q: %q", want, targets)
		}
	}

	// The plain listener does not speak TLS.
	fp := certOnDisk(t, a)
	if _, err := httpsClient(gwid.PinnedClientConfig(fp)).Get("https://" + a.Gateway.Addr() + "/healthz"); err == nil {
		t.Fatal("TLS on the plain 127.0.0.1 listener worked")
	}
}

// TestLANHostOrigin: on the TLS address a request for a host the app does
// not serve gets 421 (DNS rebinding), a WebSocket from another origin 403;
// the served address and the machine's .local name pass.
func TestLANHostOrigin(t *testing.T) {
	a := startLANApp(t)
	port := lanPort(t, a)
	lanAddr := net.JoinHostPort(lanTestBind, port)
	fp := certOnDisk(t, a)
	hc := httpsClient(gwid.PinnedClientConfig(fp))
	local := strings.ToLower(discovery.HostLabel("")) + ".local"
	for _, tc := range []struct {
		host   string
		status int
	}{
		{lanAddr, 200},
		{net.JoinHostPort(local, port), 200},
		{"evil.example:" + port, http.StatusMisdirectedRequest},
		{"192.0.2.99:" + port, http.StatusMisdirectedRequest},
	} {
		req, _ := http.NewRequest("GET", "https://"+lanAddr+"/healthz", nil)
		req.Host = tc.host
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("Host %s: %v", tc.host, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("Host %s: status %d, want %d", tc.host, resp.StatusCode, tc.status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"https://" + lanAddr, true},
		{"https://evil.example", false},
		{"https://" + net.JoinHostPort(local, port), false}, // a served name, but not this request's Host
	} {
		c, resp, err := websocket.Dial(ctx, "wss://"+lanAddr+"/ws", &websocket.DialOptions{HTTPClient: hc, HTTPHeader: http.Header{"Origin": {tc.origin}}})
		if tc.ok != (err == nil) {
			t.Errorf("Origin %s: err %v, want ok=%v", tc.origin, err, tc.ok)
		}
		if err == nil {
			c.Close(websocket.StatusNormalClosure, "")
		} else if resp != nil && resp.StatusCode != http.StatusForbidden {
			t.Errorf("Origin %s: status %d, want 403", tc.origin, resp.StatusCode)
		}
	}
}

// TestBindValues: a bad --bind is refused with what is accepted; the
// bind in config.json applies when no flag is given, and the flag wins.
func TestBindValues(t *testing.T) {
	for _, tc := range []struct{ flag, conf, want, err string }{
		{"", "", "loopback", ""},
		{"", "lan", "lan", ""},
		{"127.0.0.2", "lan", "127.0.0.2", ""},
		{"::ffff:127.0.0.3", "", "127.0.0.3", ""},
		{"0.0.0.0", "", "", `--bind: gateway.bind "0.0.0.0": use "lan"`},
		{"", "wifi", "", `gateway.bind "wifi"`},
	} {
		got, err := resolveBind(tc.flag, tc.conf)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("resolveBind(%q, %q) = %q, %v; want %q, %q", tc.flag, tc.conf, got, err, tc.want, tc.err)
		}
	}
}

// TestLANAddrs: bind "lan" serves the unicast addresses of the up,
// non-loopback interfaces, IPv4 first, without link-local addresses.
func TestLANAddrs(t *testing.T) {
	pfx := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	got := lanAddrs([]ifaceAddrs{
		{name: "lo", flags: net.FlagUp | net.FlagLoopback, addrs: pfx("127.0.0.1/8", "::1/128")},
		{name: "eth0", flags: net.FlagUp | net.FlagMulticast, addrs: pfx("fd00::5/64", "192.168.1.20/24", "fe80::1/64", "169.254.3.4/16")},
		{name: "wlan0", flags: net.FlagUp, addrs: pfx("10.0.0.7/8", "192.168.1.20/24")},
		{name: "eth1", flags: net.FlagMulticast, addrs: pfx("172.16.0.2/12")}, // down
	})
	want := []netip.Addr{netip.MustParseAddr("192.168.1.20"), netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("fd00::5")}
	if !slices.Equal(got, want) {
		t.Fatalf("lanAddrs = %v, want %v", got, want)
	}
}

// TestLoopbackBind: with the loopback bind there is no TLS: Settings and
// gateway.json show no address and no fingerprint; gateway.bind set
// through config.patch is stored and applies at the next start.
func TestLoopbackBind(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	info := a.LAN()
	if info.Bind != "loopback" || len(info.Addresses) != 0 || info.TLSFingerprint != "" || info.MDNS != "" {
		t.Fatalf("LAN() = %+v", info)
	}
	b, _ := json.Marshal(info)
	if !strings.Contains(string(b), `"addresses":[]`) {
		t.Fatalf("LAN JSON %s", b)
	}

	// gateway.bind through config.patch: stored, in force at the next start.
	cl := dial(t, a)
	var view struct {
		Config struct {
			Gateway struct{ Bind string } `json:"gateway"`
		} `json:"config"`
		Gateway struct{ Bind string } `json:"gateway"`
		Restart []string              `json:"restartRequired"`
	}
	cl.ok("config.patch", map[string]any{"patch": map[string]any{"gateway": map[string]any{"bind": "lan"}}}, &view)
	if view.Config.Gateway.Bind != "lan" || view.Gateway.Bind != "loopback" || !slices.Contains(view.Restart, "gateway") {
		t.Fatalf("after patching gateway.bind: %+v", view)
	}
	res := cl.call("config.patch", map[string]any{"idempotencyKey": "bad-bind", "patch": map[string]any{"gateway": map[string]any{"bind": "0.0.0.0"}}})
	if res.OK || res.Error == nil || res.Error.Code != gateway.CodeInvalidRequest || !strings.Contains(res.Error.Message, `use "lan"`) {
		t.Fatalf("bad bind: %+v", res)
	}
	if cur := a.Settings().Gateway.Bind; cur != "lan" {
		t.Fatalf("a refused patch changed the bind: %q", cur)
	}
}

// TestLANDiscoveryInNamespace: in a network namespace of its own with
// multicast on lo, the app bound to 127.0.0.2 advertises itself by mDNS on
// lo (the interface of its address); a browse finds it with its port,
// gateway id, certificate fingerprint and protocol, and a client pinning
// the advertised fingerprint connects to the advertised address.
func TestLANDiscoveryInNamespace(t *testing.T) {
	if !netnstest.Run(t) {
		return
	}
	netnstest.MulticastOnLo(t)
	a, _ := startAppWith(t, func(string) string { return "" }, func(_ string, o *Options) { o.Bind = lanTestBind })
	deadline := time.Now().Add(60 * time.Second)
	for a.LAN().MDNS != discovery.StateAdvertising {
		if time.Now().After(deadline) {
			t.Fatalf("mdns %+v", a.lan.adv.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	info := a.LAN()
	var found []discovery.Gateway
	for range 6 {
		start := time.Now()
		gws, err := discovery.Browse(context.Background(), discovery.BrowseOptions{Interfaces: []string{"lo"}, Wait: 5 * time.Second, Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(gws) > 0 {
			t.Logf("discovered in %v", time.Since(start))
			found = gws
			break
		}
	}
	if len(found) != 1 {
		t.Fatalf("browse found %+v", found)
	}
	g := found[0]
	port := lanPort(t, a)
	if g.GatewayID != info.GatewayID || g.TLSSHA256 != info.TLSFingerprint || g.Protocol != discovery.Protocol ||
		!slices.Equal(g.Addrs, []netip.Addr{netip.MustParseAddr(lanTestBind)}) || g.URLs()[0] != "https://"+net.JoinHostPort(lanTestBind, port) {
		t.Fatalf("found %+v, want the app %+v", g, info)
	}
	fp, err := gwid.ParseFingerprint(g.TLSSHA256)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpsClient(gwid.PinnedClientConfig(fp)).Get(g.URLs()[0] + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("pinned HTTPS to the discovered gateway: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestPendingKey: connections are counted per IPv4 address and per IPv6
// /64 (a host may hold a whole /64), a mapped IPv4 address as IPv4.
func TestPendingKey(t *testing.T) {
	for addr, want := range map[string]string{
		"192.168.1.20:5000":       "192.168.1.20",
		"[::ffff:192.168.1.20]:5": "192.168.1.20",
		"[fd00::1]:443":           "fd00::/64",
		"[fd00::ffff:1:2:3]:1":    "fd00::/64",
		"[fd00:0:0:1::1]:1":       "fd00:0:0:1::/64",
		"[fe80::1%eth0]:9":        "fe80::/64",
	} {
		ap := netip.MustParseAddrPort(addr)
		if got := pendingKey(net.TCPAddrFromAddrPort(ap)); got != want {
			t.Errorf("pendingKey(%s) = %q, want %q", addr, got, want)
		}
	}
}
