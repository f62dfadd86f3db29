package cli

import (
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/discovery"
)

// TestNodeFlags: `atrium node` refuses contradictory or unusable pairing
// input with a usage error before touching the network, and creates its
// state dir (key, default exec approvals) where ATRIUM_NODE_HOME says.
func TestNodeFlags(t *testing.T) {
	id, fp := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	url := "https://127.0.0.2:1/pair#c=ABCD-EFGH&g=" + id + "&f=" + fp
	state := filepath.Join(t.TempDir(), "node")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "--gateway", "https://127.0.0.2:1", "--url", url}, "not both"},
		{[]string{"node", "--url", url, "--fingerprint", strings.Repeat("ef", 32)}, "--fingerprint differs"},
		{[]string{"node", "--url", url, "--gateway-id", strings.Repeat("01", 32)}, "--gateway-id differs"},
		{[]string{"node", "--url", "http://192.0.2.9:1/pair#c=X"}, "loopback only"},
		{[]string{"node", "--fingerprint", "xyz"}, "bad certificate fingerprint"},
		{[]string{"node", "extra"}, "no arguments"},
	} {
		code, _, stderr := runCLI(t, map[string]string{"ATRIUM_NODE_HOME": state}, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if _, err := os.Stat(state); err == nil {
		t.Fatal("a usage error created the state dir")
	}
	// Nothing to connect to: a clear error, and the state dir is ready.
	code, _, stderr := runCLI(t, map[string]string{"ATRIUM_NODE_HOME": state}, "node")
	if code != 1 || !strings.Contains(stderr, "no gateway to connect to") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, name := range []string{"device.key", "exec-approvals.json"} {
		st, err := os.Stat(filepath.Join(state, name))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", name, st, err)
		}
	}
}

// TestGatewayTargets: `atrium node --discover` uses the first address a
// gateway offers in discovery's order (IPv4, IPv6, link-local IPv6 with
// its zone): an IPv6 address when that is all it offers, a link-local one
// with its zone in the URL (RFC 6874) so that the node can dial it.
func TestGatewayTargets(t *testing.T) {
	id, fp := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	gw := func(addrs ...string) discovery.Gateway {
		g := discovery.Gateway{Port: 18789, GatewayID: id, TLSSHA256: fp}
		for _, a := range addrs {
			g.Addrs = append(g.Addrs, netip.MustParseAddr(a))
		}
		return g
	}
	for _, tc := range []struct {
		g    discovery.Gateway
		want string
	}{
		{gw("192.0.2.7", "fd00::a", "fe80::a%eth0"), "wss://192.0.2.7:18789/ws"},
		{gw("fd00::a", "fe80::a%eth0"), "wss://[fd00::a]:18789/ws"},
		{gw("fe80::a%eth0"), "wss://[fe80::a%25eth0]:18789/ws"},
	} {
		got := gatewayTargets([]discovery.Gateway{tc.g})
		if len(got) != 1 || got[0].URL != tc.want || got[0].GatewayID != id || got[0].TLSSHA256 != fp {
			t.Errorf("%v: targets %+v, want %s", tc.g.Addrs, got, tc.want)
			continue
		}
		u, err := url.Parse(got[0].URL)
		if want := tc.g.Addrs[0].String(); err != nil || u.Hostname() != want {
			t.Errorf("%s: host %q (%v), want %s", got[0].URL, u.Hostname(), err, want)
		}
	}
	noID := gw("192.0.2.7")
	noID.GatewayID = ""
	if got := gatewayTargets([]discovery.Gateway{noID, gw()}); len(got) != 0 {
		t.Errorf("targets %+v from gateways without id or address", got)
	}
}
