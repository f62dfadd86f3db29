package atrium

// The gateway on the LAN (issue 16, part B): where it listens besides the
// plain 127.0.0.1 listener (gateway.bind, --bind), the TLS certificate of
// those listeners (package gwid), the refusal of plaintext on them, the
// mDNS advertisement (package discovery), and what gateway.json, Settings
// and pairing show of it.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/devices"
	"github.com/atrium-dev/atrium/backend/discovery"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/gwid"
)

// LANInfo says where the gateway serves besides 127.0.0.1 and how a
// client recognises it; gateway.json, config.get (Settings) and pairing
// show it.
type LANInfo struct {
	// Bind is the bind in force: "loopback", "lan" or the IP literal.
	Bind string `json:"bind"`
	// Addresses are the HTTPS/WSS listeners ("192.168.1.20:18789",
	// "[fd00::5]:18789"); empty with a loopback bind.
	Addresses []string `json:"addresses"`
	// URLs are "https://<address>/" for each listener.
	URLs []string `json:"urls"`
	// TLSFingerprint is the hex SHA-256 of the certificate's DER (64
	// characters), TLSFingerprintWords the same as words to compare, TLSSPKI
	// the base64 SHA-256 of its public key; all "" with a loopback bind.
	TLSFingerprint      string `json:"tlsFingerprint,omitempty"`
	TLSFingerprintWords string `json:"tlsFingerprintWords,omitempty"`
	TLSSPKI             string `json:"tlsSpki,omitempty"`
	// GatewayID is the gateway's id (hex SHA-256 of its identity key).
	GatewayID string `json:"gatewayId"`
	// MDNS is the advertisement's state ("advertising", "retrying", …;
	// "" when there is none: loopback bind). MDNSInterfaces are the
	// interfaces advertised on, or, when retrying, those that could not be
	// used; MDNSReason says why it is retrying (discovery.Reason:
	// "no-multicast", "interface-down", "no-interface", "error") and
	// MDNSError how the last attempt failed.
	MDNS           discovery.State  `json:"mdns,omitempty"`
	MDNSInterfaces []string         `json:"mdnsInterfaces,omitempty"`
	MDNSReason     discovery.Reason `json:"mdnsReason,omitempty"`
	MDNSError      string           `json:"mdnsError,omitempty"`
}

// lan is the state of the LAN listeners; set by Listen, read after.
type lan struct {
	bind      string
	mdnsIfs   []string // AdvertiserOptions.Interfaces (Options.MDNSInterfaces)
	addrs     []netip.Addr
	hosts     []string // what the certificate names and the Host check accepts
	cert      *gwid.Cert
	listeners []*tlsListener
	adv       *discovery.Advertiser
	plain     plainLimiter
	pending   *pendingLimiter // unauthenticated and open connections, the open-file budget
	full      plainLimiter    // rate of the log and audit entries of pendingLimiter's refusals
}

// resolveBind returns the bind in force: the flag, else config.json's.
func resolveBind(flag, conf string) (string, error) {
	b := flag
	if b == "" {
		b = conf
	}
	if err := config.CheckBind(b); err != nil {
		if flag != "" {
			return "", fmt.Errorf("--bind: %w", err)
		}
		return "", err
	}
	if b == "" {
		b = config.BindLoopback
	}
	if ip, err := netip.ParseAddr(b); err == nil {
		b = ip.Unmap().String()
	}
	return b, nil
}

// ifaceAddrs is one interface's flags and addresses (lanAddrs' input).
type ifaceAddrs struct {
	name  string
	flags net.Flags
	addrs []netip.Prefix
}

// systemInterfaces lists this machine's interfaces with their addresses.
func systemInterfaces() ([]ifaceAddrs, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	out := make([]ifaceAddrs, 0, len(ifs))
	for _, ifi := range ifs {
		ia := ifaceAddrs{name: ifi.Name, flags: ifi.Flags}
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				ia.addrs = append(ia.addrs, p)
			}
		}
		out = append(out, ia)
	}
	return out, nil
}

// lanAddrs picks the addresses of bind "lan": every unicast address of the
// up, non-loopback interfaces, link-local ones excepted (an IPv6 link-local
// address needs a zone, an IPv4 one is no network's address), IPv4 first.
func lanAddrs(ifs []ifaceAddrs) []netip.Addr {
	var v4, v6 []netip.Addr
	for _, ifi := range ifs {
		if ifi.flags&net.FlagUp == 0 || ifi.flags&net.FlagLoopback != 0 {
			continue
		}
		for _, p := range ifi.addrs {
			ip := p.Addr().Unmap()
			if !ip.IsGlobalUnicast() || ip.IsLinkLocalUnicast() || ip.IsLoopback() {
				continue
			}
			if ip.Is4() && !slices.Contains(v4, ip) {
				v4 = append(v4, ip)
			} else if ip.Is6() && !slices.Contains(v6, ip) {
				v6 = append(v6, ip)
			}
		}
	}
	return append(v4, v6...)
}

// bindAddrs turns the bind in force into the addresses to serve TLS on.
func bindAddrs(bind string) ([]netip.Addr, error) {
	switch bind {
	case config.BindLoopback:
		return nil, nil
	case config.BindLAN:
		ifs, err := systemInterfaces()
		if err != nil {
			return nil, err
		}
		return lanAddrs(ifs), nil
	}
	ip, err := netip.ParseAddr(bind)
	if err != nil {
		return nil, fmt.Errorf("gateway.bind %q: %w", bind, err)
	}
	return []netip.Addr{ip}, nil
}

// certHosts are the names and addresses of the LAN listeners: each
// address, the machine's host name and <host>.local (what mDNS announces).
func certHosts(addrs []netip.Addr) []string {
	out := make([]string, 0, len(addrs)+2)
	for _, a := range addrs {
		out = append(out, a.String())
	}
	if h := discovery.HostLabel(""); h != "" {
		out = append(out, strings.ToLower(h), strings.ToLower(h)+".local")
	}
	return out
}

// listenLAN binds the HTTPS/WSS listeners of a non-loopback bind on the
// plain listener's port, after loading the TLS certificate for them. An
// address given as the bind that cannot be listened on is an error; with
// "lan", such an address is skipped with a warning (no LAN address at all:
// the app serves loopback only and says so). A first-run app (no workspace
// chosen yet) serves no LAN listener.
func (a *App) listenLAN() error {
	if a.lan.bind == config.BindLoopback || a.setup != nil && a.setup.first {
		return nil // the first-run setup is for this machine only
	}
	addrs, err := bindAddrs(a.lan.bind)
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		a.log.Warn("gateway bind lan: no LAN address found; serving 127.0.0.1 only", "bind", a.lan.bind)
		return nil
	}
	_, portStr, err := net.SplitHostPort(a.Gateway.Addr())
	if err != nil {
		return fmt.Errorf("gateway address %q: %w", a.Gateway.Addr(), err)
	}
	port, _ := strconv.Atoi(portStr)
	cert, err := gwid.LoadCert(gwid.Options{Dir: a.Layout.KeysDir(), Hosts: certHosts(addrs), Logger: a.log})
	if err != nil {
		return fmt.Errorf("gateway TLS certificate: %w", err)
	}
	conf := cert.ServerConfig()
	conf.NextProtos = []string{"http/1.1"} // WebSocket upgrades need HTTP/1.1
	a.lan.pending.budget(openFileLimit())
	var served []netip.Addr
	for _, ip := range addrs {
		addr := netip.AddrPortFrom(ip, uint16(port)).String()
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if a.lan.bind == config.BindLAN {
				a.log.Warn("gateway LAN address not served", "addr", addr, "err", err)
				continue
			}
			a.closeLAN()
			// Not wrapped: the caller's "port in use on 127.0.0.1" advice
			// (errors.Is EADDRINUSE) would name the wrong address.
			return fmt.Errorf("gateway.bind %s: cannot listen on %s, the same port as 127.0.0.1 (%v); choose another port with --port or gateway.port, or another address",
				a.lan.bind, addr, errors.Unwrap(err))
		}
		tl := newTLSListener(ln, conf, a.refusePlaintext, a.lan.pending, a.refuseFull, a.log)
		a.lan.listeners = append(a.lan.listeners, tl)
		served = append(served, ip)
		a.log.Info("gateway listening (HTTPS/WSS)", "addr", ln.Addr().String(), "tls_sha256", cert.Hex())
	}
	a.lan.addrs, a.lan.cert = served, cert
	a.lan.hosts = certHosts(served)
	if len(served) == 0 {
		return nil
	}
	a.PairInfoFunc = a.lanPairInfo
	adv, err := discovery.NewAdvertiser(discovery.AdvertiserOptions{
		Port:       port,
		GatewayID:  a.Identity.ID,
		TLSSHA256:  cert.Hex(),
		IPs:        served,
		Interfaces: a.lan.mdnsIfs,
		Logger:     a.log,
	})
	if err != nil {
		a.closeLAN()
		return fmt.Errorf("mdns: %w", err)
	}
	a.lan.adv = adv
	return nil
}

// closeLAN closes the LAN listeners (before Run, or when Listen fails).
func (a *App) closeLAN() {
	for _, l := range a.lan.listeners {
		_ = l.Close()
	}
	a.lan.listeners = nil
}

// runLAN serves the LAN listeners and the mDNS advertisement until ctx
// ends. The gateway's own shutdown (Server.Run) closes their WebSockets.
func (a *App) runLAN(ctx context.Context) error {
	if len(a.lan.listeners) == 0 {
		<-ctx.Done() // App.Run stops everything when one part returns
		return nil
	}
	h := gateway.ServeHosts(a.lanHandler(), a.lan.hosts)
	var wg sync.WaitGroup
	errc := make(chan error, len(a.lan.listeners))
	var servers []*gateway.HTTPServer
	for _, l := range a.lan.listeners {
		// The gateway's bounds of every phase (gateway.Timeouts) and its
		// check of each request head; a connection holds its slot of
		// pendingLimiter until a WebSocket on it is authenticated.
		srv := a.Gateway.HTTPServer(h, a.lan.pending.connContext)
		servers = append(servers, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve %s: %w", l.Addr(), err)
			}
		}()
	}
	if a.lan.adv != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.lan.adv.Run(ctx) }() // never fails: it logs and retries
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(shCtx)
	}
	wg.Wait()
	return err
}

// shutdownGrace bounds the LAN servers' shutdown.
const shutdownGrace = 5 * time.Second

// lanHandler is the gateway's handler for the LAN listeners: connections
// through it never accept the operator token (it is for this machine).
func (a *App) lanHandler() http.Handler { return a.Gateway.ExternalHandler() }

// LAN returns where the gateway serves besides 127.0.0.1 (valid after
// Listen).
func (a *App) LAN() LANInfo {
	info := LANInfo{Bind: a.lan.bind, Addresses: []string{}, URLs: []string{}}
	if a.Identity != nil {
		info.GatewayID = a.Identity.ID
	}
	for _, l := range a.lan.listeners {
		addr := l.Addr().String()
		info.Addresses = append(info.Addresses, addr)
		info.URLs = append(info.URLs, "https://"+addr+"/")
	}
	if c := a.lan.cert; c != nil && len(a.lan.listeners) > 0 {
		info.TLSFingerprint, info.TLSFingerprintWords, info.TLSSPKI = c.Hex(), c.Words(), c.SPKIBase64()
	}
	if a.lan.adv != nil {
		st := a.lan.adv.Status()
		info.MDNS, info.MDNSInterfaces, info.MDNSReason, info.MDNSError = st.State, st.Interfaces, st.Reason, st.LastError
	}
	return info
}

// gatewayInUse is the gateway part of config.get.
func (a *App) gatewayInUse() api.GatewayInUse {
	l := a.LAN()
	return api.GatewayInUse{Addr: a.Gateway.Addr(), Bind: l.Bind, Addresses: l.Addresses, URLs: l.URLs,
		TLSFingerprint: l.TLSFingerprint, TLSFingerprintWords: l.TLSFingerprintWords, TLSSPKI: l.TLSSPKI, GatewayID: l.GatewayID,
		MDNS: string(l.MDNS), MDNSInterfaces: l.MDNSInterfaces, MDNSReason: string(l.MDNSReason), MDNSError: l.MDNSError}
}

// lanPairInfo is where devices on the LAN reach the gateway, for
// device.pair.code (App.PairInfoFunc while LAN listeners serve): one
// https://<address> per listener and the certificate's fingerprints.
func (a *App) lanPairInfo() devices.PairInfo {
	info := a.LAN()
	p := devices.PairInfo{Fingerprint: info.TLSFingerprint, FingerprintWords: info.TLSFingerprintWords, SPKI: info.TLSSPKI}
	for _, u := range info.URLs {
		p.BaseURLs = append(p.BaseURLs, strings.TrimSuffix(u, "/"))
	}
	return p
}

// refusePlaintext answers a connection that sent something other than a
// TLS handshake to a TLS listener: it reads the request head (bounded),
// answers 400 "this address serves HTTPS only" and closes; the refusal is
// audited (operation gateway.plaintext, denied) with the request's path but
// never its query, which may hold a secret typed by mistake (a setup code,
// a token). Nothing is served.
func (a *App) refusePlaintext(c net.Conn, listener string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	target, host := listener+" (not HTTP)", ""
	if req, err := http.ReadRequest(bufio.NewReaderSize(io.LimitReader(c, 16<<10), 4096)); err == nil {
		host = req.Host
		path := req.URL.EscapedPath()
		if req.URL.RawQuery != "" || req.URL.ForceQuery {
			path += "?…" // the query is not recorded
		}
		if len(path) > 200 {
			path = path[:200] + "…"
		}
		target = listener + " " + req.Method + " " + path
	}
	// Audited before the answer: whoever sees the 400 finds the entry.
	ip := ""
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		ip = host
	}
	a.log.Warn("plaintext request on a TLS listener refused", "listener", listener, "remote", c.RemoteAddr().String())
	if n, ok := a.lan.plain.admit(time.Now()); ok {
		reason := "plaintext HTTP on an HTTPS-only address"
		if n > 0 {
			reason += fmt.Sprintf(" (%d more refusals in the previous minute were not audited one by one)", n)
		}
		if err := a.Audit.Record(audit.Entry{Operation: "gateway.plaintext", Role: guard.AuditAnonymous, Target: target,
			Result: audit.Denied, Reason: reason, IP: ip}); err != nil {
			a.log.Error("audit not written", "err", err)
		}
	}
	// With the headers of every response; the client reads the answer
	// before the close.
	gateway.WriteRefusal(c, http.StatusBadRequest, "this address serves HTTPS only: use https://"+listener+"/", host)
}

// refuseFull records a LAN connection closed because a cap of
// pendingLimiter was full: a warning and an audit entry (operation
// gateway.connlimit, denied), at most plainAuditPerMinute a minute.
func (a *App) refuseFull(remote net.Addr, listener, reason string) {
	n, ok := a.lan.full.admit(time.Now())
	if !ok {
		return
	}
	if n > 0 {
		reason += fmt.Sprintf(" (%d more refusals in the previous minute were not recorded one by one)", n)
	}
	a.log.Warn("LAN connection refused", "listener", listener, "remote", remote.String(), "reason", reason)
	ip := ""
	if ap, err := netip.ParseAddrPort(remote.String()); err == nil {
		ip = ap.Addr().Unmap().String()
	}
	if err := a.Audit.Record(audit.Entry{Operation: "gateway.connlimit", Role: guard.AuditAnonymous, Target: listener,
		Result: audit.Denied, Reason: reason, IP: ip}); err != nil {
		a.log.Error("audit not written", "err", err)
	}
}

// plainLimiter bounds the audit entries of plaintext refusals to
// plainAuditPerMinute a minute (a scanner cannot fill the disk); the next
// audited refusal counts the ones left out.
type plainLimiter struct {
	mu      sync.Mutex
	window  time.Time
	n       int
	skipped int
}

const plainAuditPerMinute = 60

// admit reports whether this refusal is audited, and how many were not
// since the last audited one.
func (l *plainLimiter) admit(now time.Time) (skipped int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= time.Minute {
		l.window, l.n = now, 0
	}
	if l.n >= plainAuditPerMinute {
		l.skipped++
		return 0, false
	}
	l.n++
	skipped, l.skipped = l.skipped, 0
	return skipped, true
}

// tlsListener hands out TLS connections for what arrives on a TCP
// listener: a new connection is admitted by pending (over a cap or the
// open-file budget it is closed at once and reported to full); its first
// byte is read (10 s at most) in its own goroutine; 0x16, a TLS handshake
// record, starts the TLS handshake there (10 s at most, both directions),
// and the connection is returned by Accept once it completed; anything
// else goes to refuse. The gateway's HTTPServer bounds every later phase;
// the connection holds its slot of pending until a WebSocket on it is
// authenticated or it closes.
type tlsListener struct {
	net.Listener
	conf    *tls.Config
	refuse  func(net.Conn, string)
	pending *pendingLimiter
	full    func(remote net.Addr, listener, reason string)
	log     *slog.Logger
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once
}

// sniffTimeout bounds the wait for a new connection's first byte, and
// then its TLS handshake.
const sniffTimeout = 10 * time.Second

func newTLSListener(ln net.Listener, conf *tls.Config, refuse func(net.Conn, string), pending *pendingLimiter,
	full func(net.Addr, string, string), log *slog.Logger) *tlsListener {
	l := &tlsListener{Listener: ln, conf: conf, refuse: refuse, pending: pending, full: full, log: log,
		conns: make(chan net.Conn), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *tlsListener) acceptLoop() {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				l.Close()
				return
			}
			// EMFILE and the like: back off as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			l.log.Warn("gateway LAN accept failed; retrying", "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		sc := &slotConn{Conn: c, lim: l.pending, key: pendingKey(c.RemoteAddr())}
		if reason := l.pending.admit(sc, connFD(c)); reason != "" {
			_ = c.Close()
			l.full(c.RemoteAddr(), l.Addr().String(), reason)
			continue
		}
		go l.sniff(sc)
	}
}

func (l *tlsListener) sniff(c *slotConn) {
	_ = c.SetReadDeadline(time.Now().Add(sniffTimeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &peekedConn{Conn: c, r: br}
	if first[0] != 0x16 {
		l.refuse(pc, l.Addr().String())
		return
	}
	tc := tls.Server(pc, l.conf)
	_ = tc.SetDeadline(time.Now().Add(sniffTimeout))
	if err := tc.Handshake(); err != nil {
		l.log.Debug("gateway LAN TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		_ = tc.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	select {
	case l.conns <- tc:
	case <-l.done:
		_ = tc.Close()
	}
}

// Accept returns the next connection that completed a TLS handshake.
func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections being sniffed are closed.
func (l *tlsListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

// peekedConn reads through the buffer that holds the peeked bytes.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// CloseWrite half-closes a TCP connection (refusePlaintext).
func (p *peekedConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Defaults of Options.MaxLANPending, Options.MaxLANPendingPerAddr and
// Options.MaxLANConns.
const (
	DefaultMaxLANPending        = 128
	DefaultMaxLANPendingPerAddr = 16
	DefaultMaxLANConns          = 4096
)

// minFDReserve is the least of the open-file limit kept from the LAN
// listeners (lanBudget).
const minFDReserve = 256

// lanBudget returns how many connections the LAN listeners may hold open
// (maxConns, Options.MaxLANConns, 0 for DefaultMaxLANConns) under an
// open-file limit (limit descriptors; 0: unknown), and the lowest file
// descriptor number a new LAN connection may not have (0: no such check).
// A quarter of the limit (at least minFDReserve, at most half) is kept for
// everything else: the 127.0.0.1 listener (the desktop window, the CLI,
// local nodes), the databases and index, the workers' pipes, log files.
// Descriptors are numbered lowest-free first (POSIX), so a new connection
// numbered n means n descriptors below it are open.
func lanBudget(maxConns, limit int) (conns, fdCeiling int) {
	if maxConns <= 0 {
		maxConns = DefaultMaxLANConns
	}
	if limit <= 0 {
		return maxConns, 0
	}
	reserve := min(max(minFDReserve, limit/4), limit/2)
	return min(maxConns, limit-reserve), limit - reserve
}

// pendingLimiter admits the LAN listeners' connections: it caps those not
// yet authenticated (see Options.MaxLANPending), in total and per remote
// address, and all open ones (Options.MaxLANConns and the open-file
// budget, lanBudget). A connection is counted from its accept until it
// closes, and as unauthenticated until then or until a WebSocket on it is
// authenticated (gateway.WithAuthenticatedHook): before its first byte,
// in its TLS handshake, sending a request, waiting for its answer,
// reading it, idle between keep-alive requests, or in a WebSocket
// handshake.
type pendingLimiter struct {
	max, perAddr int
	maxConns     int // Options.MaxLANConns as given (budget applies the limit)
	mu           sync.Mutex
	n            int
	byAddr       map[string]int
	open         int
	maxOpen      int // lanBudget's conns
	fdCeiling    int // lanBudget's fdCeiling
}

func newPendingLimiter(max, perAddr, maxConns int) *pendingLimiter {
	if max <= 0 {
		max = DefaultMaxLANPending
	}
	if perAddr <= 0 {
		perAddr = DefaultMaxLANPendingPerAddr
	}
	l := &pendingLimiter{max: max, perAddr: perAddr, maxConns: maxConns, byAddr: map[string]int{}}
	l.maxOpen, l.fdCeiling = lanBudget(maxConns, 0)
	return l
}

// budget sets the open-connection budget for an open-file limit (0:
// unknown), see lanBudget.
func (l *pendingLimiter) budget(fileLimit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxOpen, l.fdCeiling = lanBudget(l.maxConns, fileLimit)
}

// pendingKey is the address a connection is counted under: its IPv4
// address, or the /64 of its IPv6 address (one host may hold a whole /64).
func pendingKey(remote net.Addr) string {
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return remote.String()
	}
	ip := ap.Addr().Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// admit counts a new connection (file descriptor fd, -1 when unknown) as
// open and unauthenticated; it returns "" when admitted, else the reason
// for refusing it (a cap or the budget is full).
func (l *pendingLimiter) admit(c *slotConn, fd int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.open >= l.maxOpen:
		return fmt.Sprintf("too many open LAN connections (%d, the LAN listeners' share of open files)", l.maxOpen)
	case l.fdCeiling > 0 && fd >= l.fdCeiling:
		return fmt.Sprintf("the process is near its open-file limit (file descriptor %d; the rest is kept for this machine)", fd)
	case l.n >= l.max:
		return fmt.Sprintf("too many unauthenticated connections (%d)", l.max)
	case l.byAddr[c.key] >= l.perAddr:
		return fmt.Sprintf("too many unauthenticated connections from %s (%d)", c.key, l.perAddr)
	}
	c.held, c.open = true, true
	l.open++
	l.n++
	l.byAddr[c.key]++
	return ""
}

// authenticated stops counting c as unauthenticated.
func (l *pendingLimiter) authenticated(c *slotConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.giveLocked(c)
}

// closed stops counting c.
func (l *pendingLimiter) closed(c *slotConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.giveLocked(c)
	if c.open {
		c.open = false
		l.open--
	}
}

func (l *pendingLimiter) giveLocked(c *slotConn) {
	if !c.held {
		return
	}
	c.held = false
	l.n--
	if n := l.byAddr[c.key] - 1; n > 0 {
		l.byAddr[c.key] = n
	} else {
		delete(l.byAddr, c.key)
	}
}

// count reports the unauthenticated connections.
func (l *pendingLimiter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// openConns reports the open connections.
func (l *pendingLimiter) openConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// connContext is the LAN servers' ConnContext (gateway.HTTPServer): a
// WebSocket authenticated on the connection stops counting it as
// unauthenticated.
func (l *pendingLimiter) connContext(ctx context.Context, c net.Conn) context.Context {
	sc := slotOf(c)
	if sc == nil {
		return ctx
	}
	return gateway.WithAuthenticatedHook(ctx, func() { l.authenticated(sc) })
}

// slotOf finds the slotConn under a connection tlsListener returned.
func slotOf(c net.Conn) *slotConn {
	for {
		switch x := c.(type) {
		case *slotConn:
			return x
		case *peekedConn:
			c = x.Conn
		case interface{ NetConn() net.Conn }: // *tls.Conn
			c = x.NetConn()
		default:
			return nil
		}
	}
}

// slotConn is an accepted LAN connection; closing it stops counting it.
type slotConn struct {
	net.Conn
	lim  *pendingLimiter
	key  string // pendingKey of the remote address
	held bool   // counted as unauthenticated; guarded by lim.mu
	open bool   // counted as open; guarded by lim.mu
}

func (c *slotConn) Close() error {
	c.lim.closed(c)
	return c.Conn.Close()
}

// CloseWrite half-closes the TCP connection (refusePlaintext).
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
