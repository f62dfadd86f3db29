package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/model"
)

// This file runs chat runs on profile instances (SPEC §3 "Gateway ↔ agent
// worker", SPEC §6 "Profile = template + instances"): a chat.send whose
// profileId names a running instance ("<profile>-<k>") is answered by that
// instance's worker process instead of this process. The service builds
// the context exactly as for an in-process run (the profile's persona as
// the system prompt, the history merge of Service.context, the message)
// and hands it to Options.Remote; the worker's deltas become the run's
// chat.reasoning and chat.chunk events, and its end the run's usual
// terminal event, persisted in both history domains under the instance id
// as profileId. A worker run is one model call: no tools.

// ErrUnavailable: the instance a send names exists but does not accept
// runs now (starting, restarting after a crash, or stopped). Retryable.
var ErrUnavailable = errors.New("unavailable")

// RemoteRunner is the hook through which runs reach profile instances
// (Options.Remote). The wiring package implements it over worker.Pool.
type RemoteRunner interface {
	// Instance describes instance id. ok is false when id names no
	// instance at all (neither running nor "<profile>-<k>" of a known
	// profile); a known but not running instance has Ready false.
	Instance(id string) (inst RemoteInstance, ok bool)
	// Persona returns the system prompt text of profileID (its persona,
	// memory/roles/<profile>/config.md without front matter); "" when it
	// has none. An error is logged and the default persona used.
	Persona(profileID string) (string, error)
	// Stream runs one answer on the instance: it sends r to the worker,
	// calls onDelta for every delta in order (never after Stream
	// returned), and returns the model's response (content and usage)
	// when the worker ends the run. When ctx is done it asks the worker to
	// cancel, waits a little for the partial answer, and returns ctx's
	// error. A failure reported by the worker (or by the supervisor for a
	// worker that died) is a *RemoteError.
	Stream(ctx context.Context, r RemoteRequest, onDelta func(model.Delta)) (model.Response, error)
}

// RemoteInstance is what RemoteRunner.Instance reports: the instance id,
// its profile (the template), its state (worker.State names: starting,
// ready, busy, crashed, hung, restarting, stopped; "not running" for a
// known id without a process) and whether it accepts runs.
type RemoteInstance struct {
	ID        string
	ProfileID string
	State     string
	Ready     bool
}

// RemoteRequest is one run for an instance: ids of the run and its
// session, and the whole model context (system prompt first, the message
// last).
type RemoteRequest struct {
	InstanceID string
	RunID      string
	SessionID  string
	Messages   []model.Message
}

// RemoteError is a run's failure as the worker side reported it: Kind is
// the worker protocol's error kind ("model", "request", "protocol",
// "crashed", "hung", "stopped", or "unavailable" when the run could not be
// handed over), Retryable whether the same message may succeed later
// (true for a worker that crashed or hung: it is restarted). It matches
// model.ErrUnavailable, so the run ends with chat.error code UNAVAILABLE.
type RemoteError struct {
	Kind      string
	Message   string
	Retryable bool
}

func (e *RemoteError) Error() string { return "instance " + e.Kind + ": " + e.Message }

// Is makes errors.Is(err, model.ErrUnavailable) true.
func (e *RemoteError) Is(target error) bool { return target == model.ErrUnavailable }

// remote returns the instance profileID names, or ok false when it names
// none (or no RemoteRunner is configured).
func (s *Service) remote(profileID string) (RemoteInstance, bool) {
	if s.opts.Remote == nil || profileID == ProfileMain {
		return RemoteInstance{}, false
	}
	return s.opts.Remote.Instance(profileID)
}

// checkProfile accepts "main" and, with Options.Remote, the ids of
// instances (running or not; Send checks readiness itself).
func (s *Service) checkProfile(id string) error {
	if _, ok := s.remote(id); ok {
		return nil
	}
	return checkProfile(id)
}

// checkRemoteSend refuses a send to an instance that does not accept runs
// now (ErrUnavailable) and returns whether the send goes to an instance.
func (s *Service) checkRemoteSend(profileID string) (bool, error) {
	inst, ok := s.remote(profileID)
	if !ok {
		return false, nil
	}
	if !inst.Ready {
		return true, fmt.Errorf("%w: instance %s is %s, not ready (wait for profiles.instance state ready, or profiles.spawn it)",
			ErrUnavailable, profileID, inst.State)
	}
	return true, nil
}

// remotePrompt is an instance's system prompt: its profile's persona (or a
// plain default), the language rule and the date.
func remotePrompt(profileID, persona string, now time.Time) string {
	var b strings.Builder
	if persona = strings.TrimSpace(persona); persona != "" {
		b.WriteString(persona)
	} else {
		fmt.Fprintf(&b, "You are %s, an agent of Atrium: a local-first desktop app where AI agents chat with a person. "+
			"You are a helpful, honest and concise assistant.", profileID)
	}
	b.WriteString("\n\nAnswer in the language of the person's message. Use Markdown when it helps.\n")
	fmt.Fprintf(&b, "Current date: %s.", now.Format("Monday 2006-01-02"))
	return b.String()
}

// answerRemote is answer for a run on an instance: the context as for an
// in-process run, one streamed call on the instance's worker.
func (st *runState) answerRemote() error {
	s, rn := st.s, st.rn
	inst, _ := s.remote(rn.ProfileID)
	s.log.Info("chat run on instance", "run", rn.RunID, "instance", rn.ProfileID, "profile", inst.ProfileID, "state", inst.State)
	persona, err := s.opts.Remote.Persona(inst.ProfileID)
	if err != nil {
		s.log.Warn("chat persona unavailable", "run", rn.RunID, "profile", inst.ProfileID, "error", err.Error())
	}
	msgs := []model.Message{{Role: model.RoleSystem, Content: remotePrompt(inst.ProfileID, persona, s.opts.Now())}}
	past, sum := s.context(rn.ctx, rn)
	if sum.Text != "" {
		msgs = append(msgs, summaryMessage(sum.Text))
	}
	msgs = append(msgs, textTurns(past)...)
	msgs = append(msgs, model.Message{Role: model.RoleUser, Content: rn.userText})
	resp, err := s.opts.Remote.Stream(rn.ctx, RemoteRequest{InstanceID: rn.ProfileID, RunID: rn.RunID, SessionID: rn.SessionID, Messages: msgs}, st.onDelta)
	st.addUsage(resp.Usage)
	if err != nil {
		return err
	}
	if strings.TrimSpace(rn.out.String()) == "" {
		return errEmptyAnswer
	}
	return nil
}

// textTurns keeps the user and assistant turns with text: a worker run
// carries {role, content} messages only (docs/PROTOCOL.md, "Worker line
// protocol"), so tool calls and tool results of earlier in-process answers
// in the same session are left out rather than sent broken.
func textTurns(msgs []model.Message) []model.Message {
	out := make([]model.Message, 0, len(msgs))
	for _, m := range msgs {
		if (m.Role == model.RoleUser || m.Role == model.RoleAssistant) && strings.TrimSpace(m.Content) != "" {
			out = append(out, model.Message{Role: m.Role, Content: m.Content})
		}
	}
	return out
}

// runRetryable reports whether a run that failed with err may succeed when
// the same message is sent again (chat.error's retryable): the model
// server was unavailable or timed out, or the instance's worker failed and
// is being restarted.
func runRetryable(err error) bool {
	var re *RemoteError
	if errors.As(err, &re) {
		return re.Retryable
	}
	return errors.Is(err, model.ErrUnavailable) || errors.Is(err, model.ErrTimeout)
}
