package atrium

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/model"
)

func TestProfileModel(t *testing.T) {
	base := model.Config{Provider: "openai", BaseURL: model.DefaultOpenAIBaseURL, APIKey: "sk-app", Model: "gpt-4.1"}
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-env"}
	getenv := func(k string) string { return env[k] }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name    string
		persona string // "" = no config.md
		cfg     config.Config
		want    model.Config
		why     string
	}{
		{name: "no persona, no profile settings", want: base, why: "uses the app's model"},
		{name: "persona picks Anthropic",
			persona: "---\ntype: role\ndescription: 写作助手\nmodel:\n  provider: anthropic\n  model: claude-haiku-4-5\n---\n# Writer\n",
			want:    model.Config{Provider: "anthropic", BaseURL: model.DefaultAnthropicBaseURL, APIKey: "sk-ant-env", Model: "claude-haiku-4-5"},
			why:     "from memory/roles/writer/config.md"},
		{name: "config.json profile wins",
			persona: "---\nmodel: claude-haiku-4-5\n---\n",
			cfg:     config.Config{Profiles: map[string]config.Profile{"writer": {Model: model.Config{Model: "gpt-4.1-mini"}}}},
			want:    model.Config{Provider: "openai", BaseURL: model.DefaultOpenAIBaseURL, APIKey: "sk-app", Model: "gpt-4.1-mini"}},
		{name: "a key in the persona is refused",
			persona: "---\nmodel: {provider: anthropic, apiKey: sk-ant-leak}\n---\n",
			want:    base, why: "may not hold an API key"},
		{name: "malformed front matter",
			persona: "---\nmodel: [unclosed\n---\n",
			want:    base, why: "unusable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if tc.persona != "" {
				dir := filepath.Join(ws, "memory", "roles", "writer")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "config.md"), []byte(tc.persona), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, why := ProfileModel(ws, tc.cfg, base, "writer", getenv, log)
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Fatalf("got %+v (%q)\nwant %+v (with %q)", got, why, tc.want, tc.why)
			}
		})
	}
}
