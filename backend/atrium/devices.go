package atrium

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/devices"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/gwid"
	"github.com/atrium-dev/atrium/backend/pairing"
)

// Device admission (issue 16 part A): the gateway's identity, the one
// pairing store in state.db and the devices service behind the gateway's
// Authenticate hook and the device.* methods.

// loadIdentity loads (creating it the first time) the gateway's identity
// key in $ATRIUM_HOME/keys: its id is what devices sign.
func (a *App) loadIdentity() error {
	id, err := gwid.LoadIdentity(gwid.Options{Dir: a.Layout.KeysDir(), Logger: a.log})
	if err != nil {
		return fmt.Errorf("gateway identity: %w", err)
	}
	a.Identity = id
	return nil
}

// authenticate is the gateway's Authenticate hook until openDevices has
// run (no device is admitted before the app is built).
func (a *App) authenticate(ctx context.Context, r *gateway.AuthRequest) (*gateway.AuthResult, error) {
	if a.Devices == nil {
		return nil, gateway.Errorf(gateway.CodeUnavailable, "the app is starting; try again")
	}
	return a.Devices.Authenticate(ctx, r)
}

// openDevices opens the pairing store in state.db and the devices service,
// and registers the device methods. After state.db and the audit log.
func (a *App) openDevices(ctx context.Context) error {
	st, err := pairing.OpenSQLStore(ctx, a.db)
	if err != nil {
		return fmt.Errorf("pairing store: %w", err)
	}
	if a.Pairing, err = pairing.New(pairing.Options{Store: st}); err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	svc, err := devices.New(devices.Options{Pairing: a.Pairing, Gateway: a.Gateway, GatewayID: a.Identity.ID,
		PairInfo: a.pairInfo, Audit: a.Audit, Logger: a.log, Roles: a.scopeRoles})
	if err != nil {
		return err
	}
	svc.Register()
	a.Devices = svc
	a.onClosed(svc.ConnClosed)
	return nil
}

// scopeRoles lists the roles a device may be scoped to: the workspace's
// roles (roles.list) and main, the chat's own profile.
func (a *App) scopeRoles(ctx context.Context) ([]string, error) {
	out := []string{acl.MainRole}
	if a.Memory == nil {
		return out, nil
	}
	infos, err := a.Memory.ListRoles(ctx)
	if err != nil {
		return nil, fmt.Errorf("list roles: %w", err)
	}
	for _, ri := range infos {
		if !slices.Contains(out, ri.Role) {
			out = append(out, ri.Role)
		}
	}
	return out, nil
}

// deviceScope is api.Options.DeviceScope: the memory principal of a
// paired operator device, from its scope as stored now (issue 21 item 4).
func (a *App) deviceScope(ctx context.Context, id string) (acl.Principal, error) {
	if a.Devices == nil {
		return acl.Principal{}, fmt.Errorf("device %s: the devices service is not running", id)
	}
	sc, err := a.Devices.Scope(ctx, id)
	if err != nil {
		return acl.Principal{}, err
	}
	switch {
	case sc == pairing.ScopeAdmin:
		return acl.Principal{Admin: true}, nil
	case sc.Role() != "":
		return acl.Principal{Role: sc.Role()}, nil
	}
	return acl.Principal{Authenticated: true}, nil
}

// pairInfo is where devices reach the gateway, for device.pair.code. With
// LAN listeners (part B) PairInfoFunc supplies it; otherwise the gateway
// is on loopback only: http://127.0.0.1:<port>.
func (a *App) pairInfo() devices.PairInfo {
	if f := a.PairInfoFunc; f != nil {
		return f()
	}
	addr := a.Gateway.Addr()
	if addr == "" {
		return devices.PairInfo{}
	}
	_, port, _ := net.SplitHostPort(addr)
	return devices.PairInfo{BaseURLs: []string{"http://" + net.JoinHostPort("127.0.0.1", port)}, LoopbackOnly: true}
}

// connHooks fan the gateway's OnAuthenticated and OnClosed out to every
// part that listens (devices, nodes, presence).
type connHooks struct {
	mu     sync.RWMutex
	opened []func(gateway.ConnInfo)
	closed []func(gateway.ConnInfo)
}

// onAuthenticated adds f to the gateway's OnAuthenticated listeners.
func (a *App) onAuthenticated(f func(gateway.ConnInfo)) {
	a.hooks.mu.Lock()
	defer a.hooks.mu.Unlock()
	a.hooks.opened = append(a.hooks.opened, f)
}

// onClosed adds f to the gateway's OnClosed listeners.
func (a *App) onClosed(f func(gateway.ConnInfo)) {
	a.hooks.mu.Lock()
	defer a.hooks.mu.Unlock()
	a.hooks.closed = append(a.hooks.closed, f)
}

func (a *App) connOpened(ci gateway.ConnInfo) {
	a.hooks.mu.RLock()
	fs := a.hooks.opened
	a.hooks.mu.RUnlock()
	for _, f := range fs {
		f(ci)
	}
}

func (a *App) connClosed(ci gateway.ConnInfo) {
	a.hooks.mu.RLock()
	fs := a.hooks.closed
	a.hooks.mu.RUnlock()
	for _, f := range fs {
		f(ci)
	}
}
