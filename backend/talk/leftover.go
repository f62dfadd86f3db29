package talk

import (
	"errors"
	"time"
)

// What a talk leaves when it ends (issue 27: history keeps what was said).
// A page reloaded, a phone locked (its connection gone), End talk pressed
// or a bound reached must not lose what the person had finished saying:
// the utterances of continuous mode whose end (E) had come but that were
// still waiting for or in transcription, and the transcripts waiting for
// the session's answer (interrupt "queue"). They are transcribed and sent
// to the chat as the person's messages, in the order they were said, as
// if the talk were still open — except when it ended because the device
// may no longer chat there (ReasonForbidden) or the gateway is stopping
// (ReasonShutdown). An utterance still being said (no E) is not finished
// and goes nowhere; a push-to-talk transcript was for the person to edit,
// and goes nowhere either.

// DefaultLeftoverTimeout is Options.LeftoverTimeout's default: what was
// said waits at most this long for its session to be free (10 min).
const DefaultLeftoverTimeout = 10 * time.Minute

// leftoverRetry is how often a leftover asks again whether its session is
// free when no run's end says so (a heartbeat's run is not forwarded).
const leftoverRetry = 5 * time.Second

// keepsLeftovers reports whether a talk that ended for reason still sends
// what the person said.
func keepsLeftovers(reason string) bool {
	return reason != ReasonForbidden && reason != ReasonShutdown
}

// leave keeps m for the chat: the talk ended while it was transcribed.
func (t *talk) leave(m Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keepLeft {
		t.left = append(t.left, m)
	}
}

// drain runs in the transcriber once the talk ended: the utterances still
// waiting are transcribed (those to send), then what was said goes to the
// chat in order (Service.deliverLeftovers).
func (t *talk) drain() {
	defer t.sttCancel()
	for {
		t.mu.Lock()
		keep := t.keepLeft
		t.mu.Unlock()
		if !keep {
			return
		}
		select {
		case j := <-t.jobs:
			if j.send {
				t.transcribe(j)
			}
			continue
		default:
		}
		break
	}
	t.mu.Lock()
	left := t.left
	t.left = nil
	t.mu.Unlock()
	if len(left) > 0 {
		t.s.deliverLeftovers(t.id, left)
	}
}

// deliverLeftovers sends msgs (one session's, in order) as the person's
// messages: a busy session is waited for (its run's end, or every
// leftoverRetry) for at most Options.LeftoverTimeout, and Close stops it;
// what is not sent then is logged as dropped.
func (s *Service) deliverLeftovers(talkID string, msgs []Message) {
	deadline := time.NewTimer(s.o.LeftoverTimeout)
	defer deadline.Stop()
	for i, m := range msgs {
		for {
			free := s.sessionFree(m.ProfileID, m.SessionID) // before Send: a run ending meanwhile is not missed
			sent, err := s.o.Chat.Send(s.ctx, m)
			if err == nil {
				s.o.Logger.Info("talk leftover sent", "talk", talkID, "run", sent.RunID, "profile", m.ProfileID)
				break
			}
			if !errors.Is(err, ErrBusy) {
				s.o.Logger.Warn("talk leftover not sent", "talk", talkID, "profile", m.ProfileID, "err", err)
				break
			}
			retry := time.NewTimer(leftoverRetry)
			select {
			case <-free:
			case <-retry.C:
			case <-deadline.C:
				retry.Stop()
				s.o.Logger.Warn("talk leftovers dropped", "talk", talkID, "profile", m.ProfileID, "count", len(msgs)-i, "waited", s.o.LeftoverTimeout)
				return
			case <-s.ctx.Done():
				retry.Stop()
				s.o.Logger.Warn("talk leftovers dropped", "talk", talkID, "profile", m.ProfileID, "count", len(msgs)-i, "reason", ReasonShutdown)
				return
			}
			retry.Stop()
		}
	}
}

// sessionFree is closed when a run of the session ends.
func (s *Service) sessionFree(profileID, sessionID string) <-chan struct{} {
	k := profileID + "/" + sessionID
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.free[k]
	if ch == nil {
		ch = make(chan struct{})
		s.free[k] = ch
	}
	return ch
}

// sessionFreed wakes the leftovers waiting for the session.
func (s *Service) sessionFreed(profileID, sessionID string) {
	k := profileID + "/" + sessionID
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch := s.free[k]; ch != nil {
		close(ch)
		delete(s.free, k)
	}
}
