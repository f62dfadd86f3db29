package chat

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/history"
)

// Heartbeat turns (issue 24 item 7) follow OpenClaw's heartbeat convention
// (docs.openclaw.ai, gateway/heartbeat): main is sent HeartbeatPrompt on a
// schedule; an answer that is HeartbeatOK, or starts or ends with it and
// leaves at most HeartbeatAckMaxChars other characters, says that nothing
// needs attention and is dropped; any other answer reaches the person's
// chat (the token stripped from its ends).
const (
	// HeartbeatOK is the acknowledgement token.
	HeartbeatOK = "HEARTBEAT_OK"
	// HeartbeatAckMaxChars is how many characters besides the token an
	// acknowledgement may carry (OpenClaw's ackMaxChars default).
	HeartbeatAckMaxChars = 300
	// HeartbeatSession is the session heartbeat turns run in: their own,
	// so that a heartbeat never waits for, or mixes into, the person's
	// conversation (OpenClaw's isolatedSession).
	HeartbeatSession = "heartbeat"
	// DefaultHeartbeatPrompt is OpenClaw's default heartbeat prompt, sent
	// as the turn's user message.
	DefaultHeartbeatPrompt = "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. " +
		"Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK."
)

// StripHeartbeatOK returns answer without HeartbeatOK at its start or end
// (and the spaces and punctuation around it there), and whether it was
// there. A token in the middle of the text is left alone.
func StripHeartbeatOK(answer string) (string, bool) {
	s := strings.TrimSpace(answer)
	found := false
	trim := func(s string) string { return strings.Trim(s, " \t\r\n.!*_`") }
	for {
		switch {
		case strings.HasPrefix(trim(s), HeartbeatOK):
			s, found = strings.TrimSpace(strings.TrimPrefix(trim(s), HeartbeatOK)), true
			continue
		case strings.HasSuffix(trim(s), HeartbeatOK):
			s, found = strings.TrimSpace(strings.TrimSuffix(trim(s), HeartbeatOK)), true
			continue
		}
		break
	}
	if !found {
		return answer, false
	}
	return s, true
}

// IsHeartbeatAck reports whether a heartbeat answer is an acknowledgement
// to drop: HeartbeatOK at its start or end, at most HeartbeatAckMaxChars
// other characters.
func IsHeartbeatAck(answer string) bool {
	rest, ok := StripHeartbeatOK(answer)
	return ok && utf8.RuneCountInString(rest) <= HeartbeatAckMaxChars
}

// HeartbeatResult is how a heartbeat turn ended: RunID and MessageID as
// chat.send's; Outcome "final", "cancelled", "interrupted" or "error";
// Silent when the answer was an acknowledgement (not stored, not shown);
// Answer the text the person was shown (empty when Silent or failed).
type HeartbeatResult struct {
	RunID     string `json:"runId"`
	MessageID string `json:"messageId"`
	Outcome   string `json:"outcome"`
	Silent    bool   `json:"silent"`
	Answer    string `json:"answer,omitempty"`
}

// Heartbeat runs one heartbeat turn of main in HeartbeatSession with
// prompt (DefaultHeartbeatPrompt when empty) and waits until it ended; ctx
// bounds the wait (the run itself is bounded by Options.RunTimeout and
// goes on when ctx ends first). Every event of the run carries
// heartbeat:true. The prompt is never stored; an acknowledgement ends with
// chat.final silent:true and nothing stored; another answer is stored as
// main's assistant message, stripped of the token at its ends; a failed or
// cancelled heartbeat stores nothing. Errors: those of Send (ErrBusy while
// the previous heartbeat still runs), or ctx's.
func (s *Service) Heartbeat(ctx context.Context, prompt string) (HeartbeatResult, error) {
	if strings.TrimSpace(prompt) == "" {
		prompt = DefaultHeartbeatPrompt
	}
	res, rn, err := s.send(ctx, SendRequest{ProfileID: ProfileMain, SessionID: HeartbeatSession, Message: prompt, heartbeat: true})
	if err != nil {
		return HeartbeatResult{}, fmt.Errorf("heartbeat: %w", err)
	}
	select {
	case <-rn.done:
	case <-ctx.Done():
		return HeartbeatResult{RunID: res.RunID, MessageID: res.MessageID}, fmt.Errorf("heartbeat: wait for run %s: %w", res.RunID, context.Cause(ctx))
	}
	return HeartbeatResult{RunID: res.RunID, MessageID: res.MessageID, Outcome: rn.outcome, Silent: rn.silent, Answer: rn.answer}, nil
}

// finishHeartbeat is finish for a heartbeat turn (see Service.Heartbeat).
func (st *runState) finishHeartbeat(err error, msg history.Message, store func(history.Message) bool, release func()) string {
	s, rn := st.s, st.rn
	if err == nil {
		if IsHeartbeatAck(msg.Content) {
			rn.silent = true
			release()
			s.emit(EventFinal, FinalEvent{RunRef: rn.RunRef, Message: ForClient(msg), Silent: true})
			return "final"
		}
		msg.Content, _ = StripHeartbeatOK(msg.Content)
		ok := store(msg)
		release()
		if !ok {
			s.emit(EventError, ErrorEvent{RunRef: rn.RunRef, Error: RunError{Code: CodeInternal,
				Message: "the answer could not be saved to history"}})
			return "error"
		}
		rn.answer = msg.Content
		s.emit(EventFinal, FinalEvent{RunRef: rn.RunRef, Message: ForClient(msg)})
		return "final"
	}
	release()
	cause := context.Cause(rn.ctx)
	if rn.ctx.Err() != nil && (cause == errCancelled || cause == errClosing) {
		ev := CancelledEvent{RunRef: rn.RunRef, Reason: ReasonCancelled}
		if cause == errClosing {
			ev.Reason = ReasonInterrupted
		}
		s.emit(EventCancelled, ev)
		return ev.Reason
	}
	code, text := classify(err, cause, s.opts.RunTimeout)
	s.emit(EventError, ErrorEvent{RunRef: rn.RunRef, Error: RunError{Code: code, Message: text, Retryable: runRetryable(err)}})
	return "error"
}
