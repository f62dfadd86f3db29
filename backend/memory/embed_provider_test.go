package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// ollamaServer is a real HTTP server speaking Ollama's /api/embed. Each
// model has scripted dims; the vectors are the builtin embedder's for those
// dims (real lexical vectors, so that vector search means something). Like
// a real model it refuses (HTTP 400) any input longer than limit tokens
// (chunk.EstimateTokens) instead of truncating it. down makes it drop every
// connection (a provider that cannot be reached); gate, when set, holds
// every request that does not contain the text gateExcept until closed.
type ollamaServer struct {
	srv    *httptest.Server
	models map[string]int
	limit  int

	down       atomic.Bool
	requests   atomic.Int64 // answered with vectors
	inputs     atomic.Int64 // inputs embedded
	rejected   atomic.Int64 // inputs over the limit (HTTP 400)
	maxReqToks atomic.Int64 // largest request, in estimated tokens
	maxReqLen  atomic.Int64 // largest request, in inputs

	mu         sync.Mutex
	gate       chan struct{}
	gateExcept string
	gated      chan struct{} // receives when a request waits at the gate
	queryDims  map[string]int
}

func newOllamaServer(t *testing.T, models map[string]int, limit int) *ollamaServer {
	s := &ollamaServer{models: models, limit: limit, gated: make(chan struct{}, 100), queryDims: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *ollamaServer) serve(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close() // connection dropped: no HTTP answer at all
				return
			}
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if r.URL.Path != "/api/embed" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model    string   `json:"model"`
		Input    []string `json:"input"`
		Truncate *bool    `json:"truncate"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":"invalid JSON"}`, http.StatusBadRequest)
		return
	}
	dims, ok := s.models[req.Model]
	if !ok {
		http.Error(w, fmt.Sprintf(`{"error":"model %q not found, try pulling it first"}`, req.Model), http.StatusNotFound)
		return
	}
	total := 0
	for _, in := range req.Input {
		n := chunk.EstimateTokens(in)
		if n > s.limit {
			s.rejected.Add(1)
			http.Error(w, `{"error":"the input length exceeds the context length"}`, http.StatusBadRequest)
			return
		}
		total += n
	}
	s.mu.Lock()
	gate, except := s.gate, s.gateExcept
	s.mu.Unlock()
	if gate != nil && !(len(req.Input) == 1 && req.Input[0] == except) {
		s.gated <- struct{}{}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	for {
		cur := s.maxReqToks.Load()
		if int64(total) <= cur || s.maxReqToks.CompareAndSwap(cur, int64(total)) {
			break
		}
	}
	for {
		cur := s.maxReqLen.Load()
		if int64(len(req.Input)) <= cur || s.maxReqLen.CompareAndSwap(cur, int64(len(req.Input))) {
			break
		}
	}
	vecs, err := embed.NewBuiltin(embed.BuiltinOptions{Dims: dims}).Embed(r.Context(), req.Input)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.requests.Add(1)
	s.inputs.Add(int64(len(req.Input)))
	if len(req.Input) == 1 {
		s.mu.Lock()
		s.queryDims[req.Input[0]] = dims
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "embeddings": vecs})
}

// setGate holds every request except a single-input one for except (a
// query) until the returned func is called.
func (s *ollamaServer) setGate(except string) (release func()) {
	g := make(chan struct{})
	s.mu.Lock()
	s.gate, s.gateExcept = g, except
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			close(g)
		})
	}
}

// ollama returns an embedder for the server's model with fast retries.
func (s *ollamaServer) ollama(t *testing.T, model string, o embed.HTTPOptions) *embed.Ollama {
	t.Helper()
	o.BaseURL, o.Model = s.srv.URL, model
	if o.Backoff == 0 {
		o.Backoff = time.Millisecond
	}
	if o.Retries == 0 {
		o.Retries = 1
	}
	if o.Cooldown == 0 {
		o.Cooldown = -1
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	e, err := embed.NewOllama(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// chineseLine is one line of n Chinese characters (distinct sentences, so
// that its chunks differ).
func chineseLine(n int) string {
	sentences := []string{"今天我们讨论了记忆系统的设计", "向量数据库使用余弦距离进行检索", "关键词检索采用二元分词处理中文",
		"每个代理共享同一份笔记", "索引在后台自动更新", "用户可以随时手动编辑文件"}
	var b strings.Builder
	for i := 0; b.Len() < n*3+64; i++ {
		b.WriteString(sentences[i%len(sentences)])
		b.WriteString("，第")
		b.WriteString(string([]rune("一二三四五六七八九十")[i%10]))
		b.WriteString("段。")
	}
	return string([]rune(b.String())[:n])
}

// Failure class 6: a single 2,000-character line of Chinese and an embedder
// whose limit is 512 tokens. Chunks are split to fit (also when the
// chunking is configured larger than the limit), the batch does not fail,
// and nothing is skipped silently.
func TestProviderLongChineseLineFitsInputLimit(t *testing.T) {
	line := chineseLine(2000)
	if chunk.EstimateTokens(line) < 2000 {
		t.Fatalf("test line has only %d tokens", chunk.EstimateTokens(line))
	}
	srv := newOllamaServer(t, map[string]int{"zh-small": 384}, 512)
	// The server's limit is real: a raw request over it is refused.
	body, _ := json.Marshal(map[string]any{"model": "zh-small", "input": []string{line}})
	resp, err := http.Post(srv.srv.URL+"/api/embed", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || srv.rejected.Load() != 1 {
		t.Fatalf("server accepted a %d-token input (status %d)", chunk.EstimateTokens(line), resp.StatusCode)
	}
	srv.rejected.Store(0)

	for _, tc := range []struct {
		name     string
		chunking chunk.Options
	}{
		{"default chunking", chunk.Options{}},
		{"chunking larger than the limit", chunk.Options{MaxTokens: 1500, OverlapTokens: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.inputs.Store(0)
			emb := srv.ollama(t, "zh-small", embed.HTTPOptions{Dims: 384, MaxInputTokens: 512})
			f := newFixture(t, map[string]string{"memory/global/长文.md": line + "\n", "MEMORY.md": "# Memory\n\nshort note\n"}, func(o *Options) {
				o.Embedder = emb
				o.Chunking = tc.chunking
			})
			f.sync(t)
			st := f.m.Status()
			if st.State != StateReady || st.LastError != "" || st.Files != 2 {
				t.Fatalf("status = %+v; want ready with both files", st)
			}
			if n := srv.rejected.Load(); n != 0 {
				t.Fatalf("server refused %d inputs as too long", n)
			}
			// Every chunk of the long line fits and has a vector: the
			// chunks cover the whole line and all were embedded.
			recs, err := f.m.store.Files(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var longChunks int
			for _, r := range recs {
				if r.Path == "memory/global/长文.md" {
					longChunks = r.Chunks
				}
			}
			want := chunk.Split(line, chunk.Options{MaxTokens: min(512, max(tc.chunking.MaxTokens, chunk.DefaultMaxTokens)), OverlapTokens: tc.chunking.OverlapTokens})
			if longChunks != len(want) || longChunks < 4 {
				t.Fatalf("long line stored as %d chunks, want %d (≥ 4)", longChunks, len(want))
			}
			distinct := map[string]bool{}
			for _, c := range want {
				if n := chunk.EstimateTokens(c.Text); n > 512 {
					t.Fatalf("chunk of %d tokens exceeds the limit", n)
				}
				distinct[c.Hash] = true
			}
			if !strings.HasPrefix(line, want[0].Text) || !strings.HasSuffix(line, want[len(want)-1].Text) {
				t.Fatal("chunks do not cover the line from start to end")
			}
			if got := srv.inputs.Load(); got != int64(len(distinct)+1) {
				t.Fatalf("server embedded %d inputs, want %d (every distinct chunk once)", got, len(distinct)+1)
			}
			if len(f.m.pending) != 0 {
				t.Fatalf("chunks without vectors: %v", f.m.pending)
			}
			if p := vectorTop(t, f.m, want[len(want)/2].Text); p != "memory/global/长文.md" {
				t.Fatalf("vector search for a chunk of the long line found %q", p)
			}
		})
	}
}

// Batches never exceed the request budget, whatever the number of chunks.
func TestProviderBatchBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		chunking chunk.Options
	}{
		{"token budget binds", chunk.Options{}},              // ~400-token chunks: 2 per request
		{"input count binds", chunk.Options{MaxTokens: 100}}, // ~100-token chunks: 4 per request
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newOllamaServer(t, map[string]int{"m": 64}, 512)
			var b strings.Builder
			for j := range 300 {
				fmt.Fprintf(&b, "Line %d: the deploy of service %d on host %d went fine, 部署顺利。\n", j, j*7, j%13)
			}
			emb := srv.ollama(t, "m", embed.HTTPOptions{Dims: 64, BatchTokens: 1000, MaxBatch: 4})
			f := newFixture(t, map[string]string{"memory/global/big.md": b.String()}, func(o *Options) {
				o.Embedder = emb
				o.Chunking = tc.chunking
			})
			f.sync(t)
			if st := f.m.Status(); st.State != StateReady {
				t.Fatalf("status = %+v", st)
			}
			if srv.requests.Load() < 5 || srv.maxReqLen.Load() < 2 {
				t.Fatalf("%d requests, at most %d inputs each; the test needs several multi-input batches", srv.requests.Load(), srv.maxReqLen.Load())
			}
			if tok, n := srv.maxReqToks.Load(), srv.maxReqLen.Load(); tok > 1000 || n > 4 {
				t.Fatalf("largest request: %d tokens, %d inputs; budget 1000 tokens, 4 inputs", tok, n)
			}
			if got, want := srv.inputs.Load(), int64(f.m.Status().Chunks); got != want {
				t.Fatalf("%d inputs embedded for %d chunks", got, want)
			}
		})
	}
}

// Failure class 3: no embedding provider reachable. Keyword search works and
// the status says keyword-only with the real chunk count, also after a
// restart, never "ready"; when the provider is back, the periodic rescan
// adds the vectors (state ready) without a restart, embedding only what is
// missing.
func TestProviderDownKeywordOnlyThenRecovers(t *testing.T) {
	for _, tc := range []struct {
		name string
		dims int // configured dims; 0 = learned from the provider
	}{
		{"configured dims", 384},
		{"dims learned from the provider", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newOllamaServer(t, map[string]int{"nomic-embed-text": 384}, 2048)
			srv.down.Store(true)
			emb := srv.ollama(t, "nomic-embed-text", embed.HTTPOptions{Dims: tc.dims})
			f := newFixture(t, baseFiles, func(o *Options) { o.Embedder = emb; o.ProbeTimeout = 5 * time.Second })
			wantChunks := 0
			for rel, c := range baseFiles {
				if classify(rel).indexed {
					wantChunks += len(chunk.Split(c, chunk.Options{}))
				}
			}
			f.sync(t)
			st := f.m.Status()
			if st.State != StateKeywordOnly || st.Chunks != wantChunks || st.Files != 6 || st.Provider != "ollama" {
				t.Fatalf("status with the provider down = %+v; want keyword-only, %d chunks, 6 files, provider ollama", st, wantChunks)
			}
			if !strings.Contains(st.LastError, fmt.Sprintf("%d chunk(s) in 6 file(s) have no vector yet", wantChunks)) || !strings.Contains(st.LastError, srv.srv.URL) {
				t.Errorf("LastError = %q; want the missing vectors and the provider's URL", st.LastError)
			}
			if rs := f.search(t, "QK-7731"); !hasPath(rs, "memory/2024-05-01.md") {
				t.Fatalf("keyword search with the provider down: %v", resultPaths(rs))
			}
			if rs := f.search(t, "向量数据库"); !hasPath(rs, "memory/2024-05-02.md") {
				t.Fatalf("Chinese keyword search with the provider down: %v", resultPaths(rs))
			}

			// A restart while the provider is still down keeps saying so.
			f.m.Close()
			f.open(t, func(o *Options) {
				o.Embedder = emb
				o.ProbeTimeout = 5 * time.Second
				o.RescanInterval = 100 * time.Millisecond
				o.DisableWatcher = true
			})
			if st := f.m.Status(); st.State != StateKeywordOnly || st.Chunks != wantChunks {
				t.Fatalf("status after restart with the provider down = %+v", st)
			}

			srv.down.Store(false)
			runManager(t, f.m)
			poll(t, "vectors added after the provider came back", 30*time.Second, func() bool {
				return f.m.Status().State == StateReady
			})
			st = f.m.Status()
			if st.Chunks != wantChunks || st.Dims != 384 || st.LastError != "" {
				t.Fatalf("status after recovery = %+v", st)
			}
			if d := f.m.store.Meta().Dims; d != 384 {
				t.Fatalf("index dims after recovery = %d, want 384", d)
			}
			// Only the missing vectors were embedded (plus the dims probe
			// and queries, which are single inputs).
			before := srv.inputs.Load()
			if before < int64(wantChunks) {
				t.Fatalf("server embedded %d inputs for %d chunks", before, wantChunks)
			}
			if p := vectorTop(t, f.m, "The novel's protagonist is called Mirela and lives in Lisbon."); p != "memory/roles/writer/MEMORY.md" {
				t.Errorf("vector search after recovery found %q", p)
			}
		})
	}
}

// Failure class 5: switching from a 384-dim to a 768-dim model rebuilds the
// index into a new one; during the rebuild searches answer from the old
// index (keyword leg only: the query is embedded in 768 dims and the old
// index has 384); no query ever compares vectors of different sizes.
func TestProviderDimsSwitchRebuildsWhileSearching(t *testing.T) {
	srv := newOllamaServer(t, map[string]int{"mini-384": 384, "base-768": 768}, 2048)
	small := srv.ollama(t, "mini-384", embed.HTTPOptions{})
	f := newFixture(t, baseFiles, func(o *Options) { o.Embedder = small })
	f.sync(t)
	if st := f.m.Status(); st.State != StateReady || st.Dims != 384 {
		t.Fatalf("status with the 384-dim model = %+v", st)
	}
	chunks := f.m.Status().Chunks
	f.m.Close()

	large := srv.ollama(t, "base-768", embed.HTTPOptions{}) // dims learned: 768
	f.open(t, func(o *Options) { o.Embedder = large })
	st := f.m.Status()
	if st.State != StateKeywordOnly || st.Chunks != chunks || st.Dims != 768 || st.Model != "base-768" {
		t.Fatalf("status before the rebuild = %+v", st)
	}
	old := f.m.store
	if old.Compatible() || old.Meta().Dims != 384 {
		t.Fatalf("old index meta %+v compatible=%v", old.Meta(), old.Compatible())
	}
	// The old index never uses a query vector of other dims.
	q768, err := large.Embed(context.Background(), []string{"Mirela"})
	if err != nil {
		t.Fatal(err)
	}
	if hits, err := old.Search(context.Background(), index.Query{Text: "Mirela", Vector: q768[0], MaxResults: 6, MinScore: -1}); err != nil || len(hits) == 0 {
		t.Fatalf("old index with a 768-dim query: %d hits, %v", len(hits), err)
	}

	const query = "Mirela Lisbon"
	release := srv.setGate(query)
	defer release()
	done := make(chan error, 1)
	go func() { done <- f.m.Sync(context.Background()) }()
	select {
	case <-srv.gated: // the rebuild is embedding into the new index
	case err := <-done:
		t.Fatalf("rebuild finished without embedding: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("rebuild never asked the provider")
	}
	if st := f.m.Status(); st.State != StateIndexing {
		t.Errorf("state during the rebuild = %s", st.State)
	}
	r, err := f.m.Search(context.Background(), SearchOptions{Query: query})
	if err != nil || !hasPath(r.Results, "memory/roles/writer/MEMORY.md") {
		t.Fatalf("search during the rebuild: %v, %v", resultPaths(r.Results), err)
	}
	srv.mu.Lock()
	qd := srv.queryDims[query]
	srv.mu.Unlock()
	cur, unlock, err := f.m.currentStore()
	if err != nil {
		t.Fatal(err)
	}
	if cur != old || cur.Meta().Dims != 384 || qd != 768 {
		t.Fatalf("during the rebuild: searched index dims %d (old index: %v), query dims %d", cur.Meta().Dims, cur == old, qd)
	}
	unlock()
	release()
	if err := <-done; err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	st = f.m.Status()
	if st.State != StateReady || st.Chunks != chunks || st.Dims != 768 {
		t.Fatalf("status after the rebuild = %+v", st)
	}
	if m := f.m.store.Meta(); m.Dims != 768 || m.Model != "base-768" || !f.m.store.Compatible() {
		t.Fatalf("index meta after the rebuild = %+v", m)
	}
	if _, err := os.Stat(filepath.Join(f.idx, index.StagingDir)); !os.IsNotExist(err) {
		t.Errorf("staging left behind")
	}
	if rs := f.search(t, query); len(rs) == 0 || rs[0].Path != "memory/roles/writer/MEMORY.md" {
		t.Errorf("search after the rebuild: %v", resultPaths(rs))
	}
	if p := vectorTop(t, f.m, "The novel's protagonist is called Mirela and lives in Lisbon."); p != "memory/roles/writer/MEMORY.md" {
		t.Errorf("768-dim vector search after the rebuild found %q", p)
	}
}

// The embedding cache (provider, model, dims, content hash) is hit on
// re-index: an unchanged file embeds nothing, an edit embeds only the new
// chunks, a copy embeds nothing.
func TestProviderEmbeddingCacheHit(t *testing.T) {
	srv := newOllamaServer(t, map[string]int{"m": 128}, 2048)
	emb := srv.ollama(t, "m", embed.HTTPOptions{Dims: 128})
	var long strings.Builder
	for i := range 120 {
		fmt.Fprintf(&long, "Paragraph %d of the project log: the team shipped build %d and wrote notes.\n", i, i*7)
	}
	f := newFixture(t, map[string]string{"memory/global/log.md": long.String(), "MEMORY.md": "# Memory\n\nprefers tea\n"}, func(o *Options) { o.Embedder = emb })
	f.sync(t)
	full := srv.inputs.Load()
	chunks := int64(f.m.Status().Chunks)
	if full != chunks || chunks < 5 {
		t.Fatalf("first sync embedded %d inputs for %d chunks", full, chunks)
	}

	for _, step := range []struct {
		name   string
		change func()
		max    int64
	}{
		{"touch (same content)", func() {
			now := time.Now().Add(time.Minute)
			_ = os.Chtimes(filepath.Join(f.ws, "memory/global/log.md"), now, now)
		}, 0},
		{"edit the last line", func() {
			writeFile(t, f.ws, "memory/global/log.md", long.String()+"One more line at the end.\n")
		}, 2},
		{"copy to a new path", func() {
			writeFile(t, f.ws, "memory/global/copy.md", long.String()+"One more line at the end.\n")
		}, 0},
	} {
		before := srv.inputs.Load()
		step.change()
		f.sync(t)
		if got := srv.inputs.Load() - before; got > step.max {
			t.Errorf("%s: %d inputs embedded, want at most %d (cache)", step.name, got, step.max)
		}
		if st := f.m.Status(); st.State != StateReady {
			t.Errorf("%s: status %+v", step.name, st)
		}
	}
}

// A provider that answers with vectors of the wrong size never gets them
// into the index: the chunks are stored without vectors and the status
// says why.
func TestProviderWrongDimsNotStored(t *testing.T) {
	srv := newOllamaServer(t, map[string]int{"m": 256}, 2048)
	emb := srv.ollama(t, "m", embed.HTTPOptions{Dims: 384}) // configured wrong
	f := newFixture(t, baseFiles, func(o *Options) { o.Embedder = emb })
	f.sync(t)
	st := f.m.Status()
	if st.State != StateKeywordOnly || st.Chunks == 0 || !strings.Contains(st.LastError, "256 dims, want 384") {
		t.Fatalf("status = %+v; want keyword-only naming both sizes", st)
	}
	if !errors.Is(embedErrOf(t, emb), embed.ErrDimsMismatch) {
		t.Fatal("the embedder's error is not ErrDimsMismatch")
	}
	if rs := f.search(t, "Mirela"); !hasPath(rs, "memory/roles/writer/MEMORY.md") {
		t.Fatalf("keyword search: %v", resultPaths(rs))
	}
}

// vectorTop runs the vector leg alone (a keyword text that matches nothing)
// with the embedding of text and returns the top hit's path ("" for none).
func vectorTop(t *testing.T, m *Manager, text string) string {
	t.Helper()
	vs, err := m.emb.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatal(err)
	}
	st, release, err := m.currentStore()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	hits, err := st.Search(context.Background(), index.Query{Text: "qqqzzzxxx", Vector: vs[0], MaxResults: 1, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 {
		return ""
	}
	return hits[0].Path
}

func embedErrOf(t *testing.T, e embed.Embedder) error {
	t.Helper()
	_, err := e.Embed(context.Background(), []string{"x"})
	return err
}

// A provider that hangs never holds a search: the query's embedding is
// bounded by QueryTimeout and the search answers from the keyword leg.
func TestProviderHangingQueryFallsBackToKeywords(t *testing.T) {
	srv := newOllamaServer(t, map[string]int{"m": 64}, 2048)
	emb := srv.ollama(t, "m", embed.HTTPOptions{Dims: 64, Timeout: time.Hour})
	f := newFixture(t, baseFiles, func(o *Options) { o.Embedder = emb; o.QueryTimeout = 200 * time.Millisecond })
	f.sync(t)
	release := srv.setGate("") // every request now hangs
	defer release()
	if rs := f.search(t, "QK-7731"); !hasPath(rs, "memory/2024-05-01.md") {
		t.Fatalf("search with a hanging provider: %v", resultPaths(rs))
	}
	// The provider's handler may get to the gate after the search gave up
	// on it (its goroutine is scheduled when it is): wait for it, bounded.
	select {
	case <-srv.gated:
	case <-time.After(30 * time.Second):
		t.Fatal("the query was never sent to the provider")
	}
}
