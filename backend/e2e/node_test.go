package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// envNodeNetns marks the test binary re-executed by TestNodeHostTwoProcesses
// inside a network namespace of its own; envNodeBin carries the atrium
// binary built outside (the namespace has no network for the Go proxy).
const (
	envNodeNetns = "ATRIUM_E2E_NODE_NETNS"
	envNodeBin   = "ATRIUM_E2E_NODE_BIN"
)

// nodeNetns decides where TestNodeHostTwoProcesses runs. In the parent it
// builds the binary and, when `unshare -n` and `ip` work (root), runs the
// test again inside a new network namespace with multicast on its loopback
// (BUILD-NOTES "mDNS") and returns done=true; the child returns
// mdns=true. Without a namespace the test runs here, on loopback, finding
// the gateway by the pairing URL instead of mDNS (and says so).
func nodeNetns(t *testing.T) (bin string, mdns, done bool) {
	t.Helper()
	if os.Getenv(envNodeNetns) == "1" {
		for _, args := range [][]string{{"link", "set", "lo", "up"}, {"link", "set", "lo", "multicast", "on"}, {"route", "add", "224.0.0.0/4", "dev", "lo"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
			}
		}
		return os.Getenv(envNodeBin), true, false
	}
	bin = buildAtrium(t)
	why := ""
	if _, err := exec.LookPath("ip"); err != nil {
		why = "ip (iproute2) is not installed"
	} else if out, err := exec.Command("unshare", "-n", "true").CombinedOutput(); err != nil {
		why = fmt.Sprintf("unshare -n failed (needs root): %v %s", err, strings.TrimSpace(string(out)))
	}
	if why != "" {
		t.Logf("mDNS part skipped: %s; the node finds the gateway by the pairing URL", why)
		return bin, false, false
	}
	cmd := exec.Command("unshare", "-n", "--", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), envNodeNetns+"=1", envNodeBin+"="+bin)
	out, err := cmd.CombinedOutput()
	t.Logf("in a new network namespace:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test in the network namespace failed: %v", err)
	}
	return bin, true, true
}

// adminSession is an operator-token connection to the app (loopback), kept
// open to make requests and receive events (exec asks).
type adminSession struct {
	t      *testing.T
	c      *websocket.Conn
	mu     sync.Mutex
	next   int
	waits  map[string]chan frame
	events chan frame
}

type frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload"`
	Error   json.RawMessage `json:"error"`
}

func newAdminSession(t *testing.T, uiURL string) *adminSession {
	t.Helper()
	base, token, ok := strings.Cut(uiURL, "/#token=")
	if !ok {
		t.Fatalf("no token in %s", uiURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/ws", nil)
	if err != nil {
		t.Fatalf("dial gateway: %v", err)
	}
	c.SetReadLimit(16 << 20)
	s := &adminSession{t: t, c: c, waits: map[string]chan frame{}, events: make(chan frame, 256)}
	go func() {
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				close(s.events)
				return
			}
			var f frame
			if json.Unmarshal(data, &f) != nil {
				continue
			}
			switch f.Type {
			case "res":
				s.mu.Lock()
				ch := s.waits[f.ID]
				s.mu.Unlock()
				if ch != nil {
					ch <- f
				}
			case "event":
				select {
				case s.events <- f:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "") })
	if _, err := s.try("connect", map[string]any{
		"minProtocol": 1, "maxProtocol": 1, "role": "operator",
		"client": map[string]any{"id": "atrium-e2e", "version": "test", "platform": "linux", "mode": "test", "instanceId": "e2e-admin"},
		"auth":   map[string]any{"token": token},
	}); err != nil {
		t.Fatalf("connect: %v", err)
	}
	return s
}

// try makes a request and returns its payload or the refusal.
func (s *adminSession) try(method string, params map[string]any) (json.RawMessage, error) {
	s.mu.Lock()
	s.next++
	id := fmt.Sprint(s.next)
	ch := make(chan frame, 1)
	s.waits[id] = ch
	s.mu.Unlock()
	if params == nil {
		params = map[string]any{}
	}
	if method != "connect" {
		params["idempotencyKey"] = fmt.Sprintf("e2e-%d-%d", time.Now().UnixNano(), s.next)
	}
	b, _ := json.Marshal(map[string]any{"type": "req", "id": id, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := s.c.Write(ctx, websocket.MessageText, b); err != nil {
		return nil, fmt.Errorf("write %s: %w", method, err)
	}
	select {
	case f := <-ch:
		if !f.OK {
			return nil, fmt.Errorf("%s refused: %s", method, f.Error)
		}
		return f.Payload, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no answer", method)
	}
}

func (s *adminSession) call(method string, params map[string]any) json.RawMessage {
	s.t.Helper()
	p, err := s.try(method, params)
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

// nodeProc is a running `atrium node` whose --json status lines are read.
type nodeProc struct {
	cmd    *exec.Cmd
	lines  chan map[string]any
	stderr *strings.Builder
	errMu  *sync.Mutex
	stop   func()
}

func startNode(t *testing.T, bin, state string, args ...string) *nodeProc {
	t.Helper()
	return startNodeEnv(t, bin, state, nil, args...)
}

// startNodeEnv is startNode with env (KEY=VALUE) added to the test's
// environment (later entries win: DISPLAY, PATH).
func startNodeEnv(t *testing.T, bin, state string, env []string, args ...string) *nodeProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"node", "--state", state, "--json", "--verbose"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	var errMu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { errMu.Lock(); defer errMu.Unlock(); return stderr.Write(p) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &nodeProc{cmd: cmd, lines: make(chan map[string]any, 4096), stderr: &stderr, errMu: &errMu}
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				n.lines <- m
			}
		}
		cmd.Wait()
		close(exited)
		close(n.lines)
	}()
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Errorf("atrium node did not stop on SIGINT")
			}
			if t.Failed() {
				errMu.Lock()
				t.Logf("atrium node log:\n%s", stderr.String())
				errMu.Unlock()
			}
		})
	}
	t.Cleanup(n.stop)
	return n
}

// log is what the node wrote to stderr so far (its --verbose log).
func (n *nodeProc) log() string {
	n.errMu.Lock()
	defer n.errMu.Unlock()
	return n.stderr.String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitState waits for the status line with state want and returns it.
func (n *nodeProc) waitState(t *testing.T, want string) map[string]any {
	t.Helper()
	timeout := time.After(120 * time.Second)
	for {
		select {
		case m, ok := <-n.lines:
			if !ok {
				t.Fatalf("atrium node exited while waiting for %q (status %v)", want, n.cmd.ProcessState)
			}
			if m["state"] == want {
				return m
			}
		case <-timeout:
			t.Fatalf("atrium node never reached %q", want)
		}
	}
}

// runBin runs the binary and returns stdout, failing the test on error.
func runBin(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// nodeToken reads the node token from the node's node.json.
func nodeToken(t *testing.T, state string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, "node.json"))
	if err != nil {
		return ""
	}
	var c struct {
		Tokens map[string]string `json:"tokens"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("node.json: %v", err)
	}
	return c.Tokens["node"]
}

// invokeResult is node.invoke's answer.
type invokeResult struct {
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload"`
	Error   json.RawMessage `json:"error"`
}

// waitConnected waits until node.list shows the node connected: the gateway
// registers a connection just after its hello-ok, so the node's own
// "paired" may come first.
func (s *adminSession) waitConnected(nodeID string) {
	s.t.Helper()
	waitUntil(s.t, "node "+nodeID[:12]+" connected in node.list", func() bool {
		var l struct {
			Nodes []struct {
				NodeID    string `json:"nodeId"`
				Connected bool   `json:"connected"`
			} `json:"nodes"`
		}
		if json.Unmarshal(s.call("node.list", nil), &l) != nil {
			return false
		}
		for _, n := range l.Nodes {
			if n.NodeID == nodeID && n.Connected {
				return true
			}
		}
		return false
	})
}

func (s *adminSession) invoke(nodeID, command string, params any) invokeResult {
	s.t.Helper()
	raw := s.call("node.invoke", map[string]any{"nodeId": nodeID, "command": command, "params": params, "timeoutMs": 120000})
	var r invokeResult
	if err := json.Unmarshal(raw, &r); err != nil {
		s.t.Fatalf("node.invoke payload %s: %v", raw, err)
	}
	return r
}

// answerAsks answers every exec ask the admin connection sees with decision
// and reports the asked commands on the returned channel.
func (s *adminSession) answerAsks(decision string) <-chan []string {
	asked := make(chan []string, 16)
	go func() {
		for f := range s.events {
			if f.Event != "exec.ask.requested" {
				continue
			}
			var a struct {
				ID      string   `json:"id"`
				Command []string `json:"command"`
			}
			if json.Unmarshal(f.Payload, &a) != nil {
				continue
			}
			go s.try("exec.ask.answer", map[string]any{"id": a.ID, "decision": decision})
			select {
			case asked <- a.Command:
			default:
			}
		}
	}()
	return asked
}

// TestNodeHostTwoProcesses is issue 16's two-process test: `atrium serve`
// with TLS on 127.0.0.2 and mDNS, `atrium pair --png` read back by zbarimg,
// `atrium node` finding the gateway by mDNS (in a network namespace of its
// own; by the pairing URL when no namespace can be made), approved with
// `atrium nodes approve`, answering node.invoke system.run (asked through
// the desktop's exec ask); then a rotated token, a gateway restart, a node
// restart, a revoked token and a stale token, each ending paired again by a
// repair, the device key never changed and the pairing record never lost.
func TestNodeHostTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the app and a node")
	}
	if _, err := exec.LookPath("zbarimg"); err != nil {
		t.Skip("e2e: zbarimg (Debian zbar-tools) reads the pairing QR code; `make test` installs it")
	}
	bin, mdns, done := nodeNetns(t)
	if done {
		return
	}
	tmp := t.TempDir()
	home, ws, state := filepath.Join(tmp, "home"), filepath.Join(tmp, "ws"), filepath.Join(tmp, "node")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port := fmt.Sprint(freePort(t))
	uiURL, stopServe := serve(t, bin, home, ws, mustAtoi(t, port), nil, "--bind", "127.0.0.2")
	admin := newAdminSession(t, uiURL)
	hp := []string{"--home", home, "--workspace", ws, "--port", port}

	// The QR code, read back from the PNG as a phone's camera would.
	png := filepath.Join(tmp, "pair.png")
	runBin(t, bin, append([]string{"pair", "--png", png}, hp...)...)
	out, err := exec.Command("zbarimg", "-q", "--raw", "--nodbus", png).Output()
	if err != nil {
		t.Fatalf("zbarimg %s: %v", png, err)
	}
	pairURL := strings.TrimSpace(string(out))
	if !strings.HasPrefix(pairURL, "https://127.0.0.2:"+port+"/pair#") {
		t.Fatalf("QR code holds %q, want the pairing URL on https://127.0.0.2:%s", pairURL, port)
	}
	_, frag, _ := strings.Cut(pairURL, "#")
	code := ""
	for _, kv := range strings.Split(frag, "&") {
		if v, ok := strings.CutPrefix(kv, "c="); ok {
			code = v
		}
	}
	if code == "" {
		t.Fatalf("no setup code in %q", pairURL)
	}

	start := time.Now()
	var node *nodeProc
	if mdns {
		node = startNode(t, bin, state, "--discover", "--discover-interfaces", "lo", "--code", code, "--name", "e2e-node")
	} else {
		node = startNode(t, bin, state, "--url", pairURL, "--name", "e2e-node")
	}
	pend := node.waitState(t, "pending")
	pendingAfter := time.Since(start)
	reqID, _ := pend["requestId"].(string)
	deviceID, _ := pend["deviceId"].(string)
	if reqID == "" || deviceID == "" || pend["url"] != "wss://127.0.0.2:"+port+"/ws" {
		t.Fatalf("pending status %v", pend)
	}
	keyBefore, err := os.ReadFile(filepath.Join(state, "device.key"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(runBin(t, bin, append([]string{"nodes", "pending"}, hp...)...), reqID) {
		t.Fatalf("`atrium nodes pending` does not list %s", reqID)
	}
	approveAt := time.Now()
	runBin(t, bin, append([]string{"nodes", "approve", reqID}, hp...)...)
	node.waitState(t, "paired")
	pairedAfter := time.Since(approveAt)
	admin.waitConnected(deviceID)
	r := admin.invoke(deviceID, "system.which", map[string]any{"name": "sh"})
	firstInvoke := time.Since(approveAt)
	if !r.OK || !strings.Contains(string(r.Payload), `"path":"/`) {
		t.Fatalf("system.which: %+v", r)
	}
	t.Logf("machine part: start → pending %v; approve → paired %v; approve → first invoke answered %v (mDNS %v)",
		pendingAfter.Round(time.Millisecond), pairedAfter.Round(time.Millisecond), firstInvoke.Round(time.Millisecond), mdns)
	if path := os.Getenv("ATRIUM_NODE_BENCH_OUT"); path != "" {
		line, _ := json.Marshal(map[string]any{"mdns": mdns, "startToPendingMs": pendingAfter.Milliseconds(),
			"approveToPairedMs": pairedAfter.Milliseconds(), "approveToFirstInvokeMs": firstInvoke.Milliseconds()})
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			f.Write(append(line, '\n'))
			f.Close()
		}
	}

	// system.run under the node's default exec approvals (ask): the ask
	// reaches the desktop's admin connection, which allows it once.
	asked := admin.answerAsks("allow-once")
	r = admin.invoke(deviceID, "system.run", map[string]any{"command": []string{"sh", "-c", "echo hi; echo err >&2; exit 3"}})
	var run struct {
		ExitCode int    `json:"exitCode"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	if !r.OK || json.Unmarshal(r.Payload, &run) != nil || run.ExitCode != 3 || run.Stdout != "hi\n" || run.Stderr != "err\n" {
		t.Fatalf("system.run: %+v", r)
	}
	select {
	case cmd := <-asked:
		if len(cmd) != 3 || !strings.HasSuffix(cmd[0], "/sh") {
			t.Fatalf("asked about %q", cmd)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exec ask reached the desktop")
	}

	// Rotation: the node keeps the new token.
	tok := nodeToken(t, state)
	admin.call("device.token.rotate", map[string]any{"deviceId": deviceID, "role": "node"})
	waitUntil(t, "the rotated token in node.json", func() bool { now := nodeToken(t, state); return now != "" && now != tok })

	// The gateway restarts: the node reconnects with the rotated token.
	stopServe()
	uiURL, stopServe = serve(t, bin, home, ws, mustAtoi(t, port), nil, "--bind", "127.0.0.2")
	admin = newAdminSession(t, uiURL)
	node.waitState(t, "paired")
	admin.waitConnected(deviceID)
	if r := admin.invoke(deviceID, "system.which", map[string]any{"name": "sh"}); !r.OK {
		t.Fatalf("after the gateway restarted: %+v", r)
	}

	// The node restarts: no flags, the state dir has everything.
	node.stop()
	node = startNode(t, bin, state)
	node.waitState(t, "paired")
	admin.waitConnected(deviceID)
	if r := admin.invoke(deviceID, "system.which", map[string]any{"name": "sh"}); !r.OK {
		t.Fatalf("after the node restarted: %+v", r)
	}

	// Revoked: the node is disconnected, its token refused; it asks for a
	// repair with its key, and the pairing record stays meanwhile.
	admin.call("device.token.revoke", map[string]any{"deviceId": deviceID, "role": "node"})
	node.waitState(t, "repair")
	pend = node.waitState(t, "pending")
	if !strings.Contains(string(admin.call("device.list", nil)), deviceID) {
		t.Fatal("the revoked device's pairing record is gone")
	}
	runBin(t, bin, append([]string{"nodes", "approve", pend["requestId"].(string)}, hp...)...)
	node.waitState(t, "paired")
	admin.waitConnected(deviceID)
	if r := admin.invoke(deviceID, "system.which", map[string]any{"name": "sh"}); !r.OK {
		t.Fatalf("after the repair: %+v", r)
	}

	// A stale token (node.json from an old backup): a repair, not a lost
	// pairing.
	node.stop()
	cfgPath := filepath.Join(state, "node.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cur := nodeToken(t, state)
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(data), cur, "stale-"+cur[:8], 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	node = startNode(t, bin, state)
	node.waitState(t, "repair")
	pend = node.waitState(t, "pending")
	if !strings.Contains(string(admin.call("device.list", nil)), deviceID) {
		t.Fatal("a stale token lost the pairing record")
	}
	runBin(t, bin, append([]string{"nodes", "approve", pend["requestId"].(string)}, hp...)...)
	node.waitState(t, "paired")
	admin.waitConnected(deviceID)
	if r := admin.invoke(deviceID, "system.which", map[string]any{"name": "sh"}); !r.OK {
		t.Fatalf("after the stale-token repair: %+v", r)
	}
	if keyAfter, _ := os.ReadFile(filepath.Join(state, "device.key")); string(keyAfter) != string(keyBefore) {
		t.Fatal("the node's device key changed")
	}
	node.stop()
	stopServe()
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitUntil polls cond (generously: it checks an outcome, not a speed).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
