package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

const testToken = "test-token-0123456789abcdef"

// testTimeout bounds every single wait in the tests (one read, one write,
// one condition), only so that a hang fails instead of blocking; nothing
// sleeps for a fixed time and no test depends on how long a step takes.
const testTimeout = 30 * time.Second

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newTestServer starts s.Handler() on an httptest server after register
// has added handlers, and returns the server and its ws:// URL.
func newTestServer(t testing.TB, opts Options, register func(*Server)) (*Server, string) {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if register != nil {
		register(s)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
}

// frame is any server frame.
type frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload"`
	Error   *Error          `json:"error"`
	Event   string          `json:"event"`
	Seq     uint64          `json:"seq"`
}

type client struct {
	t  testing.TB
	ws *websocket.Conn
	// ctx ends with the test; every operation bounds itself with op.
	ctx context.Context
}

// op is the context of one read or write: testTimeout from now. (A
// deadline for the client's whole life would fail a test that merely runs
// long on a loaded machine.)
func (c *client) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, testTimeout)
}

func dial(t testing.TB, url string, header http.Header) *client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dctx, dcancel := context.WithTimeout(ctx, testTimeout)
	defer dcancel()
	ws, resp, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", url, err, code)
	}
	ws.SetReadLimit(-1)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &client{t: t, ws: ws, ctx: ctx}
}

func (c *client) writeJSON(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatalf("marshal: %v", err)
	}
	c.writeRaw(websocket.MessageText, b)
}

func (c *client) writeRaw(typ websocket.MessageType, b []byte) {
	c.t.Helper()
	ctx, cancel := c.op()
	defer cancel()
	if err := c.ws.Write(ctx, typ, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// read returns the next frame, including ticks.
func (c *client) read() frame {
	c.t.Helper()
	f, err := c.tryRead()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return f
}

func (c *client) tryRead() (frame, error) {
	ctx, cancel := c.op()
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		return frame{}, err
	}
	var f frame
	if err := json.Unmarshal(b, &f); err != nil {
		return frame{}, errors.New("server sent invalid JSON: " + string(b))
	}
	return f, nil
}

// next returns the next frame that is not a tick.
func (c *client) next() frame {
	c.t.Helper()
	for {
		f := c.read()
		if f.Type == frameEvent && f.Event == EventTick {
			continue
		}
		return f
	}
}

func (c *client) request(id, method string, params any) {
	c.t.Helper()
	req := map[string]any{"type": "req", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	c.writeJSON(req)
}

// call sends a request and returns its response (no other request may be
// in flight and no broadcast expected).
func (c *client) call(id, method string, params any) frame {
	c.t.Helper()
	c.request(id, method, params)
	f := c.next()
	if f.Type != frameRes || f.ID != id {
		c.t.Fatalf("want response %q, got %+v", id, f)
	}
	return f
}

// expectClose reads until the connection closes and checks code and reason.
func (c *client) expectClose(code websocket.StatusCode, reasonPart string) {
	c.t.Helper()
	for {
		ctx, cancel := c.op()
		_, _, err := c.ws.Read(ctx)
		cancel()
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			c.t.Fatalf("want close %d, got error %v", code, err)
		}
		if ce.Code != code || !strings.Contains(ce.Reason, reasonPart) {
			c.t.Fatalf("want close %d %q, got %d %q", code, reasonPart, ce.Code, ce.Reason)
		}
		return
	}
}

func connectParams(token string) map[string]any {
	return map[string]any{
		"minProtocol": 1, "maxProtocol": 1,
		"client": map[string]any{"id": "test", "version": "0.0.1", "platform": "linux", "mode": "test", "instanceId": "i-1"},
		"role":   "operator", "scopes": []string{}, "caps": []string{}, "commands": []string{},
		"permissions": map[string]any{}, "auth": map[string]any{"token": token},
	}
}

// readChallenge reads and checks the connect.challenge event.
func (c *client) readChallenge() Challenge {
	c.t.Helper()
	f := c.read()
	if f.Type != frameEvent || f.Event != EventChallenge || f.Seq != 1 {
		c.t.Fatalf("want connect.challenge seq 1, got %+v", f)
	}
	var ch Challenge
	if err := json.Unmarshal(f.Payload, &ch); err != nil {
		c.t.Fatalf("challenge payload: %v", err)
	}
	return ch
}

// connect dials and completes the handshake with params.
func connectWith(t testing.TB, url string, params map[string]any) (*client, Hello) {
	t.Helper()
	c := dial(t, url, nil)
	c.readChallenge()
	f := c.call("hello", MethodConnect, params)
	if !f.OK {
		t.Fatalf("connect failed: %+v", f.Error)
	}
	var h Hello
	if err := json.Unmarshal(f.Payload, &h); err != nil {
		t.Fatalf("hello payload: %v", err)
	}
	return c, h
}

func connect(t testing.TB, url string) (*client, Hello) {
	t.Helper()
	return connectWith(t, url, connectParams(testToken))
}

// waitFor polls cond with a deadline (for state changes that have no
// channel, e.g. a server-side disconnect).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func echo(_ context.Context, call *Call) (any, error) { return call.Params, nil }
