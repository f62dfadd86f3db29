package atrium

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// TestLANBudgetFigures: the LAN listeners' share of an open-file limit.
func TestLANBudgetFigures(t *testing.T) {
	for _, tc := range []struct {
		maxConns, limit, conns, ceiling int
	}{
		{0, 0, DefaultMaxLANConns, 0},         // limit unknown: the cap alone
		{0, 1024, 768, 768},                   // a quarter kept
		{0, 256, 128, 128},                    // at most half kept
		{0, 600, 344, 344},                    // at least 256 kept
		{0, 2000, 1500, 1500},                 // a quarter kept
		{0, 20000, DefaultMaxLANConns, 15000}, // the cap is lower than the budget
		{100, 1 << 20, 100, 3 << 18},          // Options.MaxLANConns
		{10000, 4096, 3072, 3072},             // the budget is lower than the cap
	} {
		conns, ceiling := lanBudget(tc.maxConns, tc.limit)
		if conns != tc.conns || ceiling != tc.ceiling {
			t.Errorf("lanBudget(%d, %d) = %d, %d; want %d, %d", tc.maxConns, tc.limit, conns, ceiling, tc.conns, tc.ceiling)
		}
	}
}

// waitLAN waits until the LAN listeners count open connections, of them
// unauth unauthenticated.
func (k *atk) waitLAN(open, unauth int) {
	k.t.Helper()
	for lim := k.a.lan.pending; lim.openConns() != open || lim.count() != unauth; {
		if k.ctx.Err() != nil {
			k.t.Fatalf("LAN connections: %d open, %d unauthenticated; want %d, %d", lim.openConns(), lim.count(), open, unauth)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closedAtOnce checks that a new LAN connection from src is closed by the
// server without waiting for anything (not at the client's deadline) and
// that the refusal was audited (gateway.connlimit) with why.
func (k *atk) closedAtOnce(src, why string) {
	k.t.Helper()
	before := len(k.denied())
	c := k.rawFrom(src)
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
		k.t.Fatalf("a connection from %s (%s): read %v, want it closed by the server", src, why, err)
	}
	k.awaitConnlimit(before, src, why)
}

// awaitConnlimit waits for a gateway.connlimit audit entry for src whose
// reason holds why, recorded after the first `before` denied entries (the
// entry may follow the close).
func (k *atk) awaitConnlimit(before int, src, why string) {
	k.t.Helper()
	for {
		es := k.denied()
		for _, e := range es[:max(len(es)-before, 0)] {
			if e.Operation == "gateway.connlimit" && e.IP == src && strings.Contains(e.Reason, why) {
				return
			}
		}
		if k.ctx.Err() != nil {
			k.t.Fatalf("no gateway.connlimit audit entry for %s (%s)", src, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLANConnectionCounts: a LAN connection counts as unauthenticated from
// its accept until a WebSocket on it is authenticated (a paired device's
// connections leave the per-address cap: 20 from one address stay open),
// and as open until it closes: with Options.MaxLANConns 22, the device's
// 20 and two idle connections fill it, and the next is closed at once and
// audited while the person's listener on 127.0.0.1 serves.
func TestLANConnectionCounts(t *testing.T) {
	k := startAttackWith(t, func(o *Options) { o.MaxLANConns = 22 })
	key, toks := k.pair("127.0.0.80", []string{gateway.RoleOperator}, nil, nil)
	k.waitLAN(0, 0)
	var devs []*gateway.Client
	for range 20 {
		devs = append(devs, k.mustDev("127.0.0.80", key, gateway.ClientOptions{Role: gateway.RoleOperator, DeviceToken: toks[gateway.RoleOperator]}))
	}
	k.waitLAN(20, 0)
	idle := []net.Conn{k.rawFrom("127.0.0.81"), k.rawFrom("127.0.0.81")}
	k.waitLAN(22, 2)
	k.closedAtOnce("127.0.0.82", "too many open LAN connections (22")
	must(t, k.admin.Call(k.ctx, "health", map[string]any{}, nil))
	must(t, devs[0].Call(k.ctx, "health", map[string]any{}, nil))
	for _, c := range idle {
		c.Close()
	}
	devs[1].Close()
	k.waitLAN(19, 0)
	if code, err := k.get("127.0.0.82", "/healthz"); code != 200 {
		t.Errorf("a new connection once some closed: %d %v", code, err)
	}
}
