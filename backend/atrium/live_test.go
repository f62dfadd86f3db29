package atrium

import (
	"context"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// TestLiveMethodsPrincipals (issue 22 item 3): live.open, live.stop and
// live.save as every principal that may not: a local node, a paired node,
// an operator device with the default scope and one scoped to a role, an
// unpaired device — FORBIDDEN and audited; a phone scoped admin is the
// person and gets past the check (to the node that is not there).
func TestLiveMethodsPrincipals(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, scopeFiles)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "live-admin")
	others := append([]principalConn{{gateway.LocalNode, gwDial(ctx, t, a, gateway.RoleNode, "live-node"), "authenticated"}},
		devicePrincipals(ctx, t, a)...)
	writerPhone, _ := scopedPhone(ctx, t, a, admin, "role:writer")
	others = append(others, principalConn{gateway.OperatorDevice, writerPhone, "writer"})
	calls := map[string]map[string]any{
		"live.open": {"nodeId": "some-node", "source": "camera"},
		"live.stop": {"viewId": "0123456789abcdef0123456789abcdef"},
		"live.save": {"viewId": "0123456789abcdef0123456789abcdef", "seconds": 5},
	}
	for _, pc := range others {
		for method, params := range calls {
			err := pc.cl.Call(ctx, method, params, nil)
			if errCode(err) != gateway.CodeForbidden {
				t.Errorf("%s (%s) %s: %v, want FORBIDDEN", pc.class, pc.role, method, err)
				continue
			}
			e, terr := a.Audit.Tail(1, audit.Filter{})
			if terr != nil || len(e) != 1 || e[0].Result != audit.Denied || e[0].Operation != method {
				t.Errorf("%s (%s) %s: audit %+v %v", pc.class, pc.role, method, e, terr)
			}
		}
	}
	adminPhone, _ := scopedPhone(ctx, t, a, admin, "admin")
	for _, c := range []*gateway.Client{admin, adminPhone} {
		if err := c.Call(ctx, "live.open", calls["live.open"], nil); errCode(err) == gateway.CodeForbidden || err == nil {
			t.Errorf("live.open of a node not there: %v, want a refusal other than FORBIDDEN", err)
		}
		var st struct{ Stopped bool }
		if err := c.Call(ctx, "live.stop", calls["live.stop"], &st); err != nil || st.Stopped {
			t.Errorf("live.stop of no view: %v %+v", err, st)
		}
	}
	if a.Live.Views() != 0 {
		t.Error("a refused open left a view")
	}
}
