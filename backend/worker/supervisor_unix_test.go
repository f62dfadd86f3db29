//go:build unix

package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recorder collects one instance's statuses and events.
type recorder struct {
	mu       sync.Mutex
	statuses []Status
	events   []Msg
}

func (r *recorder) status(s Status) { r.mu.Lock(); r.statuses = append(r.statuses, s); r.mu.Unlock() }
func (r *recorder) event(m Msg)     { r.mu.Lock(); r.events = append(r.events, m); r.mu.Unlock() }

// find returns the first recorded event of a run with that type.
func (r *recorder) find(id, typ string) (Msg, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.events {
		if m.ID == id && m.Type == typ {
			return m, true
		}
	}
	return Msg{}, false
}

func (r *recorder) chunks(id string) (text string, seqs []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, m := range r.events {
		if m.ID == id && m.Type == TypeChunk {
			var c Chunk
			_ = json.Unmarshal(m.Payload, &c)
			b.WriteString(c.Delta)
			seqs = append(seqs, c.Seq)
		}
	}
	return b.String(), seqs
}

func (r *recorder) sawState(st State, reasonPart string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.statuses {
		if s.State == st && strings.Contains(s.Reason, reasonPart) {
			return true
		}
	}
	return false
}

func (r *recorder) states() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b []string
	for _, s := range r.statuses {
		b = append(b, fmt.Sprintf("%s(%s)", s.State, s.Reason))
	}
	return strings.Join(b, " → ")
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// instance is a running supervisor in a test.
type instance struct {
	s    *Supervisor
	rec  *recorder
	stop context.CancelFunc
	done chan struct{} // closed when Run returned
	err  error         // Run's result, once done
}

func startInstance(t *testing.T, id, mode, modelURL string, tune func(*SupervisorOptions)) *instance {
	t.Helper()
	rec := &recorder{}
	cfg, _ := json.Marshal(map[string]string{"provider": "openai", "baseUrl": modelURL, "model": "scripted"})
	o := SupervisorOptions{
		ProfileID: "p", InstanceID: id, Executable: os.Args[0],
		Env:               []string{envHelper + "=" + mode, EnvModel + "=" + string(cfg)},
		HeartbeatInterval: 100 * time.Millisecond, HangTimeout: time.Second, ReadyTimeout: 10 * time.Second,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, StopTimeout: 2 * time.Second,
		OnStatus: rec.status, OnEvent: rec.event,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if tune != nil {
		tune(&o)
	}
	s, err := NewSupervisor(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{s: s, rec: rec, stop: cancel, done: make(chan struct{})}
	go func() { in.err = s.Run(ctx); close(in.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-in.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: Run did not return after cancel", id)
		}
	})
	waitFor(t, 15*time.Second, id+" ready", func() bool { return s.Status().State == StateReady })
	return in
}

func (in *instance) run(t *testing.T, id, prompt string) {
	t.Helper()
	m, err := NewMsg(TypeRun, id, RunRequest{Messages: []RunMessage{{Role: "user", Content: prompt}}})
	if err != nil {
		t.Fatal(err)
	}
	m.SessionID = "s-" + id
	if err := in.s.Send(m); err != nil {
		t.Fatalf("send %s: %v", id, err)
	}
}

func finalText(t *testing.T, m Msg) string {
	t.Helper()
	var f Final
	if err := json.Unmarshal(m.Payload, &f); err != nil {
		t.Fatal(err)
	}
	return f.Content
}

func errorInfo(t *testing.T, m Msg) ErrorInfo {
	t.Helper()
	var e ErrorInfo
	if err := json.Unmarshal(m.Payload, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestCrashedWorkerIsRestartedAndTheOtherKeepsStreaming(t *testing.T) {
	srv := scriptedModel(t)
	a := startInstance(t, "p-1", "worker", srv.URL, nil)
	b := startInstance(t, "p-2", "worker", srv.URL, nil)

	a.run(t, "ra", "slow 400")
	b.run(t, "rb", "slow 60")
	waitFor(t, 10*time.Second, "a streaming", func() bool { txt, _ := a.rec.chunks("ra"); return len(txt) >= 5 })
	if st := a.s.Status(); st.State != StateBusy {
		t.Fatalf("a is %s while streaming, want busy", st.State)
	}
	pid := a.s.Status().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	waitFor(t, 10*time.Second, "the killed run's error", func() bool { _, ok := a.rec.find("ra", TypeError); return ok })
	if e := errorInfo(t, mustFind(t, a.rec, "ra", TypeError)); e.Kind != "crashed" || !e.Retryable {
		t.Fatalf("killed run error %+v", e)
	}
	waitFor(t, 10*time.Second, "a restarted", func() bool {
		st := a.s.Status()
		return st.State == StateReady && st.Restarts == 1 && st.PID != pid
	})
	if !a.rec.sawState(StateCrashed, "signal: killed") || !a.rec.sawState(StateRestarting, "restart in") {
		t.Fatalf("a's statuses: %s", a.rec.states())
	}

	// b never noticed: its stream is whole and in order.
	waitFor(t, 10*time.Second, "b's final", func() bool { _, ok := b.rec.find("rb", TypeFinal); return ok })
	txt, seqs := b.rec.chunks("rb")
	if len(txt) != 60 || finalText(t, mustFind(t, b.rec, "rb", TypeFinal)) != txt {
		t.Fatalf("b streamed %d chars", len(txt))
	}
	for i, s := range seqs {
		if s != i+1 {
			t.Fatalf("b's chunk %d has seq %d", i, s)
		}
	}
	if st := b.s.Status(); st.Restarts != 0 || st.State != StateReady {
		t.Fatalf("b status %+v", st)
	}

	// A run id must be unique among the runs in progress.
	b.run(t, "rb2", "slow 50")
	if err := b.s.Send(Msg{Type: TypeRun, ID: "rb2", Payload: json.RawMessage(`{"messages":[{"role":"user","content":"x"}]}`)}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("second run with a running id: %v", err)
	}
	if err := b.s.Send(Msg{Type: TypeRun}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("run without id: %v", err)
	}

	// The restarted instance answers again.
	a.run(t, "ra2", "hello again")
	waitFor(t, 10*time.Second, "a's new run", func() bool { _, ok := a.rec.find("ra2", TypeFinal); return ok })
	if got := finalText(t, mustFind(t, a.rec, "ra2", TypeFinal)); got != "hello again" {
		t.Fatalf("restarted a answered %q", got)
	}
}

func mustFind(t *testing.T, r *recorder, id, typ string) Msg {
	t.Helper()
	m, ok := r.find(id, typ)
	if !ok {
		t.Fatalf("no %s event for %s", typ, id)
	}
	return m
}

func TestHungWorkerIsKilledAndRestarted(t *testing.T) {
	srv := scriptedModel(t)
	a := startInstance(t, "p-1", "worker", srv.URL, nil)
	a.run(t, "r1", "slow 300")
	waitFor(t, 10*time.Second, "streaming", func() bool { txt, _ := a.rec.chunks("r1"); return len(txt) >= 3 })
	pid := a.s.Status().PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil { // a real hang: no more heartbeats
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "hung detected", func() bool { return a.rec.sawState(StateHung, "no heartbeat") })
	waitFor(t, 10*time.Second, "restarted", func() bool {
		st := a.s.Status()
		return st.State == StateReady && st.Restarts == 1 && st.PID != pid
	})
	if e := errorInfo(t, mustFind(t, a.rec, "r1", TypeError)); e.Kind != "hung" {
		t.Fatalf("hung run error %+v", e)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("hung process %d still exists: %v", pid, err)
	}
}

func TestTenMegabyteFinalIsDeliveredAndOverLimitIsRejected(t *testing.T) {
	srv := scriptedModel(t)
	const size = 10 << 20
	// Not a hang test: a loaded machine may take seconds to move 10 MB
	// through JSON and a pipe, so the hang timeout and the waits are wide.
	patient := func(o *SupervisorOptions) { o.HangTimeout = time.Minute }
	a := startInstance(t, "p-1", "worker", srv.URL, patient)
	a.run(t, "r1", fmt.Sprintf("big %d", size))
	waitFor(t, 3*time.Minute, "10 MB final", func() bool { _, ok := a.rec.find("r1", TypeFinal); return ok })
	if got := finalText(t, mustFind(t, a.rec, "r1", TypeFinal)); len(got) != size {
		t.Fatalf("final has %d bytes, want %d", len(got), size)
	}

	b := startInstance(t, "p-2", "worker", srv.URL, func(o *SupervisorOptions) { patient(o); o.MaxLineBytes = 4 << 20 })
	b.run(t, "r2", fmt.Sprintf("big %d", size))
	waitFor(t, 3*time.Minute, "the rejected final's error", func() bool { _, ok := b.rec.find("r2", TypeError); return ok })
	if e := errorInfo(t, mustFind(t, b.rec, "r2", TypeError)); e.Kind != "protocol" || !strings.Contains(e.Message, "line too long") {
		t.Fatalf("error for the over-long final: %+v", e)
	}
	if !b.rec.sawState(StateBusy, "protocol violation: worker protocol: line too long") {
		t.Fatalf("no violation status: %s", b.rec.states())
	}
	if txt, _ := b.rec.chunks("r2"); len(txt) != size {
		t.Fatalf("chunks before the final carried %d bytes", len(txt))
	}
	// The reader goes on: the same process answers the next run.
	waitFor(t, time.Minute, "ready again", func() bool { return b.s.Status().State == StateReady })
	b.run(t, "r3", "still here")
	waitFor(t, time.Minute, "next run", func() bool { _, ok := b.rec.find("r3", TypeFinal); return ok })
	if st := b.s.Status(); st.Restarts != 0 || st.Violations != 1 {
		t.Fatalf("status after the violation %+v", st)
	}
}

func TestMalformedLineIsReportedNotACrash(t *testing.T) {
	srv := scriptedModel(t)
	var logs syncBuf
	a := startInstance(t, "p-1", "garbage", srv.URL, func(o *SupervisorOptions) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	// The worker's stderr is in the parent's log, with the instance.
	waitFor(t, 5*time.Second, "stderr in the log", func() bool {
		return strings.Contains(logs.String(), `msg="worker stderr" instance=p-1 profile=p line="helper: writing a line that is not JSON"`)
	})
	if !a.rec.sawState(StateStarting, "protocol violation: worker protocol: malformed line") {
		t.Fatalf("statuses: %s", a.rec.states())
	}
	a.run(t, "r1", "fine")
	waitFor(t, 10*time.Second, "final", func() bool { _, ok := a.rec.find("r1", TypeFinal); return ok })
	if st := a.s.Status(); st.Restarts != 0 || st.Violations != 1 {
		t.Fatalf("status %+v", st)
	}
}

func TestGracefulStop(t *testing.T) {
	srv := scriptedModel(t)
	// The worker ends at SIGTERM/EOF, not killed: Run returns within the
	// wait below, which is half of StopTimeout, and the supervisor never
	// says it killed it. (Judged by the outcome, not by how long a loaded
	// machine took: the stop once took over 1.5 s under load.)
	var logs syncBuf
	a := startInstance(t, "p-1", "worker", srv.URL, func(o *SupervisorOptions) {
		o.StopTimeout = time.Minute
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	pid := a.s.Status().PID
	a.stop()
	select {
	case <-a.done:
		if a.err != nil {
			t.Fatal(a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return: the worker did not stop at SIGTERM")
	}
	if strings.Contains(logs.String(), "killing") {
		t.Fatalf("a cooperative worker was killed:\n%s", logs.String())
	}
	if st := a.s.Status(); st.State != StateStopped || st.PID != 0 {
		t.Fatalf("status %+v", st)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still exists: %v", pid, err)
	}
	if err := a.s.Send(Msg{Type: TypePing, ID: "x"}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("send after stop: %v", err)
	}
}

func TestStopKillsAWorkerThatIgnoresSIGTERM(t *testing.T) {
	var logs syncBuf
	a := startInstance(t, "p-1", "stubborn", "http://127.0.0.1:1", func(o *SupervisorOptions) {
		o.StopTimeout = 300 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	pid := a.s.Status().PID
	a.stop()
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return: the stubborn worker was not killed")
	}
	if !strings.Contains(logs.String(), "worker did not stop in time; killing") {
		t.Fatalf("stop: want the 300ms timeout then a kill, log:\n%s", logs.String())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still exists: %v", pid, err)
	}
}

// syncBuf is a goroutine-safe log sink.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestWorkerThatNeverGetsReadyIsHung(t *testing.T) {
	rec := &recorder{}
	s, err := NewSupervisor(SupervisorOptions{ProfileID: "p", InstanceID: "p-1", Executable: os.Args[0],
		Env: []string{envHelper + "=silent"}, ReadyTimeout: 400 * time.Millisecond, HangTimeout: 5 * time.Second,
		MinBackoff: 10 * time.Millisecond, OnStatus: rec.status, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 10*time.Second, "two hangs", func() bool { return s.Status().Restarts >= 2 })
	if !rec.sawState(StateHung, "no ready line") {
		t.Fatalf("statuses: %s", rec.states())
	}
	if err := s.Send(Msg{Type: TypePing, ID: "x"}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("send to a worker that is not ready: %v", err)
	}
}
