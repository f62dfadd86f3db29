package atrium

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/rtc"
	"github.com/atrium-dev/atrium/backend/talk"
)

// steadyGoroutines is the goroutine count once it stops falling (it looks
// for at most 30 s).
func steadyGoroutines() int {
	n := runtime.NumGoroutine()
	for range 60 {
		time.Sleep(500 * time.Millisecond)
		runtime.GC()
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

// settleGoroutines waits, at most 90 s, for the goroutine count to come
// down to limit, and returns it.
func settleGoroutines(limit int) int {
	deadline := time.Now().Add(90 * time.Second)
	for {
		runtime.GC()
		n := runtime.NumGoroutine()
		if n <= limit || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTalkSlowReader: a page (a real pion peer on the atrium-talk channel)
// that stops reading while an answer's voice streams — its channel's
// reads held, so SCTP's window closes and the gateway's queue passes
// talk.MaxSpeechQueued — is ended slow_reader after Options.TalkSpeechStall
// (2 s here; 30 s by default). The speech server's request is dropped,
// the talk's slot comes back (a new talk opens on the same connection),
// and once the page lets go its channel is closed and the goroutines come
// back to where they were.
func TestTalkSlowReader(t *testing.T) {
	ta := newTalkAppWith(t, map[string]string{"Hello.": "Hi there."}, nil, func(o *Options) { o.TalkSpeechStall = 2 * time.Second })
	ctx := ta.ctx
	// A speech server whose voice of a sentence is up to 32 MiB: far more
	// than the gateway's queue and the page's SCTP window hold.
	requests := make(chan struct{}, 16)
	var handlers sync.WaitGroup
	tts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		requests <- struct{}{}
		w.Header().Set("Content-Type", "audio/mpeg")
		chunk := make([]byte, 64<<10)
		copy(chunk, "ID3")
		for range 512 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(tts.Close)
	ta.patchT(t, map[string]any{"tts": map[string]any{"provider": "openai", "baseUrl": tts.URL + "/v1"}})
	base := steadyGoroutines()

	o := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "ptt"})
	release := make(chan struct{}) // the page reads again
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(let)
	speaking := make(chan struct{})
	closed := make(chan struct{})
	var speakOnce, closeOnce sync.Once
	signal := func(ctx context.Context, offer string) (string, error) {
		var res struct{ SDP string }
		err := ta.admin.Call(ctx, "talk.offer", map[string]any{"talkId": o.TalkID, "sdp": offer}, &res)
		return res.SDP, err
	}
	page, err := rtc.DialStream(ctx, rtc.Config{}, talk.ChannelLabel, signal, rtc.StreamHooks{
		Message: func(b []byte) {
			if b[0] == talk.MsgSpeech {
				speakOnce.Do(func() { close(speaking) })
				<-release // the page stops reading at the voice's first part
			}
		},
		Closed: func() { closeOnce.Do(func() { close(closed) }) },
	})
	must(t, err)
	t.Cleanup(page.Close)

	must(t, ta.admin.Call(ctx, "chat.send", map[string]any{"profileId": "main", "sessionId": strings.TrimPrefix(o.SessionKey, "main/"),
		"message": "Hello.", "idempotencyKey": "slow-reader"}, nil))
	select {
	case <-speaking:
	case <-ctx.Done():
		t.Fatal("the answer's voice never reached the page")
	}
	ended := ta.ev.wait(ctx, t, "talk.ended", o.TalkID)
	if !strings.Contains(string(ended), `"reason":"`+talk.ReasonSlowReader+`"`) {
		t.Fatalf("talk.ended %s, want %s", ended, talk.ReasonSlowReader)
	}
	if n := ta.a.Talk.Talks(); n != 0 {
		t.Fatalf("%d talks open after slow_reader", n)
	}
	// The speech server's answer is dropped with the talk.
	hdone := make(chan struct{})
	go func() { handlers.Wait(); close(hdone) }()
	select {
	case <-hdone:
	case <-ctx.Done():
		t.Fatal("the speech server is still sending to an ended talk")
	}
	if n := len(requests); n != 1 {
		t.Fatalf("%d speech requests for one sentence", n)
	}

	let()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("the slow page's channel was not closed")
	}
	// The slot came back: this connection (one talk at most) opens again.
	o2 := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "ptt"})
	var res struct{ Closed bool }
	must(t, ta.admin.Call(ctx, "talk.close", map[string]any{"talkId": o2.TalkID}, &res))
	ta.ev.wait(ctx, t, "talk.ended", o2.TalkID, talk.ReasonClosed)
	// A talk holds 3 goroutines, its peer connection a dozen more, the
	// speech request a few: a few may stay for the test's own closed
	// page's last reads.
	if n := settleGoroutines(base + 10); n > base+10 {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines %d before the talk, %d after it ended slow_reader:\n%s", base, n, buf[:runtime.Stack(buf, true)])
	}
}
