package talk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// TestResult is talk.test's answer: Detail says in an English sentence
// what was checked, or which URL answered what status (never the server's
// own words: those are logged, "talk test failed"); Code is a failure's
// CodeSTTFailed or CodeTTSFailed, Status its HTTP status (0: none). The
// same facts come as fields, so a page words them in its own language
// (docs/PROTOCOL.md "Talk"): Why is a failure's ServerError.Why (or
// WhyEmpty), URL the endpoint asked (redacted), Provider and Model what
// was asked, Bytes and MimeType the audio a speech test got, Browser true
// when no speech server is set (the page's own voice speaks).
type TestResult struct {
	OK        bool   `json:"ok"`
	LatencyMs int64  `json:"latencyMs"`
	Detail    string `json:"detail"`
	Code      string `json:"code,omitempty"`
	Status    int    `json:"status,omitempty"`
	Why       string `json:"why,omitempty"`
	URL       string `json:"url,omitempty"`
	Provider  string `json:"provider,omitempty"`
	Model     string `json:"model,omitempty"`
	Bytes     int    `json:"bytes,omitempty"`
	MimeType  string `json:"mimeType,omitempty"`
	Browser   bool   `json:"browser,omitempty"`
}

// testFailed is talk.test's answer to a server's failure err (code
// CodeSTTFailed or CodeTTSFailed); the whole error goes to the log.
func (s *Service) testFailed(kind, code string, err error, ms int64) TestResult {
	s.o.Logger.Warn("talk test failed", "kind", kind, "err", err)
	r := TestResult{LatencyMs: ms, Code: code, Detail: PublicError(err, "the "+kind+" test failed")}
	var se *ServerError
	if errors.As(err, &se) {
		r.Status, r.Why, r.URL = se.Status, se.Why, se.URL
	}
	return r
}

// Test serves talk.test: kind "stt" posts a 1 s, 16 kHz WAV to the
// configured transcription server and checks its JSON text answer; "tts"
// synthesises "Atrium" and "你好" and checks for audio bytes with an audio
// type. A server's failure is {ok: false, detail}. Errors:
// INVALID_REQUEST (kind), TALK_NO_STT (stt with no server set).
func (s *Service) Test(ctx context.Context, kind string) (TestResult, error) {
	st := s.o.Settings()
	start := time.Now()
	ms := func() int64 { return time.Since(start).Milliseconds() }
	switch kind {
	case "stt":
		if st.STT.BaseURL == "" {
			return TestResult{}, NoSTTError(MethodTest)
		}
		st = st.WithDefaults()
		c := STTClient{BaseURL: st.STT.BaseURL, Model: st.STT.Model, APIKey: st.STT.APIKey, HTTP: s.o.HTTP}
		tr, err := c.Transcribe(ctx, wavTone(), "atrium-test.wav", "audio/wav", "")
		if err != nil {
			return s.testFailed(kind, CodeSTTFailed, err, ms()), nil
		}
		url := redactedURL(endpoint(st.STT.BaseURL, "/audio/transcriptions"))
		return TestResult{OK: true, LatencyMs: ms(), URL: url, Provider: "openai", Model: st.STT.Model,
			Detail: fmt.Sprintf("%s transcribed a 1 s test tone with model %s (text %q)", url, st.STT.Model, tr.Text)}, nil
	case "tts":
		st = st.WithDefaults()
		t := &talk{s: s, settings: st}
		synth := t.synth()
		if synth == nil {
			return TestResult{OK: true, LatencyMs: ms(), Browser: true, Provider: ProviderBrowser,
				Detail: "no speech server is set: the page speaks with the browser's own voice (speechSynthesis)"}, nil
		}
		v := Voice{Name: st.TTS.Voice, Speed: st.TTS.Speed}
		if st.TTS.Provider == ProviderElevenLabs {
			v.Name = st.TTS.ElevenLabs.VoiceID
		}
		total := 0
		mt := ""
		for _, text := range []string{"Atrium", "你好"} {
			n, typ, err := synthBytes(ctx, synth, st.TTS.BaseURL, text, v)
			if err != nil {
				return s.testFailed(kind, CodeTTSFailed, err, ms()), nil
			}
			if n == 0 {
				return TestResult{LatencyMs: ms(), Code: CodeTTSFailed, Why: WhyEmpty, URL: redactedURL(st.TTS.BaseURL), Provider: st.TTS.Provider,
					Detail: fmt.Sprintf("the speech server (%s) answered %q with no audio bytes", st.TTS.Provider, text)}, nil
			}
			total, mt = total+n, typ
		}
		return TestResult{OK: true, LatencyMs: ms(), URL: redactedURL(st.TTS.BaseURL), Provider: st.TTS.Provider, Bytes: total, MimeType: mt,
			Detail: fmt.Sprintf("the %s speech server at %s spoke \"Atrium\" and \"你好\": %d bytes of %s",
				st.TTS.Provider, redactedURL(st.TTS.BaseURL), total, mt)}, nil
	}
	return TestResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "talk.test: kind must be stt or tts")
}

// synthBytes synthesises text whole on the server at base and counts its
// audio bytes (at most 16 MiB are read).
func synthBytes(ctx context.Context, synth Synth, base, text string, v Voice) (int, string, error) {
	a, err := synth.Synthesize(ctx, text, v)
	if err != nil {
		return 0, "", err
	}
	defer a.Body.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(a.Body, 16<<20))
	if err != nil {
		return int(n), a.MimeType, &ServerError{Kind: ErrTTS, URL: redactedURL(base), Why: WhyRead, Status: http.StatusOK, Err: err}
	}
	return int(n), a.MimeType, nil
}
