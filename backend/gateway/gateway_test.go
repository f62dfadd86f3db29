package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestNewValidation(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"no token", Options{}},
		{"bad origin pattern", Options{Token: "x", AllowedOrigins: []string{"["}}},
		{"bad addr", Options{Token: "x", Addr: "nonsense"}},
		{"negative limit", Options{Token: "x", MaxPayload: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.opts); err == nil {
				t.Fatal("New succeeded, want error")
			}
		})
	}
}

func TestHandshake(t *testing.T) {
	_, url := newTestServer(t, Options{
		Version:          "1.2.3",
		MaxPayload:       1000,
		MaxBufferedBytes: 2000,
		TickInterval:     time.Minute,
		Snapshot: func() Snapshot {
			return Snapshot{Profiles: []any{map[string]string{"id": "main"}}}
		},
	}, func(s *Server) {
		s.Handle("b.method", Read(Everyone), echo)
		s.Handle("a.method", Read(Everyone), echo)
		s.DeclareEvents("chat.chunk", "chat.final")
	})
	c := dial(t, url, nil)
	ch := c.readChallenge()
	if b, err := hex.DecodeString(ch.Nonce); err != nil || len(b) != 16 {
		t.Errorf("nonce %q: want 32 hex chars", ch.Nonce)
	}
	if d := time.Since(time.UnixMilli(ch.TS)); d < -time.Minute || d > time.Minute {
		t.Errorf("challenge ts %d is not now", ch.TS)
	}
	f := c.call("c1", MethodConnect, connectParams(testToken))
	if !f.OK {
		t.Fatalf("connect: %+v", f.Error)
	}
	var h Hello
	if err := json.Unmarshal(f.Payload, &h); err != nil {
		t.Fatal(err)
	}
	if h.Type != "hello-ok" || h.Protocol != 1 || h.Server.Version != "1.2.3" || h.Server.ConnID == "" {
		t.Errorf("hello header: %+v", h)
	}
	if want := []string{"a.method", "b.method"}; !slices.Equal(h.Features.Methods, want) {
		t.Errorf("methods %v, want %v", h.Features.Methods, want)
	}
	if want := []string{"chat.chunk", "chat.final", "connect.challenge", "tick"}; !slices.Equal(h.Features.Events, want) {
		t.Errorf("events %v, want %v", h.Features.Events, want)
	}
	if want := (Policy{MaxPayload: 1000, MaxBufferedBytes: 2000, TickIntervalMs: 60000}); h.Policy != want {
		t.Errorf("policy %+v, want %+v", h.Policy, want)
	}
	if len(h.Snapshot.Profiles) != 1 || h.Snapshot.Presence == nil {
		t.Errorf("snapshot %+v", h.Snapshot)
	}
	// The raw JSON keeps presence as [] (not null).
	if !strings.Contains(string(f.Payload), `"presence":[]`) {
		t.Errorf("payload %s: want presence []", f.Payload)
	}
}

func TestHandshakeFailures(t *testing.T) {
	withToken := func(tok string) map[string]any { return connectParams(tok) }
	badProto := connectParams(testToken)
	badProto["minProtocol"], badProto["maxProtocol"] = 2, 3
	badRole := connectParams(testToken)
	badRole["role"] = "admin"
	noAuth := connectParams(testToken)
	delete(noAuth, "auth")

	tests := []struct {
		name       string
		send       func(c *client) // nil: send nothing
		wantCode   string          // expected error response code, "" for none
		closeCode  websocket.StatusCode
		reasonPart string
	}{
		{"wrong token", func(c *client) { c.request("1", MethodConnect, withToken("wrong")) }, CodeUnauthorized, CloseUnauthorized, "unauthorized"},
		{"missing token", func(c *client) { c.request("1", MethodConnect, noAuth) }, CodeUnauthorized, CloseUnauthorized, "unauthorized"},
		{"other method first", func(c *client) { c.request("1", "health", nil) }, "", CloseHandshakeFailed, "connect request"},
		{"not JSON", func(c *client) { c.writeRaw(websocket.MessageText, []byte("hello?")) }, "", CloseHandshakeFailed, "connect request"},
		{"binary", func(c *client) { c.writeRaw(websocket.MessageBinary, []byte{1, 2, 3}) }, "", CloseHandshakeFailed, "binary"},
		{"protocol mismatch", func(c *client) { c.request("1", MethodConnect, badProto) }, CodeInvalidRequest, CloseHandshakeFailed, "protocol"},
		{"unknown role", func(c *client) { c.request("1", MethodConnect, badRole) }, CodeInvalidRequest, CloseHandshakeFailed, "role"},
		{"timeout", nil, "", CloseHandshakeFailed, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := Options{} // default 10 s handshake deadline
			if tt.send == nil {
				opts.HandshakeTimeout = 50 * time.Millisecond
			}
			_, url := newTestServer(t, opts, func(s *Server) { s.Handle("health", Read(Everyone), echo) })
			c := dial(t, url, nil)
			c.readChallenge()
			if tt.send != nil {
				tt.send(c)
			}
			if tt.wantCode != "" {
				f := c.read()
				if f.Type != frameRes || f.OK || f.Error == nil || f.Error.Code != tt.wantCode || f.ID != "1" {
					t.Fatalf("want %s response, got %+v", tt.wantCode, f)
				}
			}
			c.expectClose(tt.closeCode, tt.reasonPart)
		})
	}
}

func TestRoundTrip(t *testing.T) {
	var got atomic.Pointer[Call]
	_, url := newTestServer(t, Options{}, func(s *Server) {
		s.Handle("echo", Read(Everyone), func(ctx context.Context, call *Call) (any, error) {
			got.Store(call)
			return call.Params, nil
		})
	})
	c, hello := connect(t, url)
	f := c.call("r1", "echo", map[string]any{"x": 1, "s": "héllo"})
	if !f.OK || f.Error != nil {
		t.Fatalf("response %+v", f)
	}
	var p map[string]any
	if err := json.Unmarshal(f.Payload, &p); err != nil || p["x"] != 1.0 || p["s"] != "héllo" {
		t.Errorf("payload %s", f.Payload)
	}
	call := got.Load()
	if call.ConnID != hello.Server.ConnID || call.Method != "echo" || call.Role != RoleOperator || call.Client.ID != "test" || call.Client.InstanceID != "i-1" {
		t.Errorf("call %+v", call)
	}
	// Absent params arrive as {}.
	f = c.call("r2", "echo", nil)
	if string(f.Payload) != "{}" {
		t.Errorf("absent params echoed as %s, want {}", f.Payload)
	}
}

func TestHandlerErrors(t *testing.T) {
	tests := []struct {
		name      string
		h         Handler
		code      string
		msg       string
		retryable bool
		payload   string
	}{
		{"gateway error", func(context.Context, *Call) (any, error) { return nil, Errorf(CodeConflict, "version %d is stale", 3) }, CodeConflict, "version 3 is stale", false, ""},
		{"wrapped gateway error", func(context.Context, *Call) (any, error) {
			return nil, fmt.Errorf("save: %w", Errorf(CodeForbidden, "no write access"))
		}, CodeForbidden, "no write access", false, ""},
		{"unavailable is retryable", func(context.Context, *Call) (any, error) { return nil, Errorf(CodeUnavailable, "indexing") }, CodeUnavailable, "indexing", true, ""},
		{"deadline", func(ctx context.Context, _ *Call) (any, error) {
			ctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
			defer cancel()
			<-ctx.Done()
			return nil, fmt.Errorf("model call: %w", ctx.Err())
		}, CodeTimeout, "model call: context deadline exceeded", true, ""},
		{"plain error", func(context.Context, *Call) (any, error) { return nil, errors.New("disk on fire") }, CodeInternal, "disk on fire", false, ""},
		{"unencodable result", func(context.Context, *Call) (any, error) { return make(chan int), nil }, CodeInternal, "encode", false, ""},
		{"nil result", func(context.Context, *Call) (any, error) { return nil, nil }, "", "", false, "{}"},
		{"raw result", func(context.Context, *Call) (any, error) { return json.RawMessage(`[1,2]`), nil }, "", "", false, "[1,2]"},
	}
	_, url := newTestServer(t, Options{}, func(s *Server) {
		for i, tt := range tests {
			s.Handle(fmt.Sprintf("m%d", i), Read(Everyone), tt.h)
		}
	})
	c, _ := connect(t, url)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := c.call(fmt.Sprint("id", i), fmt.Sprintf("m%d", i), nil)
			if tt.code == "" {
				if !f.OK || string(f.Payload) != tt.payload {
					t.Fatalf("want ok %s, got %+v", tt.payload, f)
				}
				return
			}
			if f.OK || f.Error == nil || f.Error.Code != tt.code || !strings.Contains(f.Error.Message, tt.msg) || f.Error.Retryable != tt.retryable {
				t.Fatalf("want %s %q retryable=%v, got %+v", tt.code, tt.msg, tt.retryable, f.Error)
			}
		})
	}
}

func TestMalformedFrames(t *testing.T) {
	tests := []struct {
		name    string
		typ     websocket.MessageType
		data    string
		code    string
		wantID  string
		message string // substring of the error message ("" = any)
	}{
		{"not JSON", websocket.MessageText, `{"type":"req","id":"x1",`, CodeInvalidRequest, "x1", ""},
		{"garbage", websocket.MessageText, `hello`, CodeInvalidRequest, "", ""},
		{"binary", websocket.MessageBinary, `{"type":"req","id":"b1","method":"ping"}`, CodeInvalidRequest, "", ""},
		{"missing id", websocket.MessageText, `{"type":"req","method":"ping"}`, CodeInvalidRequest, "", ""},
		{"numeric id", websocket.MessageText, `{"type":"req","id":7,"method":"ping"}`, CodeInvalidRequest, "", ""},
		{"missing method", websocket.MessageText, `{"type":"req","id":"m1"}`, CodeInvalidRequest, "m1", ""},
		{"wrong type", websocket.MessageText, `{"type":"res","id":"t1","method":"ping"}`, CodeInvalidRequest, "t1", ""},
		{"array", websocket.MessageText, `[1,2,3]`, CodeInvalidRequest, "", "expected an object, got a JSON array"},
		{"invalid UTF-8", websocket.MessageText, "{\"type\":\"req\",\"id\":\"u8\",\"method\":\"ping\",\"params\":{\"q\":\"\xff\xfe\"}}", CodeInvalidRequest, "u8", "not valid UTF-8"},
		{"params not object", websocket.MessageText, `{"type":"req","id":"p1","method":"ping","params":[1]}`, CodeInvalidRequest, "p1", ""},
		{"bad idempotencyKey", websocket.MessageText, `{"type":"req","id":"k1","method":"ping","params":{"idempotencyKey":5}}`, CodeInvalidRequest, "k1", ""},
		{"unknown method", websocket.MessageText, `{"type":"req","id":"u1","method":"no.such"}`, CodeNotFound, "u1", ""},
		{"second connect", websocket.MessageText, `{"type":"req","id":"c2","method":"connect","params":{}}`, CodeInvalidRequest, "c2", ""},
	}
	_, url := newTestServer(t, Options{}, func(s *Server) {
		s.Handle("ping", Read(Everyone), func(context.Context, *Call) (any, error) { return map[string]bool{"pong": true}, nil })
	})
	c, _ := connect(t, url)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.writeRaw(tt.typ, []byte(tt.data))
			f := c.next()
			if f.Type != frameRes || f.OK || f.Error == nil || f.Error.Code != tt.code || f.ID != tt.wantID {
				t.Fatalf("want %s id %q, got %+v (error %+v)", tt.code, tt.wantID, f, f.Error)
			}
			if !strings.Contains(f.Error.Message, tt.message) || strings.Contains(f.Error.Message, "Go ") || strings.Contains(f.Error.Message, "struct") {
				t.Fatalf("error message %q: want it to contain %q and no Go type names", f.Error.Message, tt.message)
			}
			// The connection is still usable.
			if f := c.call(fmt.Sprint("ok", i), "ping", nil); !f.OK {
				t.Fatalf("ping after %s: %+v", tt.name, f.Error)
			}
		})
	}
}

func TestOversizedFrame(t *testing.T) {
	_, url := newTestServer(t, Options{MaxPayload: 1024}, func(s *Server) { s.Handle("echo", Read(Everyone), echo) })
	c, hello := connect(t, url)
	if hello.Policy.MaxPayload != 1024 {
		t.Fatalf("policy maxPayload %d", hello.Policy.MaxPayload)
	}
	big := strings.Repeat("a", 8192)
	c.request("big1", "echo", map[string]string{"blob": big})
	f := c.next()
	if f.OK || f.Error == nil || f.Error.Code != CodePayloadTooLarge || f.ID != "big1" || !strings.Contains(f.Error.Message, "1024") {
		t.Fatalf("want PAYLOAD_TOO_LARGE for big1 naming 1024, got %+v %+v", f, f.Error)
	}
	// Exactly at the limit is fine; the connection survived the big frame.
	pad := strings.Repeat("b", 1024-len(`{"type":"req","id":"edge","method":"echo","params":{"p":""}}`))
	c.writeRaw(websocket.MessageText, []byte(`{"type":"req","id":"edge","method":"echo","params":{"p":"`+pad+`"}}`))
	if f := c.next(); !f.OK || f.ID != "edge" {
		t.Fatalf("frame at the limit: %+v %+v", f, f.Error)
	}
	if f := c.call("after", "echo", map[string]int{"n": 1}); !f.OK {
		t.Fatalf("after oversized frame: %+v", f.Error)
	}
}

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestHandlerPanic(t *testing.T) {
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	_, url := newTestServer(t, Options{Logger: logger}, func(s *Server) {
		s.Handle("boom", Read(Everyone), func(context.Context, *Call) (any, error) { panic("kaboom") })
		s.Handle("echo", Read(Everyone), echo)
	})
	c, _ := connect(t, url)
	f := c.call("p1", "boom", nil)
	if f.OK || f.Error.Code != CodeInternal {
		t.Fatalf("want INTERNAL, got %+v", f)
	}
	if f := c.call("p2", "echo", nil); !f.OK {
		t.Fatalf("connection broken after panic: %+v", f.Error)
	}
	out := logs.String()
	for _, want := range []string{`"msg":"handler panic"`, `"method":"boom"`, `"panic":"kaboom"`, `"connId":`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

func TestConcurrentRequests(t *testing.T) {
	const n = 20
	release := make(chan struct{})
	var arrived atomic.Int32
	allIn := make(chan struct{})
	_, url := newTestServer(t, Options{}, func(s *Server) {
		s.Handle("slow", Read(Everyone), func(ctx context.Context, _ *Call) (any, error) {
			select {
			case <-release:
				return "slow", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
		s.Handle("fast", Read(Everyone), func(context.Context, *Call) (any, error) { return "fast", nil })
		s.Handle("barrier", Read(Everyone), func(ctx context.Context, _ *Call) (any, error) {
			if arrived.Add(1) == n {
				close(allIn)
			}
			select {
			case <-allIn:
				return "through", nil
			case <-time.After(testTimeout):
				return nil, errors.New("requests were not run concurrently")
			}
		})
	})
	c, _ := connect(t, url)

	// Out of order: the slow request is answered after the fast one.
	c.request("s", "slow", nil)
	c.request("f", "fast", nil)
	if f := c.next(); f.ID != "f" || !f.OK {
		t.Fatalf("want fast response first, got %+v", f)
	}
	close(release)
	if f := c.next(); f.ID != "s" || string(f.Payload) != `"slow"` {
		t.Fatalf("want slow response, got %+v", f)
	}

	// n requests that only complete when all n run at the same time.
	for i := range n {
		c.request(fmt.Sprint("b", i), "barrier", nil)
	}
	seen := map[string]bool{}
	for range n {
		f := c.next()
		if !f.OK {
			t.Fatalf("barrier: %+v", f.Error)
		}
		seen[f.ID] = true
	}
	if len(seen) != n {
		t.Fatalf("got %d distinct responses, want %d", len(seen), n)
	}
}

func TestIdempotency(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	var failNext atomic.Bool
	s, url := newTestServer(t, Options{}, func(s *Server) {
		s.Handle("chat.send", Write(Everyone), func(ctx context.Context, call *Call) (any, error) {
			n := runs.Add(1)
			started <- struct{}{}
			if failNext.CompareAndSwap(true, false) {
				return nil, Errorf(CodeUnavailable, "try later")
			}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]any{"runId": fmt.Sprint("run-", n)}, nil
		})
	})
	a, _ := connect(t, url)
	b, _ := connect(t, url)
	key := map[string]string{"message": "hi", "idempotencyKey": "k-1"}

	a.request("a1", "chat.send", key)
	<-started // the first call is running
	a.request("a2", "chat.send", key)
	b.request("b1", "chat.send", key) // same key from another connection
	close(release)

	var payloads []string
	for _, f := range []frame{a.next(), a.next(), b.next()} {
		if !f.OK {
			t.Fatalf("response %+v", f.Error)
		}
		payloads = append(payloads, string(f.Payload))
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
	for _, p := range payloads {
		if p != `{"runId":"run-1"}` {
			t.Fatalf("payloads %v: want the first result everywhere", payloads)
		}
	}
	// Later repeat: still the first result.
	if f := a.call("a3", "chat.send", key); string(f.Payload) != `{"runId":"run-1"}` || runs.Load() != 1 {
		t.Fatalf("late repeat: %s runs=%d", f.Payload, runs.Load())
	}
	// Another key runs again.
	if f := a.call("a4", "chat.send", map[string]string{"idempotencyKey": "k-2"}); string(f.Payload) != `{"runId":"run-2"}` {
		t.Fatalf("new key: %s", f.Payload)
	}
	// The same params encoded otherwise (member order, spaces) are the
	// same call.
	a.writeJSON(map[string]any{"type": "req", "id": "a5", "method": "chat.send",
		"params": json.RawMessage(`{ "idempotencyKey" : "k-2" }`)})
	if f := a.next(); string(f.Payload) != `{"runId":"run-2"}` {
		t.Fatalf("same params, other encoding: %+v", f)
	}
	// A retryable failure is not remembered: the retry runs the handler.
	failNext.Store(true)
	k3 := map[string]string{"idempotencyKey": "k-3"}
	if f := a.call("a6", "chat.send", k3); f.OK || f.Error.Code != CodeUnavailable {
		t.Fatalf("want UNAVAILABLE, got %+v", f)
	}
	if f := a.call("a7", "chat.send", k3); string(f.Payload) != `{"runId":"run-4"}` {
		t.Fatalf("retry after retryable error: %s", f.Payload)
	}
	if got := s.idem.len(); got != 3 {
		t.Errorf("cache holds %d entries, want 3", got)
	}
}

func TestIdempotencyCacheBounds(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	c := newIdemCache(clock, IdempotencyWindow, 3, 100)
	h0, h1 := sha256.Sum256([]byte("params 0")), sha256.Sum256([]byte("params 1"))
	finish := func(key, payload string) {
		e, leader, _ := c.begin("p", "m", key, h0)
		if !leader {
			t.Fatalf("%s: want leader", key)
		}
		c.finish(e, json.RawMessage(payload), nil)
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		finish(k, `"x"`)
	}
	if c.len() != 3 {
		t.Fatalf("len %d, want 3 (count bound)", c.len())
	}
	if _, leader, _ := c.begin("p", "m", "a", h0); !leader {
		t.Fatal("oldest entry a should have been evicted")
	}
	if e, leader, _ := c.begin("p", "m", "d", h0); leader || string(e.payload) != `"x"` {
		t.Fatal("d should be remembered")
	}
	// Other params: refused.
	if _, _, err := c.begin("p", "m", "d", h1); err == nil || err.Code != CodeInvalidRequest {
		t.Fatalf("same key, other params: %v, want INVALID_REQUEST", err)
	}
	// Method and principal are part of the key.
	if _, leader, _ := c.begin("p", "other", "d", h0); !leader {
		t.Fatal("same key, other method must run")
	}
	if _, leader, _ := c.begin("q", "m", "d", h0); !leader {
		t.Fatal("same key, other principal must run")
	}
	// Byte bound.
	c2 := newIdemCache(clock, IdempotencyWindow, 100, 10)
	e, _, _ := c2.begin("p", "m", "big", h0)
	c2.finish(e, json.RawMessage(`"0123456789abc"`), nil)
	if c2.len() != 0 {
		t.Fatalf("entry over the byte bound kept")
	}
	// Expiry after the window.
	c3 := newIdemCache(clock, IdempotencyWindow, 100, 100)
	e, _, _ = c3.begin("p", "m", "k", h0)
	c3.finish(e, json.RawMessage(`1`), nil)
	now = now.Add(IdempotencyWindow - time.Second)
	if _, leader, _ := c3.begin("p", "m", "k", h0); leader {
		t.Fatal("within the window: want replay")
	}
	now = now.Add(2 * time.Second)
	if _, leader, _ := c3.begin("p", "m", "k", h1); !leader {
		t.Fatal("after the window: want a new run")
	}
}

func TestBroadcast(t *testing.T) {
	s, url := newTestServer(t, Options{}, nil)
	c1, _ := connect(t, url)
	c2, _ := connect(t, url)
	nodeParams := connectParams(testToken)
	nodeParams["role"] = RoleNode
	node, nodeHello := connectWith(t, url, nodeParams)

	const n = 200
	for i := range n {
		s.Broadcast("test.event", map[string]int{"n": i})
	}
	s.Broadcast("test.done", nil)
	for _, c := range []*client{c1, c2} {
		var lastSeq uint64 = 1 // the challenge
		for i := range n {
			f := c.next()
			var p struct{ N int }
			if err := json.Unmarshal(f.Payload, &p); err != nil || f.Event != "test.event" || p.N != i {
				t.Fatalf("event %d: got %+v", i, f)
			}
			if f.Seq != lastSeq+1 {
				t.Fatalf("seq %d after %d", f.Seq, lastSeq)
			}
			lastSeq = f.Seq
		}
		if f := c.next(); f.Event != "test.done" || string(f.Payload) != "{}" {
			t.Fatalf("want test.done {}, got %+v", f)
		}
	}
	// Nodes do not get broadcasts, but can be addressed with Send.
	if err := s.Send(nodeHello.Server.ConnID, "node.invoke.request", map[string]string{"command": "camera.snap"}); err != nil {
		t.Fatal(err)
	}
	if f := node.next(); f.Event != "node.invoke.request" || f.Seq != 2 {
		t.Fatalf("node got %+v, want only the sent event with seq 2", f)
	}
	var ge *Error
	if err := s.Send("no-such-conn", "x", nil); !errors.As(err, &ge) || ge.Code != CodeNotFound {
		t.Fatalf("Send to unknown conn: %v", err)
	}
}

func TestSlowConsumer(t *testing.T) {
	tests := []struct {
		name         string
		limit, frame int
	}{
		// Broadcasts outpace the writer: the queue overflows at once.
		{"queue overflow", 64 << 10, 8 << 10},
		// The writer mostly keeps up until the socket buffers are full and
		// it blocks mid-write; the close must still arrive with its reason.
		{"blocked writer", 1 << 20, 256 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, url := newTestServer(t, Options{MaxBufferedBytes: int64(tt.limit)}, nil)
			c, hello := connect(t, url)
			if hello.Policy.MaxBufferedBytes != int64(tt.limit) {
				t.Fatalf("policy %+v", hello.Policy)
			}
			// The client stops reading.
			payload := map[string]string{"blob": strings.Repeat("x", tt.frame)}
			start := time.Now()
			deadline := start.Add(testTimeout)
			sent := 0
			for s.numAuthed() > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("slow consumer still connected after %d events", sent)
				}
				s.Broadcast("flood", payload)
				sent++
			}
			t.Logf("disconnected after %d events (%d KiB) in %v", sent, sent*tt.frame>>10, time.Since(start))
			// Everything written before the overflow may arrive; then the
			// close frame with the reason.
			c.expectClose(websocket.StatusPolicyViolation, "slow consumer")
			// Other clients are unaffected.
			c2, _ := connect(t, url)
			s.Broadcast("after", nil)
			if f := c2.next(); f.Event != "after" {
				t.Fatalf("healthy client got %+v", f)
			}
		})
	}
}

func TestTick(t *testing.T) {
	_, url := newTestServer(t, Options{TickInterval: 10 * time.Millisecond}, nil)
	c, hello := connect(t, url)
	if hello.Policy.TickIntervalMs != 10 {
		t.Fatalf("tickIntervalMs %d", hello.Policy.TickIntervalMs)
	}
	var last uint64 = 1
	for range 3 {
		f := c.read()
		if f.Type != frameEvent || f.Event != EventTick {
			t.Fatalf("want tick, got %+v", f)
		}
		var tk Tick
		if err := json.Unmarshal(f.Payload, &tk); err != nil || tk.TS == 0 {
			t.Fatalf("tick payload %s", f.Payload)
		}
		if f.Seq != last+1 {
			t.Fatalf("tick seq %d after %d", f.Seq, last)
		}
		last = f.Seq
	}
}

func TestOrigin(t *testing.T) {
	_, url := newTestServer(t, Options{AllowedOrigins: []string{"wails://wails", "app.example:*"}}, nil)
	tests := []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"http://localhost:5173", true},
		{"http://127.0.0.1:18789", true},
		{"https://[::1]:1", true},
		{"http://wails.localhost", true},
		{"wails://wails", true},
		{"http://app.example:8080", true},
		{"https://evil.example", false},
		{"http://localhost.evil.example", false},
		{"wails://evil", false},
		{"null", false},
	}
	for _, tt := range tests {
		t.Run(tt.origin, func(t *testing.T) {
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
			if tt.ok {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				// Allowed origins still need the token.
				c := &client{t: t, ws: ws, ctx: ctx}
				defer ws.CloseNow()
				c.readChallenge()
				c.request("1", MethodConnect, connectParams("nope"))
				c.expectClose(CloseUnauthorized, "unauthorized")
				return
			}
			if err == nil {
				ws.CloseNow()
				t.Fatal("accepted")
			}
			if resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("want 403, got %v %v", resp, err)
			}
		})
	}
}

func TestRunPort0(t *testing.T) {
	s, err := New(Options{Addr: "127.0.0.1:0", Token: testToken, Version: "9.9", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("echo", Read(Everyone), echo)
	if s.Addr() != "" {
		t.Fatal("Addr before Listen should be empty")
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-s.Ready()
	addr := s.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("Addr %q", addr)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var health struct {
		OK      bool
		Version string
	}
	err = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if err != nil || !health.OK || health.Version != "9.9" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("healthz: %+v %v", health, err)
	}

	c, _ := connect(t, "ws://"+addr+"/ws")
	if f := c.call("1", "echo", map[string]int{"a": 1}); !f.OK {
		t.Fatalf("echo: %+v", f.Error)
	}
	cancel()
	c.expectClose(websocket.StatusGoingAway, "shutting down")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Run did not return")
	}
	if err := s.Run(context.Background()); err == nil {
		t.Fatal("second Run should fail")
	}
}

func TestConcurrentClientsAndBroadcasts(t *testing.T) {
	// Races between connects, requests, broadcasts and disconnects (go test -race).
	// The broadcasts are bounded in number: an endless flood would queue
	// more noise before each response the slower the machine is.
	s, url := newTestServer(t, Options{}, func(s *Server) { s.Handle("echo", Read(Everyone), echo) })
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20000 {
			select {
			case <-stop:
				return
			default:
				s.Broadcast("noise", map[string]int{"x": 1})
			}
		}
	}()
	var cw sync.WaitGroup
	for i := range 8 {
		cw.Add(1)
		go func() {
			defer cw.Done()
			c, _ := connect(t, url)
			id := fmt.Sprint("e", i)
			c.request(id, "echo", map[string]int{"i": i})
			for {
				f := c.read()
				if f.Type == frameRes {
					if f.ID != id || !f.OK {
						t.Errorf("response %+v", f)
					}
					break
				}
			}
			c.ws.Close(websocket.StatusNormalClosure, "")
		}()
	}
	cw.Wait()
	close(stop)
	wg.Wait()
	// Every connection has been torn down on the server side.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if !s.waitConns(ctx) {
		t.Fatal("server still holds connections after all clients closed")
	}
}
