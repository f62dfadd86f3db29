package nodehost

import (
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// inbox takes one connection's events on the gateway client's reader
// goroutine (gateway.ClientOptions.OnEvent) without ever blocking it or
// losing one (issue 21 item 2):
//   - a node.invoke.request is admitted while fewer than limit admitted
//     requests are unanswered (runs, for the serve loop's workers), else
//     put on the refusals list, answered at once UNAVAILABLE (retryable);
//   - every other event (device.token.rotated, device.pair.resolved,
//     tick, …) goes to the control list, unbounded in count but tiny
//     (the gateway sends a node a handful), so a burst of requests can
//     never push one out;
//   - any event proves the connection alive.
type inbox struct {
	log   *slog.Logger
	slots chan struct{}      // one per admitted request until its result is sent; capacity limit
	runs  chan invokeRequest // admitted requests; capacity limit, so sending never blocks
	alive chan struct{}      // an event arrived (capacity 1)

	mu          sync.Mutex
	refusals    []string // request ids to answer UNAVAILABLE
	control     []gateway.EventFrame
	refuseWake  chan struct{} // refusals grew (capacity 1)
	controlWake chan struct{} // control grew (capacity 1)
}

func newInbox(limit int, log *slog.Logger) *inbox {
	return &inbox{log: log, slots: make(chan struct{}, limit), runs: make(chan invokeRequest, limit),
		alive: make(chan struct{}, 1), refuseWake: make(chan struct{}, 1), controlWake: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// handle is the client's OnEvent: it never blocks.
func (b *inbox) handle(ev gateway.EventFrame) {
	signal(b.alive)
	if ev.Event != EventInvokeRequest {
		b.mu.Lock()
		b.control = append(b.control, ev)
		b.mu.Unlock()
		signal(b.controlWake)
		return
	}
	var req invokeRequest
	if err := json.Unmarshal(ev.Payload, &req); err != nil || req.ID == "" {
		b.log.Warn("bad node.invoke.request event", "err", err)
		return
	}
	select {
	case b.slots <- struct{}{}:
		b.runs <- req // a slot is held: runs has room
	default:
		b.mu.Lock()
		b.refusals = append(b.refusals, req.ID)
		b.mu.Unlock()
		signal(b.refuseWake)
	}
}

// done gives back the slot of an answered request.
func (b *inbox) done() { <-b.slots }

// takeRefusal returns the oldest request to refuse, if any.
func (b *inbox) takeRefusal() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.refusals) == 0 {
		return "", false
	}
	id := b.refusals[0]
	b.refusals = b.refusals[1:]
	return id, true
}

// takeControl returns the control events received so far, in order.
func (b *inbox) takeControl() []gateway.EventFrame {
	b.mu.Lock()
	defer b.mu.Unlock()
	evs := b.control
	b.control = nil
	return evs
}
