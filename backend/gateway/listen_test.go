package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// serveListener serves s.Handler() on a fresh 127.0.0.1 listener through
// s.HTTPServer; closed reports each connection net/http closed.
func serveListener(t *testing.T, s *Server) (addr string, closed <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := s.HTTPServer(s.Handler(), nil)
	ch := make(chan struct{}, 100)
	guard := hs.srv.ConnState
	hs.srv.ConnState = func(c net.Conn, st http.ConnState) {
		guard(c, st)
		if st == http.StateClosed {
			ch <- struct{}{}
		}
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_ = hs.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String(), ch
}

func waitClosed(t *testing.T, closed <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(testTimeout):
		t.Fatalf("%s: the server did not close the connection", what)
	}
}

// TestCheckHead: what passes to net/http and what is refused, with which
// status (the classes net/http would answer itself, a body, an Expect).
func TestCheckHead(t *testing.T) {
	for _, tc := range []struct {
		head   string
		status int // 0: passed on
	}{
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0},
		{"GET / HTTP/1.1\nHost: a\n\n", 0}, // bare LF, as net/textproto reads it
		{"GET / HTTP/1.0\r\n\r\n", 0},      // HTTP/1.0 needs no Host
		{"GET http://a/x HTTP/1.1\r\nHost: a\r\n\r\n", 0},
		{"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", 0},
		{"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n", 0},
		{"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 0},
		{"GET / HTTP/1.1\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n folded\r\n\r\n", 0}, // obs-fold, as net/http takes it
		{" GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\nX-Ctl: \x7f\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\nNo-Colon\r\n\r\n", 400},
		{"GET / HTTP/3.0\r\nHost: a\r\n\r\n", 505},
		{"PRI * HTTP/2.0\r\n\r\n", 505},
		{"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n", 413},
		{"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 413},
		{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", 417},
	} {
		r, _ := checkHead([]byte(tc.head), nil)
		got := 0
		if r != nil {
			got = r.status
		}
		if got != tc.status {
			t.Errorf("checkHead(%q) = %d (%v), want %d", tc.head, got, r, tc.status)
		}
		// A head passed on is one net/http takes as it is.
		if got == 0 {
			if _, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tc.head))); err != nil {
				t.Errorf("%q passed on, but net/http refuses it: %v", tc.head, err)
			}
		}
	}
}

// TestWebSocketOutlivesHTTPTimeouts: with reading a request, writing its
// answer and keep-alive idling bounded to 300 ms, a WebSocket through the
// same listener keeps working long after: net/http's deadlines end at the
// upgrade and the guard passes frames on.
func TestWebSocketOutlivesHTTPTimeouts(t *testing.T) {
	short := Timeouts{Request: 300 * time.Millisecond, Write: 300 * time.Millisecond, Idle: 300 * time.Millisecond}
	s, err := New(Options{Token: testToken, Logger: quietLogger(), Timeouts: short})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("echo", Read(Everyone), echo)
	addr, _ := serveListener(t, s)
	c, _ := connect(t, "ws://"+addr+"/ws")
	for i := range 3 {
		time.Sleep(600 * time.Millisecond) // past every HTTP bound
		if f := c.call("e", "echo", map[string]any{"n": i}); !f.OK {
			t.Fatalf("call %d: %+v", i, f.Error)
		}
	}
}

// TestHeadBoundOnKeepAlive: a keep-alive connection whose next request
// head starts and never ends is closed by Timeouts.Header, not left to the
// (here much longer) idle timeout.
func TestHeadBoundOnKeepAlive(t *testing.T) {
	s, err := New(Options{Token: testToken, Logger: quietLogger(),
		Timeouts: Timeouts{Header: time.Second, Idle: time.Hour, Request: time.Hour, Write: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	addr, closed := serveListener(t, s)
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(testTimeout))
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first request: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHo"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, closed, "a request head begun and never ended")
}

// TestWriteTimeoutOnSlowReader: a client that asks for a large file and
// never reads it is dropped by Timeouts.Write.
func TestWriteTimeoutOnSlowReader(t *testing.T) {
	big := make([]byte, 64<<20) // more than the loopback socket buffers hold
	s, err := New(Options{Token: testToken, Logger: quietLogger(), UI: fstest.MapFS{"big.txt": {Data: big}},
		Timeouts: Timeouts{Write: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	addr, closed := serveListener(t, s)
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /big.txt HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, closed, "a response nobody reads")
	_ = c.SetReadDeadline(time.Now().Add(testTimeout))
	n, err := io.Copy(io.Discard, c)
	if n >= int64(len(big)) {
		t.Errorf("read %d bytes (%v): the whole file went out", n, err)
	}
}

// TestFrameWriteTimeout: an authenticated client that stops reading is
// dropped once one frame cannot be written within FrameWriteTimeout, long
// before its queue reaches MaxBufferedBytes.
func TestFrameWriteTimeout(t *testing.T) {
	s, url := newTestServer(t, Options{FrameWriteTimeout: 100 * time.Millisecond}, nil)
	connect(t, url) // and never read again
	payload := map[string]string{"pad": strings.Repeat("x", 64<<10)}
	// 16 MiB of events: more than the socket buffers, half the queue cap.
	for range 256 {
		s.Broadcast("load", payload)
	}
	waitFor(t, "the stalled connection to be dropped", func() bool { return s.numAuthed() == 0 })
}
