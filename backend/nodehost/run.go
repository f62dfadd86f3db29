package nodehost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Error codes of a failed command (node.invoke.result error.code); they are
// the gateway's codes (SPEC §3).
const (
	CodeInvalidRequest = "INVALID_REQUEST"
	CodeForbidden      = "FORBIDDEN"
	CodeNotFound       = "NOT_FOUND"
	CodeUnavailable    = "UNAVAILABLE"
	CodeInternal       = "INTERNAL"
)

// CommandError is a command's failure as node.invoke.result reports it.
// Retryable marks a request the node could not take now (busy: more than
// Options.MaxConcurrent at once); the same request later may succeed, and
// the gateway answers that node.invoke UNAVAILABLE, retryable.
type CommandError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
}

func (e *CommandError) Error() string { return e.Code + ": " + e.Message }

func cmdErr(code, format string, args ...any) *CommandError {
	return &CommandError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// maxAskTimeoutMs is the longest wait node.exec.ask accepts.
const maxAskTimeoutMs = 600_000

// Exec-ask decisions (node.exec.ask's answer).
const (
	DecisionAllowOnce   = "allow-once"
	DecisionAllowAlways = "allow-always"
	DecisionDeny        = "deny"
)

// AskRequest is node.exec.ask's params: the command as it would run
// (argv[0] resolved to the executable's absolute path, which is what
// "allow-always" adds to the allowlist), its working folder, and how long
// the person has to answer (the time left of the invocation; 0: the
// gateway's default). No answer in time is deny.
type AskRequest struct {
	Command   []string `json:"command"`
	Cwd       string   `json:"cwd"`
	TimeoutMs int64    `json:"timeoutMs"`
}

// RunParams are system.run's params. Command is argv (argv[0] is looked up
// in this host's PATH, or taken relative to Cwd when it contains a path
// separator); Cwd must be absolute (default: the user's home folder); Env
// entries are added to this host's environment when their names are on the
// envAllowlist, else dropped and named in the result; TimeoutMs (0: the
// approvals' timeoutMs) is capped by the approvals' timeoutMs.
type RunParams struct {
	Command   []string          `json:"command"`
	Cwd       string            `json:"cwd,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	TimeoutMs int64             `json:"timeoutMs,omitempty"`
}

// RunResult is system.run's result. ExitCode is -1 when the process did not
// exit by itself (Signal names the signal on Unix); Stdout and Stderr hold at
// most the approvals' maxOutputBytes each (cut at a UTF-8 boundary), with
// Truncated set when either was cut and StdoutBytes/StderrBytes the full
// sizes produced; TimedOut when the timeout (its own, or the invocation's
// deadline) killed the process group.
type RunResult struct {
	ExitCode    int      `json:"exitCode"`
	Stdout      string   `json:"stdout"`
	Stderr      string   `json:"stderr"`
	Truncated   bool     `json:"truncated"`
	StdoutBytes int64    `json:"stdoutBytes"`
	StderrBytes int64    `json:"stderrBytes"`
	TimedOut    bool     `json:"timedOut"`
	Signal      string   `json:"signal,omitempty"`
	EnvDropped  []string `json:"envDropped,omitempty"`
	DurationMs  int64    `json:"durationMs"`
	Executable  string   `json:"executable"`
}

// Runner runs system.run under the exec approvals file.
type Runner struct {
	// Approvals is read at every run (required).
	Approvals *ApprovalsFile
	// Ask puts a command to the person (node.exec.ask through the gateway)
	// and returns the decision. Nil: mode "ask" denies what is not on the
	// allowlist.
	Ask func(ctx context.Context, r AskRequest) (string, error)
	// Environ is the base environment of a command (default os.Environ).
	Environ func() []string
	// HomeDir is the default working folder (default os.UserHomeDir, else
	// the process's working folder).
	HomeDir string
	// Log receives one line per run (argv[0], decision, exit code, never
	// the arguments' or environment's values). Default: discard.
	Log *slog.Logger
	// ReaderGrace bounds the wait for output after the process group is
	// gone, for a process that left the group and kept the pipes (default
	// 2 s).
	ReaderGrace time.Duration
}

// Run checks p against the approvals and runs it. Errors are *CommandError:
// INVALID_REQUEST (bad params), FORBIDDEN (approvals: denied, not on the
// allowlist, the person said no, a malformed approvals file), NOT_FOUND (no
// such executable), INTERNAL (the process could not be started).
func (r *Runner) Run(ctx context.Context, p RunParams) (RunResult, error) {
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := p.validate(); err != nil {
		return RunResult{}, err
	}
	ap, err := r.Approvals.Load()
	if err != nil {
		log.Warn("system.run denied: exec approvals file is malformed", "err", err)
		return RunResult{}, cmdErr(CodeForbidden, "%v; nothing runs until it is fixed (a malformed file means deny)", err)
	}
	cwd := p.Cwd
	if cwd == "" {
		cwd = r.homeDir()
	}
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return RunResult{}, cmdErr(CodeInvalidRequest, "system.run: cwd %q is not a folder on this host", cwd)
	}
	exe, err := resolveExe(p.Command[0], cwd)
	if err != nil {
		return RunResult{}, cmdErr(CodeNotFound, "system.run: %v", err)
	}
	timeout := ap.Timeout()
	if p.TimeoutMs > 0 && time.Duration(p.TimeoutMs)*time.Millisecond < timeout {
		timeout = time.Duration(p.TimeoutMs) * time.Millisecond
	}
	if err := r.decide(ctx, ap, exe, p, cwd, log); err != nil {
		return RunResult{}, err
	}
	env, dropped := r.env(ap, p.Env)
	res, err := r.exec(ctx, exe, p.Command, cwd, env, timeout, ap.OutputCap())
	if err != nil {
		log.Warn("system.run could not start", "exe", exe, "err", err)
		return RunResult{}, cmdErr(CodeInternal, "system.run: start %s: %v", exe, err)
	}
	res.EnvDropped = dropped
	log.Info("system.run done", "exe", exe, "exitCode", res.ExitCode, "timedOut", res.TimedOut, "truncated", res.Truncated, "ms", res.DurationMs)
	return res, nil
}

func (p RunParams) validate() error {
	if len(p.Command) == 0 || p.Command[0] == "" {
		return cmdErr(CodeInvalidRequest, "system.run: params.command must be a non-empty array of strings (argv)")
	}
	for i, a := range p.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return cmdErr(CodeInvalidRequest, "system.run: params.command[%d] contains a NUL byte", i)
		}
	}
	if p.Cwd != "" && !filepath.IsAbs(p.Cwd) {
		return cmdErr(CodeInvalidRequest, "system.run: params.cwd %q must be an absolute path", p.Cwd)
	}
	for k, v := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return cmdErr(CodeInvalidRequest, "system.run: params.env has a bad entry %q", k)
		}
	}
	if p.TimeoutMs < 0 {
		return cmdErr(CodeInvalidRequest, "system.run: params.timeoutMs must be ≥ 0")
	}
	return nil
}

func (r *Runner) homeDir() string {
	if r.HomeDir != "" {
		return r.HomeDir
	}
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	if wd, err := os.Getwd(); err == nil {
		return wd
	}
	return string(filepath.Separator)
}

// resolveExe finds the executable argv[0] names: a name without a path
// separator in this host's PATH, a path relative to cwd, or an absolute
// path. The result is absolute and clean.
func resolveExe(arg0, cwd string) (string, error) {
	name := arg0
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(cwd, name)
		}
	}
	exe, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%q: no such executable on this host", arg0)
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return "", fmt.Errorf("%q: %v", arg0, err)
	}
	return filepath.Clean(exe), nil
}

// decide applies the approvals mode; nil means run.
func (r *Runner) decide(ctx context.Context, ap Approvals, exe string, p RunParams, cwd string, log *slog.Logger) error {
	switch ap.Mode {
	case ModeFull:
		return nil
	case ModeDeny:
		log.Info("system.run denied", "exe", exe, "mode", ap.Mode)
		return cmdErr(CodeForbidden, "system.run: this node's exec approvals deny every command (mode deny)")
	}
	if ap.Allowed(exe) {
		return nil
	}
	if ap.Mode == ModeAllowlist {
		log.Info("system.run denied", "exe", exe, "mode", ap.Mode)
		return cmdErr(CodeForbidden, "system.run: %s is not on this node's allowlist (mode allowlist)", exe)
	}
	// ModeAsk.
	if r.Ask == nil {
		return cmdErr(CodeForbidden, "system.run: %s is not on the allowlist and no one can be asked (mode ask)", exe)
	}
	argv := append([]string{exe}, p.Command[1:]...)
	q := AskRequest{Command: argv, Cwd: cwd}
	if dl, ok := ctx.Deadline(); ok {
		q.TimeoutMs = min(max(time.Until(dl).Milliseconds(), 1), maxAskTimeoutMs)
	}
	decision, err := r.Ask(ctx, q)
	if err != nil {
		log.Info("system.run denied: the ask failed", "exe", exe, "err", err)
		return cmdErr(CodeForbidden, "system.run: %s needs the person's approval and the ask failed (deny): %v", exe, err)
	}
	log.Info("system.run asked", "exe", exe, "decision", decision)
	switch decision {
	case DecisionAllowOnce:
		return nil
	case DecisionAllowAlways:
		if err := r.Approvals.AllowAlways(exe); err != nil {
			// The person allowed this run; only the "always" part failed.
			log.Warn("allow-always not saved", "exe", exe, "err", err)
		}
		return nil
	}
	return cmdErr(CodeForbidden, "system.run: the person denied %s", exe)
}

// env is the base environment with the caller's allowed entries set; it
// returns the names of the dropped ones, sorted.
func (r *Runner) env(ap Approvals, req map[string]string) ([]string, []string) {
	base := os.Environ
	if r.Environ != nil {
		base = r.Environ
	}
	env := base()
	var dropped []string
	keys := make([]string, 0, len(req))
	for k := range req {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !ap.EnvAllowed(k) {
			dropped = append(dropped, k)
			continue
		}
		env = slices.DeleteFunc(env, func(kv string) bool { return envName(kv) == k })
		env = append(env, k+"="+req[k])
	}
	return env, dropped
}

func envName(kv string) string {
	if i := strings.IndexByte(kv, '='); i > 0 {
		return kv[:i]
	}
	return kv
}

// exec starts the process in a process group of its own, collects capped
// output, and kills the whole group on timeout, on ctx's end, and when the
// process exits (what it left in its group does not outlive the run).
func (r *Runner) exec(ctx context.Context, exe string, argv []string, cwd string, env []string, timeout time.Duration, limit int) (RunResult, error) {
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	outR, outW, err := os.Pipe()
	if err != nil {
		return RunResult{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return RunResult{}, err
	}
	cmd := exec.CommandContext(runCtx, exe, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir, cmd.Env = cwd, env
	cmd.Stdout, cmd.Stderr = outW, errW // *os.File: handed to the child, no copy goroutines
	setGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return RunResult{}, err
	}
	stdout, stderr := &capBuffer{limit: limit}, &capBuffer{limit: limit}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); io.Copy(stdout, outR) }()
	go func() { defer readers.Done(); io.Copy(stderr, errR) }()
	waitErr := cmd.Wait()
	// Its own timeout or the invocation's deadline; not a cancellation
	// (the connection went, the host stops).
	timedOut := errors.Is(runCtx.Err(), context.DeadlineExceeded)
	killLeftovers(cmd.Process)
	readDone := make(chan struct{})
	go func() { readers.Wait(); close(readDone) }()
	grace := r.ReaderGrace
	if grace <= 0 {
		grace = 2 * time.Second
	}
	select {
	case <-readDone:
	case <-time.After(grace):
		// A process outside the group still holds the pipes: stop reading.
		outR.Close()
		errR.Close()
		<-readDone
	}
	outR.Close()
	errR.Close()
	res := RunResult{
		ExitCode: -1, Executable: exe, TimedOut: timedOut,
		DurationMs:  time.Since(start).Milliseconds(),
		StdoutBytes: stdout.total, StderrBytes: stderr.total,
		Truncated: stdout.truncated() || stderr.truncated(),
		Stdout:    stdout.String(), Stderr: stderr.String(),
	}
	if ps := cmd.ProcessState; ps != nil {
		res.ExitCode = ps.ExitCode()
		res.Signal = signalOf(ps)
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && cmd.ProcessState == nil {
		return RunResult{}, waitErr
	}
	return res, nil
}

// capBuffer keeps the first limit bytes written and counts them all.
type capBuffer struct {
	limit int
	buf   []byte
	total int64
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	if room := b.limit - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *capBuffer) truncated() bool { return b.total > int64(len(b.buf)) }

// String is the kept bytes; when cut, a rune split by the cut is dropped.
func (b *capBuffer) String() string {
	out := b.buf
	if b.truncated() {
		for i := 0; i < utf8.UTFMax && len(out) > 0; i++ {
			if r, size := utf8.DecodeLastRune(out); r != utf8.RuneError || size != 1 {
				break
			}
			out = out[:len(out)-1]
		}
	}
	return string(out)
}
