package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// bigConnect is a connect request with the right token, padded to size
// bytes (a long client id).
func bigConnect(t testing.TB, size int) []byte {
	t.Helper()
	p := connectParams(testToken)
	p["client"].(map[string]any)["id"] = strings.Repeat("x", size)
	b, err := json.Marshal(map[string]any{"type": "req", "id": "1", "method": MethodConnect, "params": p})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPreAuthFrameLimit: before hello-ok only MaxPreAuthPayload bytes of a
// frame are read, even when the frame is a valid connect request with the
// right token; the connection is closed with a reason, and the server did
// not buffer the frames (allocations stay far below their total size).
func TestPreAuthFrameLimit(t *testing.T) {
	const conns, size = 20, 4 << 20
	_, url := newTestServer(t, Options{MaxUnauthenticated: conns, MaxUnauthenticatedPerIP: conns}, nil)
	frame := bigConnect(t, size)

	// A connect request just under the limit is fine.
	small := bigConnect(t, 0)
	small = bigConnect(t, DefaultMaxPreAuthPayload-len(small))
	c := dial(t, url, nil)
	c.readChallenge()
	c.writeRaw(websocket.MessageText, small)
	if f := c.read(); !f.OK {
		t.Fatalf("connect of %d bytes refused: %+v", len(small), f.Error)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < conns; i++ {
		c := dial(t, url, nil)
		c.readChallenge()
		// The server may close before the whole frame is written.
		wctx, cancel := c.op()
		_ = c.ws.Write(wctx, websocket.MessageText, frame)
		cancel()
		c.expectClose(CloseHandshakeFailed, "at most 65536 bytes")
	}
	runtime.ReadMemStats(&after)
	// Reading each frame whole would allocate at least conns*size (80 MiB).
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d connections with a %d MiB first frame: %d KiB allocated in all", conns, size>>20, alloc>>10)
	if alloc > 24<<20 {
		t.Fatalf("%d connections with a %d-byte first frame allocated %d MiB", conns, size, alloc>>20)
	}
}

// dialFrom dials url from the loopback address ip (127.0.0.0/8), returning
// the HTTP status of a refused upgrade (0 when it succeeded).
func dialFrom(t *testing.T, url, ip string) (*client, int) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		if resp == nil {
			t.Fatalf("dial from %s: %v", ip, err)
		}
		return nil, resp.StatusCode
	}
	ws.SetReadLimit(-1)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &client{t: t, ws: ws, ctx: ctx}, 0
}

// TestUnauthenticatedCaps: connections that have not completed the
// handshake are capped per IP and in total (HTTP 503 over a cap); a slot
// is given back at hello-ok and when a connection ends; authenticated
// connections do not count.
func TestUnauthenticatedCaps(t *testing.T) {
	s, url := newTestServer(t, Options{MaxUnauthenticated: 3, MaxUnauthenticatedPerIP: 2}, nil)
	mustDial := func(ip string) *client {
		t.Helper()
		c, status := dialFrom(t, url, ip)
		if c == nil {
			t.Fatalf("dial from %s refused with HTTP %d", ip, status)
		}
		c.readChallenge()
		return c
	}
	refused := func(ip string) {
		t.Helper()
		if c, status := dialFrom(t, url, ip); c != nil || status != http.StatusServiceUnavailable {
			t.Fatalf("dial from %s: HTTP %d, want 503 (over a cap)", ip, status)
		}
	}
	a1, a2 := mustDial("127.0.0.1"), mustDial("127.0.0.1")
	refused("127.0.0.1") // per IP
	b1 := mustDial("127.0.0.2")
	refused("127.0.0.3") // in total
	if n := s.numPreAuth(); n != 3 {
		t.Fatalf("%d unauthenticated, want 3", n)
	}

	// hello-ok gives the slot back.
	if f := a1.call("c", MethodConnect, connectParams(testToken)); !f.OK {
		t.Fatalf("connect: %+v", f.Error)
	}
	c1 := mustDial("127.0.0.3")
	refused("127.0.0.4")
	// A failed handshake gives it back once the connection has ended.
	a2.request("x", "health", nil)
	a2.expectClose(CloseHandshakeFailed, "connect request")
	waitFor(t, "the failed connection's slot", func() bool { return s.numPreAuth() == 2 })
	mustDial("127.0.0.1")
	// Authenticated connections do not count: a1 is still open, b1 and c1
	// authenticate, and three new ones fit again.
	for _, c := range []*client{b1, c1} {
		if f := c.call("c", MethodConnect, connectParams(testToken)); !f.OK {
			t.Fatalf("connect: %+v", f.Error)
		}
	}
	mustDial("127.0.0.2")
	mustDial("127.0.0.2")
	if n := s.numPreAuth(); n != 3 {
		t.Fatalf("%d unauthenticated, want 3", n)
	}
	if f := a1.call("p", "nope", nil); f.OK || f.Error.Code != CodeNotFound {
		t.Fatalf("authenticated client not served: %+v", f)
	}
}

// TestSendBudget: one outbound budget for all connections. Three clients
// that stop reading are closed, the largest queue first, while the total
// queued never exceeds the budget and a reading client gets every event.
// Each closed client gets the close frame with its reason once it reads
// again, even after a pause longer than the websocket library's own 5 s
// close timeout.
func TestSendBudget(t *testing.T) {
	const budget = 4 << 20
	s, url := newTestServer(t, Options{MaxBufferedBytes: 64 << 20, MaxTotalBufferedBytes: budget, CloseGrace: 5 * time.Minute},
		func(s *Server) { s.Handle("echo", Read(Everyone), echo) })
	healthy, _ := connect(t, url)
	var slow []*client
	for range 3 {
		c, _ := connect(t, url)
		slow = append(slow, c)
	}

	seqs := make(chan uint64, 1)
	go func() {
		for {
			f, err := healthy.tryRead()
			if err != nil {
				close(seqs)
				return
			}
			if f.Event == "flood" {
				seqs <- f.Seq
			}
		}
	}()
	payload := map[string]string{"blob": strings.Repeat("x", 64<<10)}
	var last uint64
	sent := 0
	for s.numAuthed() > 1 {
		if sent > 10000 {
			t.Fatalf("slow clients still connected after %d events", sent)
		}
		s.Broadcast("flood", payload)
		sent++
		if q := s.TotalBuffered(); q > budget {
			t.Fatalf("after event %d: %d bytes queued, over the budget of %d", sent, q, budget)
		}
		// The healthy client keeps up: its queue stays near empty.
		select {
		case seq, ok := <-seqs:
			if !ok {
				t.Fatalf("healthy client disconnected after %d events", sent)
			}
			if last != 0 && seq != last+1 {
				t.Fatalf("healthy client: seq %d after %d", seq, last)
			}
			last = seq
		case <-time.After(testTimeout):
			t.Fatalf("healthy client got no event %d", sent)
		}
	}
	t.Logf("3 slow clients closed after %d events of 64 KiB", sent)
	healthy.request("e", "echo", map[string]int{"n": 1})

	// The first slow client reads only after a pause longer than the
	// library's close timeout; the others at once.
	var wg sync.WaitGroup
	for i, c := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 {
				time.Sleep(6 * time.Second)
			}
			for {
				ctx, cancel := c.op()
				_, _, err := c.ws.Read(ctx)
				cancel()
				if err == nil {
					continue
				}
				var ce websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "send budget") {
					t.Errorf("slow client %d: %v, want close 1008 with the reason", i, err)
				}
				return
			}
		}()
	}
	wg.Wait()
}

// TestCloseReasonsFitTheFrame: every close reason fits the 123 bytes a
// close frame can carry (a longer one would be sent as no reason at all).
func TestCloseReasonsFitTheFrame(t *testing.T) {
	const maxInt64 = 1<<63 - 1
	for _, r := range []string{
		slowConsumerReason(maxInt64, maxInt64),
		preAuthTooLargeReason(maxInt64),
		"slow consumer: send buffer over 9223372036854775807 bytes",
	} {
		if len(r) > 123 {
			t.Errorf("close reason of %d bytes: %q", len(r), r)
		}
	}
}

// TestMaxInFlight: a connection has at most MaxInFlight requests being
// served; one more is answered UNAVAILABLE (retryable) at once and not
// run, the ones being served are answered when they finish, and the
// connection takes requests again afterwards.
func TestMaxInFlight(t *testing.T) {
	const max = 4
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(max)
	var calls sync.Mutex
	n := 0
	_, url := newTestServer(t, Options{MaxInFlight: max}, func(s *Server) {
		s.Handle("test.block", Read(Operators), func(ctx context.Context, c *Call) (any, error) {
			calls.Lock()
			n++
			calls.Unlock()
			started.Done()
			<-release
			return map[string]string{"id": string(c.Params)}, nil
		})
		s.Handle("test.echo", Read(Operators), echo)
	})
	c, _ := connect(t, url)
	for i := range max {
		c.request("b"+string(rune('0'+i)), "test.block", nil)
	}
	started.Wait() // all max handlers hold their slots
	c.request("over", "test.echo", map[string]any{"x": 1})
	f := c.next()
	if f.ID != "over" || f.OK || f.Error == nil || f.Error.Code != CodeUnavailable || !f.Error.Retryable ||
		!strings.Contains(f.Error.Message, "4 requests") {
		t.Fatalf("request over the cap: %+v %+v", f, f.Error)
	}
	close(release)
	got := map[string]bool{}
	for range max {
		f := c.next()
		if !f.OK {
			t.Fatalf("blocked request %s: %+v", f.ID, f.Error)
		}
		got[f.ID] = true
	}
	if len(got) != max {
		t.Fatalf("answers: %v", got)
	}
	if f := c.call("after", "test.echo", map[string]any{"x": 2}); !f.OK {
		t.Fatalf("after the burst: %+v", f.Error)
	}
	calls.Lock()
	defer calls.Unlock()
	if n != max {
		t.Fatalf("the handler ran %d times, want %d (the refused request must not run)", n, max)
	}
}

// TestPreAuthPoolsPerListener: connections through the LAN listeners
// (ExternalHandler) and through the loopback listener (Handler) have their
// own unauthenticated caps: the LAN filling its cap never refuses the
// desktop window or the CLI on 127.0.0.1 (issue 21 review: four LAN
// addresses × 16 silent WebSockets locked the window out).
func TestPreAuthPoolsPerListener(t *testing.T) {
	const max = 4
	s, err := New(Options{Token: testToken, Logger: quietLogger(), MaxUnauthenticated: max, MaxUnauthenticatedPerIP: max})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("test.echo", Read(Operators), echo)
	lan := httptest.NewServer(s.ExternalHandler())
	t.Cleanup(lan.Close)
	local := httptest.NewServer(s.Handler())
	t.Cleanup(local.Close)
	wsURL := func(hs *httptest.Server) string { return "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws" }

	// The LAN fills its cap with connections that never send connect.
	for range max {
		c := dial(t, wsURL(lan), nil)
		c.readChallenge()
	}
	waitFor(t, "the LAN's connections to hold their slots", func() bool { return s.numPreAuth() == max })
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, wsURL(lan), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("one more LAN connection: %v %v, want 503", resp, err)
	}

	// The person's window on the loopback listener connects and is served.
	c, _ := connect(t, wsURL(local))
	if f := c.call("1", "test.echo", map[string]any{"x": 1}); !f.OK {
		t.Fatalf("the loopback connection during the LAN flood: %+v", f.Error)
	}
	// And the loopback pool has its own cap too.
	for range max {
		c := dial(t, wsURL(local), nil)
		c.readChallenge()
	}
	waitFor(t, "both pools full", func() bool { return s.numPreAuth() == 2*max })
	_, resp, err = websocket.Dial(ctx, wsURL(local), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("one more loopback connection: %v %v, want 503", resp, err)
	}
}
