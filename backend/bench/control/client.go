package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// loadClient is one load-phase WebSocket client. It does the real
// handshake (connect.challenge, connect → hello-ok) but then reads frames
// by their fixed prefixes instead of decoding them: the clients run in the
// benchmark's process, and full JSON decoding by 200 of them would take
// most of the CPU the gateway is being measured on.
type loadClient struct {
	id  string
	ws  *websocket.Conn
	res chan []byte // one per response frame
	// closing is set by close before it ends the connection, so that the
	// read loop's error is not taken for a lost connection.
	closing atomic.Bool

	mu   sync.Mutex
	lost error // why the connection ended before close, nil while it lives

	events atomic.Int64
	lat    []float64 // chunk latencies (ms), written by the read loop only
	done   chan struct{}
}

// Frame prefixes as the gateway writes them (frames.go: a response is
// encoded from ResponseFrame, whose first fields are type, id, ok; an
// event starts with type and event).
var (
	prefixRes   = []byte(`{"type":"res",`)
	prefixChat  = []byte(`{"type":"event","event":"chat.`)
	prefixChunk = []byte(`{"type":"event","event":"chat.chunk"`)
	markOK      = []byte(`"ok":true`)
	markDelta   = []byte(`"delta":"@`)
)

// dialLoad connects and completes the handshake.
func dialLoad(ctx context.Context, url, token, id string) (*loadClient, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	ws.SetReadLimit(64 << 20)
	if _, data, err := ws.Read(ctx); err != nil || !bytes.Contains(data, []byte(gateway.EventChallenge)) {
		ws.CloseNow()
		return nil, fmt.Errorf("client %s: no connect.challenge (%v)", id, err)
	}
	conn, _ := json.Marshal(map[string]any{"type": "req", "id": "connect", "method": gateway.MethodConnect,
		"params": gateway.ConnectParams{MinProtocol: gateway.ProtocolVersion, MaxProtocol: gateway.ProtocolVersion,
			Role: gateway.RoleOperator, Auth: gateway.ConnectAuth{Token: token},
			Client: gateway.ClientInfo{ID: "bench-" + id, Version: "bench", Platform: "bench", Mode: "bench", InstanceID: id}}})
	if err := ws.Write(ctx, websocket.MessageText, conn); err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("client %s: connect: %w", id, err)
	}
	_, data, err := ws.Read(ctx)
	if err != nil || !bytes.HasPrefix(data, prefixRes) || !bytes.Contains(data, markOK) {
		ws.CloseNow()
		return nil, fmt.Errorf("client %s: connect refused: %.200s (%v)", id, data, err)
	}
	c := &loadClient{id: id, ws: ws, res: make(chan []byte, 1), done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// readLoop sorts frames: responses to the request loop, chat events
// counted, chunk latencies measured from the model's timestamp.
func (c *loadClient) readLoop() {
	defer close(c.done)
	for {
		_, data, err := c.ws.Read(context.Background())
		if err != nil {
			if !c.closing.Load() {
				c.mu.Lock()
				c.lost = fmt.Errorf("client %s: connection lost: %w", c.id, err)
				c.mu.Unlock()
			}
			close(c.res)
			return
		}
		switch {
		case bytes.HasPrefix(data, prefixRes):
			c.res <- data
		case bytes.HasPrefix(data, prefixChat):
			c.events.Add(1)
			if bytes.HasPrefix(data, prefixChunk) {
				if d, ok := stampAge(data); ok {
					c.lat = append(c.lat, ms(d))
				}
			}
		}
	}
}

// errStopped is call's answer when the load phase ended while it waited.
var errStopped = errors.New("load phase over")

// call sends one request and waits for its response. The error says why
// it failed (which client, which request, the response or the connection's
// fate); errStopped when stop ended the wait, which is no failure.
//
// The frame is written without stop: coder/websocket closes a connection
// whose write context ends during the write, and the end of the load
// phase must not cut connections (they would count as lost). A write
// that takes longer than writeTimeout fails the client.
func (c *loadClient) call(stop context.Context, n int, method string) error {
	frame := `{"type":"req","id":"` + strconv.Itoa(n) + `","method":"` + method + `","params":{}}`
	wctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	err := c.ws.Write(wctx, websocket.MessageText, []byte(frame))
	cancel()
	if err != nil {
		return fmt.Errorf("client %s: request %d (%s): write: %w", c.id, n, method, err)
	}
	select {
	case data, open := <-c.res:
		if !open {
			return fmt.Errorf("client %s: request %d (%s): no response: %w", c.id, n, method, c.lostErr())
		}
		if !bytes.Contains(data, markOK) {
			return fmt.Errorf("client %s: request %d (%s): %.300s", c.id, n, method, data)
		}
		return nil
	case <-stop.Done():
		return errStopped
	}
}

// writeTimeout bounds one request frame's write.
const writeTimeout = 30 * time.Second

// lostErr is why the connection ended before close (nil while it lives).
func (c *loadClient) lostErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// close ends the connection and waits for the read loop (whose latencies
// may then be read).
func (c *loadClient) close() {
	c.closing.Store(true)
	c.ws.CloseNow()
	<-c.done
}

// stampAge reads the model server's timestamp at the start of a chunk's
// delta (`"delta":"@<unix ns>;`) and returns how long ago it was.
func stampAge(frame []byte) (time.Duration, bool) {
	i := bytes.Index(frame, markDelta)
	if i < 0 {
		return 0, false
	}
	rest := frame[i+len(markDelta):]
	end := bytes.IndexByte(rest, ';')
	if end <= 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Since(time.Unix(0, ns)), true
}
