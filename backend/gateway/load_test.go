package gateway

// Load harness for issue 14 items 1 and 2 (figures in docs/BENCHMARKS.md).
// The gateway runs in a child process (this test binary re-executed) so
// that its RSS is measured alone; the clients run here. Run with
//
//	ATRIUM_GATEWAY_LOAD=1 go test -run 'TestLoad' -v -timeout 20m ./backend/gateway
//
// Skipped otherwise: it takes minutes and most of the machine.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

const (
	loadEnv       = "ATRIUM_GATEWAY_LOAD"
	loadServerEnv = "ATRIUM_GATEWAY_LOAD_SERVER" // JSON Options for the child
)

// TestLoadServer is the child process: a gateway with "echo" and
// "bench.flood" {n, size} (broadcasts n events of size bytes), serving until
// killed. It prints "URL <ws url>" once listening.
func TestLoadServer(t *testing.T) {
	spec := os.Getenv(loadServerEnv)
	if spec == "" {
		t.Skip("child process of the load harness only")
	}
	var lim loadLimits
	if err := json.Unmarshal([]byte(spec), &lim); err != nil {
		t.Fatal(err)
	}
	opts := Options{Token: testToken, Addr: "127.0.0.1:0", Logger: quietLogger(),
		MaxUnauthenticated: lim.MaxUnauthenticated, MaxUnauthenticatedPerIP: lim.MaxUnauthenticatedPerIP}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("echo", Read(Everyone), echo)
	s.Handle("bench.flood", Write(Everyone), func(_ context.Context, call *Call) (any, error) {
		var p struct{ N, Size int }
		if err := DecodeParams(call, &p); err != nil {
			return nil, err
		}
		blob := map[string]string{"blob": strings.Repeat("x", p.Size)}
		for range p.N {
			s.Broadcast("flood", blob)
		}
		return map[string]int{"sent": p.N}, nil
	})
	s.Handle("bench.conns", Read(Everyone), func(context.Context, *Call) (any, error) {
		return map[string]int{"authed": s.numAuthed()}, nil
	})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("URL ws://%s/ws\n", s.Addr())
	_ = s.Run(context.Background())
}

// loadLimits are the Options the child takes (zero: default).
type loadLimits struct{ MaxUnauthenticated, MaxUnauthenticatedPerIP int }

// loadServer starts the child with lim and returns its ws URL and pid.
func loadServer(t *testing.T, lim loadLimits) (string, int) {
	t.Helper()
	spec, err := json.Marshal(lim)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadServer$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), loadServerEnv+"="+string(spec))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "URL "); ok {
			return u, cmd.Process.Pid
		}
	}
	t.Fatalf("load server printed no URL: %v", sc.Err())
	return "", 0
}

// procKiB reads a "Vm..." line of /proc/<pid>/status in KiB.
func procKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// prober calls echo in a loop over an authenticated connection and keeps
// the round-trip latencies until stop.
type prober struct {
	mu    sync.Mutex
	lat   []time.Duration
	fails int
	stop  chan struct{}
	done  chan struct{}
}

func startProber(t *testing.T, url string) *prober {
	ctx := context.Background()
	c, err := Dial(ctx, ClientOptions{URL: url, Token: testToken, Client: ClientInfo{ID: "prober"}})
	if err != nil {
		t.Fatal(err)
	}
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer c.Close()
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			start := time.Now()
			err := c.Call(cctx, "echo", map[string]int{"n": 1}, nil)
			cancel()
			p.mu.Lock()
			if err != nil {
				p.fails++
			} else {
				p.lat = append(p.lat, time.Since(start))
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// baseline measures the echo latency for d with nothing else going on.
func baseline(t *testing.T, url string, d time.Duration) string {
	p := startProber(t, url)
	time.Sleep(d)
	n, fails, p50, p99, mx := p.finish()
	return fmt.Sprintf("%d echo calls, %d failed, p50 %v, p99 %v, max %v", n, fails, p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond))
}

func (p *prober) finish() (n, fails int, p50, p99, max time.Duration) {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	l := slices.Clone(p.lat)
	slices.Sort(l)
	if len(l) == 0 {
		return 0, p.fails, 0, 0, 0
	}
	return len(l), p.fails, l[len(l)/2], l[len(l)*99/100], l[len(l)-1]
}

// TestLoadPreAuthFlood: 1,000 connections without a token, each trying a
// first frame of MaxPayload (16 MiB), from 50 loopback addresses, with the
// default caps and with the caps raised to 1,000 (all admitted at once:
// the 64 KiB pre-auth read limit alone bounds the memory).
func TestLoadPreAuthFlood(t *testing.T) {
	if os.Getenv(loadEnv) == "" {
		t.Skip("load harness: set " + loadEnv + "=1")
	}
	for _, tc := range []struct {
		name string
		lim  loadLimits
	}{
		{"default caps", loadLimits{}},
		{"caps raised to 1000", loadLimits{MaxUnauthenticated: 1000, MaxUnauthenticatedPerIP: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, pid := loadServer(t, tc.lim)
			base := baseline(t, url, 3*time.Second)
			p := startProber(t, url)
			time.Sleep(500 * time.Millisecond)
			before := procKiB(t, pid, "VmRSS")
			const conns, size = 1000, DefaultMaxPayload
			chunk := []byte(`{"type":"req","id":"1","method":"connect","params":{"client":{"id":"` + strings.Repeat("x", 64<<10))
			var admitted, refused, closedWithReason, other atomic.Int64
			var otherMu sync.Mutex
			otherKinds := map[string]int{}
			otherErr := func(what string, err error) {
				msg := what + ": " + err.Error()
				if strings.HasPrefix(what, "closed: ") {
					msg = what
				}
				if i := strings.IndexAny(msg, "0123456789"); i > 0 {
					msg = msg[:i] // group by the text before the first figure
				}
				otherMu.Lock()
				otherKinds[msg]++
				otherMu.Unlock()
				other.Add(1)
			}
			var wg sync.WaitGroup
			start := time.Now()
			for i := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ip := fmt.Sprintf("127.0.0.%d", 2+i%50)
					d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
					hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc})
					if err != nil {
						if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
							refused.Add(1)
						} else {
							otherErr("dial", err)
						}
						return
					}
					defer ws.CloseNow()
					admitted.Add(1)
					ws.SetReadLimit(-1)
					if _, _, err := ws.Read(ctx); err != nil { // the challenge
						otherErr("challenge", err)
						return
					}
					// Send the frame in the background; the close frame
					// ends the attempt.
					go func() {
						w, err := ws.Writer(ctx, websocket.MessageText)
						if err != nil {
							return
						}
						for sent := 0; sent < size; sent += len(chunk) {
							if _, err := w.Write(chunk); err != nil {
								return
							}
						}
						_ = w.Close()
					}()
					_, _, err = ws.Read(ctx)
					var ce websocket.CloseError
					if errors.As(err, &ce) && ce.Code == CloseHandshakeFailed && strings.Contains(ce.Reason, "at most") {
						closedWithReason.Add(1)
					} else if errors.As(err, &ce) {
						otherErr("closed: "+ce.Reason, errors.New(""))
					} else {
						otherErr("close", err)
					}
				}()
			}
			// Peak while the flood runs.
			peak := before
			flooding := make(chan struct{})
			go func() { wg.Wait(); close(flooding) }()
			for waiting := true; waiting; {
				select {
				case <-flooding:
					waiting = false
				case <-time.After(50 * time.Millisecond):
					peak = max(peak, procKiB(t, pid, "VmRSS"))
				}
			}
			dur := time.Since(start)
			time.Sleep(2 * time.Second)
			after := procKiB(t, pid, "VmRSS")
			hwm := procKiB(t, pid, "VmHWM")
			n, fails, p50, p99, mx := p.finish()
			t.Logf("%s: %d connections in %v: %d admitted (%d closed with the reason), %d refused with 503, %d other",
				tc.name, conns, dur.Round(time.Millisecond), admitted.Load(), closedWithReason.Load(), refused.Load(), other.Load())
			t.Logf("%s: other outcomes: %v", tc.name, otherKinds)
			t.Logf("%s: server RSS before %d MiB, peak sampled %d MiB, VmHWM %d MiB, after %d MiB",
				tc.name, before>>10, peak>>10, hwm>>10, after>>10)
			t.Logf("%s: authenticated client before the flood: %s", tc.name, base)
			t.Logf("%s: authenticated client meanwhile: %d echo calls, %d failed, p50 %v, p99 %v, max %v",
				tc.name, n, fails, p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond))
			if fails > 0 || n == 0 {
				t.Errorf("the authenticated client was not served: %d calls, %d failed", n, fails)
			}
		})
	}
}

// TestLoadSlowConsumers: 20 authenticated clients that never read while
// 64 KiB events are broadcast (8,000 of them: 512 MiB for each client);
// a reading client is served meanwhile. The slow clients are closed as
// the budget (default 128 MiB) fills, and each, reading at last, gets the
// close frame with its reason.
func TestLoadSlowConsumers(t *testing.T) {
	if os.Getenv(loadEnv) == "" {
		t.Skip("load harness: set " + loadEnv + "=1")
	}
	url, pid := loadServer(t, loadLimits{})
	ctx := context.Background()
	var slow []*websocket.Conn
	for i := range 20 {
		ws, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.SetReadLimit(-1)
		if _, _, err := ws.Read(ctx); err != nil {
			t.Fatal(err)
		}
		p := connectParams(testToken)
		p["client"].(map[string]any)["id"] = fmt.Sprint("slow-", i)
		req, _ := json.Marshal(map[string]any{"type": "req", "id": "1", "method": MethodConnect, "params": p})
		if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
			t.Fatal(err)
		}
		if _, b, err := ws.Read(ctx); err != nil || !strings.Contains(string(b), "hello-ok") {
			t.Fatalf("slow %d connect: %v %.200s", i, err, b)
		}
		slow = append(slow, ws) // never read again until the end
	}
	// The reading client drains its events.
	reader, err := Dial(ctx, ClientOptions{URL: url, Token: testToken, Client: ClientInfo{ID: "reader"}})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var got atomic.Int64
	go func() {
		for ev := range reader.Events() {
			if ev.Event == "flood" {
				got.Add(1)
			}
		}
	}()
	base := baseline(t, url, 3*time.Second)
	p := startProber(t, url)
	time.Sleep(500 * time.Millisecond)
	before := procKiB(t, pid, "VmRSS")
	start := time.Now()
	const rounds, per, size = 80, 100, 64 << 10
	flooder, err := Dial(ctx, ClientOptions{URL: url, Token: testToken, Client: ClientInfo{ID: "flooder"}})
	if err != nil {
		t.Fatal(err)
	}
	defer flooder.Close()
	// The slow clients read again once all of them were closed (within
	// CloseGrace of it): each must end with close 1008 and the reason.
	var withReason atomic.Int64
	var wg sync.WaitGroup
	readAll := func() {
		for _, ws := range slow {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				for {
					_, _, err := ws.Read(rctx)
					if err == nil {
						continue
					}
					var ce websocket.CloseError
					if errors.As(err, &ce) && ce.Code == websocket.StatusPolicyViolation && strings.Contains(ce.Reason, "slow consumer") {
						withReason.Add(1)
					} else {
						t.Logf("slow client: %v", err)
					}
					return
				}
			}()
		}
	}
	peak, reading := before, false
	var allClosed time.Duration
	for range rounds {
		if err := flooder.Call(ctx, "bench.flood", map[string]int{"n": per, "size": size}, nil); err != nil {
			t.Fatalf("flood: %v", err)
		}
		peak = max(peak, procKiB(t, pid, "VmRSS"))
		var c struct{ Authed int }
		if err := flooder.Call(ctx, "bench.conns", nil, &c); err != nil {
			t.Fatal(err)
		}
		if c.Authed == 3 && !reading { // reader, prober, flooder
			reading, allClosed = true, time.Since(start)
			readAll()
		}
	}
	dur := time.Since(start)
	time.Sleep(2 * time.Second)
	after := procKiB(t, pid, "VmRSS")
	hwm := procKiB(t, pid, "VmHWM")
	n, fails, p50, p99, mx := p.finish()
	if !reading {
		t.Errorf("slow clients still connected after the flood")
		readAll()
	}
	wg.Wait()
	t.Logf("all 20 slow clients closed %v after the flood began", allClosed.Round(time.Millisecond))
	t.Logf("%d events of 64 KiB broadcast to 20 clients that do not read + 3 that do, in %v; the reading client got %d",
		rounds*per, dur.Round(time.Millisecond), got.Load())
	t.Logf("server RSS before %d MiB, peak sampled %d MiB, VmHWM %d MiB, after %d MiB", before>>10, peak>>10, hwm>>10, after>>10)
	t.Logf("authenticated client before the flood: %s", base)
	t.Logf("authenticated client meanwhile: %d echo calls, %d failed, p50 %v, p99 %v, max %v",
		n, fails, p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond))
	t.Logf("slow clients that got close 1008 with the reason when they read: %d of 20", withReason.Load())
	if fails > 0 || n == 0 || got.Load() != rounds*per || withReason.Load() != 20 {
		t.Errorf("want the reading client served and every event delivered to it, and 20 reasons")
	}
}
