package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/model"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		body    string // "" = no file
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{name: "missing file", check: func(t *testing.T, c Config) {
			if c.Model.Provider != "" || c.Gateway.Port != 0 {
				t.Fatalf("not zero: %+v", c)
			}
		}},
		{name: "model block", body: `{"model":{"provider":"openai","baseUrl":"http://127.0.0.1:8080/v1","model":"qwen"},"gateway":{"port":18800}}`,
			check: func(t *testing.T, c Config) {
				if c.Model.Provider != "openai" || c.Model.BaseURL != "http://127.0.0.1:8080/v1" || c.Model.Model != "qwen" || c.Gateway.Port != 18800 {
					t.Fatalf("got %+v", c)
				}
			}},
		{name: "profiles", body: `{"model":{"provider":"openai","model":"gpt-4.1"},"profiles":{"writer":{"model":{"provider":"anthropic","model":"claude-haiku-4-5","apiKey":"sk-ant-w"}},"数据分析师":{"model":{"model":"gpt-4.1-mini"}}}}`,
			check: func(t *testing.T, c Config) {
				want := model.Config{Provider: "anthropic", Model: "claude-haiku-4-5", APIKey: "sk-ant-w"}
				if got := c.ProfileModel("writer"); got != want {
					t.Fatalf("writer = %+v", got)
				}
				if got := c.ProfileModel("数据分析师"); got != (model.Config{Model: "gpt-4.1-mini"}) {
					t.Fatalf("数据分析师 = %+v", got)
				}
				if got := c.ProfileModel("main"); got != (model.Config{}) {
					t.Fatalf("main = %+v", got)
				}
			}},
		{name: "profile with unknown provider", body: `{"profiles":{"writer":{"model":{"provider":"claude"}}}}`,
			wantErr: `profiles.writer.model: unknown model provider "claude"`},
		{name: "profile with bad base url", body: `{"profiles":{"writer":{"model":{"baseUrl":"api.anthropic.com"}}}}`,
			wantErr: "profiles.writer.model: model base URL \"api.anthropic.com\" is not an http(s) URL"},
		{name: "profile with unknown field", body: `{"profiles":{"writer":{"persona":"x"}}}`, wantErr: "unknown field"},
		{name: "syntax error names line", body: "{\n  \"model\": {\n    \"provider\": \"openai\",,\n  }\n}", wantErr: ":3:"},
		{name: "unknown field", body: `{"modle":{}}`, wantErr: "unknown field"},
		{name: "sessions", body: `{"sessions":{"reset":"daily+idle","dailyAt":"03:30","idleMinutes":90}}`,
			check: func(t *testing.T, c Config) {
				if c.Sessions != (Sessions{Reset: ResetDailyIdle, DailyAt: "03:30", IdleMinutes: 90}) {
					t.Fatalf("got %+v", c.Sessions)
				}
			}},
		{name: "sessions bad mode", body: `{"sessions":{"reset":"weekly"}}`, wantErr: `sessions.reset "weekly"`},
		{name: "sessions bad time", body: `{"sessions":{"dailyAt":"4:00"}}`, wantErr: `sessions.dailyAt "4:00"`},
		{name: "sessions idle needs minutes", body: `{"sessions":{"reset":"idle"}}`, wantErr: "needs sessions.idleMinutes"},
		{name: "wrong type", body: `{"gateway":{"port":"x"}}`, wantErr: "config"},
		{name: "port range", body: `{"gateway":{"port":70000}}`, wantErr: "out of range"},
		{name: "ollama embedding", body: `{"memory":{"embedding":{"provider":"ollama","model":"bge-m3","baseUrl":"http://gpu:11434","dims":1024,"timeoutSeconds":60,"maxInputTokens":8192}}}`,
			check: func(t *testing.T, c Config) {
				want := Embedding{Provider: "ollama", Model: "bge-m3", BaseURL: "http://gpu:11434", Dims: 1024, TimeoutSeconds: 60, MaxInputTokens: 8192}
				if c.Memory.Embedding != want {
					t.Fatalf("got %+v", c.Memory.Embedding)
				}
			}},
		{name: "openai embedding", body: `{"memory":{"embedding":{"provider":"openai","model":"text-embedding-3-small","apiKey":"sk-x"}}}`,
			check: func(t *testing.T, c Config) {
				if e := c.Memory.Embedding; e.Provider != "openai" || e.APIKey != "sk-x" || e.Model != "text-embedding-3-small" {
					t.Fatalf("got %+v", e)
				}
			}},
		{name: "builtin dims", body: `{"memory":{"embedding":{"provider":"builtin","dims":256}}}`,
			check: func(t *testing.T, c Config) {
				if c.Memory.Embedding.Dims != 256 {
					t.Fatalf("got %+v", c.Memory.Embedding)
				}
			}},
		{name: "unknown provider", body: `{"memory":{"embedding":{"provider":"cohere"}}}`, wantErr: `provider "cohere" is not one of`},
		{name: "negative dims", body: `{"memory":{"embedding":{"provider":"ollama","dims":-1}}}`, wantErr: "dims -1 out of range"},
		{name: "timeout range", body: `{"memory":{"embedding":{"provider":"openai","timeoutSeconds":99999}}}`, wantErr: "timeoutSeconds 99999 out of range"},
		{name: "max tokens range", body: `{"memory":{"embedding":{"provider":"openai","maxInputTokens":-5}}}`, wantErr: "maxInputTokens -5 out of range"},
		{name: "base URL without scheme", body: `{"memory":{"embedding":{"provider":"ollama","baseUrl":"localhost:11434"}}}`, wantErr: "not an http(s) URL"},
		{name: "builtin with a URL", body: `{"memory":{"embedding":{"baseUrl":"http://x"}}}`, wantErr: "not used by the builtin provider"},
		{name: "search options", body: `{"memory":{"search":{"vectorWeight":0.5,"mmr":true,"mmrLambda":0.6,"temporalDecay":true,"halfLifeDays":14,"rewrite":true,"rewriteTimeoutMs":2500}}}`,
			check: func(t *testing.T, c Config) {
				want := Search{VectorWeight: 0.5, MMR: true, MMRLambda: 0.6, TemporalDecay: true, HalfLifeDays: 14, Rewrite: true, RewriteTimeoutMs: 2500}
				if c.Memory.Search != want {
					t.Fatalf("got %+v", c.Memory.Search)
				}
			}},
		{name: "vector weight range", body: `{"memory":{"search":{"vectorWeight":1.5}}}`, wantErr: "vectorWeight 1.5 is not in [0,1]"},
		{name: "mmr lambda range", body: `{"memory":{"search":{"mmrLambda":-0.1}}}`, wantErr: "mmrLambda -0.1 is not in [0,1]"},
		{name: "half-life range", body: `{"memory":{"search":{"halfLifeDays":-3}}}`, wantErr: "halfLifeDays -3"},
		{name: "rewrite timeout range", body: `{"memory":{"search":{"rewrite":true,"rewriteTimeoutMs":60000}}}`, wantErr: "rewriteTimeoutMs 60000 out of range"},
		{name: "exec approvals", body: `{"agents":{"exec":{"approval":"allowlist","allowlist":["/usr/bin/git","/usr/local/bin/*"]}}}`,
			check: func(t *testing.T, c Config) {
				if e := c.Agents.Exec; e.Approval != "allowlist" || len(e.Allowlist) != 2 {
					t.Fatalf("got %+v", e)
				}
			}},
		{name: "exec approval mode", body: `{"agents":{"exec":{"approval":"sometimes"}}}`, wantErr: `agents.exec.approval "sometimes"`},
		{name: "exec allowlist relative", body: `{"agents":{"exec":{"allowlist":["git"]}}}`, wantErr: "absolute path glob"},
		{name: "unknown search field", body: `{"memory":{"search":{"mmrOn":true}}}`, wantErr: "unknown field"},
		{name: "unknown embedding field", body: `{"memory":{"embedding":{"provider":"ollama","url":"http://x"}}}`, wantErr: "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.json")
			if tt.body != "" {
				if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestCheckBind(t *testing.T) {
	for _, ok := range []string{"", "loopback", "lan", "127.0.0.2", "192.168.1.20", "::1", "fd00::5"} {
		if err := CheckBind(ok); err != nil {
			t.Errorf("CheckBind(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"LAN", "all", "0.0.0.0", "::", "127.0.0.1", "224.0.0.251", "ff02::fb", "fe80::1%lo", "192.168.1.20:80", "host.local"} {
		if err := CheckBind(bad); err == nil || !strings.Contains(err.Error(), "gateway.bind") {
			t.Errorf("CheckBind(%q) = %v, want an error naming gateway.bind", bad, err)
		}
	}
}

// TestPasswordInBaseURLRefused: a user name or password, a query or a
// fragment in a server's URL (model, a profile's model, the embedder,
// Talk's speech servers) is refused with a message that names the key and
// never the secret: a URL is shown in Settings, errors and logs, a key is
// not (and the API's paths are added to a base URL, after any query).
func TestPasswordInBaseURLRefused(t *testing.T) {
	const secret = "hunter2-s3cret"
	for i, u := range []string{
		"https://me:" + secret + "@llm.example/v1",
		"https://llm.example/v1?key=" + secret,
		"https://llm.example/v1?" + secret,
		"https://llm.example/v1#" + secret,
	} {
		t.Run(fmt.Sprint("url", i), func(t *testing.T) { checkSecretURLRefused(t, u, secret) })
	}
}

func checkSecretURLRefused(t *testing.T, u, secret string) {
	t.Helper()
	for name, body := range map[string]string{
		"model":         `{"model":{"provider":"openai","baseUrl":"` + u + `","model":"m"}}`,
		"profile model": `{"profiles":{"writer":{"model":{"provider":"openai","baseUrl":"` + u + `"}}}}`,
		"embedding":     `{"memory":{"embedding":{"provider":"openai","baseUrl":"` + u + `","model":"e"}}}`,
		"talk stt":      `{"talk":{"stt":{"baseUrl":"` + u + `"}}}`,
		"talk tts":      `{"talk":{"tts":{"provider":"openai","baseUrl":"` + u + `"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatalf("Load accepted a password in a URL: %s", body)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error shows the password: %v", err)
			}
			if !strings.Contains(err.Error(), "apiKey") {
				t.Fatalf("the error does not say where the key goes: %v", err)
			}
		})
	}
}
