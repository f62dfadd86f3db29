package canvas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// ActionParams are canvas.action's params: a user action on a surface
// (A2UI's userAction), the bound data resolved into Context.
type ActionParams struct {
	Target      string          `json:"target"`
	SurfaceID   string          `json:"surfaceId"`
	ComponentID string          `json:"componentId"`
	Name        string          `json:"name"`
	Context     json.RawMessage `json:"context"`
	// DataModel is the surface's whole data model as the client holds it
	// (two-way bindings included), sent when a v0.9 surface was created
	// with sendDataModel: true; a JSON object of at most MaxContextBytes.
	// It reaches the agent as A2UI v0.9's a2uiClientDataModel
	// (client_data_model.json). Ignored for v0.8 surfaces.
	DataModel json.RawMessage `json:"dataModel,omitempty"`
}

// ActionResult is canvas.action's answer.
type ActionResult struct {
	Accepted   bool   `json:"accepted"`
	ActionID   string `json:"actionId"`
	SessionKey string `json:"sessionKey"`
	Queued     bool   `json:"queued"`
}

// Action takes a user action from who: a node may act only on surfaces
// shown on itself (its own id as target, FORBIDDEN and audited
// otherwise), the person's UIs on any target (default desktop). The
// action is stored before it is acknowledged and becomes a user message
// in the session owning the surface (see Run). Errors: INVALID_REQUEST,
// FORBIDDEN, NOT_FOUND (no such surface), UNAVAILABLE (too many waiting,
// retryable), INTERNAL.
func (s *Service) Action(ctx context.Context, who Who, p ActionParams) (ActionResult, error) {
	const method = "canvas.action"
	if who.Principal.Role == gateway.RoleNode {
		target, err := s.ownTarget(method, who, p.Target, p.SurfaceID)
		if err != nil {
			return ActionResult{}, err
		}
		p.Target = target
	} else if p.Target == "" {
		p.Target = Desktop
	}
	for name, v := range map[string]string{"surfaceId": p.SurfaceID, "componentId": p.ComponentID, "name": p.Name} {
		if v == "" || len(v) > MaxIDBytes {
			return ActionResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: %s must be 1..%d bytes", method, name, MaxIDBytes)
		}
	}
	ctxJSON := p.Context
	if len(ctxJSON) == 0 || string(ctxJSON) == "null" {
		ctxJSON = json.RawMessage(`{}`)
	}
	var obj map[string]any
	if len(ctxJSON) > MaxContextBytes || json.Unmarshal(ctxJSON, &obj) != nil {
		return ActionResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: context must be a JSON object of at most %d bytes", method, MaxContextBytes)
	}
	if len(p.DataModel) > 0 && string(p.DataModel) != "null" {
		var dm map[string]any
		if len(p.DataModel) > MaxContextBytes || json.Unmarshal(p.DataModel, &dm) != nil {
			return ActionResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: dataModel must be a JSON object of at most %d bytes", method, MaxContextBytes)
		}
	} else {
		p.DataModel = nil
	}
	s.mu.Lock()
	sf := s.surfaces[p.Target][p.SurfaceID]
	owner, version := "", ""
	if sf != nil {
		owner, version = sf.Owner, sf.Version
	}
	s.mu.Unlock()
	if sf == nil {
		return ActionResult{}, gateway.Errorf(gateway.CodeNotFound, "%s: no surface %q on %s", method, p.SurfaceID, p.Target)
	}
	now := s.o.Now()
	msg, err := actionMessage(p, version, ctxJSON, now)
	if err != nil {
		return ActionResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: %v", method, err)
	}
	if n := utf8.RuneCountInString(msg); n > MaxActionMessageChars {
		return ActionResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: the action's message would have %d characters (at most %d); send less context", method, n, MaxActionMessageChars)
	}
	id := newID()
	n, err := s.st.addAction(ctx, id, owner, p.Target, msg, s.o.MaxWaitingActions, now.UnixMilli())
	if errors.Is(err, ErrTooManyActions) {
		return ActionResult{}, &gateway.Error{Code: gateway.CodeUnavailable, Message: fmt.Sprintf("%s: %v", method, err), Retryable: true}
	}
	if err != nil {
		return ActionResult{}, gateway.Errorf(gateway.CodeInternal, "%s: %v", method, err)
	}
	queued := n > 1
	if !queued && s.o.Chat != nil {
		prof, sess, _ := strings.Cut(owner, "/")
		queued = s.o.Chat.Busy(prof, sess)
	}
	s.Wake()
	return ActionResult{Accepted: true, ActionID: id, SessionKey: owner, Queued: queued}, nil
}

// ownTarget is a node's own target (its node id) for target ("" is
// itself); another target is FORBIDDEN and audited: a node acts only on
// the surfaces shown on itself.
func (s *Service) ownTarget(method string, who Who, target, surfaceID string) (string, error) {
	self := who.Principal.Device
	if self == "" {
		self = "local:" + who.ConnID
	}
	if target == "" || target == self {
		return self, nil
	}
	s.audit(method, who, target+" "+surfaceID, false, "a node acts only on surfaces shown on itself")
	return "", gateway.Errorf(gateway.CodeForbidden, "%s: a node acts only on surfaces shown on itself (%s), not on %s", method, self, target)
}

// actionMessage is the user message an action becomes: one line a person
// reads, then the action as the surface's A2UI version says a client sends
// it to the server — v0.8's userAction, v0.9's {version, action}
// (client_to_server.json) followed, when the client sent its data model,
// by v0.9's a2uiClientDataModel (client_data_model.json).
func actionMessage(p ActionParams, version string, ctxJSON json.RawMessage, now time.Time) (string, error) {
	event := map[string]any{
		"name": p.Name, "surfaceId": p.SurfaceID, "sourceComponentId": p.ComponentID,
		"timestamp": now.UTC().Format(time.RFC3339Nano), "context": ctxJSON,
	}
	var body any = map[string]any{"userAction": event}
	if version == V09 {
		body = map[string]any{"version": V09, "action": event}
	}
	b, err := json.MarshalIndent(body, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode the action: %w", err)
	}
	msg := fmt.Sprintf("Canvas action %q on surface %q (component %q)\n```json\n%s\n```", p.Name, p.SurfaceID, p.ComponentID, b)
	if version == V09 && p.DataModel != nil {
		dm, err := json.MarshalIndent(map[string]any{"a2uiClientDataModel": map[string]any{
			"version": V09, "surfaces": map[string]json.RawMessage{p.SurfaceID: p.DataModel},
		}}, "", "  ")
		if err != nil {
			return "", fmt.Errorf("encode the data model: %w", err)
		}
		msg += fmt.Sprintf("\nThe surface's data model as the person left it:\n```json\n%s\n```", dm)
	}
	return msg, nil
}

// Wake makes Run look at the waiting actions now (the wiring calls it when
// a chat run ends).
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run sends the waiting actions, oldest first per session, one at a time
// per session, until ctx ends: an action whose session is answering waits
// for Wake or the next RetryInterval. Actions stored before a restart are
// sent after it. It returns ctx's error.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.RetryInterval)
	defer t.Stop()
	warned := map[string]bool{}
	for {
		s.deliver(ctx, warned)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		case <-t.C:
		}
	}
}

// deliver tries each session's oldest waiting action once, and again
// while it succeeds.
func (s *Service) deliver(ctx context.Context, warned map[string]bool) {
	if s.o.Chat == nil {
		return
	}
	for range s.o.MaxWaitingActions { // bounded: each round sends at least one or stops
		list, err := s.st.waiting(ctx)
		if err != nil {
			s.log.Error("canvas actions not read", "err", err)
			return
		}
		sent := 0
		for _, w := range list {
			prof, sess, _ := strings.Cut(w.SessionKey, "/")
			runID, err := s.o.Chat.SendAction(ctx, prof, sess, w.Message, w.ID)
			if err != nil {
				if !errors.Is(err, ErrBusy) && !warned[w.ID] {
					warned[w.ID] = true
					s.log.Warn("canvas action waits", "action", w.ID, "session", w.SessionKey, "err", err)
				}
				continue
			}
			delete(warned, w.ID)
			if err := s.st.markSent(ctx, w.Seq, runID, s.o.Now().UnixMilli()); err != nil {
				// The turn started; the action would be sent again after a
				// restart. Say so loudly.
				s.log.Error("canvas action sent but not marked", "action", w.ID, "run", runID, "err", err)
				return
			}
			s.log.Info("canvas action sent", "action", w.ID, "session", w.SessionKey, "run", runID)
			sent++
		}
		if sent == 0 {
			return
		}
	}
}
