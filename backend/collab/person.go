package collab

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
)

// This file is what the person decides about collaborations (issue 24
// item 4) and what the app is told of every change:
//
//   - NeedsPerson: the ACL lets the invited role accept on its own only
//     when it holds `collaborate` on every context file itself (SPEC §5.1:
//     the rule names both roles, as roles/code-expert/experience.md's
//     collaborate: [code-expert, writer] does). Otherwise the person
//     accepts or declines (Decide): Accept by the invited role is then
//     ErrForbidden. The rule is read from the ACL in force at each call.
//   - Decide: the person (an admin principal: the desktop's operator
//     connection, or a device scoped admin) accepts or declines a pending
//     collaboration, or completes an accepted one; no token is needed (the
//     person is not a party, and sees every collaboration). Audited as
//     collab.decide.
//   - Decline: the invited role declines a pending collaboration with its
//     token. Audited as collab.decline.
//   - Show: the person reads one collaboration with its history and its
//     shared view (read-only). Audited as collab.view.
//   - Options.OnChange is called after every stored change (request,
//     accept, decline, write, complete), outside the service's lock.

// StatusDeclined: the invited role or the person declined a pending
// collaboration (stored; CompletedAt and CompletedBy say when and who).
const StatusDeclined Status = "declined"

// Operations of this file in the audit log.
const (
	OpDecide  = "collab.decide"
	OpDecline = "collab.decline"
)

// Decisions of the person (Decide).
const (
	DecisionAccept   = "accept"
	DecisionDecline  = "decline"
	DecisionComplete = "complete"
)

// MaxReasonChars bounds a decision's reason (characters).
const MaxReasonChars = 500

// PersonWriter is the role recorded in a collaboration's history for the
// person's decisions.
const PersonWriter = "admin"

// needsPerson reports whether the ACL in force leaves c's acceptance to
// the person: c.To lacks `collaborate` on one of its context files.
func (s *Service) needsPerson(c Collaboration) bool {
	to := acl.Principal{Role: c.To}
	for _, p := range c.Context {
		if d := s.o.Guard.Decide(to, acl.Collaborate, p); !d.Allowed {
			return true
		}
	}
	return false
}

// annotate sets NeedsPerson on a pending collaboration.
func (s *Service) annotate(c Collaboration) Collaboration {
	c.NeedsPerson = c.Status == StatusPending && s.needsPerson(c)
	return c
}

// stored returns collaboration id as stored now, with its reported
// status, its history and NeedsPerson.
func (s *Service) stored(ctx context.Context, id string) (Collaboration, error) {
	r, ok, err := load(ctx, s.o.DB, id)
	if err != nil {
		return Collaboration{}, err
	}
	if !ok {
		return Collaboration{}, fmt.Errorf("collab %s: %w", id, ErrNotFound)
	}
	c := r.Collaboration
	c.Status = effective(c, s.o.Now())
	if c.History, err = events(ctx, s.o.DB, id); err != nil {
		return Collaboration{}, err
	}
	return s.annotate(c), nil
}

// changed calls Options.OnChange with the collaboration as stored now
// (with its history). A read error is logged: the change itself stands.
func (s *Service) changed(ctx context.Context, id string) {
	if s.o.OnChange == nil {
		return
	}
	c, err := s.stored(ctx, id)
	if err != nil {
		s.log.Warn("collab change not announced", "id", id, "err", err)
		return
	}
	s.o.OnChange(c)
}

// person refuses a principal that is not the person (admin).
func (s *Service) person(who acl.Principal, op, tgt string) error {
	if !who.Admin {
		return s.deny(who, op, tgt, ErrForbidden, "only the person (admin) decides for the parties")
	}
	return nil
}

// loadOpen loads id for the person's op: it must exist, not be completed
// or declined, and not be expired.
func (s *Service) loadOpen(ctx context.Context, who acl.Principal, op, id string) (row, error) {
	tgt := target(id)
	r, err := s.find(ctx, who, op, id)
	if err != nil {
		return row{}, err
	}
	switch {
	case r.Status == StatusCompleted, r.Status == StatusDeclined:
		return row{}, s.deny(who, op, tgt, ErrState, "the collaboration is already "+string(r.Status))
	case effective(r.Collaboration, s.o.Now()) == StatusExpired:
		return row{}, s.deny(who, op, tgt, ErrExpired, "the collaboration expired at "+r.ExpiresAt.Format(time.RFC3339))
	}
	return r, nil
}

// Decide is the person's decision on collaboration id (answered as
// stored after it, with its history): accept or decline a pending one, or complete an accepted one (reason, at most
// MaxReasonChars, is recorded; a completion's result is the reason, or
// "completed by the person", with importance 0, so no summary). Errors:
// ErrForbidden (not admin), ErrNotFound, ErrExpired, ErrState (not in the
// state the decision needs), ErrInvalidInput (an unknown decision, a
// malformed reason), or a storage or audit error.
func (s *Service) Decide(ctx context.Context, who acl.Principal, id, decision, reason string) (Collaboration, error) {
	tgt := target(id)
	if err := s.person(who, OpDecide, tgt); err != nil {
		return Collaboration{}, err
	}
	reason = strings.TrimSpace(reason)
	if err := cleanText("reason", reason, MaxReasonChars); err != nil {
		return Collaboration{}, s.deny(who, OpDecide, tgt, ErrInvalidInput, err.Error())
	}
	s.mu.Lock()
	_, err := s.decide(ctx, who, id, decision, reason)
	s.mu.Unlock()
	if err != nil {
		return Collaboration{}, err
	}
	s.changed(ctx, id)
	return s.stored(ctx, id)
}

func (s *Service) decide(ctx context.Context, who acl.Principal, id, decision, reason string) (Collaboration, error) {
	tgt := target(id)
	want := StatusPending
	switch decision {
	case DecisionAccept, DecisionDecline:
	case DecisionComplete:
		want = StatusAccepted
	default:
		return Collaboration{}, s.deny(who, OpDecide, tgt, ErrInvalidInput, fmt.Sprintf("decision %q (want accept, decline or complete)", decision))
	}
	r, err := s.loadOpen(ctx, who, OpDecide, id)
	if err != nil {
		return Collaboration{}, err
	}
	if r.Status != want {
		return Collaboration{}, s.deny(who, OpDecide, tgt, ErrState, fmt.Sprintf("%s needs a %s collaboration; it is %s", decision, want, r.Status))
	}
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	c := r.Collaboration
	var set string
	var args []any
	switch decision {
	case DecisionAccept:
		c.Status, c.AcceptedAt = StatusAccepted, now
		set, args = "status = ?, accepted_ms = ?", []any{string(StatusAccepted), ms(now)}
	case DecisionDecline:
		c.Status, c.CompletedAt, c.CompletedBy = StatusDeclined, now, PersonWriter
		set, args = "status = ?, completed_ms = ?, completed_by = ?", []any{string(StatusDeclined), ms(now), PersonWriter}
	case DecisionComplete:
		out := reason
		if out == "" {
			out = "completed by the person"
		}
		res := Result{Output: out}
		resJSON, err := jsonString(res)
		if err != nil {
			return Collaboration{}, err
		}
		c.Status, c.CompletedAt, c.CompletedBy, c.Result = StatusCompleted, now, PersonWriter, &res
		set, args = "status = ?, completed_ms = ?, completed_by = ?, result = ?", []any{string(StatusCompleted), ms(now), PersonWriter, resJSON}
	}
	if err := s.allow(who, OpDecide, tgt, fmt.Sprintf("the person: %s (%s → %s)", decision, c.From, c.To)); err != nil {
		return Collaboration{}, err
	}
	ok, err := update(ctx, s.o.DB, id, want, set, args, Event{At: now, Role: PersonWriter, Action: decision, Detail: reason})
	if err != nil {
		return Collaboration{}, err
	}
	if !ok {
		return Collaboration{}, fmt.Errorf("%s %s: %w: changed concurrently", OpDecide, id, ErrState)
	}
	s.log.Info("collab decided", "id", id, "decision", decision)
	return c, nil
}

// Decline declines a pending collaboration as its invited role (answered
// as stored after it, with its history), with the token (reason at most MaxReasonChars). Errors: those of Accept, and
// ErrInvalidInput for a malformed reason.
func (s *Service) Decline(ctx context.Context, who acl.Principal, id, token, reason string) (Collaboration, error) {
	reason = strings.TrimSpace(reason)
	s.mu.Lock()
	_, err := func() (Collaboration, error) {
		r, err := s.authenticate(ctx, who, OpDecline, id, token, true)
		if err != nil {
			return Collaboration{}, err
		}
		if err := cleanText("reason", reason, MaxReasonChars); err != nil {
			return Collaboration{}, s.deny(who, OpDecline, target(id), ErrInvalidInput, err.Error())
		}
		if r.Status != StatusPending {
			return Collaboration{}, s.deny(who, OpDecline, target(id), ErrState, "the collaboration is already "+string(r.Status))
		}
		now := s.o.Now().UTC().Truncate(time.Millisecond)
		if err := s.allow(who, OpDecline, target(id), fmt.Sprintf("%s declines %s's invitation", who.Role, r.From)); err != nil {
			return Collaboration{}, err
		}
		ok, err := update(ctx, s.o.DB, id, StatusPending, "status = ?, completed_ms = ?, completed_by = ?", []any{string(StatusDeclined), ms(now), who.Role},
			Event{At: now, Role: who.Role, Action: DecisionDecline, Detail: reason})
		if err != nil {
			return Collaboration{}, err
		}
		if !ok {
			return Collaboration{}, fmt.Errorf("%s %s: %w: changed concurrently", OpDecline, id, ErrState)
		}
		c := r.Collaboration
		c.Status, c.CompletedAt, c.CompletedBy = StatusDeclined, now, who.Role
		return c, nil
	}()
	s.mu.Unlock()
	if err != nil {
		return Collaboration{}, err
	}
	s.changed(ctx, id)
	return s.stored(ctx, id)
}

// Shown is Show's answer: the collaboration with its history, and its
// shared view while it is open (pending or accepted, unexpired).
type Shown struct {
	Collaboration Collaboration `json:"collaboration"`
	Shared        *View         `json:"shared,omitempty"`
}

// Show returns collaboration id to the person (admin): with its history
// and, while open, its shared view (what both roles may read; the
// person's read-only look at it). Errors: ErrForbidden (not admin),
// ErrNotFound, or a storage, memory or audit error.
func (s *Service) Show(ctx context.Context, who acl.Principal, id string) (Shown, error) {
	tgt := target(id)
	if err := s.person(who, OpView, tgt); err != nil {
		return Shown{}, err
	}
	r, err := s.find(ctx, who, OpView, id)
	if err != nil {
		return Shown{}, err
	}
	c, err := s.stored(ctx, r.ID)
	if err != nil {
		return Shown{}, err
	}
	out := Shown{Collaboration: c}
	if c.Status == StatusPending || c.Status == StatusAccepted {
		v, err := s.view(ctx, who, c, "", 0)
		if err != nil {
			return Shown{}, err
		}
		out.Shared = &v
	} else if err := s.allow(who, OpView, tgt, "the person reads a closed collaboration"); err != nil {
		return Shown{}, err
	}
	return out, nil
}
