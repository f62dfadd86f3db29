package atrium

// The fresh review of issue 21 found the LAN could lock the person out:
// four LAN addresses × 16 WebSockets that never send connect filled the
// gateway's one cap on connections waiting for their handshake, and the
// desktop window and the CLI on 127.0.0.1 got HTTP 503. The LAN and the
// loopback listener now have caps of their own.

import (
	"fmt"
	"testing"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/coder/websocket"
)

func TestAdversarialPreAuthFloodSparesLoopback(t *testing.T) {
	k := startAttack(t)
	var held []*websocket.Conn
	defer func() {
		for _, c := range held {
			c.CloseNow()
		}
	}()
	addrs := gateway.DefaultMaxUnauthenticated / gateway.DefaultMaxUnauthenticatedPerIP
	for i := range addrs {
		src := fmt.Sprintf("127.0.0.%d", 30+i)
		for range gateway.DefaultMaxUnauthenticatedPerIP {
			c, _, err := websocket.Dial(k.ctx, k.wssURL(), &websocket.DialOptions{HTTPClient: k.from(src)})
			must(t, err)
			held = append(held, c) // silent: never sends connect
		}
	}
	// The LAN's cap is full: one more from a fifth address is refused.
	if c, _, err := websocket.Dial(k.ctx, k.wssURL(), &websocket.DialOptions{HTTPClient: k.from("127.0.0.40")}); err == nil {
		c.CloseNow()
		t.Errorf("connection %d waiting for its handshake on the LAN was admitted", len(held)+1)
	}
	// The person's window and CLI on 127.0.0.1 connect and are served.
	for i := range 3 {
		admin := gwDial(k.ctx, t, k.a, gateway.RoleOperator, fmt.Sprintf("window-%d", i))
		var st map[string]any
		must(t, admin.Call(k.ctx, "memory.status", nil, &st))
		admin.Close()
	}
}
