package discovery

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grandcat/zeroconf"

	"github.com/atrium-dev/atrium/backend/discovery/netnstest"
)

var (
	gwA = strings.Repeat("ab", 32)
	fpA = strings.Repeat("0f", 32)
	gwB = strings.Repeat("cd", 32)
	fpB = strings.Repeat("1e", 32)
	lo1 = netip.MustParseAddr("127.0.0.1")
)

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startAdvertiser runs an Advertiser until the test ends and waits until
// it advertises.
func startAdvertiser(t *testing.T, o AdvertiserOptions) *Advertiser {
	t.Helper()
	a, err := NewAdvertiser(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitState(t, a, StateAdvertising)
	return a
}

func waitState(t *testing.T, a *Advertiser, want State) Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := a.Status()
		if st.State == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("advertiser state %+v, want %s", st, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// browseUntil browses lo until it sees n gateways (each Browse listens up
// to 5 s; a loaded machine may need several).
func browseUntil(t *testing.T, n int) []Gateway {
	t.Helper()
	var got []Gateway
	for range 6 {
		var err error
		got, err = Browse(context.Background(), BrowseOptions{Interfaces: []string{"lo"}, Wait: 5 * time.Second, Max: n})
		if err != nil {
			t.Fatalf("Browse: %v", err)
		}
		if len(got) >= n {
			return got
		}
	}
	t.Fatalf("Browse found %d gateways, want %d: %+v", len(got), n, got)
	return nil
}

// TestAdvertiseBrowse: two gateways advertised on the namespace's loopback
// are found with their TXT fields; a service of the same type whose TXT
// role is not gateway is ignored; a stopped advertiser is no longer found.
func TestAdvertiseBrowse(t *testing.T) {
	if !netnstest.Run(t) {
		return
	}
	netnstest.MulticastOnLo(t)

	// A: interfaces picked from the address (lo holds 127.0.0.1).
	a := startAdvertiser(t, AdvertiserOptions{DisplayName: "书房 Atrium", Port: 18789, GatewayID: gwA, TLSSHA256: strings.ToUpper(fpA),
		IPs: []netip.Addr{lo1}, Host: "desk.local.", Logger: quietLog()})
	if st := a.Status(); !slices.Equal(st.Interfaces, []string{"lo"}) || st.Failures != 0 {
		t.Fatalf("status %+v, want advertising on lo", st)
	}
	// B: named interface, stopped later.
	bAdv, err := NewAdvertiser(AdvertiserOptions{DisplayName: "Laptop v1.2", Port: 28789, GatewayID: gwB, TLSSHA256: fpB,
		IPs: []netip.Addr{lo1}, Interfaces: []string{"lo"}, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	bCtx, bStop := context.WithCancel(context.Background())
	bDone := make(chan error, 1)
	go func() { bDone <- bAdv.Run(bCtx) }()
	waitState(t, bAdv, StateAdvertising)
	// Not a gateway: same service type, role=node.
	other, err := zeroconf.RegisterProxy("some node", Service, Domain, 9999, "other", []string{"127.0.0.1"},
		[]string{"role=node", "gwid=" + gwA}, []net.Interface{mustIface(t, "lo")})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Shutdown()

	got := browseUntil(t, 2)
	if len(got) != 2 {
		t.Fatalf("found %+v, want the two gateways only", got)
	}
	want := []Gateway{
		{Instance: "Laptop v1-2", Host: bAdv.o.Host + ".local", Addrs: []netip.Addr{lo1}, Port: 28789, GatewayID: gwB, TLSSHA256: fpB, DisplayName: "Laptop v1.2", Protocol: 1},
		{Instance: "书房 Atrium", Host: "desk.local", Addrs: []netip.Addr{lo1}, Port: 18789, GatewayID: gwA, TLSSHA256: fpA, DisplayName: "书房 Atrium", Protocol: 1},
	}
	for i := range want {
		if !equalGateway(got[i], want[i]) {
			t.Errorf("gateway %d = %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if u := got[1].URLs(); !slices.Equal(u, []string{"https://127.0.0.1:18789"}) {
		t.Errorf("URLs = %v", u)
	}

	// B withdraws: only A answers afterwards.
	bStop()
	if err := <-bDone; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st := bAdv.Status(); st.State != StateStopped {
		t.Fatalf("stopped advertiser status %+v", st)
	}
	got, err = Browse(context.Background(), BrowseOptions{Interfaces: []string{"lo"}, Wait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].GatewayID != gwA {
		t.Fatalf("after B stopped found %+v, want A only", got)
	}
}

// logRecords is a slog.Handler that keeps every record (all levels).
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// count returns how many records at level have a message starting with prefix.
func (h *logRecords) count(level slog.Level, prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Level == level && strings.HasPrefix(r.Message, prefix) {
			n++
		}
	}
	return n
}

// TestAdvertiseRetriesUntilMulticast: while the loopback has no multicast
// every attempt fails and is retried; the warning is logged once however
// many attempts fail (the repetitions are debug lines), and the status
// says why: no multicast, on lo. Once multicast is on, the next attempt
// advertises (logged once) and a browse finds the gateway.
func TestAdvertiseRetriesUntilMulticast(t *testing.T) {
	if !netnstest.Run(t) {
		return
	}
	logs := &logRecords{}
	a, err := NewAdvertiser(AdvertiserOptions{Port: 18789, GatewayID: gwA, TLSSHA256: fpA, IPs: []netip.Addr{lo1},
		MinRetry: time.Millisecond, MaxRetry: 4 * time.Millisecond, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// The status counts a failure before its log line is written: wait
	// for both (8 failures, 7 repeats logged), then count.
	deadline := time.Now().Add(30 * time.Second)
	for a.Status().Failures < 8 || logs.count(slog.LevelDebug, "mdns advertise failed") < 7 {
		if time.Now().After(deadline) {
			t.Fatalf("status %+v, %d repeats logged; want 8 failures and 7 repeats", a.Status(), logs.count(slog.LevelDebug, "mdns advertise failed"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := a.Status()
	if st.State != StateRetrying || st.Reason != ReasonNoMulticast || !slices.Equal(st.Interfaces, []string{"lo"}) ||
		!strings.Contains(st.LastError, "no multicast") {
		t.Fatalf("status %+v, want retrying: no multicast on lo", st)
	}
	if n, again := logs.count(slog.LevelWarn, "mdns advertise failed"), logs.count(slog.LevelDebug, "mdns advertise failed"); n != 1 || again < 7 {
		t.Fatalf("%d warnings and %d debug lines after %d failures, want 1 warning", n, again, st.Failures)
	}
	netnstest.MulticastOnLo(t)
	st = waitState(t, a, StateAdvertising)
	if st.Reason != "" || st.LastError != "" || !slices.Equal(st.Interfaces, []string{"lo"}) {
		t.Fatalf("status %+v once advertising", st)
	}
	if n := logs.count(slog.LevelInfo, "mdns advertising"); n != 1 {
		t.Fatalf("advertising logged %d times", n)
	}
	got := browseUntil(t, 1)
	if got[0].GatewayID != gwA || got[0].TLSSHA256 != fpA || got[0].Port != 18789 {
		t.Fatalf("found %+v", got)
	}
}

// TestRunSurvivesFailures: a missing interface fails every attempt; Run
// retries (without sending anything) until its context ends and returns nil.
func TestRunSurvivesFailures(t *testing.T) {
	a, err := NewAdvertiser(AdvertiserOptions{Port: 18789, GatewayID: gwA, TLSSHA256: fpA, IPs: []netip.Addr{lo1},
		Interfaces: []string{"atrium-none0"}, MinRetry: time.Millisecond, MaxRetry: 5 * time.Millisecond, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for a.Status().Failures < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("status %+v", a.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := a.Status()
	if st.State != StateRetrying || st.Reason != ReasonNoInterface || !strings.Contains(st.LastError, `interface "atrium-none0"`) {
		t.Fatalf("status %+v", st)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if a.Status().State != StateStopped {
		t.Fatalf("status %+v after stop", a.Status())
	}
}

// TestRunRecoversPanic: a panic inside the mDNS library during a
// registration is a failed attempt, not a crash; the next attempt counts.
func TestRunRecoversPanic(t *testing.T) {
	name := loName(t)
	if name == "" {
		t.Skip("no up multicast interface name to resolve")
	}
	a, err := NewAdvertiser(AdvertiserOptions{Port: 18789, GatewayID: gwA, TLSSHA256: fpA, IPs: []netip.Addr{lo1},
		Interfaces: []string{name}, MinRetry: time.Millisecond, MaxRetry: time.Millisecond, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var shut atomic.Bool
	a.register = func(string, int, string, []string, []string, []net.Interface) (shutdowner, error) {
		if calls.Add(1) < 3 {
			panic("index out of range")
		}
		return shutdownFunc(func() { shut.Store(true) }), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	st := waitState(t, a, StateAdvertising)
	if st.Failures != 2 || st.LastError != "" {
		t.Fatalf("status %+v, want 2 failures then advertising", st)
	}
	cancel()
	if err := <-done; err != nil || !shut.Load() {
		t.Fatalf("Run = %v, shut down %v", err, shut.Load())
	}
}

type shutdownFunc func()

func (f shutdownFunc) Shutdown() { f() }

// loName returns an up, multicast-capable interface's name for tests that
// only resolve it (nothing is sent), else "".
func loName(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp != 0 && i.Flags&net.FlagMulticast != 0 {
			return i.Name
		}
	}
	return ""
}

func TestNewAdvertiserValidates(t *testing.T) {
	ok := AdvertiserOptions{Port: 1, GatewayID: gwA, TLSSHA256: fpA, IPs: []netip.Addr{lo1}}
	for name, mut := range map[string]func(*AdvertiserOptions){
		"port 0":      func(o *AdvertiserOptions) { o.Port = 0 },
		"port 65536":  func(o *AdvertiserOptions) { o.Port = 65536 },
		"short gwid":  func(o *AdvertiserOptions) { o.GatewayID = "abc" },
		"hex fp":      func(o *AdvertiserOptions) { o.TLSSHA256 = strings.Repeat("zz", 32) },
		"no ips":      func(o *AdvertiserOptions) { o.IPs = nil },
		"unspecified": func(o *AdvertiserOptions) { o.IPs = []netip.Addr{netip.IPv4Unspecified()} },
	} {
		o := ok
		mut(&o)
		if _, err := NewAdvertiser(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: err %v, want ErrInvalidOptions", name, err)
		}
	}
	a, err := NewAdvertiser(AdvertiserOptions{Port: 443, GatewayID: gwA, TLSSHA256: fpA, IPs: []netip.Addr{lo1},
		Host: "my_host.example", DisplayName: strings.Repeat("界", 30)})
	if err != nil {
		t.Fatal(err)
	}
	if a.o.Host != "myhost" {
		t.Errorf("host %q", a.o.Host)
	}
	if len(a.inst) > 63 || !strings.HasPrefix(strings.Repeat("界", 30), a.inst) || len(a.inst) != 63 {
		t.Errorf("instance %q (%d bytes) not cut on a rune boundary to 63 bytes", a.inst, len(a.inst))
	}
	wantTXT := []string{"role=gateway", "port=443", "gwid=" + gwA, "tlsSha256=" + fpA, "displayName=" + strings.Repeat("界", 30), "protocol=1"}
	if !slices.Equal(a.TXT(), wantTXT) {
		t.Errorf("TXT %q\nwant %q", a.TXT(), wantTXT)
	}
}

func TestBrowseMissingInterface(t *testing.T) {
	_, err := Browse(context.Background(), BrowseOptions{Interfaces: []string{"atrium-none0"}, Wait: time.Millisecond})
	if !errors.Is(err, ErrNoInterface) {
		t.Fatalf("err %v, want ErrNoInterface", err)
	}
}

func TestParseEntry(t *testing.T) {
	e := func(txt ...string) *zeroconf.ServiceEntry {
		se := zeroconf.NewServiceEntry("gw", Service, Domain)
		se.HostName, se.Port, se.Text = "h.local.", 18789, txt
		se.AddrIPv4 = []net.IP{net.ParseIP("192.0.2.7")}
		se.AddrIPv6 = []net.IP{net.ParseIP("fe80::1")}
		return se
	}
	g, ok := parseEntry(e("role=gateway", "role=node", "gwid="+strings.ToUpper(gwA), "tlsSha256=nothex", "protocol=x"))
	if !ok || g.GatewayID != gwA || g.TLSSHA256 != "" || g.Protocol != 0 || g.DisplayName != "gw" || g.Host != "h.local" ||
		!slices.Equal(g.Addrs, []netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("fe80::1")}) {
		t.Fatalf("parsed %+v ok=%v", g, ok)
	}
	// Names and TXT strings arrive in DNS presentation format.
	esc := e(`role=gateway`, `displayName=\228\185\166\230\136\191\ A\\B`)
	esc.Instance = `\228\185\166\230\136\191\ Atrium`
	if g, ok := parseEntry(esc); !ok || g.Instance != "书房 Atrium" || g.DisplayName != `书房 A\B` {
		t.Fatalf("unescaped %+v", g)
	}
	if _, ok := parseEntry(e("role=node", "gwid="+gwA)); ok {
		t.Error("a non-gateway entry was accepted")
	}
	noAddr := e("role=gateway")
	noAddr.AddrIPv4, noAddr.AddrIPv6 = nil, nil
	if _, ok := parseEntry(noAddr); ok {
		t.Error("an entry without address was accepted")
	}
}

func mustIface(t *testing.T, name string) net.Interface {
	t.Helper()
	i, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return *i
}

func equalGateway(a, b Gateway) bool {
	return a.Instance == b.Instance && a.Host == b.Host && slices.Equal(a.Addrs, b.Addrs) && a.Port == b.Port &&
		a.GatewayID == b.GatewayID && a.TLSSHA256 == b.TLSSHA256 && a.DisplayName == b.DisplayName && a.Protocol == b.Protocol
}

// TestBrowseLatency measures how long a browse takes to find an advertised
// gateway (a fresh resolver each time, stopping at the first answer), in a
// network namespace of its own with multicast on lo; it logs the figures
// for docs/BENCHMARKS.md and asserts nothing about time. Run with
//
//	ATRIUM_BENCH_MDNS=1 go test -run TestBrowseLatency -v ./backend/discovery
func TestBrowseLatency(t *testing.T) {
	if os.Getenv("ATRIUM_BENCH_MDNS") == "" {
		t.Skip("a measurement: set ATRIUM_BENCH_MDNS=1")
	}
	if !netnstest.Run(t) {
		return
	}
	netnstest.MulticastOnLo(t)
	startAdvertiser(t, AdvertiserOptions{Port: 18789, GatewayID: gwA, TLSSHA256: fpA, IPs: []netip.Addr{lo1}, Logger: quietLog()})
	const n = 50
	var ds []time.Duration
	for range n {
		start := time.Now()
		got, err := Browse(context.Background(), BrowseOptions{Interfaces: []string{"lo"}, Wait: 10 * time.Second, Max: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("browse: %v %+v", err, got)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	t.Logf("browse to the first gateway, %d runs: min %v, p50 %v, p90 %v, max %v", n, ds[0], ds[n/2], ds[n*9/10], ds[n-1])
}
