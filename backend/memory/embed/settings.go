package embed

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"
)

// Settings select and configure an embedder (config.json's
// "memory.embedding", SPEC §4.2). The zero value is the builtin embedder.
type Settings struct {
	// Provider is "builtin" (default when empty), "ollama" or "openai".
	Provider string
	// Model: builtin accepts only "" or BuiltinModel; ollama and openai
	// default to DefaultOllamaModel and DefaultOpenAIModel.
	Model string
	// BaseURL of the API (ollama, openai). For openai an empty BaseURL
	// falls back to the environment variable OPENAI_BASE_URL, then
	// DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey (openai). Empty falls back to OPENAI_API_KEY. Local servers
	// (llama.cpp, LM Studio, vLLM) usually need none.
	APIKey string
	// Dims: builtin vector length (default 384); ollama/openai expected
	// length, 0 = learn it from the provider's first answer.
	Dims int
	// MaxInputTokens (ollama, openai): default DefaultMaxInputTokens.
	MaxInputTokens int
	// Timeout per request (ollama, openai): default DefaultTimeout (30 s).
	Timeout time.Duration
	// HTTPClient and Logger are passed to the HTTP providers (defaults as
	// in HTTPOptions).
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Getenv reads the environment fallbacks; default os.Getenv.
	Getenv func(string) string
}

// New builds the embedder that s describes. It sends no request. Unknown
// providers, a builtin model other than BuiltinModel, negative numbers and
// base URLs that are not http(s) are errors.
func New(s Settings) (Embedder, error) {
	if s.Dims < 0 || s.MaxInputTokens < 0 || s.Timeout < 0 {
		return nil, fmt.Errorf("embed: dims (%d), maxInputTokens (%d) and timeout (%v) must not be negative", s.Dims, s.MaxInputTokens, s.Timeout)
	}
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	o := HTTPOptions{
		BaseURL: s.BaseURL, Model: s.Model, APIKey: s.APIKey, Dims: s.Dims,
		MaxInputTokens: s.MaxInputTokens, Timeout: s.Timeout, HTTPClient: s.HTTPClient, Logger: s.Logger,
	}
	switch s.Provider {
	case "", BuiltinProvider:
		if s.Model != "" && s.Model != BuiltinModel && !slices.Contains(formerBuiltinModels, s.Model) {
			return nil, fmt.Errorf("embed: builtin has one model, %q, not %q", BuiltinModel, s.Model)
		}
		return NewBuiltin(BuiltinOptions{Dims: s.Dims}), nil
	case OllamaProvider:
		return NewOllama(o)
	case OpenAIProvider:
		if o.BaseURL == "" {
			o.BaseURL = getenv("OPENAI_BASE_URL")
		}
		if o.APIKey == "" {
			o.APIKey = getenv("OPENAI_API_KEY")
		}
		return NewOpenAI(o)
	default:
		return nil, fmt.Errorf("embed: unknown provider %q (want %q, %q or %q)", s.Provider, BuiltinProvider, OllamaProvider, OpenAIProvider)
	}
}

// formerBuiltinModels are the builtin's earlier model names. A config that
// still names one gets today's builtin (the builtin has one model); the
// index, which records the model, re-embeds its chunks once.
var formerBuiltinModels = []string{"hashed-ngram-v1", "hashed-ngram-v2"}
