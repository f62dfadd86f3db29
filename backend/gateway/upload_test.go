package gateway

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

const testUploadID = "0123456789abcdef0123456789abcdef"

// uploadEcho is an Options.Upload that reads the whole body and answers
// its SHA-256; seen records the requests it got.
type uploadEcho struct {
	mu   sync.Mutex
	seen []string
}

func (u *uploadEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	u.mu.Lock()
	u.seen = append(u.seen, r.Method+" "+r.URL.Path)
	u.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sum := sha256.Sum256(b)
	_, _ = io.WriteString(w, hex.EncodeToString(sum[:]))
}

func (u *uploadEcho) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// rawConn is one keep-alive connection to addr for hand-written requests.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(testTimeout))
	return &rawConn{t: t, c: c, br: bufio.NewReader(c)}
}

// do writes raw and reads one response: its status and body (0 and the
// error when the connection ended first).
func (rc *rawConn) do(raw string) (int, string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, raw); err != nil {
		return 0, err.Error()
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return 0, err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

func put(path, body string, extra ...string) string {
	return fmt.Sprintf("PUT %s HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n%s\r\n%s", path, len(body), strings.Join(extra, ""), body)
}

// TestUploadRouteTakesBodies: the upload route's POST and PUT get their
// bodies whole (a request head inside a body is data, never a request), a
// keep-alive connection's next head is checked again, and every other
// request that declares a body is still refused 413 before it is read:
// other paths and methods, a malformed id or index, chunked, over
// MaxUploadBody, and the route itself when no Upload is served.
func TestUploadRouteTakesBodies(t *testing.T) {
	up := &uploadEcho{}
	s, err := New(Options{Token: testToken, Logger: quietLogger(), Upload: up, MaxUploadBody: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveListener(t, s)
	rc := dialRaw(t, addr)
	smuggled := "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
	sum := sha256.Sum256([]byte(smuggled))
	if st, body := rc.do(put(UploadPrefix+testUploadID+"/0", smuggled)); st != 200 || body != hex.EncodeToString(sum[:]) {
		t.Fatalf("PUT block: %d %q", st, body)
	}
	plan := `{"size":1}`
	if st, _ := rc.do(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%s", UploadPrefix+testUploadID, len(plan), plan)); st != 200 {
		t.Fatalf("POST plan on the same connection: %d", st)
	}
	// The next head on the connection is checked again.
	if st, _ := rc.do("GET /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"); st != 413 {
		t.Fatalf("a body on /healthz after an upload: %d, want 413", st)
	}
	if got := up.requests(); len(got) != 2 {
		t.Fatalf("the upload handler saw %v, want the PUT and the POST only", got)
	}

	for _, tc := range []struct{ what, raw string }{
		{"PUT elsewhere", put("/media/x", "abc")},
		{"PUT on the UI", put("/", "abc")},
		{"PUT without a block index", put(UploadPrefix+testUploadID, "abc")},
		{"PUT with a bad id", put(UploadPrefix+strings.ToUpper(testUploadID)+"/0", "abc")},
		{"PUT with a bad index", put(UploadPrefix+testUploadID+"/-1", "abc")},
		{"PUT with a long index", put(UploadPrefix+testUploadID+"/12345678", "abc")},
		{"PUT with a path below", put(UploadPrefix+testUploadID+"/0/x", "abc")},
		{"POST a block", fmt.Sprintf("POST %s/0 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", UploadPrefix+testUploadID)},
		{"GET with a body", fmt.Sprintf("GET %s HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", UploadPrefix+testUploadID)},
		{"DELETE with a body", fmt.Sprintf("DELETE %s HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", UploadPrefix+testUploadID)},
		{"over MaxUploadBody", put(UploadPrefix+testUploadID+"/0", strings.Repeat("x", 1<<10+1))},
		{"chunked", fmt.Sprintf("PUT %s/0 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", UploadPrefix+testUploadID)},
	} {
		if st, body := dialRaw(t, addr).do(tc.raw); st != 413 {
			t.Errorf("%s: %d %q, want 413", tc.what, st, body)
		}
	}
	if got := up.requests(); len(got) != 2 {
		t.Errorf("the upload handler saw %v: a refused body reached it", got)
	}

	// Without an Upload handler the route takes no body either.
	bare, err := New(Options{Token: testToken, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	bareAddr, _ := serveListener(t, bare)
	if st, _ := dialRaw(t, bareAddr).do(put(UploadPrefix+testUploadID+"/0", "abc")); st != 413 {
		t.Errorf("PUT without Options.Upload: %d, want 413", st)
	}
	if st, _ := dialRaw(t, bareAddr).do("GET " + UploadPrefix + testUploadID + " HTTP/1.1\r\nHost: a\r\n\r\n"); st != 404 {
		t.Errorf("GET without Options.Upload: %d, want 404", st)
	}
}

// TestUploadSameOriginOnly: a browser request from another origin is
// refused 403 before the handler; the gateway's own origin and a request
// without Origin reach it.
func TestUploadSameOriginOnly(t *testing.T) {
	up := &uploadEcho{}
	s, err := New(Options{Token: testToken, Logger: quietLogger(), Upload: up})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveListener(t, s)
	path := UploadPrefix + testUploadID + "/0"
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"", 200},
		{"Origin: http://a\r\n", 200},
		{"Origin: https://a\r\n", 403}, // another scheme
		{"Origin: http://evil.example\r\n", 403},
		{"Origin: http://127.0.0.1:5173\r\n", 403}, // loopback, yet another origin
		{"Origin: null\r\n", 403},
	} {
		if st, body := dialRaw(t, addr).do(put(path, "abc", tc.origin)); st != tc.status {
			t.Errorf("%q: %d %q, want %d", tc.origin, st, body, tc.status)
		}
	}
	if got := len(up.requests()); got != 2 {
		t.Errorf("the handler saw %d requests, want 2", got)
	}
}

// TestUploadBodyBound: a body that stops coming is cut by Timeouts.Request,
// the bound of the whole request, as a head that stops is.
func TestUploadBodyBound(t *testing.T) {
	up := &uploadEcho{}
	s, err := New(Options{Token: testToken, Logger: quietLogger(), Upload: up,
		Timeouts: Timeouts{Request: time.Second, Idle: time.Hour, Write: time.Hour, Header: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	addr, closed := serveListener(t, s)
	rc := dialRaw(t, addr)
	if _, err := io.WriteString(rc.c, fmt.Sprintf("PUT %s/0 HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc", UploadPrefix+testUploadID)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, closed, "a body that stopped")
	if got := up.requests(); len(got) != 1 {
		t.Fatalf("handler saw %v", got)
	}
}
