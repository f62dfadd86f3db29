package atrium

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/paths"
)

// The app opens its memory with the embedder config.json selects.
func TestAppUsesConfiguredEmbedder(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"memory":{"embedding":{"provider":"ollama","model":"bge-m3","dims":1024,"baseUrl":"http://127.0.0.1:1"}}}`
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), Options{
		Layout: paths.Layout{Home: home, Workspace: filepath.Join(dir, "ws")},
		Port:   -1,
		Getenv: func(string) string { return "" },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if st := a.Memory.Status(); st.Provider != "ollama" || st.Model != "bge-m3" || st.Dims != 1024 {
		t.Fatalf("memory status = %s/%s/%d, want ollama/bge-m3/1024", st.Provider, st.Model, st.Dims)
	}
}

// NewEmbedder: config first, then OPENAI_API_KEY / OPENAI_BASE_URL, against
// a real OpenAI-compatible server that checks the key.
func TestNewEmbedderOpenAIEnvFallback(t *testing.T) {
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		if r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": []map[string]any{{"index": 0, "embedding": []float64{3, 4}}}})
	}))
	defer srv.Close()
	env := map[string]string{"OPENAI_API_KEY": "sk-env", "OPENAI_BASE_URL": srv.URL + "/v1"}
	for _, tc := range []struct {
		name     string
		c        config.Embedding
		wantAuth string
	}{
		{"key and URL from the environment", config.Embedding{Provider: "openai"}, "Bearer sk-env"},
		{"config key wins", config.Embedding{Provider: "openai", APIKey: "sk-config"}, "Bearer sk-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEmbedder(tc.c, func(k string) string { return env[k] }, nil)
			if err != nil {
				t.Fatal(err)
			}
			vs, err := e.Embed(context.Background(), []string{"hello"})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := auth.Load().(string); got != tc.wantAuth || len(vs) != 1 || vs[0][0] != 0.6 || vs[0][1] != 0.8 {
				t.Fatalf("auth %q, vectors %v; want %q and the unit vector (0.6, 0.8)", got, vs, tc.wantAuth)
			}
		})
	}
	if _, err := NewEmbedder(config.Embedding{Provider: "nope"}, nil, nil); err == nil {
		t.Fatal("unknown provider accepted")
	}
}
