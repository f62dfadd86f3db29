package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestClient(t *testing.T) {
	s, url := newTestServer(t, Options{}, func(s *Server) {
		s.Handle("echo", Read(Everyone), echo)
		s.Handle("fail", Read(Everyone), func(context.Context, *Call) (any, error) {
			return nil, Errorf(CodeNotFound, "no such thing")
		})
		s.Handle("do", Write(Everyone), echo)
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	if _, err := Dial(ctx, ClientOptions{URL: url, Token: "wrong-token-0123456789"}); err == nil {
		t.Fatal("Dial with a wrong token succeeded")
	} else if ge := (*Error)(nil); !errors.As(err, &ge) || ge.Code != CodeUnauthorized {
		t.Fatalf("wrong token: err = %v, want a *Error %s", err, CodeUnauthorized)
	}

	c, err := Dial(ctx, ClientOptions{URL: url, Token: testToken, Client: ClientInfo{ID: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Hello().Type != helloType || c.Hello().Server.ConnID == "" {
		t.Fatalf("hello: %+v", c.Hello())
	}

	var out map[string]string
	if err := c.Call(ctx, "echo", map[string]string{"q": "数据库"}, &out); err != nil || out["q"] != "数据库" {
		t.Fatalf("echo: %v %v", out, err)
	}
	// A method with side effects gets a new key unless the caller gave one.
	var did1, did2, did3 map[string]string
	if err := c.Call(ctx, "do", map[string]string{"q": "x"}, &did1); err != nil || did1["idempotencyKey"] == "" || did1["q"] != "x" {
		t.Fatalf("do: %v %v", did1, err)
	}
	if err := c.Call(ctx, "do", nil, &did2); err != nil || did2["idempotencyKey"] == "" || did2["idempotencyKey"] == did1["idempotencyKey"] {
		t.Fatalf("do with nil params: %v %v (first key %q)", did2, err, did1["idempotencyKey"])
	}
	if err := c.Call(ctx, "do", map[string]string{"idempotencyKey": "mine"}, &did3); err != nil || did3["idempotencyKey"] != "mine" {
		t.Fatalf("do with a key: %v %v", did3, err)
	}
	if err := c.Call(ctx, "do", []int{1}, nil); err == nil {
		t.Fatal("do with an array for params succeeded")
	}
	var ge *Error
	if err := c.Call(ctx, "fail", nil, nil); !errors.As(err, &ge) || ge.Code != CodeNotFound || ge.Message != "no such thing" {
		t.Fatalf("fail: err = %v", err)
	}
	if err := c.Call(ctx, "no.such.method", nil, nil); !errors.As(err, &ge) || ge.Code != CodeNotFound {
		t.Fatalf("unknown method: err = %v", err)
	}

	// Events arrive in order, every one of them: a burst far larger than
	// any channel buffer that nobody reads meanwhile is kept (the client
	// used to drop all but 256), and requests still get their responses.
	const burst = 2000
	for i := range burst {
		s.Broadcast("demo", map[string]int{"i": i})
	}
	if err := c.Call(ctx, "echo", map[string]int{"after": 1}, nil); err != nil {
		t.Fatalf("call after a burst of events: %v", err)
	}
	next := 0
	for next < burst {
		select {
		case ev := <-c.Events():
			if ev.Event != "demo" {
				continue
			}
			var p struct{ I int }
			if err := json.Unmarshal(ev.Payload, &p); err != nil || p.I != next {
				t.Fatalf("event %d of the burst: %s (err %v), want i=%d", next, ev.Payload, err, next)
			}
			next++
		case <-ctx.Done():
			t.Fatalf("only %d of %d events arrived", next, burst)
		}
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "echo", nil, nil); err == nil {
		t.Fatal("Call after Close succeeded")
	}
}

// TestClientOnEvent: with OnEvent every event reaches the handler in order
// on the reader, before the response that follows them; Events is closed.
func TestClientOnEvent(t *testing.T) {
	s, url := newTestServer(t, Options{}, func(s *Server) { s.Handle("echo", Read(Everyone), echo) })
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var mu sync.Mutex
	var got []int
	c, err := Dial(ctx, ClientOptions{URL: url, Token: testToken, OnEvent: func(ev EventFrame) {
		if ev.Event != "demo" {
			return
		}
		var p struct{ I int }
		_ = json.Unmarshal(ev.Payload, &p)
		mu.Lock()
		got = append(got, p.I)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, open := <-c.Events(); open {
		t.Fatal("Events carries an event with OnEvent set")
	}
	const burst = 3000
	for i := range burst {
		s.Broadcast("demo", map[string]int{"i": i})
	}
	// The response is read after the events sent before it.
	if err := c.Call(ctx, "echo", nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != burst {
		t.Fatalf("OnEvent got %d of %d events", len(got), burst)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("event %d is i=%d: out of order", i, v)
		}
	}
}

// TestClientEventBacklogClosesLoudly: a caller that never takes its events
// does not lose them silently: past MaxEventBacklog the connection ends
// and Err says why; the events held before are still delivered, then
// Events closes.
func TestClientEventBacklogClosesLoudly(t *testing.T) {
	s, url := newTestServer(t, Options{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := Dial(ctx, ClientOptions{URL: url, Token: testToken, MaxEventBacklog: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 1000 {
		s.Broadcast("demo", map[string]int{"i": i})
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the connection stayed open with its backlog over the limit")
	}
	if !errors.Is(c.Err(), ErrEventBacklog) {
		t.Fatalf("Err = %v, want ErrEventBacklog", c.Err())
	}
	n := 0
	for ev := range c.Events() {
		if ev.Event == "demo" {
			n++
		}
	}
	if n == 0 || n >= 1000 {
		t.Fatalf("%d events delivered after the overflow, want those held before it", n)
	}
	if err := c.Call(ctx, "echo", nil, nil); !errors.Is(err, ErrEventBacklog) {
		t.Fatalf("Call after the overflow: %v, want ErrEventBacklog", err)
	}
}

// TestClientUpgradeRefusalRetryAfter: an upgrade refused with an HTTP
// status (503 over the cap of connections waiting for a handshake) is an
// *UpgradeError with the server's Retry-After, and RetryAfter reads it as
// it reads a refusal's details.retryAfterMs.
func TestClientUpgradeRefusalRetryAfter(t *testing.T) {
	_, url := newTestServer(t, Options{MaxUnauthenticated: 1}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	holder, _, err := websocket.Dial(ctx, url, nil) // holds the one pre-handshake slot
	if err != nil {
		t.Fatal(err)
	}
	defer holder.CloseNow()
	_, err = Dial(ctx, ClientOptions{URL: url, Token: testToken})
	var ue *UpgradeError
	if !errors.As(err, &ue) || ue.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial over the cap: %v, want an *UpgradeError 503", err)
	}
	if d, ok := RetryAfter(err); !ok || d != 5*time.Second {
		t.Fatalf("RetryAfter = %v %v, want the server's 5 s", d, ok)
	}
	refusal := fmt.Errorf("connect: %w", &Error{Code: CodeUnauthorized, Details: map[string]any{"reason": "rate_limited", "retryAfterMs": float64(1500)}})
	if d, ok := RetryAfter(refusal); !ok || d != 1500*time.Millisecond {
		t.Fatalf("RetryAfter(rate_limited) = %v %v", d, ok)
	}
	if _, ok := RetryAfter(errors.New("other")); ok {
		t.Fatal("RetryAfter of a plain error")
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for h, want := range map[string]time.Duration{"7": 7 * time.Second, "": 0, "-1": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second, now.Add(-time.Minute).Format(http.TimeFormat): 0} {
		if got := parseRetryAfter(h, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}
