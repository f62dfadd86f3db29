// Package discovery advertises this gateway on the local network by mDNS /
// DNS-SD and finds gateways advertised that way (issue 16 item 6), through
// github.com/grandcat/zeroconf v1.0.0.
//
// The service type is "_atrium-gw._tcp" in "local."; the instance name is
// the gateway's display name; the TXT record holds
//
//	role=gateway port=<tcp port> gwid=<gateway id, hex> tlsSha256=<hex SHA-256 of the TLS certificate's DER>
//	displayName=<name> protocol=1
//
// Everything in an advertisement is a hint: a client that already trusts a
// gateway's certificate fingerprint keeps that pin, whatever a TXT record
// says, and a client that trusts none still compares the fingerprint words
// with the desktop before it trusts anything.
//
// An Advertiser never stops the app: Run retries every failure (no multicast
// interface, a socket that cannot join the group, a panic inside the
// library) with capped exponential backoff until its context ends. A
// failure is logged once as a warning (again only when it changes); its
// repetitions are debug lines, and Status says why (Reason, Interfaces)
// for Settings.
//
// Browse queries over IPv4 and IPv6 (each family that can be opened on the
// interfaces) and gives a link-local IPv6 address the zone of the
// interface its answer arrived on (see Browse).
//
// Tests and the two-process end-to-end test run mDNS inside a network
// namespace of their own with multicast on its loopback interface, never on
// the machine's network interfaces (as root):
//
//	unshare -n sh -c 'ip link set lo up && ip link set lo multicast on &&
//	  ip route add 224.0.0.0/4 dev lo && exec <program>'
//
// then AdvertiserOptions{IPs: 127.0.0.1, Interfaces: ["lo"]} and
// BrowseOptions{Interfaces: ["lo"]} find each other.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/grandcat/zeroconf"
)

// Service is the DNS-SD service type of an Atrium gateway, Domain its domain.
const (
	Service = "_atrium-gw._tcp"
	Domain  = "local."
)

// Protocol is the gateway protocol version advertised in TXT protocol=.
const Protocol = 1

// Sentinel errors.
var (
	// ErrNoInterface: no up, multicast-capable interface to advertise or
	// browse on (Run retries: an interface may come up later). The
	// Advertiser's errors of this kind are *InterfaceError.
	ErrNoInterface = errors.New("no multicast interface")
	// ErrInvalidOptions: an option is missing or malformed.
	ErrInvalidOptions = errors.New("invalid discovery options")
)

// Reason says why an Advertiser is not advertising (Status.Reason).
type Reason string

// Reasons of a failed attempt.
const (
	// ReasonNoMulticast: the interfaces that hold the served addresses
	// are up but carry no multicast (a VPN or point-to-point link, a
	// loopback address): mDNS cannot work there, so phones and nodes must
	// be given the address (the pairing QR code).
	ReasonNoMulticast Reason = "no-multicast"
	// ReasonInterfaceDown: those interfaces are down.
	ReasonInterfaceDown Reason = "interface-down"
	// ReasonNoInterface: no interface holds the served addresses, or a
	// named interface (AdvertiserOptions.Interfaces) does not exist.
	ReasonNoInterface Reason = "no-interface"
	// ReasonError: registering failed otherwise (a socket, the library);
	// Status.LastError says how.
	ReasonError Reason = "error"
)

// InterfaceError is an attempt that found no usable interface; it wraps
// ErrNoInterface.
type InterfaceError struct {
	// Reason is ReasonNoMulticast, ReasonInterfaceDown or ReasonNoInterface.
	Reason Reason
	// Interfaces names the interfaces that could not be used (empty when
	// no interface holds the addresses).
	Interfaces []string
	// Detail is the message for people and logs.
	Detail string
}

func (e *InterfaceError) Error() string { return ErrNoInterface.Error() + ": " + e.Detail }

// Unwrap makes errors.Is(err, ErrNoInterface) hold.
func (e *InterfaceError) Unwrap() error { return ErrNoInterface }

// AdvertiserOptions configures NewAdvertiser.
type AdvertiserOptions struct {
	// DisplayName is the gateway's name for people: the DNS-SD instance name
	// (cut to 63 bytes) and TXT displayName (cut to 200 bytes). Default
	// "Atrium on <host name>".
	DisplayName string
	// Port is the TCP port of the HTTPS/WSS listeners (required, 1–65535).
	Port int
	// GatewayID is the gateway id (gwid.Identity.ID, 64 hex digits; required).
	GatewayID string
	// TLSSHA256 is the hex SHA-256 of the TLS certificate's DER
	// (gwid.Cert.Fingerprint, 64 hex digits; required).
	TLSSHA256 string
	// IPs are the addresses put in the A/AAAA records: the addresses the
	// TLS listeners serve (required).
	IPs []netip.Addr
	// Host is the host name of the SRV record (".local." is appended).
	// Default: os.Hostname() reduced to letters, digits and '-', else "atrium".
	Host string
	// Interfaces names the interfaces to advertise on. Default: the up,
	// multicast-capable interfaces that hold one of IPs (so a gateway bound
	// to one address is announced on that address's interface only). A named
	// interface that is missing, down or without multicast is an error of
	// the attempt (retried).
	Interfaces []string
	// MinRetry and MaxRetry bound the backoff between failed attempts
	// (defaults 2 s and 5 min; each wait is jittered by ±20 %).
	MinRetry, MaxRetry time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// State is what an Advertiser is doing.
type State string

// States of an Advertiser.
const (
	StateStarting    State = "starting"
	StateAdvertising State = "advertising"
	StateRetrying    State = "retrying"
	StateStopped     State = "stopped"
)

// Status is an Advertiser's state for Settings and logs.
type Status struct {
	State State `json:"state"`
	// Interfaces are, when advertising, the interfaces advertised on; when
	// retrying, the interfaces the last attempt could not use (Reason).
	Interfaces []string `json:"interfaces,omitempty"`
	// Reason says why the last attempt failed ("" unless retrying).
	Reason Reason `json:"reason,omitempty"`
	// Failures counts failed attempts since Run started; LastError is the
	// latest one ("" when none).
	Failures  int    `json:"failures"`
	LastError string `json:"lastError,omitempty"`
}

// Advertiser announces one gateway. Build it with NewAdvertiser, run it with Run.
type Advertiser struct {
	o    AdvertiserOptions
	txt  []string
	inst string
	log  *slog.Logger
	// register performs one registration (zeroconf.RegisterProxy); a field
	// so that the retry loop is tested against real failures of it.
	register func(instance string, port int, host string, ips, txt []string, ifaces []net.Interface) (shutdowner, error)

	mu     sync.Mutex
	status Status
}

type shutdowner interface{ Shutdown() }

// NewAdvertiser validates o and returns an Advertiser; nothing is sent
// until Run. Errors wrap ErrInvalidOptions.
func NewAdvertiser(o AdvertiserOptions) (*Advertiser, error) {
	if o.Port < 1 || o.Port > 65535 {
		return nil, fmt.Errorf("%w: port %d is not in 1..65535", ErrInvalidOptions, o.Port)
	}
	if !isHex64(o.GatewayID) {
		return nil, fmt.Errorf("%w: gateway id %q is not 64 hex digits", ErrInvalidOptions, o.GatewayID)
	}
	if !isHex64(o.TLSSHA256) {
		return nil, fmt.Errorf("%w: TLS fingerprint %q is not 64 hex digits", ErrInvalidOptions, o.TLSSHA256)
	}
	if len(o.IPs) == 0 {
		return nil, fmt.Errorf("%w: no address to advertise", ErrInvalidOptions)
	}
	for _, ip := range o.IPs {
		if !ip.IsValid() || ip.IsUnspecified() {
			return nil, fmt.Errorf("%w: address %v cannot be advertised", ErrInvalidOptions, ip)
		}
	}
	o.Host = HostLabel(o.Host)
	if o.DisplayName = strings.TrimSpace(o.DisplayName); o.DisplayName == "" {
		o.DisplayName = "Atrium on " + o.Host
	}
	if o.MinRetry <= 0 {
		o.MinRetry = 2 * time.Second
	}
	if o.MaxRetry <= 0 {
		o.MaxRetry = 5 * time.Minute
	}
	if o.MaxRetry < o.MinRetry {
		o.MaxRetry = o.MinRetry
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &Advertiser{
		o:    o,
		inst: cut(strings.NewReplacer(".", "-", "\\", "-").Replace(o.DisplayName), 63), // a dot would split the DNS name
		log:  o.Logger,
		txt: []string{
			"role=gateway",
			"port=" + strconv.Itoa(o.Port),
			"gwid=" + strings.ToLower(o.GatewayID),
			"tlsSha256=" + strings.ToLower(o.TLSSHA256),
			"displayName=" + cut(o.DisplayName, 200),
			"protocol=" + strconv.Itoa(Protocol),
		},
		status: Status{State: StateStarting},
	}
	a.register = func(instance string, port int, host string, ips, txt []string, ifaces []net.Interface) (shutdowner, error) {
		return zeroconf.RegisterProxy(instance, Service, Domain, port, host, ips, txt, ifaces)
	}
	return a, nil
}

// TXT returns the TXT record strings the Advertiser announces.
func (a *Advertiser) TXT() []string { return slices.Clone(a.txt) }

// Status returns what the Advertiser is doing now.
func (a *Advertiser) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.status
	s.Interfaces = slices.Clone(s.Interfaces)
	return s
}

func (a *Advertiser) setStatus(f func(*Status)) {
	a.mu.Lock()
	f(&a.status)
	a.mu.Unlock()
}

// Run advertises until ctx ends, then withdraws the advertisement (a
// goodbye packet) and returns nil. A failed attempt is retried after a
// backoff (MinRetry doubling up to MaxRetry, jittered); Run never returns
// because mDNS failed. Each distinct failure is logged once as a warning
// (the same failure again is a debug line, at most maxWarned distinct ones
// are remembered); Status carries the latest one.
func (a *Advertiser) Run(ctx context.Context) error {
	wait := a.o.MinRetry
	warned := map[string]bool{} // failures logged as warnings
	for {
		srv, ifaces, err := a.attempt()
		if err == nil {
			a.log.Info("mdns advertising", "service", Service, "instance", a.inst, "port", a.o.Port, "interfaces", ifaces,
				"failed_attempts", a.Status().Failures)
			a.setStatus(func(s *Status) { s.State, s.Interfaces, s.Reason, s.LastError = StateAdvertising, ifaces, "", "" })
			<-ctx.Done()
			safeShutdown(srv, a.log)
			a.setStatus(func(s *Status) { s.State, s.Interfaces = StateStopped, nil })
			return nil
		}
		reason, names := ReasonError, []string(nil)
		var ie *InterfaceError
		if errors.As(err, &ie) {
			reason, names = ie.Reason, slices.Clone(ie.Interfaces)
		}
		var failures int
		a.setStatus(func(s *Status) {
			s.State, s.Reason, s.Interfaces, s.LastError = StateRetrying, reason, names, err.Error()
			s.Failures++
			failures = s.Failures
		})
		if msg := err.Error(); !warned[msg] && len(warned) < maxWarned {
			warned[msg] = true
			a.log.Warn("mdns advertise failed; retrying with backoff (logged once)", "service", Service, "reason", string(reason),
				"interfaces", names, "err", err, "retry_in", wait.Round(time.Millisecond), "max_retry", a.o.MaxRetry)
		} else {
			a.log.Debug("mdns advertise failed again", "service", Service, "reason", string(reason), "err", err,
				"failures", failures, "retry_in", wait.Round(time.Millisecond))
		}
		t := time.NewTimer(jitter(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			a.setStatus(func(s *Status) { s.State = StateStopped })
			return nil
		case <-t.C:
		}
		wait = min(2*wait, a.o.MaxRetry)
	}
}

// maxWarned bounds the distinct failures Run logs as warnings (a failure
// whose message keeps changing, a panic's for one, cannot flood the log).
const maxWarned = 8

// attempt registers once; a panic inside the library is an error.
func (a *Advertiser) attempt() (srv shutdowner, names []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			srv, names, err = nil, nil, fmt.Errorf("mdns library panicked: %v", p)
		}
	}()
	ifaces, err := a.interfaces()
	if err != nil {
		return nil, nil, err
	}
	ips := make([]string, len(a.o.IPs))
	for i, ip := range a.o.IPs {
		ips[i] = ip.Unmap().WithZone("").String() // the library parses A/AAAA values without a zone
	}
	srv, err = a.register(a.inst, a.o.Port, a.o.Host, ips, a.txt, ifaces)
	if err != nil {
		return nil, nil, fmt.Errorf("register %s: %w", Service, err)
	}
	for _, ifi := range ifaces {
		names = append(names, ifi.Name)
	}
	return srv, names, nil
}

// interfaces resolves AdvertiserOptions.Interfaces, or picks the
// multicast interfaces that hold one of the advertised addresses. Its
// errors are *InterfaceError.
func (a *Advertiser) interfaces() ([]net.Interface, error) {
	if len(a.o.Interfaces) > 0 {
		return namedInterfaces(a.o.Interfaces)
	}
	all, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out, skipped []net.Interface
	for _, ifi := range all {
		if !holdsOneOf(ifi, a.o.IPs) {
			continue
		}
		if !usable(ifi) {
			skipped = append(skipped, ifi)
			continue
		}
		out = append(out, ifi)
	}
	if len(out) > 0 {
		return out, nil
	}
	if len(skipped) == 0 {
		return nil, &InterfaceError{Reason: ReasonNoInterface, Detail: fmt.Sprintf("no interface holds %v", a.o.IPs)}
	}
	e := unusable(skipped)
	e.Detail = fmt.Sprintf("the interfaces of %v (%s) %s", a.o.IPs, strings.Join(e.Interfaces, ", "), e.Detail)
	return nil, e
}

// usable reports whether mDNS can run on ifi: up and multicast-capable.
func usable(ifi net.Interface) bool {
	return ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagMulticast != 0
}

// unusable describes interfaces that are down or without multicast: the
// reason is ReasonNoMulticast when one of them is up (multicast is what
// it lacks), else ReasonInterfaceDown.
func unusable(ifs []net.Interface) *InterfaceError {
	e := &InterfaceError{Reason: ReasonInterfaceDown, Detail: "are down"}
	for _, ifi := range ifs {
		e.Interfaces = append(e.Interfaces, ifi.Name)
		if ifi.Flags&net.FlagUp != 0 {
			e.Reason, e.Detail = ReasonNoMulticast, "have no multicast"
		}
	}
	return e
}

// namedInterfaces looks the names up; each must be up and multicast-capable.
// Its errors are *InterfaceError.
func namedInterfaces(names []string) ([]net.Interface, error) {
	out := make([]net.Interface, 0, len(names))
	for _, n := range names {
		ifi, err := net.InterfaceByName(n)
		if err != nil {
			return nil, &InterfaceError{Reason: ReasonNoInterface, Interfaces: []string{n}, Detail: fmt.Sprintf("interface %q: %v", n, err)}
		}
		if !usable(*ifi) {
			e := unusable([]net.Interface{*ifi})
			e.Detail = fmt.Sprintf("interface %q is down or has no multicast (flags %v)", n, ifi.Flags)
			return nil, e
		}
		out = append(out, *ifi)
	}
	return out, nil
}

func holdsOneOf(ifi net.Interface, ips []netip.Addr) bool {
	addrs, err := ifi.Addrs()
	if err != nil {
		return false
	}
	for _, ad := range addrs {
		pn, ok := ad.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(pn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		for _, want := range ips {
			if want.Unmap() == ip {
				return true
			}
		}
		// 127.0.0.2 lives on lo without being listed (lo holds 127.0.0.0/8).
		if ip.IsLoopback() {
			ones, _ := pn.Mask.Size()
			if pfx, err := ip.Prefix(ones); err == nil {
				for _, want := range ips {
					if pfx.Contains(want.Unmap()) {
						return true
					}
				}
			}
		}
	}
	return false
}

func safeShutdown(srv shutdowner, log *slog.Logger) {
	defer func() {
		if p := recover(); p != nil {
			log.Warn("mdns shutdown panicked", "panic", fmt.Sprint(p))
		}
	}()
	srv.Shutdown()
}

// BrowseOptions configures Browse.
type BrowseOptions struct {
	// Interfaces names the interfaces to query. Default: every up,
	// multicast-capable interface.
	Interfaces []string
	// Wait is how long to listen for answers (default 3 s; ctx may end it
	// earlier).
	Wait time.Duration
	// Max stops the browse once this many distinct gateways were found
	// (0: listen for the whole Wait).
	Max int
}

// Gateway is one advertised gateway. Every field comes from the network
// and is a hint (see the package doc).
type Gateway struct {
	// Instance is the DNS-SD instance name, Host the SRV target host name.
	Instance string `json:"instance"`
	Host     string `json:"host"`
	// Addrs are the advertised addresses that can be dialled from here:
	// IPv4 first, then IPv6, then link-local IPv6 with the zone of the
	// interface the answer arrived on ("fe80::1%eth0"); a link-local
	// address whose interface is unknown is left out. Port is the SRV port.
	Addrs []netip.Addr `json:"addrs"`
	Port  int          `json:"port"`
	// GatewayID and TLSSHA256 are lower-case hex (64 digits), "" when the
	// TXT value was missing or malformed.
	GatewayID string `json:"gatewayId"`
	TLSSHA256 string `json:"tlsSha256"`
	// DisplayName is TXT displayName, else the instance name.
	DisplayName string `json:"displayName"`
	// Protocol is TXT protocol (0 when missing or malformed).
	Protocol int `json:"protocol"`
}

// URLs returns https://<addr>:<port> for each address, in Addrs' order; a
// zone is written as RFC 6874 says ("https://[fe80::1%25eth0]:18789").
func (g Gateway) URLs() []string {
	out := make([]string, 0, len(g.Addrs))
	for _, a := range g.Addrs {
		u := url.URL{Scheme: "https", Host: netip.AddrPortFrom(a, uint16(g.Port)).String()}
		out = append(out, u.String())
	}
	return out
}

// Browse looks for gateways for BrowseOptions.Wait (or until ctx ends, or
// Max were found) and returns the distinct ones found, sorted by display
// name then gateway id. It queries over IPv4 and over IPv6, each family
// that can be opened on the interfaces (a network may offer one only), and
// listens for the answers' receiving interface itself (zeroconf v1.0.0
// drops it) to give link-local addresses their zone; with one interface
// browsed, that interface is the zone. Answers without TXT role=gateway,
// or without a port or a usable address, are dropped. An error means no
// query could be sent (no interface, neither family could be opened);
// finding nothing is not an error.
func Browse(ctx context.Context, o BrowseOptions) (_ []Gateway, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("browse %s: mdns library panicked: %v", Service, p)
		}
	}()
	if o.Wait <= 0 {
		o.Wait = 3 * time.Second
	}
	ifaces, err := browseInterfaces(o.Interfaces)
	if err != nil {
		return nil, fmt.Errorf("browse %s: %w", Service, err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	links := watchLinks(ifaces)
	defer links.close()
	var chans []chan *zeroconf.ServiceEntry
	var errs []error
	for _, fam := range []zeroconf.IPType{zeroconf.IPv4, zeroconf.IPv6} {
		// One resolver per family: the library's combined one fails when
		// either family fails (and then leaks the other's socket).
		res, err := zeroconf.NewResolver(zeroconf.SelectIfaces(ifaces), zeroconf.SelectIPTraffic(fam))
		if err == nil {
			ch := make(chan *zeroconf.ServiceEntry, 16)
			if err = res.Browse(ctx, Service, Domain, ch); err == nil {
				chans = append(chans, ch)
				continue
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", familyName(fam), err))
	}
	if len(chans) == 0 {
		return nil, fmt.Errorf("browse %s: %w", Service, errors.Join(errs...))
	}
	found := map[string]*Gateway{}
	var order []string
	for e := range merge(chans) { // each closed by the library when ctx ends
		g, ok := parseEntry(e)
		if !ok {
			continue
		}
		key := g.Instance + "\x00" + g.GatewayID
		if have, ok := found[key]; ok {
			for _, a := range g.Addrs {
				if !slices.Contains(have.Addrs, a) {
					have.Addrs = append(have.Addrs, a)
				}
			}
			continue
		}
		found[key], order = &g, append(order, key)
		if o.Max > 0 && len(found) >= o.Max {
			cancel()
		}
	}
	out := make([]Gateway, 0, len(found))
	for _, key := range order {
		g := *found[key]
		if g.Addrs = links.dialable(g.Addrs, ifaces); len(g.Addrs) > 0 {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b Gateway) int {
		if c := strings.Compare(a.DisplayName, b.DisplayName); c != 0 {
			return c
		}
		return strings.Compare(a.GatewayID, b.GatewayID)
	})
	return out, nil
}

// browseInterfaces resolves BrowseOptions.Interfaces, or lists every up,
// multicast-capable interface.
func browseInterfaces(names []string) ([]net.Interface, error) {
	if len(names) > 0 {
		return namedInterfaces(names)
	}
	all, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []net.Interface
	for _, ifi := range all {
		if usable(ifi) {
			out = append(out, ifi)
		}
	}
	if len(out) == 0 {
		return nil, &InterfaceError{Reason: ReasonNoInterface, Detail: "no interface is up with multicast"}
	}
	return out, nil
}

func familyName(t zeroconf.IPType) string {
	if t == zeroconf.IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// merge forwards what the channels carry until all of them are closed.
func merge(chans []chan *zeroconf.ServiceEntry) <-chan *zeroconf.ServiceEntry {
	out := make(chan *zeroconf.ServiceEntry)
	var wg sync.WaitGroup
	for _, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range ch {
				out <- e
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()
	return out
}

// parseEntry turns an answer into a Gateway; false when it is not one.
func parseEntry(e *zeroconf.ServiceEntry) (Gateway, bool) {
	txt := map[string]string{}
	for _, kv := range e.Text {
		k, v, _ := strings.Cut(unescape(kv), "=")
		if _, dup := txt[k]; !dup { // RFC 6763 §6.4: the first one counts
			txt[k] = v
		}
	}
	if txt["role"] != "gateway" || e.Port <= 0 {
		return Gateway{}, false
	}
	g := Gateway{Instance: unescape(e.Instance), Host: unescape(strings.TrimSuffix(e.HostName, ".")), Port: e.Port, DisplayName: txt["displayName"]}
	for _, ip := range append(slices.Clone(e.AddrIPv4), e.AddrIPv6...) {
		if a, ok := netip.AddrFromSlice(ip); ok && !slices.Contains(g.Addrs, a.Unmap()) {
			g.Addrs = append(g.Addrs, a.Unmap())
		}
	}
	if len(g.Addrs) == 0 {
		return Gateway{}, false
	}
	if v := strings.ToLower(txt["gwid"]); isHex64(v) {
		g.GatewayID = v
	}
	if v := strings.ToLower(txt["tlsSha256"]); isHex64(v) {
		g.TLSSHA256 = v
	}
	if p, err := strconv.Atoi(txt["protocol"]); err == nil && p > 0 {
		g.Protocol = p
	}
	if g.DisplayName == "" || !utf8.ValidString(g.DisplayName) {
		g.DisplayName = g.Instance
	}
	return g, true
}

// unescape undoes the DNS presentation format the library hands names and
// TXT strings in: "\\DDD" is the byte DDD (decimal), "\\X" is X (RFC 4343).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b = append(b, c)
			continue
		}
		if i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
			if n := int(s[i+1]-'0')*100 + int(s[i+2]-'0')*10 + int(s[i+3]-'0'); n <= 255 {
				b = append(b, byte(n))
				i += 3
				continue
			}
		}
		b = append(b, s[i+1])
		i++
	}
	return string(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}

// HostLabel is the host name an Advertiser announces (<label>.local): the
// first label of h ("" = os.Hostname()) reduced to ASCII letters, digits
// and '-' (at most 63 bytes), else "atrium".
func HostLabel(h string) string {
	if h == "" {
		h, _ = os.Hostname()
	}
	h, _, _ = strings.Cut(strings.TrimSuffix(h, ".local."), ".")
	var b strings.Builder
	for _, r := range h {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			b.WriteRune(r)
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		return "atrium"
	}
	return cut(s, 63)
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
