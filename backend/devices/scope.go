package devices

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/pairing"
)

// Memory scopes of paired devices (issue 21 item 4; package pairing
// scope.go): chosen by device.pair.approve (default authenticated),
// changed by device.scope.set, shown by device.list and device.pair.list,
// read on every call of a paired operator device through Scope (the app's
// api hook), so a change applies to the device's live connections at once.

// EventScopeChanged goes to the device's own paired connections when the
// person changes its scope: {deviceId, scope}. A client reloads what it
// shows (it may now see less, or more).
const EventScopeChanged = "device.scope.changed"

// Scope returns the memory scope of the paired device id, from a cache
// kept in step with every change made through this service (approve,
// device.scope.set, device.remove), so the gateway's per-event checks cost
// no database read. Errors: pairing.ErrNotPaired, the store's.
func (s *Service) Scope(ctx context.Context, id string) (pairing.Scope, error) {
	s.scopeMu.Lock()
	defer s.scopeMu.Unlock()
	if sc, ok := s.scopes[id]; ok {
		return sc, nil
	}
	d, err := s.o.Pairing.Device(ctx, id)
	if err != nil {
		return "", err
	}
	s.scopes[id] = d.Scope
	return d.Scope, nil
}

// setCached records id's scope after a change ("" forgets it). Callers
// hold scopeMu across the store write and this call, so a concurrent
// Scope never caches the value from before the change.
func (s *Service) setCached(id string, sc pairing.Scope) {
	if sc == "" {
		delete(s.scopes, id)
		return
	}
	s.scopes[id] = sc
}

// checkScope parses a scope from a method's params and checks that a
// role scope names a role of this workspace (Options.Roles). A refusal is
// INVALID_REQUEST naming what is wrong.
func (s *Service) checkScope(ctx context.Context, method, raw string) (pairing.Scope, error) {
	sc, err := pairing.ParseScope(raw)
	if err != nil {
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "%s: %v", method, err)
	}
	role := sc.Role()
	if role == "" {
		return sc, nil
	}
	if s.o.Roles == nil {
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "%s: scope %s: this gateway has no roles to act as", method, sc)
	}
	roles, err := s.o.Roles(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: list roles: %w", method, err)
	}
	if !slices.Contains(roles, role) {
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "%s: scope %s: unknown role %q (roles: %v)", method, sc, role, roles)
	}
	return sc, nil
}

// scopeSet is device.scope.set {deviceId, scope} → {device}: admin only;
// applies at once to the device's live connections (Scope is read on each
// of their calls and events), which get EventScopeChanged. Audited, the
// refusals too.
func (s *Service) scopeSet(ctx context.Context, c *gateway.Call) (any, error) {
	var p struct {
		DeviceID string `json:"deviceId"`
		Scope    string `json:"scope"`
	}
	if err := gateway.DecodeParams(c, &p); err != nil {
		return nil, err
	}
	if p.DeviceID == "" || p.Scope == "" {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "device.scope.set: deviceId and scope are required")
	}
	target := "device:" + p.DeviceID
	sc, err := s.checkScope(ctx, "device.scope.set", p.Scope)
	if err != nil {
		s.record("device.scope.set", "admin", target, c.RemoteIP, false, err.Error())
		return nil, err
	}
	s.scopeMu.Lock()
	before, berr := s.o.Pairing.Device(ctx, p.DeviceID)
	d, err := s.o.Pairing.SetScope(ctx, p.DeviceID, sc)
	if err == nil {
		s.setCached(d.DeviceID, d.Scope)
	}
	s.scopeMu.Unlock()
	if err != nil {
		s.record("device.scope.set", "admin", target, c.RemoteIP, false, err.Error())
		return nil, pairingErr("device.scope.set", err)
	}
	from := pairing.Scope("?")
	if berr == nil {
		from = before.Scope
	}
	s.record("device.scope.set", "admin", target, c.RemoteIP, true, fmt.Sprintf("memory scope %s → %s", from, d.Scope))
	s.sendTo(d.DeviceID, gateway.RoleOperator, EventScopeChanged, map[string]any{"deviceId": d.DeviceID, "scope": d.Scope})
	s.o.Gateway.BroadcastTo(gateway.Admin, EventDevicesChanged, struct{}{})
	return map[string]any{"device": s.deviceView(d)}, nil
}

// currentScopes maps the paired devices' ids to their scopes (for
// device.pair.list: a repair request shows the scope the device has now).
func (s *Service) currentScopes(ctx context.Context) map[string]pairing.Scope {
	ds, err := s.o.Pairing.Devices(ctx)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.log.Warn("paired devices unreadable for device.pair.list", "err", err)
		}
		return nil
	}
	out := make(map[string]pairing.Scope, len(ds))
	for _, d := range ds {
		out[d.DeviceID] = d.Scope
	}
	return out
}
