package model

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"
)

// Defaults for Detect.
const (
	// DefaultOllamaURL is where a local Ollama listens.
	DefaultOllamaURL = "http://127.0.0.1:11434"
	// DefaultProbeTimeout bounds each HTTP probe made by Detect.
	DefaultProbeTimeout = 1500 * time.Millisecond
	// DefaultOpenAIModel is used for an OpenAI-compatible server when no
	// model is configured and the server's /models list cannot be read.
	DefaultOpenAIModel = "gpt-4o-mini"
)

// Config is the model block of config.json (SPEC §6), e.g.
//
//	"model": {"provider": "openai", "baseUrl": "https://api.openai.com/v1", "apiKey": "sk-...", "model": "gpt-4o-mini"}
//
// Provider is "openai" (any OpenAI-compatible server), "ollama", "offline" or
// "" (auto-detect). BaseURL includes the API version path ("/v1").
type Config struct {
	Provider string `json:"provider"`
	BaseURL  string `json:"baseUrl"`
	APIKey   string `json:"apiKey"`
	Model    string `json:"model"`
}

// DetectOptions tune Detect. The zero value is ready to use.
type DetectOptions struct {
	// Getenv reads the environment. Default os.Getenv.
	Getenv func(string) string
	// OllamaURL is the local Ollama root (without "/v1"). Default DefaultOllamaURL.
	OllamaURL string
	// ProbeTimeout bounds each probe request. Default DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// HTTPClient sends the probes. Default http.DefaultClient (each probe has
	// its own ProbeTimeout deadline).
	HTTPClient *http.Client
	// Logger receives one info record with the decision. Default slog.Default().
	Logger *slog.Logger
}

// Detect decides which model to use (SPEC §6), in this order:
//
//  1. explicit configuration: cfg.Provider "offline", "ollama" or "openai", or
//     any of cfg.BaseURL/APIKey/Model set (then "openai" is assumed); missing
//     fields are completed from the environment (openai) or by asking the
//     server for its models;
//  2. the environment: OPENAI_API_KEY and/or OPENAI_BASE_URL (and optionally
//     OPENAI_MODEL) select an OpenAI-compatible server;
//  3. a local Ollama answering GET <OllamaURL>/api/tags with at least one
//     model (the first one listed is used, through Ollama's /v1 API);
//  4. otherwise "offline".
//
// It returns the completed Config and a one-sentence human-readable reason.
// The error is non-nil only when the configuration is unusable (ErrConfig:
// unknown provider; ErrUnavailable: an explicitly configured Ollama without a
// model cannot be reached) or ctx ended; the returned Config is then the
// offline one, so a caller may log the error and carry on.
func Detect(ctx context.Context, cfg Config, opts DetectOptions) (Config, string, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.OllamaURL == "" {
		opts.OllamaURL = DefaultOllamaURL
	}
	opts.OllamaURL = strings.TrimRight(opts.OllamaURL, "/")
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	out, why, err := detect(ctx, cfg, opts)
	if err != nil {
		out = Config{Provider: ProviderOffline}
		why = err.Error() + "; using the offline provider"
	}
	opts.Logger.Info("model detected", "provider", out.Provider, "model", out.Model, "base_url", out.BaseURL, "why", why)
	return out, why, err
}

func detect(ctx context.Context, cfg Config, o DetectOptions) (Config, string, error) {
	p := strings.ToLower(strings.TrimSpace(cfg.Provider))
	explicit := cfg.BaseURL != "" || cfg.APIKey != "" || cfg.Model != ""
	switch {
	case p == ProviderOffline:
		return Config{Provider: ProviderOffline}, "config.json selects the offline provider", nil
	case p == ProviderOllama:
		return detectOllama(ctx, cfg, o, "config.json selects Ollama")
	case p == ProviderOpenAI || (p == "" && explicit):
		return detectOpenAI(ctx, cfg, o, "config.json configures an OpenAI-compatible model")
	case p != "":
		return Config{}, "", newErr(ErrConfig, nil, "unknown model provider %q in config.json (use \"openai\", \"ollama\" or \"offline\")", cfg.Provider)
	}
	if o.Getenv("OPENAI_API_KEY") != "" || o.Getenv("OPENAI_BASE_URL") != "" {
		return detectOpenAI(ctx, Config{}, o, "OPENAI_API_KEY/OPENAI_BASE_URL are set")
	}
	models, err := ollamaModels(ctx, o)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return Config{}, "", fmt.Errorf("detect model: %w", cerr)
		}
		return Config{Provider: ProviderOffline},
			fmt.Sprintf("no model configured (no config.json model block, no OPENAI_API_KEY/OPENAI_BASE_URL, no Ollama at %s: %v)", o.OllamaURL, err), nil
	}
	if len(models) == 0 {
		return Config{Provider: ProviderOffline},
			fmt.Sprintf("Ollama at %s has no models (run `ollama pull llama3.2`); no other model configured", o.OllamaURL), nil
	}
	return Config{Provider: ProviderOllama, BaseURL: o.OllamaURL + "/v1", Model: models[0]},
		fmt.Sprintf("found a local Ollama at %s with model %s", o.OllamaURL, models[0]), nil
}

func detectOllama(ctx context.Context, cfg Config, o DetectOptions, why string) (Config, string, error) {
	root := o.OllamaURL
	if cfg.BaseURL != "" {
		root = strings.TrimSuffix(strings.TrimRight(cfg.BaseURL, "/"), "/v1")
	}
	out := Config{Provider: ProviderOllama, BaseURL: root + "/v1", APIKey: cfg.APIKey, Model: cfg.Model}
	if out.Model != "" {
		return out, fmt.Sprintf("%s with model %s", why, out.Model), nil
	}
	o.OllamaURL = root
	models, err := ollamaModels(ctx, o)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return Config{}, "", fmt.Errorf("detect model: %w", cerr)
		}
		return Config{}, "", newErr(ErrUnavailable, err, "Ollama at %s is configured without a model and cannot be asked for one", root)
	}
	if len(models) == 0 {
		return Config{}, "", newErr(ErrUnavailable, nil, "Ollama at %s has no models (run `ollama pull llama3.2`)", root)
	}
	out.Model = models[0]
	return out, fmt.Sprintf("%s; using its first model %s", why, out.Model), nil
}

func detectOpenAI(ctx context.Context, cfg Config, o DetectOptions, why string) (Config, string, error) {
	out := Config{Provider: ProviderOpenAI, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Model: cfg.Model}
	if out.BaseURL == "" {
		out.BaseURL = o.Getenv("OPENAI_BASE_URL")
	}
	if out.BaseURL == "" {
		out.BaseURL = DefaultOpenAIBaseURL
	}
	out.BaseURL = strings.TrimRight(out.BaseURL, "/")
	if out.APIKey == "" {
		out.APIKey = o.Getenv("OPENAI_API_KEY")
	}
	if out.Model == "" {
		out.Model = o.Getenv("OPENAI_MODEL")
	}
	if out.Model != "" {
		return out, fmt.Sprintf("%s (%s, model %s)", why, out.BaseURL, out.Model), nil
	}
	if ids, err := openAIModels(ctx, out, o); err == nil && len(ids) > 0 {
		out.Model = ids[0]
		return out, fmt.Sprintf("%s (%s, first listed model %s)", why, out.BaseURL, out.Model), nil
	}
	out.Model = DefaultOpenAIModel
	return out, fmt.Sprintf("%s (%s, default model %s)", why, out.BaseURL, out.Model), nil
}

// probe GETs url with the probe timeout and decodes a JSON body into v.
func probe(ctx context.Context, o DetectOptions, url, apiKey string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, o.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		return netCause(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: invalid JSON: %w", url, err)
	}
	return nil
}

// ollamaModels lists the models of an Ollama server (GET /api/tags).
func ollamaModels(ctx context.Context, o DetectOptions) ([]string, error) {
	var tags struct {
		Models []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if err := probe(ctx, o, o.OllamaURL+"/api/tags", "", &tags); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range tags.Models {
		name := m.Name
		if name == "" {
			name = m.Model
		}
		if name != "" {
			out = append(out, name)
		}
	}
	return out, nil
}

// openAIModels lists the models of an OpenAI-compatible server (GET /models).
func openAIModels(ctx context.Context, cfg Config, o DetectOptions) ([]string, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := probe(ctx, o, cfg.BaseURL+"/models", cfg.APIKey, &list); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range list.Data {
		if m.ID != "" {
			out = append(out, m.ID)
		}
	}
	return out, nil
}

// FromConfig builds the Provider for a detected Config: an OpenAI client for
// "openai" and "ollama" (Ollama through its OpenAI-compatible /v1 API), and
// nil for "offline" (package chat then uses its offline provider). opts
// supplies timeouts, HTTP client and logger; its BaseURL, APIKey, Model and
// Name are taken from cfg. An unknown provider is an ErrConfig error.
func FromConfig(cfg Config, opts OpenAIOptions) (Provider, error) {
	switch cfg.Provider {
	case ProviderOffline, "":
		return nil, nil
	case ProviderOpenAI, ProviderOllama:
		opts.BaseURL, opts.APIKey, opts.Model, opts.Name = cfg.BaseURL, cfg.APIKey, cfg.Model, cfg.Provider
		if cfg.Provider == ProviderOllama && opts.BaseURL == "" {
			opts.BaseURL = DefaultOllamaURL + "/v1"
		}
		return NewOpenAI(opts), nil
	}
	return nil, newErr(ErrConfig, nil, "unknown model provider %q (use \"openai\", \"ollama\" or \"offline\")", cfg.Provider)
}
