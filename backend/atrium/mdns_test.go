package atrium

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/discovery"
	"github.com/atrium-dev/atrium/backend/discovery/netnstest"
)

// TestSettingsShowMDNSAndSPKI: in a network namespace of its own whose lo
// carries no multicast, the app bound to 127.0.0.2 cannot advertise by
// mDNS; config.get (what Settings shows) says so and why: retrying, no
// multicast, on lo. It also gives the certificate's SPKI hash: the base64
// SHA-256 of the public key the TLS listener presents.
func TestSettingsShowMDNSAndSPKI(t *testing.T) {
	if !netnstest.Run(t) {
		return
	}
	a, _ := startAppWith(t, func(string) string { return "" }, func(_ string, o *Options) { o.Bind = lanTestBind })
	deadline := time.Now().Add(60 * time.Second)
	for a.LAN().MDNS != discovery.StateRetrying {
		if time.Now().After(deadline) {
			t.Fatalf("mdns %+v", a.lan.adv.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var view struct {
		Gateway struct {
			TLSSPKI        string   `json:"tlsSpki"`
			MDNS           string   `json:"mdns"`
			MDNSReason     string   `json:"mdnsReason"`
			MDNSInterfaces []string `json:"mdnsInterfaces"`
			MDNSError      string   `json:"mdnsError"`
		} `json:"gateway"`
	}
	dial(t, a).ok("config.get", map[string]any{}, &view)
	g := view.Gateway
	if g.MDNS != "retrying" || g.MDNSReason != "no-multicast" || !slices.Equal(g.MDNSInterfaces, []string{"lo"}) || g.MDNSError == "" {
		t.Fatalf("config.get gateway mDNS: %+v", g)
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", net.JoinHostPort(lanTestBind, lanPort(t, a)),
		&tls.Config{InsecureSkipVerify: true}) // only to read the certificate presented
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sum := sha256.Sum256(c.ConnectionState().PeerCertificates[0].RawSubjectPublicKeyInfo)
	if want := base64.StdEncoding.EncodeToString(sum[:]); g.TLSSPKI != want || a.LAN().TLSSPKI != want {
		t.Fatalf("config.get tlsSpki %q, want %q", g.TLSSPKI, want)
	}
}
