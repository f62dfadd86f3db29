package atrium

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
	"github.com/atrium-dev/atrium/backend/rtc"
	"github.com/atrium-dev/atrium/backend/talk"
)

// talkClock is Talk's clock in the tests: the real time plus an offset
// the test advances (an utterance "over 60 s", a talk "silent for 10
// min", without waiting for either).
type talkClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *talkClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *talkClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// spoken is a recording of speech: espeak-ng's WAV encoded by ffmpeg as
// MediaRecorder does (WebM/Opus), and the speech's own length (the
// WAV's samples).
type spoken struct {
	webm []byte
	dur  time.Duration
}

// speech records text spoken by espeak-ng with voice ("en", "cmn").
// espeak-ng and ffmpeg are Debian packages the Makefile's deps installs.
func speech(t *testing.T, voice, text string) spoken {
	t.Helper()
	dir := t.TempDir()
	wav, webm := filepath.Join(dir, "s.wav"), filepath.Join(dir, "s.webm")
	if out, err := exec.Command("espeak-ng", "-v", voice, "-w", wav, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng (apt-get install espeak-ng; make deps): %v %s", err, out)
	}
	if out, err := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", wav, "-c:a", "libopus", "-b:a", "32k", "-f", "webm", webm).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v %s", err, out)
	}
	w, err := os.ReadFile(wav)
	must(t, err)
	b, err := os.ReadFile(webm)
	must(t, err)
	return spoken{webm: b, dur: wavDuration(t, w)}
}

// wavDuration is a WAV's length from its header: the data chunk's bytes
// over the byte rate.
func wavDuration(t *testing.T, w []byte) time.Duration {
	t.Helper()
	if len(w) < 44 || string(w[:4]) != "RIFF" || string(w[8:12]) != "WAVE" {
		t.Fatal("espeak-ng's output is not a WAV")
	}
	var rate uint32
	for off := 12; off+8 <= len(w); {
		id, size := string(w[off:off+4]), binary.LittleEndian.Uint32(w[off+4:])
		switch id {
		case "fmt ":
			rate = binary.LittleEndian.Uint32(w[off+16:])
		case "data":
			if size == 0xFFFFFFFF || int(size) > len(w)-off-8 { // espeak-ng writing to a pipe leaves it unset
				size = uint32(len(w) - off - 8)
			}
			if rate == 0 {
				t.Fatal("a WAV without its format chunk")
			}
			return time.Duration(float64(size) / float64(rate) * float64(time.Second))
		}
		off += 8 + int(size) + int(size%2)
	}
	t.Fatal("a WAV without data")
	return 0
}

// heard is what the scripted transcription server received.
type heard struct {
	name, mime, model, language, format string
	dur                                 time.Duration // ffprobe's length of the uploaded file
}

// sttAnswer is what it answers next.
type sttAnswer struct{ text, language string }

// fakeSTT is a scripted OpenAI-compatible transcription server: it parses
// the multipart request, measures the audio with ffprobe (it must decode)
// and answers the next scripted text.
type fakeSTT struct {
	*httptest.Server
	answers chan sttAnswer
	got     chan heard
	// fixed, when set, answers every request without ffprobe and
	// without recording it (the benchmark: no process per utterance).
	fixed *sttAnswer
}

func newFakeSTT(t *testing.T) *fakeSTT {
	f := &fakeSTT{answers: make(chan sttAnswer, 64), got: make(chan heard, 64)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" {
			http.NotFound(w, r)
			return
		}
		if err := r.ParseMultipartForm(8 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		file, fh, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		data, _ := io.ReadAll(file)
		if a := f.fixed; a != nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"text": a.text, "language": a.language})
			return
		}
		h := heard{name: fh.Filename, mime: fh.Header.Get("Content-Type"), model: r.FormValue("model"), language: r.FormValue("language"),
			format: r.FormValue("response_format")}
		path := filepath.Join(os.TempDir(), fmt.Sprintf("atrium-talk-%d-%s", time.Now().UnixNano(), filepath.Base(fh.Filename)))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer os.Remove(path)
		out, err := exec.Command("ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path).Output()
		if err != nil {
			http.Error(w, "the audio does not decode: "+err.Error(), http.StatusBadRequest)
			return
		}
		secs, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			http.Error(w, "no duration: "+string(out), http.StatusBadRequest)
			return
		}
		h.dur = time.Duration(secs * float64(time.Second))
		f.got <- h
		var a sttAnswer
		select {
		case a = <-f.answers:
		default:
			http.Error(w, "no scripted answer", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"text": a.text, "language": a.language, "duration": secs})
	}))
	t.Cleanup(f.Close)
	return f
}

// said is one request to the scripted speech server.
type said struct {
	Input, Voice string
	Speed        float64
}

// newSpeechServer is a scripted OpenAI-compatible /v1/audio/speech: the
// "audio" of a sentence is "ID3" and the sentence, in two flushed writes;
// a sentence with "slowly" in it waits for slow (or the request's end)
// between them.
func newSpeechServer(t *testing.T) (*httptest.Server, chan said) {
	return newSlowSpeechServer(t, nil)
}

func newSlowSpeechServer(t *testing.T, slow chan struct{}) (*httptest.Server, chan said) {
	got := make(chan said, 256)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/speech" {
			http.NotFound(w, r)
			return
		}
		var s said
		if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case got <- s:
		default:
		}
		w.Header().Set("Content-Type", "audio/mpeg")
		_, _ = w.Write([]byte("ID3"))
		w.(http.Flusher).Flush()
		if slow != nil && strings.Contains(s.Input, "slowly") {
			select {
			case <-slow:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write([]byte(s.Input))
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// lastUser is the last user message of a model request.
func lastUser(r modeltest.Request) string {
	ms := r.Messages()
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i]["role"] == "user" {
			s, _ := ms[i]["content"].(string)
			return s
		}
	}
	return ""
}

// scriptedModel answers each chat request by its last user message
// (answers[text]); a text with a hold channel streams its first part,
// then waits for the channel (or the request's end) before the rest.
type scriptedModel struct {
	*modeltest.Server
	answers map[string]string
	holds   map[string]chan struct{}
}

func newScriptedModel(t *testing.T, answers map[string]string, holds map[string]chan struct{}) *scriptedModel {
	m := &scriptedModel{answers: answers, holds: holds}
	m.Server = modeltest.New(t, modeltest.Options{RepeatLast: true}, func(w http.ResponseWriter, r *http.Request) {
		q := lastUser(m.Request(m.Count() - 1))
		text, ok := m.answers[q]
		if !ok {
			text = "I heard you."
		}
		if hold := m.holds[q]; hold != nil {
			first, rest, _ := strings.Cut(text, "|")
			modeltest.Start(w)
			modeltest.Stream(w, modeltest.Chunk(`{"role":"assistant","content":`+strconv.Quote(first)+`}`, ""))
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
			modeltest.Stream(w, modeltest.Text(rest), modeltest.Chunk(`{}`, "stop"), modeltest.Done)
			return
		}
		modeltest.Stream(w, modeltest.Turn{Text: text}.Events(0)...)
	})
	return m
}

// asked reports whether a model request's last user message was text.
func (m *scriptedModel) asked(text string) bool {
	for i := range m.Count() {
		if lastUser(m.Request(i)) == text {
			return true
		}
	}
	return false
}

// eventLog records a client's events so that a test can wait for one
// without dropping the others.
type eventLog struct {
	mu    sync.Mutex
	list  []gateway.EventFrame
	taken []bool
	more  chan struct{}
}

func recordEvents(c *gateway.Client) *eventLog {
	l := &eventLog{more: make(chan struct{}, 1)}
	go func() {
		for ev := range c.Events() {
			l.mu.Lock()
			l.list = append(l.list, ev)
			l.taken = append(l.taken, false)
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

// wait returns the first event named name (not returned before) whose
// payload contains every string of has.
func (l *eventLog) wait(ctx context.Context, t *testing.T, name string, has ...string) json.RawMessage {
	t.Helper()
	for {
		l.mu.Lock()
		for i, ev := range l.list {
			if l.taken[i] || ev.Event != name {
				continue
			}
			ok := true
			for _, h := range has {
				ok = ok && strings.Contains(string(ev.Payload), h)
			}
			if ok {
				l.taken[i] = true
				l.mu.Unlock()
				return ev.Payload
			}
		}
		l.mu.Unlock()
		select {
		case <-l.more:
		case <-ctx.Done():
			t.Fatalf("no %s event with %q: %v", name, has, ctx.Err())
		}
	}
}

// talkPeer is a Go page of a talk: the offerer of the atrium-talk channel
// (rtc.DialStream, signalled with talk.offer), with the gateway's
// messages in order.
type talkPeer struct {
	s      *rtc.Stream
	in     chan []byte
	closed chan struct{}
}

func dialTalk(ctx context.Context, t *testing.T, c *gateway.Client, talkID string) *talkPeer {
	t.Helper()
	p := &talkPeer{in: make(chan []byte, 4096), closed: make(chan struct{})}
	signal := func(ctx context.Context, offer string) (string, error) {
		var res struct{ SDP string }
		err := c.Call(ctx, "talk.offer", map[string]any{"talkId": talkID, "sdp": offer}, &res)
		return res.SDP, err
	}
	var once sync.Once
	s, err := rtc.DialStream(ctx, rtc.Config{}, talk.ChannelLabel, signal, rtc.StreamHooks{
		Message: func(b []byte) { p.in <- append([]byte(nil), b...) },
		Closed:  func() { once.Do(func() { close(p.closed) }) },
	})
	must(t, err)
	t.Cleanup(s.Close)
	p.s = s
	return p
}

func (p *talkPeer) send(t *testing.T, b []byte) {
	t.Helper()
	must(t, p.s.Send(b))
}

// utter sends one utterance: U, the recording in 16 KiB A chunks, E.
func (p *talkPeer) utter(t *testing.T, id string, sp spoken, send bool) {
	t.Helper()
	p.send(t, talk.JSONMessage(talk.MsgUtterance, talk.UtteranceStart{UtteranceID: id, MimeType: "audio/webm;codecs=opus", Send: send}))
	for seq, off := uint32(0), 0; off < len(sp.webm); seq, off = seq+1, off+16<<10 {
		p.send(t, talk.AudioMessage(seq, sp.webm[off:min(off+16<<10, len(sp.webm))]))
	}
	p.send(t, talk.JSONMessage(talk.MsgEnd, talk.UtteranceEnd{UtteranceID: id, DurationMs: sp.dur.Milliseconds()}))
}

// next is the gateway's next message.
func (p *talkPeer) next(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	select {
	case b := <-p.in:
		return b
	case <-ctx.Done():
		t.Fatalf("no message from the gateway: %v", ctx.Err())
	}
	return nil
}

// spokenReply is one reply as the page got it.
type spokenReply struct {
	id          string
	sentences   []string
	audio       [][]byte // per sentence, its S parts joined (nil for T)
	says        []talk.Say
	interrupted bool
}

// reply reads S and T messages until the reply's R, checking the order:
// sentences by seq from 0, parts by part from 0, last on each sentence's
// final part.
func (p *talkPeer) reply(ctx context.Context, t *testing.T) spokenReply {
	t.Helper()
	var r spokenReply
	part := 0
	for {
		b := p.next(ctx, t)
		switch b[0] {
		case talk.MsgSpeech:
			h, audio, ok := talk.ParseSpeech(b)
			if !ok {
				t.Fatalf("a malformed S: %q", b)
			}
			if r.id == "" {
				r.id = h.ReplyID
			}
			if h.ReplyID != r.id || h.Seq != len(r.sentences) || h.Part != part || h.MimeType != "audio/mpeg" {
				t.Fatalf("S %+v out of order (reply %s, sentence %d, part %d)", h, r.id, len(r.sentences), part)
			}
			if part == 0 {
				r.audio = append(r.audio, nil)
			}
			r.audio[len(r.audio)-1] = append(r.audio[len(r.audio)-1], audio...)
			part++
			if h.Last {
				r.sentences, part = append(r.sentences, h.Text), 0
			}
		case talk.MsgSay:
			var s talk.Say
			must(t, json.Unmarshal(b[1:], &s))
			if r.id == "" {
				r.id = s.ReplyID
			}
			if s.ReplyID != r.id || s.Seq != len(r.sentences) {
				t.Fatalf("T %+v out of order", s)
			}
			r.sentences, r.says = append(r.sentences, s.Text), append(r.says, s)
		case talk.MsgReplyEnd:
			var e talk.ReplyEnd
			must(t, json.Unmarshal(b[1:], &e))
			if r.id != "" && e.ReplyID != r.id {
				t.Fatalf("R of %s while %s spoke", e.ReplyID, r.id)
			}
			r.id, r.interrupted = e.ReplyID, e.Interrupted
			return r
		default:
			t.Fatalf("an unexpected message %q", b)
		}
	}
}

func transcriptOf(t *testing.T, raw json.RawMessage) talk.TranscriptEvent {
	t.Helper()
	var e talk.TranscriptEvent
	must(t, json.Unmarshal(raw, &e))
	return e
}

// talkApp is the real app with a scripted model, transcription and speech
// server, Talk set up to use them, and the person's connection.
type talkApp struct {
	a      *App
	admin  *gateway.Client
	ev     *eventLog
	stt    *fakeSTT
	tts    *httptest.Server
	said   chan said
	model  *scriptedModel
	clock  *talkClock
	ctx    context.Context
	patchT func(t *testing.T, talkBlock map[string]any)
}

func newTalkApp(t *testing.T, answers map[string]string, holds map[string]chan struct{}) *talkApp {
	t.Helper()
	return newTalkAppWith(t, answers, holds, nil)
}

// newTalkAppWith is newTalkApp with the app's Options changed by edit
// (nil: none).
func newTalkAppWith(t *testing.T, answers map[string]string, holds map[string]chan struct{}, edit func(o *Options)) *talkApp {
	t.Helper()
	ta := &talkApp{stt: newFakeSTT(t), model: newScriptedModel(t, answers, holds), clock: &talkClock{}}
	ta.tts, ta.said = newSlowSpeechServer(t, holds["speech"])
	env := map[string]string{"OPENAI_BASE_URL": ta.model.BaseURL(), "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}
	a, _ := startAppWith(t, func(k string) string { return env[k] }, func(_ string, o *Options) {
		o.TalkNow = ta.clock.Now
		if edit != nil {
			edit(o)
		}
	})
	ta.a = a
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	ta.ctx = ctx
	ta.admin = gwDial(ctx, t, a, gateway.RoleOperator, "talk-admin")
	ta.ev = recordEvents(ta.admin)
	ta.patchT = func(t *testing.T, block map[string]any) {
		t.Helper()
		must(t, ta.admin.Call(ctx, "config.patch", map[string]any{"patch": map[string]any{"talk": block}}, nil))
	}
	ta.patchT(t, map[string]any{"stt": map[string]any{"baseUrl": ta.stt.URL}, "tts": map[string]any{"provider": "openai", "baseUrl": ta.tts.URL + "/v1"}})
	return ta
}

func (ta *talkApp) open(t *testing.T, c *gateway.Client, params map[string]any) talk.OpenResult {
	t.Helper()
	var res talk.OpenResult
	must(t, c.Call(ta.ctx, "talk.open", params, &res))
	return res
}

// TestTalkConversation (issue 27): a Go page streams espeak-ng's English
// and Chinese speech (WebM/Opus) over the atrium-talk channel of the real
// app; the scripted transcription server gets audio that decodes and
// lasts as long as the speech, the transcript reaches the model as the
// person's message (stored with meta.talk), the answer comes back as S
// audio sentence by sentence in order; voice commands change the speed
// and the voice and never reach the model; with no speech server the
// sentences come as T text, and push-to-talk only returns the transcript.
func TestTalkConversation(t *testing.T) {
	en := speech(t, "en", "What is the weather in Paris?")
	zh := speech(t, "cmn", "今天北京天气怎么样")
	ta := newTalkApp(t, map[string]string{
		"What is the weather in Paris?": "It is sunny in Paris today. The temperature is mild, about twenty degrees! Enjoy your walk.",
		"今天北京天气怎么样？":                    "北京今天晴朗，阳光很好。气温大约二十度！出门记得带水。",
		"And tomorrow?":                 "Tomorrow brings rain.",
	}, nil)
	ctx, t0 := ta.ctx, time.Now()
	ta.patchT(t, map[string]any{"keepAudio": true})
	open := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous", "lang": "auto"})
	profile, session, _ := strings.Cut(open.SessionKey, "/")
	if profile != "main" || session == "" || open.TTS.Provider != "openai" || open.TTS.Voice != "alloy" || open.Limits.MaxUtteranceMs != 60000 ||
		open.Limits.MaxUtteranceBytes != 2<<20 || open.Limits.MaxChunkBytes != 64<<10 || open.Interrupt != "cancel" {
		t.Fatalf("talk.open %+v", open)
	}
	peer := dialTalk(ctx, t, ta.admin, open.TalkID)

	turn := func(id string, sp spoken, stt sttAnswer, wantLang string) (talk.TranscriptEvent, spokenReply) {
		t.Helper()
		ta.stt.answers <- stt
		peer.utter(t, id, sp, true)
		h := <-ta.stt.got
		if h.name != "utterance.webm" || h.mime != "audio/webm" || h.model != "whisper-1" || h.format != "verbose_json" || h.language != "" {
			t.Fatalf("the transcription request %+v", h)
		}
		// The audio's own length, not the machine's time: what was
		// streamed decodes and lasts as long as espeak-ng's speech.
		if d := h.dur - sp.dur; d < -150*time.Millisecond || d > 150*time.Millisecond {
			t.Fatalf("the server decoded %v of audio, the speech lasts %v", h.dur, sp.dur)
		}
		tr := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"utteranceId":"`+id+`"`))
		if tr.Text != stt.text || tr.Lang != wantLang || tr.DurationMs != sp.dur.Milliseconds() || tr.Error != "" {
			t.Fatalf("talk.transcript %+v", tr)
		}
		return tr, peer.reply(ctx, t)
	}

	tr, r := turn("u1", en, sttAnswer{"What is the weather in Paris?", "english"}, "en")
	if !tr.Sent || tr.RunID == "" || r.id != tr.RunID || r.interrupted {
		t.Fatalf("transcript %+v, reply %s interrupted %v", tr, r.id, r.interrupted)
	}
	if want := []string{"It is sunny in Paris today.", "The temperature is mild, about twenty degrees!", "Enjoy your walk."}; !slices.Equal(r.sentences, want) {
		t.Fatalf("sentences %q, want %q", r.sentences, want)
	}
	for i, a := range r.audio {
		if string(a) != "ID3"+r.sentences[i] {
			t.Fatalf("sentence %d's audio %q", i, a)
		}
	}
	if !ta.model.asked("What is the weather in Paris?") {
		t.Fatal("the transcript did not reach the model")
	}
	msgs, err := ta.a.History.Session(ctx, session, 50)
	must(t, err)
	var meta struct {
		Talk struct {
			UtteranceID, MediaID string
			DurationMs           int64
		}
	}
	if len(msgs) < 2 || msgs[0].Role != "user" || msgs[0].Content != "What is the weather in Paris?" || json.Unmarshal(msgs[0].Meta, &meta) != nil ||
		meta.Talk.UtteranceID != "u1" || meta.Talk.DurationMs != en.dur.Milliseconds() || meta.Talk.MediaID == "" || meta.Talk.MediaID != tr.MediaID {
		t.Fatalf("history %+v", msgs)
	}
	// keepAudio: the utterance's audio, whole, in the media store.
	kept, err := ta.a.Media.Get(tr.MediaID)
	must(t, err)
	if kept.Command != talk.UtteranceCommand || kept.MIME != "audio/webm" || kept.Size != int64(len(en.webm)) || kept.DurationMs != en.dur.Milliseconds() {
		t.Fatalf("kept audio %+v", kept)
	}

	tr, r = turn("u2", zh, sttAnswer{"今天北京天气怎么样？", "chinese"}, "zh")
	if want := []string{"北京今天晴朗，阳光很好。", "气温大约二十度！", "出门记得带水。"}; !tr.Sent || !slices.Equal(r.sentences, want) {
		t.Fatalf("Chinese: %+v %q", tr, r.sentences)
	}

	// Voice commands: answered by the gateway, never sent to the model.
	asked := ta.model.Count()
	tr, r = turn("u3", zh, sttAnswer{"说慢一点。", "chinese"}, "zh")
	if vc := tr.VoiceCommand; tr.Sent || vc == nil || vc.Kind != talk.CommandSlower || !vc.Applied || vc.Speed != 0.75 ||
		r.id != "cmd-u3" || !slices.Equal(r.sentences, []string{"好的，我说慢一点。"}) {
		t.Fatalf("说慢一点: %+v %+v", tr, r)
	}
	tr, r = turn("u4", en, sttAnswer{"Change the voice.", "english"}, "en")
	if vc := tr.VoiceCommand; vc == nil || vc.Kind != talk.CommandVoice || vc.Voice != "echo" || len(r.sentences) != 1 {
		t.Fatalf("change the voice: %+v %+v", tr, r)
	}
	if ta.model.Count() != asked {
		t.Fatalf("a voice command reached the model (%d requests, %d before)", ta.model.Count(), asked)
	}
	_, r = turn("u5", en, sttAnswer{"And tomorrow?", "english"}, "en")
	if !slices.Equal(r.sentences, []string{"Tomorrow brings rain."}) {
		t.Fatalf("after the commands: %q", r.sentences)
	}
	var last said
	for len(ta.said) > 0 {
		last = <-ta.said
	}
	if last.Input != "Tomorrow brings rain." || last.Voice != "echo" || last.Speed != 0.75 {
		t.Fatalf("the speech server was asked %+v, want voice echo at 0.75", last)
	}
	var closed struct{ Closed bool }
	must(t, ta.admin.Call(ctx, "talk.close", map[string]any{"talkId": open.TalkID}, &closed))
	if !closed.Closed || !strings.Contains(string(ta.ev.wait(ctx, t, "talk.ended", open.TalkID)), `"closed"`) {
		t.Fatalf("talk.close %+v", closed)
	}

	// No speech server: the sentences come as T for speechSynthesis;
	// push-to-talk returns the transcript only (the page sends it).
	ta.patchT(t, map[string]any{"tts": map[string]any{"provider": "browser", "baseUrl": nil}})
	open = ta.open(t, ta.admin, map[string]any{"sessionKey": open.SessionKey, "mode": "ptt", "lang": "en"})
	if open.TTS.Provider != "browser" || open.TTS.MimeType != "" {
		t.Fatalf("browser talk.open %+v", open)
	}
	peer = dialTalk(ctx, t, ta.admin, open.TalkID)
	asked = ta.model.Count()
	ta.stt.answers <- sttAnswer{text: "What is the weather in Paris?"}
	peer.utter(t, "p1", en, false)
	<-ta.stt.got
	tr = transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"p1"`))
	if tr.Sent || tr.Text != "What is the weather in Paris?" || tr.Lang != "en" {
		t.Fatalf("push-to-talk transcript %+v", tr)
	}
	if ta.model.Count() != asked {
		t.Fatal("a push-to-talk transcript was sent")
	}
	must(t, ta.admin.Call(ctx, "chat.send", map[string]any{"profileId": "main", "sessionId": session, "message": tr.Text}, nil))
	r = peer.reply(ctx, t)
	if len(r.says) != 3 || r.says[0].Text != "It is sunny in Paris today." || r.says[0].Lang != "en" || r.says[0].Rate != 1 || r.audio != nil {
		t.Fatalf("T messages %+v", r.says)
	}
	t.Logf("the conversation took %v", time.Since(t0).Round(time.Millisecond))
}

// TestTalkInterruptAfterTheAnswer: the answer's run has ended but its
// sentences are still being spoken: an interrupt stops them there (R
// interrupted, nothing more of that reply), and the next words are
// answered as usual.
func TestTalkInterruptAfterTheAnswer(t *testing.T) {
	en := speech(t, "en", "Tell me a story.")
	slow := make(chan struct{})
	ta := newTalkApp(t, map[string]string{
		"Tell me a story.": "Here is a story. I tell it slowly. The end.",
		"Stop.":            "Stopped.",
	}, map[string]chan struct{}{"speech": slow})
	ctx := ta.ctx
	open := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
	peer := dialTalk(ctx, t, ta.admin, open.TalkID)
	ta.stt.answers <- sttAnswer{"Tell me a story.", "english"}
	peer.utter(t, "u1", en, true)
	tr := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"u1"`))
	ta.ev.wait(ctx, t, "chat.final", tr.RunID) // the run is over; the voice is not
	for {
		h, _, ok := talk.ParseSpeech(peer.next(ctx, t))
		if !ok || h.ReplyID != tr.RunID {
			t.Fatalf("speech %+v %v", h, ok)
		}
		if h.Seq == 1 { // the slow sentence has begun
			break
		}
	}
	peer.send(t, talk.JSONMessage(talk.MsgInterrupt, talk.Interrupt{}))
	for {
		b := peer.next(ctx, t)
		if b[0] == talk.MsgSpeech {
			if h, _, _ := talk.ParseSpeech(b); h.Seq != 1 {
				t.Fatalf("a sentence after the one interrupted: %+v", h)
			}
			continue
		}
		var end talk.ReplyEnd
		if b[0] != talk.MsgReplyEnd || json.Unmarshal(b[1:], &end) != nil || end.ReplyID != tr.RunID || !end.Interrupted {
			t.Fatalf("after I: %q", b)
		}
		break
	}
	close(slow)
	ta.stt.answers <- sttAnswer{"Stop.", "english"}
	peer.utter(t, "u2", en, true)
	if r := peer.reply(ctx, t); !slices.Equal(r.sentences, []string{"Stopped."}) {
		t.Fatalf("the next reply %+v (nothing more of the interrupted one may come first)", r)
	}
}

// TestTalkInterrupt: speaking over the voice (I) stops that reply's audio
// at once (R interrupted, no more S of it); with interrupt "cancel" the
// run is cancelled, with "queue" it finishes unspoken and the new words
// are sent when it ends.
func TestTalkInterrupt(t *testing.T) {
	en := speech(t, "en", "Tell me a long story.")
	for _, mode := range []string{"cancel", "queue"} {
		t.Run(mode, func(t *testing.T) {
			hold := make(chan struct{})
			ta := newTalkApp(t, map[string]string{
				"Tell me a long story.": "Once upon a time there was a fox. |It ran home. The end.",
				"And then?":             "Then it slept.",
			}, map[string]chan struct{}{"Tell me a long story.": hold})
			ctx := ta.ctx
			ta.patchT(t, map[string]any{"interrupt": mode})
			open := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
			if open.Interrupt != mode {
				t.Fatalf("interrupt %q", open.Interrupt)
			}
			peer := dialTalk(ctx, t, ta.admin, open.TalkID)
			ta.stt.answers <- sttAnswer{"Tell me a long story.", "english"}
			peer.utter(t, "u1", en, true)
			tr := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"u1"`))
			first := peer.next(ctx, t)
			h, _, ok := talk.ParseSpeech(first)
			if !ok || h.ReplyID != tr.RunID || h.Seq != 0 || h.Text != "Once upon a time there was a fox." {
				t.Fatalf("first speech %+v %v", h, ok)
			}
			for !h.Last { // the rest of the first sentence's parts
				h, _, _ = talk.ParseSpeech(peer.next(ctx, t))
			}
			peer.send(t, talk.JSONMessage(talk.MsgInterrupt, talk.Interrupt{ReplyID: tr.RunID}))
			b := peer.next(ctx, t)
			var end talk.ReplyEnd
			if b[0] != talk.MsgReplyEnd || json.Unmarshal(b[1:], &end) != nil || end.ReplyID != tr.RunID || !end.Interrupted {
				t.Fatalf("after I: %q", b)
			}
			if mode == "cancel" {
				ta.ev.wait(ctx, t, "chat.cancelled", tr.RunID)
				close(hold)
				return
			}
			ta.stt.answers <- sttAnswer{"And then?", "english"}
			peer.utter(t, "u2", en, true)
			tr2 := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"u2"`))
			if !tr2.Sent || !tr2.Queued || ta.model.asked("And then?") {
				t.Fatalf("queued transcript %+v", tr2)
			}
			close(hold) // the first run finishes, unspoken
			ta.ev.wait(ctx, t, "chat.final", tr.RunID)
			r := peer.reply(ctx, t)
			if r.id == tr.RunID || !slices.Equal(r.sentences, []string{"Then it slept."}) {
				t.Fatalf("after the queue: %+v", r)
			}
			if !ta.model.asked("And then?") {
				t.Fatal("the queued words were not sent")
			}
		})
	}
}

// TestTalkRefusals: who may not talk (a node, a paired node, an unpaired
// device, a device outside the session's scope; talk.test admin only,
// each refusal FORBIDDEN and audited) and who may (the person, a phone
// scoped admin, a phone scoped to the profile's role); TALK_NO_STT with
// nothing configured; one talk per connection; another connection's
// offer; and the stream's bounds: an utterance over 60 s (the injected
// clock), a chunk over the limit, over 2 MiB, bad types, out-of-order
// audio, audio outside an utterance, an abandoned stream (idle) — each
// ends the talk with its reason, X on the channel and talk.ended.
func TestTalkRefusals(t *testing.T) {
	ta := newTalkApp(t, nil, nil)
	a, ctx := ta.a, ta.ctx
	seedWorkspace(t, a, a.Layout.Workspace, scopeFiles)

	// Nothing configured: TALK_NO_STT says what is missing.
	ta.patchT(t, map[string]any{"stt": map[string]any{"baseUrl": nil}})
	err := ta.admin.Call(ctx, "talk.open", map[string]any{"sessionKey": "main/", "mode": "ptt"}, nil)
	var ge *gateway.Error
	if !errors.As(err, &ge) || ge.Code != talk.CodeNoSTT || ge.Details["setting"] != "talk.stt" || !strings.Contains(ge.Message, "Settings → Talk") {
		t.Fatalf("no STT: %v", err)
	}
	ta.patchT(t, map[string]any{"stt": map[string]any{"baseUrl": ta.stt.URL}})

	others := append([]principalConn{{gateway.LocalNode, gwDial(ctx, t, a, gateway.RoleNode, "talk-node"), "authenticated"}},
		devicePrincipals(ctx, t, a)...)
	for _, pc := range others {
		for _, m := range []string{"talk.open", "talk.offer", "talk.close", "talk.test"} {
			if pc.class == gateway.OperatorDevice && (m == "talk.offer" || m == "talk.close") {
				continue // an operator device may (its own talks only; below)
			}
			params := map[string]any{"sessionKey": "main/", "mode": "ptt", "talkId": "x", "sdp": "v=0", "kind": "stt"}
			if err := pc.cl.Call(ctx, m, params, nil); errCode(err) != gateway.CodeForbidden {
				t.Errorf("%s %s: %v, want FORBIDDEN", pc.class, m, err)
			}
			assertDenied(t, a, m)
		}
	}
	// A phone scoped to the writer role: its own role's profile, not main.
	writerPhone, _ := scopedPhone(ctx, t, a, ta.admin, "role:writer")
	if err := writerPhone.Call(ctx, "talk.open", map[string]any{"sessionKey": "main/", "mode": "ptt"}, nil); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("a writer phone opening main's talk: %v", err)
	}
	assertDenied(t, a, "talk.open")
	if err := writerPhone.Call(ctx, "talk.test", map[string]any{"kind": "stt"}, nil); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("talk.test from a phone: %v", err)
	}
	wo := ta.open(t, writerPhone, map[string]any{"sessionKey": "writer/", "mode": "ptt"})
	adminPhone, _ := scopedPhone(ctx, t, a, ta.admin, "admin")
	po := ta.open(t, adminPhone, map[string]any{"sessionKey": "main/", "mode": "continuous", "lang": "zh"})
	// Another connection's talk: refused and audited.
	if err := ta.admin.Call(ctx, "talk.offer", map[string]any{"talkId": po.TalkID, "sdp": "v=0"}, nil); errCode(err) != gateway.CodeForbidden {
		t.Fatalf("offering another connection's talk: %v", err)
	}
	assertDenied(t, a, "talk.offer")
	// One talk per connection.
	ao := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "ptt"})
	err = ta.admin.Call(ctx, "talk.open", map[string]any{"sessionKey": "main/", "mode": "ptt"}, nil)
	if !errors.As(err, &ge) || ge.Code != gateway.CodeUnavailable || !ge.Retryable {
		t.Fatalf("a second talk on a connection: %v", err)
	}
	for _, c := range []*gateway.Client{writerPhone, adminPhone} {
		var res struct{ Closed bool }
		id := wo.TalkID
		if c == adminPhone {
			id = po.TalkID
		}
		must(t, c.Call(ctx, "talk.close", map[string]any{"talkId": id}, &res))
		if !res.Closed {
			t.Fatal("talk.close of one's own talk")
		}
	}
	for _, bad := range []map[string]any{{"sessionKey": "main/", "mode": "shout"}, {"sessionKey": "main/", "mode": "ptt", "lang": "fr"},
		{"sessionKey": "../x", "mode": "ptt"}, {"mode": "ptt"}} {
		if err := adminPhone.Call(ctx, "talk.open", bad, nil); errCode(err) != gateway.CodeInvalidRequest {
			t.Errorf("talk.open %v: %v", bad, err)
		}
	}

	// The bounds of the stream: each ends the talk.
	en := speech(t, "en", "Hello.")
	header, rest := en.webm[:64], en.webm[64:]
	utter := func(p *talkPeer, id string) {
		p.send(t, talk.JSONMessage(talk.MsgUtterance, talk.UtteranceStart{UtteranceID: id, MimeType: "audio/webm;codecs=opus", Send: true}))
	}
	cases := []struct {
		name, reason string
		do           func(p *talkPeer, id string)
	}{
		{"over 60 s", talk.ReasonTooLong, func(p *talkPeer, id string) {
			utter(p, "long")
			p.send(t, talk.AudioMessage(0, header))
			ta.ev.wait(ctx, t, "talk.state", id, talk.StateListening) // the gateway has the utterance
			ta.clock.Advance(61 * time.Second)                        // audio keeps coming, with no end
			p.send(t, talk.AudioMessage(1, rest))
		}},
		{"no end", talk.ReasonTooLong, func(p *talkPeer, id string) {
			utter(p, "open")
			p.send(t, talk.AudioMessage(0, header))
			ta.ev.wait(ctx, t, "talk.state", id, talk.StateListening)
			ta.clock.Advance(61 * time.Second) // nothing more: the watch ends it
		}},
		{"a chunk over 64 KiB", talk.ReasonTooLarge, func(p *talkPeer, id string) {
			utter(p, "big")
			p.send(t, talk.AudioMessage(0, append(append([]byte(nil), header...), make([]byte, 64<<10)...)))
		}},
		{"over 2 MiB", talk.ReasonTooLarge, func(p *talkPeer, id string) {
			utter(p, "huge")
			p.send(t, talk.AudioMessage(0, header))
			for seq := uint32(1); seq <= 33; seq++ {
				p.send(t, talk.AudioMessage(seq, make([]byte, 64<<10)))
			}
		}},
		{"an unknown type", talk.ReasonBadStream, func(p *talkPeer, id string) { p.send(t, []byte("Zzz")) }},
		{"audio outside an utterance", talk.ReasonBadStream, func(p *talkPeer, id string) { p.send(t, talk.AudioMessage(0, header)) }},
		{"out of order", talk.ReasonBadStream, func(p *talkPeer, id string) {
			utter(p, "ooo")
			p.send(t, talk.AudioMessage(0, header))
			p.send(t, talk.AudioMessage(2, rest))
		}},
		{"not WebM", talk.ReasonBadStream, func(p *talkPeer, id string) {
			utter(p, "riff")
			p.send(t, talk.AudioMessage(0, []byte("RIFF....WAVEfmt ")))
		}},
		{"bad JSON", talk.ReasonBadStream, func(p *talkPeer, id string) { p.send(t, []byte("U{")) }},
		{"abandoned", talk.ReasonIdle, func(p *talkPeer, id string) { ta.clock.Advance(11 * time.Minute) }},
	}
	must(t, ta.admin.Call(ctx, "talk.close", map[string]any{"talkId": ao.TalkID}, nil))
	for _, tc := range cases {
		o := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
		p := dialTalk(ctx, t, ta.admin, o.TalkID)
		tc.do(p, o.TalkID)
		ended := ta.ev.wait(ctx, t, "talk.ended", o.TalkID)

		if !strings.Contains(string(ended), `"reason":"`+tc.reason+`"`) {
			t.Fatalf("%s: talk.ended %s, want %s", tc.name, ended, tc.reason)
		}
		for b := p.next(ctx, t); ; b = p.next(ctx, t) {
			if b[0] == talk.MsgStop {
				if !strings.Contains(string(b), tc.reason) {
					t.Fatalf("%s: X %q", tc.name, b)
				}
				break
			}
		}
		select {
		case <-p.closed:
		case <-ctx.Done():
			t.Fatalf("%s: the channel was not closed", tc.name)
		}
		if ta.stt.Count() != 0 {
			t.Fatalf("%s: a broken utterance was transcribed", tc.name)
		}
	}
	if n := a.Talk.Talks(); n != 0 {
		t.Fatalf("%d talks left", n)
	}
	msgs, err := a.History.Profile(ctx, "main", "", 50)
	must(t, err)
	if len(msgs.Messages) != 0 {
		t.Fatalf("a broken utterance left messages: %+v", msgs.Messages)
	}
}

// TestTalkTest: talk.test against the scripted servers (STT: a 1 s WAV
// that decodes; TTS: audio for "Atrium" and "你好"), against a closed port
// (ok false, a sentence with the URL), and with no STT server.
func TestTalkTest(t *testing.T) {
	ta := newTalkApp(t, nil, nil)
	ctx := ta.ctx
	var res talk.TestResult
	ta.stt.answers <- sttAnswer{text: "", language: "english"}
	must(t, ta.admin.Call(ctx, "talk.test", map[string]any{"kind": "stt"}, &res))
	if h := <-ta.stt.got; !res.OK || h.name != "atrium-test.wav" || h.dur < 990*time.Millisecond || h.dur > 1010*time.Millisecond {
		t.Fatalf("talk.test stt %+v (the server heard %+v)", res, h)
	}
	// The facts come as fields too, for the page to word in its language (Settings → Talk in
	// Chinese showed the English detail).
	if !strings.HasSuffix(res.URL, "/v1/audio/transcriptions") || res.Model == "" || res.Why != "" {
		t.Errorf("talk.test stt's fields: %+v, want the URL asked and the model", res)
	}
	res = talk.TestResult{}
	must(t, ta.admin.Call(ctx, "talk.test", map[string]any{"kind": "tts"}, &res))
	if !res.OK || !strings.Contains(res.Detail, "audio/mpeg") {
		t.Fatalf("talk.test tts %+v", res)
	}
	if res.URL == "" || res.Provider != "openai" || res.Bytes <= 0 || res.MimeType != "audio/mpeg" || res.Browser {
		t.Errorf("talk.test tts's fields: %+v, want the URL, provider, bytes and type", res)
	}
	if a, b := <-ta.said, <-ta.said; a.Input != "Atrium" || b.Input != "你好" {
		t.Fatalf("the speech server was asked %q and %q", a.Input, b.Input)
	}
	closed := closedPortURL(t)
	ta.patchT(t, map[string]any{"stt": map[string]any{"baseUrl": closed}, "tts": map[string]any{"baseUrl": closed}})
	for _, kind := range []string{"stt", "tts"} {
		res = talk.TestResult{}
		must(t, ta.admin.Call(ctx, "talk.test", map[string]any{"kind": kind}, &res))
		if res.OK || !strings.Contains(res.Detail, closed+"/v1/audio/") || !strings.Contains(res.Detail, "could not be reached") {
			t.Fatalf("talk.test %s against a closed port: %+v", kind, res)
		}
		if res.Why != talk.WhyUnreachable || !strings.HasPrefix(res.URL, closed+"/v1/audio/") {
			t.Errorf("talk.test %s against a closed port: why %q url %q, want %s and the URL asked", kind, res.Why, res.URL, talk.WhyUnreachable)
		}
	}
	ta.patchT(t, map[string]any{"stt": map[string]any{"baseUrl": nil}})
	var ge *gateway.Error
	if err := ta.admin.Call(ctx, "talk.test", map[string]any{"kind": "stt"}, &res); !errors.As(err, &ge) || ge.Code != talk.CodeNoSTT {
		t.Fatalf("talk.test stt with none set: %v", err)
	}
	if err := ta.admin.Call(ctx, "talk.test", map[string]any{"kind": "both"}, &res); errCode(err) != gateway.CodeInvalidRequest {
		t.Fatalf("talk.test both: %v", err)
	}
}

// Count is how many requests the transcription server measured.
func (f *fakeSTT) Count() int { return len(f.got) }

func assertDenied(t *testing.T, a *App, method string) {
	t.Helper()
	e, err := a.Audit.Tail(1, audit.Filter{})
	if err != nil || len(e) != 1 || e[0].Result != audit.Denied || e[0].Operation != method {
		t.Errorf("%s: audit %+v %v, want denied", method, e, err)
	}
}

// closedPortURL is http:// and a 127.0.0.1 port that was just closed.
func closedPortURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

// queuedTalk opens a continuous talk with interrupt "queue" whose first
// words ("Tell me a long story.", utterance u0) start an answer held until
// hold is closed; answers adds the scripted model's other answers. It
// returns the app, the page's peer, the utterance's audio (en), hold and
// u0's transcript (its run).
func queuedTalk(t *testing.T, answers map[string]string) (*talkApp, *talkPeer, spoken, chan struct{}, talk.TranscriptEvent) {
	t.Helper()
	en := speech(t, "en", "Tell me a long story.")
	hold := make(chan struct{})
	all := map[string]string{"Tell me a long story.": "Once upon a time."}
	maps.Copy(all, answers)
	ta := newTalkApp(t, all, map[string]chan struct{}{"Tell me a long story.": hold})
	ta.patchT(t, map[string]any{"interrupt": "queue"})
	open := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous"})
	peer := dialTalk(ta.ctx, t, ta.admin, open.TalkID)
	ta.stt.answers <- sttAnswer{"Tell me a long story.", "english"}
	peer.utter(t, "u0", en, true)
	first := transcriptOf(t, ta.ev.wait(ta.ctx, t, "talk.transcript", `"u0"`))
	if first.RunID == "" {
		t.Fatalf("first transcript %+v", first)
	}
	return ta, peer, en, hold, first
}

// TestTalkQueueBounded: with interrupt "queue", words said while the
// session answers wait for the answer's end — at most 8 of them; the
// ninth is not sent and the person is told (TALK_QUEUE_FULL, its text in
// the event), and the eight still go once the answer ends, each told to the
// page again as it is sent (sent, no longer queued, its run).
func TestTalkQueueBounded(t *testing.T) {
	ta, peer, en, hold, first := queuedTalk(t, nil)
	ctx := ta.ctx
	for i := 1; i <= 9; i++ {
		id, text := fmt.Sprintf("u%d", i), fmt.Sprintf("And then %d?", i)
		ta.stt.answers <- sttAnswer{text, "english"}
		peer.utter(t, id, en, true)
		tr := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"`+id+`"`))
		if i <= 8 && (!tr.Sent || !tr.Queued || tr.ErrorCode != "") {
			t.Fatalf("%s while the answer runs: %+v, want queued", id, tr)
		}
		if i == 9 && (tr.Sent || tr.Queued || tr.ErrorCode != talk.CodeQueueFull || tr.Text != text) {
			t.Fatalf("%s with 8 waiting: %+v, want not sent, %s", id, tr, talk.CodeQueueFull)
		}
	}
	close(hold)
	ta.ev.wait(ctx, t, "chat.final", first.RunID)
	for i := 1; i <= 8; i++ {
		text := fmt.Sprintf("And then %d?", i)
		// The page is told when each waiting transcript is sent (it shows it as waiting until then).
		id := fmt.Sprintf("u%d", i)
		if tr := transcriptOf(t, ta.ev.wait(ctx, t, "talk.transcript", `"`+id+`"`)); !tr.Sent || tr.Queued || tr.RunID == "" || tr.Text != text || tr.ErrorCode != "" {
			t.Fatalf("%s as it was sent: %+v, want sent with its run, no longer queued", id, tr)
		}
		for !ta.model.asked(text) {
			select {
			case <-ctx.Done():
				t.Fatalf("the queued %q never reached the model", text)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if ta.model.asked("And then 9?") {
		t.Error("the refused ninth reached the model")
	}
}
