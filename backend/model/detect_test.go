package model

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// ollamaServer answers GET /api/tags with body (and /v1/models with an
// OpenAI model list, for the OpenAI-compatible probe).
func ollamaServer(t *testing.T, tags string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/tags":
			io.WriteString(w, tags)
		case "/v1/models":
			if r.Header.Get("Authorization") != "Bearer sk-list" {
				http.Error(w, "no key", http.StatusUnauthorized)
				return
			}
			io.WriteString(w, `{"object":"list","data":[{"id":"served-model","object":"model"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// anthropicModelsServer answers GET /v1/models as the Anthropic API does,
// for the key sk-ant-list only.
func anthropicModelsServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/v1/models" || r.Header.Get("anthropic-version") != AnthropicVersion {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"type":"error","error":{"type":"not_found_error","message":"Not found"}}`)
			return
		}
		if r.Header.Get("x-api-key") != "sk-ant-list" {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		io.WriteString(w, `{"data":[{"type":"model","id":"claude-newest","display_name":"Claude Newest","created_at":"2026-02-01T00:00:00Z"},`+
			`{"type":"model","id":"claude-older","display_name":"Claude Older","created_at":"2025-02-01T00:00:00Z"}],`+
			`"has_more":false,"first_id":"claude-newest","last_id":"claude-older"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

const twoModels = `{"models":[{"name":"qwen2.5:7b","model":"qwen2.5:7b","size":1},{"name":"llama3.2:latest","model":"llama3.2:latest"}]}`

func TestDetect(t *testing.T) {
	ollama := ollamaServer(t, twoModels)
	empty := ollamaServer(t, `{"models":[]}`)
	ant := anthropicModelsServer(t)
	down := "http://" + closedAddr(t)

	tests := []struct {
		name      string
		cfg       Config
		env       map[string]string
		ollamaURL string
		want      Config
		why       string
		err       error
	}{
		{name: "explicit offline", cfg: Config{Provider: "offline", Model: "x"}, ollamaURL: ollama.URL,
			want: Config{Provider: "offline"}, why: "offline"},
		{name: "explicit openai complete", cfg: Config{Provider: "openai", BaseURL: "https://llm.example/v1/", APIKey: "k", Model: "m"},
			env:  map[string]string{"OPENAI_API_KEY": "env-key"},
			want: Config{Provider: "openai", BaseURL: "https://llm.example/v1", APIKey: "k", Model: "m"}, why: "config.json"},
		{name: "explicit fields imply openai, key from env", cfg: Config{Model: "gpt-x"},
			env:  map[string]string{"OPENAI_API_KEY": "env-key"},
			want: Config{Provider: "openai", BaseURL: DefaultOpenAIBaseURL, APIKey: "env-key", Model: "gpt-x"}, why: "config.json"},
		{name: "explicit openai without model asks /models", cfg: Config{Provider: "openai", BaseURL: ollama.URL + "/v1", APIKey: "sk-list"},
			want: Config{Provider: "openai", BaseURL: ollama.URL + "/v1", APIKey: "sk-list", Model: "served-model"}, why: "first listed model served-model"},
		{name: "explicit ollama without model picks first", cfg: Config{Provider: "Ollama", BaseURL: ollama.URL},
			want: Config{Provider: "ollama", BaseURL: ollama.URL + "/v1", Model: "qwen2.5:7b"}, why: "first model qwen2.5:7b"},
		{name: "explicit ollama with model needs no probe", cfg: Config{Provider: "ollama", Model: "phi3"}, ollamaURL: down,
			want: Config{Provider: "ollama", BaseURL: down + "/v1", Model: "phi3"}, why: "phi3"},
		{name: "explicit ollama unreachable", cfg: Config{Provider: "ollama"}, ollamaURL: down,
			want: Config{Provider: "offline"}, why: "connection refused", err: ErrUnavailable},
		{name: "unknown provider", cfg: Config{Provider: "anthropix"},
			want: Config{Provider: "offline"}, why: "unknown model provider", err: ErrConfig},
		{name: "env key and model", env: map[string]string{"OPENAI_API_KEY": "sk-env", "OPENAI_MODEL": "gpt-4.1"}, ollamaURL: ollama.URL,
			want: Config{Provider: "openai", BaseURL: DefaultOpenAIBaseURL, APIKey: "sk-env", Model: "gpt-4.1"}, why: "OPENAI_API_KEY"},
		{name: "env base url of an unreachable server falls back to default model", env: map[string]string{"OPENAI_BASE_URL": down + "/v1"},
			want: Config{Provider: "openai", BaseURL: down + "/v1", Model: DefaultOpenAIModel}, why: "default model"},
		{name: "explicit anthropic complete", cfg: Config{Provider: "Anthropic", APIKey: "sk-ant-cfg", Model: "claude-x"},
			env:  map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env", "OPENAI_API_KEY": "sk-env"},
			want: Config{Provider: "anthropic", BaseURL: DefaultAnthropicBaseURL, APIKey: "sk-ant-cfg", Model: "claude-x"}, why: "config.json selects Anthropic"},
		{name: "explicit anthropic without model asks /v1/models", cfg: Config{Provider: "anthropic", BaseURL: ant.URL + "/v1/"},
			env:  map[string]string{"ANTHROPIC_API_KEY": "sk-ant-list"},
			want: Config{Provider: "anthropic", BaseURL: ant.URL, APIKey: "sk-ant-list", Model: "claude-newest"}, why: "first listed model claude-newest"},
		{name: "env anthropic key, base url and model", ollamaURL: ollama.URL,
			env:  map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env", "ANTHROPIC_BASE_URL": "https://proxy.example/v1", "ANTHROPIC_MODEL": "claude-haiku-4-5"},
			want: Config{Provider: "anthropic", BaseURL: "https://proxy.example", APIKey: "sk-ant-env", Model: "claude-haiku-4-5"}, why: "ANTHROPIC_API_KEY is set"},
		{name: "env anthropic key, models unreadable: default model", ollamaURL: ollama.URL,
			env:  map[string]string{"ANTHROPIC_API_KEY": "wrong-key", "ANTHROPIC_BASE_URL": ant.URL},
			want: Config{Provider: "anthropic", BaseURL: ant.URL, APIKey: "wrong-key", Model: DefaultAnthropicModel}, why: "default model " + DefaultAnthropicModel},
		{name: "OPENAI_* comes before ANTHROPIC_*", ollamaURL: ollama.URL,
			env:  map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env", "OPENAI_API_KEY": "sk-env", "OPENAI_MODEL": "gpt-4.1"},
			want: Config{Provider: "openai", BaseURL: DefaultOpenAIBaseURL, APIKey: "sk-env", Model: "gpt-4.1"}, why: "OPENAI_API_KEY"},
		{name: "ANTHROPIC_BASE_URL alone selects nothing", ollamaURL: ollama.URL,
			env:  map[string]string{"ANTHROPIC_BASE_URL": ant.URL},
			want: Config{Provider: "ollama", BaseURL: ollama.URL + "/v1", Model: "qwen2.5:7b"}, why: "found a local Ollama"},
		{name: "local ollama", ollamaURL: ollama.URL,
			want: Config{Provider: "ollama", BaseURL: ollama.URL + "/v1", Model: "qwen2.5:7b"}, why: "found a local Ollama"},
		{name: "local ollama without models", ollamaURL: empty.URL,
			want: Config{Provider: "offline"}, why: "has no models"},
		{name: "nothing at all", ollamaURL: down,
			want: Config{Provider: "offline"}, why: "no model configured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := DetectOptions{
				Getenv:    func(k string) string { return tc.env[k] },
				OllamaURL: tc.ollamaURL,
			}
			if opts.OllamaURL == "" {
				opts.OllamaURL = down
			}
			got, why, err := Detect(context.Background(), tc.cfg, opts)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("config = %+v\nwant     %+v", got, tc.want)
			}
			if !strings.Contains(why, tc.why) {
				t.Fatalf("why = %q, want it to mention %q", why, tc.why)
			}
			// Every reason Detect gives has a code the UI translates (issue 24 item 8).
			if c := ReasonCode(why); c == ReasonOther {
				t.Errorf("why = %q has no reason code", why)
			}
		})
	}
}

func TestFromConfig(t *testing.T) {
	p, err := FromConfig(Config{Provider: "offline"}, OpenAIOptions{})
	if p != nil || err != nil {
		t.Fatalf("offline = %v, %v", p, err)
	}
	p, err = FromConfig(Config{Provider: "ollama", BaseURL: "http://h:1/v1", Model: "q"}, OpenAIOptions{})
	if err != nil || p.Name() != "ollama" || p.Model() != "q" || p.(*OpenAI).BaseURL() != "http://h:1/v1" {
		t.Fatalf("ollama = %v, %v", p, err)
	}
	p, err = FromConfig(Config{Provider: "anthropic", BaseURL: "https://proxy.example/v1", APIKey: "k", Model: "claude-x"},
		OpenAIOptions{IdleTimeout: time.Second})
	if a, ok := p.(*Anthropic); err != nil || !ok || p.Name() != "anthropic" || p.Model() != "claude-x" ||
		a.BaseURL() != "https://proxy.example" || a.opts.APIKey != "k" || a.opts.IdleTimeout != time.Second {
		t.Fatalf("anthropic = %#v, %v", p, err)
	}
	if _, err := FromConfig(Config{Provider: "nope"}, OpenAIOptions{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("unknown = %v", err)
	}
}
