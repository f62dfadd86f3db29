package tools

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/audit"
)

type execOut struct {
	ExitCode    int    `json:"exitCode"`
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	StdoutBytes int64  `json:"stdoutBytes"`
	Truncated   bool   `json:"truncated"`
	Sandbox     string `json:"sandbox"`
	Binary      string `json:"binary"`
}

func TestExecApprovals(t *testing.T) {
	t.Run("deny", func(t *testing.T) {
		e := newTestEnv(t, Options{Exec: &ExecOptions{Sandbox: SandboxOff}})
		res := e.call(Exec, map[string]any{"argv": []string{"echo", "hi"}})
		if res.Status != agent.StatusDenied || e.newest().Result != audit.Denied || e.newest().Operation != Exec {
			t.Fatalf("deny: %+v / %+v", res, e.newest())
		}
	})
	t.Run("allowlist", func(t *testing.T) {
		echo, err := exec.LookPath("echo")
		if err != nil {
			t.Skip("no echo binary")
		}
		e := newTestEnv(t, Options{Exec: &ExecOptions{Approval: ApprovalAllowlist, Allowlist: []string{filepath.Dir(echo) + "/ech?"}, Sandbox: SandboxOff}})
		res := e.call(Exec, map[string]any{"argv": []string{"echo", "hello", "world"}})
		if res.Status != agent.StatusOK || dataOf[execOut](t, res).Stdout != "hello world\n" {
			t.Fatalf("allowlisted: %+v", res)
		}
		if a := e.newest(); a.Result != audit.Allowed || !strings.Contains(a.Reason, "allowlist") {
			t.Errorf("audit %+v", a)
		}
		res = e.call(Exec, map[string]any{"argv": []string{"true"}})
		if res.Status != agent.StatusDenied || !strings.Contains(res.Error, "allowlist") {
			t.Fatalf("not allowlisted: %+v", res)
		}
		// A relative path with folders, and a dir outside the allowed ones.
		if res := e.call(Exec, map[string]any{"argv": []string{"./echo"}}); res.Status != agent.StatusError {
			t.Errorf("relative binary: %+v", res)
		}
		if res := e.call(Exec, map[string]any{"argv": []string{"echo"}, "dir": e.outside}); res.Status != agent.StatusDenied {
			t.Errorf("dir outside: %+v", res)
		}
	})
	t.Run("ask", func(t *testing.T) {
		answers := []bool{true, false}
		var asked []agent.PermissionRequest
		p := agent.NewPermissions(agent.PermissionOptions{Asker: agent.AskerFunc(func(_ context.Context, r agent.PermissionRequest) (bool, error) {
			asked = append(asked, r)
			a := answers[0]
			answers = answers[1:]
			return a, nil
		})})
		e := newTestEnv(t, Options{Exec: &ExecOptions{Approval: ApprovalAsk, Approver: p, Sandbox: SandboxOff}})
		if res := e.call(Exec, map[string]any{"argv": []string{"echo", "one"}}); res.Status != agent.StatusOK {
			t.Fatalf("approved: %+v", res)
		}
		if res := e.call(Exec, map[string]any{"argv": []string{"echo", "two"}}); res.Status != agent.StatusDenied {
			t.Fatalf("refused: %+v", res)
		}
		if len(asked) != 2 || asked[0].Kind != agent.KindExec || asked[0].ReasonCode != agent.ReasonCodeExecRun || asked[0].ReasonParams["command"] == "" || asked[0].ReasonParams["dir"] == "" || !strings.Contains(asked[1].ArgsSummary, "echo two") {
			t.Errorf("questions %+v", asked)
		}
	})
	t.Run("full: exit code, output cap, timeout", func(t *testing.T) {
		e := newTestEnv(t, Options{Exec: &ExecOptions{Approval: ApprovalFull, Sandbox: SandboxOff, MaxOutput: 100}})
		res := e.call(Exec, map[string]any{"argv": []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
		if o := dataOf[execOut](t, res); res.Status != agent.StatusOK || o.ExitCode != 3 || o.Stdout != "out\n" || o.Stderr != "err\n" {
			t.Fatalf("exit: %+v", res)
		}
		res = e.call(Exec, map[string]any{"argv": []string{"sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x"}})
		if o := dataOf[execOut](t, res); len(o.Stdout) != 100 || o.StdoutBytes != 5000 || !o.Truncated {
			t.Fatalf("cap: %d bytes kept of %d, truncated %v", len(o.Stdout), o.StdoutBytes, o.Truncated)
		}
		start := time.Now()
		res = e.call(Exec, map[string]any{"argv": []string{"sh", "-c", "sleep 30 & sleep 30"}, "timeoutSec": 0.3})
		if res.Status != agent.StatusError || !strings.Contains(res.Error, "timeout") || time.Since(start) > 5*time.Second {
			t.Fatalf("timeout: %+v after %s", res, time.Since(start))
		}
	})
}

func TestExecSandbox(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap (bwrap) is not installed: the sandbox test needs it (apt-get install bubblewrap)")
	}
	// Some containers forbid the namespaces bwrap needs; that is the
	// machine, not the tool.
	if out, err := exec.Command("bwrap", "--ro-bind", "/", "/", "--unshare-all", "true").CombinedOutput(); err != nil {
		t.Skipf("bwrap cannot create a sandbox on this machine (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	allowed := t.TempDir()
	e := newTestEnv(t, Options{Exec: &ExecOptions{Approval: ApprovalFull, Sandbox: SandboxRequire, Dirs: []string{allowed}}})
	run := func(script string) execOut {
		t.Helper()
		res := e.call(Exec, map[string]any{"argv": []string{"sh", "-c", script}})
		if res.Status != agent.StatusOK {
			t.Fatalf("%s: %+v", script, res)
		}
		return dataOf[execOut](t, res)
	}
	if o := run("echo inside > made.txt && cat made.txt && pwd"); o.Sandbox != "bwrap" || o.Stdout != "inside\n"+allowed+"\n" {
		t.Fatalf("allowed dir: %+v", o)
	}
	if b, _ := os.ReadFile(filepath.Join(allowed, "made.txt")); string(b) != "inside\n" {
		t.Fatalf("file not written through: %q", b)
	}
	// The workspace, the folder outside it, /etc/passwd and /root are not there.
	for _, p := range []string{filepath.Join(e.ws, "notes", "todo.txt"), filepath.Join(e.outside, "secret.txt"), "/etc/passwd"} {
		if o := run("cat " + p + " 2>&1; echo rc=$?"); !strings.Contains(o.Stdout, "No such file") {
			t.Errorf("%s visible in the sandbox: %q", p, o.Stdout)
		}
	}
	if o := run("echo x > /usr/x 2>&1; echo rc=$?"); strings.Contains(o.Stdout, "rc=0") {
		t.Errorf("/usr writable: %q", o.Stdout)
	}
	// No network: not even loopback to a server outside.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") }))
	defer srv.Close()
	port := srv.Listener.Addr().String()[strings.LastIndex(srv.Listener.Addr().String(), ":")+1:]
	probe := "exec 3<>/dev/tcp/127.0.0.1/" + port + " 2>&1; echo rc=$?"
	if out, err := exec.Command("bash", "-c", probe).Output(); err != nil || !strings.Contains(string(out), "rc=0") {
		t.Fatalf("control: the probe fails outside the sandbox too: %q %v", out, err)
	}
	res := e.call(Exec, map[string]any{"argv": []string{"bash", "-c", probe}})
	if o := dataOf[execOut](t, res); res.Status != agent.StatusOK || strings.Contains(o.Stdout, "rc=0") {
		t.Errorf("network reachable from the sandbox: %+v", res)
	}
}

func TestSandboxRequireWithoutBwrap(t *testing.T) {
	_, err := newExecTool(&env{o: Options{}}, ExecOptions{Approval: ApprovalFull, Sandbox: SandboxRequire, Bwrap: "no-such-bwrap-binary", Dirs: []string{t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("err %v", err)
	}
}
