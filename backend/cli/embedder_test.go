package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// embeddingServer is a real HTTP server speaking Ollama's /api/embed and the
// OpenAI /v1/embeddings API, answering with scripted vectors of dims (byte
// counts folded into dims buckets). It refuses OpenAI requests without
// "Bearer <key>" (HTTP 401).
func embeddingServer(t *testing.T, dims int, key string) (*httptest.Server, *atomic.Int64) {
	var inputs atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		vecs := make([][]float64, len(req.Input))
		for i, in := range req.Input {
			vecs[i] = make([]float64, dims)
			for _, b := range []byte(in) {
				vecs[i][int(b)%dims]++
			}
		}
		inputs.Add(int64(len(req.Input)))
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/embed":
			_ = json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "embeddings": vecs})
		case "/v1/embeddings":
			if r.Header.Get("Authorization") != "Bearer "+key {
				http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
				return
			}
			data := make([]map[string]any, len(vecs))
			for i, v := range vecs {
				data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &inputs
}

// The memory commands build the embedder config.json selects (the same
// function as the app), and status shows it; the openai key and base URL
// come from the environment when config.json has none.
func TestMemoryCommandsUseConfiguredEmbedder(t *testing.T) {
	srv, inputs := embeddingServer(t, 96, "sk-test")
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // nothing listens there any more
	cases := []struct {
		name   string
		config string
		env    map[string]string
		status []string // substrings of `memory status` after `memory index`
		embeds bool
	}{
		{
			name:   "ollama",
			config: `{"memory":{"embedding":{"provider":"ollama","model":"nomic-embed-text","baseUrl":"` + srv.URL + `"}}}`,
			status: []string{"State:       ready", "ollama / nomic-embed-text (96 dims)", "Chunks:      2"},
			embeds: true,
		},
		{
			name:   "openai from the environment",
			config: `{"memory":{"embedding":{"provider":"openai","model":"text-embedding-3-small","dims":96}}}`,
			env:    map[string]string{"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": "sk-test"},
			status: []string{"State:       ready", "openai / text-embedding-3-small (96 dims)"},
			embeds: true,
		},
		{
			name:   "provider unreachable",
			config: `{"memory":{"embedding":{"provider":"ollama","dims":768,"baseUrl":"` + deadURL + `","timeoutSeconds":5}}}`,
			status: []string{"State:       keyword-only", "Chunks:      2", "have no vector yet", "ollama / nomic-embed-text (768 dims)"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home, ws := workspace(t)
			if err := os.MkdirAll(home, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			before := inputs.Load()
			common := []string{"--home", home, "--workspace", ws}
			if code, out, errOut := runCLI(t, tc.env, append([]string{"memory", "index"}, common...)...); code != 0 {
				t.Fatalf("memory index: exit %d\n%s\n%s", code, out, errOut)
			}
			if got := inputs.Load() - before; tc.embeds && got < 2 {
				t.Fatalf("the configured provider embedded %d inputs", got)
			}
			code, out, errOut := runCLI(t, tc.env, append([]string{"memory", "status"}, common...)...)
			if code != 0 {
				t.Fatalf("memory status: exit %d\n%s\n%s", code, out, errOut)
			}
			for _, s := range tc.status {
				if !strings.Contains(out, s) {
					t.Errorf("status lacks %q:\n%s", s, out)
				}
			}
			// Keyword search answers whatever the provider's state.
			code, out, errOut = runCLI(t, tc.env, append([]string{"memory", "search", "bluefin"}, common...)...)
			if code != 0 || !strings.Contains(out, "MEMORY.md") {
				t.Fatalf("memory search: exit %d\n%s\n%s", code, out, errOut)
			}
		})
	}
}

func TestMemoryCommandsRejectBadEmbeddingConfig(t *testing.T) {
	home, ws := workspace(t)
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"memory":{"embedding":{"provider":"cohere"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, nil, "memory", "status", "--home", home, "--workspace", ws)
	if code != 1 || !strings.Contains(errOut, `provider "cohere" is not one of`) {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
}
