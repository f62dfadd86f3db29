package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/canvas"
	"github.com/atrium-dev/atrium/backend/media"
)

// CanvasTool is the canvas tool's name.
const CanvasTool = "canvas"

// KindCanvasEval is the PermissionRequest kind of the question put to the
// person before an agent's canvas eval ("may the agent run this script in
// the page it presented?").
const KindCanvasEval = "canvas.eval"

// Canvas is what the canvas tool needs of the Canvas (*canvas.Service).
type Canvas interface {
	Push(ctx context.Context, who canvas.Who, target, jsonl string) (canvas.PushResult, error)
	Reset(ctx context.Context, who canvas.Who, target, surfaceID string) (canvas.ResetResult, error)
	Present(ctx context.Context, who canvas.Who, target, url, html string, pl *canvas.Placement) (canvas.ShowResult, error)
	Navigate(ctx context.Context, who canvas.Who, target, url string) (canvas.ShowResult, error)
	Hide(ctx context.Context, who canvas.Who, target string) (canvas.ShowResult, error)
	Snapshot(ctx context.Context, who canvas.Who, target string) (media.Meta, error)
	Eval(ctx context.Context, who canvas.Who, target, js string, timeout time.Duration) (canvas.EvalResult, error)
}

// CanvasOptions configure the canvas tool (SPEC §8; docs/PROTOCOL.md
// "Canvas and A2UI", Agents): push and reset at L1 (they show something
// in Atrium, outside it nothing changes); present, navigate, hide and
// snapshot at L1 on the desktop and L3 on a node (another device's screen,
// through the session's L3 grant); eval asks the person on every call at
// L3, the highest level.
type CanvasOptions struct {
	// Canvas is the service. Required.
	Canvas Canvas
	// SessionKey is the run's "<profileId>/<sessionId>": it owns what the
	// agent pushes, and user actions on it come back to that session.
	// Required.
	SessionKey string
	// Permissions decide the L3 actions. Nil: they are denied.
	Permissions Permissions
	// Media is the media store the snapshots land in: a snapshot is
	// returned as an image (the model sees it when it takes images, else
	// its path and size). Nil: the snapshot's metadata only.
	Media Media
}

type canvasTool struct {
	e *env
	o CanvasOptions
}

func newCanvasTool(e *env, o CanvasOptions) (*canvasTool, error) {
	if o.Canvas == nil || o.SessionKey == "" {
		return nil, errors.New("tools: CanvasOptions.Canvas and SessionKey are required")
	}
	return &canvasTool{e: e, o: o}, nil
}

const canvasSchema = `{"type":"object","properties":{` +
	`"action":{"type":"string","enum":["push","reset","present","navigate","hide","snapshot","eval"],"description":"push A2UI messages; reset (remove) your surfaces; present a web page (url or html) in a sandboxed frame; navigate it; hide it; snapshot the Canvas as a PNG; eval JavaScript inside the presented html page (the person is asked)"},` +
	`"target":{"type":"string","maxLength":256,"description":"\"desktop\" (default: the app's Canvas) or a node id from the nodes tool (a phone)"},` +
	`"messages":{"type":"array","maxItems":1000,"items":{"type":"object"},"description":"for push: A2UI messages in order, each one object (v0.8: surfaceUpdate, beginRendering, dataModelUpdate, deleteSurface; or v0.9 with \"version\":\"v0.9\")"},` +
	`"jsonl":{"type":"string","description":"for push, instead of messages: the same as JSON Lines"},` +
	`"surfaceId":{"type":"string","maxLength":256,"description":"for reset: one surface (default: all of yours on the target)"},` +
	`"url":{"type":"string","maxLength":2048,"description":"for present and navigate: an http(s) page"},` +
	`"html":{"type":"string","description":"for present: a whole page; it runs sandboxed, with no network and inline code only"},` +
	`"placement":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"},"width":{"type":"number"},"height":{"type":"number"}},"description":"for present: where, in CSS pixels, where the target can honour it"},` +
	`"js":{"type":"string","maxLength":65536,"description":"for eval: an expression or script; its value (awaited) comes back as JSON"}` +
	`},"required":["action"],"additionalProperties":false}`

func (t *canvasTool) register(r *agent.Registry) error {
	return r.Register(agent.Spec{Name: CanvasTool, Level: agent.L1, Schema: json.RawMessage(canvasSchema),
		// An eval or a node may wait for the person, then for the target.
		Timeout: agent.DefaultAskTimeout + canvas.MaxEvalTimeout + 30*time.Second,
		Description: "Show UI to the person on the Canvas (desktop or a phone node) with A2UI; the person's button presses come back to you " +
			"as a message naming the surface, component, action and form values. Also present a web page in a sandboxed frame, snapshot the Canvas, " +
			"or run JavaScript inside a page you presented (asks the person)."}, t.run)
}

type canvasArgs struct {
	Action    string            `json:"action"`
	Target    string            `json:"target"`
	Messages  []json.RawMessage `json:"messages"`
	JSONL     string            `json:"jsonl"`
	SurfaceID string            `json:"surfaceId"`
	URL       string            `json:"url"`
	HTML      string            `json:"html"`
	Placement *canvas.Placement `json:"placement"`
	JS        string            `json:"js"`
}

func (t *canvasTool) run(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a canvasArgs
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("canvas: %w", err)
	}
	if a.Target == "" {
		a.Target = canvas.Desktop
	}
	who := canvas.Who{Agent: t.e.p.Role, SessionKey: t.o.SessionKey}
	target := a.Target + " " + a.Action
	switch a.Action {
	case "push":
		jsonl := a.JSONL
		if len(a.Messages) > 0 {
			if jsonl != "" {
				return agent.Output{}, errors.New("canvas: push takes messages or jsonl, not both")
			}
			lines := make([]string, len(a.Messages))
			for i, m := range a.Messages {
				lines[i] = string(m)
			}
			jsonl = strings.Join(lines, "\n")
		}
		if err := t.e.allow(CanvasTool, target, "shows UI in Atrium"); err != nil {
			return agent.Output{}, err
		}
		res, err := t.o.Canvas.Push(ctx, who, a.Target, jsonl)
		if err != nil {
			return agent.Output{}, fmt.Errorf("canvas: %w", err)
		}
		if len(res.Errors) > 0 {
			le := res.Errors[0]
			return agent.Output{}, fmt.Errorf("canvas: push to %s: %d lines applied, line %d refused: %s (fix it and push again from that line)",
				a.Target, res.Applied, le.Line, le.Reason)
		}
		sum := fmt.Sprintf("pushed %d lines to %s: rendered", res.Applied, a.Target)
		if !res.Rendered {
			sum = fmt.Sprintf("pushed %d lines to %s (kept): not rendered yet: %s", res.Applied, a.Target, res.Reason)
		}
		return agent.Output{Data: res, LogSummary: sum}, nil
	case "reset":
		if err := t.e.allow(CanvasTool, target, "shows UI in Atrium"); err != nil {
			return agent.Output{}, err
		}
		res, err := t.o.Canvas.Reset(ctx, who, a.Target, a.SurfaceID)
		if err != nil {
			return agent.Output{}, fmt.Errorf("canvas: %w", err)
		}
		return agent.Output{Data: res, LogSummary: fmt.Sprintf("removed %d surfaces from %s", len(res.Removed), a.Target)}, nil
	case "present", "navigate", "hide", "snapshot":
		if err := t.allowShow(ctx, c, a); err != nil {
			return agent.Output{}, err
		}
		var res any
		var err error
		switch a.Action {
		case "present":
			res, err = t.o.Canvas.Present(ctx, who, a.Target, a.URL, a.HTML, a.Placement)
		case "navigate":
			res, err = t.o.Canvas.Navigate(ctx, who, a.Target, a.URL)
		case "hide":
			res, err = t.o.Canvas.Hide(ctx, who, a.Target)
		case "snapshot":
			var m media.Meta
			m, err = t.o.Canvas.Snapshot(ctx, who, a.Target)
			if err == nil {
				out := agent.Output{Data: m, LogSummary: fmt.Sprintf("snapshot of %s: %s, %dx%d, %d bytes", a.Target, m.File, m.Width, m.Height, m.Size)}
				raw, _ := json.Marshal(m) // a struct of strings and numbers
				img, ok, ierr := t.e.mediaImage(t.o.Media, raw)
				if ierr != nil {
					return agent.Output{}, fmt.Errorf("canvas: snapshot of %s: %w", a.Target, ierr)
				}
				if ok {
					out.Images = []agent.Image{img}
				}
				return out, nil
			}
		}
		if err != nil {
			return agent.Output{}, fmt.Errorf("canvas: %w", err)
		}
		sr, _ := res.(canvas.ShowResult)
		sum := fmt.Sprintf("%s on %s: shown", a.Action, a.Target)
		if !sr.Rendered {
			sum = fmt.Sprintf("%s on %s: not shown yet: %s", a.Action, a.Target, sr.Reason)
		}
		return agent.Output{Data: res, LogSummary: sum}, nil
	case "eval":
		if t.o.Permissions == nil {
			return agent.Output{}, t.e.deny(CanvasTool, target, "nobody to ask: canvas eval needs the person's permission")
		}
		yes, err := t.o.Permissions.AskOnce(ctx, agent.PermissionRequest{Kind: KindCanvasEval, Tool: CanvasTool, CallID: c.ID, Level: agent.L3,
			ArgsSummary: cut(a.JS, agent.MaxArgsSummaryChars),
			Reason:      fmt.Sprintf("run JavaScript in the page presented on %s (inside its sandboxed frame only)?", a.Target),
			ReasonCode:  agent.ReasonCodeCanvasEval, ReasonParams: map[string]string{"target": a.Target}})
		if err != nil {
			return agent.Output{}, fmt.Errorf("canvas: %w", err)
		}
		if !yes {
			return agent.Output{}, t.e.deny(CanvasTool, target, "the person did not approve the script")
		}
		if err := t.e.allow(CanvasTool, target, "approved by the person"); err != nil {
			return agent.Output{}, err
		}
		res, err := t.o.Canvas.Eval(ctx, who, a.Target, a.JS, 0)
		if err != nil {
			return agent.Output{}, fmt.Errorf("canvas: %w", err)
		}
		if !res.OK {
			return agent.Output{}, fmt.Errorf("canvas: eval on %s failed: %s", a.Target, res.Error)
		}
		return agent.Output{Data: res, LogSummary: fmt.Sprintf("eval on %s: ok", a.Target)}, nil
	}
	return agent.Output{}, fmt.Errorf("canvas: unknown action %q (push, reset, present, navigate, hide, snapshot, eval)", a.Action)
}

// allowShow: L1 on the desktop; a node's screen needs the session's L3.
func (t *canvasTool) allowShow(ctx context.Context, c agent.Call, a canvasArgs) error {
	target := a.Target + " " + a.Action
	if a.Target == canvas.Desktop {
		return t.e.allow(CanvasTool, target, "shows UI in Atrium")
	}
	if t.o.Permissions == nil {
		return t.e.deny(CanvasTool, target, "nobody to ask: a node's screen needs the person's permission")
	}
	d, err := t.o.Permissions.Allow(ctx, agent.L3, agent.PermissionRequest{Tool: CanvasTool, CallID: c.ID, ArgsSummary: cut(target+" "+a.URL, agent.MaxArgsSummaryChars)})
	if err != nil {
		return fmt.Errorf("canvas: %w", err)
	}
	if !d.Allowed {
		return t.e.deny(CanvasTool, target, d.Reason)
	}
	return t.e.allow(CanvasTool, target, d.Reason)
}
