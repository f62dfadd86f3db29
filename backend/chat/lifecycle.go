package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/convo"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/google/uuid"
)

// Session lifecycle (SPEC §6 "Session lifecycle"; issue 24 item 3): a
// session is closed by the person (`/new` or `/reset` as the whole
// message of a chat.send), or on its own by the reset policy (daily at
// 04:00 local time, after N idle minutes, or both). Closing writes the
// session's dated note (convo.NewNote: the last 15 messages) through
// Options.SaveNote, emits EventReset, and the next send naming the closed
// session starts a new one (its client history left out of the context).
// The closed session's messages stay in history, browsable as before.

// Reset reasons (ResetResult.Reason).
const (
	ResetCommand = "command"        // `/new` or `/reset`
	ResetDaily   = convo.ResetDaily // the daily reset time passed
	ResetIdle    = convo.ResetIdle  // idle for the policy's minutes
	ResetManual  = "manual"         // Service.Reset without a reason
)

// EventReset is emitted when a session is closed: ResetEvent.
const EventReset = "chat.reset"

// DefaultResetCheck is how often RunLifecycle checks the sessions it knows
// for a due reset.
const DefaultResetCheck = time.Minute

// maxClosed bounds the closed sessions remembered for redirecting sends
// that still name them (the oldest are forgotten first); each close is
// also recorded in state.db (history.CloseSession) and the newest
// maxClosed are loaded again when the service starts.
const maxClosed = 10000

// ResetResult says what closing a session did: ClosedSessionID was closed
// (empty when the send named no session), SessionID is the one the next
// message goes to, Note the note's workspace-relative path ("" when the
// session had nothing to save, or no SaveNote is configured), Messages how
// many messages it holds, NoteError why a note could not be written (the
// session is closed all the same).
type ResetResult struct {
	ProfileID       string `json:"profileId"`
	ClosedSessionID string `json:"closedSessionId,omitempty"`
	SessionID       string `json:"sessionId"`
	Reason          string `json:"reason"`
	Note            string `json:"note,omitempty"`
	Messages        int    `json:"messages,omitempty"`
	NoteError       string `json:"noteError,omitempty"`
}

// ResetEvent is EventReset's payload (a ResetResult).
type ResetEvent = ResetResult

// ResetRequest closes SessionID of ProfileID; Reason is one of the Reset*
// reasons (default ResetManual).
type ResetRequest struct {
	ProfileID string `json:"profileId"`
	SessionID string `json:"sessionId"`
	Reason    string `json:"reason,omitempty"`
}

// sessionInfo is what the lifecycle knows of a session this service saw.
type sessionInfo struct {
	profileID string
	last      time.Time
}

// IsResetCommand reports whether a chat message is a session command:
// `/new` or `/reset` (case-insensitive) as the whole message.
func IsResetCommand(text string) bool {
	t := strings.ToLower(strings.TrimSpace(text))
	return t == "/new" || t == "/reset"
}

// SetResetPolicy replaces the automatic reset policy while the service
// runs (Settings); nil turns automatic resets off.
func (s *Service) SetResetPolicy(p *convo.ResetPolicy) {
	s.resetPolicy.Store(p)
}

// noteRole is the role folder a profile's notes go to: main, or the
// profile of an instance <profile>-<k>.
func (s *Service) noteRole(profileID string) string {
	if inst, ok := s.remote(profileID); ok && inst.ProfileID != "" {
		return inst.ProfileID
	}
	return profileID
}

// touch records activity of a session (s.mu held).
func (s *Service) touch(profileID, sessionID string, at time.Time) {
	if sessionID == "" {
		return
	}
	s.sessions[sessionID] = sessionInfo{profileID: profileID, last: at}
}

// isClosed reports whether sessionID was closed.
func (s *Service) isClosed(sessionID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.closedSessions[sessionID]
	return ok
}

// redirect returns the session a send naming sessionID goes to: a new one
// when sessionID was closed (s.mu held).
func (s *Service) redirect(sessionID string) (string, bool) {
	moved := false
	for i := 0; i < 64; i++ { // a chain of closes (A → B, then B → C); bounded
		next, ok := s.closedSessions[sessionID]
		if !ok {
			break
		}
		sessionID, moved = next, true
	}
	return sessionID, moved
}

// rememberClosed records that sessionID was closed and next followed it,
// forgetting the oldest beyond maxClosed (s.mu held, or before the
// service is shared).
func (s *Service) rememberClosed(sessionID, next string) {
	if _, ok := s.closedSessions[sessionID]; ok {
		return
	}
	s.closedSessions[sessionID] = next
	s.closedOrder = append(s.closedOrder, sessionID)
	if len(s.closedOrder) > maxClosed {
		delete(s.closedSessions, s.closedOrder[0])
		s.closedOrder = s.closedOrder[1:]
	}
}

// Reset closes a session now (see the top of this file). Errors:
// ErrNotFound (unknown profile), ErrInvalidInput (bad session id),
// ErrBusy (the session is answering: cancel or wait first), ErrClosed.
// A note that cannot be written is logged and reported in NoteError.
func (s *Service) Reset(ctx context.Context, r ResetRequest) (ResetResult, error) {
	if err := s.checkProfile(r.ProfileID); err != nil {
		return ResetResult{}, fmt.Errorf("chat reset: %w", err)
	}
	if r.SessionID != "" {
		if err := checkSessionID(r.SessionID); err != nil {
			return ResetResult{}, fmt.Errorf("chat reset: %w", err)
		}
	}
	if r.Reason == "" {
		r.Reason = ResetManual
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ResetResult{}, fmt.Errorf("chat reset: %w", ErrClosed)
	}
	if next, ok := s.closedSessions[r.SessionID]; ok && r.SessionID != "" {
		s.mu.Unlock() // already closed: nothing more to save
		return ResetResult{ProfileID: r.ProfileID, ClosedSessionID: r.SessionID, SessionID: next, Reason: r.Reason}, nil
	}
	if r.SessionID != "" && s.bySession[r.SessionID] != nil {
		s.mu.Unlock()
		return ResetResult{}, fmt.Errorf("chat reset: %w: session %s is still answering; cancel it or wait", ErrBusy, r.SessionID)
	}
	res := ResetResult{ProfileID: r.ProfileID, ClosedSessionID: r.SessionID, SessionID: uuid.NewString(), Reason: r.Reason}
	if r.SessionID != "" {
		s.rememberClosed(r.SessionID, res.SessionID)
		delete(s.sessions, r.SessionID)
	}
	s.mu.Unlock()

	if r.SessionID != "" {
		// Recorded in state.db too, so that a send still naming the
		// session after a restart moves on (best effort, as the note: the
		// session is closed in this run all the same).
		if err := s.opts.History.CloseSession(ctx, history.Closed{SessionID: r.SessionID, NextSessionID: res.SessionID,
			ProfileID: r.ProfileID, Reason: r.Reason, ClosedAt: s.opts.Now().UnixMilli()}); err != nil {
			s.log.Error("chat session close not recorded", "session", r.SessionID, "err", err)
		}
		s.saveNote(ctx, r, &res)
	}
	s.log.Info("chat session closed", "profile", r.ProfileID, "session", r.SessionID, "next_session", res.SessionID,
		"reason", r.Reason, "note", res.Note, "messages", res.Messages)
	s.emit(EventReset, res)
	return res, nil
}

// saveNote writes the closed session's note (best effort: a failure is
// logged and reported in res.NoteError).
func (s *Service) saveNote(ctx context.Context, r ResetRequest, res *ResetResult) {
	if s.opts.SaveNote == nil {
		return
	}
	past, err := s.opts.History.Session(ctx, r.SessionID, history.MaxLimit)
	if err != nil {
		res.NoteError = err.Error()
		s.log.Warn("chat session note failed", "session", r.SessionID, "error", err.Error())
		return
	}
	msgs := make([]convo.Message, 0, len(past))
	for _, m := range past {
		if m.ProfileID != r.ProfileID {
			continue
		}
		msgs = append(msgs, convo.Message{ID: m.ID, TS: m.TS, Message: model.Message{Role: wireRole(m.Role), Content: m.Content}})
	}
	role := s.noteRole(r.ProfileID)
	note, err := convo.NewNote(msgs, convo.NoteOptions{Role: role, Date: s.opts.Now(), SessionID: r.SessionID})
	switch {
	case errors.Is(err, convo.ErrNothingToSave):
		return
	case err != nil:
		res.NoteError = err.Error()
		s.log.Warn("chat session note failed", "session", r.SessionID, "error", err.Error())
		return
	}
	if err := s.opts.SaveNote(ctx, role, note); err != nil {
		res.NoteError = err.Error()
		s.log.Warn("chat session note failed", "session", r.SessionID, "path", note.Path, "error", err.Error())
		return
	}
	res.Note, res.Messages = note.Path, note.Messages
}

// dueReset reports whether sessionID must be reset before a send at now,
// and why. Its last activity is what this service saw, else the newest
// stored message (a session from before a restart).
func (s *Service) dueReset(ctx context.Context, sessionID string, now time.Time) string {
	p := s.resetPolicy.Load()
	if p == nil || sessionID == "" {
		return ""
	}
	s.mu.Lock()
	info, ok := s.sessions[sessionID]
	s.mu.Unlock()
	last := info.last
	if !ok {
		past, err := s.opts.History.Session(ctx, sessionID, 1)
		if err != nil || len(past) == 0 {
			return ""
		}
		last = time.UnixMilli(past[len(past)-1].TS)
	}
	if due, why := p.Due(last, now); due {
		return why
	}
	return ""
}

// RunLifecycle closes the sessions this service saw whose reset is due
// under the policy in force (SetResetPolicy), checking every `every`
// (DefaultResetCheck when <= 0), until ctx ends or the service closes.
// Sessions answering are left for the next check.
func (s *Service) RunLifecycle(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultResetCheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.CheckResets(ctx) < 0 {
			return
		}
	}
}

// CheckResets closes every known session whose reset is due now and
// returns how many it closed; -1 once the service is closed.
func (s *Service) CheckResets(ctx context.Context) int {
	p := s.resetPolicy.Load()
	now := s.opts.Now()
	type due struct{ profile, session, why string }
	var todo []due
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return -1
	}
	if p != nil {
		for id, info := range s.sessions {
			if s.bySession[id] != nil {
				continue
			}
			if ok, why := p.Due(info.last, now); ok {
				todo = append(todo, due{info.profileID, id, why})
			}
		}
	}
	s.mu.Unlock()
	n := 0
	for _, d := range todo {
		if _, err := s.Reset(ctx, ResetRequest{ProfileID: d.profile, SessionID: d.session, Reason: d.why}); err != nil {
			s.log.Warn("chat session reset failed", "session", d.session, "reason", d.why, "error", err.Error())
			continue
		}
		n++
	}
	return n
}
