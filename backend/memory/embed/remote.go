package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
)

// Errors of the HTTP providers (ollama, openai). They are wrapped with the
// provider name and URL; test with errors.Is / errors.As.
var (
	// ErrInputTooLong: an input's chunk.EstimateTokens exceeds the
	// provider's MaxInputTokens. Nothing is truncated silently: callers
	// split their text to fit (the memory engine sizes chunks by it).
	ErrInputTooLong = errors.New("embed: input exceeds the provider's token limit")
	// ErrBadResponse: the provider answered 2xx with something that is not
	// a valid embedding response (malformed JSON, wrong vector count,
	// duplicate or missing index, NaN or Inf values).
	ErrBadResponse = errors.New("embed: malformed provider response")
	// ErrUnavailable: the provider failed (network error, timeout, 408,
	// 429 or 5xx) on every attempt, or did so less than
	// HTTPOptions.Cooldown ago and was not asked again. Retry later.
	ErrUnavailable = errors.New("embed: provider unavailable")
)

// StatusError is an HTTP error answer of a provider. Its message names the
// provider, the URL (never the API key) and the status, with a short excerpt
// of the body (the key redacted if the server echoes it).
type StatusError struct {
	Provider string
	URL      string
	Status   int
	Body     string // at most maxBodyExcerpt bytes, valid UTF-8
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("embed: %s POST %s: HTTP %d", e.Provider, e.URL, e.Status)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Retryable reports whether the status is worth retrying: 408, 429 and 5xx.
// Other 4xx answers (bad key, unknown model, input too long) are final.
func (e *StatusError) Retryable() bool {
	return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// Prober is implemented by embedders whose Dims may be unknown (0) until the
// provider has answered once: Probe embeds a short text to learn them and
// returns Dims. The memory engine calls it when it opens an index.
type Prober interface {
	Probe(ctx context.Context) (int, error)
}

// Defaults of HTTPOptions.
const (
	DefaultOllamaBaseURL = "http://127.0.0.1:11434"
	DefaultOllamaModel   = "nomic-embed-text"
	DefaultOpenAIBaseURL = "https://api.openai.com/v1"
	DefaultOpenAIModel   = "text-embedding-3-small"
	// DefaultMaxInputTokens is conservative on purpose: many local
	// embedding models (and llama.cpp servers started with default
	// settings) accept 512 tokens; the estimate is not the model's
	// tokenizer. Raise it in config for long-context models (bge-m3: 8192).
	DefaultMaxInputTokens = 512
	DefaultBatchTokens    = 8192
	DefaultMaxBatch       = 64
	DefaultTimeout        = 30 * time.Second
	DefaultRetries        = 3
	DefaultBackoff        = 500 * time.Millisecond
	DefaultMaxBackoff     = 8 * time.Second
	DefaultMaxRetryAfter  = 30 * time.Second
	DefaultCooldown       = 5 * time.Second
	// maxBodyExcerpt caps the body quoted in a StatusError.
	maxBodyExcerpt = 300
	// maxResponseBytes caps a response body read (vectors for a full batch
	// of 64 inputs × 4096 dims as JSON stay well below it).
	maxResponseBytes = 64 << 20
	// probeText is what Probe embeds.
	probeText = "dimension probe"
)

// HTTPOptions configure the HTTP providers (NewOllama, NewOpenAI). Zero
// values mean the documented defaults.
type HTTPOptions struct {
	// BaseURL is the API root: ollama default DefaultOllamaBaseURL (requests
	// go to BaseURL+"/api/embed"); openai default DefaultOpenAIBaseURL, which
	// includes the version (requests go to BaseURL+"/embeddings"). A
	// trailing slash is ignored.
	BaseURL string
	// Model is the provider's model name: default DefaultOllamaModel or
	// DefaultOpenAIModel.
	Model string
	// APIKey is sent as "Authorization: Bearer <key>" (openai only; never
	// logged or put into an error).
	APIKey string
	// Dims is the expected vector length. 0 means "learn it from the first
	// answer" (Dims() returns 0 until then; see Probe). Vectors of another
	// length are ErrDimsMismatch.
	Dims int
	// SendDimensions sends "dimensions": Dims in openai requests (models
	// that can shorten their vectors, e.g. text-embedding-3-*). Requires
	// Dims > 0. Ignored by ollama.
	SendDimensions bool
	// MaxInputTokens is the largest chunk.EstimateTokens of one input;
	// default DefaultMaxInputTokens (512). Longer inputs are ErrInputTooLong.
	MaxInputTokens int
	// BatchTokens and MaxBatch bound one request: the sum of the inputs'
	// token estimates (default 8192) and their number (default 64). Embed
	// splits larger calls into several requests.
	BatchTokens int
	MaxBatch    int
	// Timeout bounds each HTTP request (one attempt); default 30 s.
	Timeout time.Duration
	// Retries is the number of attempts after the first for network
	// errors, timeouts, 408, 429 and 5xx; default 3; negative: none. Other
	// 4xx answers are never retried.
	Retries int
	// Backoff is the wait before the first retry, doubled for each further
	// one up to MaxBackoff (defaults 500 ms and 8 s), with jitter (each wait
	// is uniform in [w/2, w]). A Retry-After header (seconds or HTTP date)
	// replaces the wait, capped at MaxRetryAfter (default 30 s).
	Backoff       time.Duration
	MaxBackoff    time.Duration
	MaxRetryAfter time.Duration
	// Cooldown: after a call failed with ErrUnavailable, calls within
	// Cooldown fail at once with ErrUnavailable instead of waiting for the
	// provider again (a search then falls back to keywords without delay);
	// default 5 s; negative: no cooldown.
	Cooldown time.Duration
	// HTTPClient sends the requests; default a client without overall
	// timeout (Timeout applies per request).
	HTTPClient *http.Client
	// Logger receives retry warnings; default slog.Default().
	Logger *slog.Logger
}

// wireAPI is what differs between providers: the request body and the
// decoding of the answer.
type wireAPI interface {
	path() string
	body(model string, inputs []string, o *HTTPOptions) any
	// decode returns the vectors in input order.
	decode(data []byte, n int) ([][]float64, error)
}

// client is the HTTP embedder shared by Ollama and OpenAI.
type client struct {
	provider string
	url      string
	opts     HTTPOptions
	api      wireAPI
	log      *slog.Logger
	dims     atomic.Int64

	mu        sync.Mutex
	downUntil time.Time
	downErr   error
}

func newClient(provider, defBase, defModel string, api wireAPI, o HTTPOptions) (*client, error) {
	if o.BaseURL == "" {
		o.BaseURL = defBase
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if !strings.HasPrefix(o.BaseURL, "http://") && !strings.HasPrefix(o.BaseURL, "https://") {
		return nil, fmt.Errorf("embed: %s: base URL %q must start with http:// or https://", provider, o.BaseURL)
	}
	if o.Model == "" {
		o.Model = defModel
	}
	if o.Dims < 0 {
		return nil, fmt.Errorf("embed: %s: dims %d is negative", provider, o.Dims)
	}
	if o.SendDimensions && o.Dims == 0 {
		return nil, fmt.Errorf("embed: %s: SendDimensions needs Dims > 0", provider)
	}
	orDefault(&o.MaxInputTokens, DefaultMaxInputTokens)
	orDefault(&o.BatchTokens, DefaultBatchTokens)
	o.BatchTokens = max(o.BatchTokens, o.MaxInputTokens)
	orDefault(&o.MaxBatch, DefaultMaxBatch)
	orDefault(&o.Timeout, DefaultTimeout)
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	orDefault(&o.Backoff, DefaultBackoff)
	orDefault(&o.MaxBackoff, DefaultMaxBackoff)
	orDefault(&o.MaxRetryAfter, DefaultMaxRetryAfter)
	if o.Cooldown == 0 {
		o.Cooldown = DefaultCooldown
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &client{
		provider: provider,
		url:      o.BaseURL + api.path(),
		opts:     o,
		api:      api,
		log:      o.Logger.With("component", "memory.embed", "provider", provider, "model", o.Model),
	}
	c.dims.Store(int64(o.Dims))
	return c, nil
}

// orDefault sets *p to def when it is zero or negative.
func orDefault[T int | time.Duration](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

// Provider returns "ollama" or "openai".
func (c *client) Provider() string { return c.provider }

// Model returns the configured model name.
func (c *client) Model() string { return c.opts.Model }

// Dims returns the configured vector length, or the one learned from the
// provider's first answer; 0 while unknown.
func (c *client) Dims() int { return int(c.dims.Load()) }

// MaxInputTokens returns HTTPOptions.MaxInputTokens (default 512).
func (c *client) MaxInputTokens() int { return c.opts.MaxInputTokens }

// URL returns the endpoint requests are sent to.
func (c *client) URL() string { return c.url }

// Probe embeds a short text (one request, with retries) and returns Dims.
func (c *client) Probe(ctx context.Context) (int, error) {
	if _, err := c.Embed(ctx, []string{probeText}); err != nil {
		return 0, err
	}
	return c.Dims(), nil
}

// Embed implements Embedder: inputs are sent in requests bounded by
// BatchTokens and MaxBatch, each retried as documented on HTTPOptions, and
// every returned vector is L2-normalised here (whatever the provider does).
// Blank inputs are not sent: they yield the zero vector. An input longer
// than MaxInputTokens is ErrInputTooLong before anything is sent.
func (c *client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var idx []int
	for i, t := range texts {
		if strings.TrimSpace(t) == "" {
			continue
		}
		if n := chunk.EstimateTokens(t); n > c.opts.MaxInputTokens {
			return nil, fmt.Errorf("embed: %s: input %d has about %d tokens, limit %d: %w", c.provider, i, n, c.opts.MaxInputTokens, ErrInputTooLong)
		}
		idx = append(idx, i)
	}
	for len(idx) > 0 {
		n, tokens := 0, 0
		for n < len(idx) && n < c.opts.MaxBatch {
			t := chunk.EstimateTokens(texts[idx[n]])
			if n > 0 && tokens+t > c.opts.BatchTokens {
				break
			}
			tokens += t
			n++
		}
		batch := make([]string, n)
		for j, i := range idx[:n] {
			batch[j] = texts[i]
		}
		vecs, err := c.embedBatch(ctx, batch)
		if err != nil {
			return nil, err
		}
		for j, i := range idx[:n] {
			out[i] = vecs[j]
		}
		idx = idx[n:]
	}
	d := c.Dims()
	for i := range out {
		if out[i] == nil {
			out[i] = make([]float32, d)
		}
	}
	return out, nil
}

// embedBatch sends one request, with retries and the cooldown.
func (c *client) embedBatch(ctx context.Context, batch []string) ([][]float32, error) {
	c.mu.Lock()
	until, downErr := c.downUntil, c.downErr
	c.mu.Unlock()
	if time.Now().Before(until) {
		return nil, fmt.Errorf("embed: %s at %s failed less than %v ago (%v): %w", c.provider, c.url, c.opts.Cooldown, downErr, ErrUnavailable)
	}
	body, err := json.Marshal(c.api.body(c.opts.Model, batch, &c.opts))
	if err != nil {
		return nil, fmt.Errorf("embed: %s: encode request: %w", c.provider, err)
	}
	var last error
	for attempt := 0; ; attempt++ {
		vecs, retryAfter, err := c.attempt(ctx, body, len(batch))
		if err == nil {
			c.mu.Lock()
			c.downUntil, c.downErr = time.Time{}, nil
			c.mu.Unlock()
			return vecs, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("embed: %s POST %s: %w", c.provider, c.url, ctx.Err())
		}
		var se *StatusError
		if errors.As(err, &se) && !se.Retryable() {
			return nil, err
		}
		if !errors.As(err, &se) && !isTransport(err) {
			return nil, err // bad response, wrong dims: retrying does not help
		}
		last = err
		if attempt >= c.opts.Retries {
			break
		}
		wait := c.backoff(attempt, retryAfter)
		c.log.Warn("embedding request failed; retrying", "url", c.url, "attempt", attempt+1, "wait_ms", wait.Milliseconds(), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("embed: %s POST %s: %w", c.provider, c.url, ctx.Err())
		}
	}
	if c.opts.Cooldown > 0 {
		c.mu.Lock()
		c.downUntil, c.downErr = time.Now().Add(c.opts.Cooldown), last
		c.mu.Unlock()
	}
	return nil, fmt.Errorf("%w after %d attempts: %w", ErrUnavailable, c.opts.Retries+1, last)
}

// transportError marks a failure to get an answer at all (connection
// refused, reset, per-request timeout): retryable.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

func isTransport(err error) bool {
	var te *transportError
	return errors.As(err, &te)
}

// backoff is the wait before retry number attempt+1.
func (c *client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, c.opts.MaxRetryAfter)
	}
	w := c.opts.Backoff << min(attempt, 20)
	if w <= 0 || w > c.opts.MaxBackoff {
		w = c.opts.MaxBackoff
	}
	return w/2 + rand.N(w/2+1)
}

// attempt is one HTTP request bounded by Timeout. retryAfter is the server's
// Retry-After (0 when absent).
func (c *client) attempt(ctx context.Context, body []byte, n int) (vecs [][]float32, retryAfter time.Duration, err error) {
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("embed: %s: %w", c.provider, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the message names the method and URL already
		}
		if rctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %v", c.opts.Timeout)
		}
		return nil, 0, &transportError{fmt.Errorf("embed: %s POST %s: %w", c.provider, c.url, c.redactErr(err))}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("answer not complete within %v", c.opts.Timeout)
		}
		return nil, 0, &transportError{fmt.Errorf("embed: %s POST %s: read answer: %w", c.provider, c.url, c.redactErr(err))}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, parseRetryAfter(resp.Header.Get("Retry-After")), &StatusError{
			Provider: c.provider, URL: c.url, Status: resp.StatusCode, Body: c.excerpt(data),
		}
	}
	if len(data) > maxResponseBytes {
		return nil, 0, fmt.Errorf("embed: %s POST %s: answer larger than %d bytes: %w", c.provider, c.url, maxResponseBytes, ErrBadResponse)
	}
	raw, err := c.api.decode(data, n)
	if err != nil {
		return nil, 0, fmt.Errorf("embed: %s POST %s: %w", c.provider, c.url, err)
	}
	vecs, err = c.check(raw)
	if err != nil {
		return nil, 0, fmt.Errorf("embed: %s POST %s: %w", c.provider, c.url, err)
	}
	return vecs, 0, nil
}

// check validates lengths and values against Dims (learning Dims from the
// first answer when unknown) and L2-normalises each vector.
func (c *client) check(raw [][]float64) ([][]float32, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	want := c.Dims()
	if want == 0 {
		if len(raw[0]) == 0 {
			return nil, fmt.Errorf("empty vector: %w", ErrBadResponse)
		}
		c.dims.CompareAndSwap(0, int64(len(raw[0])))
		want = c.Dims()
	}
	out := make([][]float32, len(raw))
	backing := make([]float32, len(raw)*want)
	for i, r := range raw {
		if len(r) != want {
			return nil, fmt.Errorf("vector %d has %d dims, want %d: %w", i, len(r), want, ErrDimsMismatch)
		}
		var sum float64
		for j, x := range r {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("vector %d holds %v at %d: %w", i, x, j, ErrBadResponse)
			}
			sum += x * x
		}
		v := backing[i*want : (i+1)*want : (i+1)*want]
		if sum > 0 && !math.IsInf(sum, 0) {
			inv := 1 / math.Sqrt(sum)
			for j, x := range r {
				v[j] = float32(x * inv)
			}
		}
		out[i] = v
	}
	return out, nil
}

// excerpt is the start of an error body, whitespace collapsed, the API key
// redacted, cut at a rune boundary.
func (c *client) excerpt(data []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(data), "\uFFFD")), " ")
	s = c.redact(s)
	if len(s) > maxBodyExcerpt {
		cut := maxBodyExcerpt
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func (c *client) redact(s string) string {
	if c.opts.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.opts.APIKey, "[redacted]")
}

func (c *client) redactErr(err error) error {
	if c.opts.APIKey == "" || !strings.Contains(err.Error(), c.opts.APIKey) {
		return err
	}
	return errors.New(c.redact(err.Error()))
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
