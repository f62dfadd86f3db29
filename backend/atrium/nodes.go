package atrium

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/atrium-dev/atrium/backend/agent/tools"
	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// newNodes builds the nodes service (presence, node registry, node.invoke,
// exec asks; SPEC §7) on the gateway, with the WebRTC receiver of media
// commands storing into App.Media (media.go), auditing into the app's audit log,
// registers its methods and listens to the gateway's connection hooks
// (devices.go fans them out); the hello-ok snapshot reads its presence.
func (a *App) newNodes(log *slog.Logger) error {
	a.mediaRx = &mediaRelay{store: a.Media, bind: a.servedIPs, log: log, stored: a.mediaStored}
	svc, err := nodes.New(nodes.Options{Gateway: a.Gateway, Audit: a.Audit, MayInvoke: a.deviceMayInvoke, Media: a.mediaRx, Logger: log})
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	a.mediaRx.begun = svc.MediaBegun // before the upload server exists
	svc.Register()
	a.Nodes = svc
	up, err := a.newUploads(log, nil)
	if err != nil {
		return fmt.Errorf("media uploads: %w", err)
	}
	a.uploads.Store(up)
	a.onAuthenticated(svc.Connected)
	a.onClosed(svc.Disconnected)
	return nil
}

func (a *App) presenceSnapshot() []any {
	if a.Nodes == nil {
		return nil
	}
	return a.Nodes.PresenceSnapshot()
}

// nodesTool gives a run's agents the nodes tool when a node is connected
// at the run's start (its schema would only cost context otherwise); its
// invokes ask the person through the session's permissions (none: every
// invoke is refused).
func (a *App) nodesTool(sc chat.ToolScope) *tools.NodesOptions {
	if a.Nodes == nil || !a.Nodes.AnyConnected() {
		return nil
	}
	o := &tools.NodesOptions{Nodes: a.Nodes, Media: a.Media}
	if sc.Permissions != nil {
		o.Permissions = sc.Permissions
	}
	return o
}

// deviceMayInvoke is nodes.Options.MayInvoke: a paired operator device may
// invoke node commands only with the memory scope admin ("everything, like
// this computer"): system.run on a node that holds the workspace, a camera
// or a location reach further than shared notes or one role's memory.
func (a *App) deviceMayInvoke(ctx context.Context, deviceID string) error {
	p, err := a.deviceScope(ctx, deviceID)
	if err != nil {
		return err
	}
	if !p.Admin {
		return errors.New("only a device approved to read everything (scope admin) may run node commands; change its scope in the device list")
	}
	return nil
}
