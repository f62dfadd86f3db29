package gateway

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/device"
)

// TestOnDeviceEvent: a broadcast reaches the operator token's connection
// unchanged; a paired operator device's connections get what the filter
// returns (a narrowed payload, the payload as is, or nothing), the filter
// is asked once per device and event whatever its number of connections,
// and events keep their order and seq.
func TestOnDeviceEvent(t *testing.T) {
	var asked atomic.Int64
	s, url := newTestServer(t, Options{GatewayID: testGatewayID, Authenticate: testDeviceAuth}, func(s *Server) {
		s.Handle("noop", Read(Everyone), echo)
		s.OnDeviceEvent(func(p Principal, event string, body []byte) ([]byte, bool) {
			asked.Add(1)
			if p.Class() != OperatorDevice || p.Device == "" {
				t.Errorf("filter asked for %+v", p)
			}
			switch event {
			case "secret":
				return nil, false
			case "narrow":
				return []byte(`{"n":"narrowed"}`), true
			}
			return nil, true // as is
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := Dial(ctx, ClientOptions{URL: url, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	key, err := device.GenerateKey(device.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	var phone [2]*Client
	for i := range phone {
		phone[i], err = Dial(ctx, ClientOptions{URL: url, Device: key, GatewayID: testGatewayID, DeviceToken: "tok-operator",
			Role: RoleOperator, Client: ClientInfo{ID: "phone", Mode: "ui", DisplayName: "Pixel"}})
		if err != nil {
			t.Fatal(err)
		}
		defer phone[i].Close()
	}
	s.Broadcast("secret", map[string]string{"n": "1"})
	s.Broadcast("narrow", map[string]string{"n": "2"})
	s.Broadcast("plain", map[string]string{"n": "3"})
	s.Broadcast("done", nil)
	if n := asked.Load(); n != 4 {
		t.Errorf("filter asked %d times for 4 events and one device with 2 connections, want 4", n)
	}
	read := func(c *Client) (got []string) {
		for {
			select {
			case ev := <-c.Events():
				if ev.Event == "tick" {
					continue
				}
				var p struct{ N string }
				_ = json.Unmarshal(ev.Payload, &p)
				got = append(got, ev.Event+":"+p.N)
				if ev.Event == "done" {
					return got
				}
			case <-ctx.Done():
				t.Fatalf("events so far %v: %v", got, ctx.Err())
			}
		}
	}
	if got := read(admin); len(got) != 4 || got[0] != "secret:1" || got[1] != "narrow:2" || got[2] != "plain:3" {
		t.Errorf("admin got %v, want every event as sent", got)
	}
	for i, c := range phone {
		if got := read(c); len(got) != 3 || got[0] != "narrow:narrowed" || got[1] != "plain:3" || got[2] != "done:" {
			t.Errorf("device connection %d got %v, want [narrow:narrowed plain:3 done:]", i, got)
		}
	}
}
