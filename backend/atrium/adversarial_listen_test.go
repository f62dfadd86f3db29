package atrium

// The adversarial suite, issue 21 items 1 and 6: what the listeners
// themselves answer and hold. Connections that never finish a request
// (the slow-body attack, from other processes: adversarial_listen_unix_test.go)
// and requests net/http would refuse on its own, each on both listeners
// over raw sockets, every answer with the security headers.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/gwid"
)

// lanAttackerArg makes the re-executed test binary a LAN attacker
// (TestMain): lanAttacker(os.Args[2:]).
const lanAttackerArg = "lan-attacker"

// attackReport is what a lanAttacker prints, one JSON line per phase.
type attackReport struct {
	Phase string `json:"phase"` // "ready": every first attempt made; "done": at the end
	// Opened: connections that completed TLS and did what the mode says
	// (sent the slow-body head, or nothing); Refused: closed by the server
	// before that; Stuck: dial or TLS handshake unanswered within 5 s.
	Opened, Refused, Stuck int
	// Closed: opened connections the server closed; Answered: of them,
	// those that got an HTTP answer first (its status in Statuses).
	Closed, Answered int
	Statuses         map[string]int
	// Open: opened connections not closed by the server (at "done": still
	// open after the wait); Peak: the most open at once.
	Open, Peak int
}

// lanAttacker attacks a LAN listener with n connections from source
// addresses <prefix>.1 … <prefix>.250 (the per-address caps do not stop
// it), `workers` at a time:
//
//	lan-attacker <addr> <mode> <n> <prefix> <workers> <wait>
//
// mode "slowbody": TLS, then `GET /healthz` with Content-Length: 1000 and
// no body; mode "idle": TLS, then nothing. Once every connection was tried
// it prints a "ready" report and keeps its connections (reopening those
// the server closes, up to n) until its stdin closes; then it waits up to
// <wait> for the server to close the ones still open and prints "done".
//
// `lan-attacker admin <ws-url>` is the person instead: for each line read
// on its stdin it connects with the operator token in $ATRIUM_PROBE_TOKEN,
// reads MEMORY.md and prints how long that took (adminProbe); it is
// started before an attack, so that it needs no new descriptor in the
// process that starts it.
func lanAttacker(args []string) int {
	if len(args) == 2 && args[0] == "admin" {
		return adminProbe(args[1])
	}
	if len(args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: lan-attacker <addr> <slowbody|idle> <n> <prefix> <workers> <wait>")
		return 2
	}
	addr, mode, prefix := args[0], args[1], args[3]
	n, err1 := strconv.Atoi(args[2])
	workers, err2 := strconv.Atoi(args[4])
	wait, err3 := time.ParseDuration(args[5])
	if err := errors.Join(err1, err2, err3); err != nil || (mode != "slowbody" && mode != "idle") {
		fmt.Fprintln(os.Stderr, "lan-attacker: bad arguments:", err)
		return 2
	}
	host, _, _ := net.SplitHostPort(addr)
	var (
		mu       sync.Mutex
		rep      attackReport
		conns    = map[net.Conn]struct{}{}
		freed    = make(chan struct{}, n)
		stopping atomic.Bool
		allGone  = make(chan struct{})
	)
	rep.Statuses = map[string]int{}
	watch := func(c net.Conn) {
		br := bufio.NewReader(c)
		status := ""
		if line, err := br.ReadString('\n'); err == nil && strings.HasPrefix(line, "HTTP/1.1 ") {
			status = strings.Fields(line)[1]
		}
		_, _ = io.Copy(io.Discard, br) // until the server closes
		mu.Lock()
		rep.Closed++
		if status != "" {
			rep.Answered++
			rep.Statuses[status]++
		}
		delete(conns, c)
		rep.Open = len(conns)
		if len(conns) == 0 && stopping.Load() {
			select {
			case <-allGone:
			default:
				close(allGone)
			}
		}
		mu.Unlock()
		_ = c.Close()
		freed <- struct{}{}
	}
	attempt := func(i int) {
		timeout := func(err error) bool {
			var ne net.Error
			return errors.As(err, &ne) && ne.Timeout()
		}
		count := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if timeout(err) {
				rep.Stuck++
			} else {
				rep.Refused++
			}
		}
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("%s.%d", prefix, 1+i%250))}, Timeout: 5 * time.Second}
		raw, err := d.Dial("tcp", addr)
		if err != nil {
			count(err)
			return
		}
		c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: host}) // an attacker pins nothing
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		err = c.Handshake()
		if err == nil && mode == "slowbody" {
			_, err = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n", addr)
		}
		if err != nil {
			count(err)
			_ = raw.Close()
			return
		}
		_ = c.SetDeadline(time.Time{})
		mu.Lock()
		rep.Opened++
		conns[c] = struct{}{}
		rep.Open = len(conns)
		rep.Peak = max(rep.Peak, len(conns))
		mu.Unlock()
		go watch(c)
	}
	// First, n attempts; then keep n open (each close frees a reopen)
	// until stdin closes.
	next := make(chan int)
	var wg, first sync.WaitGroup
	first.Add(n)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				attempt(i)
				if i < n {
					first.Done()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	first.Wait()
	mu.Lock()
	ready := rep
	mu.Unlock()
	ready.Phase = "ready"
	printReport(ready)
	stdinClosed := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stdinClosed) }()
	for i := n; ; i++ {
		select {
		case <-stdinClosed:
		case <-freed:
			next <- i
			continue
		}
		break
	}
	close(next)
	wg.Wait()
	mu.Lock()
	stopping.Store(true)
	if len(conns) == 0 {
		close(allGone)
	}
	mu.Unlock()
	t := time.NewTimer(wait)
	select {
	case <-allGone:
	case <-t.C:
	}
	mu.Lock()
	done := rep
	done.Open = len(conns)
	for c := range conns {
		_ = c.Close()
	}
	mu.Unlock()
	done.Phase = "done"
	printReport(done)
	return 0
}

// probeReport is what adminProbe prints.
type probeReport struct {
	Phase string  `json:"phase"` // "admin"
	MS    float64 `json:"ms"`    // connect and one call, in milliseconds
	Err   string  `json:"err,omitempty"`
}

// adminProbe, for each line on stdin, connects to wsURL as the person
// (30 s at most), reads MEMORY.md through the gateway and prints a
// probeReport.
func adminProbe(wsURL string) int {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		probeOnce(wsURL)
	}
	return 0
}

func probeOnce(wsURL string) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep := probeReport{Phase: "admin"}
	c, err := gateway.Dial(ctx, gateway.ClientOptions{URL: wsURL, Token: os.Getenv("ATRIUM_PROBE_TOKEN"), Role: gateway.RoleOperator,
		Client: gateway.ClientInfo{ID: "probe-admin", Version: "test", Platform: "linux", Mode: "test", InstanceID: "probe-admin"}})
	if err == nil {
		var got struct{ Text string }
		err = c.Call(ctx, "memory.get", map[string]any{"path": "MEMORY.md"}, &got)
		c.Close()
	}
	rep.MS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		rep.Err = err.Error()
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
}

func printReport(r attackReport) {
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

// rawExchange sends req on a new connection to addr (TLS pinned to fp when
// fp is non-nil) and reads one response.
func rawExchange(t *testing.T, addr string, fp *[32]byte, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	if fp != nil {
		c = tls.Client(c, gwid.PinnedClientConfig(*fp))
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatalf("write to %s: %v", addr, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q to %s: no HTTP answer: %v", req, addr, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// securityHeadersMissing lists what of the headers PROTOCOL.md promises on
// every response h lacks.
func securityHeadersMissing(h http.Header) []string {
	var miss []string
	for name, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
		"Referrer-Policy": "no-referrer", "Cache-Control": ""} {
		if got := h.Get(name); got == "" || want != "" && got != want {
			miss = append(miss, name)
		}
	}
	csp := h.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'self'", "script-src 'self'", "object-src 'none'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, d) {
			miss = append(miss, "Content-Security-Policy "+d)
		}
	}
	return miss
}

// TestAdversarialEveryResponseHeaders: on the plain listener (127.0.0.1)
// and the TLS one (127.0.0.2), over raw sockets, every class of request
// net/http refuses by itself — a malformed Host, none, two, a malformed
// request line, bad header names and values, a head too large, HTTP/2 in
// HTTP/1 syntax, a body, a bad Content-Length, an unknown Expect, bytes
// that are not HTTP, the asterisk target (OPTIONS *, which net/http
// answers itself) — and plaintext on the TLS address, each after a good
// request on the same connection too: every answer carries the security
// headers, and the connection is closed after it.
func TestAdversarialEveryResponseHeaders(t *testing.T) {
	k := startAttack(t)
	plain := k.a.Gateway.Addr()
	for _, ln := range []struct {
		name, addr string
		fp         *[32]byte
	}{{"plain 127.0.0.1", plain, nil}, {"TLS 127.0.0.2", k.lanAddr, &k.fp}} {
		host := ln.addr
		good := "GET /healthz HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
		for _, tc := range []struct {
			what, req string
			status    int
		}{
			{"a good request", good, 200},
			{"a malformed Host", "GET /healthz HTTP/1.1\r\nHost: a b^c\r\n\r\n", 400},
			{"no Host", "GET /healthz HTTP/1.1\r\n\r\n", 400},
			{"two Host headers", "GET /healthz HTTP/1.1\r\nHost: " + host + "\r\nHost: " + host + "\r\n\r\n", 400},
			{"a malformed request line", "GET\r\nHost: " + host + "\r\n\r\n", 400},
			{"a bad method", "G(T / HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 400},
			{"a bad header name", "GET / HTTP/1.1\r\nHost: " + host + "\r\nBad Name: x\r\n\r\n", 400},
			{"a control byte in a header value", "GET / HTTP/1.1\r\nHost: " + host + "\r\nX-A: a\x01b\r\n\r\n", 400},
			{"a head of 40 KiB", "GET / HTTP/1.1\r\nHost: " + host + "\r\nX-Big: " + strings.Repeat("a", 40<<10) + "\r\n\r\n", 431},
			{"HTTP/2.0 in HTTP/1 syntax", "GET / HTTP/2.0\r\nHost: " + host + "\r\n\r\n", 505},
			{"a body announced and never sent", "GET /healthz HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 1000\r\n\r\n", 413},
			{"a chunked body", "POST / HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n\r\n", 413},
			{"a bad Content-Length", "GET / HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: x\r\n\r\n", 400},
			{"an unknown Expect", "GET / HTTP/1.1\r\nHost: " + host + "\r\nExpect: magic\r\n\r\n", 417},
			{"bytes that are not HTTP", "\x00\x01\x02\x03\r\n\r\n", 400},
			{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 400},
			{"GET *", "GET * HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 400},
		} {
			for _, after := range []bool{false, true} {
				what := ln.name + ": " + tc.what
				var resp *http.Response
				var body string
				if after { // the second answer on one connection
					what += " after a good request"
					resp, body = nextResponse(t, ln.addr, ln.fp, good+tc.req)
				} else {
					resp, body = rawExchange(t, ln.addr, ln.fp, tc.req)
				}
				if resp.StatusCode != tc.status {
					t.Errorf("%s: %d %q, want %d", what, resp.StatusCode, body, tc.status)
				}
				if miss := securityHeadersMissing(resp.Header); len(miss) > 0 {
					t.Errorf("%s: answer %d lacks %v (headers %v)", what, resp.StatusCode, miss, resp.Header)
				}
				if tc.status != 200 && !resp.Close {
					t.Errorf("%s: answer %d keeps the connection open", what, resp.StatusCode)
				}
			}
		}
	}
	// Plaintext on the TLS address.
	resp, body := rawExchange(t, k.lanAddr, nil, "GET /healthz HTTP/1.1\r\nHost: "+k.lanAddr+"\r\n\r\n")
	if resp.StatusCode != 400 || !strings.Contains(body, "this address serves HTTPS only") {
		t.Errorf("plaintext on the TLS address: %d %q", resp.StatusCode, body)
	}
	if miss := securityHeadersMissing(resp.Header); len(miss) > 0 {
		t.Errorf("plaintext on the TLS address: the 400 lacks %v (headers %v)", miss, resp.Header)
	}
	// Both listeners still serve.
	must(t, k.admin.Call(k.ctx, "health", map[string]any{}, nil))
	if code, err := k.get("127.0.0.45", "/healthz"); code != 200 {
		t.Errorf("the TLS listener after all that: %d %v", code, err)
	}
}

// nextResponse sends req (a good request followed by another) on a new
// connection and returns the second answer.
func nextResponse(t *testing.T, addr string, fp *[32]byte, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if fp != nil {
		c = tls.Client(c, gwid.PinnedClientConfig(*fp))
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q to %s: answer %d: %v", req, addr, i+1, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if i == 0 && resp.StatusCode != 200 {
			t.Fatalf("%q to %s: first answer %d, want 200", req, addr, resp.StatusCode)
		}
		if i == 1 {
			return resp, string(body)
		}
	}
	panic("unreachable")
}
