package gateway

import (
	"context"
	"errors"
	"testing"
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

	c, err := Dial(ctx, ClientOptions{URL: url, Token: testToken, Client: ClientInfo{ID: "test"}, EventBuffer: 4})
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

	// Events arrive in order; when the buffer is full, the extra events are
	// dropped and counted, and requests still get their responses.
	for i := 0; i < 10; i++ {
		s.Broadcast("demo", map[string]int{"i": i})
	}
	if err := c.Call(ctx, "echo", map[string]int{"after": 1}, nil); err != nil {
		t.Fatalf("call after a burst of events: %v", err)
	}
	var seqs []uint64
	for len(seqs) < 4 {
		ev := <-c.Events()
		if ev.Event == "demo" {
			seqs = append(seqs, ev.Seq)
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("events out of order: %v", seqs)
		}
	}
	if c.Dropped() == 0 {
		t.Fatal("a full event buffer dropped nothing")
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "echo", nil, nil); err == nil {
		t.Fatal("Call after Close succeeded")
	}
}
