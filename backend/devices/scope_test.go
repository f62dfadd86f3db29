package devices_test

import (
	"errors"
	"testing"

	"github.com/atrium-dev/atrium/backend/devices"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/pairing"
)

// TestScopeLifecycle: a device approved without a scope is authenticated;
// device.scope.set changes what Scope answers at once (the per-call
// source) and tells the device's live connection; a role scope needs a
// role the gateway knows (none here: INVALID_REQUEST, audited); a repair
// request shows the scope the device has, and its approval without a
// scope gives authenticated again; device.remove forgets it.
func TestScopeLifecycle(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	key := newKey(t)
	id := key.Public().ID()
	toks := e.pairKey(key, []string{gateway.RoleOperator}, nil)
	if sc, err := e.svc.Scope(c, id); err != nil || sc != pairing.ScopeAuthenticated {
		t.Fatalf("scope after a default approval: %q %v", sc, err)
	}
	op := e.mustDial(key, gateway.ClientOptions{Role: gateway.RoleOperator, DeviceToken: toks[gateway.RoleOperator]})

	err := e.admin.Call(c, "device.scope.set", map[string]any{"deviceId": id, "scope": "role:writer"}, nil)
	e.refusedAndAudited("a role this gateway does not know", err, gateway.CodeInvalidRequest, "", "device.scope.set", id)
	err = e.admin.Call(c, "device.scope.set", map[string]any{"deviceId": id}, nil)
	if ge := gwErr(err); ge == nil || ge.Code != gateway.CodeInvalidRequest {
		t.Errorf("device.scope.set without a scope: %v", err)
	}

	var res struct{ Device devices.DeviceView }
	if err := e.admin.Call(c, "device.scope.set", map[string]any{"deviceId": id, "scope": "admin"}, &res); err != nil || res.Device.Scope != pairing.ScopeAdmin {
		t.Fatalf("device.scope.set admin: %+v %v", res.Device, err)
	}
	if sc, err := e.svc.Scope(c, id); err != nil || sc != pairing.ScopeAdmin {
		t.Fatalf("scope right after device.scope.set: %q %v", sc, err)
	}
	var changed struct{ DeviceID, Scope string }
	event(t, op, devices.EventScopeChanged, &changed)
	if changed.DeviceID != id || changed.Scope != "admin" {
		t.Errorf("device.scope.changed %+v", changed)
	}
	event(t, e.admin, devices.EventDevicesChanged, nil)

	// A repair shows the scope the device has; its approval resets it.
	if err := e.admin.Call(c, "device.token.revoke", map[string]any{"deviceId": id}, nil); err != nil {
		t.Fatal(err)
	}
	repair := e.mustDial(key, gateway.ClientOptions{Role: gateway.RoleOperator})
	var list struct{ Pending []devices.RequestView }
	if err := e.admin.Call(c, "device.pair.list", nil, &list); err != nil || len(list.Pending) != 1 ||
		list.Pending[0].Kind != "repair" || list.Pending[0].Scope != pairing.ScopeAdmin {
		t.Fatalf("device.pair.list of a repair: %+v %v", list.Pending, err)
	}
	if err := e.admin.Call(c, "device.pair.approve", map[string]any{"requestId": repair.Auth().RequestID}, nil); err != nil {
		t.Fatal(err)
	}
	if sc, err := e.svc.Scope(c, id); err != nil || sc != pairing.ScopeAuthenticated {
		t.Fatalf("scope after a repair approved without one: %q %v", sc, err)
	}

	if err := e.admin.Call(c, "device.remove", map[string]any{"deviceId": id}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Scope(c, id); !errors.Is(err, pairing.ErrNotPaired) {
		t.Fatalf("scope of a removed device: %v, want ErrNotPaired", err)
	}
	err = e.admin.Call(c, "device.scope.set", map[string]any{"deviceId": id, "scope": "admin"}, nil)
	if ge := gwErr(err); ge == nil || ge.Code != gateway.CodeNotFound {
		t.Errorf("device.scope.set of a removed device: %v, want NOT_FOUND", err)
	}
}
