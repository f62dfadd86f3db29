package atrium

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/talk"
)

// TestTalkQueuedSendFails (issue 27, interrupt "queue"; docs/PROTOCOL.md
// "Talk"): a transcript that waited for the answer and that chat.send
// then refuses (here: longer than chat.MaxMessageChars) is told to the
// page again, not sent, TALK_SEND_FAILED — and the words queued behind it
// still go: nothing started a run whose end would have taken them off the
// queue, so they waited for good, and every later utterance behind them.
func TestTalkQueuedSendFails(t *testing.T) {
	ta, peer, en, hold, first := queuedTalk(t, map[string]string{"And then?": "The end.", "Who was there?": "A fox."})
	ctx := ta.ctx
	tooLong := strings.TrimSpace(strings.Repeat("And so on. ", chat.MaxMessageChars/len("And so on. ")+1))
	for _, u := range []struct{ id, text string }{{"u1", tooLong}, {"u2", "And then?"}} {
		ta.stt.answers <- sttAnswer{u.text, "english"}
		peer.utter(t, u.id, en, true)
		if tr := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"`+u.id+`"`)); !tr.Sent || !tr.Queued || tr.ErrorCode != "" {
			t.Fatalf("%s while the answer runs: %+v, want queued", u.id, tr)
		}
	}
	close(hold)
	ta.ev.wait(ctx, t, "chat.final", first.RunID)

	// Bounded well below the test's own deadline: the old code never told u2.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if tr := transcriptOf(t, ta.ev.wait(wctx, t, "talk.transcript", `"u1"`)); tr.Sent || tr.Queued || tr.RunID != "" || tr.ErrorCode != talk.CodeSendFailed || tr.Error == "" {
		t.Fatalf("u1 refused by chat.send: %+v, want not sent, %s", tr, talk.CodeSendFailed)
	}
	second := transcriptOf(t, ta.ev.wait(wctx, t, "talk.transcript", `"u2"`))
	if !second.Sent || second.Queued || second.RunID == "" || second.Text != "And then?" || second.ErrorCode != "" {
		t.Fatalf("u2, queued behind the refused u1: %+v, want sent with its run", second)
	}
	ta.ev.wait(wctx, t, "chat.final", second.RunID)
	ta.stt.answers <- sttAnswer{"Who was there?", "english"}
	peer.utter(t, "u3", en, true)
	// The queue is not stuck: the next words go (at once, or after u2's run
	// if Talk hears of its end after they came).
	tr := transcriptOf(t, ta.ev.wait(wctx, t, "talk.transcript", `"u3"`))
	if tr.Queued {
		tr = transcriptOf(t, ta.ev.wait(wctx, t, "talk.transcript", `"u3"`))
	}
	if !tr.Sent || tr.Queued || tr.RunID == "" {
		t.Fatalf("u3 after u2's answer: %+v, want sent with its run", tr)
	}
	if ta.model.asked(tooLong) {
		t.Error("the refused transcript reached the model")
	}
}
