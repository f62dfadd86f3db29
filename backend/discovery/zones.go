package discovery

// Zones of link-local addresses. An advertised fe80::/10 address means
// nothing without the interface (the zone) of the link it lives on, and
// zeroconf v1.0.0 drops the interface an answer arrived on. A linkWatch
// listens to the same mDNS answers on sockets of its own, with the
// receiving interface of each packet, and remembers on which browsed
// interface each link-local address in an AAAA record was seen.

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// mDNS groups and port (RFC 6762).
var (
	mdnsGroup4 = net.IPv4(224, 0, 0, 251)
	mdnsGroup6 = net.ParseIP("ff02::fb")
)

const mdnsPort = 5353

// Bounds of a linkWatch.
const (
	// linkGrace is how long dialable waits for the watch to read an
	// answer the library has already delivered (both got the same packet;
	// the watch only has to be scheduled).
	linkGrace = time.Second
	// maxLinkAddrs bounds the link-local addresses remembered (a browse
	// is short, but answers are anyone's on the LAN).
	maxLinkAddrs = 256
)

// linkWatch records, for each link-local IPv6 address seen in an mDNS
// answer, the browsed interfaces whose packets carried it. Each address
// family it cannot open is skipped (then the one-interface rule of
// dialable still applies).
type linkWatch struct {
	names map[int]string // browsed interfaces by index
	loops map[int]bool   // those that are loopback interfaces
	conns []interface{ Close() error }
	wg    sync.WaitGroup

	mu   sync.Mutex
	seen map[netip.Addr][]string // address (no zone) → interface names, in the order seen
	note chan struct{}           // closed and replaced when seen grows
}

func watchLinks(ifaces []net.Interface) *linkWatch {
	w := &linkWatch{names: map[int]string{}, loops: map[int]bool{}, seen: map[netip.Addr][]string{}, note: make(chan struct{})}
	for _, ifi := range ifaces {
		w.names[ifi.Index] = ifi.Name
		w.loops[ifi.Index] = ifi.Flags&net.FlagLoopback != 0
	}
	// Binding the group address gives a wildcard socket with a reusable
	// port (package net), beside the library's and any mDNS daemon's.
	if c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: mdnsGroup4, Port: mdnsPort}); err == nil {
		p := ipv4.NewPacketConn(c)
		if p.SetControlMessage(ipv4.FlagInterface, true) == nil && joinAll(ifaces, func(ifi *net.Interface) error {
			return p.JoinGroup(ifi, &net.UDPAddr{IP: mdnsGroup4})
		}) {
			w.start(p, func(b []byte) (int, int, error) {
				n, cm, _, err := p.ReadFrom(b)
				if cm == nil {
					return n, 0, err
				}
				return n, cm.IfIndex, err
			})
		} else {
			_ = p.Close()
		}
	}
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: mdnsGroup6, Port: mdnsPort}); err == nil {
		p := ipv6.NewPacketConn(c)
		if p.SetControlMessage(ipv6.FlagInterface, true) == nil && joinAll(ifaces, func(ifi *net.Interface) error {
			return p.JoinGroup(ifi, &net.UDPAddr{IP: mdnsGroup6})
		}) {
			w.start(p, func(b []byte) (int, int, error) {
				n, cm, _, err := p.ReadFrom(b)
				if cm == nil {
					return n, 0, err
				}
				return n, cm.IfIndex, err
			})
		} else {
			_ = p.Close()
		}
	}
	return w
}

// joinAll joins the group on each interface; true when one join worked.
func joinAll(ifaces []net.Interface, join func(*net.Interface) error) bool {
	ok := false
	for i := range ifaces {
		if join(&ifaces[i]) == nil {
			ok = true
		}
	}
	return ok
}

// start reads packets from c until it is closed.
func (w *linkWatch) start(c interface{ Close() error }, read func([]byte) (n, ifIndex int, err error)) {
	w.conns = append(w.conns, c)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		buf := make([]byte, 9000) // RFC 6762 §17: at most 9000 bytes
		for {
			n, idx, err := read(buf)
			if err != nil {
				return // closed (a UDP read fails for no other reason here)
			}
			w.record(buf[:n], idx)
		}
	}()
}

// record notes the link-local AAAA values of one packet that arrived on
// a browsed interface.
func (w *linkWatch) record(pkt []byte, ifIndex int) {
	name, ok := w.names[ifIndex]
	if !ok {
		return // not a browsed interface (or no control message)
	}
	var m dns.Msg
	if m.Unpack(pkt) != nil || !m.Response {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	grew := false
	for _, rr := range slices.Concat(m.Answer, m.Ns, m.Extra) {
		aaaa, ok := rr.(*dns.AAAA)
		if !ok {
			continue
		}
		a, ok := netip.AddrFromSlice(aaaa.AAAA)
		if !ok || !a.Is6() || a.Is4In6() || !a.IsLinkLocalUnicast() {
			continue
		}
		if w.loops[ifIndex] && !holdsOneOf(net.Interface{Index: ifIndex, Name: name}, []netip.Addr{a}) {
			// What arrives on a loopback interface is this machine's own
			// multicast, looped back: it says nothing about the sender's
			// link, unless the address lives on that interface.
			continue
		}
		have, known := w.seen[a]
		if slices.Contains(have, name) || !known && len(w.seen) >= maxLinkAddrs {
			continue
		}
		w.seen[a] = append(have, name)
		grew = true
	}
	if grew {
		close(w.note)
		w.note = make(chan struct{})
	}
}

// zones returns the interfaces a was seen on, and a channel closed when
// more was seen.
func (w *linkWatch) zones(a netip.Addr) ([]string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen[a.WithZone("")]), w.note
}

// dialable returns addrs in the order IPv4, IPv6, link-local IPv6, each
// link-local address with the only browsed interface as its zone, else
// once per interface it was seen on; one seen nowhere within linkGrace is
// dropped (it cannot be dialled).
func (w *linkWatch) dialable(addrs []netip.Addr, ifaces []net.Interface) []netip.Addr {
	var v4, v6, local []netip.Addr
	ctx, cancel := context.WithTimeout(context.Background(), linkGrace)
	defer cancel()
	for _, a := range addrs {
		switch {
		case a.Is4():
			v4 = append(v4, a)
		case !a.IsLinkLocalUnicast():
			v6 = append(v6, a.WithZone(""))
		case a.Zone() != "":
			local = append(local, a)
		default:
			zones := []string{ifaces[0].Name}
			if len(ifaces) > 1 {
				zones = w.wait(a, ctx.Done())
			}
			for _, z := range zones {
				if za := a.WithZone(z); !slices.Contains(local, za) {
					local = append(local, za)
				}
			}
		}
	}
	return slices.Concat(v4, v6, local)
}

// wait returns the zones of a once one is known, or none when expired
// is closed first.
func (w *linkWatch) wait(a netip.Addr, expired <-chan struct{}) []string {
	for {
		zones, more := w.zones(a)
		if len(zones) > 0 || len(w.conns) == 0 {
			return zones
		}
		select {
		case <-more:
		case <-expired:
			return nil
		}
	}
}

// close stops the watch and waits for its readers.
func (w *linkWatch) close() {
	for _, c := range w.conns {
		_ = c.Close()
	}
	w.wg.Wait()
}
