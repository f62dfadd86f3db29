package talk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"unicode"
)

// ErrSTT marks a transcription that failed: the server could not be
// reached, refused the request or answered something else than a JSON
// object with text. The error is a *ServerError.
var ErrSTT = errors.New("transcription failed")

// What went wrong with a speech server (ServerError.Why).
const (
	WhyUnreachable = "unreachable" // no answer: refused, timed out, DNS
	WhyStatus      = "status"      // an HTTP status other than 200
	WhyRead        = "read"        // the answer broke off
	WhyTooLarge    = "too_large"   // the answer is over the bound
	WhyNotJSON     = "not_json"    // a transcription answer without a JSON text field
	WhyNotAudio    = "not_audio"   // a speech answer whose type is not audio
	WhyRequest     = "request"     // the request could not be made
	WhyEmpty       = "empty"       // a speech answer with no audio bytes (talk.test)
	WhySlow        = "slow"        // a speech answer that did not begin within Options.SpeechStart
)

// ServerError is a transcription or speech server's failure. Error()
// says all of it, the server's own words (Detail) included, for the
// gateway's log; Public() is the sentence a page or Settings may show:
// the URL (from config.json, its password never allowed) and the status,
// never the server's words, which may echo the request or a key.
type ServerError struct {
	// Kind is ErrSTT or ErrTTS.
	Kind error
	// URL is the endpoint asked (redacted), Why one of the Why* values,
	// Status the HTTP status (0 with no answer).
	URL, Why string
	Status   int
	// Detail is the start of the server's answer (at most 200 runes, the
	// client's API key replaced by "[redacted]") or "".
	Detail string
	// Err is the transport's error, if any.
	Err error
}

func (e *ServerError) server() string {
	if e.Kind == ErrTTS {
		return "the speech server"
	}
	return "the transcription server"
}

// Public is the error in a sentence without the server's words: which
// server, which URL, what status.
func (e *ServerError) Public() string {
	s := e.server() + " at " + e.URL
	switch e.Why {
	case WhyUnreachable:
		return s + " could not be reached"
	case WhyStatus:
		return fmt.Sprintf("%s answered HTTP %d (%s)", s, e.Status, http.StatusText(e.Status))
	case WhyRead:
		return s + " broke off its answer"
	case WhyTooLarge:
		return s + " answered more than the gateway reads"
	case WhyNotJSON:
		return s + " answered without a JSON text field"
	case WhyNotAudio:
		return s + " answered something that is not audio"
	case WhySlow:
		return s + " did not begin its answer in time (is its model still loading?)"
	}
	return s + " could not be asked"
}

func (e *ServerError) Error() string {
	s := e.Kind.Error() + ": " + e.Public()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap gives Kind and Err to errors.Is.
func (e *ServerError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// PublicError is err's sentence for a page: a *ServerError's Public(),
// else fallback (never err's own words).
func PublicError(err error, fallback string) string {
	var se *ServerError
	if errors.As(err, &se) {
		return se.Public()
	}
	return fallback
}

// redact replaces each non-empty secret in s by "[redacted]".
func redact(s string, secrets ...string) string {
	for _, k := range secrets {
		if k != "" {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	return s
}

// maxSTTAnswer caps a transcription server's answer (1 MiB).
const maxSTTAnswer = 1 << 20

// Transcript is what a transcription server heard.
type Transcript struct {
	Text string
	// Lang is "en", "zh", another ISO 639-1 code the server named, or ""
	// when the server named none (see DetectLang).
	Lang string
}

// STTClient posts audio to an OpenAI-compatible /v1/audio/transcriptions.
type STTClient struct {
	// BaseURL is the server's root (see STTSettings.BaseURL).
	BaseURL, Model, APIKey string
	// HTTP is the client (its Timeout bounds a request; nil: a client
	// with DefaultHTTPTimeout).
	HTTP *http.Client
}

// endpoint joins a server root and a /v1 path; a root that already ends in
// /v1 keeps it once.
func endpoint(base, path string) string {
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(base, "/v1")
	return base + "/v1" + path
}

// Transcribe sends audio (name is the multipart file name, its extension
// telling the server the container, e.g. "utterance.webm") with
// response_format verbose_json, and once more with json when the server
// refuses verbose_json (a 4xx). language "" lets the server detect.
// Errors wrap ErrSTT (or ctx's).
func (c STTClient) Transcribe(ctx context.Context, audio []byte, name, mimeType, language string) (Transcript, error) {
	tr, status, err := c.post(ctx, audio, name, mimeType, language, "verbose_json")
	if err != nil && status >= 400 && status < 500 && status != http.StatusUnauthorized && status != http.StatusForbidden {
		tr, _, err = c.post(ctx, audio, name, mimeType, language, "json")
	}
	return tr, err
}

func (c STTClient) post(ctx context.Context, audio []byte, name, mimeType, language, format string) (Transcript, int, error) {
	url := endpoint(c.BaseURL, "/audio/transcriptions")
	fail := func(why string, status int, body []byte, err error) (Transcript, int, error) {
		e := &ServerError{Kind: ErrSTT, URL: redactedURL(url), Why: why, Status: status, Err: err}
		if body != nil {
			e.Detail = redact(snippet(body), c.APIKey)
		}
		return Transcript{}, status, e
	}
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	h := make(map[string][]string)
	h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename=%q`, name)}
	h["Content-Type"] = []string{mimeType}
	fw, err := w.CreatePart(h)
	if err != nil {
		return fail(WhyRequest, 0, nil, err)
	}
	_, _ = fw.Write(audio) // a bytes.Buffer does not fail
	_ = w.WriteField("model", c.Model)
	_ = w.WriteField("response_format", format)
	if language != "" {
		_ = w.WriteField("language", language)
	}
	if err := w.Close(); err != nil {
		return fail(WhyRequest, 0, nil, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
	if err != nil {
		return fail(WhyRequest, 0, nil, err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := httpClient(c.HTTP).Do(req)
	if err != nil {
		return fail(WhyUnreachable, 0, nil, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSTTAnswer+1))
	if err != nil {
		return fail(WhyRead, resp.StatusCode, nil, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(WhyStatus, resp.StatusCode, data, nil)
	}
	if len(data) > maxSTTAnswer {
		return fail(WhyTooLarge, resp.StatusCode, nil, nil)
	}
	var got struct {
		Text     *string `json:"text"`
		Language string  `json:"language"`
	}
	if err := json.Unmarshal(data, &got); err != nil || got.Text == nil {
		return fail(WhyNotJSON, resp.StatusCode, data, nil)
	}
	text := strings.TrimSpace(*got.Text)
	lang := langCode(got.Language)
	if lang == "" {
		lang = DetectLang(text)
	}
	return Transcript{Text: text, Lang: lang}, resp.StatusCode, nil
}

// snippet is the start of a server's answer for an error message.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	if s == "" {
		return "(no body)"
	}
	return s
}

// langCode maps what Whisper servers name a language ("english",
// "chinese", "en", "zh") to ISO 639-1; "" when unknown.
func langCode(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "":
		return ""
	case "english":
		return "en"
	case "chinese", "mandarin", "cantonese":
		return "zh"
	}
	if len(s) == 2 {
		return s
	}
	if len(s) > 2 && s[2] == '-' { // zh-CN, en-US
		return s[:2]
	}
	return ""
}

// DetectLang is "zh" when text has Han characters, else "en".
func DetectLang(text string) string {
	for _, r := range text {
		if unicode.Is(unicode.Han, r) {
			return "zh"
		}
	}
	return "en"
}
