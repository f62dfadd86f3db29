package live

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// Publisher is a node's side of a live view (`atrium node`; the phone page
// has its own in frontend/src/lib/livesend.ts): it sends an encoder's bytes
// as chunk messages stamped with the node's clock, answers the gateway's
// pings and ends on the gateway's stop. Make one per view, hand its Hooks
// to the connection (rtc.DialStream), then Run.
type Publisher struct {
	// MaxChunk caps one chunk message's data (0: DefaultMaxChunkBytes);
	// a read of the encoder's output is cut into messages of at most this.
	MaxChunk int
	// MaxBuffered: when the connection reports more bytes queued than this
	// (a Conn with Buffered() int), the view ends: the network cannot
	// carry the stream (0: 4 MiB).
	MaxBuffered int
	// Now is the clock of the capture stamps and pongs (nil: time.Now).
	Now func() time.Time

	mu      sync.Mutex
	conn    Conn
	stopped chan struct{}
	once    sync.Once
	reason  string // why it stopped: the gateway's reason, or "closed"
}

// ErrStopped: the gateway ended the view, or its connection closed.
var ErrStopped = errors.New("live view stopped")

func (p *Publisher) init() {
	p.mu.Lock()
	if p.stopped == nil {
		p.stopped = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *Publisher) stop(reason string) {
	p.init()
	p.once.Do(func() {
		p.mu.Lock()
		p.reason = reason
		p.mu.Unlock()
		close(p.stopped)
	})
}

func (p *Publisher) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Hooks are the connection's: pings answered, the gateway's stop and the
// connection's end stop Run.
func (p *Publisher) Hooks() Hooks {
	p.init()
	return Hooks{
		Message: func(b []byte) {
			switch b[0] {
			case msgPing:
				var ping pingMsg
				if json.Unmarshal(b[1:], &ping) != nil {
					return
				}
				p.mu.Lock()
				c := p.conn
				p.mu.Unlock()
				if c != nil {
					_ = c.Send(jsonMsg(msgPong, pongMsg{T: ping.T, N: unixMs(p.now())}))
				}
			case msgStop:
				var s stopMsg
				_ = json.Unmarshal(b[1:], &s)
				p.stop(s.Reason)
			}
		},
		Closed: func() { p.stop("closed") },
	}
}

// Run sends r (the encoder's WebM) on conn until r ends, ctx ends (the
// node stops: 'X' {reason:"stopped"} is sent first), or the gateway stops
// the view (ErrStopped, with its reason). It does not close conn or r.
func (p *Publisher) Run(ctx context.Context, conn Conn, r io.Reader) error {
	p.init()
	p.mu.Lock()
	p.conn = conn
	p.mu.Unlock()
	maxChunk := p.MaxChunk
	if maxChunk <= 0 {
		maxChunk = DefaultMaxChunkBytes
	}
	maxBuf := p.MaxBuffered
	if maxBuf <= 0 {
		maxBuf = 4 << 20
	}
	type read struct {
		b   []byte
		at  time.Time
		err error
	}
	reads := make(chan read)
	go func() { // the reader stops when r ends (its owner stops the encoder)
		for {
			buf := make([]byte, maxChunk)
			n, err := r.Read(buf)
			select {
			case reads <- read{buf[:n], p.now(), err}:
			case <-p.stopped:
				return
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var seq uint32
	for {
		select {
		case <-ctx.Done():
			_ = conn.Send(jsonMsg(msgStop, stopMsg{Reason: ReasonStopped}))
			return fmt.Errorf("live: %w", ctx.Err())
		case <-p.stopped:
			p.mu.Lock()
			why := p.reason
			p.mu.Unlock()
			return fmt.Errorf("live: %w (%s)", ErrStopped, why)
		case rd := <-reads:
			if len(rd.b) > 0 {
				if bc, ok := conn.(interface{ Buffered() int }); ok && bc.Buffered() > maxBuf {
					_ = conn.Send(jsonMsg(msgStop, stopMsg{Reason: "node_slow"}))
					return fmt.Errorf("live: %d bytes waiting on the connection: %w", bc.Buffered(), ErrStopped)
				}
				m := make([]byte, chunkHeader+len(rd.b))
				m[0] = msgChunk
				binary.BigEndian.PutUint32(m[1:], seq)
				binary.BigEndian.PutUint64(m[5:], math.Float64bits(unixMs(rd.at)))
				copy(m[chunkHeader:], rd.b)
				if err := conn.Send(m); err != nil {
					return fmt.Errorf("live: send: %w", err)
				}
				seq++
			}
			if rd.err != nil {
				_ = conn.Send(jsonMsg(msgStop, stopMsg{Reason: ReasonStopped}))
				if errors.Is(rd.err, io.EOF) {
					return fmt.Errorf("live: the encoder's output ended: %w", rd.err)
				}
				return fmt.Errorf("live: read the encoder: %w", rd.err)
			}
		}
	}
}
