package chat

import (
	"context"
	"fmt"
	"sync"

	"github.com/atrium-dev/atrium/backend/agent"
)

// runKey is the context key under which a run's context carries its *run,
// so that the Asker (called deep inside the agent loop) knows whose
// question it asks.
type runKey struct{}

// broker turns the agent loop's permission questions into gateway events
// and answers (SPEC §6 "a higher level asks the person (y/n in the UI)"):
// agent.permission when asked, agent.permissions lists the open ones,
// agent.permission.answer answers one, agent.permission.answered closes
// it for every client. It also holds each session's agent.Permissions, so
// a grant lasts for that session and level for the grant TTL across runs.
type broker struct {
	s       *Service
	pending *agent.Pending

	mu    sync.Mutex
	open  map[string]PermissionRequest // by id; removed when answered or given up
	perms map[string]*agent.Permissions
}

func newBroker(s *Service) *broker {
	b := &broker{s: s, open: map[string]PermissionRequest{}, perms: map[string]*agent.Permissions{}}
	b.pending = agent.NewPending(func(req agent.PermissionRequest) {
		b.mu.Lock()
		w, ok := b.open[req.ID]
		b.mu.Unlock()
		if ok {
			s.emit(EventPermission, w)
		}
	})
	return b
}

// permissions returns session's permissions, made on first use with the
// role rn acts as. Sessions whose grants have all expired and that have no
// run in progress are dropped first, so the map does not grow forever.
func (b *broker) permissions(rn *run) *agent.Permissions {
	b.s.mu.Lock()
	busy := make(map[string]bool, len(b.s.bySession))
	for id := range b.s.bySession {
		busy[id] = true
	}
	b.s.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.perms[rn.SessionID]; p != nil {
		return p
	}
	for id, p := range b.perms {
		if !busy[id] && len(p.Grants()) == 0 {
			delete(b.perms, id)
		}
	}
	p := agent.NewPermissions(agent.PermissionOptions{
		Session: rn.SessionID, Role: rn.ProfileID, Asker: agent.AskerFunc(b.ask),
		GrantTTL: b.s.opts.GrantTTL, AskTimeout: b.s.opts.AskTimeout, Now: b.s.opts.Now,
	})
	b.perms[rn.SessionID] = p
	return p
}

// ask is the sessions' Asker: it records the question with its run,
// waits through Pending for the person's answer, and when the wait ends
// without one (ask timeout, or the run cancelled) closes the question
// with agent.permission.answered {by: "timeout" | "cancelled"}.
func (b *broker) ask(ctx context.Context, req agent.PermissionRequest) (bool, error) {
	rn, _ := ctx.Value(runKey{}).(*run)
	if rn == nil {
		return false, fmt.Errorf("permission request %s: no chat run in context", req.ID)
	}
	w := PermissionRequest{
		ID: req.ID, Kind: req.Kind, RunRef: rn.RunRef, Tool: req.Tool, CallID: req.CallID, Level: req.Level.String(),
		ArgsSummary: req.ArgsSummary, Reason: req.Reason, ReasonCode: req.ReasonCode, ReasonParams: req.ReasonParams, At: req.At.UnixMilli(), Expires: req.Expires.UnixMilli(),
	}
	b.mu.Lock()
	b.open[w.ID] = w
	b.mu.Unlock()
	b.s.log.Info("agent permission asked", "run", rn.RunID, "session", rn.SessionID, "id", w.ID, "tool", w.Tool, "level", w.Level, "kind", w.Kind)
	yes, err := b.pending.Ask(ctx, req)
	if err != nil {
		by := AnsweredByTimeout
		if rn.ctx.Err() != nil {
			by = AnsweredByCancelled
		}
		b.mu.Lock()
		if _, still := b.open[w.ID]; still {
			delete(b.open, w.ID)
			b.s.emit(EventPermissionAnswered, PermissionAnsweredEvent{ID: w.ID, Allowed: false, By: by})
			b.s.log.Info("agent permission closed", "run", rn.RunID, "id", w.ID, "by", by)
		}
		b.mu.Unlock()
	}
	return yes, err
}

// list returns the open questions, oldest first.
func (b *broker) list() []PermissionRequest {
	out := []PermissionRequest{}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.pending.List() {
		if w, ok := b.open[r.ID]; ok {
			out = append(out, w)
		}
	}
	return out
}

// answer answers question id. The check, the answer and the event happen
// under one lock, so a question is closed exactly once: by the person
// here, or by ask when its wait ended first.
func (b *broker) answer(id string, allow bool) (PermissionAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.open[id]; !ok {
		return PermissionAnswer{}, fmt.Errorf("permission request %q: %w (never asked, or answered already)", id, ErrNotFound)
	}
	if err := b.pending.Answer(id, allow); err != nil {
		// The wait ended a moment ago; ask closes it with its reason.
		return PermissionAnswer{}, fmt.Errorf("permission request %q: %w (no longer waiting)", id, ErrNotFound)
	}
	delete(b.open, id)
	b.s.emit(EventPermissionAnswered, PermissionAnsweredEvent{ID: id, Allowed: allow, By: AnsweredByPerson})
	b.s.log.Info("agent permission answered", "id", id, "allowed", allow)
	return PermissionAnswer{ID: id, Allowed: allow}, nil
}

// Permissions lists the permission questions waiting for the person,
// oldest first (agent.permissions: a client that connects late shows
// them). Never nil.
func (s *Service) Permissions() []PermissionRequest { return s.broker.list() }

// AnswerPermission answers the open question id (agent.permission.answer,
// SPEC §6): allow true lets the call run and, for kind "level", grants the
// level to the session for the grant TTL; false denies it (the model gets
// status "denied"). Every client then gets agent.permission.answered.
// Errors: ErrInvalidInput without an id; ErrNotFound for an id that is
// not waiting (unknown, answered, timed out or cancelled).
func (s *Service) AnswerPermission(id string, allow bool) (PermissionAnswer, error) {
	if id == "" {
		return PermissionAnswer{}, fmt.Errorf("answer permission: %w: id is required", ErrInvalidInput)
	}
	res, err := s.broker.answer(id, allow)
	if err != nil {
		return PermissionAnswer{}, fmt.Errorf("answer permission: %w", err)
	}
	return res, nil
}
