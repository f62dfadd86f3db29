// Package scale is the memory search scale benchmark (issue 3; `atrium
// bench scale`): it grows one workspace of real text to 10k, 100k and 1M
// chunks and reports, at each size, the incremental index time, disk size,
// memory, hybrid / keyword-only / vector-only search latency, the recall of
// the quantized vector leg against exact search, whether the first result
// depends on MaxResults, and how long a saved edit takes to become
// searchable with the watcher running.
//
// The text comes from the shared corpora (FindCorpora): LongMemEval
// sessions, CMRC 2018 and DRCD paragraphs (Chinese), LoCoMo turns and the
// OpenClaw workspaces, recombined deterministically (seeded) into dated
// daily logs of ~2,000 estimated tokens (about six chunks of the default
// 400/80-token chunking) under memory/roles/agentNN/YYYY-MM-DD.md. Each log
// entry is a run of consecutive lines of one source starting at a random
// line, so chunks are real text and distinct; the generator counts
// duplicate chunk texts (Step.DuplicateChunks) instead of assuming none.
//
// Indexing goes through the real pipeline: memory.Manager.Sync on the
// workspace with the builtin embedder (SPEC §4.2). Hybrid latency is
// memory.Manager.Search with the defaults (maxResults 6, the default floor,
// SPEC §4.3), query embedding included; the keyword-only and vector-only
// latencies and the recall are measured on the index.Store opened directly
// (the Manager closed), with query vectors embedded beforehand. Latencies
// are wall-clock on a possibly busy machine: they are reported, never
// asserted.
package scale

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/chunk"
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// Defaults of Options.
var (
	DefaultSizes = []int{10000, 100000, 1000000}
)

const (
	DefaultQueries     = 100
	DefaultSeed        = 1
	DefaultRoles       = 32
	DefaultEditTimeout = 60 * time.Second
)

// Options configure Run.
type Options struct {
	// Corpora is the shared corpora folder; "" means FindCorpora().
	Corpora string
	// Dir holds the generated workspace (Dir/workspace) and the index
	// (Dir/index). Required; it should be empty (an existing workspace from
	// an earlier run with other options would skew the sizes).
	Dir string
	// Sizes are the chunk counts to grow to, ascending; nil means
	// DefaultSizes (10k, 100k, 1M).
	Sizes []int
	// Queries is the number of benchmark queries (half English, half
	// Chinese); 0 means DefaultQueries (100).
	Queries int
	// Seed makes the corpus and the query sample reproducible; 0 means
	// DefaultSeed.
	Seed int64
	// Roles is the number of role folders the daily logs spread over; 0
	// means DefaultRoles (32).
	Roles int
	// EditTimeout bounds the wait for a saved edit to become searchable; 0
	// means DefaultEditTimeout (60 s).
	EditTimeout time.Duration
	// Logger receives progress (Info) and the memory engine's logs (Warn
	// and above); nil means slog.Default().
	Logger *slog.Logger
}

// Latency summarises the wall-clock times of one kind of search, in ms.
type Latency struct {
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
	MeanMs float64 `json:"meanMs"`
	MaxMs  float64 `json:"maxMs"`
}

// Step is the state after growing to one size. JSON field names are stable.
type Step struct {
	// TargetChunks is the size asked for; Chunks and Files what the index
	// holds (Manager.Status), DuplicateChunks the generated chunks whose
	// text occurred before (collapsed by search).
	TargetChunks    int `json:"targetChunks"`
	Chunks          int `json:"chunks"`
	Files           int `json:"files"`
	DuplicateChunks int `json:"duplicateChunks"`
	// GenerateSeconds: writing this step's new Markdown (not indexing).
	GenerateSeconds float64 `json:"generateSeconds"`
	// NewChunks, IndexSeconds and ChunksPerSecond: this step's incremental
	// Manager.Sync (walk, chunk, embed, SQLite, sqlite-vec, Bleve).
	// IndexCPUSeconds is the process's user+system CPU time during that
	// sync (on a shared machine, wall time also counts other processes).
	NewChunks       int     `json:"newChunks"`
	IndexSeconds    float64 `json:"indexSeconds"`
	IndexCPUSeconds float64 `json:"indexCpuSeconds"`
	ChunksPerSecond float64 `json:"chunksPerSecond"`
	// Sizes in bytes: the Markdown, index.db with its -wal/-shm, the Bleve
	// folder, and the whole index folder.
	MarkdownBytes int64 `json:"markdownBytes"`
	SQLiteBytes   int64 `json:"sqliteBytes"`
	BleveBytes    int64 `json:"bleveBytes"`
	IndexBytes    int64 `json:"indexBytes"`
	// RSSMB and PeakRSSMB: VmRSS and VmHWM of this process (MiB) after the
	// hybrid searches of this step.
	RSSMB     float64 `json:"rssMB"`
	PeakRSSMB float64 `json:"peakRssMB"`
	// VectorLeg is "exact" (sqlite-vec float32 scan) or "quantized"
	// (binary shortlist + int8 re-rank, see backend/memory/index/quant.go)
	// for the searches of this step. WarmSeconds is Manager.Warm after the
	// sync, what Manager.Run does once at start (the quantized copy
	// loaded, the most frequent terms' posting lists decoded); the
	// searches below come after it. FirstSearchMs is the first hybrid
	// search after it.
	VectorLeg     string  `json:"vectorLeg"`
	WarmSeconds   float64 `json:"warmSeconds"`
	FirstSearchMs float64 `json:"firstSearchMs"`
	// Hybrid: Manager.Search with defaults (maxResults 6, default floor),
	// each query searched once (its rarer terms' posting lists are
	// decoded by it); HybridRepeat: the same queries searched again right
	// after.
	Hybrid       Latency `json:"hybrid"`
	HybridRepeat Latency `json:"hybridRepeat"`
	// Keyword and Vector: index.Store.Search with only the text, or only
	// the query vector (maxResults 6, the default floor).
	Keyword Latency `json:"keyword"`
	Vector  Latency `json:"vector"`
	// RecallAt10: mean over the queries of |quantized top 10 ∩ exact top
	// 10| / 10 for the vector leg alone (index.Store.VectorNeighbours).
	RecallAt10 float64 `json:"recallAt10"`
	// FirstResultMismatches counts queries whose first hybrid result
	// differs between maxResults 1 and 5 (must be 0, failure class 7).
	FirstResultMismatches int `json:"firstResultMismatches"`
	// EditSearchableMs: with Manager.Run (watcher, 1.5 s debounce) going,
	// the time from appending a line with a unique token to an existing
	// daily log until Search returns it; target < 2,000.
	EditSearchableMs float64 `json:"editSearchableMs"`
}

// Growth compares two consecutive steps: each field is the ratio
// later/earlier.
type Growth struct {
	From            int     `json:"from"`
	To              int     `json:"to"`
	Chunks          float64 `json:"chunks"`
	IndexBytes      float64 `json:"indexBytes"`
	RSS             float64 `json:"rss"`
	HybridP50       float64 `json:"hybridP50"`
	HybridP99       float64 `json:"hybridP99"`
	KeywordP50      float64 `json:"keywordP50"`
	VectorP50       float64 `json:"vectorP50"`
	ChunksPerSecond float64 `json:"chunksPerSecond"`
}

// Report is the benchmark result (`atrium bench scale --json`).
type Report struct {
	Date      string `json:"date"` // RFC 3339, UTC, at the start
	GoVersion string `json:"goVersion"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	Corpora   string `json:"corpora"`
	Dir       string `json:"dir"`
	Seed      int64  `json:"seed"`
	Embedder  string `json:"embedder"` // provider/model/dims
	Chunking  string `json:"chunking"` // max/overlap tokens
	// Queries: how many, of which English and Chinese.
	// BaseRSSMB is VmRSS (MiB) with the corpus and queries loaded, before
	// any index is opened: the benchmark's own share of the steps' RSS.
	BaseRSSMB      float64  `json:"baseRssMB"`
	Queries        int      `json:"queries"`
	EnglishQueries int      `json:"englishQueries"`
	ChineseQueries int      `json:"chineseQueries"`
	Steps          []Step   `json:"steps"`
	Growth         []Growth `json:"growth"`
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		return errors.New("scale bench: Options.Dir is required")
	}
	if o.Sizes == nil {
		o.Sizes = DefaultSizes
	}
	if len(o.Sizes) == 0 || !sort.IntsAreSorted(o.Sizes) || o.Sizes[0] <= 0 {
		return fmt.Errorf("scale bench: sizes must be positive and ascending, got %v", o.Sizes)
	}
	if o.Queries <= 0 {
		o.Queries = DefaultQueries
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.Roles <= 0 {
		o.Roles = DefaultRoles
	}
	if o.EditTimeout <= 0 {
		o.EditTimeout = DefaultEditTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Corpora == "" {
		c, err := FindCorpora()
		if err != nil {
			return err
		}
		o.Corpora = c
	}
	return nil
}

// Run grows the workspace through opts.Sizes and measures each step. A
// step's failure ends the run with the steps measured so far in the
// returned report and the error.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	log := opts.Logger
	emb := embed.NewBuiltin(embed.BuiltinOptions{})
	rep := &Report{
		Date: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		CPUModel: cpuModel(), Corpora: opts.Corpora, Dir: opts.Dir, Seed: opts.Seed,
		Embedder: fmt.Sprintf("%s/%s/%d", emb.Provider(), emb.Model(), emb.Dims()),
		Chunking: fmt.Sprintf("%d/%d", chunk.DefaultMaxTokens, chunk.DefaultOverlapTokens),
	}
	c, err := loadCorpus(opts.Corpora)
	if err != nil {
		return nil, err
	}
	qs, err := loadQueries(opts.Corpora, opts.Queries, opts.Seed)
	if err != nil {
		return nil, err
	}
	rep.BaseRSSMB, _ = rss()
	rep.Queries = len(qs)
	for _, q := range qs {
		if q.Lang == "zh" {
			rep.ChineseQueries++
		} else {
			rep.EnglishQueries++
		}
	}
	qvecs, err := emb.Embed(ctx, queryTexts(qs))
	if err != nil {
		return nil, fmt.Errorf("scale bench: embed queries: %w", err)
	}
	ws := filepath.Join(opts.Dir, "workspace")
	ixDir := filepath.Join(opts.Dir, "index")
	gen := newGenerator(c, ws, opts.Seed, opts.Roles)
	quiet := slog.New(warnOnly{opts.Logger.Handler()})
	mopts := memory.Options{Workspace: ws, IndexDir: ixDir, Embedder: emb, Logger: quiet}
	ixOpts := index.Options{
		Dir: ixDir, Provider: emb.Provider(), Model: emb.Model(), Dims: emb.Dims(),
		Chunking: fmt.Sprintf("lines/%d/%d", chunk.DefaultMaxTokens, chunk.DefaultOverlapTokens), Logger: quiet,
	}
	prevChunks := 0
	for _, size := range opts.Sizes {
		st := Step{TargetChunks: size}
		t0 := time.Now()
		if err := gen.grow(size); err != nil {
			return rep, err
		}
		st.GenerateSeconds = time.Since(t0).Seconds()
		st.DuplicateChunks = gen.dups
		log.Info("scale bench: corpus generated", "target", size, "files", gen.files, "chunks", gen.chunks, "seconds", st.GenerateSeconds)

		if err := measureManager(ctx, &st, mopts, qs, opts, gen, &prevChunks, log); err != nil {
			return rep, err
		}
		if err := measureStore(ctx, &st, ixOpts, qs, qvecs); err != nil {
			return rep, err
		}
		var err error
		if st.MarkdownBytes, err = dirSize(ws); err != nil {
			return rep, err
		}
		if st.IndexBytes, err = dirSize(ixDir); err != nil {
			return rep, err
		}
		if st.BleveBytes, err = dirSize(filepath.Join(ixDir, index.BleveName)); err != nil {
			return rep, err
		}
		for _, suf := range []string{"", "-wal", "-shm"} {
			if fi, err := os.Stat(filepath.Join(ixDir, index.DBName+suf)); err == nil {
				st.SQLiteBytes += fi.Size()
			}
		}
		rep.Steps = append(rep.Steps, st)
		log.Info("scale bench: step done", "chunks", st.Chunks, "indexSeconds", st.IndexSeconds,
			"hybridP50Ms", st.Hybrid.P50Ms, "hybridP99Ms", st.Hybrid.P99Ms, "recallAt10", st.RecallAt10, "editMs", st.EditSearchableMs)
	}
	for i := 1; i < len(rep.Steps); i++ {
		a, b := rep.Steps[i-1], rep.Steps[i]
		rep.Growth = append(rep.Growth, Growth{
			From: a.Chunks, To: b.Chunks, Chunks: ratio(float64(b.Chunks), float64(a.Chunks)),
			IndexBytes: ratio(float64(b.IndexBytes), float64(a.IndexBytes)), RSS: ratio(b.RSSMB, a.RSSMB),
			HybridP50: ratio(b.Hybrid.P50Ms, a.Hybrid.P50Ms), HybridP99: ratio(b.Hybrid.P99Ms, a.Hybrid.P99Ms),
			KeywordP50: ratio(b.Keyword.P50Ms, a.Keyword.P50Ms), VectorP50: ratio(b.Vector.P50Ms, a.Vector.P50Ms),
			ChunksPerSecond: ratio(b.ChunksPerSecond, a.ChunksPerSecond),
		})
	}
	return rep, nil
}

func queryTexts(qs []query) []string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Text
	}
	return out
}

// measureManager syncs the grown workspace and measures what goes through
// the Manager: index time, hybrid latency, the MaxResults check, RSS and the
// saved-edit latency.
func measureManager(ctx context.Context, st *Step, mopts memory.Options, qs []query, opts Options, gen *generator, prevChunks *int, log *slog.Logger) error {
	m, err := memory.Open(mopts)
	if err != nil {
		return fmt.Errorf("scale bench: %w", err)
	}
	defer m.Close()
	t0, c0 := time.Now(), cpuTime()
	if err := m.Sync(ctx); err != nil {
		return fmt.Errorf("scale bench: sync: %w", err)
	}
	st.IndexSeconds, st.IndexCPUSeconds = time.Since(t0).Seconds(), cpuTime()-c0
	stat := m.Status()
	st.Chunks, st.Files = stat.Chunks, stat.Files
	st.NewChunks = st.Chunks - *prevChunks
	*prevChunks = st.Chunks
	st.ChunksPerSecond = ratio(float64(st.NewChunks), st.IndexSeconds)
	log.Info("scale bench: indexed", "chunks", st.Chunks, "new", st.NewChunks, "seconds", st.IndexSeconds)

	t0 = time.Now()
	if err := m.Warm(ctx); err != nil {
		return fmt.Errorf("scale bench: warm: %w", err)
	}
	st.WarmSeconds = time.Since(t0).Seconds()
	t0 = time.Now()
	if _, err := m.Search(ctx, memory.SearchOptions{Query: qs[0].Text}); err != nil {
		return fmt.Errorf("scale bench: search: %w", err)
	}
	st.FirstSearchMs = ms(time.Since(t0))
	st.VectorLeg = "exact"
	if st.Chunks > index.DefaultQuantizeAbove {
		st.VectorLeg = "quantized"
	}
	var lat []time.Duration
	for _, q := range qs {
		t0 := time.Now()
		if _, err := m.Search(ctx, memory.SearchOptions{Query: q.Text}); err != nil {
			return fmt.Errorf("scale bench: search %q: %w", q.Text, err)
		}
		lat = append(lat, time.Since(t0))
	}
	st.Hybrid = summarise(lat)
	lat = lat[:0]
	for _, q := range qs {
		t0 := time.Now()
		if _, err := m.Search(ctx, memory.SearchOptions{Query: q.Text}); err != nil {
			return fmt.Errorf("scale bench: search %q: %w", q.Text, err)
		}
		lat = append(lat, time.Since(t0))
	}
	st.HybridRepeat = summarise(lat)
	for _, q := range qs {
		r1, err := m.Search(ctx, memory.SearchOptions{Query: q.Text, MaxResults: 1})
		if err != nil {
			return fmt.Errorf("scale bench: search: %w", err)
		}
		r5, err := m.Search(ctx, memory.SearchOptions{Query: q.Text, MaxResults: 5})
		if err != nil {
			return fmt.Errorf("scale bench: search: %w", err)
		}
		if first(r1) != first(r5) {
			st.FirstResultMismatches++
			log.Warn("scale bench: first result depends on maxResults", "query", q.Text, "max1", first(r1), "max5", first(r5))
		}
	}
	st.RSSMB, st.PeakRSSMB = rss()

	ms, err := editLatency(ctx, m, opts, gen)
	if err != nil {
		return err
	}
	st.EditSearchableMs = ms
	return nil
}

func first(r memory.SearchResponse) string {
	if len(r.Results) == 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d", r.Results[0].Path, r.Results[0].StartLine)
}

// editLatency runs the Manager's Run loop (watcher on), waits for its
// initial sync, appends a line with a unique token to an existing daily log
// and polls Search until the token is found. It closes m.
func editLatency(ctx context.Context, m *memory.Manager, opts Options, gen *generator) (float64, error) {
	before := m.Status().LastSync
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	defer func() {
		// Close first: it waits for a write in progress (cancelling Run's
		// context could interrupt one), and Run then returns.
		_ = m.Close()
		cancel()
		<-done
	}()
	deadline := time.Now().Add(opts.EditTimeout)
	for m.Status().LastSync == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	token := "qz" + strconv.FormatInt(rng.Int63n(1<<40), 36) + "edit"
	rel := gen.path(rng.Intn(gen.files))
	abs := filepath.Join(gen.ws, rel)
	old, err := os.ReadFile(abs)
	if err != nil {
		return 0, fmt.Errorf("scale bench: edit: %w", err)
	}
	// The token's line number once appended (the file ends with "\n").
	line := strings.Count(string(old), "\n") + 3
	f, err := os.OpenFile(abs, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("scale bench: edit: %w", err)
	}
	t0 := time.Now()
	_, err = fmt.Fprintf(f, "\n## 23:59 edit\nSaved edit check %s: the index must follow a hand edit.\n", token)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("scale bench: edit: %w", err)
	}
	deadline = t0.Add(opts.EditTimeout)
	for time.Now().Before(deadline) {
		r, err := m.Search(ctx, memory.SearchOptions{Query: token, MaxResults: 3})
		if err != nil {
			return 0, fmt.Errorf("scale bench: edit search: %w", err)
		}
		for _, h := range r.Results {
			if filepath.ToSlash(h.Path) == filepath.ToSlash(rel) && h.StartLine <= line && h.EndLine >= line {
				return ms(time.Since(t0)), nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, fmt.Errorf("scale bench: saved edit not searchable within %v", opts.EditTimeout)
}

// measureStore measures the legs alone and the recall on the index.Store.
func measureStore(ctx context.Context, st *Step, o index.Options, qs []query, qvecs [][]float32) error {
	s, err := index.Open(o)
	if err != nil {
		return fmt.Errorf("scale bench: open index: %w", err)
	}
	defer s.Close()
	if !s.Compatible() {
		return errors.New("scale bench: index is not compatible with the builtin embedder (options differ from the Manager's)")
	}
	// Warm up (loads the quantized copy when the index uses it).
	if _, err := s.Search(ctx, index.Query{Vector: qvecs[0], MaxResults: memory.DefaultMaxResults, AutoFloor: true}); err != nil {
		return fmt.Errorf("scale bench: %w", err)
	}
	var kw, vec []time.Duration
	for i, q := range qs {
		t0 := time.Now()
		if _, err := s.Search(ctx, index.Query{Text: q.Text, MaxResults: memory.DefaultMaxResults, AutoFloor: true}); err != nil {
			return fmt.Errorf("scale bench: keyword search: %w", err)
		}
		kw = append(kw, time.Since(t0))
		t0 = time.Now()
		if _, err := s.Search(ctx, index.Query{Vector: qvecs[i], MaxResults: memory.DefaultMaxResults, AutoFloor: true}); err != nil {
			return fmt.Errorf("scale bench: vector search: %w", err)
		}
		vec = append(vec, time.Since(t0))
	}
	st.Keyword, st.Vector = summarise(kw), summarise(vec)
	var sum float64
	for _, v := range qvecs {
		ex, err := s.VectorNeighbours(ctx, v, 10, true)
		if err != nil {
			return fmt.Errorf("scale bench: exact neighbours: %w", err)
		}
		qu, err := s.VectorNeighbours(ctx, v, 10, false)
		if err != nil {
			return fmt.Errorf("scale bench: quantized neighbours: %w", err)
		}
		in := map[int64]bool{}
		for _, id := range qu {
			in[id] = true
		}
		hit := 0
		for _, id := range ex {
			if in[id] {
				hit++
			}
		}
		if len(ex) > 0 {
			sum += float64(hit) / float64(len(ex))
		}
	}
	st.RecallAt10 = sum / float64(len(qvecs))
	return nil
}

func summarise(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var tot time.Duration
	for _, d := range s {
		tot += d
	}
	pct := func(p float64) float64 {
		i := int(p*float64(len(s))+0.5) - 1
		return ms(s[min(len(s)-1, max(0, i))])
	}
	return Latency{P50Ms: pct(0.50), P99Ms: pct(0.99), MeanMs: ms(tot / time.Duration(len(s))), MaxMs: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// rss returns VmRSS and VmHWM of this process in MiB (0 where /proc is
// missing).
func rss() (cur, peak float64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			cur = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return cur, peak
}

// cpuModel returns the "model name" of /proc/cpuinfo ("" where missing).
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// dirSize returns the total size of the regular files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("scale bench: size of %s: %w", dir, err)
	}
	return n, nil
}

// warnOnly passes on the memory engine's warnings and errors only (its
// per-sync info logs would drown the benchmark's progress).
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{w.Handler.WithAttrs(as)} }

func (w warnOnly) WithGroup(name string) slog.Handler { return warnOnly{w.Handler.WithGroup(name)} }
