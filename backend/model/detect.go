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

// providerList names the valid Config.Provider values for error messages.
const providerList = `"openai", "ollama", "anthropic" or "offline"`

// Config is the model block of config.json (SPEC §6), e.g.
//
//	"model": {"provider": "openai", "baseUrl": "https://api.openai.com/v1", "apiKey": "sk-...", "model": "gpt-4o-mini"}
//
//	"model": {"provider": "anthropic", "model": "claude-sonnet-4-5", "apiKey": "sk-ant-..."}
//
// Provider is "openai" (any OpenAI-compatible server), "ollama",
// "anthropic", "offline" or "" (auto-detect). BaseURL includes the API
// version path ("/v1") for openai and ollama; for anthropic it is the root
// (default DefaultAnthropicBaseURL, "/v1/messages" is appended).
type Config struct {
	Provider string `json:"provider"`
	BaseURL  string `json:"baseUrl"`
	APIKey   string `json:"apiKey"`
	Model    string `json:"model"`
	// ContextWindow is the model's context window in tokens, for the
	// chat's context economy (SPEC §6: compaction at the window minus a
	// 20000-token reserve). 0: not set; the chat assumes 128000
	// (chat.DefaultContextWindow). Detect never guesses it.
	ContextWindow int `json:"contextWindow,omitempty"`
	// Vision says whether the model takes images: true or false is the
	// person's word and wins; absent (nil) leaves it to what the server's
	// model list says (DetectVision), else unknown, which is treated as
	// no (the model then gets an image's path and metadata as text).
	Vision *bool `json:"vision,omitempty"`
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
//  1. explicit configuration: cfg.Provider "offline", "ollama", "openai" or
//     "anthropic", or any of cfg.BaseURL/APIKey/Model set (then "openai" is
//     assumed); missing fields are completed from the environment (openai:
//     OPENAI_*; anthropic: ANTHROPIC_*) or by asking the server for its
//     models;
//  2. the environment: OPENAI_API_KEY and/or OPENAI_BASE_URL (and optionally
//     OPENAI_MODEL) select an OpenAI-compatible server;
//  3. the environment: ANTHROPIC_API_KEY (with optional ANTHROPIC_BASE_URL
//     and ANTHROPIC_MODEL) selects Anthropic; without ANTHROPIC_MODEL the
//     first model of GET <base>/v1/models (newest first) is used, else
//     DefaultAnthropicModel;
//  4. a local Ollama answering GET <OllamaURL>/api/tags with at least one
//     model (the first one listed is used, through Ollama's /v1 API);
//  5. otherwise "offline".
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
	if out.Provider != ProviderOffline && out.ContextWindow == 0 && cfg.ContextWindow > 0 {
		out.ContextWindow = cfg.ContextWindow
	}
	if out.Provider != ProviderOffline && out.Vision == nil {
		out.Vision = cfg.Vision
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
	case p == ProviderAnthropic:
		return detectRemote(ctx, remoteAPIFor(ProviderAnthropic), cfg, o, "config.json selects Anthropic")
	case p == ProviderOpenAI || (p == "" && explicit):
		return detectRemote(ctx, remoteAPIFor(ProviderOpenAI), cfg, o, "config.json configures an OpenAI-compatible model")
	case p != "":
		return Config{}, "", newErr(ErrConfig, nil, "unknown model provider %q in config.json (use %s)", cfg.Provider, providerList)
	}
	if o.Getenv("OPENAI_API_KEY") != "" || o.Getenv("OPENAI_BASE_URL") != "" {
		return detectRemote(ctx, remoteAPIFor(ProviderOpenAI), Config{}, o, "OPENAI_API_KEY/OPENAI_BASE_URL are set")
	}
	if o.Getenv("ANTHROPIC_API_KEY") != "" {
		return detectRemote(ctx, remoteAPIFor(ProviderAnthropic), Config{}, o, "ANTHROPIC_API_KEY is set")
	}
	models, err := ollamaModels(ctx, o)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return Config{}, "", fmt.Errorf("detect model: %w", cerr)
		}
		return Config{Provider: ProviderOffline},
			fmt.Sprintf("no model configured (no config.json model block, no OPENAI_API_KEY/OPENAI_BASE_URL, no ANTHROPIC_API_KEY, no Ollama at %s: %v)", o.OllamaURL, err), nil
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

// remoteAPI describes a hosted, key-based API for Detect (and ForProfile):
// its environment variables, how its base URL is spelled, how its models
// are listed and its default model.
type remoteAPI struct {
	provider                  string
	keyEnv, baseEnv, modelEnv string
	defaultModel              string
	root                      func(base string) string // the default when empty, normalised
	modelsURL                 func(root string) string
	header                    func(apiKey string) http.Header
}

// remoteAPIFor returns the description of provider (openai or anthropic).
func remoteAPIFor(provider string) remoteAPI {
	if provider == ProviderAnthropic {
		return remoteAPI{provider: ProviderAnthropic,
			keyEnv: "ANTHROPIC_API_KEY", baseEnv: "ANTHROPIC_BASE_URL", modelEnv: "ANTHROPIC_MODEL",
			defaultModel: DefaultAnthropicModel, root: anthropicRoot,
			modelsURL: func(root string) string { return root + "/v1/models" },
			header: func(key string) http.Header {
				h := http.Header{}
				h.Set("anthropic-version", AnthropicVersion)
				if key != "" {
					h.Set("x-api-key", key)
				}
				return h
			}}
	}
	return remoteAPI{provider: ProviderOpenAI,
		keyEnv: "OPENAI_API_KEY", baseEnv: "OPENAI_BASE_URL", modelEnv: "OPENAI_MODEL",
		defaultModel: DefaultOpenAIModel, root: openAIRoot,
		modelsURL: func(root string) string { return root + "/models" },
		header: func(key string) http.Header {
			h := http.Header{}
			if key != "" {
				h.Set("Authorization", "Bearer "+key)
			}
			return h
		}}
}

// openAIRoot is an OpenAI-compatible base URL as NewOpenAI uses it: the
// default when empty, without a trailing "/".
func openAIRoot(base string) string {
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	return strings.TrimRight(base, "/")
}

// anthropicRoot is an Anthropic base URL as NewAnthropic uses it: the
// default when empty, without a trailing "/" or "/v1".
func anthropicRoot(base string) string {
	if base == "" {
		base = DefaultAnthropicBaseURL
	}
	return strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1")
}

// detectRemote completes cfg for api: base URL, key and model from cfg,
// else the environment; without a model the first one the server lists
// (Anthropic lists the newest first), else the API's default model.
func detectRemote(ctx context.Context, api remoteAPI, cfg Config, o DetectOptions, why string) (Config, string, error) {
	out := Config{Provider: api.provider, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Model: cfg.Model}
	if out.BaseURL == "" {
		out.BaseURL = o.Getenv(api.baseEnv)
	}
	out.BaseURL = api.root(out.BaseURL)
	if out.APIKey == "" {
		out.APIKey = o.Getenv(api.keyEnv)
	}
	if out.Model == "" {
		out.Model = o.Getenv(api.modelEnv)
	}
	if out.Model != "" {
		return out, fmt.Sprintf("%s (%s, model %s)", why, out.BaseURL, out.Model), nil
	}
	if ids, err := listModels(ctx, o, api.modelsURL(out.BaseURL), api.header(out.APIKey)); err == nil && len(ids) > 0 {
		out.Model = ids[0]
		return out, fmt.Sprintf("%s (%s, first listed model %s)", why, out.BaseURL, out.Model), nil
	}
	out.Model = api.defaultModel
	return out, fmt.Sprintf("%s (%s, default model %s)", why, out.BaseURL, out.Model), nil
}

// listModels lists the model ids of an OpenAI-compatible (GET /models) or
// Anthropic (GET /v1/models) server: both answer {"data": [{"id": ...}]}.
func listModels(ctx context.Context, o DetectOptions, url string, hdr http.Header) ([]string, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := probe(ctx, o, url, hdr, &list); err != nil {
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

// probe GETs url with the probe timeout and the extra header and decodes a
// JSON body into v.
func probe(ctx context.Context, o DetectOptions, url string, hdr http.Header, v any) error {
	ctx, cancel := context.WithTimeout(ctx, o.ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("probe %s: %w", url, err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
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
	if err := probe(ctx, o, o.OllamaURL+"/api/tags", nil, &tags); err != nil {
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

// FromConfig builds the Provider for a detected Config: an OpenAI client for
// "openai" and "ollama" (Ollama through its OpenAI-compatible /v1 API), an
// Anthropic client for "anthropic", and nil for "offline" (package chat then
// uses its offline provider). The client takes images (TakesImages) when
// cfg.Vision is true. opts supplies timeouts, line limit, HTTP
// client and logger (for both kinds of client); its BaseURL, APIKey, Model
// and Name are taken from cfg. An unknown provider is an ErrConfig error.
func FromConfig(cfg Config, opts OpenAIOptions) (Provider, error) {
	vision := cfg.Vision != nil && *cfg.Vision
	switch cfg.Provider {
	case ProviderOffline, "":
		return nil, nil
	case ProviderAnthropic:
		return NewAnthropic(AnthropicOptions{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Model: cfg.Model,
			HTTPClient: opts.HTTPClient, HeaderTimeout: opts.HeaderTimeout, IdleTimeout: opts.IdleTimeout,
			MaxLineBytes: opts.MaxLineBytes, Logger: opts.Logger, Vision: vision}), nil
	case ProviderOpenAI, ProviderOllama:
		opts.BaseURL, opts.APIKey, opts.Model, opts.Name, opts.Vision = cfg.BaseURL, cfg.APIKey, cfg.Model, cfg.Provider, vision
		if cfg.Provider == ProviderOllama && opts.BaseURL == "" {
			opts.BaseURL = DefaultOllamaURL + "/v1"
		}
		return NewOpenAI(opts), nil
	}
	return nil, newErr(ErrConfig, nil, "unknown model provider %q (use %s)", cfg.Provider, providerList)
}
