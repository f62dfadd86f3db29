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
// object with text. The message says which URL and what status.
var ErrSTT = errors.New("transcription failed")

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
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	h := make(map[string][]string)
	h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename=%q`, name)}
	h["Content-Type"] = []string{mimeType}
	fw, err := w.CreatePart(h)
	if err != nil {
		return Transcript{}, 0, fmt.Errorf("%w: %s: %w", ErrSTT, url, err)
	}
	_, _ = fw.Write(audio) // a bytes.Buffer does not fail
	_ = w.WriteField("model", c.Model)
	_ = w.WriteField("response_format", format)
	if language != "" {
		_ = w.WriteField("language", language)
	}
	if err := w.Close(); err != nil {
		return Transcript{}, 0, fmt.Errorf("%w: %s: %w", ErrSTT, url, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
	if err != nil {
		return Transcript{}, 0, fmt.Errorf("%w: %s: %w", ErrSTT, url, err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := httpClient(c.HTTP).Do(req)
	if err != nil {
		return Transcript{}, 0, fmt.Errorf("%w: the transcription server at %s could not be reached: %w", ErrSTT, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSTTAnswer+1))
	if err != nil {
		return Transcript{}, resp.StatusCode, fmt.Errorf("%w: reading the answer of %s: %w", ErrSTT, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Transcript{}, resp.StatusCode, fmt.Errorf("%w: the transcription server at %s answered %s: %s", ErrSTT, url, resp.Status, snippet(data))
	}
	if len(data) > maxSTTAnswer {
		return Transcript{}, resp.StatusCode, fmt.Errorf("%w: the answer of %s is over %d bytes", ErrSTT, url, maxSTTAnswer)
	}
	var got struct {
		Text     *string `json:"text"`
		Language string  `json:"language"`
	}
	if err := json.Unmarshal(data, &got); err != nil || got.Text == nil {
		return Transcript{}, resp.StatusCode, fmt.Errorf("%w: the transcription server at %s answered %s without a JSON text field: %s", ErrSTT, url, resp.Status, snippet(data))
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
