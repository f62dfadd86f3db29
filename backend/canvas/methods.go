package canvas

import (
	"context"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
)

// Methods served by [Service.Register] (docs/PROTOCOL.md "Canvas and
// A2UI"; who may call each is in "Who may call").
const (
	MethodPush     = "canvas.a2ui.push"
	MethodReset    = "canvas.a2ui.reset"
	MethodPresent  = "canvas.present"
	MethodNavigate = "canvas.navigate"
	MethodHide     = "canvas.hide"
	MethodSnapshot = "canvas.snapshot"
	MethodEval     = "canvas.eval"
	MethodState    = "canvas.state"
	MethodRendered = "canvas.rendered"
	MethodAction   = "canvas.action"
)

// storedMedia is a stored file's sidecar with its path.
type storedMedia struct {
	media.Meta
	Path string `json:"path"`
}

func whoOf(c *gateway.Call) Who {
	return Who{Principal: c.Principal, ConnID: c.ConnID, IP: c.RemoteIP}
}

// mayUse refuses an operator device that Options.MayUse does not allow
// (FORBIDDEN, audited).
func (s *Service) mayUse(ctx context.Context, c *gateway.Call, method string) error {
	if c.Principal.Class() != gateway.OperatorDevice || s.o.MayUse == nil {
		return nil
	}
	if err := s.o.MayUse(ctx, c.Principal.Device); err != nil {
		s.audit(method, whoOf(c), method, false, err.Error())
		return gateway.Errorf(gateway.CodeForbidden, "%s: %v", method, err)
	}
	return nil
}

// Register adds the canvas methods to the gateway, each with the
// principals that may call it, and declares canvas.update. Call it
// before the gateway serves.
func (s *Service) Register() {
	g := s.o.Gateway
	g.DeclareEvents(EventUpdate)
	type targetParams struct {
		Target string `json:"target"`
	}
	person := func(method string, kind gateway.Kind, h func(ctx context.Context, c *gateway.Call) (any, error)) {
		g.Handle(method, kind, func(ctx context.Context, c *gateway.Call) (any, error) {
			if err := s.mayUse(ctx, c, method); err != nil {
				return nil, err
			}
			return h(ctx, c)
		})
	}
	person(MethodPush, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Target string `json:"target"`
			JSONL  string `json:"jsonl"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.Push(ctx, whoOf(c), p.Target, p.JSONL)
	})
	// A node (the phone page) may close the surfaces shown on itself, so
	// that they stay closed after its next connect.
	person(MethodReset, gateway.Write(gateway.Operators|gateway.Nodes), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Target    string `json:"target"`
			SurfaceID string `json:"surfaceId"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		who := whoOf(c)
		if c.Principal.Role == gateway.RoleNode {
			target, err := s.ownTarget(MethodReset, who, p.Target, p.SurfaceID)
			if err != nil {
				return nil, err
			}
			p.Target = target
		}
		return s.Reset(ctx, who, p.Target, p.SurfaceID)
	})
	person(MethodPresent, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Target    string     `json:"target"`
			URL       string     `json:"url"`
			HTML      string     `json:"html"`
			Placement *Placement `json:"placement"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.Present(ctx, whoOf(c), p.Target, p.URL, p.HTML, p.Placement)
	})
	person(MethodNavigate, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Target string `json:"target"`
			URL    string `json:"url"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.Navigate(ctx, whoOf(c), p.Target, p.URL)
	})
	person(MethodHide, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p targetParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.Hide(ctx, whoOf(c), p.Target)
	})
	person(MethodSnapshot, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p targetParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		m, err := s.Snapshot(ctx, whoOf(c), p.Target)
		if err != nil {
			return nil, err
		}
		// The sidecar and where the file is on this machine, as node.invoke
		// gives a node's photo.
		path, err := s.o.Media.Path(m.ID)
		if err != nil {
			return nil, gateway.Errorf(gateway.CodeInternal, "%s: %v", MethodSnapshot, err)
		}
		return map[string]any{"media": storedMedia{Meta: m, Path: path}}, nil
	})
	person(MethodEval, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Target    string `json:"target"`
			JS        string `json:"js"`
			TimeoutMs int64  `json:"timeoutMs"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if p.TimeoutMs < 0 || p.TimeoutMs > MaxEvalTimeout.Milliseconds() {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "%s: timeoutMs must be 1..%d", MethodEval, MaxEvalTimeout.Milliseconds())
		}
		return s.Eval(ctx, whoOf(c), p.Target, p.JS, time.Duration(p.TimeoutMs)*time.Millisecond)
	})
	person(MethodState, gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p targetParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if err := s.checkTarget(MethodState, p.Target); err != nil {
			return nil, err
		}
		return s.StateOf(p.Target), nil
	})
	person(MethodRendered, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p Rendered
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if p.PushID == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "%s: pushId is required", MethodRendered)
		}
		return map[string]any{}, s.Answer(p)
	})
	g.Handle(MethodAction, gateway.Write(gateway.Operators|gateway.Nodes), func(ctx context.Context, c *gateway.Call) (any, error) {
		if err := s.mayUse(ctx, c, MethodAction); err != nil {
			return nil, err
		}
		var p ActionParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.Action(ctx, whoOf(c), p)
	})
}
