package model

import (
	"errors"
	"strings"
	"testing"
)

func TestParseOverride(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want Override
		err  string
	}{
		{name: "absent", in: nil},
		{name: "model name only", in: " claude-haiku-4-5 ", want: Override{Model: "claude-haiku-4-5"}},
		{name: "mapping", in: map[string]any{"provider": "Anthropic", "model": "claude-haiku-4-5", "baseUrl": "https://api.anthropic.com"},
			want: Override{Provider: "anthropic", Model: "claude-haiku-4-5", BaseURL: "https://api.anthropic.com"}},
		{name: "snake case and yaml.v2 maps", in: map[any]any{"provider": "ollama", "model": "qwen2.5:7b", "base_url": "http://127.0.0.1:11434"},
			want: Override{Provider: "ollama", Model: "qwen2.5:7b", BaseURL: "http://127.0.0.1:11434"}},
		{name: "null values", in: map[string]any{"provider": nil, "model": "m"}, want: Override{Model: "m"}},
		{name: "api key refused", in: map[string]any{"model": "m", "apiKey": "sk-ant-secret"}, err: "may not hold an API key"},
		{name: "api_key refused", in: map[string]any{"api_key": "sk"}, err: "may not hold an API key"},
		{name: "unknown key", in: map[string]any{"temperature": "0.2"}, err: `unknown model setting "temperature"`},
		{name: "unknown provider", in: map[string]any{"provider": "anthropix"}, err: `unknown model provider "anthropix"`},
		{name: "bad base url", in: map[string]any{"baseUrl": "ftp://x"}, err: "not an http(s) URL"},
		{name: "number", in: 3, err: "must be a model name or a mapping"},
		{name: "list value", in: map[string]any{"model": []any{"a"}}, err: "must be text"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOverride(tc.in)
			if tc.err != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrConfig with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestForProfile(t *testing.T) {
	anthropicBase := Config{Provider: "anthropic", BaseURL: DefaultAnthropicBaseURL, APIKey: "sk-ant-app", Model: "claude-sonnet-4-5"}
	openaiProxy := Config{Provider: "openai", BaseURL: "https://llm.corp.example/v1", APIKey: "sk-corp", Model: "gpt-4.1"}
	offline := Config{Provider: "offline"}
	tests := []struct {
		name string
		base Config
		s    ProfileSettings
		env  map[string]string
		want Config
		why  string
		err  string
	}{
		{name: "no settings: the app's model", base: anthropicBase, want: anthropicBase, why: "uses the app's model"},
		{name: "model only keeps provider, server and key", base: anthropicBase,
			s:    ProfileSettings{Markdown: Override{Model: "claude-haiku-4-5"}, MarkdownPath: "memory/roles/writer/config.md"},
			want: Config{Provider: "anthropic", BaseURL: DefaultAnthropicBaseURL, APIKey: "sk-ant-app", Model: "claude-haiku-4-5"},
			why:  "(from memory/roles/writer/config.md); API key from the app's model settings"},
		{name: "other provider: key from its env variable", base: openaiProxy,
			s:    ProfileSettings{Markdown: Override{Provider: "anthropic"}},
			env:  map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env", "OPENAI_API_KEY": "sk-openai"},
			want: Config{Provider: "anthropic", BaseURL: DefaultAnthropicBaseURL, APIKey: "sk-ant-env", Model: DefaultAnthropicModel},
			why:  "API key from ANTHROPIC_API_KEY"},
		{name: "other provider: env base url and model", base: offline,
			s:    ProfileSettings{Markdown: Override{Provider: "anthropic"}},
			env:  map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env", "ANTHROPIC_BASE_URL": "https://gw.example/v1", "ANTHROPIC_MODEL": "claude-opus-4-1"},
			want: Config{Provider: "anthropic", BaseURL: "https://gw.example", APIKey: "sk-ant-env", Model: "claude-opus-4-1"}},
		{name: "other provider without any key", base: anthropicBase,
			s:    ProfileSettings{Markdown: Override{Provider: "openai", Model: "gpt-4o"}},
			want: Config{Provider: "openai", BaseURL: DefaultOpenAIBaseURL, Model: "gpt-4o"},
			why:  "no API key is configured"},
		{name: "config.json wins over Markdown and brings its key", base: anthropicBase,
			s: ProfileSettings{Role: "coder", Markdown: Override{Provider: "anthropic", Model: "claude-haiku-4-5"},
				Config: Config{Provider: "openai", BaseURL: "https://llm.corp.example/v1/", APIKey: "sk-profile", Model: "qwen3-coder"}},
			want: Config{Provider: "openai", BaseURL: "https://llm.corp.example/v1", APIKey: "sk-profile", Model: "qwen3-coder"},
			why:  "profile coder uses openai model qwen3-coder at https://llm.corp.example/v1 (from the persona's front matter, config.json profiles.coder.model); API key from config.json profiles.coder.model"},
		{name: "config.json model over Markdown provider", base: openaiProxy,
			s:    ProfileSettings{Markdown: Override{Provider: "anthropic"}, Config: Config{Model: "claude-haiku-4-5"}},
			env:  map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env"},
			want: Config{Provider: "anthropic", BaseURL: DefaultAnthropicBaseURL, APIKey: "sk-ant-env", Model: "claude-haiku-4-5"}},
		{name: "Markdown base url of the app's server keeps the key", base: openaiProxy,
			s:    ProfileSettings{Markdown: Override{BaseURL: "https://llm.corp.example/v1/", Model: "gpt-4.1-mini"}},
			want: Config{Provider: "openai", BaseURL: "https://llm.corp.example/v1", APIKey: "sk-corp", Model: "gpt-4.1-mini"}},
		{name: "Markdown base url elsewhere is refused", base: openaiProxy,
			s:   ProfileSettings{Role: "writer", Markdown: Override{BaseURL: "https://collector.evil.example/v1"}, MarkdownPath: "memory/roles/writer/config.md"},
			err: "https://collector.evil.example/v1 from memory/roles/writer/config.md is neither local nor configured"},
		{name: "Markdown local server is allowed, the key is not sent to it", base: openaiProxy,
			s:    ProfileSettings{Markdown: Override{BaseURL: "http://127.0.0.1:8080/v1", Model: "qwen2.5"}},
			env:  map[string]string{"OPENAI_API_KEY": "sk-openai"},
			want: Config{Provider: "openai", BaseURL: "http://127.0.0.1:8080/v1", Model: "qwen2.5"},
			why:  "no API key is configured"},
		{name: "config.json may name any server", base: openaiProxy,
			s:    ProfileSettings{Config: Config{BaseURL: "https://other.example/v1"}},
			want: Config{Provider: "openai", BaseURL: "https://other.example/v1", Model: "gpt-4.1"}},
		{name: "env key only for the env's server", base: offline,
			s:    ProfileSettings{Config: Config{Provider: "openai", BaseURL: "https://other.example/v1"}},
			env:  map[string]string{"OPENAI_API_KEY": "sk-openai", "OPENAI_BASE_URL": "https://api.deepseek.com/v1"},
			want: Config{Provider: "openai", BaseURL: "https://other.example/v1", Model: DefaultOpenAIModel}},
		{name: "ollama", base: anthropicBase,
			s:    ProfileSettings{Markdown: Override{Provider: "ollama", Model: "qwen2.5:7b", BaseURL: "http://localhost:11434"}},
			want: Config{Provider: "ollama", BaseURL: "http://localhost:11434/v1", Model: "qwen2.5:7b"}},
		{name: "ollama default url", base: offline,
			s:    ProfileSettings{Config: Config{Provider: "ollama", Model: "phi3"}},
			want: Config{Provider: "ollama", BaseURL: DefaultOllamaURL + "/v1", Model: "phi3"}},
		{name: "ollama without a model", base: anthropicBase,
			s: ProfileSettings{Markdown: Override{Provider: "ollama"}}, err: "without naming a model"},
		{name: "offline by choice", base: anthropicBase,
			s: ProfileSettings{Markdown: Override{Provider: "offline"}}, want: offline, why: "offline provider"},
		{name: "model without any provider", base: offline,
			s: ProfileSettings{Markdown: Override{Model: "claude-haiku-4-5"}}, err: "no provider"},
		{name: "unknown provider in config.json", base: anthropicBase,
			s: ProfileSettings{Role: "x", Config: Config{Provider: "nope"}}, err: `config.json profiles.x.model: unknown model provider "nope"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why, err := ForProfile(tc.base, tc.s, func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrConfig with %q", err, tc.err)
				}
				if got != tc.base {
					t.Fatalf("on error got %+v, want the base", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("config = %+v\nwant     %+v", got, tc.want)
			}
			if !strings.Contains(why, tc.why) {
				t.Fatalf("why = %q, want it to contain %q", why, tc.why)
			}
		})
	}
}

func TestProfileContextWindow(t *testing.T) {
	tests := []struct {
		name string
		raw  any
		cfg  Config
		want int
		bad  bool
	}{
		{"front matter", map[string]any{"contextWindow": 32768}, Config{}, 32768, false},
		{"YAML float", map[string]any{"context_window": float64(8192)}, Config{}, 8192, false},
		{"config.json wins", map[string]any{"contextWindow": 32768}, Config{ContextWindow: 200000}, 200000, false},
		{"not a number", map[string]any{"contextWindow": "big"}, Config{}, 0, true},
		{"negative", map[string]any{"contextWindow": -1}, Config{}, 0, true},
	}
	base := Config{Provider: ProviderOpenAI, BaseURL: "https://api.openai.com/v1", Model: "gpt", ContextWindow: 0}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseOverride(tc.raw)
			if tc.bad {
				if err == nil {
					t.Fatalf("ParseOverride(%v) accepted", tc.raw)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := ForProfile(base, ProfileSettings{Role: "r", Markdown: o, Config: tc.cfg}, nil)
			if err != nil || out.ContextWindow != tc.want || out.Model != "gpt" {
				t.Fatalf("ForProfile = %+v, %v; want window %d", out, err, tc.want)
			}
		})
	}
}
