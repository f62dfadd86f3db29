package talk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/google/uuid"
)

// Methods and events (docs/PROTOCOL.md "Talk"; who may call each is in
// "Who may call").
const (
	MethodOpen  = "talk.open"
	MethodOffer = "talk.offer"
	MethodClose = "talk.close"
	MethodTest  = "talk.test"
	// EventTranscript goes to the talk's connection: TranscriptEvent.
	EventTranscript = "talk.transcript"
	// EventState goes to the talk's connection: {talkId, state}.
	EventState = "talk.state"
	// EventEnded goes to the talk's connection: {talkId, reason}.
	EventEnded = "talk.ended"
	// UtteranceCommand is the command of a kept utterance's sidecar in
	// the media store.
	UtteranceCommand = "talk.utterance"
	// ChannelLabel is the talk's data channel label.
	ChannelLabel = "atrium-talk"
	// CodeNoSTT: talk.open with no transcription server configured.
	CodeNoSTT = "TALK_NO_STT"
)

// Codes of a failed utterance (talk.transcript's errorCode, its error the
// fixed sentence ErrorText gives) and of talk.test's failures (its code).
// A server's own words never reach the page: they are logged.
const (
	// CodeSTTFailed: the transcription server refused or answered
	// something else than a transcript.
	CodeSTTFailed = "TALK_STT_FAILED"
	// CodeSTTUnreachable: the transcription server could not be reached
	// (refused, timed out, DNS): not running, or the address is wrong.
	CodeSTTUnreachable = "TALK_STT_UNREACHABLE"
	// CodeTTSFailed: talk.test's speech server failed.
	CodeTTSFailed = "TALK_TTS_FAILED"
	// CodeNoAudio: an utterance ended with no audio.
	CodeNoAudio = "TALK_NO_AUDIO"
	// CodeSTTBusy: maxQueued utterances waited already; this one was
	// dropped.
	CodeSTTBusy = "TALK_STT_BUSY"
	// CodeSendFailed: the transcript could not be sent as the person's
	// message (chat.send refused it).
	CodeSendFailed = "TALK_SEND_FAILED"
	// CodeQueueFull: maxWaitingSends transcripts already wait for the
	// session's answer (interrupt "queue"); this one was not sent.
	CodeQueueFull = "TALK_QUEUE_FULL"
)

// ErrorText is the fixed English sentence of an utterance's error code
// (the page words it by the code, in English or Chinese).
func ErrorText(code string) string {
	switch code {
	case CodeSTTFailed:
		return "the transcription server could not transcribe the utterance"
	case CodeSTTUnreachable:
		return "the transcription server could not be reached"
	case CodeNoAudio:
		return "the utterance carried no audio"
	case CodeSTTBusy:
		return fmt.Sprintf("%d utterances are waiting for the transcription server; this one was dropped", maxQueued)
	case CodeSendFailed:
		return "the transcript could not be sent as a message"
	case CodeQueueFull:
		return fmt.Sprintf("%d transcripts already wait for the current answer; this one was not sent", maxWaitingSends)
	}
	return "the utterance failed"
}

// Reasons of talk.ended (and of X sent by the gateway).
const (
	ReasonClosed         = "closed"          // talk.close, or the page's X
	ReasonTooLong        = "too_long"        // an utterance over Limits.MaxUtteranceMs
	ReasonTooLarge       = "too_large"       // an utterance over MaxUtteranceBytes, or a chunk over MaxChunkBytes
	ReasonIdle           = "idle"            // no audio for Options.IdleTimeout
	ReasonBadStream      = "bad_stream"      // an unknown type, out-of-order seq, audio outside an utterance, bad JSON
	ReasonConnectionGone = "connection_gone" // the WebSocket or the channel closed (or never opened)
	ReasonShutdown       = "shutdown"        // the gateway is stopping
	ReasonSlowReader     = "slow_reader"     // the page left over MaxSpeechQueued of speech (S audio or T text) unread for Options.SpeechStall
	// ReasonForbidden: the caller may no longer chat in the talk's profile
	// (a paired device's scope changed while the talk was open; MayChat is
	// asked again before each utterance is transcribed and each answer
	// is spoken).
	ReasonForbidden = "forbidden"
)

// States of talk.state.
const (
	StateListening    = "listening"
	StateTranscribing = "transcribing"
	StateThinking     = "thinking"
	StateSpeaking     = "speaking"
	StateIdle         = "idle"
)

// Limits are a talk's bounds, sent in talk.open's answer.
type Limits struct {
	MaxUtteranceMs    int64 `json:"maxUtteranceMs"`
	MaxUtteranceBytes int   `json:"maxUtteranceBytes"`
	MaxChunkBytes     int   `json:"maxChunkBytes"`
}

// Defaults of Options.
const (
	DefaultMaxUtteranceMs    = 60_000
	DefaultMaxUtteranceBytes = 2 << 20
	DefaultMaxChunkBytes     = 64 << 10
	DefaultMaxTalks          = 4
	DefaultMaxTalksPerConn   = 1
	DefaultMaxTalksPerDevice = 1
	DefaultIdleTimeout       = 10 * time.Minute
	DefaultOpenTimeout       = 30 * time.Second
	DefaultCheckInterval     = time.Second
	MaxOfferSDP              = 64 << 10
	// SpeechPartBytes caps the audio of one S message.
	SpeechPartBytes = 64 << 10
	// MaxSpeechQueued is the speech audio a talk's channel may hold unsent
	// before the next part waits (1 MiB, about a minute of speech at
	// 128 kbit/s); DefaultSpeechStall is Options.SpeechStall's default.
	MaxSpeechQueued    = 1 << 20
	DefaultSpeechStall = 30 * time.Second
	lingerStop         = time.Second // the gateway's X is flushed before the connection closes
	maxQueued          = 8           // transcriptions waiting, per talk
	maxWaitingSends    = 8           // transcripts waiting for the session's run to end, per talk
)

// Sentinel errors.
var (
	// ErrOptions: a required option is missing.
	ErrOptions = errors.New("talk: Options.Gateway, Accept, Chat and Settings are required")
	// ErrOffer: a malformed SDP offer (an Acceptor wraps it).
	ErrOffer = errors.New("invalid talk SDP offer")
	// ErrBusy: the session is still answering (a Chat wraps it).
	ErrBusy = errors.New("the session is still answering")
)

// Hooks receive what a talk's channel delivers (see rtc.StreamHooks).
type Hooks struct {
	Message func(b []byte)
	Closed  func()
}

// Conn is the gateway's side of a talk's channel.
type Conn interface {
	Send(b []byte) error
	// WaitBuffered blocks until at most max bytes are queued on the
	// channel (backpressure); errors: the channel closed, ctx's.
	WaitBuffered(ctx context.Context, max int) error
	Close()
}

// Acceptor answers a page's SDP offer from peer (its WebSocket's address)
// with a channel labelled ChannelLabel; errors wrap ErrOffer for a
// malformed offer. The wiring implements it with rtc.AcceptStream.
type Acceptor func(ctx context.Context, peer net.IP, offerSDP string, h Hooks) (Conn, string, error)

// Message is a transcript sent as the person's chat message.
type Message struct {
	ProfileID, SessionID, ConversationID, Text string
	// Meta is the stored message's meta: {"talk": {utteranceId,
	// durationMs, mediaId?}}.
	Meta json.RawMessage
}

// Sent is what Chat.Send started.
type Sent struct {
	RunID, SessionID, UserMessageID string
}

// Chat is what talks need of the chat service (the wiring adapts
// chat.Service: Send as chat.send, Cancel as chat.cancel).
type Chat interface {
	// Send sends m as the person's message. Errors: ErrBusy (wrapped)
	// when the session is still answering, others as chat.send's.
	Send(ctx context.Context, m Message) (Sent, error)
	// Cancel cancels the session's run runID (chat.cancel).
	Cancel(profileID, sessionID, runID string) (bool, error)
}

// Run event kinds (RunEvent.Kind).
const (
	RunStarted = "started"
	RunDelta   = "delta"
	RunEnded   = "ended"
)

// RunEvent is a chat run's event as the wiring forwards it (chat.thinking
// → RunStarted, chat.chunk → RunDelta, chat.final/.cancelled/.error →
// RunEnded; heartbeat runs are not forwarded).
type RunEvent struct {
	Kind                        string
	RunID, ProfileID, SessionID string
	Delta                       string
}

// Auditor records one decision (*audit.Log).
type Auditor interface {
	Record(e audit.Entry) error
}

// Options configure a Service. Zero values take the defaults named.
type Options struct {
	Gateway *gateway.Server // required
	Accept  Acceptor        // required
	Chat    Chat            // required
	// Settings returns config.json's talk block as it is now (read at
	// each talk.open and talk.test); required.
	Settings func() Settings
	// MayChat decides whether the caller may chat with profileID (the
	// rule of chat.send on that connection); nil allows. Its error is
	// returned as is (the wiring's is FORBIDDEN and audited). It is asked
	// at talk.open and again, with talk.open's call, before each
	// utterance is transcribed and each answer is spoken: a refusal then
	// ends the talk (ReasonForbidden).
	MayChat func(ctx context.Context, c *gateway.Call, profileID string) error
	// Store keeps utterances' audio when talk.keepAudio is on (nil: not
	// kept).
	Store *media.Store
	// Audit records refusals (nil: none).
	Audit Auditor
	// MaxTalks (4) in all, MaxTalksPerConn (1) per connection,
	// MaxTalksPerDevice (1) per paired device over all its connections
	// (else one phone, opening a connection per talk, could hold every
	// talk and leave none for the person at the desktop or another phone).
	MaxTalks, MaxTalksPerConn, MaxTalksPerDevice int
	// Limits of an utterance (60 s, 2 MiB, 64 KiB chunks).
	Limits Limits
	// IdleTimeout ends a talk with no audio for this long (10 min).
	IdleTimeout time.Duration
	// OpenTimeout ends a talk whose channel is not open this long after
	// talk.open (30 s).
	OpenTimeout time.Duration
	// CheckInterval is how often the bounds are checked against Now (1 s).
	CheckInterval time.Duration
	// SpeechStall ends a talk (slow_reader) whose page leaves more than
	// MaxSpeechQueued bytes of speech unread this long (30 s): the speech
	// server's audio, and the sentences for the page's own voice, are sent
	// no faster than the page takes them.
	SpeechStall time.Duration
	// LeftoverTimeout bounds how long what the person said before a talk
	// ended (leftover.go) waits for its session to be free (10 min);
	// what still waits then is dropped, and logged.
	LeftoverTimeout time.Duration
	// SpeechStart bounds the wait for a speech server's answer to begin
	// (DefaultSpeechStart, 15 s); past it the sentence and the rest of its
	// answer go to the page's own voice.
	SpeechStart time.Duration
	// HTTP is the client for the speech servers (nil: DefaultHTTPTimeout).
	HTTP *http.Client
	// Now is the clock of the bounds (time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxTalks <= 0 {
		o.MaxTalks = DefaultMaxTalks
	}
	if o.MaxTalksPerConn <= 0 {
		o.MaxTalksPerConn = DefaultMaxTalksPerConn
	}
	if o.MaxTalksPerDevice <= 0 {
		o.MaxTalksPerDevice = DefaultMaxTalksPerDevice
	}
	if o.Limits.MaxUtteranceMs <= 0 {
		o.Limits.MaxUtteranceMs = DefaultMaxUtteranceMs
	}
	if o.Limits.MaxUtteranceBytes <= 0 {
		o.Limits.MaxUtteranceBytes = DefaultMaxUtteranceBytes
	}
	if o.Limits.MaxChunkBytes <= 0 {
		o.Limits.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.SpeechStall <= 0 {
		o.SpeechStall = DefaultSpeechStall
	}
	if o.SpeechStart <= 0 {
		o.SpeechStart = DefaultSpeechStart
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	if o.LeftoverTimeout <= 0 {
		o.LeftoverTimeout = DefaultLeftoverTimeout
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Service runs the gateway's talks. Safe for concurrent use.
type Service struct {
	o Options
	// ctx lives until Close: the work an ended talk still does
	// (leftover.go) stops with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	talks  map[string]*talk
	closed bool
	// free has a channel per "<profileId>/<sessionId>" that a leftover
	// waits on; it is closed when a run of that session ends.
	free map[string]chan struct{}
}

// New makes the service; Register adds its methods.
func New(o Options) (*Service, error) {
	if o.Gateway == nil || o.Accept == nil || o.Chat == nil || o.Settings == nil {
		return nil, ErrOptions
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{o: o.withDefaults(), ctx: ctx, cancel: cancel, talks: map[string]*talk{}, free: map[string]chan struct{}{}}, nil
}

// OpenParams are talk.open's params. SessionKey is "<profileId>/<sessionId>"
// (a Canvas sessionKey); with Profile set it may be the session id alone;
// an empty session id starts a new session (its id is in the answer).
type OpenParams struct {
	SessionKey     string `json:"sessionKey"`
	Profile        string `json:"profile,omitempty"`
	ConversationID string `json:"conversationId,omitempty"`
	Mode           string `json:"mode"`           // "ptt" or "continuous"
	Lang           string `json:"lang,omitempty"` // "auto" (default), "en", "zh"
}

// OpenResult is talk.open's answer.
type OpenResult struct {
	TalkID     string     `json:"talkId"`
	SessionKey string     `json:"sessionKey"`
	Mode       string     `json:"mode"`
	Lang       string     `json:"lang"`
	STT        STTInfo    `json:"stt"`
	TTS        TTSInfo    `json:"tts"`
	Interrupt  string     `json:"interrupt"`
	Limits     Limits     `json:"limits"`
	Continuous Continuous `json:"continuous"`
}

// STTInfo names the transcription server's kind and model.
type STTInfo struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// TTSInfo is the voice in use.
type TTSInfo struct {
	Provider string  `json:"provider"`
	Voice    string  `json:"voice"`
	Speed    float64 `json:"speed"`
	MimeType string  `json:"mimeType,omitempty"`
}

func (p *OpenParams) check() (profileID, sessionID string, err error) {
	bad := func(format string, a ...any) (string, string, error) {
		return "", "", gateway.Errorf(gateway.CodeInvalidRequest, "talk.open: "+format, a...)
	}
	switch p.Mode {
	case "ptt", "continuous":
	default:
		return bad("mode must be ptt or continuous")
	}
	switch p.Lang {
	case "":
		p.Lang = "auto"
	case "auto", "en", "zh":
	default:
		return bad("lang must be auto, en or zh")
	}
	profileID, sessionID, ok := strings.Cut(p.SessionKey, "/")
	if !ok {
		profileID, sessionID = p.Profile, p.SessionKey
	} else if p.Profile != "" && p.Profile != profileID {
		return bad("profile %q differs from the sessionKey's %q", p.Profile, profileID)
	}
	if profileID == "" {
		return bad("sessionKey must be <profileId>/<sessionId> (or give profile)")
	}
	if !validID(profileID) || (sessionID != "" && !validID(sessionID)) || (p.ConversationID != "" && !validID(p.ConversationID)) {
		return bad("profile, session and conversation ids may only hold letters, digits and . _ : - (at most 128)")
	}
	if sessionID == "" {
		sessionID = uuid.NewString()
	}
	return profileID, sessionID, nil
}

// validID is chat's rule for client-chosen ids.
func validID(id string) bool {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':') {
			return false
		}
	}
	return true
}

func (s *Service) audit(c *gateway.Call, target string, allowed bool, reason string) {
	if s.o.Audit == nil {
		return
	}
	res := audit.Denied
	if allowed {
		res = audit.Allowed
	}
	role := c.Principal.Key()
	if c.Principal.Class() == gateway.Admin {
		role = "admin"
	}
	if err := s.o.Audit.Record(audit.Entry{Operation: c.Method, Role: role, Target: target, Result: res, Reason: reason, IP: c.RemoteIP}); err != nil {
		s.o.Logger.Warn("talk audit not recorded", "op", c.Method, "err", err)
	}
}

// NoSTTError is talk.open's answer when no transcription server is set.
func NoSTTError(method string) *gateway.Error {
	return &gateway.Error{Code: CodeNoSTT, Details: map[string]any{"setting": "talk.stt"},
		Message: method + ": no speech-to-text server is set: add one in Settings → Talk (talk.stt.baseUrl, an OpenAI-compatible /v1/audio/transcriptions server such as whisper.cpp's)"}
}

// Open serves talk.open. Errors: INVALID_REQUEST, TALK_NO_STT, FORBIDDEN
// (MayChat's), UNAVAILABLE (retryable: too many talks; the gateway is
// stopping).
func (s *Service) Open(ctx context.Context, c *gateway.Call, p OpenParams) (OpenResult, error) {
	profileID, sessionID, err := p.check()
	if err != nil {
		return OpenResult{}, err
	}
	if s.o.MayChat != nil {
		if err := s.o.MayChat(ctx, c, profileID); err != nil {
			return OpenResult{}, err
		}
	}
	raw := s.o.Settings()
	if raw.STT.BaseURL == "" {
		return OpenResult{}, NoSTTError(MethodOpen)
	}
	st := raw.WithDefaults()
	t := newTalk(s, c.ConnID, profileID, sessionID, p, st)
	t.device = c.Principal.Device
	t.caller = *c
	s.mu.Lock()
	perConn, perDevice := 0, 0
	for _, o := range s.talks {
		if o.connID == c.ConnID {
			perConn++
		}
		if t.device != "" && o.device == t.device {
			perDevice++
		}
	}
	switch {
	case s.closed:
		s.mu.Unlock()
		return OpenResult{}, gateway.Errorf(gateway.CodeUnavailable, "talk.open: the gateway is stopping")
	case perConn >= s.o.MaxTalksPerConn:
		s.mu.Unlock()
		return OpenResult{}, &gateway.Error{Code: gateway.CodeUnavailable, Retryable: true,
			Message: fmt.Sprintf("talk.open: this connection has a talk open already (at most %d); close it first", s.o.MaxTalksPerConn)}
	case perDevice >= s.o.MaxTalksPerDevice:
		s.mu.Unlock()
		return OpenResult{}, &gateway.Error{Code: gateway.CodeUnavailable, Retryable: true,
			Message: fmt.Sprintf("talk.open: this device has a talk open already (at most %d, over all its connections); close it first", s.o.MaxTalksPerDevice)}
	case len(s.talks) >= s.o.MaxTalks:
		s.mu.Unlock()
		return OpenResult{}, &gateway.Error{Code: gateway.CodeUnavailable, Retryable: true,
			Message: fmt.Sprintf("talk.open: %d talks are open, the most there may be; try again when one ends", len(s.talks))}
	}
	s.talks[t.id] = t
	s.mu.Unlock()
	go t.run()
	s.o.Logger.Info("talk opened", "talk", t.id, "profile", profileID, "mode", p.Mode, "tts", st.TTS.Provider)
	return OpenResult{TalkID: t.id, SessionKey: profileID + "/" + sessionID, Mode: p.Mode, Lang: p.Lang,
		STT: STTInfo{Provider: "openai", Model: st.STT.Model}, TTS: t.ttsInfo(), Interrupt: st.Interrupt,
		Limits: s.o.Limits, Continuous: st.Continuous}, nil
}

// talkOf is the caller's talk (its own connection's), or nil.
func (s *Service) talkOf(c *gateway.Call, id string) (*talk, bool) {
	s.mu.Lock()
	t := s.talks[id]
	s.mu.Unlock()
	if t == nil {
		return nil, false
	}
	return t, t.connID == c.ConnID
}

// Offer serves talk.offer {talkId, sdp}: only the talk's own connection,
// once. Errors: INVALID_REQUEST, NOT_FOUND, FORBIDDEN (audited),
// UNAVAILABLE.
func (s *Service) Offer(ctx context.Context, c *gateway.Call, id, sdp string) (string, error) {
	switch {
	case id == "" || sdp == "":
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "talk.offer: talkId and sdp are required")
	case len(sdp) > MaxOfferSDP:
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "talk.offer: sdp is %d bytes, at most %d", len(sdp), MaxOfferSDP)
	}
	t, own := s.talkOf(c, id)
	if t == nil {
		return "", gateway.Errorf(gateway.CodeNotFound, "talk.offer: no talk %q (unknown or ended)", id)
	}
	if !own {
		s.audit(c, "talk "+id, false, "another connection's talk")
		return "", gateway.Errorf(gateway.CodeForbidden, "talk.offer: talk %s belongs to another connection", id)
	}
	if !t.offered() {
		s.audit(c, "talk "+id, false, "a second offer")
		return "", gateway.Errorf(gateway.CodeForbidden, "talk.offer: talk %s has its channel already", id)
	}
	conn, answer, err := s.o.Accept(ctx, net.ParseIP(c.RemoteIP), sdp, Hooks{Message: t.message, Closed: func() { t.end(ReasonConnectionGone, false) }})
	if err != nil {
		t.end(ReasonConnectionGone, true)
		if errors.Is(err, ErrOffer) {
			return "", gateway.Errorf(gateway.CodeInvalidRequest, "talk.offer: %v", err)
		}
		s.o.Logger.Warn("talk offer not answered", "talk", id, "err", err)
		return "", gateway.Errorf(gateway.CodeUnavailable, "talk.offer: the gateway could not answer the offer")
	}
	if !t.attach(conn) {
		conn.Close()
		return "", gateway.Errorf(gateway.CodeUnavailable, "talk.offer: talk %s ended", id)
	}
	return answer, nil
}

// CloseTalk serves talk.close: false when there is no such talk of the
// caller's connection.
func (s *Service) CloseTalk(c *gateway.Call, id string) bool {
	t, own := s.talkOf(c, id)
	if t == nil || !own {
		return false
	}
	return t.end(ReasonClosed, true)
}

// Disconnected ends the talks of a closed connection (the gateway's
// OnClosed hook).
func (s *Service) Disconnected(ci gateway.ConnInfo) {
	for _, t := range s.snapshot() {
		if t.connID == ci.ConnID {
			t.end(ReasonConnectionGone, true)
		}
	}
}

// Close ends every talk (shutdown) and refuses new ones.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	for _, t := range s.snapshot() {
		t.end(ReasonShutdown, true)
	}
	s.cancel()
}

// Talks is the number of open talks.
func (s *Service) Talks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.talks)
}

func (s *Service) snapshot() []*talk {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*talk, 0, len(s.talks))
	for _, t := range s.talks {
		out = append(out, t)
	}
	return out
}

// ChatEvent takes a chat run's event (the wiring's chat Emit): the talks
// bound to its session speak the run's answer.
func (s *Service) ChatEvent(e RunEvent) {
	if e.Kind == RunEnded {
		s.sessionFreed(e.ProfileID, e.SessionID)
	}
	for _, t := range s.snapshot() {
		if t.follows(e) {
			t.runEvent(e)
		}
	}
}

// Register adds the methods to the gateway and declares the events.
func (s *Service) Register() {
	g := s.o.Gateway
	g.DeclareEvents(EventTranscript, EventState, EventEnded)
	g.Handle(MethodOpen, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p OpenParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.Open(ctx, c, p)
	})
	g.Handle(MethodOffer, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			TalkID string `json:"talkId"`
			SDP    string `json:"sdp"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		sdp, err := s.Offer(ctx, c, p.TalkID, p.SDP)
		if err != nil {
			return nil, err
		}
		return map[string]string{"sdp": sdp}, nil
	})
	g.Handle(MethodClose, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			TalkID string `json:"talkId"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return map[string]bool{"closed": s.CloseTalk(c, p.TalkID)}, nil
	})
	g.Handle(MethodTest, gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Kind string `json:"kind"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.Test(ctx, p.Kind)
	})
}
