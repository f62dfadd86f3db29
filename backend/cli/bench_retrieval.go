package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/safefile"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/atrium-dev/atrium/backend/bench/retrieval"
)

// runBenchRetrieval is `atrium bench retrieval --set DIR`: the retrieval
// quality harness (package backend/bench/retrieval) on one set, printed as
// a table or, with --json, as one JSON object (retrieval.Report); --out
// FILE also writes that object to FILE.
func runBenchRetrieval(ctx context.Context, args []string, o Options) error {
	fs := newFlagSet("bench retrieval", o)
	set := fs.String("set", "", "BEIR-style set folder (corpus*.jsonl, queries.jsonl, qrels*.tsv), a folder of workspaces, or a judged set (judged.jsonl; needs --workspaces)")
	wss := fs.String("workspaces", "", "folder of workspaces to index as they are (queries and qrels, or judged.jsonl, from --set)")
	qrels := fs.String("qrels", "", "qrels file in the set folder (default qrels.tsv, else the first qrels*.tsv)")
	limit := fs.Int("limit", 0, "run only the first N queries (0 = all)")
	modes := fs.String("modes", "keyword,vector,hybrid", "comma-separated search modes")
	cats := fs.String("categories", "1,2,3,4", "comma-separated query categories to keep (queries without one are always kept)")
	depth := fs.Int("depth", 0, "chunks per search (default and maximum 100)")
	workers := fs.Int("workers", 1, "queries searched at once (latencies are comparable only at 1)")
	vw := fs.Float64("vector-weight", 0, "vector weight of the fused score (0 = the default for the embedder)")
	mmr := fs.Bool("mmr", false, "re-rank with MMR")
	lambda := fs.Float64("mmr-lambda", 0, "MMR λ (0 = 0.7)")
	decay := fs.Bool("decay", false, "temporal decay of dated daily logs")
	halfLife := fs.Float64("half-life", 0, "decay half-life in days (0 = 30)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	out := fs.String("out", "", "also write the JSON object to this file")
	noDefaults := fs.Bool("no-defaults", false, "skip the searches with the product's defaults and the absent questions")
	dumpPath := fs.String("dump", "", "write one JSON line per question searched with the defaults to this file (floor calibration)")
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: bench retrieval takes no arguments (got %q)", errUsage, pos[0])
	}
	if *set == "" {
		return fmt.Errorf("%w: bench retrieval needs --set DIR", errUsage)
	}
	if *out != "" {
		// Fail before a run of minutes, not after it.
		if st, err := os.Stat(filepath.Dir(*out)); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: --out %s: folder %s does not exist", errUsage, *out, filepath.Dir(*out))
		}
	}
	categories, err := intList(*cats)
	if err != nil {
		return fmt.Errorf("%w: --categories: %v", errUsage, err)
	}
	var dump *os.File
	if *dumpPath != "" {
		if dump, err = os.Create(*dumpPath); err != nil {
			return fmt.Errorf("%w: --dump: %v", errUsage, err)
		}
		defer dump.Close()
	}
	ro := retrieval.Options{
		Set:          *set,
		Workspaces:   *wss,
		Qrels:        *qrels,
		Limit:        *limit,
		Modes:        splitList(*modes),
		Depth:        *depth,
		Workers:      *workers,
		Categories:   categories,
		Ranking:      memory.Ranking{VectorWeight: *vw, MMR: *mmr, MMRLambda: *lambda, TemporalDecay: *decay, HalfLifeDays: *halfLife},
		Log:          newLogger(o, slog.LevelWarn),
		SkipDefaults: *noDefaults,
	}
	if dump != nil {
		ro.Dump = dump
	}
	rep, err := retrieval.Run(ctx, ro)
	if errors.Is(err, retrieval.ErrInvalidOptions) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	if *out != "" {
		if err := writeJSONFile(*out, rep); err != nil {
			return err
		}
	}
	if *asJSON {
		return printJSON(o.Stdout, rep)
	}
	return rep.WriteText(o.Stdout)
}

// writeJSONFile writes v as indented JSON to path atomically (package
// safefile: a reader never sees half a report; a replaced report keeps its
// mode).
func writeJSONFile(path string, v any) error {
	var b bytes.Buffer
	if err := printJSON(&b, v); err != nil {
		return err
	}
	if err := safefile.WriteFile(path, b.Bytes(), safefile.Options{}); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// intList parses a comma-separated list of integers; empty gives nil.
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
