package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/nodehost"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/atrium-dev/atrium/backend/paths"
)

// nodeApp is a running app (in this process) that the node command tests
// pair `atrium node` hosts with.
type nodeApp struct {
	home, port string
	flags      []string // --home H --port P
}

func startNodeApp(t *testing.T) *nodeApp {
	t.Helper()
	home, ws := workspace(t)
	port := serveApp(t, home, ws)
	return &nodeApp{home: home, port: port, flags: []string{"--home", home, "--port", port}}
}

// cli runs the command line in this process with the app's flags.
func (a *nodeApp) cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(t, nil, append(append([]string{}, a.flags...), args...)...) // before the command: "--" may end args
}

// pairURL is a fresh pairing URL (atrium pair --json).
func (a *nodeApp) pairURL(t *testing.T) string {
	t.Helper()
	code, out, errOut := a.cli(t, "pair", "--json")
	var pc pairCode
	if code != 0 || json.Unmarshal([]byte(out), &pc) != nil || pc.URL == "" {
		t.Fatalf("pair --json: exit %d\n%s\n%s", code, out, errOut)
	}
	return pc.URL
}

// admin is a gateway connection with the app's operator token.
func (a *nodeApp) admin(t *testing.T) *gateway.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, _, err := dialGateway(ctx, paths.Layout{Home: a.home}, mustPort(t, a.port), Options{Version: "test", Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r.c
}

func mustPort(t *testing.T, s string) int {
	t.Helper()
	p, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeApprovals writes a node state dir's exec-approvals.json with mode.
func writeApprovals(t *testing.T, dir, mode string) {
	t.Helper()
	ap := nodehost.DefaultApprovals()
	ap.Mode = mode
	b, err := json.Marshal(ap)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, nodehost.ApprovalsFileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// hostProc is `atrium node` in a process of its own (this test binary
// re-executed as the command line), with a home directory of its own:
// system.run's default working directory, so `pwd` says which host ran.
type hostProc struct {
	id, home string
}

// startHostProc pairs `atrium node --name name` with the app (approved by
// `atrium nodes approve`) under exec approvals mode, and returns once it
// is connected as a paired node. It is stopped with SIGINT at the end of
// the test (its runs are killed with it).
func (a *nodeApp) startHostProc(t *testing.T, name, mode string) *hostProc {
	t.Helper()
	dir := t.TempDir()
	state, home, bin := filepath.Join(dir, "node"), filepath.Join(dir, "home"), filepath.Join(dir, "bin")
	writeApprovals(t, state, mode)
	for _, d := range []string{home, bin} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// A notify-send of its own: what system.notify shows lands in home/notified.
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$HOME/notified\"\n"
	if err := os.WriteFile(filepath.Join(bin, "notify-send"), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	// No ffmpeg: no media commands (these tests are about the others).
	cmd := exec.Command(os.Args[0], "node", "--json", "--state", state, "--name", name, "--url", a.pairURL(t), "--ffmpeg", "atrium-test-no-ffmpeg")
	cmd.Env = []string{envCLIMain + "=1", "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncWriter{w: &bytes.Buffer{}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	states := make(chan map[string]any, 64)
	go func() {
		defer close(states)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				select {
				case states <- m:
				default: // later lines (reconnects) are not waited for
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	wait := func(state string) map[string]any {
		deadline := time.After(90 * time.Second)
		for {
			select {
			case m, ok := <-states:
				if !ok {
					t.Fatalf("atrium node %s ended before %q:\n%s", name, state, stderr)
				}
				if m["state"] == state {
					return m
				}
			case <-deadline:
				t.Fatalf("atrium node %s: no %q within 90 s:\n%s", name, state, stderr)
			}
		}
	}
	pend := wait("pending")
	req, _ := pend["requestId"].(string)
	id, _ := pend["deviceId"].(string)
	if code, out, errOut := a.cli(t, "nodes", "approve", req); code != 0 {
		t.Fatalf("nodes approve %s: exit %d\n%s\n%s", req, code, out, errOut)
	}
	wait("paired")
	return &hostProc{id: id, home: home}
}

// startHostInProcess pairs a nodehost.Host running in this process (o's
// State, Target and DisplayName are filled in; exec approvals full) and
// returns its device id once it is connected.
func (a *nodeApp) startHostInProcess(t *testing.T, name string, o nodehost.Options) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "node")
	writeApprovals(t, dir, nodehost.ModeFull)
	st, err := nodehost.OpenState(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	target, err := nodehost.ParseGatewayURL(a.pairURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	states := map[string]string{}
	o.State, o.Target, o.DisplayName = st, target, name
	if o.FFmpeg == "" {
		o.FFmpeg = "atrium-test-no-ffmpeg" // no media commands: these tests are about the others
	}
	o.OnStatus = func(s nodehost.Status) {
		mu.Lock()
		defer mu.Unlock()
		states[s.State] = s.RequestID
	}
	h, err := nodehost.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	until(t, "the in-process host's pairing request", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return states["pending"] != ""
	})
	mu.Lock()
	req := states["pending"]
	mu.Unlock()
	if code, out, errOut := a.cli(t, "nodes", "approve", req); code != 0 {
		t.Fatalf("nodes approve %s: exit %d\n%s\n%s", req, code, out, errOut)
	}
	until(t, "the in-process host paired", func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := states["paired"]
		return ok
	})
	return st.DeviceID()
}

// until polls cond every 20 ms for at most 90 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 90 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cliProc runs the command line as a process of its own (this test binary
// re-executed) and returns its exit status, stdout and stderr.
func cliProc(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = []string{envCLIMain + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("%v: %v\n%s\n%s", args, err, out.String(), errb.String())
	return 0, "", ""
}

// TestNodesRunNotifyDescribeInvoke (issue 22 item 5): against the real app
// and a real `atrium node` process, `atrium nodes run` (a process of its
// own) passes the node's stdout, stderr and exit status through (3, and
// 124 when the node stopped it at --timeout); a node whose approvals say
// ask makes it print that it waits for approval on the desktop until the
// person answers; notify, describe and invoke show their results; an
// unknown node, a command the node may not run, a location asked of a
// node without it and bad flags are errors that say what to do.
func TestNodesRunNotifyDescribeInvoke(t *testing.T) {
	a := startNodeApp(t)
	box := a.startHostProc(t, "build-box", nodehost.ModeFull)

	run := append([]string{"nodes", "run", "--node", "build-box"}, a.flags...)
	code, out, errOut := cliProc(t, append(run, "--", "sh", "-c", "echo out; echo err >&2; exit 3")...)
	if code != 3 || out != "out\n" || errOut != "err\n" {
		t.Fatalf("nodes run: exit %d, stdout %q, stderr %q; want 3, \"out\\n\", \"err\\n\"", code, out, errOut)
	}
	// By id prefix, in its home (the default cwd), and --cwd.
	code, out, errOut = cliProc(t, append([]string{"nodes", "run", "--node", box.id[:8]}, append(a.flags, "--", "pwd")...)...)
	if code != 0 || strings.TrimSpace(out) != box.home {
		t.Fatalf("nodes run pwd by id prefix: exit %d, stdout %q, stderr %q; want %s", code, out, errOut, box.home)
	}
	code, out, _ = cliProc(t, append(run, "--cwd", "/", "--", "pwd")...)
	if code != 0 || out != "/\n" {
		t.Fatalf("nodes run --cwd /: exit %d, stdout %q", code, out)
	}
	code, out, errOut = cliProc(t, append(run, "--timeout", "2s", "--", "sh", "-c", "echo started; exec sleep 60")...)
	if code != exitRunTimedOut || out != "started\n" || !strings.Contains(errOut, "stopped the command at its timeout") {
		t.Fatalf("nodes run past --timeout: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = cliProc(t, append(run, "--json", "--", "sh", "-c", "exit 5")...)
	var rr struct {
		NodeID   string `json:"nodeId"`
		ExitCode int    `json:"exitCode"`
	}
	if code != 5 || json.Unmarshal([]byte(out), &rr) != nil || rr.ExitCode != 5 || rr.NodeID != box.id {
		t.Fatalf("nodes run --json: exit %d\n%s", code, out)
	}

	code, out, errOut = a.cli(t, "nodes", "notify", "--node", "build-box", "--title", "构建完成", "--body", "所有测试通过")
	if code != 0 || out != "Notified build-box (via notify-send).\n" {
		t.Fatalf("nodes notify: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(box.home, "notified")); err != nil || string(b) != "--app-name=Atrium\n--\n构建完成\n所有测试通过\n" {
		t.Fatalf("notify-send on the node got %q (%v)", b, err)
	}
	code, out, errOut = a.cli(t, "nodes", "describe", "build-box")
	for _, want := range []string{"Node:", "build-box", box.id, "Connected:", "yes, since", "system.notify,system.run,system.which", "In flight:"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("nodes describe: exit %d, want %q in\n%s\n%s", code, want, out, errOut)
		}
	}
	code, out, _ = a.cli(t, "nodes", "describe", box.id, "--json")
	var n nodes.Node
	if code != 0 || json.Unmarshal([]byte(out), &n) != nil || n.NodeID != box.id || !n.Connected || n.DisplayName != "build-box" {
		t.Fatalf("nodes describe --json: exit %d\n%s", code, out)
	}
	code, out, errOut = a.cli(t, "nodes", "invoke", "--node", "build-box", "--command", "system.which", "--params", `{"name":"sh"}`)
	var which struct{ Path string }
	if code != 0 || json.Unmarshal([]byte(out), &which) != nil || !strings.HasSuffix(which.Path, "/sh") {
		t.Fatalf("nodes invoke system.which: exit %d\n%s\n%s", code, out, errOut)
	}
	code, _, errOut = a.cli(t, "nodes", "invoke", "--node", "build-box", "--command", "system.which", "--params", `{"name":"no-such-program-xyz"}`)
	if code != 1 || !strings.Contains(errOut, "node build-box: system.which NOT_FOUND") {
		t.Fatalf("nodes invoke of a missing program: exit %d, stderr %q", code, errOut)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nodes", "run", "--node", "nosuch", "--", "true"}, 1, `no node "nosuch"; connected: build-box (` + box.id},
		{[]string{"nodes", "invoke", "--node", "build-box", "--command", "camera.snap"}, 1, "may not run camera.snap (allowed: system.notify, system.run, system.which) (camera and screen commands: `atrium node` offers them only where ffmpeg is installed"},
		{[]string{"nodes", "location", "get", "--node", "build-box", "--accuracy", "precise"}, 1, "may not run location.get"},
		{[]string{"nodes", "location", "get", "--node", "build-box", "--accuracy", "exact"}, 2, "want coarse, balanced or precise"},
		{[]string{"nodes", "run", "--node", "caps:camera", "--", "true"}, 1, "no connected node has caps camera; connected: build-box"},
		{[]string{"nodes", "invoke", "--node", "build-box", "--command", "system.which", "--params", "[1]"}, 2, "--params must be a JSON object"},
		{[]string{"nodes", "run", "--node", "build-box"}, 2, "needs the command to run after --"},
		{[]string{"nodes", "run", "--", "true"}, 2, "needs --node"},
		{[]string{"nodes", "run", "--node", "build-box", "ls", "-la"}, 2, "put the command after --"},
		{[]string{"nodes", "notify", "--node", "build-box"}, 2, "needs --title or --body"},
		{[]string{"nodes", "location"}, 2, "nodes location needs a subcommand: get"},
	} {
		code, _, errOut := a.cli(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}

	// Exec approvals "ask": the command waits for the person on the desktop,
	// and the CLI says so until someone answers there.
	a.startHostProc(t, "ask-box", nodehost.ModeAsk)
	admin := a.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"nodes", "run", "--node", "ask-box"}, append(a.flags, "--", "sh", "-c", "echo allowed")...)...)
	cmd.Env = []string{envCLIMain + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stdout strings.Builder
	stderr := &syncWriter{w: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	until(t, "the waiting-for-approval line", func() bool {
		return strings.Contains(stderr.String(), "atrium: waiting for approval on the desktop: ask-box asks whether to run ")
	})
	var asks struct{ Asks []nodes.ExecAsk }
	if err := admin.Call(ctx, "exec.ask.list", nil, &asks); err != nil || len(asks.Asks) != 1 {
		t.Fatalf("exec.ask.list: %+v %v", asks, err)
	}
	if err := admin.Call(ctx, "exec.ask.answer", map[string]any{"id": asks.Asks[0].ID, "decision": nodes.DecisionAllowOnce}, nil); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil || stdout.String() != "allowed\n" || !strings.Contains(stderr.String(), "atrium: approved once (person)") {
		t.Fatalf("nodes run after the approval: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
}

// TestNodesSelector (issue 22 item 5): --node caps:system with two hosts
// gives the work to the one with fewer invokes in flight, and when that
// one answers busy (an in-process host that runs one command at a time,
// running one) to the other; a name both hosts share is refused with both
// listed.
func TestNodesSelector(t *testing.T) {
	a := startNodeApp(t)
	one := a.startHostInProcess(t, "twin", nodehost.Options{MaxConcurrent: 1})
	many := a.startHostProc(t, "twin", nodehost.ModeFull)
	admin := a.admin(t)

	code, _, errOut := a.cli(t, "nodes", "describe", "twin")
	if code != 1 || !strings.Contains(errOut, `--node "twin" is ambiguous: it names 2 nodes`) || !strings.Contains(errOut, one) || !strings.Contains(errOut, many.id) {
		t.Fatalf("nodes describe of a shared name: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := a.cli(t, "nodes", "describe", "caps:system", "--json")
	var both struct{ Nodes []nodes.Node }
	if code != 0 || json.Unmarshal([]byte(out), &both) != nil || len(both.Nodes) != 2 {
		t.Fatalf("nodes describe caps:system: exit %d\n%s\n%s", code, out, errOut)
	}

	// Long runs that hold places: each marks that it runs, then sleeps;
	// they end when the test does (the hosts stop and kill them). One
	// answered busy (a host still sending the result of the run before)
	// is sent again.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	marks, held := t.TempDir(), 0
	hold := func(id string) {
		held++
		mark := filepath.Join(marks, strconv.Itoa(held))
		wg.Go(func() {
			for ctx.Err() == nil {
				err := admin.Call(ctx, nodes.MethodNodeInvoke, map[string]any{"nodeId": id, "command": "system.run",
					"params": map[string]any{"command": []string{"sh", "-c", `touch "$0"; exec sleep 120`, mark}}, "timeoutMs": 150_000}, nil)
				var ge *gateway.Error
				if !errors.As(err, &ge) || ge.Details["reason"] != nodes.ReasonBusy {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		until(t, "the held run to start", func() bool { _, err := os.Stat(mark); return err == nil })
	}
	inFlight := func(id string, want int) {
		until(t, "invokes in flight", func() bool {
			var n nodes.Node
			return admin.Call(ctx, nodes.MethodNodeDescribe, map[string]any{"nodeId": id}, &n) == nil && n.InvokesInFlight == want
		})
	}
	ranOn := func(what string) string {
		t.Helper()
		code, out, errOut := cliProc(t, append([]string{"nodes", "run", "--node", "caps:system", "--json"}, append(a.flags, "--", "true")...)...)
		var r struct{ NodeID string }
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("%s: nodes run caps:system: exit %d\n%s\n%s", what, code, out, errOut)
		}
		return r.NodeID
	}

	// Two runs on the process host: the in-process one is freer.
	hold(many.id)
	hold(many.id)
	inFlight(many.id, 2)
	if got := ranOn("fewest in flight"); got != one {
		t.Fatalf("with 2 invokes in flight on %s and none on %s, the run went to %s", many.id, one, got)
	}
	// One run on the in-process host fills it (MaxConcurrent 1): it is
	// tried first (1 in flight against 2), answers busy, and the run goes
	// to the other.
	hold(one)
	inFlight(one, 1)
	if got := ranOn("busy"); got != many.id {
		t.Fatalf("with %s busy, the run went to %s", one, got)
	}
}

// TestPickNamed: --node as an id, a name (case-insensitive; a node still
// listed after it disconnected does not make a connected one's name
// ambiguous) or an id prefix of 4 characters at least.
func TestPickNamed(t *testing.T) {
	all := []nodes.Node{
		{NodeID: "aaaa1111", DisplayName: "Build", Connected: true},
		{NodeID: "aaaa2222", DisplayName: "build", Connected: false},
		{NodeID: "bbbb3333", DisplayName: "phone", Connected: false},
		{NodeID: "bbbb4444", DisplayName: "phone", Connected: false},
		{NodeID: "cccc5555", DisplayName: "aaaa2222x", Connected: true},
	}
	ids := func(ns []nodes.Node) string {
		var out []string
		for _, n := range ns {
			out = append(out, n.NodeID)
		}
		return strings.Join(out, ",")
	}
	for spec, want := range map[string]string{
		"aaaa2222":  "aaaa2222",          // an id, even of a disconnected node
		"BUILD":     "aaaa1111",          // the connected one of a name
		"phone":     "bbbb3333,bbbb4444", // ambiguous: none connected
		"aaaa":      "aaaa1111,aaaa2222", // an ambiguous prefix
		"cccc":      "cccc5555",
		"ccc":       "", // too short for a prefix
		"aaaa2222x": "cccc5555",
		"nosuch":    "",
	} {
		if got := ids(pickNamed(all, spec)); got != want {
			t.Errorf("pickNamed(%q) = %q, want %q", spec, got, want)
		}
	}
}
