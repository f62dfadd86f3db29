//go:build unix

package atrium

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// lowerFileLimit sets this process's soft open-file limit to n for the
// test (the hard limit is left alone, so it can be restored), or skips
// the test when the limit is already lower. The app under test runs in
// this process; the attackers, other processes, get the usual limit (the
// Go runtime raises it again as they start).
func lowerFileLimit(t testing.TB, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < n || lim.Max < n {
		t.Skipf("open-file limit %d/%d is below the %d this test sets", lim.Cur, lim.Max, n)
	}
	orig := lim
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
}

// attacker is a lanAttacker process.
type attacker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	name  string
}

// startAttacker runs this test binary as a lanAttacker (TestMain) against
// addr; its source addresses are <prefix>.1 … <prefix>.250.
func startAttacker(t testing.TB, addr, mode string, n int, prefix string) *attacker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, lanAttackerArg, addr, mode, strconv.Itoa(n), prefix, "64", "90s")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	k := &attacker{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout), name: prefix}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return k
}

// report reads the attacker's next report (its process ends it within its
// own bounds: every dial and handshake 5 s, the final wait 90 s).
func (k *attacker) report(t testing.TB, phase string) attackReport {
	t.Helper()
	for k.out.Scan() {
		var r attackReport
		if json.Unmarshal(k.out.Bytes(), &r) == nil && r.Phase == phase {
			return r
		}
	}
	t.Fatalf("attacker %s ended without a %q report: %v", k.name, phase, k.out.Err())
	return attackReport{}
}

// TestAdversarialSlowBody: the slow-body attack of issue 21 from two other
// processes. Each opens 1,500 TLS connections to the LAN listener from 250
// addresses and sends `GET /healthz` with Content-Length: 1000 and no
// body, keeping up to 1,500 open (reopening what the server closes) while
// the person, on 127.0.0.1, connects and reads a file through the gateway.
// The app's process has an open-file limit of 1,024 here (on main the
// attack took it to its limit: new connections, the person's too, were
// not accepted). Then every attacker connection must be closed by the
// server. Second, the same with connections that complete TLS and send
// nothing, with the unauthenticated caps lifted (Options.MaxLANPending):
// the open-file budget alone keeps room for the person.
func TestAdversarialSlowBody(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		lift       bool
	}{
		{"slow_body,_default_caps", "slowbody", false},
		{"idle_TLS,_caps_lifted_(the_open-file_budget)", "idle", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lowerFileLimit(t, 1024)
			a, _ := startAppWith(t, func(string) string { return "" }, func(_ string, o *Options) {
				o.Bind = attackBind
				o.MDNSInterfaces = []string{"atrium-none0"}
				if tc.lift {
					o.MaxLANPending, o.MaxLANPendingPerAddr = 1<<20, 1<<20
				}
			})
			lanAddr := a.LAN().Addresses[0]
			const n = 1500
			atk := []*attacker{startAttacker(t, lanAddr, tc.mode, n, "127.0.3"), startAttacker(t, lanAddr, tc.mode, n, "127.0.4")}
			var ready []attackReport
			for _, k := range atk {
				ready = append(ready, k.report(t, "ready"))
			}
			t.Logf("attackers ready: %+v", ready)

			// The person, during the attack.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			admin, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token, Role: gateway.RoleOperator,
				Client: gateway.ClientInfo{ID: "attack-admin", Version: "test", Platform: "linux", Mode: "test", InstanceID: "attack-admin"}})
			if err != nil {
				t.Fatalf("the person's connection on 127.0.0.1 during the attack: %v", err)
			}
			defer admin.Close()
			var got struct{ Text string }
			if err := admin.Call(ctx, "memory.get", map[string]any{"path": "MEMORY.md"}, &got); err != nil || !strings.Contains(got.Text, "deploy key rotation") {
				t.Fatalf("memory.get MEMORY.md during the attack: %q %v", got.Text, err)
			}

			for _, k := range atk {
				_ = k.stdin.Close() // stop reopening
			}
			for _, k := range atk {
				done := k.report(t, "done")
				t.Logf("attacker %s done: %+v", k.name, done)
				if done.Opened == 0 && done.Refused == 0 {
					t.Errorf("attacker %s made no connection: %+v", k.name, done)
				}
				if done.Open != 0 {
					t.Errorf("attacker %s: %d of its %d connections still open (the server closed %d): %+v",
						k.name, done.Open, done.Opened, done.Closed, done)
				}
				if tc.mode == "slowbody" && done.Answered > 0 && done.Statuses["413"] != done.Answered {
					t.Errorf("attacker %s: answers %v, want 413 only", k.name, done.Statuses)
				}
			}
		})
	}
}
