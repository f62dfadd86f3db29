package talk

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
)

// The stream's states (talk.st).
type streamState int

const (
	stOpened   streamState = iota // talk.open answered; no offer yet
	stOffered                     // talk.offer is being answered
	stAttached                    // the channel is the talk's
	stEnded
)

// utterance is the one being received.
type utterance struct {
	id, mime string
	send     bool
	started  time.Time
	next     uint32 // the seq the next A must carry
	data     bytes.Buffer
}

// job is an utterance to transcribe.
type job struct {
	id, mime   string
	send       bool
	durationMs int64
	audio      []byte
}

// speakItem is one sentence (or a reply's end) for the speaker.
type speakItem struct {
	replyID string
	seq     int
	text    string
	end     bool // R after the reply's sentences
}

// reply is an answer being spoken, in talk.replies from its run's first
// event (or a voice command's confirmation) until the speaker reaches its
// end, or until it is interrupted and its run has ended.
type reply struct {
	cut         Cutter
	seq         int
	interrupted bool
	spoke       bool
	// ended: its run ended (RunEnded), or it has no run (a voice
	// command's): nothing more will come for it, so an interrupt, which
	// takes its end off the speaker's queue, removes it.
	ended bool
	// deviceVoice: the speech server failed a sentence of this reply; its
	// later sentences go as T at once (a server down or slow made each one
	// wait its whole HTTP bound, 60 s, before the page's own voice said it).
	deviceVoice bool
}

type talk struct {
	s      *Service
	id     string
	connID string
	device string       // the paired device's id; "" for the person at the desktop
	caller gateway.Call // talk.open's call: MayChat is asked again with it
	mode   string
	lang   string
	ctx    context.Context
	cancel context.CancelFunc
	// sttCtx is the transcriptions' context: it outlives the talk's end
	// while what the person said is still delivered (leftover.go).
	sttCtx    context.Context
	sttCancel context.CancelFunc
	jobs      chan job
	wake      chan struct{} // the speaker's queue has something
	done      chan struct{}
	stt       STTClient
	settings  Settings // with defaults

	// sendMu orders an interrupt's R after the reply's last S or T.
	sendMu sync.Mutex
	// stateMu orders talk.state events: a state is decided and sent
	// under it (state), never from a goroutine of its own.
	stateMu sync.Mutex

	mu             sync.Mutex
	st             streamState
	profileID      string
	sessionID      string
	conversationID string
	conn           Conn
	opened         time.Time
	lastAudio      time.Time
	utt            *utterance
	queued         []waiting // transcripts waiting for the session's run to end
	keepLeft       bool      // ended for a reason that still delivers what was said
	left           []Message // what was said, for the chat once the talk ended (leftover.go)
	activeRun      string
	myRuns         map[string]bool
	replies        map[string]*reply
	speakQ         []speakItem
	speakCancel    context.CancelFunc // the sentence being synthesised
	speaking       string             // its reply
	uiState        string             // the last talk.state sent (under mu; decided and sent under stateMu)
	voice          string
	speed          float64
}

func newTalk(s *Service, connID, profileID, sessionID string, p OpenParams, st Settings) *talk {
	ctx, cancel := context.WithCancel(context.Background())
	sttCtx, sttCancel := context.WithCancel(s.ctx)
	now := s.o.Now()
	t := &talk{s: s, id: media.NewID(), connID: connID, mode: p.Mode, lang: p.Lang, ctx: ctx, cancel: cancel,
		sttCtx: sttCtx, sttCancel: sttCancel,
		jobs: make(chan job, maxQueued), wake: make(chan struct{}, 1), done: make(chan struct{}),
		stt:      STTClient{BaseURL: st.STT.BaseURL, Model: st.STT.Model, APIKey: st.STT.APIKey, HTTP: s.o.HTTP},
		settings: st, profileID: profileID, sessionID: sessionID, conversationID: p.ConversationID,
		opened: now, lastAudio: now, myRuns: map[string]bool{}, replies: map[string]*reply{},
		voice: st.TTS.Voice}
	lo, hi := SpeedRange(st.TTS.Provider)
	t.speed = min(max(st.TTS.Speed, lo), hi)
	if st.TTS.Provider == ProviderElevenLabs {
		t.voice = st.TTS.ElevenLabs.VoiceID
	}
	return t
}

// synth is the talk's speech server, nil for the browser.
func (t *talk) synth() Synth {
	tts := t.settings.TTS
	switch tts.Provider {
	case ProviderOpenAI:
		return OpenAISpeech{BaseURL: tts.BaseURL, Model: tts.Model, Format: tts.Format, APIKey: tts.APIKey, HTTP: t.s.o.HTTP,
			StartTimeout: t.s.o.SpeechStart}
	case ProviderElevenLabs:
		return ElevenLabs{BaseURL: tts.BaseURL, ModelID: tts.ElevenLabs.ModelID, APIKey: tts.APIKey,
			Stability: *tts.ElevenLabs.Stability, HTTP: t.s.o.HTTP, StartTimeout: t.s.o.SpeechStart}
	}
	return nil
}

func (t *talk) ttsInfo() TTSInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	info := TTSInfo{Provider: t.settings.TTS.Provider, Voice: t.voice, Speed: t.speed}
	switch info.Provider {
	case ProviderOpenAI:
		info.MimeType = formatMIME[t.settings.TTS.Format]
	case ProviderElevenLabs:
		info.MimeType = "audio/mpeg"
	}
	return info
}

// offered moves the talk from opened to offered; false when it was not
// waiting for its offer.
func (t *talk) offered() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st != stOpened {
		return false
	}
	t.st = stOffered
	return true
}

// attach gives the talk its channel; false when it ended meanwhile.
func (t *talk) attach(c Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.st != stOffered {
		return false
	}
	t.st, t.conn, t.lastAudio = stAttached, c, t.s.o.Now()
	return true
}

// end ends the talk once: the page is told X {reason} (unless by is the
// page: sendStop false) and the channel closed after lingerStop, the
// connection talk.ended. It reports whether this call ended it.
func (t *talk) end(reason string, sendStop bool) bool {
	t.mu.Lock()
	if t.st == stEnded {
		t.mu.Unlock()
		return false
	}
	t.st = stEnded
	conn := t.conn
	// What the person said still goes to the chat (leftover.go), unless
	// this device may no longer chat there or the gateway stops.
	t.keepLeft = keepsLeftovers(reason)
	if t.keepLeft {
		for _, w := range t.queued {
			t.left = append(t.left, w.m)
		}
	}
	t.utt, t.queued, t.speakQ = nil, nil, nil
	t.mu.Unlock()
	if !t.keepLeft {
		t.sttCancel()
	}
	t.cancel()
	close(t.done)
	s := t.s
	s.mu.Lock()
	delete(s.talks, t.id)
	s.mu.Unlock()
	if conn != nil {
		if sendStop {
			_ = conn.Send(JSONMessage(MsgStop, Stop{Reason: reason}))
			time.AfterFunc(lingerStop, conn.Close)
		} else {
			conn.Close()
		}
	}
	// Best effort: a connection gone has nothing to be told.
	_ = s.o.Gateway.Send(t.connID, EventEnded, map[string]string{"talkId": t.id, "reason": reason})
	s.o.Logger.Info("talk ended", "talk", t.id, "reason", reason)
	return true
}

func (t *talk) ended() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// state sends talk.state when it changes. States go out in the order
// they are decided: each is decided and sent under stateMu, on the
// goroutine that decided it.
func (t *talk) state(st string) {
	t.stateMu.Lock()
	defer t.stateMu.Unlock()
	t.stateLocked(st)
}

// stateLocked is state with stateMu held.
func (t *talk) stateLocked(st string) {
	t.mu.Lock()
	same := t.uiState == st
	t.uiState = st
	t.mu.Unlock()
	if !same && !t.ended() {
		_ = t.s.o.Gateway.Send(t.connID, EventState, map[string]string{"talkId": t.id, "state": st})
	}
}

// send puts b on the channel; a failure ends the talk.
func (t *talk) send(b []byte) bool {
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	if conn == nil {
		return false
	}
	if err := conn.Send(b); err != nil {
		t.end(ReasonConnectionGone, false)
		return false
	}
	return true
}

// run is the talk's life: the bounds' watch, the transcriptions and the
// speaker, until it ends.
func (t *talk) run() {
	go t.transcriber()
	go t.speaker()
	tick := time.NewTicker(t.s.o.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
			if reason := t.overdue(); reason != "" {
				t.end(reason, true)
				return
			}
		}
	}
}

// overdue checks the time bounds against the clock: the channel not open
// within OpenTimeout, an utterance over MaxUtteranceMs, no audio for
// IdleTimeout.
func (t *talk) overdue() string {
	o := t.s.o
	now := o.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.st != stAttached && now.Sub(t.opened) > o.OpenTimeout:
		return ReasonConnectionGone
	case t.utt != nil && now.Sub(t.utt.started) > time.Duration(o.Limits.MaxUtteranceMs)*time.Millisecond:
		return ReasonTooLong
	case t.st == stAttached && t.utt == nil && now.Sub(t.lastAudio) > o.IdleTimeout:
		return ReasonIdle
	}
	return ""
}

// message takes one message of the page's channel, in order
// (docs/PROTOCOL.md "Talk", the channel's messages).
func (t *talk) message(b []byte) {
	if t.ended() {
		return
	}
	if reason := t.take(b); reason != "" {
		if reason != ReasonClosed {
			t.refused(reason, b)
		}
		t.end(reason, reason != ReasonClosed)
	}
}

// refused logs which message broke the stream and where the utterance was
// (its type, size, an A's seq; never its bytes), so a bad_stream in a log
// says which check it failed.
func (t *talk) refused(reason string, b []byte) {
	args := []any{"talk", t.id, "reason", reason, "type", fmt.Sprintf("%q", b[0]), "bytes", len(b)}
	if b[0] == MsgAudio && len(b) >= 5 {
		args = append(args, "seq", binary.BigEndian.Uint32(b[1:]))
	}
	t.mu.Lock()
	if u := t.utt; u != nil {
		args = append(args, "utterance_next_seq", u.next, "utterance_bytes", u.data.Len())
	} else {
		args = append(args, "utterance", "none")
	}
	t.mu.Unlock()
	t.s.o.Logger.Info("talk stream refused", args...)
}

// take applies b; it returns the reason to end the talk, or "".
func (t *talk) take(b []byte) string {
	o := t.s.o
	now := o.Now()
	switch b[0] {
	case MsgUtterance:
		var u UtteranceStart
		// The utterance id goes into history (meta.talk) and the media
		// store: chat's rule for client-chosen ids (the page's are hex).
		if json.Unmarshal(b[1:], &u) != nil || !validID(u.UtteranceID) || !audioMIME(u.MimeType) {
			return ReasonBadStream
		}
		t.mu.Lock()
		if t.utt != nil {
			t.mu.Unlock()
			return ReasonBadStream
		}
		// Not audio: U and E leave lastAudio alone, so a page sending
		// empty utterances cannot keep a talk past the idle bound.
		t.utt = &utterance{id: u.UtteranceID, mime: u.MimeType, send: u.Send, started: now}
		t.mu.Unlock()
		t.state(StateListening)
	case MsgAudio:
		if len(b) < 5 {
			return ReasonBadStream
		}
		seq, data := binary.BigEndian.Uint32(b[1:]), b[5:]
		t.mu.Lock()
		defer t.mu.Unlock()
		u := t.utt
		switch {
		case u == nil || seq != u.next:
			return ReasonBadStream
		case len(data) > o.Limits.MaxChunkBytes || u.data.Len()+len(data) > o.Limits.MaxUtteranceBytes:
			return ReasonTooLarge
		case now.Sub(u.started) > time.Duration(o.Limits.MaxUtteranceMs)*time.Millisecond:
			return ReasonTooLong
		case u.data.Len() == 0 && !containerMagic(u.mime, data):
			return ReasonBadStream
		}
		u.next++
		u.data.Write(data)
		t.lastAudio = now
	case MsgEnd:
		var e UtteranceEnd
		if json.Unmarshal(b[1:], &e) != nil {
			return ReasonBadStream
		}
		t.mu.Lock()
		u := t.utt
		switch {
		case u == nil || e.UtteranceID != u.id || e.DurationMs < 0:
			t.mu.Unlock()
			return ReasonBadStream
		case e.DurationMs > o.Limits.MaxUtteranceMs || now.Sub(u.started) > time.Duration(o.Limits.MaxUtteranceMs)*time.Millisecond:
			t.mu.Unlock()
			return ReasonTooLong
		}
		t.utt = nil
		t.mu.Unlock()
		ev := TranscriptEvent{UtteranceID: u.id, DurationMs: e.DurationMs, Lang: t.talkLang("")}
		if u.data.Len() == 0 {
			ev.failed(CodeNoAudio)
			t.transcript(ev)
			return ""
		}
		// Transcribing goes out before the transcriber can say what
		// follows it (its state waits for stateMu).
		t.stateMu.Lock()
		select {
		case t.jobs <- job{id: u.id, mime: u.mime, send: u.send, durationMs: e.DurationMs, audio: u.data.Bytes()}:
			t.stateLocked(StateTranscribing)
			t.stateMu.Unlock()
		default:
			t.stateMu.Unlock()
			ev.failed(CodeSTTBusy)
			t.transcript(ev)
		}
	case MsgInterrupt:
		var in Interrupt
		if json.Unmarshal(b[1:], &in) != nil {
			return ReasonBadStream
		}
		go t.interrupt(in.ReplyID)
	case MsgStop:
		return ReasonClosed
	default:
		return ReasonBadStream
	}
	return ""
}

// audioMIME: the containers a page may send (MediaRecorder's Opus).
func audioMIME(m string) bool {
	m = strings.ToLower(strings.ReplaceAll(m, " ", ""))
	return strings.HasPrefix(m, "audio/webm") || strings.HasPrefix(m, "audio/ogg")
}

// containerMagic checks an utterance's first bytes: EBML for WebM,
// "OggS" for Ogg.
func containerMagic(mime string, b []byte) bool {
	if strings.HasPrefix(strings.ToLower(mime), "audio/ogg") {
		return bytes.HasPrefix(b, []byte("OggS"))
	}
	return bytes.HasPrefix(b, []byte{0x1A, 0x45, 0xDF, 0xA3})
}

// TranscriptEvent is talk.transcript's payload.
type TranscriptEvent struct {
	TalkID       string        `json:"talkId"`
	UtteranceID  string        `json:"utteranceId"`
	Text         string        `json:"text"`
	Lang         string        `json:"lang"`
	DurationMs   int64         `json:"durationMs"`
	Sent         bool          `json:"sent"`
	Queued       bool          `json:"queued,omitempty"`
	RunID        string        `json:"runId,omitempty"`
	MediaID      string        `json:"mediaId,omitempty"`
	VoiceCommand *VoiceCommand `json:"voiceCommand,omitempty"`
	// ErrorCode is a failed utterance's code (CodeSTTFailed, CodeNoAudio,
	// CodeSTTBusy, CodeSendFailed, CodeQueueFull), Error its fixed sentence (ErrorText):
	// never a server's words, which are logged.
	ErrorCode string `json:"errorCode,omitempty"`
	Error     string `json:"error,omitempty"`
}

// failed marks e as failed with code.
func (e *TranscriptEvent) failed(code string) {
	e.ErrorCode, e.Error = code, ErrorText(code)
}

// VoiceCommand says what a voice command did.
type VoiceCommand struct {
	Kind    string  `json:"kind"`
	Applied bool    `json:"applied"`
	Voice   string  `json:"voice,omitempty"`
	Speed   float64 `json:"speed,omitempty"`
}

func (t *talk) transcript(e TranscriptEvent) {
	e.TalkID = t.id
	_ = t.s.o.Gateway.Send(t.connID, EventTranscript, e)
}

// talkLang is the transcript's language: the server's, else the talk's
// (en or zh), else detected from text.
func (t *talk) talkLang(server string) string {
	switch {
	case server != "":
		return server
	case t.lang == "en" || t.lang == "zh":
		return t.lang
	}
	return "en"
}

// transcriber transcribes the utterances one at a time, in order.
func (t *talk) transcriber() {
	for {
		select {
		case <-t.done:
			t.drain()
			return
		case j := <-t.jobs:
			t.transcribe(j)
		}
	}
}

// allowed asks MayChat again (a paired device's scope may have changed
// since talk.open); a refusal ends the talk as ReasonForbidden.
func (t *talk) allowed() bool {
	if t.s.o.MayChat == nil || t.device == "" {
		return true // the person at the desktop (admin) always may
	}
	if err := t.s.o.MayChat(t.sttCtx, &t.caller, t.profileID); err != nil {
		t.s.o.Logger.Info("talk no longer allowed", "talk", t.id, "device", t.device, "profile", t.profileID)
		t.end(ReasonForbidden, true)
		return false
	}
	return true
}

func (t *talk) transcribe(j job) {
	if !t.allowed() {
		return // the audio goes nowhere
	}
	language := ""
	if t.settings.STT.Language == "ui" && (t.lang == "en" || t.lang == "zh") {
		language = t.lang
	}
	ext := ".webm"
	if strings.HasPrefix(strings.ToLower(j.mime), "audio/ogg") {
		ext = ".ogg"
	}
	tr, err := t.stt.Transcribe(t.sttCtx, j.audio, "utterance"+ext, strings.Split(j.mime, ";")[0], language)
	if t.ended() {
		// Said before the talk ended: still the person's message.
		if err == nil && j.send && tr.Text != "" && ParseCommand(tr.Text) == "" {
			m, _ := t.chatMessage(j, tr.Text)
			t.leave(m)
		}
		return
	}
	ev := TranscriptEvent{UtteranceID: j.id, DurationMs: j.durationMs, Text: tr.Text, Lang: tr.Lang}
	if err != nil {
		t.s.o.Logger.Warn("talk transcription failed", "talk", t.id, "err", err)
		ev.Lang = t.talkLang("")
		code := CodeSTTFailed
		if se := (*ServerError)(nil); errors.As(err, &se) && se.Why == WhyUnreachable {
			code = CodeSTTUnreachable // not running, or a wrong address: no answer to look for in the log
		}
		ev.failed(code)
		t.transcript(ev)
		t.state(t.restState())
		return
	}
	if ev.Lang == "" {
		ev.Lang = DetectLang(tr.Text)
	}
	if kind := ParseCommand(tr.Text); kind != "" {
		ev.VoiceCommand = t.command(kind, ev.Lang, j.id)
		t.transcript(ev)
		return
	}
	if tr.Text == "" || !j.send {
		t.transcript(ev)
		t.state(t.restState())
		return
	}
	m, mediaID := t.chatMessage(j, tr.Text)
	ev.MediaID = mediaID
	ev.Sent = true
	runID, queued, err := t.deliver(waiting{m: m, ev: ev}, false)
	switch {
	case errors.Is(err, errQueueFull):
		ev.Sent = false
		ev.failed(CodeQueueFull)
	case err != nil:
		t.s.o.Logger.Warn("talk transcript not sent", "talk", t.id, "err", err)
		ev.Sent = false
		ev.failed(CodeSendFailed)
		t.state(t.restState())
	case queued:
		ev.Queued = true
	default:
		ev.RunID = runID
		t.state(StateThinking)
	}
	t.transcript(ev)
}

// chatMessage is the person's message of j, heard as text (its audio kept
// in the media store when keepAudio is on: its media id, else "").
func (t *talk) chatMessage(j job, text string) (Message, string) {
	meta := map[string]any{"utteranceId": j.id, "durationMs": j.durationMs}
	mediaID := ""
	if t.settings.KeepAudio && t.s.o.Store != nil {
		if id, err := t.keep(j); err != nil {
			t.s.o.Logger.Warn("talk audio not kept", "talk", t.id, "err", err)
		} else {
			meta["mediaId"], mediaID = id, id
		}
	}
	mb, _ := json.Marshal(map[string]any{"talk": meta}) // plain values: no error
	t.mu.Lock()
	defer t.mu.Unlock()
	return Message{ProfileID: t.profileID, SessionID: t.sessionID, ConversationID: t.conversationID, Text: text, Meta: mb}, mediaID
}

// restState is the state with nothing to do: listening in continuous
// mode, else idle.
func (t *talk) restState() string {
	if t.mode == "continuous" {
		return StateListening
	}
	return StateIdle
}

// keep stores the utterance's audio in the media store.
func (t *talk) keep(j job) (string, error) {
	mt := strings.Split(j.mime, ";")[0]
	ext := ".webm"
	if mt == "audio/ogg" {
		ext = ".ogg"
	}
	plan := media.Plan{ID: media.NewID(), Device: "talk", Command: UtteranceCommand, Name: "utterance-" + j.id + ext,
		MIME: mt, DurationMs: j.durationMs, Transport: media.TransportWebRTC}
	m, err := t.s.o.Store.Put(plan, j.audio)
	if err != nil {
		return "", fmt.Errorf("keep utterance %s: %w", j.id, err)
	}
	return m.ID, nil
}

// errQueueFull: maxWaitingSends transcripts wait already (deliver).
var errQueueFull = errors.New("talk: transcripts queue full")

// waiting is a transcript to send as the person's message: m, and ev the
// talk.transcript that said it was queued (sendQueued tells the page
// again, by its utterance id, when it is sent or fails).
type waiting struct {
	m  Message
	ev TranscriptEvent
}

// deliver sends m, or queues it while the session answers (a run of the
// session is active, or Send says busy); queued ones go when it ends, in
// the order they were said. At most maxWaitingSends wait: the next is
// refused with errQueueFull (the person is told, nothing waits
// unbounded). head is true for the queue's first transcript, taken off it
// as a run ended (sendQueued): it goes before the others, and back to the
// front when it must wait again.
func (t *talk) deliver(w waiting, head bool) (runID string, queued bool, err error) {
	// wait queues w (t.mu held).
	wait := func() (bool, error) {
		switch {
		case head:
			t.queued = append([]waiting{w}, t.queued...)
		case len(t.queued) >= maxWaitingSends:
			return false, errQueueFull
		default:
			t.queued = append(t.queued, w)
		}
		return true, nil
	}
	t.mu.Lock()
	if t.activeRun != "" || (!head && len(t.queued) > 0) {
		queued, err = wait()
		t.mu.Unlock()
		return "", queued, err
	}
	t.mu.Unlock()
	sent, err := t.s.o.Chat.Send(t.ctx, w.m)
	if errors.Is(err, ErrBusy) {
		t.mu.Lock()
		queued, err = wait()
		t.mu.Unlock()
		return "", queued, err
	}
	if err != nil {
		return "", false, fmt.Errorf("sending the transcript: %w", err)
	}
	t.mu.Lock()
	t.myRuns[sent.RunID] = true
	if sent.SessionID != "" && sent.SessionID != t.sessionID {
		t.sessionID = sent.SessionID // chat moved a closed session on
	}
	t.mu.Unlock()
	return sent.RunID, false, nil
}

// follows reports whether the talk speaks e's run: its session's, or one
// it started.
func (t *talk) follows(e RunEvent) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st != stEnded && ((e.ProfileID == t.profileID && e.SessionID == t.sessionID) || t.myRuns[e.RunID])
}

// runEvent speaks a run of the session: its sentences as they complete,
// then R.
func (t *talk) runEvent(e RunEvent) {
	t.mu.Lock()
	r := t.replies[e.RunID]
	if r == nil && e.Kind != RunEnded {
		r = &reply{}
		t.replies[e.RunID] = r
	}
	var items []speakItem
	var next *waiting
	recheck := false
	switch e.Kind {
	case RunStarted:
		t.activeRun = e.RunID
		recheck = true
	case RunDelta:
		t.activeRun = e.RunID
		if !r.interrupted {
			for _, s := range r.cut.Add(e.Delta) {
				items = append(items, speakItem{replyID: e.RunID, seq: r.seq, text: s})
				r.seq++
			}
		}
	case RunEnded:
		if t.activeRun == e.RunID {
			t.activeRun = ""
		}
		delete(t.myRuns, e.RunID)
		if r != nil {
			// An interrupted reply is done; another stays until the
			// speaker reaches its end (an interrupt may still stop
			// its queued sentences).
			if r.interrupted {
				delete(t.replies, e.RunID)
			} else {
				r.ended = true
				for _, s := range r.cut.Flush() {
					items = append(items, speakItem{replyID: e.RunID, seq: r.seq, text: s})
					r.seq++
				}
				items = append(items, speakItem{replyID: e.RunID, end: true})
			}
		}
		if len(t.queued) > 0 {
			w := t.queued[0]
			t.queued = t.queued[1:]
			next = &w
		}
	}
	t.speakQ = append(t.speakQ, items...)
	t.mu.Unlock()
	if recheck && !t.allowed() {
		return // nothing of the answer is spoken
	}
	if len(items) > 0 {
		t.poke()
	}
	if e.Kind == RunStarted {
		t.state(StateThinking)
	}
	if next != nil {
		go t.sendQueued(*next)
	}
}

// sendQueued sends a transcript that waited for the session's run and
// tells the page with a talk.transcript of the same utterance: sent, not
// queued, with the run answering it — or not sent, CodeSendFailed. One
// that must wait again (the session busy once more) is told nothing new.
// When it started no run (refused, or sent without one), no run's end
// will take the next off the queue: the next goes now, and so on, so the
// words behind a refused one (and every later utterance behind those)
// never wait for good.
func (t *talk) sendQueued(w waiting) {
	for {
		runID, queued, err := t.deliver(w, true)
		if queued || t.ended() {
			return
		}
		ev := w.ev
		ev.Queued = false
		if err != nil {
			t.s.o.Logger.Warn("talk queued transcript not sent", "talk", t.id, "err", err)
			ev.Sent = false
			ev.failed(CodeSendFailed)
		} else {
			ev.RunID = runID
		}
		t.transcript(ev)
		if runID != "" {
			return // its run's end sends the next
		}
		t.mu.Lock()
		if t.activeRun != "" || len(t.queued) == 0 {
			t.mu.Unlock()
			return // a run that started meanwhile sends the next as it ends
		}
		w = t.queued[0]
		t.queued = t.queued[1:]
		t.mu.Unlock()
	}
}

func (t *talk) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// interrupt: the person spoke over the voice. The reply (replyID, or the
// one speaking) is not spoken further, R {interrupted} goes at once, and
// by the setting the run is cancelled or left to finish unspoken.
func (t *talk) interrupt(replyID string) {
	t.mu.Lock()
	if replyID == "" {
		replyID = t.speaking
		if replyID == "" {
			replyID = t.activeRun
		}
	}
	r := t.replies[replyID]
	if r == nil && replyID != "" && replyID == t.activeRun {
		r = &reply{}
		t.replies[replyID] = r
	}
	already := r == nil || r.interrupted
	if r != nil {
		r.interrupted = true
		if r.ended {
			// Its end is taken off the queue below and no run event
			// will come for it: nothing else would remove it. A
			// sentence of it being spoken is not sent (sendSpoken).
			delete(t.replies, replyID)
		}
	}
	if t.speaking == replyID && t.speakCancel != nil {
		t.speakCancel()
	}
	kept := t.speakQ[:0]
	for _, it := range t.speakQ {
		if it.replyID != replyID {
			kept = append(kept, it)
		}
	}
	t.speakQ = kept
	active := t.activeRun == replyID
	profileID, sessionID := t.profileID, t.sessionID
	t.mu.Unlock()
	if already {
		return
	}
	// After the mark: an S of this reply is either out before this R or
	// not sent at all (speakPart checks the mark under sendMu).
	t.sendMu.Lock()
	t.send(JSONMessage(MsgReplyEnd, ReplyEnd{ReplyID: replyID, Interrupted: true}))
	t.sendMu.Unlock()
	if active && t.settings.Interrupt == InterruptCancel {
		if _, err := t.s.o.Chat.Cancel(profileID, sessionID, replyID); err != nil {
			t.s.o.Logger.Warn("talk cancel failed", "talk", t.id, "run", replyID, "err", err)
		}
	}
	t.state(t.restState())
}

// command applies a voice command and speaks its confirmation.
func (t *talk) command(kind, lang, utteranceID string) *VoiceCommand {
	t.mu.Lock()
	vc := &VoiceCommand{Kind: kind}
	// A step within the provider's range, clamped at its ends; applied
	// only when the speed the voice speaks at changed.
	lo, hi := SpeedRange(t.settings.TTS.Provider)
	switch kind {
	case CommandSlower, CommandFaster:
		next := t.speed - SpeedStep
		if kind == CommandFaster {
			next = t.speed + SpeedStep
		}
		next = min(max(next, lo), hi)
		vc.Applied = math.Abs(next-t.speed) > 1e-9
		t.speed = next
	case CommandVoice:
		t.voice = NextVoice(t.settings.TTS.Provider, t.voice)
		vc.Applied = true
	}
	vc.Voice, vc.Speed = t.voice, t.speed
	replyID := "cmd-" + utteranceID
	t.speakQ = append(t.speakQ, speakItem{replyID: replyID, text: confirmation(kind, lang, vc.Applied)}, speakItem{replyID: replyID, end: true})
	t.replies[replyID] = &reply{ended: true}
	t.mu.Unlock()
	t.poke()
	return vc
}

// speaker speaks the queued sentences in order, one at a time.
func (t *talk) speaker() {
	synth := t.synth()
	for {
		t.mu.Lock()
		var it speakItem
		ok := len(t.speakQ) > 0
		if ok {
			it = t.speakQ[0]
			t.speakQ = t.speakQ[1:]
		}
		t.mu.Unlock()
		if !ok {
			select {
			case <-t.done:
				return
			case <-t.wake:
				continue
			}
		}
		if it.end {
			t.mu.Lock()
			delete(t.replies, it.replyID)
			rest := len(t.speakQ) == 0 && t.activeRun == ""
			t.mu.Unlock()
			t.send(JSONMessage(MsgReplyEnd, ReplyEnd{ReplyID: it.replyID}))
			if rest {
				t.state(t.restState())
			}
			continue
		}
		t.state(StateSpeaking)
		if synth == nil || t.deviceVoice(it.replyID) {
			t.say(t.ctx, it)
			continue
		}
		t.speak(synth, it)
	}
}

// deviceVoice reports whether the speech server failed a sentence of
// replyID already: the rest of the reply is said by the page's voice.
func (t *talk) deviceVoice(replyID string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.replies[replyID]
	return r != nil && r.deviceVoice
}

// say sends a sentence as T for the page's speechSynthesis, once the page
// has taken all but MaxSpeechQueued bytes (drained: a page that reads
// nothing is ended slow_reader as with S audio, rather than its channel's
// queue growing with every answer); ctx ends the wait (the talk's end,
// and from speak the reply's interrupt: a sentence of an interrupted
// reply is not sent either way, sendSpoken).
func (t *talk) say(ctx context.Context, it speakItem) {
	if !t.drained(ctx) {
		return
	}
	t.mu.Lock()
	rate, voice := t.speed, t.voice
	t.mu.Unlock()
	t.sendSpoken(it.replyID, JSONMessage(MsgSay, Say{ReplyID: it.replyID, Seq: it.seq, Text: it.text, Lang: DetectLang(it.text), Rate: rate, Voice: voice}))
}

// drained waits until the page has taken all but MaxSpeechQueued bytes of
// what was sent (true); false when the reply was interrupted (ctx) or the
// talk ended, as slow_reader when the page left it waiting SpeechStall.
func (t *talk) drained(ctx context.Context) bool {
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	if conn == nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, t.s.o.SpeechStall)
	defer cancel()
	err := conn.WaitBuffered(wctx, MaxSpeechQueued)
	switch {
	case err == nil:
		return true
	case ctx.Err() != nil:
		return false
	case errors.Is(err, context.DeadlineExceeded):
		t.s.o.Logger.Warn("talk page not reading", "talk", t.id, "queued_limit", MaxSpeechQueued)
		t.end(ReasonSlowReader, false)
	default:
		t.end(ReasonConnectionGone, false)
	}
	return false
}

// sendSpoken sends an S or T of replyID unless the reply was interrupted
// (marked, or already removed: a reply is in t.replies until its end is
// spoken, so a sentence of one gone was interrupted); false when it was
// not sent.
func (t *talk) sendSpoken(replyID string, b []byte) bool {
	t.sendMu.Lock()
	defer t.sendMu.Unlock()
	t.mu.Lock()
	r := t.replies[replyID]
	stopped := r == nil || r.interrupted
	t.mu.Unlock()
	return !stopped && t.send(b)
}

// speak synthesises a sentence and sends its audio as S parts as the
// server delivers it; a failed synthesis is sent as T instead.
func (t *talk) speak(synth Synth, it speakItem) {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	t.mu.Lock()
	t.speaking, t.speakCancel = it.replyID, cancel
	v := Voice{Name: t.voice, Speed: t.speed}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.speaking, t.speakCancel = "", nil
		t.mu.Unlock()
	}()
	a, err := synth.Synthesize(ctx, it.text, v)
	if err != nil {
		if ctx.Err() == nil {
			t.s.o.Logger.Warn("talk synthesis failed", "talk", t.id, "err", err)
			t.mu.Lock()
			if r := t.replies[it.replyID]; r != nil {
				r.deviceVoice = true
			}
			t.mu.Unlock()
			t.say(ctx, it)
		}
		return
	}
	defer a.Body.Close()
	buf := make([]byte, SpeechPartBytes)
	part := 0
	for {
		n, rerr := io.ReadAtLeast(a.Body, buf, 1)
		if ctx.Err() != nil {
			return // interrupted: nothing more of this reply
		}
		last := rerr != nil
		if n > 0 || last {
			h := SpeechHeader{ReplyID: it.replyID, Seq: it.seq, Part: part, Last: last, MimeType: a.MimeType, Text: it.text}
			if !t.drained(ctx) || !t.sendSpoken(it.replyID, SpeechMessage(h, buf[:n])) {
				return
			}
			part++
		}
		if last {
			if !errors.Is(rerr, io.EOF) {
				t.s.o.Logger.Warn("talk synthesis cut", "talk", t.id, "err", rerr)
			}
			return
		}
	}
}

// wavTone is a 1 s, 16 kHz, 16-bit mono WAV of a quiet 440 Hz tone
// (talk.test's audio for the transcription server).
func wavTone() []byte {
	const rate, n = 16000, 16000
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) } // a bytes.Buffer does not fail
	b.WriteString("RIFF")
	w(uint32(36 + n*2))
	b.WriteString("WAVEfmt ")
	w(uint32(16))
	w(uint16(1))
	w(uint16(1))
	w(uint32(rate))
	w(uint32(rate * 2))
	w(uint16(2))
	w(uint16(16))
	b.WriteString("data")
	w(uint32(n * 2))
	// A triangle wave (no math import needed): 440 Hz ≈ 36 samples a period.
	for i := 0; i < n; i++ {
		p := i % 36
		v := p
		if p >= 18 {
			v = 36 - p
		}
		w(int16((v - 9) * 300))
	}
	return b.Bytes()
}
