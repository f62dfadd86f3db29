package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// State is an instance's lifecycle state (docs/PROTOCOL.md, event
// profiles.instance).
type State string

// Instance states.
const (
	StateStarting   State = "starting"   // process started, no ready line yet
	StateReady      State = "ready"      // accepts runs, none in progress
	StateBusy       State = "busy"       // at least one run in progress
	StateCrashed    State = "crashed"    // the process exited on its own
	StateHung       State = "hung"       // no line for HangTimeout (or no ready for ReadyTimeout); killed
	StateRestarting State = "restarting" // waiting the backoff before the next start
	StateStopped    State = "stopped"    // stopped for good (context done)
)

// Status reports an instance's state. Reason says why it changed (exit
// status, missed heartbeats, protocol violation); Restarts counts the
// starts after the first; PID is the current process (0 when none);
// Violations counts the bad lines read from the worker; TS is Unix ms.
type Status struct {
	InstanceID string `json:"instanceId"`
	ProfileID  string `json:"profileId"`
	State      State  `json:"state"`
	Reason     string `json:"reason,omitempty"`
	Restarts   int    `json:"restarts"`
	PID        int    `json:"pid,omitempty"`
	Violations int    `json:"violations,omitempty"`
	TS         int64  `json:"ts"`
}

// Supervisor defaults.
const (
	DefaultHangTimeout  = 10 * time.Second
	DefaultReadyTimeout = 30 * time.Second
	DefaultMinBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
	DefaultStableAfter  = 30 * time.Second
	DefaultStopTimeout  = 5 * time.Second
)

// Send's errors.
var (
	// ErrNotReady: no worker process accepts requests (starting,
	// restarting or stopped).
	ErrNotReady = errors.New("worker: instance not ready")
	// ErrBadRequest: a run without an id, or with the id of a run still in
	// progress on this instance.
	ErrBadRequest = errors.New("worker: bad request")
)

// SupervisorOptions configure a Supervisor. ProfileID and InstanceID are
// required.
type SupervisorOptions struct {
	ProfileID, InstanceID string
	// Executable is the binary to start. Default os.Executable() (the
	// running binary re-executed, SPEC §3).
	Executable string
	// Args are the worker's arguments. Default: worker --profile <ProfileID>
	// --instance <InstanceID> --heartbeat-ms <HeartbeatInterval in ms>.
	Args []string
	// Env is appended to the parent's environment.
	Env []string
	// HeartbeatInterval is asked of the worker (in the default Args).
	// Default DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// HangTimeout: a ready worker that writes nothing (no heartbeat, no
	// byte of any line) for this long is hung and killed. Default
	// DefaultHangTimeout.
	HangTimeout time.Duration
	// ReadyTimeout: a worker that has not written its ready line this
	// long after its start is hung and killed (whatever else it wrote). Default DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// MinBackoff is the wait before the first restart; it doubles with
	// every consecutive failure up to MaxBackoff, and starts again from
	// MinBackoff once a process ran StableAfter. Defaults
	// DefaultMinBackoff, DefaultMaxBackoff, DefaultStableAfter.
	MinBackoff, MaxBackoff, StableAfter time.Duration
	// StopTimeout: on stop, the wait between SIGTERM and SIGKILL. Default
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// MaxLineBytes caps a line from the worker. Default DefaultMaxLineBytes.
	MaxLineBytes int
	// OnStatus receives every state change and protocol violation, in
	// order, from the supervisor's goroutines (it must not block long).
	OnStatus func(Status)
	// OnEvent receives the worker's events other than ready, heartbeat
	// and pong, in order, from the reading goroutine: while it blocks no
	// line is read, so a long block looks like a hang (HangTimeout). When
	// the process dies with runs in progress, each gets a synthesized
	// error event (kind "crashed", "hung" or "stopped").
	OnEvent func(Msg)
	// Logger receives the worker's stderr lines and the supervisor's
	// records. Default slog.Default().
	Logger *slog.Logger
}

// Supervisor runs one instance's worker process (SPEC §3): it restarts it
// when it crashes or hangs, and never lets a failure reach the caller
// other than as a Status. Create it with NewSupervisor; Run it once.
type Supervisor struct {
	o      SupervisorOptions
	log    *slog.Logger
	emitMu sync.Mutex // orders OnStatus calls

	mu       sync.Mutex
	st       Status
	in       *Writer           // current process's stdin; nil when none
	inFile   *os.File          // to close it
	inflight map[string]string // run id → session id
	lastSeen time.Time
}

// NewSupervisor returns a Supervisor with o's defaults filled in.
func NewSupervisor(o SupervisorOptions) (*Supervisor, error) {
	if o.ProfileID == "" || o.InstanceID == "" {
		return nil, errors.New("worker: supervisor needs ProfileID and InstanceID")
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("worker: find own executable: %w", err)
		}
		o.Executable = exe
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.Args == nil {
		o.Args = []string{"worker", "--profile", o.ProfileID, "--instance", o.InstanceID,
			"--heartbeat-ms", strconv.FormatInt(o.HeartbeatInterval.Milliseconds(), 10)}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HangTimeout, DefaultHangTimeout)
	def(&o.ReadyTimeout, DefaultReadyTimeout)
	def(&o.MinBackoff, DefaultMinBackoff)
	def(&o.MaxBackoff, DefaultMaxBackoff)
	def(&o.StableAfter, DefaultStableAfter)
	def(&o.StopTimeout, DefaultStopTimeout)
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.OnStatus == nil {
		o.OnStatus = func(Status) {}
	}
	if o.OnEvent == nil {
		o.OnEvent = func(Msg) {}
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Supervisor{o: o, log: log.With("instance", o.InstanceID, "profile", o.ProfileID), inflight: map[string]string{}}
	s.st = Status{InstanceID: o.InstanceID, ProfileID: o.ProfileID, State: StateStarting, TS: time.Now().UnixMilli()}
	return s, nil
}

// Status returns the current status.
func (s *Supervisor) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Send writes m to the worker (ProfileID filled in when empty). A run
// marks the instance busy until its final, cancelled or error event.
// Errors: ErrNotReady, ErrBadRequest, or the write error (the process is gone; the
// supervisor notices and restarts it). Send blocks while the worker does
// not read its input (at most until it is found hung and killed).
func (s *Supervisor) Send(m Msg) error {
	s.mu.Lock()
	w := s.in
	if w == nil || (s.st.State != StateReady && s.st.State != StateBusy) {
		st := s.st.State
		s.mu.Unlock()
		return fmt.Errorf("%w: %s is %s", ErrNotReady, s.o.InstanceID, st)
	}
	if m.ProfileID == "" {
		m.ProfileID = s.o.ProfileID
	}
	if m.Type == TypeRun {
		if _, dup := s.inflight[m.ID]; dup || m.ID == "" {
			s.mu.Unlock()
			return fmt.Errorf("%w: run id %q is empty or already in progress on %s", ErrBadRequest, m.ID, s.o.InstanceID)
		}
		s.inflight[m.ID] = m.SessionID
	}
	s.mu.Unlock()
	if m.Type == TypeRun {
		s.setState(StateBusy, "", false)
	}
	if err := w.Write(m); err != nil {
		s.endRun(m.ID)
		return fmt.Errorf("worker: send to %s: %w", s.o.InstanceID, err)
	}
	return nil
}

// setState moves to st and reports it (a repeat of the current state and
// reason is not reported again). violation counts a protocol violation
// and reports it with the state unchanged (st is then ignored).
func (s *Supervisor) setState(st State, reason string, violation bool) {
	s.emitMu.Lock()
	defer s.emitMu.Unlock()
	s.mu.Lock()
	if !violation && s.st.State == st && s.st.Reason == reason {
		s.mu.Unlock()
		return
	}
	if violation {
		s.st.Violations++
	} else {
		s.st.State = st
	}
	s.st.Reason = reason
	s.st.TS = time.Now().UnixMilli()
	out := s.st
	s.mu.Unlock()
	s.o.OnStatus(out)
}

// endRun forgets a run; the instance is ready again when none is left.
func (s *Supervisor) endRun(id string) {
	s.mu.Lock()
	delete(s.inflight, id)
	idle := len(s.inflight) == 0 && s.st.State == StateBusy
	s.mu.Unlock()
	if idle {
		s.setState(StateReady, "", false)
	}
}

// Run starts the worker and keeps it running until ctx is done, then
// stops it (stdin closed and SIGTERM, SIGKILL after StopTimeout), reports
// StateStopped and returns nil. It never returns another error: a worker
// that cannot even start (e.g. a missing executable) is reported as
// crashed and retried with the backoff like any other failure.
func (s *Supervisor) Run(ctx context.Context) error {
	failures := 0
	for {
		started := time.Now()
		state, reason := s.once(ctx)
		if ctx.Err() != nil {
			s.setState(StateStopped, "stopped", false)
			return nil
		}
		s.setState(state, reason, false)
		s.log.Warn("worker failed", "state", string(state), "reason", reason)
		if time.Since(started) >= s.o.StableAfter {
			failures = 0
		}
		failures++
		wait := backoff(s.o.MinBackoff, s.o.MaxBackoff, failures)
		s.mu.Lock()
		s.st.Restarts++
		s.mu.Unlock()
		s.setState(StateRestarting, fmt.Sprintf("%s; restart in %s", reason, wait), false)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			s.setState(StateStopped, "stopped", false)
			return nil
		case <-t.C:
		}
	}
}

// backoff is the wait before the restart after the n-th consecutive
// failure (n ≥ 1): lo, 2·lo, 4·lo, … capped at hi.
func backoff(lo, hi time.Duration, n int) time.Duration {
	w := lo << min(n-1, 30)
	if w > hi || w <= 0 {
		return hi
	}
	return w
}

// once runs one process to its end and returns how it ended (crashed or
// hung, with the reason).
func (s *Supervisor) once(ctx context.Context) (State, string) {
	s.mu.Lock()
	s.st.PID = 0
	s.mu.Unlock()
	s.setState(StateStarting, "", false)

	inR, inW, err := os.Pipe()
	if err != nil {
		return StateCrashed, "start: " + err.Error()
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return StateCrashed, "start: " + err.Error()
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return StateCrashed, "start: " + err.Error()
	}
	cmd := exec.Command(s.o.Executable, s.o.Args...)
	cmd.Env = append(os.Environ(), s.o.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return StateCrashed, fmt.Sprintf("start %s: %v", s.o.Executable, err)
	}
	startedAt := time.Now()
	s.mu.Lock()
	s.st.PID = cmd.Process.Pid
	s.in, s.inFile = NewWriter(inW), inW
	s.lastSeen = time.Now()
	s.mu.Unlock()
	s.setState(StateStarting, "pid "+strconv.Itoa(cmd.Process.Pid), false)

	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	stderrDone := make(chan struct{})
	go func() { defer close(stderrDone); s.logStderr(errR) }()
	readDone := make(chan struct{})
	go func() { defer close(readDone); s.readLoop(outR) }()

	var state State
	var reason string
	var werr error
	tick := time.NewTicker(min(s.o.HangTimeout, s.o.ReadyTimeout) / 4)
	defer tick.Stop()
loop:
	for {
		select {
		case werr = <-waitc:
			state, reason = StateCrashed, "exited: "+exitText(werr)
			break loop
		case <-tick.C:
			s.mu.Lock()
			limit, what := s.o.HangTimeout, "no heartbeat"
			silent := time.Since(s.lastSeen)
			if s.st.State == StateStarting { // ReadyTimeout counts from the start
				limit, what, silent = s.o.ReadyTimeout, "no ready line", time.Since(startedAt)
			}
			s.mu.Unlock()
			if silent > limit {
				state, reason = StateHung, fmt.Sprintf("%s for %s; killed", what, silent.Round(time.Millisecond))
				s.setState(StateHung, reason, false)
				_ = cmd.Process.Kill()
				werr = <-waitc
				break loop
			}
		case <-ctx.Done():
			s.detach()
			_ = cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(s.o.StopTimeout)
			select {
			case werr = <-waitc:
				t.Stop()
			case <-t.C:
				s.log.Warn("worker did not stop in time; killing", "timeout", s.o.StopTimeout)
				_ = cmd.Process.Kill()
				werr = <-waitc
			}
			state, reason = StateStopped, "stopped"
			break loop
		}
	}
	s.detach()
	// The process is gone: its end of the pipes is closed, so the readers
	// end at EOF once drained; bound the wait (a grandchild might hold them).
	for _, done := range []chan struct{}{readDone, stderrDone} {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
	}
	outR.Close()
	errR.Close()
	s.failRuns(state, reason)
	s.mu.Lock()
	s.st.PID = 0
	s.mu.Unlock()
	s.log.Info("worker exited", "state", string(state), "exit", exitText(werr))
	return state, reason
}

// detach closes the worker's stdin (a worker ends at EOF) and stops Send.
func (s *Supervisor) detach() {
	s.mu.Lock()
	f := s.inFile
	s.in, s.inFile = nil, nil
	s.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// failRuns ends the runs that were in progress when the process died.
func (s *Supervisor) failRuns(state State, reason string) {
	s.mu.Lock()
	runs := s.inflight
	s.inflight = map[string]string{}
	s.mu.Unlock()
	kind := string(state)
	for id, session := range runs {
		m, _ := NewMsg(TypeError, id, ErrorInfo{Message: "worker " + s.o.InstanceID + " " + kind + ": " + reason, Kind: kind, Retryable: state != StateStopped})
		m.ProfileID, m.SessionID, m.TS = s.o.ProfileID, session, time.Now().UnixMilli()
		s.o.OnEvent(m)
	}
}

// seenReader marks the worker as seen whenever bytes arrive, not only at
// the end of a line: a worker writing a long line (a 10 MB final) is not
// silent, however long that line takes on a loaded machine.
type seenReader struct {
	r io.Reader
	s *Supervisor
}

func (r seenReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.s.mu.Lock()
		r.s.lastSeen = time.Now()
		r.s.mu.Unlock()
	}
	return n, err
}

func (s *Supervisor) readLoop(f *os.File) {
	r := NewReader(seenReader{r: f, s: s}, ReaderOptions{MaxLineBytes: s.o.MaxLineBytes})
	for {
		m, err := r.Read()
		s.mu.Lock()
		s.lastSeen = time.Now()
		s.mu.Unlock()
		switch {
		case err == nil:
			s.dispatch(m)
		case errors.Is(err, ErrLineTooLong), errors.Is(err, ErrMalformed):
			s.log.Warn("worker protocol violation", "err", err)
			s.setState("", "protocol violation: "+err.Error(), true)
			s.failLostLine(err)
		default: // EOF or a read error: the process is ending
			return
		}
	}
}

// failLostLine ends the run whose final (or error) line was too long to
// read: the caller gets an error event instead of waiting forever.
func (s *Supervisor) failLostLine(err error) {
	var tl *LineTooLongError
	if !errors.As(err, &tl) {
		return
	}
	typ, id, ok := tl.HeadID()
	if !ok || id == "" || (typ != TypeFinal && typ != TypeCancelled && typ != TypeError) {
		return
	}
	s.mu.Lock()
	session, running := s.inflight[id]
	s.mu.Unlock()
	if !running {
		return
	}
	m, _ := NewMsg(TypeError, id, ErrorInfo{Message: "worker " + s.o.InstanceID + ": " + typ + " line rejected: " + err.Error(), Kind: "protocol"})
	m.ProfileID, m.SessionID, m.TS = s.o.ProfileID, session, time.Now().UnixMilli()
	s.o.OnEvent(m)
	s.endRun(id)
}

func (s *Supervisor) dispatch(m Msg) {
	switch m.Type {
	case TypeHeartbeat, TypePong:
	case TypeReady:
		s.mu.Lock()
		busy := len(s.inflight) > 0
		s.mu.Unlock()
		if busy {
			s.setState(StateBusy, "", false)
		} else {
			s.setState(StateReady, "", false)
		}
	case TypeFinal, TypeCancelled, TypeError:
		s.o.OnEvent(m)
		if m.ID != "" {
			s.endRun(m.ID)
		}
	default:
		s.o.OnEvent(m)
	}
}

// logStderr copies the worker's stderr to the log, one record per line
// (lines cut at 8 KiB).
func (s *Supervisor) logStderr(f *os.File) {
	br := bufio.NewReaderSize(f, 8<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			s.log.Info("worker stderr", "line", string(trimNL(line)))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}
