package discovery

import (
	"context"
	"io"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv6"

	"github.com/atrium-dev/atrium/backend/discovery/netnstest"
)

// The test link: a veth pair va–vb in the test's namespace. The gateway
// side (va) holds these addresses besides the kernel's own link-local one.
var (
	llA  = netip.MustParseAddr("fe80::a")
	ulaA = netip.MustParseAddr("fd00::a")
)

// v6Responder answers mDNS browse queries for Service over IPv6 only, on
// ifi: a gateway on a link that carries no IPv4 (or a responder set to
// IPv6 only). Its answer holds what an Advertiser announces: PTR, SRV, TXT
// and one AAAA per address. It stops when the test ends.
func v6Responder(t *testing.T, ifi string, instance string, port int, addrs []netip.Addr, txt []string) {
	t.Helper()
	nif := mustIface(t, ifi)
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: mdnsGroup6, Port: mdnsPort})
	if err != nil {
		t.Fatal(err)
	}
	p := ipv6.NewPacketConn(c)
	if err := p.JoinGroup(&nif, &net.UDPAddr{IP: mdnsGroup6}); err != nil {
		t.Fatal(err)
	}
	if err := p.SetControlMessage(ipv6.FlagInterface, true); err != nil {
		t.Fatal(err)
	}
	svc := Service + "." + Domain
	name := instance + "." + svc
	host := "v6gw.local."
	hdr := func(n string, typ uint16) dns.RR_Header {
		return dns.RR_Header{Name: n, Rrtype: typ, Class: dns.ClassINET, Ttl: 120}
	}
	resp := new(dns.Msg)
	resp.Response, resp.Authoritative = true, true
	resp.Answer = []dns.RR{&dns.PTR{Hdr: hdr(svc, dns.TypePTR), Ptr: name}}
	resp.Extra = []dns.RR{
		&dns.SRV{Hdr: hdr(name, dns.TypeSRV), Port: uint16(port), Target: host},
		&dns.TXT{Hdr: hdr(name, dns.TypeTXT), Txt: txt},
	}
	for _, a := range addrs {
		resp.Extra = append(resp.Extra, &dns.AAAA{Hdr: hdr(host, dns.TypeAAAA), AAAA: net.IP(a.AsSlice())})
	}
	answer, err := resp.Pack()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 9000)
		for {
			n, cm, _, err := p.ReadFrom(buf)
			if err != nil {
				return
			}
			var q dns.Msg
			if cm == nil || cm.IfIndex != nif.Index || q.Unpack(buf[:n]) != nil || q.Response {
				continue
			}
			if slices.ContainsFunc(q.Question, func(x dns.Question) bool { return x.Qtype == dns.TypePTR && x.Name == svc }) {
				_, _ = p.WriteTo(answer, &ipv6.ControlMessage{IfIndex: nif.Index}, &net.UDPAddr{IP: mdnsGroup6, Port: mdnsPort})
			}
		}
	}()
	t.Cleanup(func() { _ = p.Close(); <-done })
}

// browseFor browses ifaces until it finds a gateway (each Browse listens
// up to 5 s; a loaded machine may need several).
func browseFor(t *testing.T, ifaces ...string) Gateway {
	t.Helper()
	for range 6 {
		got, err := Browse(context.Background(), BrowseOptions{Interfaces: ifaces, Wait: 5 * time.Second, Max: 1})
		if err != nil {
			t.Fatalf("Browse %v: %v", ifaces, err)
		}
		if len(got) > 0 {
			return got[0]
		}
	}
	t.Fatalf("Browse %v found no gateway", ifaces)
	return Gateway{}
}

// TestBrowseIPv6Only: a gateway that answers over IPv6 only is found,
// with its addresses dialable from here: the routable one as is, the
// link-local one with the zone of the interface its answer arrived on,
// whether that interface was the only one browsed or one of several. The
// zoned URL is written as RFC 6874 says and reaches the gateway's socket.
func TestBrowseIPv6Only(t *testing.T) {
	if !netnstest.Run(t) {
		return
	}
	netnstest.MulticastOnLo(t) // a second multicast interface to browse
	netnstest.Veth(t, "va", "vb")
	netnstest.Addr(t, "va", llA.String()+"/64")
	netnstest.Addr(t, "va", ulaA.String()+"/64")
	ln, err := net.Listen("tcp", netip.AddrPortFrom(llA.WithZone("va"), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	v6Responder(t, "va", "v6 gateway", port, []netip.Addr{llA, ulaA},
		[]string{"role=gateway", "gwid=" + gwA, "tlsSha256=" + fpA, "displayName=IPv6 网关", "protocol=1"})

	for _, ifaces := range [][]string{{"vb"}, {"lo", "vb"}} {
		g := browseFor(t, ifaces...)
		want := []netip.Addr{ulaA, llA.WithZone("vb")}
		if !slices.Equal(g.Addrs, want) || g.GatewayID != gwA || g.TLSSHA256 != fpA || g.Port != port || g.DisplayName != "IPv6 网关" {
			t.Fatalf("browse %v: %+v, want addresses %v", ifaces, g, want)
		}
		urls := g.URLs()
		p := strconv.Itoa(port)
		if !slices.Equal(urls, []string{"https://[fd00::a]:" + p, "https://[fe80::a%25vb]:" + p}) {
			t.Fatalf("URLs %q", urls)
		}
		u, err := url.Parse(urls[1])
		if err != nil || u.Hostname() != "fe80::a%vb" {
			t.Fatalf("zoned URL %q parses to %v, %v", urls[1], u, err)
		}
		c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", u.Host, err)
		}
		c.Close()
	}
}

// TestAdvertiseLinkLocalZone: an Advertiser on one end of a link announces
// a link-local address (over IPv4 and IPv6, as it does); a browse of
// several interfaces gives it the zone of the other end, where the answer
// arrived, never lo (where only this machine's own multicast, looped back,
// arrives).
func TestAdvertiseLinkLocalZone(t *testing.T) {
	if !netnstest.Run(t) {
		return
	}
	netnstest.MulticastOnLo(t)
	netnstest.Veth(t, "va", "vb")
	netnstest.Addr(t, "va", llA.String()+"/64")
	a := startAdvertiser(t, AdvertiserOptions{Port: 18789, GatewayID: gwA, TLSSHA256: fpA, IPs: []netip.Addr{llA, lo1},
		Interfaces: []string{"va"}, Logger: quietLog()})
	if st := a.Status(); !slices.Equal(st.Interfaces, []string{"va"}) {
		t.Fatalf("status %+v", st)
	}
	g := browseFor(t, "lo", "vb")
	if want := []netip.Addr{lo1, llA.WithZone("vb")}; !slices.Equal(g.Addrs, want) {
		t.Fatalf("addresses %v, want %v", g.Addrs, want)
	}
	if u := g.URLs(); !strings.HasPrefix(u[0], "https://127.0.0.1:") || !strings.Contains(u[1], "%25vb") {
		t.Fatalf("URLs %q", u)
	}
}

// TestDialable: addresses come IPv4 first, then IPv6, then link-local
// with zones; a link-local address is zoned by the only interface
// browsed, else by where the watch saw it, else left out (at once when
// nothing is watched, else after the grace wait).
func TestDialable(t *testing.T) {
	one := []net.Interface{{Index: 7, Name: "eth0"}}
	two := []net.Interface{{Index: 7, Name: "eth0"}, {Index: 9, Name: "wlan0"}}
	in := []netip.Addr{llA, ulaA, netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("fe80::b%given")}
	w := &linkWatch{names: map[int]string{7: "eth0", 9: "wlan0"}, seen: map[netip.Addr][]string{}, note: make(chan struct{})}
	got := w.dialable(in, one)
	want := []netip.Addr{netip.MustParseAddr("192.0.2.7"), ulaA, llA.WithZone("eth0"), netip.MustParseAddr("fe80::b%given")}
	if !slices.Equal(got, want) {
		t.Fatalf("one interface: %v, want %v", got, want)
	}
	if got := w.dialable(in, two); slices.Contains(got, llA) || len(got) != 3 {
		t.Fatalf("two interfaces, nothing watched: %v, want fe80::a left out", got)
	}
	// An answer with fe80::a arrives on wlan0 (index 9), another on an
	// interface that is not browsed (index 3): only wlan0 counts.
	msg := new(dns.Msg)
	msg.Response = true
	msg.Extra = []dns.RR{&dns.AAAA{Hdr: dns.RR_Header{Name: "h.local.", Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 120}, AAAA: net.IP(llA.AsSlice())}}
	pkt, err := msg.Pack()
	if err != nil {
		t.Fatal(err)
	}
	w.record(pkt, 3)
	w.record(pkt, 9)
	w.record(pkt, 9)
	w.conns = append(w.conns, io.NopCloser(nil)) // as if it watched
	if got := w.dialable([]netip.Addr{llA}, two); !slices.Equal(got, []netip.Addr{llA.WithZone("wlan0")}) {
		t.Fatalf("watched: %v", got)
	}
}
