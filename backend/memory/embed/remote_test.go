package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
)

// fakeProvider is a real HTTP server speaking the ollama (/api/embed) or
// openai (/v1/embeddings) embedding API with scripted vectors: input text t
// gets vec(t) (not normalised, so that the client's normalisation shows).
// reply, when set, answers request number n (1-based) instead.
type fakeProvider struct {
	t     *testing.T
	kind  string // OllamaProvider or OpenAIProvider
	dims  int
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  []fakeRequest
	reply func(n int, w http.ResponseWriter, r *http.Request, inputs []string) bool
	// shuffle makes the openai answer list data in reverse order.
	shuffle bool
}

type fakeRequest struct {
	Model      string
	Inputs     []string
	Auth       string
	Truncate   *bool
	Dimensions int
}

func newFakeProvider(t *testing.T, kind string, dims int) *fakeProvider {
	f := &fakeProvider{t: t, kind: kind, dims: dims}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// baseURL is what HTTPOptions.BaseURL must be for this server.
func (f *fakeProvider) baseURL() string {
	if f.kind == OpenAIProvider {
		return f.srv.URL + "/v1"
	}
	return f.srv.URL
}

func (f *fakeProvider) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// vec is the scripted, unnormalised vector of a text: a function of its
// length and first byte, with a constant component so it is never zero.
func vec(text string, dims int) []float64 {
	v := make([]float64, dims)
	for i := range v {
		v[i] = float64((len(text)*(i+1)+int(text[0]))%7) + 1
	}
	return v
}

func (f *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	wantPath := "/api/embed"
	if f.kind == OpenAIProvider {
		wantPath = "/v1/embeddings"
	}
	if r.Method != http.MethodPost || r.URL.Path != wantPath {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var body struct {
		Model      string   `json:"model"`
		Input      []string `json:"input"`
		Truncate   *bool    `json:"truncate"`
		Dimensions int      `json:"dimensions"`
	}
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &body); err != nil || body.Model == "" || len(body.Input) == 0 {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, fakeRequest{Model: body.Model, Inputs: body.Input, Auth: r.Header.Get("Authorization"), Truncate: body.Truncate, Dimensions: body.Dimensions})
	n := len(f.reqs)
	reply := f.reply
	f.mu.Unlock()
	if reply != nil && reply(n, w, r, body.Input) {
		return
	}
	vecs := make([][]float64, len(body.Input))
	for i, s := range body.Input {
		vecs[i] = vec(s, f.dims)
	}
	f.write(w, vecs)
}

// write answers with vecs in the server's wire format.
func (f *fakeProvider) write(w http.ResponseWriter, vecs [][]float64) {
	w.Header().Set("Content-Type", "application/json")
	if f.kind == OllamaProvider {
		_ = json.NewEncoder(w).Encode(map[string]any{"model": "m", "embeddings": vecs})
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	items := make([]item, len(vecs))
	for i, v := range vecs {
		items[i] = item{"embedding", i, v}
	}
	if f.shuffle {
		slices.Reverse(items)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": items, "model": "m"})
}

// newFor builds the provider of f's kind with fast retries.
func (f *fakeProvider) newFor(o HTTPOptions) Embedder {
	f.t.Helper()
	o.BaseURL = f.baseURL()
	if o.Backoff == 0 {
		o.Backoff = time.Millisecond
	}
	if o.Cooldown == 0 {
		o.Cooldown = -1
	}
	var e Embedder
	var err error
	if f.kind == OllamaProvider {
		e, err = NewOllama(o)
	} else {
		e, err = NewOpenAI(o)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

var providers = []string{OllamaProvider, OpenAIProvider}

// sameDirection reports whether unit vector v is want scaled to unit length.
func sameDirection(v []float32, want []float64) bool {
	var n float64
	for _, x := range want {
		n += x * x
	}
	for j := range want {
		if math.Abs(float64(v[j])-want[j]/math.Sqrt(n)) > 1e-6 {
			return false
		}
	}
	return true
}

func TestHTTPProviderHappyPath(t *testing.T) {
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, 5)
			f.shuffle = true
			e := f.newFor(HTTPOptions{Model: "mx", APIKey: "sk-secret"})
			if e.Provider() != kind || e.Model() != "mx" || e.Dims() != 0 || e.MaxInputTokens() != DefaultMaxInputTokens {
				t.Fatalf("identity = %s/%s/%d/%d", e.Provider(), e.Model(), e.Dims(), e.MaxInputTokens())
			}
			texts := []string{"alpha", "记忆索引", "", "a much longer english text"}
			vs, err := e.Embed(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			if e.Dims() != 5 {
				t.Fatalf("Dims after first answer = %d, want 5 (learned)", e.Dims())
			}
			for i, s := range texts {
				if len(vs[i]) != 5 {
					t.Fatalf("vector %d has %d dims", i, len(vs[i]))
				}
				if s == "" {
					if slices.ContainsFunc(vs[i], func(x float32) bool { return x != 0 }) {
						t.Fatalf("blank input: want the zero vector, got %v", vs[i])
					}
					continue
				}
				if !sameDirection(vs[i], vec(s, 5)) || math.Abs(norm(vs[i])-1) > 1e-6 {
					t.Fatalf("text %q: vector %v is not the unit vector of %v (input order, L2-normalised)", s, vs[i], vec(s, 5))
				}
			}
			reqs := f.requests()
			if len(reqs) != 1 || !slices.Equal(reqs[0].Inputs, []string{"alpha", "记忆索引", "a much longer english text"}) || reqs[0].Model != "mx" {
				t.Fatalf("requests = %+v, want one with the three non-blank inputs and model mx", reqs)
			}
			switch kind {
			case OpenAIProvider:
				if reqs[0].Auth != "Bearer sk-secret" {
					t.Fatalf("Authorization = %q", reqs[0].Auth)
				}
			case OllamaProvider:
				if reqs[0].Truncate == nil || *reqs[0].Truncate {
					t.Fatalf("ollama request must send truncate=false, got %v", reqs[0].Truncate)
				}
			}
		})
	}
}

func TestHTTPProviderErrors(t *testing.T) {
	type tc struct {
		name      string
		dims      int // HTTPOptions.Dims
		reply     func(f *fakeProvider) func(int, http.ResponseWriter, *http.Request, []string) bool
		wantIs    error
		wantCalls int
		wantText  []string
	}
	cases := []tc{
		{
			name: "500 twice then success", wantCalls: 3,
			reply: func(*fakeProvider) func(int, http.ResponseWriter, *http.Request, []string) bool {
				return func(n int, w http.ResponseWriter, _ *http.Request, _ []string) bool {
					if n <= 2 {
						http.Error(w, "overloaded", http.StatusInternalServerError)
						return true
					}
					return false
				}
			},
		},
		{
			name: "500 always", wantCalls: 4, wantIs: ErrUnavailable, wantText: []string{"HTTP 500", "overloaded", "/"},
			reply: func(*fakeProvider) func(int, http.ResponseWriter, *http.Request, []string) bool {
				return func(_ int, w http.ResponseWriter, _ *http.Request, _ []string) bool {
					http.Error(w, "overloaded", http.StatusInternalServerError)
					return true
				}
			},
		},
		{
			name: "401 not retried, key redacted", wantCalls: 1, wantText: []string{"HTTP 401", "[redacted]"},
			reply: func(*fakeProvider) func(int, http.ResponseWriter, *http.Request, []string) bool {
				return func(_ int, w http.ResponseWriter, _ *http.Request, _ []string) bool {
					http.Error(w, `{"error":{"message":"Incorrect API key provided: sk-secret"}}`, http.StatusUnauthorized)
					return true
				}
			},
		},
		{
			name: "400 input too long not retried", wantCalls: 1, wantText: []string{"HTTP 400", "context length"},
			reply: func(*fakeProvider) func(int, http.ResponseWriter, *http.Request, []string) bool {
				return func(_ int, w http.ResponseWriter, _ *http.Request, _ []string) bool {
					http.Error(w, `{"error":"the input length exceeds the context length"}`, http.StatusBadRequest)
					return true
				}
			},
		},
		{
			name: "wrong dims", dims: 4, wantCalls: 1, wantIs: ErrDimsMismatch, wantText: []string{"3 dims, want 4"},
		},
		{
			name: "count mismatch", wantCalls: 1, wantIs: ErrBadResponse, wantText: []string{"1 vectors for 2 inputs"},
			reply: func(f *fakeProvider) func(int, http.ResponseWriter, *http.Request, []string) bool {
				return func(_ int, w http.ResponseWriter, _ *http.Request, in []string) bool {
					f.write(w, [][]float64{vec(in[0], 3)})
					return true
				}
			},
		},
		{
			name: "malformed JSON", wantCalls: 1, wantIs: ErrBadResponse,
			reply: func(*fakeProvider) func(int, http.ResponseWriter, *http.Request, []string) bool {
				return func(_ int, w http.ResponseWriter, _ *http.Request, _ []string) bool {
					_, _ = io.WriteString(w, `{"embeddings": [[1, 2,`)
					return true
				}
			},
		},
		{
			name: "infinite value", wantCalls: 1, wantIs: ErrBadResponse,
			reply: func(*fakeProvider) func(int, http.ResponseWriter, *http.Request, []string) bool {
				return func(_ int, w http.ResponseWriter, _ *http.Request, _ []string) bool {
					_, _ = io.WriteString(w, `{"embeddings":[[1,2,1e999],[1,2,3]],"data":[{"index":0,"embedding":[1,2,1e999]},{"index":1,"embedding":[1,2,3]}]}`)
					return true
				}
			},
		},
	}
	for _, kind := range providers {
		for _, c := range cases {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				f := newFakeProvider(t, kind, 3)
				if c.reply != nil {
					f.reply = c.reply(f)
				}
				e := f.newFor(HTTPOptions{Dims: c.dims, APIKey: "sk-secret"})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				vs, err := e.Embed(ctx, []string{"first text", "second"})
				if got := len(f.requests()); got != c.wantCalls {
					t.Errorf("server saw %d requests, want %d", got, c.wantCalls)
				}
				if c.wantIs == nil && c.wantText == nil {
					if err != nil || len(vs) != 2 {
						t.Fatalf("Embed = %d vectors, %v; want success", len(vs), err)
					}
					return
				}
				if err == nil {
					t.Fatal("Embed succeeded, want an error")
				}
				if c.wantIs != nil && !errors.Is(err, c.wantIs) {
					t.Errorf("error %v is not %v", err, c.wantIs)
				}
				msg := err.Error()
				if !strings.Contains(msg, kind) || !strings.Contains(msg, f.srv.URL) || strings.Contains(msg, "sk-secret") {
					t.Errorf("error %q must name the provider and URL and never the key", msg)
				}
				for _, w := range c.wantText {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q lacks %q", msg, w)
					}
				}
			})
		}
	}
}

func TestHTTPProviderRetryAfter(t *testing.T) {
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, 3)
			f.reply = func(n int, w http.ResponseWriter, _ *http.Request, _ []string) bool {
				if n == 1 {
					w.Header().Set("Retry-After", "1")
					http.Error(w, "slow down", http.StatusTooManyRequests)
					return true
				}
				return false
			}
			// A backoff of an hour: only the server's Retry-After (1 s) lets
			// the retry happen before the context ends.
			e := f.newFor(HTTPOptions{Backoff: time.Hour, MaxBackoff: time.Hour})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := e.Embed(ctx, []string{"x"}); err != nil {
				t.Fatalf("Embed after 429 with Retry-After: %v", err)
			}
			if n := len(f.requests()); n != 2 {
				t.Fatalf("server saw %d requests, want 2", n)
			}
		})
	}
}

func TestBackoffAndRetryAfterParsing(t *testing.T) {
	c, err := newClient("x", "http://h", "m", ollamaAPI{}, HTTPOptions{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, MaxRetryAfter: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		attempt    int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{0, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 0, 100 * time.Millisecond, 200 * time.Millisecond},
		{5, 0, 500 * time.Millisecond, time.Second}, // capped at MaxBackoff
		{60, 0, 500 * time.Millisecond, time.Second},
		{0, 2 * time.Second, 2 * time.Second, 2 * time.Second},
		{0, time.Hour, 5 * time.Second, 5 * time.Second}, // capped at MaxRetryAfter
	} {
		for range 20 {
			if w := c.backoff(tc.attempt, tc.retryAfter); w < tc.lo || w > tc.hi {
				t.Fatalf("backoff(%d, %v) = %v, want in [%v, %v]", tc.attempt, tc.retryAfter, w, tc.lo, tc.hi)
			}
		}
	}
	for in, want := range map[string]time.Duration{"": 0, "3": 3 * time.Second, "-1": 0, "soon": 0,
		time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat): 0} {
		if got := parseRetryAfter(in); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
	if got := parseRetryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); got < 58*time.Minute || got > time.Hour {
		t.Errorf("parseRetryAfter(date in an hour) = %v", got)
	}
}

func TestHTTPProviderTimeoutAndCancel(t *testing.T) {
	for _, kind := range providers {
		t.Run(kind+"/timeout", func(t *testing.T) {
			f := newFakeProvider(t, kind, 3)
			f.reply = func(_ int, _ http.ResponseWriter, r *http.Request, _ []string) bool {
				select { // longer than the per-request timeout
				case <-r.Context().Done():
				case <-time.After(20 * time.Second):
				}
				return true
			}
			// Attempts are counted where they are made: on a loaded machine
			// an attempt may time out before the server has read it.
			var attempts atomic.Int64
			hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				attempts.Add(1)
				return http.DefaultTransport.RoundTrip(r)
			})}
			e := f.newFor(HTTPOptions{Timeout: 100 * time.Millisecond, Retries: 1, HTTPClient: hc})
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_, err := e.Embed(ctx, []string{"x"})
			if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
				t.Fatalf("Embed = %v (ctx %v); want ErrUnavailable from the per-request timeout, before the test's deadline", err, ctx.Err())
			}
			if !strings.Contains(err.Error(), "no answer within 100ms") {
				t.Errorf("error %q does not say it timed out", err)
			}
			if n := attempts.Load(); n != 2 {
				t.Errorf("%d attempts, want 2 (one retry)", n)
			}
			if n := len(f.requests()); n > 2 {
				t.Errorf("server saw %d requests, want at most 2", n)
			}
		})
		t.Run(kind+"/cancel", func(t *testing.T) {
			f := newFakeProvider(t, kind, 3)
			arrived := make(chan struct{}, 10)
			f.reply = func(_ int, _ http.ResponseWriter, r *http.Request, _ []string) bool {
				arrived <- struct{}{}
				<-r.Context().Done()
				return true
			}
			e := f.newFor(HTTPOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-arrived; cancel() }()
			_, err := e.Embed(ctx, []string{"x"})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Embed = %v, want context.Canceled", err)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("server saw %d requests after cancel, want 1", n)
			}
		})
	}
}

func TestHTTPProviderBatchingAndLimits(t *testing.T) {
	for _, kind := range providers {
		t.Run(kind, func(t *testing.T) {
			f := newFakeProvider(t, kind, 3)
			e := f.newFor(HTTPOptions{MaxInputTokens: 120, BatchTokens: 250, MaxBatch: 3})
			var texts []string
			for i := range 10 {
				texts = append(texts, strings.Repeat("记", 40+10*i)) // 40..130 tokens
			}
			if _, err := e.Embed(context.Background(), texts); !errors.Is(err, ErrInputTooLong) {
				t.Fatalf("input of 130 tokens with limit 120: err = %v, want ErrInputTooLong", err)
			}
			if n := len(f.requests()); n != 0 {
				t.Fatalf("%d requests sent for a call with a too long input, want 0", n)
			}
			texts = texts[:9] // 40..120 tokens
			vs, err := e.Embed(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			var sent []string
			for _, r := range f.requests() {
				tokens := 0
				for _, s := range r.Inputs {
					tokens += chunk.EstimateTokens(s)
				}
				if len(r.Inputs) > 3 || (tokens > 250 && len(r.Inputs) > 1) {
					t.Errorf("request with %d inputs, %d tokens exceeds the batch budget (3, 250)", len(r.Inputs), tokens)
				}
				sent = append(sent, r.Inputs...)
			}
			if !slices.Equal(sent, texts) {
				t.Fatal("inputs not sent exactly once, in order")
			}
			for i, s := range texts {
				if !sameDirection(vs[i], vec(s, 3)) {
					t.Fatalf("vector %d does not belong to its input", i)
				}
			}
		})
	}
}

func TestHTTPProviderLearnedDimsAndCooldown(t *testing.T) {
	f := newFakeProvider(t, OllamaProvider, 3)
	e := f.newFor(HTTPOptions{Cooldown: time.Hour, Retries: -1})
	p := e.(Prober)
	if d, err := p.Probe(context.Background()); err != nil || d != 3 {
		t.Fatalf("Probe = %d, %v; want 3", d, err)
	}
	f.dims = 4 // the server now answers with another model's vectors
	if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrDimsMismatch) || !strings.Contains(err.Error(), "4 dims, want 3") {
		t.Fatalf("Embed after the dims changed = %v, want ErrDimsMismatch naming both sizes", err)
	}
	f.reply = func(_ int, w http.ResponseWriter, _ *http.Request, _ []string) bool {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return true
	}
	if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Embed on 503 = %v, want ErrUnavailable", err)
	}
	before := len(f.requests())
	_, err := e.Embed(context.Background(), []string{"x"})
	if !errors.Is(err, ErrUnavailable) || len(f.requests()) != before {
		t.Fatalf("Embed within the cooldown = %v after %d new requests; want ErrUnavailable without asking the server", err, len(f.requests())-before)
	}
}

func TestHTTPProviderOpenAIRequestShape(t *testing.T) {
	f := newFakeProvider(t, OpenAIProvider, 8)
	e := f.newFor(HTTPOptions{Dims: 8, SendDimensions: true})
	if _, err := e.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if r := f.requests()[0]; r.Dimensions != 8 || r.Auth != "" {
		t.Fatalf("request = %+v, want dimensions 8 and no Authorization without a key", r)
	}
	// Indexes that are repeated are a malformed answer, not a silent mix-up.
	f.reply = func(_ int, w http.ResponseWriter, _ *http.Request, _ []string) bool {
		_, _ = io.WriteString(w, `{"data":[{"index":0,"embedding":[1,0,0,0,0,0,0,0]},{"index":0,"embedding":[0,1,0,0,0,0,0,0]}]}`)
		return true
	}
	if _, err := e.Embed(context.Background(), []string{"a", "b"}); !errors.Is(err, ErrBadResponse) {
		t.Fatalf("repeated index: err = %v, want ErrBadResponse", err)
	}
}

func TestNewFromSettings(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": "http://llm.local:8080/v1"}
	getenv := func(k string) string { return env[k] }
	cases := []struct {
		s         Settings
		provider  string
		model     string
		dims      int
		url       string
		wantError string
	}{
		{s: Settings{}, provider: "builtin", model: BuiltinModel, dims: 384},
		{s: Settings{Provider: "builtin", Dims: 128}, provider: "builtin", model: BuiltinModel, dims: 128},
		{s: Settings{Provider: "builtin", Model: "bge-m3"}, wantError: "builtin has one model"},
		{s: Settings{Provider: "ollama"}, provider: "ollama", model: DefaultOllamaModel, url: DefaultOllamaBaseURL + "/api/embed"},
		{s: Settings{Provider: "ollama", Model: "bge-m3", Dims: 1024, BaseURL: "http://gpu:11434/"}, provider: "ollama", model: "bge-m3", dims: 1024, url: "http://gpu:11434/api/embed"},
		{s: Settings{Provider: "openai"}, provider: "openai", model: DefaultOpenAIModel, url: "http://llm.local:8080/v1/embeddings"},
		{s: Settings{Provider: "openai", BaseURL: "https://api.example.com/v1"}, provider: "openai", model: DefaultOpenAIModel, url: "https://api.example.com/v1/embeddings"},
		{s: Settings{Provider: "ollama", BaseURL: "gpu:11434"}, wantError: "must start with http"},
		{s: Settings{Provider: "voyage"}, wantError: `unknown provider "voyage"`},
		{s: Settings{Provider: "ollama", Dims: -1}, wantError: "negative"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v", c.s), func(t *testing.T) {
			c.s.Getenv = getenv
			e, err := New(c.s)
			if c.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantError) {
					t.Fatalf("New = %v, want error containing %q", err, c.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Provider() != c.provider || e.Model() != c.model || e.Dims() != c.dims {
				t.Fatalf("New = %s/%s/%d, want %s/%s/%d", e.Provider(), e.Model(), e.Dims(), c.provider, c.model, c.dims)
			}
			if c.url != "" {
				if u := e.(interface{ URL() string }).URL(); u != c.url {
					t.Fatalf("URL = %s, want %s", u, c.url)
				}
			}
		})
	}
	// The key comes from the environment when config has none.
	e, err := New(Settings{Provider: "openai", Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if k := e.(*OpenAI).opts.APIKey; k != "sk-env" {
		t.Fatalf("APIKey = %q, want the OPENAI_API_KEY value", k)
	}
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
