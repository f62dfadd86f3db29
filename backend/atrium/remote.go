package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/worker"
)

// cancelWait bounds how long a cancelled run waits for its worker's
// cancelled event (with the partial answer's usage) before it ends anyway.
const cancelWait = 5 * time.Second

// maxPersonaBytes caps the persona read from a role's config.md.
const maxPersonaBytes = 64 << 10

// startWait bounds how long a run waits for its instance to become ready
// (started on demand, or restarting after a crash) before it fails.
const startWait = 2 * worker.DefaultReadyTimeout

// poolRunner is chat.RemoteRunner over the worker pool (SPEC §3 "Gateway ↔
// agent worker"): it hands a run to the instance's worker as a `run` line
// and routes the worker's events for that run (from the pool's OnEvent)
// back to the run. It is the wiring between two packages that do not know
// each other; pool is set once, before the app runs.
type poolRunner struct {
	pool      *worker.Pool
	workspace string
	log       *slog.Logger
	// offline reports whether a profile has no model (its instances'
	// runs are answered by the chat's offline provider). Nil: never.
	offline func(profileID string) bool

	mu   sync.Mutex
	runs map[string]*remoteRun // by run id
}

// remoteRun is one run waiting for its worker's events.
type remoteRun struct {
	instance string
	onDelta  func(model.Delta)

	mu     sync.Mutex
	closed bool // Stream returned: no more deltas
	done   chan remoteResult
}

type remoteResult struct {
	resp model.Response
	err  error
}

func newPoolRunner(workspace string, log *slog.Logger) *poolRunner {
	return &poolRunner{workspace: workspace, log: log, runs: map[string]*remoteRun{}}
}

// Instance implements chat.RemoteRunner: a running instance as the pool
// lists it, or, for an id "<profile>-<k>" of a profile of the light index
// (rescanned once when the profile is not in it) without a process, a
// known instance that is not running.
func (r *poolRunner) Instance(id string) (chat.RemoteInstance, bool) {
	for _, st := range r.pool.List() {
		if st.InstanceID == id {
			return chat.RemoteInstance{ID: id, ProfileID: st.ProfileID, State: string(st.State),
				Ready: st.State == worker.StateReady || st.State == worker.StateBusy}, true
		}
	}
	profile, _, ok := worker.SplitInstanceID(id)
	if !ok {
		return chat.RemoteInstance{}, false
	}
	for try := 0; try < 2; try++ {
		for _, p := range r.pool.Profiles() {
			if p.ID == profile {
				return chat.RemoteInstance{ID: id, ProfileID: p.ID, State: chat.RemoteNotRunning}, true
			}
		}
		if try == 0 && r.pool.Rescan() != nil { // a role created since start-up (stat only)
			break
		}
	}
	return chat.RemoteInstance{}, false
}

// Start implements chat.RemoteRunner: the pool starts the instance under
// its id (worker.Pool.Start); the pool's errors become chat's.
func (r *poolRunner) Start(id string) error {
	_, err := r.pool.Start(id)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, worker.ErrUnknownProfile), errors.Is(err, worker.ErrUnknownInstance):
		return fmt.Errorf("%w: %v", chat.ErrNotFound, err)
	case errors.Is(err, worker.ErrTooManyInstance):
		return fmt.Errorf("%w: %v", chat.ErrBusy, err)
	}
	return fmt.Errorf("%w: %v", chat.ErrUnavailable, err)
}

// ready waits (at most startWait, or ctx) until instance id accepts runs;
// a start that fails is a *chat.RemoteError naming the reason.
func (r *poolRunner) ready(ctx context.Context, id string) error {
	wctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	_, err := r.pool.WaitReady(wctx, id)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return &chat.RemoteError{Kind: "unavailable", Retryable: true,
			Message: fmt.Sprintf("instance %s did not become ready within %s", id, startWait)}
	case errors.Is(err, worker.ErrUnknownInstance):
		return &chat.RemoteError{Kind: "stopped", Message: fmt.Sprintf("instance %s is not running (it was stopped)", id)}
	}
	return &chat.RemoteError{Kind: "unavailable", Message: "instance did not start: " + err.Error(), Retryable: true}
}

// Offline implements chat.RemoteRunner.
func (r *poolRunner) Offline(profileID string) bool {
	return r.offline != nil && r.offline(profileID)
}

// Persona implements chat.RemoteRunner: the body of
// memory/roles/<profile>/config.md without its front matter, followed by
// the role's MEMORY.md (its curated long-term memory, where the cold start
// saves the starting context: SPEC §4.1, §5.2) under a "Your memory"
// heading when it has text, so every run of the role, its first turns
// included, carries them. At most maxPersonaBytes are read of each; a
// missing MEMORY.md is no error, a missing config.md is.
func (r *poolRunner) Persona(profileID string) (string, error) {
	dir := filepath.Join(r.workspace, filepath.FromSlash(worker.RolesDir), profileID)
	persona, err := readBody(filepath.Join(dir, "config.md"))
	if err != nil {
		return "", fmt.Errorf("persona of %s: %w", profileID, err)
	}
	mem, err := readBody(filepath.Join(dir, memory.RoleMemoryFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		r.log.Warn("role memory unreadable", "profile", profileID, "error", err.Error())
	case mem != "":
		persona += "\n\n## Your memory (" + worker.RolesDir + "/" + profileID + "/" + memory.RoleMemoryFile + ")\n\n" + mem
	}
	return persona, nil
}

// readBody reads at most maxPersonaBytes of a Markdown file and returns
// its body without front matter, trimmed.
func readBody(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, maxPersonaBytes)
	n, err := io.ReadFull(f, buf)
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return "", err
	}
	_, body, _, _, err := memory.ParseFrontMatter(string(buf[:n]))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(body), nil
}

// Stream implements chat.RemoteRunner.
func (r *poolRunner) Stream(ctx context.Context, req chat.RemoteRequest, onDelta func(model.Delta)) (model.Response, error) {
	rr := &remoteRun{instance: req.InstanceID, onDelta: onDelta, done: make(chan remoteResult, 1)}
	r.mu.Lock()
	if r.runs[req.RunID] != nil {
		r.mu.Unlock()
		return model.Response{}, &chat.RemoteError{Kind: "request", Message: "run " + req.RunID + " is already in progress"}
	}
	r.runs[req.RunID] = rr
	r.mu.Unlock()
	defer func() {
		rr.mu.Lock()
		rr.closed = true
		rr.mu.Unlock()
		r.mu.Lock()
		delete(r.runs, req.RunID)
		r.mu.Unlock()
	}()

	run := worker.RunRequest{Messages: make([]worker.RunMessage, len(req.Messages)), Tools: req.Tools}
	for i, m := range req.Messages {
		run.Messages[i] = worker.RunMessage{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name}
	}
	m, err := worker.NewMsg(worker.TypeRun, req.RunID, run)
	if err != nil {
		return model.Response{}, err
	}
	m.SessionID = req.SessionID
	if err := r.ready(ctx, req.InstanceID); err != nil {
		return model.Response{}, err
	}
	if err := r.pool.Send(req.InstanceID, m); err != nil {
		// Not ready (crashed meanwhile, restarting), gone, or the pipe broke:
		// the supervisor restarts it, so a later send may work.
		return model.Response{}, &chat.RemoteError{Kind: "unavailable", Message: err.Error(),
			Retryable: !errors.Is(err, worker.ErrBadRequest)}
	}
	select {
	case res := <-rr.done:
		if errors.Is(res.err, context.Canceled) {
			// The worker cancelled a run nobody cancelled here: it is
			// stopping (profiles.stop, the app shutting down).
			res.err = &chat.RemoteError{Kind: "stopped", Message: "the instance stopped during the run"}
		}
		return res.resp, res.err
	case <-ctx.Done():
	}
	c, _ := worker.NewMsg(worker.TypeCancel, req.RunID, nil)
	c.SessionID = req.SessionID
	if err := r.pool.Send(req.InstanceID, c); err != nil {
		r.log.Warn("instance cancel not sent", "instance", req.InstanceID, "run", req.RunID, "err", err)
	}
	t := time.NewTimer(cancelWait)
	defer t.Stop()
	select {
	case res := <-rr.done:
		if res.err == nil {
			return res.resp, nil // it had finished before the cancel arrived
		}
		return res.resp, ctx.Err()
	case <-t.C:
		r.log.Warn("instance did not confirm cancel", "instance", req.InstanceID, "run", req.RunID, "wait", cancelWait)
		return model.Response{}, ctx.Err()
	}
}

// dispatch is the pool's OnEvent: it hands instance's event m to the run
// it belongs to (events of unknown runs are dropped). It is called from
// the instance's reading goroutine, in order; deltas are passed on at once
// (the chat's Emit does not block).
func (r *poolRunner) dispatch(instance string, m worker.Msg) {
	r.mu.Lock()
	rr := r.runs[m.ID]
	r.mu.Unlock()
	if rr == nil || rr.instance != instance {
		r.log.Debug("instance event without a run", "instance", instance, "type", m.Type, "id", m.ID)
		return
	}
	switch m.Type {
	case worker.TypeChunk:
		var c worker.Chunk
		if err := json.Unmarshal(m.Payload, &c); err != nil {
			r.log.Warn("instance chunk not decodable", "instance", instance, "run", m.ID, "err", err)
			return
		}
		d := model.Delta{Content: c.Delta}
		if c.Reasoning {
			d = model.Delta{Reasoning: c.Delta}
		}
		rr.mu.Lock()
		if !rr.closed {
			rr.onDelta(d)
		}
		rr.mu.Unlock()
	case worker.TypeFinal, worker.TypeCancelled:
		var f worker.Final
		_ = json.Unmarshal(m.Payload, &f) // a bad payload only loses the usage: the text came as chunks
		res := remoteResult{resp: model.Response{Content: f.Content, ToolCalls: f.ToolCalls, FinishReason: f.FinishReason,
			Usage: model.Usage{PromptTokens: f.PromptTokens, CompletionTokens: f.CompletionTokens}}}
		if m.Type == worker.TypeCancelled {
			res.err = context.Canceled
		}
		rr.end(res)
	case worker.TypeError:
		var e worker.ErrorInfo
		if err := json.Unmarshal(m.Payload, &e); err != nil || e.Kind == "" {
			e = worker.ErrorInfo{Kind: "protocol", Message: "the worker's error event is malformed"}
		}
		rr.end(remoteResult{err: &chat.RemoteError{Kind: e.Kind, Message: e.Message, Retryable: e.Retryable}})
	}
}

// end delivers a run's result once.
func (rr *remoteRun) end(res remoteResult) {
	select {
	case rr.done <- res:
	default:
	}
}
