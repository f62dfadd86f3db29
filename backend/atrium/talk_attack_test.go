package atrium

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/rtc"
	"github.com/atrium-dev/atrium/backend/talk"
)

// endsWith waits for the talk's talk.ended and its X, both with reason,
// and the channel closed.
func (ta *talkApp) endsWith(t *testing.T, p *talkPeer, talkID, reason string) {
	t.Helper()
	ended := ta.ev.wait(ta.ctx, t, "talk.ended", talkID)
	if !strings.Contains(string(ended), `"reason":"`+reason+`"`) {
		t.Fatalf("talk.ended %s, want %s", ended, reason)
	}
	for b := p.next(ta.ctx, t); ; b = p.next(ta.ctx, t) {
		if b[0] == talk.MsgStop {
			if !strings.Contains(string(b), reason) {
				t.Fatalf("X %q, want %s", b, reason)
			}
			break
		}
	}
	select {
	case <-p.closed:
	case <-ta.ctx.Done():
		t.Fatalf("%s: the channel was not closed", reason)
	}
}

// TestTalkStreamAttacks (issue 27, a reviewer as an attacker): a Go page
// on a real talk channel sends messages out of the protocol's order or
// shape — a second U, an E with no U or of another utterance, a replayed
// or skipped seq, an empty message, an unknown container, an utterance id
// that is not an id (it goes into history and the media store), a
// negative duration. Each ends the talk as bad_stream with nothing
// transcribed or stored.
func TestTalkStreamAttacks(t *testing.T) {
	ta := newTalkApp(t, nil, nil)
	en := speech(t, "en", "Hello.")
	header, rest := en.webm[:64], en.webm[64:]
	u := func(p *talkPeer, id, mime string) {
		p.send(t, talk.JSONMessage(talk.MsgUtterance, talk.UtteranceStart{UtteranceID: id, MimeType: mime, Send: true}))
	}
	const webm = "audio/webm;codecs=opus"
	e := func(p *talkPeer, id string, ms int64) {
		p.send(t, talk.JSONMessage(talk.MsgEnd, talk.UtteranceEnd{UtteranceID: id, DurationMs: ms}))
	}
	cases := []struct {
		name string
		do   func(p *talkPeer)
	}{
		{"U twice", func(p *talkPeer) { u(p, "a", webm); p.send(t, talk.AudioMessage(0, header)); u(p, "b", webm) }},
		{"E without U", func(p *talkPeer) { e(p, "a", 500) }},
		{"E of another utterance", func(p *talkPeer) { u(p, "a", webm); p.send(t, talk.AudioMessage(0, header)); e(p, "b", 500) }},
		{"a replayed seq", func(p *talkPeer) {
			u(p, "a", webm)
			p.send(t, talk.AudioMessage(0, header))
			p.send(t, talk.AudioMessage(0, header))
		}},
		{"a seq from 1", func(p *talkPeer) { u(p, "a", webm); p.send(t, talk.AudioMessage(1, header)) }},
		{"A with no seq", func(p *talkPeer) { u(p, "a", webm); p.send(t, []byte{talk.MsgAudio, 0, 0}) }},
		{"an empty message", func(p *talkPeer) { p.send(t, []byte{}) }},
		{"a WAV", func(p *talkPeer) { u(p, "a", "audio/wav") }},
		{"an id with a path", func(p *talkPeer) { u(p, "../../x", webm) }},
		{"an id with a newline", func(p *talkPeer) { u(p, "a\nINFO forged log line", webm) }},
		{"an id of 129 bytes", func(p *talkPeer) { u(p, strings.Repeat("a", 129), webm) }},
		{"a negative duration", func(p *talkPeer) {
			u(p, "a", webm)
			p.send(t, talk.AudioMessage(0, header))
			p.send(t, talk.AudioMessage(1, rest))
			e(p, "a", -1)
		}},
	}
	for _, tc := range cases {
		o := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
		p := dialTalk(ta.ctx, t, ta.admin, o.TalkID)
		tc.do(p)
		t.Run(tc.name, func(t *testing.T) { ta.endsWith(t, p, o.TalkID, talk.ReasonBadStream) })
		if n := ta.stt.Count(); n != 0 {
			t.Fatalf("%s: %d broken utterances were transcribed", tc.name, n)
		}
	}
	if n := ta.a.Talk.Talks(); n != 0 {
		t.Fatalf("%d talks left", n)
	}
	msgs, err := ta.a.History.Profile(ta.ctx, "main", "", 50)
	must(t, err)
	if len(msgs.Messages) != 0 {
		t.Fatalf("a broken utterance left messages: %+v", msgs.Messages)
	}
}

// TestTalkIdleWithoutAudio: a page that sends utterances with no audio
// (U then E, every few minutes) does not keep its talk, and one of the
// four slots, past the idle bound: only audio counts.
func TestTalkIdleWithoutAudio(t *testing.T) {
	ta := newTalkApp(t, nil, nil)
	o := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
	p := dialTalk(ta.ctx, t, ta.admin, o.TalkID)
	for i, id := range []string{"e1", "e2"} {
		ta.clock.Advance(6 * time.Minute) // 6, then 12 minutes with no audio
		if i == 1 {
			break
		}
		p.send(t, talk.JSONMessage(talk.MsgUtterance, talk.UtteranceStart{UtteranceID: id, MimeType: "audio/webm;codecs=opus", Send: true}))
		p.send(t, talk.JSONMessage(talk.MsgEnd, talk.UtteranceEnd{UtteranceID: id, DurationMs: 300}))
		if tr := transcriptOf(t, ta.ev.wait(ta.ctx, t, "talk.transcript", id)); tr.ErrorCode != talk.CodeNoAudio {
			t.Fatalf("an utterance with no audio: %+v", tr)
		}
	}
	ta.endsWith(t, p, o.TalkID, talk.ReasonIdle)
}

// TestTalkSignallingAttacks: talk.offer with an SDP over 64 KiB (refused,
// the talk kept), a malformed SDP (refused; the talk ends and its slot
// comes back), an unknown talk, a second offer on an open channel
// (FORBIDDEN, audited); talk.close of another connection's talk (false,
// that talk untouched); a paired phone, even one scoped admin, setting
// the speech servers' URLs (config.patch is the person's only: FORBIDDEN,
// config.json unchanged).
func TestTalkSignallingAttacks(t *testing.T) {
	ta := newTalkApp(t, nil, nil)
	a, ctx := ta.a, ta.ctx
	seedWorkspace(t, a, a.Layout.Workspace, scopeFiles)
	o := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "ptt"})
	huge := "v=0\r\n" + strings.Repeat("a=x-pad:"+strings.Repeat("z", 100)+"\r\n", 700)
	if err := ta.admin.Call(ctx, "talk.offer", map[string]any{"talkId": o.TalkID, "sdp": huge}, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Fatalf("an SDP of %d bytes: %v", len(huge), err)
	}
	if n := a.Talk.Talks(); n != 1 {
		t.Fatalf("%d talks after an oversized offer, want the talk kept", n)
	}
	if err := ta.admin.Call(ctx, "talk.offer", map[string]any{"talkId": o.TalkID, "sdp": "v=0\r\nnot an offer\r\n"}, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Fatalf("a malformed SDP: %v", err)
	}
	ta.ev.wait(ctx, t, "talk.ended", o.TalkID, talk.ReasonConnectionGone)
	if err := ta.admin.Call(ctx, "talk.offer", map[string]any{"talkId": "nosuchtalk", "sdp": "v=0"}, nil); errCode(err) != gateway.CodeNotFound {
		t.Fatalf("an unknown talk: %v", err)
	}
	o = ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "ptt"}) // the slot came back
	p := dialTalk(ctx, t, ta.admin, o.TalkID)
	if err := ta.admin.Call(ctx, "talk.offer", map[string]any{"talkId": o.TalkID, "sdp": "v=0"}, nil); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("a second offer: %v", err)
	}
	assertDenied(t, a, "talk.offer")

	phone, _ := scopedPhone(ctx, t, a, ta.admin, "admin")
	var res struct{ Closed bool }
	must(t, phone.Call(ctx, "talk.close", map[string]any{"talkId": o.TalkID}, &res))
	if res.Closed || a.Talk.Talks() != 1 {
		t.Fatalf("another connection closed the talk: %+v, %d talks", res, a.Talk.Talks())
	}
	p.send(t, talk.JSONMessage(talk.MsgUtterance, talk.UtteranceStart{UtteranceID: "still", MimeType: "audio/webm;codecs=opus"}))
	ta.ev.wait(ctx, t, "talk.state", o.TalkID, talk.StateListening) // the talk still listens

	before, err := os.ReadFile(a.Layout.ConfigFile())
	must(t, err)
	for _, patch := range []map[string]any{
		{"talk": map[string]any{"stt": map[string]any{"baseUrl": "http://169.254.169.254"}}},
		{"talk": map[string]any{"tts": map[string]any{"provider": "openai", "baseUrl": "http://127.0.0.1:1"}}},
	} {
		if err := phone.Call(ctx, "config.patch", map[string]any{"patch": patch}, nil); errCode(err) != gateway.CodeForbidden {
			t.Fatalf("a phone's config.patch %v: %v", patch, err)
		}
		assertDenied(t, a, "config.patch")
	}
	if after, _ := os.ReadFile(a.Layout.ConfigFile()); string(after) != string(before) {
		t.Fatalf("config.json changed by a phone:\n%s", after)
	}
}

// TestTalkAbandonedCycles: 200 talks opened and abandoned — half with a
// channel whose page goes away without a word, half never offered on a
// WebSocket that closes — each ends, and the goroutines come back to
// where they were (within the test's own connections' few).
func TestTalkAbandonedCycles(t *testing.T) {
	ta := newTalkApp(t, nil, nil)
	a, ctx := ta.a, ta.ctx
	// A first cycle warms up what lives once (pion's and the gateway's
	// shared goroutines).
	o := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "ptt"})
	dialTalk(ctx, t, ta.admin, o.TalkID).s.Close()
	ta.ev.wait(ctx, t, "talk.ended", o.TalkID)
	base := steadyGoroutines()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapInuse
	for i := range 200 {
		if i == 100 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			t.Logf("heap in use after 100 cycles %d KiB", ms.HeapInuse>>10)
		}
		// No t.Cleanup holds these: what stays is the gateway's.
		if i%2 == 0 {
			o := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
			signal := func(ctx context.Context, offer string) (string, error) {
				var res struct{ SDP string }
				err := ta.admin.Call(ctx, "talk.offer", map[string]any{"talkId": o.TalkID, "sdp": offer}, &res)
				return res.SDP, err
			}
			s, err := rtc.DialStream(ctx, rtc.Config{}, talk.ChannelLabel, signal, rtc.StreamHooks{})
			must(t, err)
			must(t, s.Send(talk.JSONMessage(talk.MsgUtterance, talk.UtteranceStart{UtteranceID: "gone", MimeType: "audio/webm;codecs=opus"})))
			s.Close() // the page vanishes mid-utterance
			ta.ev.wait(ctx, t, "talk.ended", o.TalkID, talk.ReasonConnectionGone)
			continue
		}
		c, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token, Role: gateway.RoleOperator,
			Client: gateway.ClientInfo{ID: "talk-abandon", Version: "test", Platform: "linux", Mode: "test", InstanceID: "talk-abandon"}})
		must(t, err)
		var res talk.OpenResult
		must(t, c.Call(ctx, "talk.open", map[string]any{"sessionKey": "main/", "mode": "ptt"}, &res))
		c.Close()
	}
	deadline := time.Now().Add(60 * time.Second)
	for a.Talk.Talks() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := a.Talk.Talks(); n != 0 {
		t.Fatalf("%d of 200 abandoned talks still open", n)
	}
	// Each cycle's talk holds 3 goroutines and its peer connection a dozen
	// more: 200 leaked would be thousands; a few stay for the test's own
	// closed clients' last reads.
	if n := settleGoroutines(base + 20); n > base+20 {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines %d before, %d after 200 abandoned talks:\n%s", base, n, buf[:runtime.Stack(buf, true)])
	}
	// Right after: a closed stream's connect timer (rtc.DefaultConnectTimeout,
	// 15 s) no longer holds its peer connection, so 200 dead ones are not
	// held (they were ~13 MiB; ~1 MiB grows now).
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("goroutines %d before, %d after; heap in use %d → %d KiB", base, runtime.NumGoroutine(), heap0>>10, ms.HeapInuse>>10)
	if grew := int64(ms.HeapInuse) - int64(heap0); grew > 6<<20 {
		t.Fatalf("heap in use grew %d KiB over 200 abandoned talks", grew>>10)
	}
	// The slots came back: a new talk opens.
	ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "ptt"})
}

// TestTalkScopeNarrowed: a phone scoped admin opens a talk in main's chat;
// the person then scopes it to the writer role (device.scope.set applies
// to its live connections at once). Its next utterance is not transcribed
// nor sent into main's chat, and main's answers are no longer spoken to
// it: the talk ends as forbidden, audited.
func TestTalkScopeNarrowed(t *testing.T) {
	ta := newTalkApp(t, map[string]string{"Hello.": "Hi there."}, nil)
	a, ctx := ta.a, ta.ctx
	seedWorkspace(t, a, a.Layout.Workspace, scopeFiles)
	phone, id := scopedPhone(ctx, t, a, ta.admin, "admin")
	ev := recordEvents(phone)
	o := ta.open(t, phone, map[string]any{"sessionKey": "main/", "mode": "continuous"})
	p := dialTalk(ctx, t, phone, o.TalkID)
	must(t, ta.admin.Call(ctx, "device.scope.set", map[string]any{"deviceId": id, "scope": "role:writer"}, nil))

	ta.stt.answers <- sttAnswer{text: "Hello.", language: "english"} // what a talk still allowed would hear
	p.utter(t, "after", speech(t, "en", "Hello."), true)
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	ended := ev.wait(wctx, t, "talk.ended", o.TalkID)
	if !strings.Contains(string(ended), `"reason":"`+talk.ReasonForbidden+`"`) {
		t.Fatalf("talk.ended %s, want %s", ended, talk.ReasonForbidden)
	}
	assertDenied(t, a, "talk.open")
	if n := ta.stt.Count(); n != 0 {
		t.Fatalf("the transcription server got %d utterances of a device no longer allowed", n)
	}
	msgs, err := a.History.Profile(ctx, "main", "", 50)
	must(t, err)
	if len(msgs.Messages) != 0 {
		t.Fatalf("a device no longer allowed sent into main's chat: %+v", msgs.Messages)
	}

	// An answer in main's chat started by the person is not spoken to a
	// phone narrowed while its talk is open.
	must(t, ta.admin.Call(ctx, "device.scope.set", map[string]any{"deviceId": id, "scope": "admin"}, nil))
	o = ta.open(t, phone, map[string]any{"sessionKey": "main/", "mode": "ptt"})
	p = dialTalk(ctx, t, phone, o.TalkID)
	must(t, ta.admin.Call(ctx, "device.scope.set", map[string]any{"deviceId": id, "scope": "role:writer"}, nil))
	must(t, ta.admin.Call(ctx, "chat.send", map[string]any{"profileId": "main", "sessionId": strings.TrimPrefix(o.SessionKey, "main/"),
		"message": "Hello.", "idempotencyKey": "scope-narrowed"}, nil))
	ended = ev.wait(wctx, t, "talk.ended", o.TalkID)
	if !strings.Contains(string(ended), `"reason":"`+talk.ReasonForbidden+`"`) {
		t.Fatalf("talk.ended %s, want %s", ended, talk.ReasonForbidden)
	}
	for b := p.next(ctx, t); b[0] != talk.MsgStop; b = p.next(ctx, t) {
		if b[0] == talk.MsgSpeech || b[0] == talk.MsgSay {
			t.Fatalf("main's answer was spoken to a phone scoped to writer: %q", b[:min(len(b), 80)])
		}
	}
}
