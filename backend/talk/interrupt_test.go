package talk

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// recConn is a page's channel that takes everything at once and keeps
// what was sent.
type recConn struct {
	mu   sync.Mutex
	msgs [][]byte
	sent chan struct{} // signalled after each Send
}

func newRecConn() *recConn { return &recConn{sent: make(chan struct{}, 1)} }

func (c *recConn) Send(b []byte) error {
	c.mu.Lock()
	c.msgs = append(c.msgs, append([]byte(nil), b...))
	c.mu.Unlock()
	select {
	case c.sent <- struct{}{}:
	default:
	}
	return nil
}
func (c *recConn) WaitBuffered(context.Context, int) error { return nil }
func (c *recConn) Close()                                  {}

// replyEnds is the R messages sent so far.
func (c *recConn) replyEnds(t *testing.T) []ReplyEnd {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ReplyEnd
	for _, m := range c.msgs {
		if m[0] == MsgReplyEnd {
			var r ReplyEnd
			if err := json.Unmarshal(m[1:], &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
	}
	return out
}

// attachedTalk is a talk of a new Service on a recConn, its speaker not
// started (as if busy speaking something else).
func attachedTalk(t *testing.T) (*talk, *recConn) {
	t.Helper()
	s := testService(t, Options{})
	st := Settings{STT: STTSettings{BaseURL: "http://127.0.0.1:9/v1"}, Interrupt: InterruptQueue}.WithDefaults()
	tk := newTalk(s, "conn", "main", "s1", OpenParams{Mode: "continuous", Lang: "en"}, st)
	c := newRecConn()
	tk.st, tk.conn = stAttached, c
	t.Cleanup(func() { tk.end(ReasonClosed, false) })
	return tk, c
}

// TestInterruptsAfterRunsEnded: the person speaks over answers whose runs
// have already ended (their sentences still waiting for the voice), and
// over voice commands' confirmations, 300 times in one talk. Each
// interrupt still stops its reply (R {interrupted}, nothing of it left to
// speak), and the talk's replies do not grow with the interrupts: the
// entry of a reply whose run ended goes with its interrupt (it used to
// stay until the talk ended, its end taken off the speaker's queue).
func TestInterruptsAfterRunsEnded(t *testing.T) {
	tk, c := attachedTalk(t)
	const n = 300
	for i := range n {
		id := fmt.Sprint("run-", i)
		if i%3 == 2 {
			tk.command(CommandSlower, "en", fmt.Sprint("u", i))
			id = fmt.Sprint("cmd-u", i)
		} else {
			for _, e := range []RunEvent{{Kind: RunStarted}, {Kind: RunDelta, Delta: "Hello there. How are you today? Fine"}, {Kind: RunEnded}} {
				e.RunID, e.ProfileID, e.SessionID = id, "main", "s1"
				tk.runEvent(e)
			}
		}
		tk.interrupt(id)
		tk.interrupt(id) // the page may say it twice
	}
	tk.mu.Lock()
	replies, queued := len(tk.replies), len(tk.speakQ)
	tk.mu.Unlock()
	if queued != 0 {
		t.Fatalf("%d sentences of interrupted replies are still to be spoken", queued)
	}
	if replies > 2 {
		t.Fatalf("%d replies held after %d interrupts of ended runs, want them gone (at most 2)", replies, n)
	}
	ends := c.replyEnds(t)
	if len(ends) != n {
		t.Fatalf("%d R sent for %d interrupted replies", len(ends), n)
	}
	for _, r := range ends {
		if !r.Interrupted {
			t.Fatalf("R %+v, want interrupted", r)
		}
	}

	// The speaker then speaks an answer not interrupted, whole, and lets
	// its reply go at its end.
	go tk.speaker()
	for _, e := range []RunEvent{{Kind: RunStarted}, {Kind: RunDelta, Delta: "One more. And the last"}, {Kind: RunEnded}} {
		e.RunID, e.ProfileID, e.SessionID = "run-last", "main", "s1"
		tk.runEvent(e)
	}
	deadline := time.After(30 * time.Second)
	for len(c.replyEnds(t)) == n {
		select {
		case <-c.sent:
		case <-deadline:
			t.Fatal("the last answer's R was not sent")
		}
	}
	if r := c.replyEnds(t)[n]; r.ReplyID != "run-last" || r.Interrupted {
		t.Fatalf("R %+v, want run-last's end", r)
	}
	c.mu.Lock()
	said := 0
	for _, m := range c.msgs {
		var s Say
		if m[0] == MsgSay && json.Unmarshal(m[1:], &s) == nil {
			if s.ReplyID != "run-last" {
				t.Errorf("an interrupted reply was spoken: %+v", s)
			}
			said++
		}
	}
	c.mu.Unlock()
	if said != 2 {
		t.Fatalf("%d sentences of the last answer spoken, want 2", said)
	}
	tk.mu.Lock()
	replies = len(tk.replies)
	tk.mu.Unlock()
	if replies != 0 {
		t.Fatalf("%d replies held after the last answer was spoken", replies)
	}
}
