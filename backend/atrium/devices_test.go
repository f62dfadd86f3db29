package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/device/devicetest"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// deviceDial connects key to the app as a device (no operator token).
func deviceDial(ctx context.Context, t *testing.T, a *App, key *device.PrivateKey, o gateway.ClientOptions) (*gateway.Client, error) {
	t.Helper()
	o.URL, o.GatewayID = a.WSURL(), a.Identity.ID
	return devicetest.Dial(ctx, t, key, o)
}

// pairCode asks the app for a setup code as admin.
func pairCode(ctx context.Context, t *testing.T, admin *gateway.Client) string {
	t.Helper()
	var pc struct{ Code, Display string }
	must(t, admin.Call(ctx, "device.pair.code", map[string]any{}, &pc))
	return pc.Display
}

// waitEvent returns the next event named name on c.
func waitEvent(ctx context.Context, t *testing.T, c *gateway.Client, name string) json.RawMessage {
	t.Helper()
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection ended before %s: %v", name, c.Err())
			}
			if ev.Event == name {
				return ev.Payload
			}
		case <-ctx.Done():
			t.Fatalf("no %s event: %v", name, ctx.Err())
		}
	}
}

// pairDevice pairs a new device with roles (and commands), approved by
// admin, and returns its key and tokens by role.
func pairDevice(ctx context.Context, t *testing.T, a *App, admin *gateway.Client, roles, commands []string) (*device.PrivateKey, map[string]string) {
	t.Helper()
	key := devicetest.NewKey(t, device.Ed25519)
	pending, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{SetupCode: pairCode(ctx, t, admin), Role: roles[0], Roles: roles,
		Commands: commands, Caps: []string{"system"}})
	must(t, err)
	if au := pending.Auth(); au.Status != gateway.AuthPending || au.RequestID == "" || au.DeviceID != key.Public().ID() {
		t.Fatalf("pairing connect: hello-ok auth %+v", au)
	}
	must(t, admin.Call(ctx, "device.pair.approve", map[string]any{"requestId": pending.Auth().RequestID}, nil))
	var res struct {
		Decision     string
		DeviceTokens map[string]string
	}
	must(t, json.Unmarshal(waitEvent(ctx, t, pending, "device.pair.resolved"), &res))
	if res.Decision != "approved" || len(res.DeviceTokens) != len(roles) {
		t.Fatalf("device.pair.resolved %+v", res)
	}
	pending.Close()
	return key, res.DeviceTokens
}

// devicePrincipals connects an operator device, a node device (one paired
// device, both roles) and an unpaired device.
func devicePrincipals(ctx context.Context, t *testing.T, a *App) []principalConn {
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "who-pairer")
	key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleOperator, gateway.RoleNode}, []string{"system.run"})
	op, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleOperator], Role: gateway.RoleOperator})
	must(t, err)
	node, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleNode], Role: gateway.RoleNode,
		Commands: []string{"system.run"}})
	must(t, err)
	other := devicetest.NewKey(t, device.ECDSAP256)
	unpaired, err := deviceDial(ctx, t, a, other, gateway.ClientOptions{SetupCode: pairCode(ctx, t, admin), Role: gateway.RoleNode})
	must(t, err)
	return []principalConn{
		{gateway.OperatorDevice, op, "authenticated"},
		{gateway.NodeDevice, node, "authenticated"},
		{gateway.Unpaired, unpaired, "anonymous"},
	}
}

// TestDeviceConnectRefusalsAudited: on the real app, a refused device
// connect (a token that does not match, a used setup code) is audited as
// operation connect with the device in the target, the pairing record
// stays, and the person's hello-ok carries the gateway id.
func TestDeviceConnectRefusalsAudited(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "refusal-admin")
	if h := admin.Hello(); h.Server.GatewayID != a.Identity.ID || h.Auth.Status != gateway.AuthOperator || len(a.Identity.ID) != 64 {
		t.Fatalf("admin hello-ok server %+v auth %+v", h.Server, h.Auth)
	}
	key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleNode}, nil)
	newest := func() audit.Entry {
		t.Helper()
		e, err := a.Audit.Tail(1, audit.Filter{})
		if err != nil || len(e) != 1 {
			t.Fatalf("audit tail: %v %v", e, err)
		}
		return e[0]
	}
	_, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleNode] + "x", Role: gateway.RoleNode})
	var ge *gateway.Error
	if !errors.As(err, &ge) || ge.Code != gateway.CodeUnauthorized || ge.Details["reason"] != "device_token_mismatch" {
		t.Fatalf("wrong token: %v", err)
	}
	if e := newest(); e.Operation != "connect" || e.Result != audit.Denied || e.Role != "anonymous" ||
		e.Target != "connect device:"+key.Public().ID() || e.IP != "127.0.0.1" {
		t.Fatalf("audit entry of the refused connect: %+v", e)
	}
	if _, err := a.Pairing.Device(ctx, key.Public().ID()); err != nil {
		t.Fatalf("pairing record after a mismatch: %v", err)
	}
	code := pairCode(ctx, t, admin)
	first := devicetest.NewKey(t, device.Ed25519)
	_, err = deviceDial(ctx, t, a, first, gateway.ClientOptions{SetupCode: code, Role: gateway.RoleNode})
	must(t, err)
	second := devicetest.NewKey(t, device.ECDSAP256)
	_, err = deviceDial(ctx, t, a, second, gateway.ClientOptions{SetupCode: code, Role: gateway.RoleNode})
	if !errors.As(err, &ge) || ge.Details["reason"] != "code_used" {
		t.Fatalf("a used code from another device: %v", err)
	}
	if e := newest(); e.Operation != "connect" || e.Result != audit.Denied || e.Target != "connect device:"+second.Public().ID() {
		t.Fatalf("audit entry of the used code: %+v", e)
	}
}
