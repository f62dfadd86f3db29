package atrium

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// deviceDial connects key to the app as a device (no operator token).
func deviceDial(ctx context.Context, t *testing.T, a *App, key *device.PrivateKey, o gateway.ClientOptions) (*gateway.Client, error) {
	t.Helper()
	o.URL, o.Device, o.GatewayID = a.WSURL(), key, a.Identity.ID
	if o.Client.ID == "" {
		o.Client = gateway.ClientInfo{ID: "test-device", Version: "test", Platform: "android", Mode: "node", DisplayName: "Pixel 8"}
	}
	c, err := gateway.Dial(ctx, o)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
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
	key, err := device.GenerateKey(device.Ed25519)
	must(t, err)
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
	other, err := device.GenerateKey(device.ECDSAP256)
	must(t, err)
	unpaired, err := deviceDial(ctx, t, a, other, gateway.ClientOptions{SetupCode: pairCode(ctx, t, admin), Role: gateway.RoleNode})
	must(t, err)
	return []principalConn{
		{gateway.OperatorDevice, op, "authenticated"},
		{gateway.NodeDevice, node, "authenticated"},
		{gateway.Unpaired, unpaired, "anonymous"},
	}
}
