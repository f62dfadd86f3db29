package memory

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// countingEmbedder wraps the real builtin embedder and counts embedded texts.
type countingEmbedder struct {
	embed.Embedder
	texts atomic.Int64
	calls atomic.Int64
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.calls.Add(1)
	c.texts.Add(int64(len(texts)))
	return c.Embedder.Embed(ctx, texts)
}

// Lexical forwards the wrapped embedder's Lexical, so that searches weigh
// the legs as they do with the embedder itself.
func (c *countingEmbedder) Lexical() bool {
	l, ok := c.Embedder.(interface{ Lexical() bool })
	return ok && l.Lexical()
}

func newCounting(dims int) *countingEmbedder {
	return &countingEmbedder{Embedder: embed.NewBuiltin(embed.BuiltinOptions{Dims: dims})}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func writeFile(t *testing.T, ws, rel, content string) {
	t.Helper()
	p := filepath.Join(ws, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

type fixture struct {
	ws, idx string
	emb     *countingEmbedder
	m       *Manager
	logs    *syncBuffer
	changes chan ChangeEvent
}

func newFixture(t *testing.T, files map[string]string, tweak func(*Options)) *fixture {
	t.Helper()
	f := &fixture{ws: t.TempDir(), idx: filepath.Join(t.TempDir(), "index"), emb: newCounting(0), logs: &syncBuffer{}, changes: make(chan ChangeEvent, 100)}
	for rel, c := range files {
		writeFile(t, f.ws, rel, c)
	}
	f.open(t, tweak)
	return f
}

func (f *fixture) open(t *testing.T, tweak func(*Options)) {
	t.Helper()
	o := Options{
		Workspace: f.ws, IndexDir: f.idx, Embedder: f.emb,
		Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnChange: func(ev ChangeEvent) {
			select {
			case f.changes <- ev:
			default:
			}
		},
	}
	if tweak != nil {
		tweak(&o)
	}
	m, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	f.m = m
	t.Cleanup(func() { _ = m.Close() })
}

func (f *fixture) sync(t *testing.T) {
	t.Helper()
	if err := f.m.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func (f *fixture) search(t *testing.T, q string) []SearchResult {
	t.Helper()
	r, err := f.m.Search(context.Background(), SearchOptions{Query: q})
	if err != nil {
		t.Fatalf("Search %q: %v", q, err)
	}
	return r.Results
}

func hasPath(rs []SearchResult, p string) bool {
	for _, r := range rs {
		if r.Path == p {
			return true
		}
	}
	return false
}

func resultPaths(rs []SearchResult) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s:%d-%d(%.2f)", r.Path, r.StartLine, r.EndLine, r.Score))
	}
	return out
}

// poll calls cond until it is true or the deadline passes.
func poll(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var baseFiles = map[string]string{
	"MEMORY.md":                         "# Long-term memory\n\nThe user prefers espresso over filter coffee.\nDeploys happen on Tuesdays.\n",
	"memory/2024-05-01.md":              "# 2024-05-01\n\n- Fixed the login bug in the billing service.\n- Ticket QK-7731 reported by Dana.\n",
	"memory/2024-05-02.md":              "# 2024-05-02\n\n- 今天讨论了向量数据库的选型，决定使用 sqlite-vec。\n- 记忆系统需要支持中文检索。\n",
	"memory/global/decisions.md":        "# Decisions\n\nWe chose Bleve for keyword search because it is pure Go.\n",
	"memory/roles/writer/MEMORY.md":     "# Writer\n\nThe novel's protagonist is called Mirela and lives in Lisbon.\n",
	"memory/sessions/s1/context.md":     "Session scratch: waiting for the build of release 2.3.\n",
	"memory/templates/role-template.md": "# {{ROLE_NAME}}\n\ntemplate text about espresso\n",
	"AGENTS.md":                         "agents file, not memory: espresso\n",
}

func TestSyncSearchAndLayers(t *testing.T) {
	var progMu sync.Mutex
	var progress []Progress
	f := newFixture(t, baseFiles, func(o *Options) {
		o.OnProgress = func(p Progress) {
			progMu.Lock()
			progress = append(progress, p)
			progMu.Unlock()
		}
	})
	if st := f.m.Status(); st.State != StateStale || st.Files != 0 || st.LastError != "not indexed yet" {
		t.Errorf("before first sync: %+v", st)
	}
	f.sync(t)
	st := f.m.Status()
	if st.State != StateReady || st.Files != 6 || st.Chunks < 6 || st.Layout != "mixed" || st.LastSync == 0 || st.Dims != 384 || st.Provider != "builtin" {
		t.Fatalf("status after sync: %+v", st)
	}
	progMu.Lock()
	if len(progress) == 0 || progress[len(progress)-1] != (Progress{Done: 6, Total: 6}) || st.Progress != nil {
		t.Errorf("progress = %v, status progress %v", progress, st.Progress)
	}
	progMu.Unlock()
	cases := []struct {
		q, path, layer, role string
	}{
		{"espresso coffee", "MEMORY.md", LayerRole, "main"},
		{"QK-7731", "memory/2024-05-01.md", LayerRole, "main"},
		{"向量数据库", "memory/2024-05-02.md", LayerRole, "main"},
		{"中文", "memory/2024-05-02.md", LayerRole, "main"},
		{"why Bleve", "memory/global/decisions.md", LayerGlobal, ""},
		{"Mirela Lisbon", "memory/roles/writer/MEMORY.md", LayerRole, "writer"},
		{"release build", "memory/sessions/s1/context.md", LayerSession, ""},
	}
	for _, c := range cases {
		rs := f.search(t, c.q)
		if len(rs) == 0 || rs[0].Path != c.path {
			t.Errorf("%q: got %v, want %s first", c.q, resultPaths(rs), c.path)
			continue
		}
		if rs[0].Layer != c.layer || rs[0].Role != c.role || rs[0].Source != "memory" {
			t.Errorf("%q: layer/role/source = %q/%q/%q", c.q, rs[0].Layer, rs[0].Role, rs[0].Source)
		}
		if rs[0].Score < DefaultMinScore || rs[0].Score > 1 {
			t.Errorf("%q: score %v", c.q, rs[0].Score)
		}
	}
	for _, r := range f.search(t, "espresso") {
		if strings.Contains(r.Path, "templates") || r.Path == "AGENTS.md" {
			t.Errorf("non-memory file indexed: %s", r.Path)
		}
	}
	if _, err := f.m.Search(context.Background(), SearchOptions{Query: "  "}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("empty query: %v", err)
	}
	files, err := f.m.Files(context.Background())
	if err != nil || len(files) != 7 || files[6].Path != "AGENTS.md" || !files[6].Context {
		t.Fatalf("Files: %d %v (want the 6 indexed, then AGENTS.md as context)", len(files), err)
	}
	for _, fi := range files[:6] {
		if fi.Chunks == 0 || fi.Size == 0 || fi.MTime == 0 || fi.Layer == "" {
			t.Errorf("file info %+v", fi)
		}
	}
}

func TestIncrementalByHash(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	first := f.emb.texts.Load()
	if first == 0 {
		t.Fatal("nothing embedded")
	}
	// Nothing changed: nothing is embedded (and nothing is even read).
	f.sync(t)
	if n := f.emb.texts.Load() - first; n != 0 {
		t.Errorf("unchanged sync embedded %d texts", n)
	}
	// Touch without content change: re-hashed, not re-embedded.
	p := filepath.Join(f.ws, "MEMORY.md")
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(p, future, future)
	f.sync(t)
	if n := f.emb.texts.Load() - first; n != 0 {
		t.Errorf("touched file re-embedded %d texts", n)
	}
	// A change re-embeds only that file's new chunks.
	writeFile(t, f.ws, "memory/2024-05-01.md", baseFiles["memory/2024-05-01.md"]+"- Dana closed QK-7731 on Friday.\n")
	f.sync(t)
	if n := f.emb.texts.Load() - first; n != 1 {
		t.Errorf("one changed single-chunk file embedded %d texts, want 1", n)
	}
	rs := f.search(t, "closed on Friday")
	if len(rs) == 0 || rs[0].Path != "memory/2024-05-01.md" {
		t.Errorf("changed content not found: %v", resultPaths(rs))
	}
}

func TestDeleteAndRename(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	before := f.emb.texts.Load()
	drain(f.changes)

	if err := os.Remove(filepath.Join(f.ws, "memory/roles/writer/MEMORY.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(f.ws, "memory/global/decisions.md"), filepath.Join(f.ws, "memory/global/adr.md")); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	if n := f.emb.texts.Load() - before; n != 0 {
		t.Errorf("rename re-embedded %d texts", n)
	}
	if rs := f.search(t, "Mirela Lisbon"); hasPath(rs, "memory/roles/writer/MEMORY.md") {
		t.Errorf("deleted file still found")
	}
	rs := f.search(t, "why Bleve")
	if len(rs) == 0 || rs[0].Path != "memory/global/adr.md" || hasPath(rs, "memory/global/decisions.md") {
		t.Errorf("after rename: %v", resultPaths(rs))
	}
	if st := f.m.Status(); st.Files != 5 {
		t.Errorf("files = %d", st.Files)
	}
	got := map[string][]string{}
	for ev := range drain(f.changes) {
		got[ev.Reason] = append(got[ev.Reason], ev.Paths...)
	}
	if !contains(got["delete"], "memory/global/decisions.md") || !contains(got["delete"], "memory/roles/writer/MEMORY.md") || !contains(got["index"], "memory/global/adr.md") {
		t.Errorf("change events: %v", got)
	}
}

func drain(c chan ChangeEvent) chan ChangeEvent {
	out := make(chan ChangeEvent, 100)
	for {
		select {
		case ev := <-c:
			out <- ev
		default:
			close(out)
			return out
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func runManager(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not stop")
		}
	})
	poll(t, "initial sync", 20*time.Second, func() bool { return m.Status().LastSync > 0 })
}

func TestWatcherPicksUpChanges(t *testing.T) {
	f := newFixture(t, baseFiles, func(o *Options) {
		o.Debounce = 100 * time.Millisecond
		o.RescanInterval = time.Hour // only the watcher can see the change
	})
	runManager(t, f.m)
	writeFile(t, f.ws, "memory/2024-06-01.md", "# 2024-06-01\n\nThe zeppelin hangar inspection passed.\n")
	poll(t, "watcher to index a new file", 15*time.Second, func() bool {
		return hasPath(f.search(t, "zeppelin hangar"), "memory/2024-06-01.md")
	})
	// A new role folder created after Run started is watched too.
	writeFile(t, f.ws, "memory/roles/analyst/notes.md", "Quarterly churn is 4.2 percent.\n")
	poll(t, "watcher to index a file in a new folder", 15*time.Second, func() bool {
		rs := f.search(t, "quarterly churn")
		return len(rs) > 0 && rs[0].Path == "memory/roles/analyst/notes.md" && rs[0].Role == "analyst"
	})
	os.Remove(filepath.Join(f.ws, "memory/2024-06-01.md"))
	poll(t, "watcher to drop a deleted file", 15*time.Second, func() bool {
		return !hasPath(f.search(t, "zeppelin hangar"), "memory/2024-06-01.md")
	})
	poll(t, "dirty to drain", 5*time.Second, func() bool { return f.m.Status().Dirty == 0 })
	if st := f.m.Status(); st.State != StateReady {
		t.Errorf("status %+v", st)
	}
}

// Files seen by the watcher count as Dirty until the debounced flush indexes them.
func TestWatcherDirtyCount(t *testing.T) {
	f := newFixture(t, baseFiles, func(o *Options) {
		o.Debounce = time.Second
		o.RescanInterval = time.Hour
	})
	runManager(t, f.m)
	writeFile(t, f.ws, "memory/2024-06-03.md", "The harbour ferry timetable changed.\n")
	writeFile(t, f.ws, "memory/global/ferry.md", "Ferry tickets are bought online.\n")
	poll(t, "dirty files to be reported", 5*time.Second, func() bool { return f.m.Status().Dirty >= 1 })
	poll(t, "dirty files to be indexed", 15*time.Second, func() bool {
		st := f.m.Status()
		return st.Dirty == 0 && st.Files == 8
	})
	if rs := f.search(t, "ferry"); !hasPath(rs, "memory/2024-06-03.md") || !hasPath(rs, "memory/global/ferry.md") {
		t.Errorf("after flush: %v", resultPaths(rs))
	}
}

func TestRescanWithoutWatcher(t *testing.T) {
	f := newFixture(t, baseFiles, func(o *Options) {
		o.DisableWatcher = true
		o.RescanInterval = 150 * time.Millisecond
	})
	runManager(t, f.m)
	writeFile(t, f.ws, "memory/2024-06-02.md", "The lighthouse keeper retired in June.\n")
	poll(t, "rescan to index a new file", 15*time.Second, func() bool {
		return hasPath(f.search(t, "lighthouse keeper"), "memory/2024-06-02.md")
	})
}

func TestDimsChangeRebuildsIndex(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	f.m.Close()

	f.emb = newCounting(128)
	f.open(t, nil)
	// Until the rebuild the old index still answers (keyword leg only).
	if rs := f.search(t, "Mirela"); !hasPath(rs, "memory/roles/writer/MEMORY.md") {
		t.Errorf("old index not searchable before rebuild: %v", resultPaths(rs))
	}
	f.sync(t)
	if f.emb.texts.Load() == 0 {
		t.Fatal("rebuild embedded nothing")
	}
	st := f.m.Status()
	if st.State != StateReady || st.Dims != 128 || st.Files != 6 {
		t.Errorf("status after rebuild: %+v", st)
	}
	rs := f.search(t, "Mirela Lisbon")
	if len(rs) == 0 || rs[0].Path != "memory/roles/writer/MEMORY.md" {
		t.Errorf("search after rebuild: %v", resultPaths(rs))
	}
	f.m.Close()
	s, err := index.Open(index.Options{Dir: f.idx, Provider: "builtin", Model: embed.BuiltinModel, Dims: 128, Chunking: "lines/400/80"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Meta().Dims != 128 || !s.Compatible() {
		t.Errorf("index meta after rebuild: %+v", s.Meta())
	}
	if _, err := os.Stat(filepath.Join(f.idx, index.StagingDir)); !os.IsNotExist(err) {
		t.Errorf("staging left behind")
	}
}

// TestRebuildAnnouncesAfterSwap: a rebuild's memory.changed (OnChange)
// goes out once its index is the one searches use — a client that searches
// the moment it hears of a file must find it, and Status must no longer
// say indexing. The hook searches from inside OnChange; before the fix the
// staging scan fired as it ended, while the old index still answered.
func TestRebuildAnnouncesAfterSwap(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	f.m.Close()
	const fresh = "memory/2024-05-09.md"
	writeFile(t, f.ws, fresh, "# 2024-05-09\n\n- The tram depot moved to Belém.\n")

	type seen struct {
		ev     ChangeEvent
		found  bool
		state  string
		errMsg string
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	f.emb = newCounting(128) // other dims: the next sync rebuilds
	f.open(t, func(o *Options) {
		o.DisableWatcher = true
		o.OnChange = func(ev ChangeEvent) {
			s := seen{ev: ev, state: f.m.Status().State}
			if slices.Contains(ev.Paths, fresh) {
				r, err := f.m.Search(context.Background(), SearchOptions{Query: "tram depot Belém"})
				if err != nil {
					s.errMsg = err.Error()
				}
				s.found = hasPath(r.Results, fresh)
			}
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		}
	})
	f.sync(t)
	if f.emb.texts.Load() == 0 {
		t.Fatal("no rebuild: nothing embedded")
	}
	mu.Lock()
	defer mu.Unlock()
	announced := false
	for _, s := range got {
		if s.state == StateIndexing {
			t.Errorf("OnChange %v while Status still says indexing", s.ev)
		}
		if slices.Contains(s.ev.Paths, fresh) {
			announced = true
			if !s.found || s.errMsg != "" {
				t.Errorf("OnChange named %s but a search from its hook did not find it (err %q)", fresh, s.errMsg)
			}
		}
	}
	if !announced {
		t.Fatalf("the rebuild never announced %s: %+v", fresh, got)
	}
}

func TestCorruptIndexRecovered(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	f.m.Close()
	snap := snapshot(t, f.ws)
	for _, suf := range []string{"", "-wal", "-shm"} {
		os.Remove(filepath.Join(f.idx, index.DBName+suf))
	}
	if err := os.WriteFile(filepath.Join(f.idx, index.DBName), bytes.Repeat([]byte("not a database "), 500), 0o644); err != nil {
		t.Fatal(err)
	}
	f.open(t, nil)
	if st := f.m.Status(); st.State == StateReady {
		t.Errorf("empty recovered index reported ready: %+v", st)
	}
	f.sync(t)
	if rs := f.search(t, "Mirela Lisbon"); len(rs) == 0 || rs[0].Path != "memory/roles/writer/MEMORY.md" {
		t.Errorf("search after recovery: %v", resultPaths(rs))
	}
	if !strings.Contains(f.logs.String(), "moving it aside") {
		t.Errorf("recovery not logged:\n%s", f.logs.String())
	}
	if got := snapshot(t, f.ws); got != snap {
		t.Errorf("workspace changed by recovery")
	}
}

// snapshot returns a digest of every file in dir (path, size, content).
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "%s %d %x\n", p, len(data), data)
		}
		return nil
	})
	return b.String()
}

func TestBadFilesSkipped(t *testing.T) {
	files := map[string]string{
		"MEMORY.md":             "A normal note about gardening.\n",
		"memory/binary.md":      "PNG\x00\x00\x01binary",
		"memory/latin1.md":      "caf\xe9 cr\xe8me\n",
		"memory/empty.md":       "",
		"memory/frontmatter.md": "---\ntype: role\ntags: [alpha]\n---\nbody text about tulips\n",
	}
	f := newFixture(t, files, nil)
	f.sync(t)
	st := f.m.Status()
	if st.State != StateReady {
		t.Errorf("state = %s", st.State)
	}
	// Latin-1 text is text: indexed with U+FFFD for the bad bytes, as Get
	// serves it. Only the binary file is skipped.
	if !strings.Contains(st.LastError, "memory/binary.md") || strings.Contains(st.LastError, "memory/latin1.md") || !strings.Contains(st.LastError, "1 file(s) skipped") {
		t.Errorf("LastError = %q", st.LastError)
	}
	if !strings.Contains(f.logs.String(), "memory file skipped") {
		t.Errorf("skip not logged")
	}
	if rs := f.search(t, "tulips"); len(rs) == 0 || rs[0].Path != "memory/frontmatter.md" {
		t.Errorf("front matter file: %v", resultPaths(rs))
	}
	if rs := f.search(t, "alpha"); len(rs) == 0 || rs[0].Path != "memory/frontmatter.md" {
		t.Errorf("front matter is indexed as text: %v", resultPaths(rs))
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "memory/binary.md")); string(got) != files["memory/binary.md"] {
		t.Errorf("binary file modified")
	}
	// A fixed file is indexed and leaves the error list.
	writeFile(t, f.ws, "memory/binary.md", "no longer binary: saxophone\n")
	f.sync(t)
	if st := f.m.Status(); strings.Contains(st.LastError, "binary.md") {
		t.Errorf("LastError after fix = %q", st.LastError)
	}
	if rs := f.search(t, "saxophone"); !hasPath(rs, "memory/binary.md") {
		t.Errorf("fixed file not indexed: %v", resultPaths(rs))
	}
}

func TestImport(t *testing.T) {
	f := newFixture(t, map[string]string{"MEMORY.md": "root\n"}, nil)
	f.sync(t)
	drain(f.changes)
	ctx := context.Background()
	imp := func(name, content, layer string) (ImportResult, error) {
		return f.m.Import(ctx, ImportRequest{Name: name, Content: content, Layer: layer})
	}
	r, err := imp("trip.txt", "Flight to Osaka on 3 March.\n", "")
	if err != nil || r.Path != "memory/trip.md" || r.Chunks != 1 || r.Bytes != 28 {
		t.Fatalf("import 1: %+v %v", r, err)
	}
	// Indexed at once, OnChange fired with reason import.
	if rs := f.search(t, "Osaka flight"); len(rs) == 0 || rs[0].Path != "memory/trip.md" {
		t.Errorf("imported note not searchable: %v", resultPaths(rs))
	}
	select {
	case ev := <-f.changes:
		if ev.Reason != "import" || len(ev.Paths) != 1 || ev.Paths[0] != "memory/trip.md" {
			t.Errorf("change event %+v", ev)
		}
	default:
		t.Errorf("no change event")
	}
	// Collisions never overwrite.
	for i, want := range []string{"memory/trip-1.md", "memory/trip-2.md"} {
		r, err := imp("trip.md", fmt.Sprintf("second trip %d\n", i), "role")
		if err != nil || r.Path != want {
			t.Errorf("collision %d: %+v %v", i, r, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "memory/trip.md")); string(got) != "Flight to Osaka on 3 March.\n" {
		t.Errorf("original overwritten: %q", got)
	}
	r, err = imp("team.md", "Global fact: office closes at 6.\n", LayerGlobal)
	if err != nil || r.Path != "memory/global/team.md" {
		t.Errorf("global import: %+v %v", r, err)
	}
	if rs := f.search(t, "office closes"); len(rs) == 0 || rs[0].Layer != LayerGlobal {
		t.Errorf("global note: %v", resultPaths(rs))
	}
	// With memory/roles/ present, role imports go to the main role's folder.
	os.MkdirAll(filepath.Join(f.ws, "memory/roles"), 0o755)
	r, err = imp("笔记.md", "中文笔记内容\n", "")
	if err != nil || r.Path != "memory/roles/main/笔记.md" {
		t.Errorf("atrium role import: %+v %v", r, err)
	}
	bad := []struct{ name, content, layer string }{
		{"", "x", ""},
		{"../evil", "x", ""},
		{"a/b", "x", ""},
		{`a\b`, "x", ""},
		{"..", "x", ""},
		{".hidden", "x", ""},
		{"ok", "", ""},
		{"ok", "  \n ", ""},
		{"ok", "bin\x00ary", ""},
		{"ok", "bad \xff utf8", ""},
		{"ok", "x", "session"},  // no session named
		{"ok", "x", "sessions"}, // no such layer
	}
	for _, b := range bad {
		if _, err := imp(b.name, b.content, b.layer); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("import(%q, %q, %q) = %v, want ErrInvalidInput", b.name, b.content, b.layer, err)
		}
	}
	// Layer session: into a live session's folder, never creating one.
	if _, err := f.m.Import(ctx, ImportRequest{Name: "x.md", Content: "x\n", Layer: LayerSession, Session: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("import into a missing session = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory/sessions/nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("import created a session folder: %v", err)
	}
	if _, err := f.m.Import(ctx, ImportRequest{Name: "x.md", Content: "x\n", Layer: LayerSession, Session: "../roles"}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("import into session ../roles = %v, want ErrInvalidInput", err)
	}
	os.MkdirAll(filepath.Join(f.ws, "memory/sessions/s1"), 0o755)
	for _, want := range []string{"memory/sessions/s1/plan.md", "memory/sessions/s1/plan-1.md"} {
		if r, err := f.m.Import(ctx, ImportRequest{Name: "plan.md", Content: "session plan\n", Layer: LayerSession, Session: "s1"}); err != nil || r.Path != want {
			t.Errorf("session import: %+v %v, want %s", r, err, want)
		}
	}
	// No temp files are left behind.
	leftovers, _ := filepath.Glob(filepath.Join(f.ws, "memory", ".import-*"))
	if len(leftovers) > 0 {
		t.Errorf("temp files left: %v", leftovers)
	}
}

func TestGetAndPathAttacks(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, outside, "secret.md", "top secret\n")
	f := newFixture(t, baseFiles, nil)
	if err := os.Symlink(filepath.Join(outside, "secret.md"), filepath.Join(f.ws, "memory/evil.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.ws, "memory/outdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.ws, "AGENTS.md"), filepath.Join(f.ws, "memory/agents-link.md")); err != nil {
		t.Fatal(err)
	}
	f.sync(t)
	ctx := context.Background()
	g, err := f.m.Get(ctx, GetOptions{Path: "memory/2024-05-01.md"})
	if err != nil || !strings.HasPrefix(g.Text, "# 2024-05-01\n") || g.Path != "memory/2024-05-01.md" {
		t.Fatalf("Get: %+v %v", g, err)
	}
	g, err = f.m.Get(ctx, GetOptions{Path: "memory/2024-05-01.md", From: 3, Lines: 1})
	if err != nil || g.Text != "- Fixed the login bug in the billing service.\n" {
		t.Errorf("Get lines: %q %v", g.Text, err)
	}
	g, err = f.m.Get(ctx, GetOptions{Path: "memory/./2024-05-01.md", From: 100})
	if err != nil || g.Text != "" {
		t.Errorf("Get past end: %q %v", g.Text, err)
	}
	attacks := []string{
		"../x", "../x.md", "/etc/passwd", "memory/../../x.md", "memory/../../../etc/passwd",
		"memory/evil.md", "memory/outdir/secret.md", "memory/agents-link.md", "AGENTS.md/x", "agents.md",
		"memory/templates/role-template.md", `memory\2024-05-01.md`, "memory/2024-05-01.txt", "",
		"C:/Windows/win.ini", "memory/\x00.md",
	}
	for _, a := range attacks {
		if _, err := f.m.Get(ctx, GetOptions{Path: a}); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("Get(%q) = %v, want ErrInvalidPath", a, err)
		}
	}
	if _, err := f.m.Get(ctx, GetOptions{Path: "memory/nope.md"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing file: %v", err)
	}
	// The outside content never made it into the index either.
	if rs := f.search(t, "top secret"); hasPath(rs, "memory/evil.md") || hasPath(rs, "memory/outdir/secret.md") {
		t.Errorf("outside file indexed: %v", resultPaths(rs))
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		rel     string
		indexed bool
		layer   string
		role    string
	}{
		{"MEMORY.md", true, LayerRole, "main"},
		{"memory.md", true, LayerRole, "main"},
		{"AGENTS.md", false, LayerRole, "main"}, // OpenClaw context: readable, not indexed (context.go)
		{"memory/2024-01-01.md", true, LayerRole, "main"},
		{"memory/notes/x.md", true, LayerRole, "main"},
		{"memory/global/user-profile.md", true, LayerGlobal, ""},
		{"memory/global/sub/x.md", true, LayerGlobal, ""},
		{"memory/roles/code-expert/MEMORY.md", true, LayerRole, "code-expert"},
		{"memory/roles/code-expert/deep/x.md", true, LayerRole, "code-expert"},
		{"memory/sessions/abc/context.md", true, LayerSession, ""},
		{"memory/sessions/abc/temp-state.json", false, "", ""},
		{"memory/templates/role-template.md", false, "", ""},
		{"memory/.acl", false, "", ""},
		{"memory/.hidden/x.md", false, "", ""},
		{"memory/x.MD", true, LayerRole, "main"},
		{"other/x.md", false, "", ""},
	}
	for _, c := range cases {
		k := classify(c.rel)
		if k.indexed != c.indexed || k.layer != c.layer || k.role != c.role {
			t.Errorf("classify(%q) = %+v", c.rel, k)
		}
	}
}

func TestLayouts(t *testing.T) {
	for _, c := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"MEMORY.md": "x"}, "openclaw"},
		{map[string]string{"memory/2024-01-01.md": "x"}, "openclaw"},
		{map[string]string{"memory/global/a.md": "x"}, "atrium"},
		{map[string]string{"memory/global/a.md": "x", "MEMORY.md": "y"}, "mixed"},
		{map[string]string{"README.md": "x"}, "empty"},
	} {
		f := newFixture(t, c.files, nil)
		if got := f.m.Status().Layout; got != c.want {
			t.Errorf("%v: layout %q, want %q", c.files, got, c.want)
		}
	}
}

func TestClosed(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.m.Close()
	ctx := context.Background()
	if err := f.m.Sync(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
	if _, err := f.m.Search(ctx, SearchOptions{Query: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Search after Close: %v", err)
	}
	if err := f.m.Run(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if err := f.m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestSnippetCut(t *testing.T) {
	long := strings.Repeat("word ", 300) + strings.Repeat("字", 800)
	s := snippet(long, MaxSnippetChars)
	if n := len([]rune(s)); n > MaxSnippetChars || n < MaxSnippetChars*3/4 {
		t.Errorf("snippet has %d runes", n)
	}
	if s := snippet(strings.Repeat("字", 2000), MaxSnippetChars); len([]rune(s)) != MaxSnippetChars {
		t.Errorf("CJK snippet has %d runes", len([]rune(s)))
	}
	if snippet("short", 700) != "short" {
		t.Error("short snippet changed")
	}
}

// A keyword index lost or left behind by a killed process is rebuilt from
// SQLite on Open, without re-embedding anything.
func TestLostKeywordIndexRebuilt(t *testing.T) {
	f := newFixture(t, baseFiles, nil)
	f.sync(t)
	f.m.Close()
	if err := os.RemoveAll(filepath.Join(f.idx, index.BleveName)); err != nil {
		t.Fatal(err)
	}
	before := f.emb.texts.Load()
	f.open(t, nil)
	f.sync(t)
	r, err := f.m.Search(context.Background(), SearchOptions{Query: "QK-7731"})
	if err != nil || len(r.Results) == 0 || r.Results[0].Path != "memory/2024-05-01.md" {
		t.Errorf("after keyword index rebuild: %v %v", resultPaths(r.Results), err)
	}
	// Only the query was embedded.
	if n := f.emb.texts.Load() - before; n != 1 {
		t.Errorf("embedded %d texts, want 1 (the query)", n)
	}
}

// TestOpenLocked: a second Open of the same index directory (another
// process, or the CLI while the app runs) is refused with ErrLocked and
// changes nothing; after Close the index opens again.
func TestOpenLocked(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("# m\n\nlocked index test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := t.TempDir()
	first, err := Open(Options{Workspace: ws, IndexDir: idx, DisableWatcher: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(idx)
	if _, err := Open(Options{Workspace: ws, IndexDir: idx, DisableWatcher: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	after, _ := os.ReadDir(idx)
	if len(before) != len(after) {
		t.Fatalf("a refused Open changed the index dir: %v -> %v", before, after)
	}
	res, err := first.Search(context.Background(), SearchOptions{Query: "locked index"})
	if err != nil || len(res.Results) == 0 {
		t.Fatalf("first Manager after refused Open: %v %+v", err, res)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(Options{Workspace: ws, IndexDir: idx, DisableWatcher: true})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	// With LockWait, an Open waits for the holder to let go.
	released := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond) // the holder is still shutting down
		again.Close()
		close(released)
	}()
	waited, err := Open(Options{Workspace: ws, IndexDir: idx, DisableWatcher: true, LockWait: 10 * time.Second})
	if err != nil {
		t.Fatalf("Open with LockWait: %v", err)
	}
	<-released
	waited.Close()
}

// cancellingEmbedder cancels the sync's context on its n-th call.
type cancellingEmbedder struct {
	embed.Embedder
	n      int
	calls  atomic.Int64
	cancel context.CancelFunc
}

func (c *cancellingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if int(c.calls.Add(1)) == c.n && c.cancel != nil {
		c.cancel()
		return nil, context.Canceled
	}
	return c.Embedder.Embed(ctx, texts)
}

// A full sync (one bulk group) cancelled half-way keeps what it wrote,
// searchable, and the next sync completes the index.
func TestCancelledSyncResumes(t *testing.T) {
	emb := &cancellingEmbedder{Embedder: embed.NewBuiltin(embed.BuiltinOptions{}), n: 4}
	f := newFixture(t, baseFiles, func(o *Options) {
		o.Embedder = emb
		o.SyncWorkers = 1 // the embed calls and the writes in file order: the cancel lands after some writes
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	emb.cancel = cancel
	if err := f.m.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Sync returned %v", err)
	}
	files, chunks, err := f.m.store.Counts(context.Background())
	if err != nil || files == 0 || files >= 6 || chunks == 0 {
		t.Fatalf("after cancelled sync: %d files, %d chunks, %v; want some of 6", files, chunks, err)
	}
	emb.cancel = nil
	f.sync(t)
	if st := f.m.Status(); st.Files != 6 || st.State != StateReady {
		t.Fatalf("after second sync: %+v", st)
	}
	for q, want := range map[string]string{
		"QK-7731":          "memory/2024-05-01.md",
		"Mirela Lisbon":    "memory/roles/writer/MEMORY.md",
		"release 2.3":      "memory/sessions/s1/context.md",
		"Bleve pure Go":    "memory/global/decisions.md",
		"向量数据库":            "memory/2024-05-02.md",
		"espresso Tuesday": "MEMORY.md",
	} {
		if rs := f.search(t, q); len(rs) == 0 || rs[0].Path != want {
			t.Errorf("%s: %v, want %s first", q, resultPaths(rs), want)
		}
	}
}

// A chunk repeated in many files (a shared section) is embedded once per
// sync, not once per file, also while the prefetch prepares files ahead of
// the writer from the committed index.
func TestRepeatedChunkEmbeddedOnce(t *testing.T) {
	shared := "## Shared\n\nThe team agreed that every release ships with a rollback plan and a named owner on call."
	files := map[string]string{}
	const n = 300
	for i := 0; i < n; i++ {
		files[fmt.Sprintf("memory/notes/n%03d.md", i)] = shared + fmt.Sprintf("\n\n## Own\n\nNote %d about topic-%d and nothing else.", i, i*7919)
	}
	f := newFixture(t, files, func(o *Options) {
		o.Chunking = chunk.Options{MaxTokens: 30, OverlapTokens: -1}
		o.SyncWorkers = 2
	})
	f.sync(t)
	st := f.m.Status()
	if st.Chunks != 2*n {
		t.Fatalf("chunks = %d, want %d (a shared and an own chunk per file)", st.Chunks, 2*n)
	}
	// n own chunks and the shared one, plus at most one more for the shared
	// chunk when two workers race for it.
	if got := f.emb.texts.Load(); got > n+2 {
		t.Errorf("embedded %d texts for %d distinct chunks", got, n+1)
	}
	if rs := f.search(t, "rollback plan named owner"); len(rs) == 0 {
		t.Error("the shared chunk is not found")
	}
}

// TestBuiltinVectorsNotCached: the builtin embedder (embed.Builtin.Local)
// is faster than the embedding cache, so its vectors are not cached; any
// other embedder's are (here the builtin behind a wrapper without Local).
func TestBuiltinVectorsNotCached(t *testing.T) {
	files := map[string]string{"memory/a.md": "# A\n\nalpha beta gamma\n", "memory/b.md": "# B\n\n数据库 索引\n"}
	for _, builtin := range []bool{true, false} {
		f := newFixture(t, files, func(o *Options) {
			if builtin {
				o.Embedder = embed.NewBuiltin(embed.BuiltinOptions{})
			}
		})
		f.sync(t)
		if len(f.search(t, "alpha")) == 0 {
			t.Fatalf("builtin %v: no hit for alpha", builtin)
		}
		db, err := sql.Open("sqlite3", "file:"+filepath.Join(f.idx, index.DBName)+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		var rows int
		err = db.QueryRow("SELECT count(*) FROM embedding_cache").Scan(&rows)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if (rows == 0) != builtin {
			t.Errorf("builtin %v: %d embedding cache rows", builtin, rows)
		}
	}
}
