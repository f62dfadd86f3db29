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
// addr, trying `workers` connections at a time; its source addresses are
// <prefix>.1 … <prefix>.250.
func startAttacker(t testing.TB, addr, mode string, n int, prefix string, workers int) *attacker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, lanAttackerArg, addr, mode, strconv.Itoa(n), prefix, strconv.Itoa(workers), "90s")
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
			atk := []*attacker{startAttacker(t, lanAddr, tc.mode, n, "127.0.3", 64), startAttacker(t, lanAddr, tc.mode, n, "127.0.4", 64)}
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

// procStatus reads a "kB" field of /proc/self/status through f (opened
// beforehand; nil where there is no /proc), in MiB.
func procStatus(f *os.File, field string) float64 {
	if f == nil {
		return 0
	}
	buf := make([]byte, 8192)
	n, _ := f.ReadAt(buf, 0)
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

// openFDs counts this process's open descriptors through dir, /proc/self/fd
// opened beforehand (nil: 0).
func openFDs(dir *os.File) int {
	if dir == nil {
		return 0
	}
	if _, err := dir.Seek(0, io.SeekStart); err != nil {
		return 0
	}
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return 0
	}
	return len(names)
}

// TestSlowBodyLoad measures the slow-body attack of issue 21 as it was
// reported: two attacker processes, 10,000 connections each (override with
// ATRIUM_SLOWBODY_N), against the real app over TLS with the process's own
// open-file limit. It logs the connections the attackers hold, the app
// process's RSS and open descriptors while they hold them, and how long
// the person, from another process on 127.0.0.1, takes to connect and read
// MEMORY.md (or that it failed within 30 s), before, during and after. A
// measurement, not a check: run it on purpose (docs/BENCHMARKS.md),
//
//	ATRIUM_SLOWBODY_LOAD=1 go test -count=1 -run TestSlowBodyLoad -v ./backend/atrium
func TestSlowBodyLoad(t *testing.T) {
	if os.Getenv("ATRIUM_SLOWBODY_LOAD") == "" {
		t.Skip("a load measurement: set ATRIUM_SLOWBODY_LOAD=1 (docs/BENCHMARKS.md)")
	}
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("ATRIUM_SLOWBODY_N")); err == nil && v > 0 {
		n = v
	}
	// What is measured during the attack is opened before it: the process
	// may have no descriptor left then.
	fdDir, _ := os.Open("/proc/self/fd")
	status, _ := os.Open("/proc/self/status")
	t.Cleanup(func() { _ = fdDir.Close(); _ = status.Close() })
	a, _ := startAppWith(t, func(string) string { return "" }, func(_ string, o *Options) {
		o.Bind = attackBind
		o.MDNSInterfaces = []string{"atrium-none0"}
	})
	exe, err := os.Executable()
	must(t, err)
	pc := exec.Command(exe, lanAttackerArg, "admin", a.WSURL())
	pc.Env = append(os.Environ(), "ATRIUM_PROBE_TOKEN="+a.Token)
	pc.Stderr = os.Stderr
	pin, err := pc.StdinPipe()
	must(t, err)
	pout, err := pc.StdoutPipe()
	must(t, err)
	must(t, pc.Start())
	t.Cleanup(func() { _ = pin.Close(); _ = pc.Wait() })
	probeOut := bufio.NewScanner(pout)
	probe := func(when string) {
		t.Helper()
		if _, err := io.WriteString(pin, "\n"); err != nil {
			t.Fatal(err)
		}
		if !probeOut.Scan() {
			t.Fatalf("the probe ended: %v", probeOut.Err())
		}
		t.Logf("%s: the person (another process) connects and reads MEMORY.md: %s", when, probeOut.Text())
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	t.Logf("open-file limit %d; before the attack: RSS %.0f MiB, %d descriptors", lim.Cur, procStatus(status, "VmRSS"), openFDs(fdDir))
	probe("before the attack")
	lanAddr := a.LAN().Addresses[0]
	start := time.Now()
	// 32 at a time each: fewer than the 128 handshakes main let wait at
	// once, so that no cap stops the attack before its request is sent.
	atk := []*attacker{startAttacker(t, lanAddr, "slowbody", n, "127.0.5", 32), startAttacker(t, lanAddr, "slowbody", n, "127.0.6", 32)}
	held, peak := 0, 0
	for _, k := range atk {
		r := k.report(t, "ready")
		t.Logf("attacker %s ready: %+v", k.name, r)
		held += r.Open
		peak += r.Peak
	}
	t.Logf("after %v of attack (2 × %d tried): the attackers hold %d connections (peaks %d); app process RSS %.0f MiB (peak %.0f MiB), %d descriptors",
		time.Since(start).Round(time.Second), n, held, peak, procStatus(status, "VmRSS"), procStatus(status, "VmHWM"), openFDs(fdDir))
	probe("during the attack")
	for _, k := range atk {
		_ = k.stdin.Close()
	}
	for _, k := range atk {
		t.Logf("attacker %s done: %+v", k.name, k.report(t, "done"))
	}
	t.Logf("after the attack: RSS %.0f MiB, %d descriptors", procStatus(status, "VmRSS"), openFDs(fdDir))
	probe("after the attack")
}
