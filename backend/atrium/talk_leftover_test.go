package atrium

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/atrium-dev/atrium/backend/talk"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// heldSTT is a transcription server that answers text once released (or
// when the request goes away); arrived gets a value as each request comes.
func heldSTT(t *testing.T, text string) (url string, arrived chan struct{}, release chan struct{}) {
	t.Helper()
	arrived, release = make(chan struct{}, 16), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"text": text, "language": "english"})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, arrived, release
}

// waitAsked waits (bounded by ctx) until the model was asked text.
func waitAsked(ctx context.Context, t *testing.T, m *scriptedModel, text string) {
	t.Helper()
	for !m.asked(text) {
		select {
		case <-ctx.Done():
			t.Fatalf("%q never reached the model: what the person said before the talk ended was lost", text)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestTalkEndKeepsWhatWasSaid (issue 27: history keeps what was said): in
// continuous mode the person finishes a sentence, and the talk ends while
// it is still being transcribed — End talk pressed (talk.close), or the
// page reloaded or the phone locked (its connection gone) — or while it
// waits behind the answer being given (interrupt "queue"). What was said
// still reaches the chat as the person's message, in order. Before, the
// transcription was cancelled and the waiting transcripts dropped: the
// words were in no history.
func TestTalkEndKeepsWhatWasSaid(t *testing.T) {
	en := speech(t, "en", "Remember the milk.")
	hold := make(chan struct{})
	ta := newTalkApp(t, map[string]string{"Tell me a long story.": "Once upon a time."},
		map[string]chan struct{}{"Tell me a long story.": hold})
	ctx := ta.ctx

	for _, c := range []struct{ how, said string }{{"talk.close", "Remember the milk."}, {"connection gone", "Buy some bread."}} {
		url, arrived, release := heldSTT(t, c.said)
		ta.patchT(t, map[string]any{"stt": map[string]any{"baseUrl": url}})
		conn := ta.admin
		if c.how == "connection gone" {
			conn = gwDial(ctx, t, ta.a, gateway.RoleOperator, "talk-page")
		}
		open := ta.open(t, conn, map[string]any{"sessionKey": "main/", "mode": "continuous"})
		peer := dialTalk(ctx, t, conn, open.TalkID)
		peer.utter(t, "said-"+c.said[:3], en, true)
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatalf("%s: the utterance never reached the transcription server", c.how)
		}
		if c.how == "talk.close" {
			must(t, conn.Call(ctx, "talk.close", map[string]any{"talkId": open.TalkID}, nil))
			ta.ev.wait(ctx, t, "talk.ended", open.TalkID)
		} else {
			_ = conn.CloseNow()
			for ta.a.Talk.Talks() != 0 {
				select {
				case <-ctx.Done():
					t.Fatal("the talk of a closed connection never ended")
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		close(release)
		waitAsked(ctx, t, ta.model, c.said)
	}

	// Interrupt "queue": words said while the answer runs wait for it; the talk ends; they still go after it.
	ta.stt.answers <- sttAnswer{"Tell me a long story.", "english"}
	ta.stt.answers <- sttAnswer{"And then what?", "english"}
	ta.patchT(t, map[string]any{"stt": map[string]any{"baseUrl": ta.stt.URL}, "interrupt": "queue"})
	open := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
	peer := dialTalk(ctx, t, ta.admin, open.TalkID)
	peer.utter(t, "q1", en, true)
	first := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"q1"`))
	peer.utter(t, "q2", en, true)
	if tr := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"q2"`)); !tr.Sent || !tr.Queued {
		t.Fatalf("q2 while the answer runs: %+v, want queued", tr)
	}
	must(t, ta.admin.Call(ctx, "talk.close", map[string]any{"talkId": open.TalkID}, nil))
	ta.ev.wait(ctx, t, "talk.ended", open.TalkID)
	close(hold)
	ta.ev.wait(ctx, t, "chat.final", first.RunID)
	waitAsked(ctx, t, ta.model, "And then what?")
}

// TestTalkSpeechServerDownOncePerAnswer: the speech server fails — at
// once (HTTP 503), or it never begins its answer (stuck: past
// Options.TalkSpeechStart, 15 s by default, 1 s here; before that bound
// each sentence waited out the 60 s HTTP timeout in silence) — and the
// answer's first sentence is said by the page's own voice (T), and so are
// the rest of that answer, without asking the server again. The next
// answer tries the server again.
func TestTalkSpeechServerDownOncePerAnswer(t *testing.T) {
	en := speech(t, "en", "Tell me three things.")
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	for _, tc := range []struct {
		name string
		fail func(w http.ResponseWriter, r *http.Request)
	}{
		{"down", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) }},
		{"stuck", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-stuck:
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := newTalkAppWith(t, map[string]string{"Tell me three things.": "One is first. Two is second. Three is third."}, nil,
				func(o *Options) { o.TalkSpeechStart = time.Second })
			var mu sync.Mutex
			asked := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				mu.Lock()
				asked++
				mu.Unlock()
				tc.fail(w, r)
			}))
			t.Cleanup(srv.Close)
			ta.patchT(t, map[string]any{"tts": map[string]any{"provider": "openai", "baseUrl": srv.URL}})
			open := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
			peer := dialTalk(ta.ctx, t, ta.admin, open.TalkID)
			for round := 1; round <= 2; round++ {
				ta.stt.answers <- sttAnswer{"Tell me three things.", "english"}
				peer.utter(t, fmt.Sprintf("r%d", round), en, true)
				// Well inside the 60 s HTTP bound: a stuck server must not hold the voice that long.
				ctx, cancel := context.WithTimeout(ta.ctx, 45*time.Second)
				r := peer.reply(ctx, t)
				cancel()
				if len(r.says) != 3 || len(r.audio) != 0 {
					t.Fatalf("answer %d: %d sentences as T, %d as audio; want all 3 said by the page's voice: %+v", round, len(r.says), len(r.audio), r)
				}
				mu.Lock()
				n := asked
				mu.Unlock()
				if n != round {
					t.Errorf("after answer %d the speech server was asked %d times, want %d (once per answer)", round, n, round)
				}
			}
		})
	}
}

// TestTalkSTTUnreachable: a transcription server that is not running (a
// closed port) fails the utterance with TALK_STT_UNREACHABLE, which the
// page words as "could not be reached" — it said TALK_STT_FAILED, "could
// not transcribe … (what it answered is in Atrium's log)", when nothing
// had answered. A server that answers an error stays TALK_STT_FAILED
// (TestTalkServerWordsStayInTheLog).
func TestTalkSTTUnreachable(t *testing.T) {
	en := speech(t, "en", "Is anyone there?")
	ta := newTalkApp(t, nil, nil)
	ctx := ta.ctx
	ta.patchT(t, map[string]any{"stt": map[string]any{"baseUrl": closedPortURL(t)}})
	open := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
	peer := dialTalk(ctx, t, ta.admin, open.TalkID)
	peer.utter(t, "gone", en, true)
	tr := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"gone"`))
	if tr.ErrorCode != talk.CodeSTTUnreachable || tr.Error != talk.ErrorText(talk.CodeSTTUnreachable) || tr.Sent || tr.Text != "" {
		t.Fatalf("an utterance with the transcription server down: %+v, want errorCode %s", tr, talk.CodeSTTUnreachable)
	}
}
