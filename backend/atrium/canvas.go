package atrium

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/atrium-dev/atrium/backend/agent/tools"
	"github.com/atrium-dev/atrium/backend/canvas"
	"github.com/atrium-dev/atrium/backend/chat"
)

// newCanvas builds the Canvas (SPEC §8, issue 23; package canvas) on the
// gateway: its methods, the presented pages at canvas.FramePath, the
// replay to nodes that connect; surfaces and actions in state.db, snapshots
// into App.Media, actions sent through chat. Without Options.A2UISchemas
// (an app built without the frontend's schemas) there is no Canvas.
func (a *App) newCanvas(ctx context.Context, o Options, log *slog.Logger) error {
	if o.A2UISchemas == nil {
		log.Info("canvas off: no A2UI schemas in this build")
		return nil
	}
	svc, err := canvas.New(ctx, canvas.Options{
		Gateway: a.Gateway,
		DB:      a.db,
		Schemas: o.A2UISchemas,
		Nodes:   a.Nodes,
		Media:   a.Media,
		Chat:    canvasChat{c: a.Chat},
		Audit:   a.Audit,
		MayUse:  a.deviceMayUseCanvas,
		Logger:  log,
	})
	if err != nil {
		return fmt.Errorf("canvas: %w", err)
	}
	svc.Register()
	a.Gateway.HandlePages(canvas.FramePath, svc.FrameHandler())
	a.onAuthenticated(svc.Connected)
	a.Canvas = svc
	return nil
}

// deviceMayUseCanvas is canvas.Options.MayUse: the Canvas shows what agents
// push (their sessions' data) and runs code in presented pages, so a paired
// operator device uses it only with the memory scope admin, as node.invoke.
func (a *App) deviceMayUseCanvas(ctx context.Context, deviceID string) error {
	p, err := a.deviceScope(ctx, deviceID)
	if err != nil {
		return err
	}
	if !p.Admin {
		return errors.New("only a device approved to read everything (scope admin) may use the Canvas; change its scope in the device list")
	}
	return nil
}

// canvasChat is canvas.Chat over chat.Service: an action becomes a user
// message in its session (a visible turn); chat.ErrBusy is canvas.ErrBusy.
type canvasChat struct{ c *chat.Service }

func (cc canvasChat) SendAction(ctx context.Context, profileID, sessionID, message, key string) (string, error) {
	res, err := cc.c.Send(ctx, chat.SendRequest{ProfileID: profileID, SessionID: sessionID, Message: message, IdempotencyKey: "canvas-action:" + key})
	if errors.Is(err, chat.ErrBusy) {
		return "", fmt.Errorf("%w: %w", canvas.ErrBusy, err)
	}
	if err != nil {
		return "", err
	}
	return res.RunID, nil
}

func (cc canvasChat) Busy(profileID, sessionID string) bool {
	for _, r := range cc.c.Active(profileID) {
		if r.SessionID == sessionID {
			return true
		}
	}
	return false
}

// canvasTool gives a run's agents the canvas tool, its surfaces owned by
// the run's session; present to a node, snapshot of a node and eval ask
// the person through the session's permissions (none: refused).
func (a *App) canvasTool(sc chat.ToolScope) *tools.CanvasOptions {
	if a.Canvas == nil {
		return nil
	}
	o := &tools.CanvasOptions{Canvas: a.Canvas, SessionKey: sc.ProfileID + "/" + sc.SessionID}
	if sc.Permissions != nil {
		o.Permissions = sc.Permissions
	}
	return o
}

// chatEmit broadcasts a chat event and wakes the Canvas's waiting actions
// when a run ends (its session may take the next one).
func (a *App) chatEmit(event string, payload any) {
	a.Gateway.Broadcast(event, payload)
	switch event {
	case chat.EventFinal, chat.EventError, chat.EventCancelled:
		if a.Canvas != nil {
			a.Canvas.Wake()
		}
	}
}

func (a *App) runCanvas(ctx context.Context) error {
	if a.Canvas == nil {
		<-ctx.Done()
		return nil
	}
	return a.Canvas.Run(ctx)
}
