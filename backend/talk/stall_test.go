package talk

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// stuckConn is a page's channel that reads nothing: what is sent stays
// queued, and WaitBuffered waits (for its ctx) while more than max is.
type stuckConn struct {
	mu     sync.Mutex
	queued int
	says   int
	closed chan struct{}
}

func (c *stuckConn) Send(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queued += len(b)
	if b[0] == MsgSay {
		c.says++
	}
	return nil
}

func (c *stuckConn) WaitBuffered(ctx context.Context, max int) error {
	c.mu.Lock()
	q := c.queued
	c.mu.Unlock()
	if q <= max {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return errors.New("closed")
	}
}

func (c *stuckConn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
}

// TestBrowserVoiceSlowReader: with no speech server the answer goes as T
// sentences for the page's own voice; a page that reads none of them is
// ended slow_reader like one that leaves S audio unread — the T
// messages waited for nobody, so its channel's queue grew with every
// answer until the talk went idle (10 min).
func TestBrowserVoiceSlowReader(t *testing.T) {
	var logs lockedBuffer
	s := testService(t, Options{SpeechStall: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := &gateway.Call{ConnID: "desk", Method: MethodOpen, Role: gateway.RoleOperator, Principal: gateway.Principal{Role: gateway.RoleOperator}}
	res, err := s.Open(context.Background(), c, OpenParams{SessionKey: "main/s1", Mode: "continuous"})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	tk := s.talks[res.TalkID]
	s.mu.Unlock()
	if tk.synth() != nil {
		t.Fatal("the default voice is not the browser's")
	}
	if !tk.offered() {
		t.Fatal("the talk was not waiting for its offer")
	}
	page := &stuckConn{closed: make(chan struct{})}
	if !tk.attach(page) {
		t.Fatal("the talk did not take its channel")
	}
	// Answers of 64 sentences of 1 KiB each, 4 MiB in all: four times
	// what the channel may hold unread.
	sentence := strings.Repeat("word ", 200) + "end. "
	for i := range 64 {
		id := "run-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		for _, e := range []RunEvent{{Kind: RunStarted}, {Kind: RunDelta, Delta: strings.Repeat(sentence, 64)}, {Kind: RunEnded}} {
			e.RunID, e.ProfileID, e.SessionID = id, "main", "s1"
			s.ChatEvent(e)
		}
	}
	select {
	case <-tk.done:
	case <-time.After(60 * time.Second):
		page.mu.Lock()
		q, n := page.queued, page.says
		page.mu.Unlock()
		t.Fatalf("the talk is still open with %d bytes (%d T) unread by its page", q, n)
	}
	// end logs its reason just after the talk is done.
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logs.String(), `msg="talk ended"`) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "reason="+ReasonSlowReader) {
		t.Fatalf("the talk did not end %s:\n%s", ReasonSlowReader, logs.String())
	}
	page.mu.Lock()
	q := page.queued
	page.mu.Unlock()
	if q > MaxSpeechQueued+64<<10 {
		t.Fatalf("%d bytes were queued for a page that reads nothing, at most %d (and one sentence) may be", q, MaxSpeechQueued)
	}
	select {
	case <-page.closed:
	default:
		t.Fatal("the slow page's channel was not closed")
	}
}
