package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/atrium-dev/atrium/backend/acl"
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
		// The desktop window's pages come from its own origin (Wails'
		// asset server), and frame the presented pages from the gateway.
		FrameAncestors: o.AllowedOrigins,
		Logger:         log,
	})
	if err != nil {
		return fmt.Errorf("canvas: %w", err)
	}
	svc.Register()
	a.Gateway.HandlePages(canvas.FramePath, svc.FrameHandler())
	a.onAuthenticated(svc.Connected)
	a.Canvas, a.canvasLog = svc, log
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

// canvasTool gives a run's agents the canvas tool when something shows a
// Canvas at the run's start (a UI or a node that renders A2UI; its schema
// would only cost context otherwise), its surfaces owned by the run's
// session; present to a node, snapshot of a node and eval ask the person
// through the session's permissions (none: refused).
func (a *App) canvasTool(sc chat.ToolScope) *tools.CanvasOptions {
	if a.Canvas == nil || !a.Canvas.Viewers() {
		return nil
	}
	o := &tools.CanvasOptions{Canvas: a.Canvas, SessionKey: sc.ProfileID + "/" + sc.SessionID, Media: a.Media}
	if sc.Permissions != nil {
		o.Permissions = sc.Permissions
	}
	return o
}

// chatEmit broadcasts a chat event, hands the runs' events to Talk (their
// answers are spoken) and wakes the Canvas's waiting actions when a run
// ends (its session may take the next one).
func (a *App) chatEmit(event string, payload any) {
	a.Gateway.Broadcast(event, payload)
	a.talkEvent(event, payload)
	switch event {
	case chat.EventFinal, chat.EventError, chat.EventCancelled:
		if a.Canvas != nil {
			a.Canvas.Wake()
		}
		if a.collabs != nil {
			a.collabs.onChat(event, payload)
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

// OfflineCardSurface is the surface of the offline provider's card:
// "offline-search-<sessionId>", one per session (a new answer replaces it).
const OfflineCardSurface = "offline-search-"

// offlineCard shows what an offline answer found as a small A2UI card on
// the desktop Canvas, owned by the answer's session (issue 23: a person
// with no model sees the Canvas work). In the background: it never delays
// the answer.
func (a *App) offlineCard(c chat.OfflineCard) {
	if a.Canvas == nil {
		return
	}
	jsonl := offlineCardJSONL(c, OfflineCardSurface+c.SessionID)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*canvas.DefaultRenderWait)
		defer cancel()
		res, err := a.Canvas.Push(ctx, canvas.Who{Agent: acl.MainRole, SessionKey: c.ProfileID + "/" + c.SessionID}, canvas.Desktop, jsonl)
		switch {
		case err != nil:
			a.canvasLog.Warn("offline card not shown", "err", err)
		case len(res.Errors) > 0:
			a.canvasLog.Warn("offline card refused", "line", res.Errors[0].Line, "reason", res.Errors[0].Reason)
		}
	}()
}

// offlineCardJSONL is the card as A2UI v0.8 lines: the surface made anew
// (deleteSurface first), a title, one Card per passage (its source and the
// start of its text), in the answer's language.
func offlineCardJSONL(c chat.OfflineCard, surfaceID string) string {
	title, srcFmt := "Found in memory: “%s”", "%s:%d-%d · score %.2f"
	if c.Chinese {
		title, srcFmt = "记忆中找到：“%s”", "%s:%d-%d · 得分 %.2f"
	}
	text := func(id, s, hint string) map[string]any {
		t := map[string]any{"text": map[string]any{"literalString": s}}
		if hint != "" {
			t["usageHint"] = hint
		}
		return map[string]any{"id": id, "component": map[string]any{"Text": t}}
	}
	ids := []string{"title"}
	comps := []map[string]any{text("title", fmt.Sprintf(title, c.Query), "h4")}
	for i, r := range c.Results {
		card, col := fmt.Sprintf("r%d", i), fmt.Sprintf("r%d-col", i)
		ids = append(ids, card)
		snippet := []rune(strings.Join(strings.Fields(r.Snippet), " "))
		if len(snippet) > 280 {
			snippet = append(snippet[:280], '…')
		}
		comps = append(comps,
			map[string]any{"id": card, "component": map[string]any{"Card": map[string]any{"child": col}}},
			map[string]any{"id": col, "component": map[string]any{"Column": map[string]any{"children": map[string]any{"explicitList": []string{col + "-src", col + "-text"}}}}},
			text(col+"-src", fmt.Sprintf(srcFmt, r.Path, r.StartLine, r.EndLine, r.Score), "caption"),
			text(col+"-text", string(snippet), "body"))
	}
	comps = append(comps, map[string]any{"id": "root", "component": map[string]any{"Column": map[string]any{"children": map[string]any{"explicitList": ids}}}})
	lines := []any{
		map[string]any{"deleteSurface": map[string]any{"surfaceId": surfaceID}},
		map[string]any{"surfaceUpdate": map[string]any{"surfaceId": surfaceID, "components": comps}},
		map[string]any{"beginRendering": map[string]any{"surfaceId": surfaceID, "root": "root"}},
	}
	var b strings.Builder
	for _, l := range lines {
		j, _ := json.Marshal(l) // maps of strings and numbers: cannot fail
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}
