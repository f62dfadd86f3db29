package atrium

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/memorytest"
)

// gatedEmbeddings is a real OpenAI-compatible embeddings server (vectors
// of the builtin embedder) whose batch requests (more than one input:
// indexing and the vector rebuild, never a query) wait while its gate is
// held.
type gatedEmbeddings struct {
	*httptest.Server
	gate memorytest.Gate
}

func newGatedEmbeddings(t *testing.T) *gatedEmbeddings {
	g := &gatedEmbeddings{}
	b := embed.NewBuiltin(embed.BuiltinOptions{})
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if len(req.Input) > 1 && g.gate.Wait(r.Context()) != nil {
			return
		}
		vs, err := b.Embed(r.Context(), req.Input)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		data := make([]map[string]any, len(vs))
		for i, v := range vs {
			data[i] = map[string]any{"index": i, "embedding": v}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(func() {
		g.gate.Release()
		g.Close()
	})
	return g
}

// TestVectorIndexDamageOnRunningApp: the vector index of a running app is
// damaged (a shadow table of sqlite-vec dropped, the embedding cache
// emptied, by another process): memory.search keeps answering by keywords
// over the WebSocket, health and memory.status say degraded with the
// reason while the vector index is rebuilt from the stored chunks in the
// background, then ready, with the vector leg back. (Damage found across
// a restart: backend/memory's and backend/cli's tests.)
func TestVectorIndexDamageOnRunningApp(t *testing.T) {
	emb := newGatedEmbeddings(t)
	var home string
	edit := func(ws string, o *Options) {
		home = o.Layout.Home
		must(t, os.MkdirAll(home, 0o700))
		cfg := `{"memory":{"embedding":{"provider":"openai","model":"builtin-over-http","apiKey":"k","baseUrl":"` + emb.URL + `/v1"}}}`
		must(t, os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600))
	}
	a, _ := startAppWith(t, func(string) string { return "" }, edit)
	cl := dial(t, a)
	health := func() (state, reason string) {
		var h struct {
			Memory struct {
				State  string `json:"state"`
				Reason string `json:"reason"`
			} `json:"memory"`
		}
		cl.ok("health", nil, &h)
		return h.Memory.State, h.Memory.Reason
	}
	waitReady := func(what string) {
		t.Helper()
		deadline := time.Now().Add(120 * time.Second)
		for {
			st, reason := health()
			if st == memory.StateReady {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: memory state %q (%s), want ready", what, st, reason)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	search := func(q, mode string) memory.SearchResponse {
		t.Helper()
		var res memory.SearchResponse
		cl.ok("memory.search", map[string]any{"query": q, "mode": mode}, &res)
		return res
	}
	waitReady("initial index")
	if res := search("deploy key rotation", "vector"); len(res.Results) == 0 || res.Results[0].Path != "MEMORY.md" {
		t.Fatalf("vector search before the damage: %+v", res)
	}

	db := memorytest.IndexDB(t, home)
	damage := func(stmts ...string) {
		t.Helper()
		memorytest.Damage(t, db, append(stmts, memorytest.DropEmbeddingCache)...)
	}
	wantDegraded := func() {
		t.Helper()
		for _, q := range []struct{ q, path string }{{"deploy key rotation", "MEMORY.md"}, {"数据库连接池", "memory/2026-11-01.md"}} {
			res := search(q.q, "")
			if len(res.Results) == 0 || res.Results[0].Path != q.path {
				t.Fatalf("search %q on a damaged vector index: %+v", q.q, res)
			}
		}
		st, reason := health()
		if st != memory.StateDegraded || !strings.Contains(reason, "vector index damaged") {
			t.Fatalf("health memory = %q %q, want degraded with the reason", st, reason)
		}
		var ms memory.Status
		cl.ok("memory.status", nil, &ms)
		if ms.State != memory.StateDegraded || ms.Degraded != reason {
			t.Fatalf("memory.status = %+v", ms)
		}
	}

	emb.gate.Hold() // the rebuild waits in the embedder until released
	damage("DROP TABLE vec_chunks_chunks")
	wantDegraded()
	if a.Model.Provider != "offline" {
		t.Logf("a model was detected (%s); the offline chat answer is not tried", a.Model.Provider)
	} else {
		// The offline chat answer searches memory too.
		var sent struct{ RunID string }
		cl.ok("chat.send", map[string]any{"profileId": "main", "message": "数据库连接池调到了多少？", "idempotencyKey": "vec-offline-1"}, &sent)
		var final struct {
			Message struct{ Content string } `json:"message"`
		}
		deadline := time.After(60 * time.Second)
		for final.Message.Content == "" {
			select {
			case e := <-cl.events:
				if !strings.Contains(string(e.Payload), sent.RunID) {
					continue
				}
				switch e.Event {
				case "chat.final":
					must(t, json.Unmarshal(e.Payload, &final))
				case "chat.error":
					t.Fatalf("offline chat on a damaged vector index: %s", e.Payload)
				}
			case <-deadline:
				t.Fatal("no chat.final within 60 s")
			}
		}
		if !strings.Contains(final.Message.Content, "32") || !strings.Contains(final.Message.Content, "memory/2026-11-01.md") {
			t.Fatalf("offline answer on a damaged vector index does not quote the memory:\n%s", final.Message.Content)
		}
	}
	emb.gate.Release()
	waitReady("background rebuild")
	if res := search("deploy key rotation", "vector"); len(res.Results) == 0 || res.Results[0].Path != "MEMORY.md" {
		t.Fatalf("vector search after the rebuild: %+v", res)
	}
}
