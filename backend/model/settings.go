package model

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What the settings UI asks of a model server (SPEC §9): its list of
// models, one real test call, and which local servers answer.

// DefaultTestPrompt is what TestCall sends when asked for no prompt.
const DefaultTestPrompt = "Reply with the single word OK."

// MaxTestAnswer caps the answer text TestCall returns (bytes).
const MaxTestAnswer = 2000

// ListModels asks the server cfg describes for its models: GET
// <baseUrl>/models for openai (any OpenAI-compatible server), <root>/api/tags
// for ollama, <root>/v1/models for anthropic, with cfg.APIKey. Empty fields
// are the provider's defaults (the environment is not read). Only
// opts.HTTPClient and opts.ProbeTimeout are used. An answer other than 200 is
// an ErrRejected (4xx) or ErrUnavailable error carrying the server's own
// message; an unreachable server is ErrUnavailable.
func ListModels(ctx context.Context, cfg Config, opts DetectOptions) ([]string, error) {
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	var url string
	var hdr http.Header
	switch strings.ToLower(strings.TrimSpace(cfg.Provider)) {
	case ProviderOllama:
		root := DefaultOllamaURL
		if cfg.BaseURL != "" {
			root = strings.TrimSuffix(strings.TrimRight(cfg.BaseURL, "/"), "/v1")
		}
		url = root + "/api/tags"
	case ProviderAnthropic:
		api := remoteAPIFor(ProviderAnthropic)
		url, hdr = api.modelsURL(api.root(cfg.BaseURL)), api.header(cfg.APIKey)
	case ProviderOpenAI, "":
		api := remoteAPIFor(ProviderOpenAI)
		url, hdr = api.modelsURL(api.root(cfg.BaseURL)), api.header(cfg.APIKey)
	case ProviderOffline:
		return nil, nil
	default:
		return nil, newErr(ErrConfig, nil, "unknown model provider %q (use %s)", cfg.Provider, providerList)
	}
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		Models []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if err := getJSON(ctx, opts, url, hdr, &body); err != nil {
		return nil, err
	}
	out := []string{}
	for _, m := range body.Data {
		if m.ID != "" {
			out = append(out, m.ID)
		}
	}
	for _, m := range body.Models {
		if n := firstNonEmpty(m.Name, m.Model); n != "" {
			out = append(out, n)
		}
	}
	return out, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// getJSON GETs url and decodes a 200 answer into v; other answers become
// errors with the server's own message (see call.statusErr).
func getJSON(ctx context.Context, o DetectOptions, url string, hdr http.Header, v any) error {
	ctx, cancel := context.WithTimeout(ctx, o.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return newErr(ErrConfig, err, "model server URL %q", url)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && cerr == context.DeadlineExceeded {
			return newErr(ErrTimeout, nil, "model server at %s sent no answer within %s", serverLabel(url), o.ProbeTimeout)
		}
		return newErr(ErrUnavailable, netCause(err), "model server at %s is unreachable", serverLabel(url))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := endpoint{server: serverLabel(url)}
		return (&call{e: &e, ctx: ctx, resp: resp, body: bufio.NewReader(resp.Body)}).statusErr()
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v); err != nil {
		return newErr(ErrBadResponse, err, "GET %s: not the JSON list of models", url)
	}
	return nil
}

// TestResult is what one test call returned.
type TestResult struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Answer is the model's answer text (at most MaxTestAnswer bytes).
	Answer string `json:"answer"`
	// Millis is how long the call took, in milliseconds.
	Millis int64 `json:"ms"`
}

// TestCall makes one real, streamed chat call to the model cfg describes
// (FromConfig with opts) with prompt (DefaultTestPrompt when empty) and
// returns the answer. cfg must name a model server: "offline" or an empty
// provider is an ErrConfig error. A refused call returns the provider's
// error (ErrRejected for a bad key, with the server's own message).
func TestCall(ctx context.Context, cfg Config, prompt string, opts OpenAIOptions) (TestResult, error) {
	res := TestResult{Provider: cfg.Provider, Model: cfg.Model}
	if cfg.Provider == "" || cfg.Provider == ProviderOffline {
		return res, newErr(ErrConfig, nil, "no model server to test: choose a provider first")
	}
	p, err := FromConfig(cfg, opts)
	if err != nil {
		return res, err
	}
	if prompt == "" {
		prompt = DefaultTestPrompt
	}
	start := time.Now()
	var b strings.Builder
	resp, err := p.Stream(ctx, Request{Messages: []Message{{Role: RoleUser, Content: prompt}}}, func(d Delta) {
		if b.Len() < MaxTestAnswer {
			b.WriteString(d.Content)
		}
	})
	res.Millis = time.Since(start).Milliseconds()
	if err != nil {
		return res, err
	}
	res.Answer = resp.Content
	if len(res.Answer) > MaxTestAnswer {
		res.Answer = trimSnippet(res.Answer[:MaxTestAnswer])
	}
	return res, nil
}

// LocalServer is a model server found on this machine by DetectLocal.
type LocalServer struct {
	// Name is "Ollama", "LM Studio" or "llama.cpp".
	Name string `json:"name"`
	// Provider and BaseURL are the Config values that use it.
	Provider string `json:"provider"`
	BaseURL  string `json:"baseUrl"`
	// Models are the models it lists (may be empty).
	Models []string `json:"models"`
}

// LocalCandidate is one place DetectLocal looks.
type LocalCandidate struct {
	Name     string
	Provider string
	BaseURL  string
}

// LocalCandidates are the usual local servers (SPEC §9): Ollama on 11434,
// LM Studio on 1234 and llama.cpp's server on 8080, all on 127.0.0.1.
func LocalCandidates() []LocalCandidate {
	return []LocalCandidate{
		{Name: "Ollama", Provider: ProviderOllama, BaseURL: DefaultOllamaURL + "/v1"},
		{Name: "LM Studio", Provider: ProviderOpenAI, BaseURL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(1234)) + "/v1"},
		{Name: "llama.cpp", Provider: ProviderOpenAI, BaseURL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(8080)) + "/v1"},
	}
}

// DetectLocal asks every candidate (nil: LocalCandidates) for its models,
// all at once, each bounded by opts.ProbeTimeout, and returns those that
// answered, in the order given. It never returns an error: a server that
// is not there is simply not listed.
func DetectLocal(ctx context.Context, candidates []LocalCandidate, opts DetectOptions) []LocalServer {
	if candidates == nil {
		candidates = LocalCandidates()
	}
	found := make([]*LocalServer, len(candidates))
	var wg sync.WaitGroup
	for i, c := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			models, err := ListModels(ctx, Config{Provider: c.Provider, BaseURL: c.BaseURL}, opts)
			if err == nil {
				found[i] = &LocalServer{Name: c.Name, Provider: c.Provider, BaseURL: c.BaseURL, Models: models}
			}
		}()
	}
	wg.Wait()
	out := []LocalServer{}
	for _, s := range found {
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

// String describes s for logs.
func (s LocalServer) String() string {
	return fmt.Sprintf("%s at %s (%d models)", s.Name, s.BaseURL, len(s.Models))
}
