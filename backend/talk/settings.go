package talk

import (
	"errors"
	"fmt"
	"net/url"
)

// Settings is config.json's "talk" block (docs/PROTOCOL.md "Talk"). Zero
// values mean the defaults named on each field. Package config embeds it
// and calls Validate; secrets (apiKey) follow config's redaction.
type Settings struct {
	STT STTSettings `json:"stt"`
	TTS TTSSettings `json:"tts"`
	// Interrupt is what speaking during the voice does to the run:
	// InterruptCancel ("cancel", the default) or InterruptQueue.
	Interrupt string `json:"interrupt,omitempty"`
	// KeepAudio stores each transcribed utterance's audio in the media
	// store (command UtteranceCommand); off by default.
	KeepAudio bool `json:"keepAudio,omitempty"`
	// Continuous holds the page's voice-activity settings.
	Continuous Continuous `json:"continuous"`
}

// STTSettings is "talk.stt": an OpenAI-compatible transcription server.
// An empty BaseURL means no server: talk.open is TALK_NO_STT.
type STTSettings struct {
	// BaseURL is the server's root, http or https (e.g.
	// http://127.0.0.1:8000); "/v1/audio/transcriptions" is added (a
	// BaseURL ending in /v1 is used as is).
	BaseURL string `json:"baseUrl,omitempty"`
	// Model is the model field ("whisper-1").
	Model string `json:"model,omitempty"`
	// APIKey, when set, is sent as a bearer token.
	APIKey string `json:"apiKey"`
	// Language is "auto" (the default: the server detects) or "ui" (the
	// talk's language, from talk.open's lang, is sent).
	Language string `json:"language,omitempty"`
}

// TTSSettings is "talk.tts": where the voice comes from.
type TTSSettings struct {
	// Provider is ProviderOpenAI, ProviderElevenLabs, ProviderBrowser or
	// "" (= browser: the page speaks T messages with speechSynthesis).
	Provider string `json:"provider,omitempty"`
	// BaseURL: OpenAI-compatible server root (required for "openai");
	// ElevenLabs' API root (default https://api.elevenlabs.io).
	BaseURL string `json:"baseUrl,omitempty"`
	// Model is the OpenAI-compatible model ("tts-1").
	Model string `json:"model,omitempty"`
	// Voice is the OpenAI-compatible voice ("alloy"), or for the browser
	// a voice name the page may honour.
	Voice string `json:"voice,omitempty"`
	// Speed is 0.5…2 (0 = 1).
	Speed float64 `json:"speed,omitempty"`
	// Format is the OpenAI-compatible response_format ("mp3"; also opus,
	// aac, flac, wav, pcm).
	Format string `json:"format,omitempty"`
	// APIKey: bearer token (openai) or xi-api-key (elevenlabs).
	APIKey     string             `json:"apiKey"`
	ElevenLabs ElevenLabsSettings `json:"elevenlabs"`
}

// ElevenLabsSettings is "talk.tts.elevenlabs".
type ElevenLabsSettings struct {
	// VoiceID (default DefaultElevenLabsVoice, "Rachel").
	VoiceID string `json:"voiceId,omitempty"`
	// ModelID (default "eleven_multilingual_v2": English and Chinese).
	ModelID string `json:"modelId,omitempty"`
	// Stability is voice_settings.stability, 0…1 (nil = 0.5).
	Stability *float64 `json:"stability,omitempty"`
}

// Continuous is "talk.continuous": the page's voice-activity detection.
type Continuous struct {
	// SilenceMs ends an utterance after this much silence (800; 200…5000).
	SilenceMs int `json:"silenceMs,omitempty"`
	// MinSpeechMs is the speech needed to start one (300; 50…5000).
	MinSpeechMs int `json:"minSpeechMs,omitempty"`
}

// Providers of TTSSettings.Provider.
const (
	ProviderOpenAI     = "openai"
	ProviderElevenLabs = "elevenlabs"
	ProviderBrowser    = "browser"
)

// Interrupt settings.
const (
	InterruptCancel = "cancel"
	InterruptQueue  = "queue"
)

// Defaults of Settings.
const (
	DefaultSTTModel         = "whisper-1"
	DefaultTTSModel         = "tts-1"
	DefaultTTSVoice         = "alloy"
	DefaultTTSFormat        = "mp3"
	DefaultElevenLabsURL    = "https://api.elevenlabs.io"
	DefaultElevenLabsVoice  = "21m00Tcm4TlvDq8ikWAM" // "Rachel", one of ElevenLabs' premade voices
	DefaultElevenLabsModel  = "eleven_multilingual_v2"
	DefaultElevenLabsStable = 0.5
	DefaultSilenceMs        = 800
	DefaultMinSpeechMs      = 300
	MinSpeed, MaxSpeed      = 0.5, 2.0
	SpeedStep               = 0.25
	// ElevenLabsMinSpeed and ElevenLabsMaxSpeed bound ElevenLabs'
	// voice_settings.speed (its API refuses others).
	ElevenLabsMinSpeed, ElevenLabsMaxSpeed = 0.7, 1.2
)

// SpeedRange is the speeds provider speaks at: ElevenLabs 0.7…1.2, the
// others (OpenAI-compatible servers, the browser's speechSynthesis)
// MinSpeed…MaxSpeed. A talk's speed stays in it: a configured speed out of
// it is clamped, and "speak faster" at its top changes nothing and says so.
func SpeedRange(provider string) (lo, hi float64) {
	if provider == ProviderElevenLabs {
		return ElevenLabsMinSpeed, ElevenLabsMaxSpeed
	}
	return MinSpeed, MaxSpeed
}

// ErrSettings marks an invalid talk block; the message names the key.
var ErrSettings = errors.New("invalid talk settings")

// WithDefaults returns s with every unset field at its default.
func (s Settings) WithDefaults() Settings {
	if s.STT.Model == "" {
		s.STT.Model = DefaultSTTModel
	}
	if s.STT.Language == "" {
		s.STT.Language = "auto"
	}
	if s.TTS.Provider == "" {
		s.TTS.Provider = ProviderBrowser
	}
	if s.TTS.Model == "" {
		s.TTS.Model = DefaultTTSModel
	}
	if s.TTS.Voice == "" && s.TTS.Provider == ProviderOpenAI {
		s.TTS.Voice = DefaultTTSVoice
	}
	if s.TTS.Speed == 0 {
		s.TTS.Speed = 1
	}
	if s.TTS.Format == "" {
		s.TTS.Format = DefaultTTSFormat
	}
	if s.TTS.Provider == ProviderElevenLabs && s.TTS.BaseURL == "" {
		s.TTS.BaseURL = DefaultElevenLabsURL
	}
	if s.TTS.ElevenLabs.VoiceID == "" {
		s.TTS.ElevenLabs.VoiceID = DefaultElevenLabsVoice
	}
	if s.TTS.ElevenLabs.ModelID == "" {
		s.TTS.ElevenLabs.ModelID = DefaultElevenLabsModel
	}
	if s.TTS.ElevenLabs.Stability == nil {
		v := DefaultElevenLabsStable
		s.TTS.ElevenLabs.Stability = &v
	}
	if s.Interrupt == "" {
		s.Interrupt = InterruptCancel
	}
	if s.Continuous.SilenceMs == 0 {
		s.Continuous.SilenceMs = DefaultSilenceMs
	}
	if s.Continuous.MinSpeechMs == 0 {
		s.Continuous.MinSpeechMs = DefaultMinSpeechMs
	}
	return s
}

// Validate checks the block as written (before defaults). Errors wrap
// ErrSettings and name the key, e.g. "talk.tts.speed 3: want 0.5…2".
func (s Settings) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrSettings}, a...)...)
	}
	if err := checkURL(s.STT.BaseURL); err != nil {
		return bad("talk.stt.baseUrl %q: %v", redactedURL(s.STT.BaseURL), err)
	}
	switch s.STT.Language {
	case "", "auto", "ui":
	default:
		return bad("talk.stt.language %q: want auto or ui", s.STT.Language)
	}
	switch s.TTS.Provider {
	case "", ProviderBrowser, ProviderElevenLabs:
	case ProviderOpenAI:
		if s.TTS.BaseURL == "" {
			return bad("talk.tts.baseUrl is required with provider openai (the server's root, e.g. http://127.0.0.1:8880)")
		}
	default:
		return bad("talk.tts.provider %q: want openai, elevenlabs or browser", s.TTS.Provider)
	}
	if err := checkURL(s.TTS.BaseURL); err != nil {
		return bad("talk.tts.baseUrl %q: %v", redactedURL(s.TTS.BaseURL), err)
	}
	if s.TTS.Speed != 0 && (s.TTS.Speed < MinSpeed || s.TTS.Speed > MaxSpeed) {
		return bad("talk.tts.speed %v: want %v…%v", s.TTS.Speed, MinSpeed, MaxSpeed)
	}
	switch s.TTS.Format {
	case "", "mp3", "opus", "aac", "flac", "wav", "pcm":
	default:
		return bad("talk.tts.format %q: want mp3, opus, aac, flac, wav or pcm", s.TTS.Format)
	}
	if st := s.TTS.ElevenLabs.Stability; st != nil && (*st < 0 || *st > 1) {
		return bad("talk.tts.elevenlabs.stability %v: want 0…1", *st)
	}
	switch s.Interrupt {
	case "", InterruptCancel, InterruptQueue:
	default:
		return bad("talk.interrupt %q: want cancel or queue", s.Interrupt)
	}
	if v := s.Continuous.SilenceMs; v != 0 && (v < 200 || v > 5000) {
		return bad("talk.continuous.silenceMs %d: want 200…5000", v)
	}
	if v := s.Continuous.MinSpeechMs; v != 0 && (v < 50 || v > 5000) {
		return bad("talk.continuous.minSpeechMs %d: want 50…5000", v)
	}
	return nil
}

// redactedURL is raw for messages and logs, with any password, query and
// fragment replaced by "xxxxx" (a key may be in any of them; Validate
// refuses all three in a base URL) and a URL that does not parse not shown.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(not a URL)"
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery = "xxxxx"
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "xxxxx", ""
	}
	return u.Redacted()
}

func checkURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http or https URL")
	}
	if u.User != nil {
		return errors.New("a user name or password in the URL would be shown in Settings, errors and logs: put the key in apiKey instead")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		// The API's paths are added to the base, after any query; and a
		// key in a query would be shown like a password in the URL.
		return errors.New("a query or fragment (?… or #…) in the URL: the API's paths are added to it, and a key there would be shown in Settings, errors and logs; put the key in apiKey instead")
	}
	return nil
}
