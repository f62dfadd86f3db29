package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
// as profileId. The run's agent loop runs here, as for main: each of its
// model calls is one worker run (with the tools offered and the tool
// calls answered), and the tools act as the instance's profile.

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
	// Start starts instance id (known, State RemoteNotRunning) under that
	// id; the run that follows waits in Stream until it accepts runs.
	// Errors wrap ErrNotFound (no such profile), ErrBusy (too many
	// instances running) or ErrUnavailable (the app is not running
	// instances now).
	Start(id string) error
	// Persona returns the system prompt text of profileID (its persona,
	// memory/roles/<profile>/config.md without front matter); "" when it
	// has none. An error is logged and the default persona used.
	Persona(profileID string) (string, error)
	// Offline reports whether profileID has no model at all (its workers
	// would refuse every call): its instances' runs are then answered by
	// the offline provider here, searching memory as the profile
	// (Options.SearcherFor). Asked once per run.
	Offline(profileID string) bool
	// Stream runs one answer on the instance: it sends r to the worker,
	// calls onDelta for every delta in order (never after Stream
	// returned), and returns the model's response (content and usage)
	// when the worker ends the run. An instance that is starting or
	// restarting is waited for (bounded by the runner); one that fails to
	// start ends the call with a *RemoteError. When ctx is done it asks the worker to
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

// RemoteNotRunning is RemoteInstance.State for an instance id of a known
// profile without a process (never spawned, stopped, or gone with the
// app's last restart).
const RemoteNotRunning = "not running"

// RemoteRequest is one model call of a run on an instance: ids of the
// call (the run's id, suffixed ".k" for its k-th call) and its session,
// the whole model context (system prompt first) and the tools offered.
type RemoteRequest struct {
	InstanceID string
	RunID      string
	SessionID  string
	Messages   []model.Message
	Tools      []model.Tool
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

// checkRemoteSend reports whether a send to profileID goes to an instance
// and whether that instance must be started first (it is not running).
// An instance that is starting or restarting is accepted: the run waits
// for it (RemoteRunner.Stream). One that is not running is refused with
// ErrUnavailable unless start is true (the sender may start instances,
// SendRequest.StartInstance).
func (s *Service) checkRemoteSend(profileID string, start bool) (onInstance, mustStart bool, err error) {
	inst, ok := s.remote(profileID)
	if !ok {
		return false, false, nil
	}
	if inst.Ready || inst.State != RemoteNotRunning {
		return true, false, nil
	}
	if !start {
		return true, false, fmt.Errorf("%w: instance %s is not running; only the person at the desktop starts instances (profiles.spawn, or chat.send from the desktop)",
			ErrUnavailable, profileID)
	}
	return true, true, nil
}

// instancePersona is the persona of an instance's system prompt: its
// profile's persona, or a plain default naming the profile.
func instancePersona(profileID, persona string) string {
	if persona = strings.TrimSpace(persona); persona != "" {
		return persona
	}
	return fmt.Sprintf("You are %s, an agent of Atrium: a local-first desktop app where AI agents chat with a person. "+
		"You are a helpful, honest and concise assistant.", profileID)
}

// onRemote readies st for a run on an instance and returns the model the
// run's agent loop calls: the loop, its tools (acting as the instance's
// profile, so that role's ACL applies) and the person's permission
// questions stay in this process, and each model call is a `run` on the
// instance's worker process.
func (st *runState) onRemote() model.Provider {
	s, rn := st.s, st.rn
	inst, _ := s.remote(rn.ProfileID)
	s.log.Info("chat run on instance", "run", rn.RunID, "instance", rn.ProfileID, "profile", inst.ProfileID, "state", inst.State)
	persona, err := s.opts.Remote.Persona(inst.ProfileID)
	if err != nil {
		s.log.Warn("chat persona unavailable", "run", rn.RunID, "profile", inst.ProfileID, "error", err.Error())
	}
	st.persona, st.role = instancePersona(inst.ProfileID, persona), inst.ProfileID
	if s.opts.SearcherFor != nil && s.opts.Remote.Offline(inst.ProfileID) {
		return NewOffline(OfflineOptions{Memory: s.opts.SearcherFor(inst.ProfileID)})
	}
	return &remoteModel{r: s.opts.Remote, inst: inst, rn: rn}
}

// remoteModel is model.Provider over an instance's worker: call k (from 1)
// of run R is the worker run "R" for k = 1, "R.k" after (the worker's run
// ids must be unique among its runs in progress; the calls of one run are
// sequential).
type remoteModel struct {
	r     RemoteRunner
	inst  RemoteInstance
	rn    *run
	calls int
}

func (m *remoteModel) Name() string  { return "instance" }
func (m *remoteModel) Model() string { return m.inst.ID }

func (m *remoteModel) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	m.calls++
	id := m.rn.RunID
	if m.calls > 1 {
		id = fmt.Sprintf("%s.%d", id, m.calls)
	}
	return m.r.Stream(ctx, RemoteRequest{InstanceID: m.inst.ID, RunID: id, SessionID: m.rn.SessionID,
		Messages: req.Messages, Tools: req.Tools}, onDelta)
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
