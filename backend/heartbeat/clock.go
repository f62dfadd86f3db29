package heartbeat

import (
	"sync"
	"time"
)

// ManualClock is a Clock that moves only when told (Set): what tests
// inject to run a heartbeat at a time of their choosing. Each After is
// announced on Waits with its deadline (the channel holds 64; an After
// with a full channel drops the announcement, never blocks). Safe for
// concurrent use.
type ManualClock struct {
	// Waits receives the deadline of every After.
	Waits chan time.Time

	mu     sync.Mutex
	now    time.Time
	timers []manualTimer
}

type manualTimer struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a clock reading t.
func NewManualClock(t time.Time) *ManualClock {
	return &ManualClock{now: t, Waits: make(chan time.Time, 64)}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once Set has
// moved it d or more ahead of now.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := c.now.Add(d)
	if d <= 0 {
		ch <- c.now
	} else {
		c.timers = append(c.timers, manualTimer{at, ch})
	}
	select {
	case c.Waits <- at:
	default:
	}
	return ch
}

// Set moves the clock to t and fires the timers due by then.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	keep := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(t) {
			tm.ch <- t
		} else {
			keep = append(keep, tm)
		}
	}
	c.timers = keep
}
