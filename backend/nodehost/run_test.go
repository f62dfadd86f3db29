//go:build unix

package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// writeApprovals writes exec-approvals.json into dir.
func writeApprovals(t *testing.T, dir string, a any) *ApprovalsFile {
	t.Helper()
	f := NewApprovalsFile(dir)
	var data []byte
	switch v := a.(type) {
	case string:
		data = []byte(v)
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(f.Path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
	p, _ = filepath.EvalSymlinks(p)
	abs, _ := filepath.Abs(p)
	return abs
}

func wantCode(t *testing.T, err error, code string) *CommandError {
	t.Helper()
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
	return ce
}

// gone reports whether pid has exited (absent or a zombie waiting for init).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// waitGone waits (generously: it checks a kill, not a speed) until pid is gone.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fullRunner(t *testing.T, extra func(*Approvals)) *Runner {
	t.Helper()
	a := DefaultApprovals()
	a.Mode = ModeFull
	if extra != nil {
		extra(&a)
	}
	return &Runner{Approvals: writeApprovals(t, t.TempDir(), a), HomeDir: t.TempDir()}
}

func TestRunExitCodeAndStreams(t *testing.T) {
	r := fullRunner(t, nil)
	res, err := r.Run(context.Background(), RunParams{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.Truncated || res.TimedOut {
		t.Fatalf("result %+v", res)
	}
	if res.Executable != lookPath(t, "sh") && !strings.HasSuffix(res.Executable, "/sh") {
		t.Fatalf("executable %q", res.Executable)
	}
}

func TestRunTimeoutKillsTheProcessGroup(t *testing.T) {
	r := fullRunner(t, nil)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// The shell starts a grandchild and waits for it: only killing the group
	// ends the run before the grandchild's 60 s.
	res, err := r.Run(context.Background(), RunParams{
		Command:   []string{"sh", "-c", `sleep 60 & echo $! > "$0"; echo started; wait`, pidFile},
		TimeoutMs: 500,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != -1 || res.Signal != "killed" {
		t.Fatalf("result %+v, want timedOut, exitCode -1, signal killed", res)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the command did not start its child: %v (stdout %q)", err, res.Stdout)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	waitGone(t, pid)
	if res.Stdout != "started\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
}

func TestRunTimeoutIsCappedByTheApprovals(t *testing.T) {
	r := fullRunner(t, func(a *Approvals) { a.TimeoutMs = 300 })
	res, err := r.Run(context.Background(), RunParams{Command: []string{"sleep", "60"}, TimeoutMs: 600_000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("result %+v: the file's timeoutMs must cap the request's", res)
	}
}

func TestRunLeavesNothingBehind(t *testing.T) {
	r := fullRunner(t, nil)
	// The child backgrounds a sleeper with its output elsewhere and exits.
	res, err := r.Run(context.Background(), RunParams{Command: []string{"sh", "-c", `sleep 60 >/dev/null 2>&1 & echo $!`}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("result %+v", res)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("stdout %q", res.Stdout)
	}
	waitGone(t, pid)
}

func TestRunBackgroundChildHoldingThePipeDoesNotHang(t *testing.T) {
	r := fullRunner(t, nil)
	// The grandchild keeps stdout open; the run still ends when the shell
	// exits (the group is killed, the pipe closes).
	res, err := r.Run(context.Background(), RunParams{Command: []string{"sh", "-c", `sleep 60 & echo $!`}})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("stdout %q", res.Stdout)
	}
	waitGone(t, pid)
}

func TestRunOutputCap(t *testing.T) {
	r := fullRunner(t, func(a *Approvals) { a.MaxOutputBytes = 1000 })
	res, err := r.Run(context.Background(), RunParams{Command: []string{"sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a; head -c 10 /dev/zero | tr '\\0' b >&2"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1000 || res.StdoutBytes != 100000 || !res.Truncated || res.Stderr != "bbbbbbbbbb" || res.StderrBytes != 10 {
		t.Fatalf("len(stdout)=%d stdoutBytes=%d truncated=%v stderr=%q", len(res.Stdout), res.StdoutBytes, res.Truncated, res.Stderr)
	}
	// A cut inside a multi-byte character drops the partial character.
	res, err = r.Run(context.Background(), RunParams{Command: []string{"sh", "-c", `i=0; while [ $i -lt 400 ]; do printf '中'; i=$((i+1)); done`}})
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(res.Stdout) || len(res.Stdout) != 999 || !res.Truncated || res.StdoutBytes != 1200 {
		t.Fatalf("len %d valid %v truncated %v bytes %d", len(res.Stdout), utf8.ValidString(res.Stdout), res.Truncated, res.StdoutBytes)
	}
}

func TestRunCwdAndEnvAllowlist(t *testing.T) {
	r := fullRunner(t, func(a *Approvals) { a.EnvAllowlist = []string{"NODE_TEST_*", "LANG"} })
	r.Environ = func() []string { return []string{"PATH=" + os.Getenv("PATH"), "LANG=C", "BASE=kept"} }
	dir := t.TempDir()
	res, err := r.Run(context.Background(), RunParams{
		Command: []string{"sh", "-c", `pwd; echo "$NODE_TEST_A|$SECRET|$LANG|$BASE"`},
		Cwd:     dir,
		Env:     map[string]string{"NODE_TEST_A": "one", "SECRET": "two", "LANG": "C.UTF-8"},
	})
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != 2 || (lines[0] != dir && lines[0] != real) || lines[1] != "one||C.UTF-8|kept" {
		t.Fatalf("stdout %q", res.Stdout)
	}
	if !slices.Equal(res.EnvDropped, []string{"SECRET"}) {
		t.Fatalf("envDropped %v", res.EnvDropped)
	}
	// Default cwd is the home folder.
	res, err = r.Run(context.Background(), RunParams{Command: []string{"pwd"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(res.Stdout); got != r.HomeDir {
		if real, _ := filepath.EvalSymlinks(r.HomeDir); got != real {
			t.Fatalf("default cwd %q, want %q", got, r.HomeDir)
		}
	}
}

func TestRunBadParams(t *testing.T) {
	r := fullRunner(t, nil)
	for name, p := range map[string]RunParams{
		"empty":        {},
		"empty argv0":  {Command: []string{""}},
		"relative cwd": {Command: []string{"true"}, Cwd: "tmp"},
		"missing cwd":  {Command: []string{"true"}, Cwd: "/nonexistent/folder"},
		"env name":     {Command: []string{"true"}, Env: map[string]string{"A=B": "x"}},
		"nul":          {Command: []string{"true", "a\x00b"}},
	} {
		_, err := r.Run(context.Background(), p)
		wantCode(t, err, CodeInvalidRequest)
		_ = name
	}
	_, err := r.Run(context.Background(), RunParams{Command: []string{"no-such-command-atrium-xyz"}})
	wantCode(t, err, CodeNotFound)
}

// marker returns a command that creates a file, and the file: a denied
// command must not create it.
func marker(t *testing.T) ([]string, string) {
	f := filepath.Join(t.TempDir(), "ran")
	return []string{"touch", f}, f
}

func ran(f string) bool { _, err := os.Stat(f); return err == nil }

func TestRunModes(t *testing.T) {
	touch := lookPath(t, "touch")
	t.Run("deny", func(t *testing.T) {
		a := DefaultApprovals()
		a.Mode, a.Allowlist = ModeDeny, []string{touch}
		r := &Runner{Approvals: writeApprovals(t, t.TempDir(), a)}
		cmd, f := marker(t)
		_, err := r.Run(context.Background(), RunParams{Command: cmd})
		wantCode(t, err, CodeForbidden)
		if ran(f) {
			t.Fatal("mode deny ran the command")
		}
	})
	t.Run("allowlist", func(t *testing.T) {
		a := DefaultApprovals()
		a.Mode, a.Allowlist = ModeAllowlist, []string{filepath.Dir(touch) + "/tou*"}
		r := &Runner{Approvals: writeApprovals(t, t.TempDir(), a)}
		cmd, f := marker(t)
		if _, err := r.Run(context.Background(), RunParams{Command: cmd}); err != nil || !ran(f) {
			t.Fatalf("allowlisted command: err %v ran %v", err, ran(f))
		}
		_, err := r.Run(context.Background(), RunParams{Command: []string{"sh", "-c", "touch " + f + ".2"}})
		wantCode(t, err, CodeForbidden)
		if ran(f + ".2") {
			t.Fatal("a command not on the allowlist ran")
		}
	})
	t.Run("malformed means deny", func(t *testing.T) {
		for _, bad := range []string{
			`{"mode":"full"`,                                  // truncated JSON
			`{"mode":"ful"}`,                                  // unknown mode
			`{"allowlist":[]}`,                                // no mode
			`{"mode":"full","alowlist":[]}`,                   // unknown field
			`{"mode":"allowlist","allowlist":["touch"]}`,      // relative entry
			`{"mode":"full","maxOutputBytes":999999999}`,      // cap too large
			`{"mode":"full"} {"mode":"deny"}`,                 // two objects
			`{"mode":"full","timeoutMs":-1}`,                  // negative timeout
			`{"mode":"allowlist","allowlist":["/usr/bin/["]}`, // bad pattern
		} {
			r := &Runner{Approvals: writeApprovals(t, t.TempDir(), bad), Ask: func(context.Context, AskRequest) (string, error) { return DecisionAllowOnce, nil }}
			cmd, f := marker(t)
			_, err := r.Run(context.Background(), RunParams{Command: cmd})
			ce := wantCode(t, err, CodeForbidden)
			if !strings.Contains(ce.Message, "malformed") {
				t.Errorf("%s: message %q does not say the file is malformed", bad, ce.Message)
			}
			if ran(f) {
				t.Fatalf("%s: a malformed approvals file ran the command", bad)
			}
		}
	})
	t.Run("ask", func(t *testing.T) {
		dir := t.TempDir()
		af := writeApprovals(t, dir, DefaultApprovals())
		var asked []AskRequest
		answer := DecisionDeny
		var askErr error
		r := &Runner{Approvals: af, HomeDir: dir, Ask: func(_ context.Context, q AskRequest) (string, error) {
			asked = append(asked, q)
			return answer, askErr
		}}
		cmd, f := marker(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		_, err := r.Run(ctx, RunParams{Command: cmd})
		wantCode(t, err, CodeForbidden)
		if ran(f) || len(asked) != 1 {
			t.Fatalf("deny: ran %v asked %d", ran(f), len(asked))
		}
		if q := asked[0]; q.Command[0] != touch || q.Command[1] != f || q.Cwd != dir || q.TimeoutMs != maxAskTimeoutMs {
			t.Fatalf("ask request %+v, want the resolved executable %s", q, touch)
		}
		answer, askErr = DecisionAllowOnce, errors.New("gateway gone")
		if _, err := r.Run(context.Background(), RunParams{Command: cmd}); err == nil || ran(f) {
			t.Fatalf("a failed ask must deny: err %v ran %v", err, ran(f))
		}
		askErr = nil
		if _, err := r.Run(context.Background(), RunParams{Command: cmd}); err != nil || !ran(f) {
			t.Fatalf("allow-once: %v", err)
		}
		if a, _ := af.Load(); len(a.Allowlist) != 0 {
			t.Fatalf("allow-once changed the allowlist: %v", a.Allowlist)
		}
		answer = DecisionAllowAlways
		if _, err := r.Run(context.Background(), RunParams{Command: cmd}); err != nil {
			t.Fatal(err)
		}
		a, err := af.Load()
		if err != nil || !slices.Equal(a.Allowlist, []string{touch}) || a.Mode != ModeAsk || a.TimeoutMs != DefaultTimeoutMs {
			t.Fatalf("after allow-always: %+v %v", a, err)
		}
		n := len(asked)
		if _, err := r.Run(context.Background(), RunParams{Command: cmd}); err != nil || len(asked) != n {
			t.Fatalf("an allowlisted command was asked again (err %v)", err)
		}
		// No one to ask: deny.
		r.Ask = nil
		_, err = r.Run(context.Background(), RunParams{Command: []string{"true"}})
		wantCode(t, err, CodeForbidden)
	})
}

func TestApprovalsDefaults(t *testing.T) {
	dir := t.TempDir()
	f := NewApprovalsFile(dir)
	a, err := f.Load()
	if err != nil || a.Mode != ModeAsk {
		t.Fatalf("missing file: %+v %v, want mode ask", a, err)
	}
	if err := f.Ensure(); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, f.Path); m != 0o600 {
		t.Errorf("mode %v", m)
	}
	if err := os.WriteFile(f.Path, []byte(`{"mode":"deny"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Ensure(); err != nil {
		t.Fatal(err)
	}
	if a, err := f.Load(); err != nil || a.Mode != ModeDeny {
		t.Fatalf("Ensure replaced an existing file: %+v %v", a, err)
	}
}

func TestWhichAndNotify(t *testing.T) {
	c := &Commander{Runner: fullRunner(t, nil)}
	ctx := context.Background()
	out, err := c.Invoke(ctx, CmdWhich, json.RawMessage(`{"name":"sh"}`))
	if err != nil || !filepath.IsAbs(out.(WhichResult).Path) {
		t.Fatalf("which sh: %v %v", out, err)
	}
	_, err = c.Invoke(ctx, CmdWhich, json.RawMessage(`{"name":"no-such-command-atrium-xyz"}`))
	wantCode(t, err, CodeNotFound)
	_, err = c.Invoke(ctx, CmdWhich, json.RawMessage(`{"name":"/bin/sh"}`))
	wantCode(t, err, CodeInvalidRequest)
	_, err = c.Invoke(ctx, CmdWhich, json.RawMessage(`{"nam":"sh"}`))
	wantCode(t, err, CodeInvalidRequest)
	_, err = c.Invoke(ctx, "sensor.read", nil)
	wantCode(t, err, CodeNotFound)
	// A media command without capture (no ffmpeg) says so.
	_, err = c.Invoke(ctx, "camera.snap", nil)
	wantCode(t, err, CodeFFmpegNotFound)

	// A notifier that records its arguments stands for notify-send.
	dir := t.TempDir()
	rec := filepath.Join(dir, "args")
	script := filepath.Join(dir, "fake-notify-send")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > "+rec+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.Notifier = script
	out, err = c.Invoke(ctx, CmdNotify, json.RawMessage(`{"title":"Hi","body":"-x 你好"}`))
	if err != nil || out.(NotifyResult) != (NotifyResult{Delivered: true, Via: "notify-send"}) {
		t.Fatalf("notify: %v %v", out, err)
	}
	if got, _ := os.ReadFile(rec); string(got) != "--app-name=Atrium\n--\nHi\n-x 你好\n" {
		t.Fatalf("notifier args %q", got)
	}
	c.Notifier = filepath.Join(dir, "absent")
	out, err = c.Invoke(ctx, CmdNotify, json.RawMessage(`{"title":"Hi","body":"there"}`))
	if err != nil || out.(NotifyResult) != (NotifyResult{Delivered: false, Via: "log"}) {
		t.Fatalf("notify without notifier: %v %v", out, err)
	}
	_, err = c.Invoke(ctx, CmdNotify, json.RawMessage(`{}`))
	wantCode(t, err, CodeInvalidRequest)
}
