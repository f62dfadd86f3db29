// Package retrieval is the retrieval quality harness behind `atrium bench
// retrieval` (issue 3): it runs a judged retrieval set through the real
// memory pipeline (memory.Open + Sync: the line chunker, the embedder,
// SQLite + sqlite-vec and Bleve; memory.Manager.Search for the queries) and
// reports Recall@1/5/10, nDCG@10 and MRR for the keyword leg alone, the
// vector leg alone and the hybrid (SPEC §4.3), plus index time, chunks/s,
// query latency and peak RSS.
//
// # Sets
//
// A BEIR-style set is a folder with corpus*.jsonl, queries.jsonl (or
// questions.jsonl) and qrels*.tsv (shared/corpora/bench/README.md):
//
//   - corpus records: "_id" and either "title" + "text" (a passage),
//     "speaker" + "text" with "date_time" (a LoCoMo turn) or "turns"
//     [{role, content}] with "date" (a LongMemEval session). Each document
//     becomes one Markdown file memory/<safe id>.md in a temporary workspace
//     (a "# title" or "# date" heading, then the text or one "role: content"
//     line per turn), so the chunks are the real chunker's.
//   - queries: "_id" or "question_id", "text" or "question"; optional
//     "conv", "category" and "abstention".
//   - qrels: query-id, corpus-id, score with a header line; Options.Qrels
//     names the file (default qrels.tsv, else the first qrels*.tsv). A score
//     > 0 is relevant and is the gain in nDCG (graded when scores exceed 1).
//
// When no judged id is a corpus id but the records carry "conv" and
// "session", the turns are grouped into session documents
// "<conv>:session_<n>" (corpus order kept) and those are judged (LoCoMo's
// qrels_session.tsv). When the records and the queries all carry "conv",
// one index is built per conversation and each query searches its own
// conversation's index (the "per conversation index" of BASELINES.md).
//
// A workspaces set (Options.Workspaces, or a Set folder whose sub-folders
// have a memory/ folder, such as locomo/workspaces) indexes each
// sub-folder as it is, as one partition named after it; the queries and
// qrels come from the BEIR folder (Set, or the workspaces folder's parent).
// A result chunk is turned into the turn ids of the "[Dn:m]" tags in its
// lines, in text order ("<conv>:Dn:m", or "<conv>:session_n" for session
// qrels): the realistic chunk-level figure, since an agent gets chunks.
//
// A judged set (a Set folder with judged.jsonl, judged.go) is questions
// people asked about real workspaces, judged by path and line span; its
// workspaces come from Options.Workspaces and are indexed as they are, and
// its absent questions are asked in their own workspace.
//
// Query filters: queries with a "category" are kept only in
// Options.Categories (default 1-4: LoCoMo's category 5 is adversarial and
// usually excluded); abstention questions ("abstention": true or an id
// ending in "_abs", LongMemEval) are excluded; both count as excluded.
// Queries without text or without a judged relevant document are skipped
// and counted.
//
// # Metrics
//
// Each search asks for Depth chunks (default and at most
// memory.MaxMaxResults, 100) with no score floor; the ranked list of a
// query is the distinct document ids of the result chunks in rank order
// (first occurrence). Over the evaluated queries, with R the judged
// relevant documents of a query:
//
//	Recall@k = mean |R ∩ top k| / |R|           (k = 1, 5, 10)
//	any@10   = share of queries with R ∩ top 10 ≠ ∅
//	nDCG@10  = mean DCG@10 / IDCG@10, DCG@10 = Σ_{i≤10} gain(dᵢ) / log2(i+1),
//	           IDCG@10 the DCG of R sorted by gain (linear gains = qrels score)
//	MRR      = mean 1/rank of the first relevant document in the whole
//	           ranked list (as deep as Depth chunks reach), 0 if none
//
// These are the definitions of shared/corpora/bench/BASELINES.md.
// Report.Groups gives the same figures per query group (LongMemEval's
// "question_type", LoCoMo's category).
//
// Timing: index seconds are the wall time of memory.Open + Sync summed
// over the partitions (writing the temporary Markdown is not counted);
// chunks are the indexed chunks of all partitions; query latency is the
// wall time of one Manager.Search, reported per mode and, at the top
// level, for the hybrid (or the first mode run), measured one search at a
// time unless Options.Workers runs several at once; RSS is the process's peak
// resident set (VmHWM from /proc/self/status; elsewhere the Go runtime's
// memory obtained from the OS, which undercounts cgo allocations).
//
// Errors: ErrInvalidOptions for bad options, ErrInvalidSet for a missing or
// malformed set, both wrapped with context; index and search errors are
// wrapped as they come.
package retrieval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/embed"
)

// Sentinel errors.
var (
	// ErrInvalidOptions: an option is out of range (unknown mode, negative
	// limit, depth above memory.MaxMaxResults, no set).
	ErrInvalidOptions = errors.New("bench retrieval: invalid options")
	// ErrInvalidSet: the set folder lacks a corpus, queries or qrels, a file
	// is malformed, or no judged id matches the corpus.
	ErrInvalidSet = errors.New("bench retrieval: invalid set")
)

// Modes, in the order they are reported.
var allModes = []string{memory.ModeKeyword, memory.ModeVector, memory.ModeHybrid}

// Options configure Run. Only Set is required.
type Options struct {
	// Set is the folder of a BEIR-style set, or a folder of workspaces
	// (see the package doc). Required.
	Set string
	// Workspaces, if set, is a folder of workspaces to index as they are;
	// Set then only provides the queries and qrels.
	Workspaces string
	// Qrels is the qrels file name in the set folder (or a path); default
	// qrels.tsv, else the first qrels*.tsv in name order.
	Qrels string
	// Limit runs only the first Limit evaluated queries (file order); 0 =
	// all. Partitions without a query left are not indexed.
	Limit int
	// Modes are the search modes to run (memory.ModeKeyword, ModeVector,
	// ModeHybrid); default all three.
	Modes []string
	// Embedder embeds chunks and queries; default the builtin embedder
	// (embed.NewBuiltin with default options).
	Embedder embed.Embedder
	// Depth is the number of chunks each search asks for; default and
	// maximum memory.MaxMaxResults (100).
	Depth int
	// TempDir holds the temporary workspaces and indexes (removed when Run
	// returns); default os.TempDir().
	TempDir string
	// Workers is the number of queries searched at once; default 1. More
	// workers finish sooner on several CPUs, but the latencies then
	// include their contention: compare latencies only at Workers 1.
	Workers int
	// Categories keeps only queries whose "category" is listed; default
	// 1, 2, 3, 4. Queries without a category are always kept.
	Categories []int
	// Log receives progress (Info, one line per partition) and the memory
	// managers' logs; default: discarded.
	Log *slog.Logger
	// Ranking is passed to every partition's memory.Manager (vector
	// weight, MMR, temporal decay). With TemporalDecay and no Now, each
	// partition's clock is the day after its newest dated daily log (the
	// conversation's present), so decay measures recency within it.
	Ranking memory.Ranking
	// SkipDefaults skips the searches with the product's defaults and the
	// absent questions (Report.Defaults stays nil; defaults.go).
	SkipDefaults bool
	// Dump, if set, receives one JSON line per question searched with the
	// defaults (present and absent): the scores of its no-floor results and
	// what the index made of the query, for calibrating the default floor.
	Dump io.Writer
}

// Quality are the quality figures of one mode averaged over N queries.
type Quality struct {
	N        int     `json:"n"`
	Recall1  float64 `json:"recall@1"`
	Recall5  float64 `json:"recall@5"`
	Recall10 float64 `json:"recall@10"`
	NDCG10   float64 `json:"ndcg@10"`
	MRR      float64 `json:"mrr"`
	Any10    float64 `json:"any@10"`
}

// Metrics are the quality figures of one mode over all evaluated queries
// and its search latency.
type Metrics struct {
	Quality
	Latency
}

// Latency is the search latency: nearest-rank percentiles in milliseconds.
type Latency struct {
	P50ms float64 `json:"p50ms"`
	P99ms float64 `json:"p99ms"`
}

// IndexStats is the indexing cost over all partitions.
type IndexStats struct {
	Seconds         float64 `json:"seconds"`
	Chunks          int     `json:"chunks"`
	ChunksPerSecond float64 `json:"chunksPerSecond"`
}

// Report is the result of Run. Its JSON form is the one printed by
// `atrium bench retrieval --json`.
type Report struct {
	// Set names the set (its folder name; "parent/workspaces" for a
	// workspaces set).
	Set string `json:"set"`
	// Kind is "beir" or "workspaces"; Level is what is judged: "doc" (a
	// corpus record), "session" (turns grouped), "turn" or "session"
	// (workspace tags).
	Kind  string `json:"kind"`
	Level string `json:"level"`
	// Qrels is the qrels file name used.
	Qrels string `json:"qrels"`
	// Queries is the number of evaluated queries; SkippedQueries had no
	// text or no judged relevant document (or no partition);
	// ExcludedQueries were removed by the category and abstention filters.
	Queries         int `json:"queries"`
	SkippedQueries  int `json:"skippedQueries"`
	ExcludedQueries int `json:"excludedQueries"`
	// MissingJudged counts judged (query, document) pairs whose document is
	// not in the query's index (they stay in the recall denominators).
	MissingJudged int `json:"missingJudged"`
	// Docs is the number of documents (workspaces: tagged turns) indexed;
	// Partitions the number of indexes built.
	Docs       int `json:"docs"`
	Partitions int `json:"partitions"`
	Depth      int `json:"depth"`
	// Workers is the number of concurrent searches (latencies are
	// comparable only at 1).
	Workers  int    `json:"workers"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Modes maps each mode run to its metrics.
	Modes map[string]Metrics `json:"modes"`
	// Defaults is what a caller gets with the product's defaults
	// (defaults.go); nil with SkipDefaults.
	Defaults *DefaultsReport `json:"defaults,omitempty"`
	// Groups breaks the quality down by query group (LongMemEval's
	// "question_type", or "category N (name)" for LoCoMo): group → mode →
	// quality. Absent when no query names a group.
	Groups map[string]map[string]Quality `json:"groups,omitempty"`
	Index  IndexStats                    `json:"index"`
	// Query is the hybrid's latency (the first mode's when the hybrid
	// was not run).
	Query    Latency `json:"query"`
	RSSBytes int64   `json:"rssBytes"`
	// Seconds is the wall time of the whole run.
	Seconds float64 `json:"seconds"`
}

// ModeOrder returns the modes of r in report order (keyword, vector,
// hybrid).
func (r Report) ModeOrder() []string {
	var out []string
	for _, m := range allModes {
		if _, ok := r.Modes[m]; ok {
			out = append(out, m)
		}
	}
	return out
}

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Set == "" {
		return o, fmt.Errorf("%w: Set is required", ErrInvalidOptions)
	}
	if o.Limit < 0 {
		return o, fmt.Errorf("%w: Limit %d is negative (0 = all queries)", ErrInvalidOptions, o.Limit)
	}
	if o.Depth == 0 {
		o.Depth = memory.MaxMaxResults
	}
	if o.Depth < 0 || o.Depth > memory.MaxMaxResults {
		return o, fmt.Errorf("%w: Depth %d out of range (1..%d chunks)", ErrInvalidOptions, o.Depth, memory.MaxMaxResults)
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.Workers < 0 {
		return o, fmt.Errorf("%w: Workers %d is negative", ErrInvalidOptions, o.Workers)
	}
	if len(o.Modes) == 0 {
		o.Modes = allModes
	}
	var modes []string
	for _, m := range o.Modes {
		if !slices.Contains(allModes, m) {
			return o, fmt.Errorf("%w: unknown mode %q (keyword, vector or hybrid)", ErrInvalidOptions, m)
		}
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	o.Modes = modes
	if o.Categories == nil {
		o.Categories = []int{1, 2, 3, 4}
	}
	if o.Embedder == nil {
		o.Embedder = embed.NewBuiltin(embed.BuiltinOptions{})
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Run evaluates the set: it builds the indexes one partition at a time
// (each removed before the next is built), runs every query in every mode
// and returns the report. It stops with ctx.
func Run(ctx context.Context, o Options) (Report, error) {
	start := time.Now()
	o, err := o.withDefaults()
	if err != nil {
		return Report{}, err
	}
	p, err := prepare(o)
	if err != nil {
		return Report{}, err
	}
	rep := Report{
		Set: p.name, Kind: p.kind, Level: p.level, Qrels: p.qrels,
		SkippedQueries: p.skipped, ExcludedQueries: p.excluded, MissingJudged: p.missing,
		Partitions: len(p.parts), Depth: o.Depth, Workers: o.Workers,
		Provider: o.Embedder.Provider(), Model: o.Embedder.Model(),
		Modes: map[string]Metrics{},
	}
	source := ""
	if !o.SkipDefaults {
		source = p.assignAbsent()
	}
	var dump *dumper
	if o.Dump != nil {
		dump = &dumper{w: o.Dump, set: p.name}
	}
	var answers []answer
	root, err := os.MkdirTemp(o.TempDir, "atrium-bench-retrieval-*")
	if err != nil {
		return rep, fmt.Errorf("bench retrieval: temp dir: %w", err)
	}
	defer os.RemoveAll(root)

	scores := map[string][]scored{}
	lat := map[string][]time.Duration{}
	var indexTime time.Duration
	for i, part := range p.parts {
		docs, chunks, took, ans, err := runPartition(ctx, o, root, i, part, scores, lat, dump)
		if err != nil {
			return rep, err
		}
		answers = append(answers, ans...)
		rep.Docs += docs
		rep.Index.Chunks += chunks
		rep.Queries += len(part.queries)
		indexTime += took
	}
	if dump != nil && dump.err != nil {
		return rep, fmt.Errorf("bench retrieval: dump: %w", dump.err)
	}
	if !o.SkipDefaults {
		rep.Defaults = summarise(answers, memory.DefaultMaxResults, source)
	}
	rep.Index.Seconds = indexTime.Seconds()
	if rep.Index.Seconds > 0 {
		rep.Index.ChunksPerSecond = float64(rep.Index.Chunks) / rep.Index.Seconds
	}
	for _, m := range o.Modes {
		rep.Modes[m] = Metrics{
			Quality: quality(scores[m], nil),
			Latency: Latency{P50ms: Percentile(lat[m], 50), P99ms: Percentile(lat[m], 99)},
		}
		for _, sc := range scores[m] {
			if sc.group == "" {
				continue
			}
			if rep.Groups == nil {
				rep.Groups = map[string]map[string]Quality{}
			}
			if rep.Groups[sc.group] == nil {
				rep.Groups[sc.group] = map[string]Quality{}
			}
			if _, done := rep.Groups[sc.group][m]; !done {
				g := sc.group
				rep.Groups[g][m] = quality(scores[m], func(x scored) bool { return x.group == g })
			}
		}
	}
	top := o.Modes[0]
	if slices.Contains(o.Modes, memory.ModeHybrid) {
		top = memory.ModeHybrid
	}
	rep.Query = rep.Modes[top].Latency
	rep.RSSBytes = peakRSS()
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// runPartition indexes one partition, runs its queries in every mode
// (appending to scores and lat), then with the defaults, then its absent
// questions (defaults.go), and removes its temporary files. It returns the
// documents and chunks indexed, the Open + Sync time and the answers.
func runPartition(ctx context.Context, o Options, root string, i int, part *partition,
	scores map[string][]scored, lat map[string][]time.Duration, dump *dumper) (docs, chunks int, took time.Duration, ans []answer, err error) {
	ws := part.workspace
	if ws == "" {
		ws = filepath.Join(root, fmt.Sprintf("ws%03d", i))
		if err := part.write(ws); err != nil {
			return 0, 0, 0, nil, err
		}
		defer os.RemoveAll(ws)
	}
	ixDir := filepath.Join(root, fmt.Sprintf("ix%03d", i))
	defer os.RemoveAll(ixDir)
	log := o.Log.With("partition", part.name)

	t0 := time.Now()
	rk := o.Ranking
	if rk.TemporalDecay && rk.Now == nil {
		present := latestLogDate(ws).AddDate(0, 0, 1)
		rk.Now = func() time.Time { return present }
	}
	m, err := memory.Open(memory.Options{Workspace: ws, IndexDir: ixDir, Embedder: o.Embedder, DisableWatcher: true, Logger: log, Ranking: rk})
	if err != nil {
		return 0, 0, 0, nil, fmt.Errorf("bench retrieval: partition %q: %w", part.name, err)
	}
	defer m.Close()
	if err := m.Sync(ctx); err != nil {
		return 0, 0, 0, nil, fmt.Errorf("bench retrieval: partition %q: %w", part.name, err)
	}
	took = time.Since(t0)
	st := m.Status()
	if st.LastError != "" {
		log.Warn("bench index incomplete", "err", st.LastError)
	}
	log.Info("bench partition indexed", "docs", part.docCount, "files", st.Files, "chunks", st.Chunks, "seconds", took.Seconds(), "queries", len(part.queries))

	results, err := runQueries(ctx, o, m, part, dump)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	for _, per := range results { // query order, whatever the workers did
		for j, mode := range o.Modes {
			lat[mode] = append(lat[mode], per.modes[j].took)
			scores[mode] = append(scores[mode], per.modes[j].sc)
		}
		if !o.SkipDefaults {
			ans = append(ans, per.def)
		}
	}
	if !o.SkipDefaults && len(part.absent) > 0 {
		if part.holdOut {
			if err := part.removeHeldOut(ws); err != nil {
				return 0, 0, 0, nil, err
			}
			if err := m.Sync(ctx); err != nil {
				return 0, 0, 0, nil, fmt.Errorf("bench retrieval: partition %q: sync after hold-out: %w", part.name, err)
			}
		}
		for _, q := range part.absent {
			a, err := askDefaults(ctx, m, part, q, true, dump)
			if err != nil {
				return 0, 0, 0, nil, err
			}
			ans = append(ans, a)
		}
	}
	return part.docCount, st.Chunks, took, ans, nil
}

// queryResult is one query's searches: one per mode (o.Modes order) and
// the defaults' answer.
type queryResult struct {
	modes []modeResult
	def   answer
}

// modeResult is one search of one query in one mode.
type modeResult struct {
	took time.Duration
	sc   scored
}

// runQueries runs every query of the partition in every mode (modes
// interleaved query by query), then with the defaults, on o.Workers
// goroutines and returns the results by query. The first error stops it.
func runQueries(ctx context.Context, o Options, m *memory.Manager, part *partition, dump *dumper) ([]queryResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([]queryResult, len(part.queries))
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for w := 0; w < o.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for qi := range next {
				q := part.queries[qi]
				per := make([]modeResult, len(o.Modes))
				for j, mode := range o.Modes {
					t := time.Now()
					res, err := m.Search(ctx, memory.SearchOptions{Query: q.text, MaxResults: o.Depth, MinScore: -1, Mode: mode})
					per[j].took = time.Since(t)
					if err != nil {
						errOnce.Do(func() {
							firstErr = fmt.Errorf("bench retrieval: query %s (%s): %w", q.id, mode, err)
							cancel()
						})
						return
					}
					per[j].sc = scored{group: q.group, Scores: Score(part.rank(res.Results), q.rel)}
				}
				results[qi].modes = per
				if !o.SkipDefaults {
					a, err := askDefaults(ctx, m, part, q, false, dump)
					if err != nil {
						errOnce.Do(func() {
							firstErr = err
							cancel()
						})
						return
					}
					results[qi].def = a
				}
			}
		}()
	}
feed:
	for qi := range part.queries {
		select {
		case next <- qi:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bench retrieval: %w", err)
	}
	return results, nil
}

// peakRSS returns the process's peak resident set in bytes: VmHWM from
// /proc/self/status, else the Go runtime's memory from the OS.
func peakRSS() int64 {
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				var kb int64
				if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
					return kb << 10
				}
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.Sys)
}

// latestLogDate returns the newest YYYY-MM-DD that starts the name of a
// Markdown file under ws/memory (zero time when there is none).
func latestLogDate(ws string) time.Time {
	var latest time.Time
	_ = filepath.WalkDir(filepath.Join(ws, "memory"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || len(d.Name()) < 10 {
			return nil
		}
		if t, err := time.Parse("2006-01-02", d.Name()[:10]); err == nil && t.After(latest) {
			latest = t
		}
		return nil
	})
	return latest
}
