package gateway

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// BenchmarkRoundTrip measures sequential request/response pairs over one
// connection (latency-bound: one request in flight).
func BenchmarkRoundTrip(b *testing.B) {
	_, url := newTestServer(b, Options{}, func(s *Server) {
		s.Handle("echo", Read(Everyone), func(_ context.Context, call *Call) (any, error) { return call.Params, nil })
	})
	c, _ := connect(b, url)
	req := []byte(`{"type":"req","id":"00000000-0000-0000-0000-000000000000","method":"echo","params":{"q":"hello"}}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.ws.Write(c.ctx, websocket.MessageText, req); err != nil {
			b.Fatal(err)
		}
		_, resp, err := c.ws.Read(c.ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp) == 0 {
			b.Fatal("empty response")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkBroadcast measures events delivered per second to 50 and to 200
// connected clients (each broadcast counts one delivery per client); 200
// is the control-center benchmark's client count (backend/bench/control).
func BenchmarkBroadcast(b *testing.B) {
	for _, clients := range []int{50, 200} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchBroadcast(b, clients) })
	}
}

func benchBroadcast(b *testing.B, clients int) {
	benchEvent := []byte(`"event":"bench"`)
	s, url := newTestServer(b, Options{}, nil)
	var done sync.WaitGroup
	conns := make([]*client, clients)
	for i := range conns {
		conns[i], _ = connect(b, url)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := b.N
	for _, c := range conns {
		done.Add(1)
		go func() {
			defer done.Done()
			for got := 0; got < n; {
				_, data, err := c.ws.Read(c.ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if bytes.Contains(data, benchEvent) {
					got++
				}
			}
		}()
	}
	payload := map[string]any{"runId": "r-1", "profileId": "main", "sessionId": "s-1", "messageId": "m-1", "delta": "some streamed text "}
	for range n {
		s.Broadcast("bench", payload)
	}
	done.Wait()
	b.ReportMetric(float64(n*clients)/b.Elapsed().Seconds(), "events/s")
}
