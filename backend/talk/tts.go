package talk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrTTS marks a synthesis that failed: the server could not be reached,
// refused, or answered something that is not audio. The error is a
// *ServerError.
var ErrTTS = errors.New("speech synthesis failed")

// DefaultHTTPTimeout bounds one request to a speech server, its body
// included (60 s).
const DefaultHTTPTimeout = 60 * time.Second

// DefaultSpeechStart is Options.SpeechStart's default (15 s): a speech
// server must begin its answer (the response's head) this soon, else the
// sentence fails (WhySlow) and the rest of the answer goes to the page's
// own voice — a person should not wait the whole DefaultHTTPTimeout in
// silence for each sentence of a stuck server.
const DefaultSpeechStart = 15 * time.Second

// errSlowStart is the cause of a request cancelled by its start bound.
var errSlowStart = errors.New("no answer began within the start bound")

func httpClient(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return &http.Client{Timeout: DefaultHTTPTimeout}
}

// Voice is how a sentence is spoken: the voice's name or id and the speed
// (0.5…2).
type Voice struct {
	Name  string
	Speed float64
}

// Audio is a synthesis in progress: Body yields the audio as the server
// sends it (the caller closes it), MimeType its type.
type Audio struct {
	Body     io.ReadCloser
	MimeType string
}

// Synth turns text into speech. Implementations: OpenAISpeech,
// ElevenLabs.
type Synth interface {
	// Synthesize starts text's synthesis; the audio is read from the
	// answer as it arrives. Errors wrap ErrTTS (or ctx's).
	Synthesize(ctx context.Context, text string, v Voice) (Audio, error)
}

// OpenAISpeech is an OpenAI-compatible POST /v1/audio/speech (Kokoro,
// speaches, LocalAI, OpenAI).
type OpenAISpeech struct {
	BaseURL, Model, Format, APIKey string
	HTTP                           *http.Client
	// StartTimeout bounds the wait for the answer's head (0: only HTTP's
	// timeout); the audio then streams under HTTP's timeout alone.
	StartTimeout time.Duration
}

// formatMIME is the audio type of an OpenAI response_format.
var formatMIME = map[string]string{
	"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac",
	"wav": "audio/wav", "pcm": "audio/L16;rate=24000;channels=1",
}

// Synthesize implements Synth.
func (o OpenAISpeech) Synthesize(ctx context.Context, text string, v Voice) (Audio, error) {
	u := endpoint(o.BaseURL, "/audio/speech")
	body, _ := json.Marshal(map[string]any{ // plain values: no error
		"model": o.Model, "input": text, "voice": v.Name, "response_format": o.Format, "speed": v.Speed,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return Audio{}, &ServerError{Kind: ErrTTS, URL: redactedURL(u), Why: WhyRequest, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	return startAudio(o.HTTP, req, u, formatMIME[o.Format], o.APIKey, o.StartTimeout)
}

// ElevenLabs is ElevenLabs' streaming synthesis, POST
// {BaseURL}/v1/text-to-speech/{voice_id}/stream with the xi-api-key
// header; BaseURL is configurable so that a test server stands in.
type ElevenLabs struct {
	BaseURL, ModelID, APIKey string
	Stability                float64
	HTTP                     *http.Client
	// StartTimeout is as OpenAISpeech's.
	StartTimeout time.Duration
}

// Synthesize implements Synth (v.Name is the voice id; the speed is
// clamped to ElevenLabs' 0.7…1.2, SpeedRange).
func (e ElevenLabs) Synthesize(ctx context.Context, text string, v Voice) (Audio, error) {
	u := endpoint(e.BaseURL, "/text-to-speech/"+url.PathEscape(v.Name)+"/stream") + "?output_format=mp3_44100_128"
	body, _ := json.Marshal(map[string]any{ // plain values: no error
		"text": text, "model_id": e.ModelID,
		"voice_settings": map[string]any{"stability": e.Stability, "similarity_boost": 0.75, "speed": min(max(v.Speed, ElevenLabsMinSpeed), ElevenLabsMaxSpeed)},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return Audio{}, &ServerError{Kind: ErrTTS, URL: redactedURL(u), Why: WhyRequest, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "audio/mpeg")
	req.Header.Set("xi-api-key", e.APIKey)
	return startAudio(e.HTTP, req, u, "audio/mpeg", e.APIKey, e.StartTimeout)
}

// startAudio sends req and returns its body once the head says audio.
// fallback is the type of an answer labelled application/octet-stream;
// key, the request's API key, is redacted from a failure's Detail; start
// (when > 0) bounds the wait for the head: past it the request is
// cancelled and the error's Why is WhySlow.
func startAudio(c *http.Client, req *http.Request, u, fallback, key string, start time.Duration) (Audio, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	if start > 0 {
		timer := time.AfterFunc(start, func() { cancel(errSlowStart) })
		defer timer.Stop() // the head came (or the request failed): the body is not bound by start
	}
	resp, err := httpClient(c).Do(req.WithContext(ctx))
	if err != nil {
		why := WhyUnreachable
		if errors.Is(context.Cause(ctx), errSlowStart) && req.Context().Err() == nil {
			why, err = WhySlow, fmt.Errorf("%w (%s)", errSlowStart, start)
		}
		cancel(nil)
		return Audio{}, &ServerError{Kind: ErrTTS, URL: redactedURL(u), Why: why, Err: err}
	}
	// From here the body holds the request's context: closing it ends both.
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return Audio{}, &ServerError{Kind: ErrTTS, URL: redactedURL(u), Why: WhyStatus, Status: resp.StatusCode, Detail: redact(snippet(data), key)}
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	switch {
	case strings.HasPrefix(mt, "audio/"):
	case (mt == "application/octet-stream" || mt == "") && fallback != "":
		ct = fallback
	default:
		resp.Body.Close()
		return Audio{}, &ServerError{Kind: ErrTTS, URL: redactedURL(u), Why: WhyNotAudio, Status: resp.StatusCode, Detail: redact(fmt.Sprintf("Content-Type %q", ct), key)}
	}
	return Audio{Body: resp.Body, MimeType: ct}, nil
}

// cancelOnClose is a response body that releases its request's context
// when closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// voiceList is the voices a "change the voice" command steps through, by
// provider: OpenAI's six (Kokoro and speaches accept their names too),
// ElevenLabs' premade voice ids, and for the browser the page's voice
// index as a string ("" = the page's default voice for the language).
func voiceList(provider string) []string {
	switch provider {
	case ProviderOpenAI:
		return []string{"alloy", "echo", "fable", "onyx", "nova", "shimmer"}
	case ProviderElevenLabs:
		return []string{DefaultElevenLabsVoice, "EXAVITQu4vr4xnSDxMaL", "ErXwobaYiN019PxySR9N", "TxGEqnHWrfWFTfGW9XTX", "AZnzlk1XvdvUeBnXmlld"}
	}
	return []string{"", "1", "2", "3"}
}

// NextVoice is the voice after current in provider's list (the first when
// current is not in it).
func NextVoice(provider, current string) string {
	list := voiceList(provider)
	for i, v := range list {
		if v == current {
			return list[(i+1)%len(list)]
		}
	}
	return list[0]
}
