//go:build unix

package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/atrium"
)

// atriumProc is `atrium …` in its own process: this test binary
// re-executed with envCLIMain (TestMain).
type atriumProc struct {
	cmd      *exec.Cmd
	out, err *syncWriter
	done     chan struct{} // closed when the process has ended
	waitErr  error
}

// startAtrium starts `atrium args…` as a process with a clean environment
// (no model, HOME in the test's folder); the test's end kills it if it
// still runs.
func startAtrium(t *testing.T, args ...string) *atriumProc {
	t.Helper()
	p := &atriumProc{cmd: exec.Command(os.Args[0], args...), out: &syncWriter{w: &bytes.Buffer{}}, err: &syncWriter{w: &bytes.Buffer{}}, done: make(chan struct{})}
	p.cmd.Env = []string{envCLIMain + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// running waits until the app says it is running; it fails the test if
// the process ends first.
func (p *atriumProc) running(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(p.out.String(), "is running") {
		select {
		case <-p.done:
			t.Fatalf("%v ended (%v) before it ran:\n%s\n%s", p.cmd.Args[1:], p.waitErr, p.out, p.err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v did not start within 90 s:\n%s", p.cmd.Args[1:], p.err)
		}
	}
}

// exit waits for the process's end (bounded) and returns its exit status.
func (p *atriumProc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("%v still runs after 90 s:\n%s", p.cmd.Args[1:], p.err)
	}
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		return ee.ExitCode()
	}
	if p.waitErr != nil {
		t.Fatalf("%v: %v", p.cmd.Args[1:], p.waitErr)
	}
	return 0
}

// TestSecondAppRefused: a second app on the same state dir (here with
// another workspace and port, so that nothing else stops it) is refused
// with the running app's address, leaves the first app's gateway.json
// alone and does not reveal the token; once the first app is killed
// (SIGKILL: no clean-up, gateway.json stays behind) the next start
// succeeds and takes gateway.json over; a stop by SIGTERM removes it.
func TestSecondAppRefused(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	ws1, ws2 := filepath.Join(dir, "ws1"), filepath.Join(dir, "ws2")
	for _, d := range []string{ws1, ws2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port1, port2 := freePort(t), freePort(t)
	first := startAtrium(t, "serve", "--home", home, "--workspace", ws1, "--port", port1)
	first.running(t)
	gw := filepath.Join(home, "gateway.json")
	info, err := atrium.ReadGatewayInfo(gw)
	if err != nil || info.PID != first.cmd.Process.Pid || info.Addr != "127.0.0.1:"+port1 {
		t.Fatalf("gateway.json of the first app: %+v %v", info, err)
	}
	token, err := os.ReadFile(filepath.Join(home, "gateway.token"))
	if err != nil || len(bytes.TrimSpace(token)) == 0 {
		t.Fatalf("token: %v", err)
	}

	second := startAtrium(t, "serve", "--home", home, "--workspace", ws2, "--port", port2)
	if code := second.exit(t); code != 1 {
		t.Fatalf("second app: exit %d, want 1\n%s\n%s", code, second.out, second.err)
	}
	msg := second.err.String()
	for _, want := range []string{"Atrium is already running (pid " + strconv.Itoa(first.cmd.Process.Pid) + ") with state dir " + home,
		"open http://127.0.0.1:" + port1 + "/", "--home"} {
		if !strings.Contains(msg, want) {
			t.Errorf("second app's message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(second.out.String()+msg, strings.TrimSpace(string(token))) {
		t.Errorf("the refused app printed the token:\n%s", msg)
	}
	if info2, err := atrium.ReadGatewayInfo(gw); err != nil || !reflect.DeepEqual(info2, info) {
		t.Fatalf("gateway.json after the refused start: %+v %v, want %+v", info2, err, info)
	}

	// The first app is killed: no clean-up at all.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.exit(t)
	if stale, err := atrium.ReadGatewayInfo(gw); err != nil || stale.PID != first.cmd.Process.Pid {
		t.Fatalf("the killed app's gateway.json should still be there: %+v %v", stale, err)
	}
	third := startAtrium(t, "serve", "--home", home, "--workspace", ws2, "--port", port2)
	third.running(t)
	if info3, err := atrium.ReadGatewayInfo(gw); err != nil || info3.PID != third.cmd.Process.Pid || info3.Addr != "127.0.0.1:"+port2 {
		t.Fatalf("gateway.json after a start over a stale one: %+v %v", info3, err)
	}
	// The CLI finds the new app through it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if code := Main([]string{"memory", "status", "--home", home, "--workspace", ws2}, Options{Version: "test", Stdout: &out, Stderr: &out,
		Getenv: func(string) string { return "" }, Context: ctx}); code != 0 || !strings.Contains(out.String(), ws2) {
		t.Fatalf("memory status through the third app: exit %d\n%s", code, out.String())
	}
	if err := third.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := third.exit(t); code != 0 {
		t.Fatalf("third app after SIGTERM: exit %d\n%s", code, third.err)
	}
	if _, err := os.Stat(gw); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("gateway.json after a clean stop: %v", err)
	}
}
