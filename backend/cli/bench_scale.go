package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/atrium-dev/atrium/backend/bench/scale"
)

// runBenchScale is `atrium bench scale [--sizes 10000,100000,1000000]
// [--dir DIR] [--json] [--queries N] [--seed N]`: the memory search scale
// benchmark (package backend/bench/scale; results in docs/BENCHMARKS.md).
// Without --dir it works in a new folder under the system temp dir and
// removes it at the end. Progress goes to stderr; the report (text, or the
// scale.Report JSON with --json) to stdout.
func runBenchScale(ctx context.Context, args []string, o Options) error {
	fs := newFlagSet("bench scale", o)
	// The corpora come from $ATRIUM_CORPORA or ../shared/corpora (see
	// scale.FindCorpora); the usage text says so.
	sizes := fs.String("sizes", "10000,100000,1000000", "chunk counts to grow to, ascending, comma-separated")
	dir := fs.String("dir", "", "working folder for the workspace and the index (default: a temporary folder, removed afterwards)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	queries := fs.Int("queries", scale.DefaultQueries, "number of benchmark queries (half English, half Chinese)")
	seed := fs.Int64("seed", scale.DefaultSeed, "seed of the generated corpus and the query sample")
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: bench scale takes no arguments", errUsage)
	}
	var ns []int
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("%w: --sizes: %q is not a positive number", errUsage, f)
		}
		if len(ns) > 0 && n <= ns[len(ns)-1] {
			return fmt.Errorf("%w: --sizes must be ascending, got %s", errUsage, *sizes)
		}
		ns = append(ns, n)
	}
	if *queries <= 0 {
		return fmt.Errorf("%w: --queries must be > 0", errUsage)
	}
	work, cleanup, err := benchDir(*dir, "scale")
	if err != nil {
		return err
	}
	defer cleanup()
	corpora := o.Getenv("ATRIUM_CORPORA")
	if corpora == "" {
		if corpora, err = scale.FindCorpora(); err != nil {
			return fmt.Errorf("bench scale: %w", err)
		}
	}
	log := slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := scale.Run(ctx, scale.Options{Corpora: corpora, Dir: work, Sizes: ns, Queries: *queries, Seed: *seed, Logger: log})
	if rep != nil {
		if *asJSON {
			enc := json.NewEncoder(o.Stdout)
			enc.SetIndent("", "  ")
			if e := enc.Encode(rep); e != nil && err == nil {
				err = e
			}
		} else {
			printScale(o.Stdout, rep)
		}
	}
	if err != nil {
		return fmt.Errorf("bench scale: %w", err)
	}
	return nil
}

// printScale prints the report as tables.
func printScale(w io.Writer, r *scale.Report) {
	fmt.Fprintf(w, "scale bench %s  %s  %d CPUs (%s)\nembedder %s, chunking %s, %d queries (%d en, %d zh), seed %d, base RSS %.0f MB\n\n",
		r.Date, r.GoVersion, r.CPUs, r.CPUModel, r.Embedder, r.Chunking, r.Queries, r.EnglishQueries, r.ChineseQueries, r.Seed, r.BaseRSSMB)
	fmt.Fprintln(w, "chunks\tfiles\tnew\tindex s\tcpu s\tchunks/s\tmd MB\tsqlite MB\tbleve MB\trss MB\tpeak MB\tvector\twarm s\thybrid p50/p99 ms\tagain p50/p99\tkeyword p50/p99\tvector p50/p99\trecall@10\tmax1≠max5\tedit ms")
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	for _, s := range r.Steps {
		fmt.Fprintf(w, "%d\t%d\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%.1f\t%.2f/%.2f\t%.2f/%.2f\t%.2f/%.2f\t%.2f/%.2f\t%.3f\t%d\t%.0f\n",
			s.Chunks, s.Files, s.NewChunks, s.IndexSeconds, s.IndexCPUSeconds, s.ChunksPerSecond, mb(s.MarkdownBytes), mb(s.SQLiteBytes), mb(s.BleveBytes),
			s.RSSMB, s.PeakRSSMB, s.VectorLeg, s.WarmSeconds, s.Hybrid.P50Ms, s.Hybrid.P99Ms, s.HybridRepeat.P50Ms, s.HybridRepeat.P99Ms, s.Keyword.P50Ms, s.Keyword.P99Ms,
			s.Vector.P50Ms, s.Vector.P99Ms, s.RecallAt10, s.FirstResultMismatches, s.EditSearchableMs)
	}
	if len(r.Growth) > 0 {
		fmt.Fprintln(w, "\ngrowth\tchunks\tindex bytes\trss\thybrid p50\thybrid p99\tkeyword p50\tvector p50\tchunks/s")
		for _, g := range r.Growth {
			fmt.Fprintf(w, "%d→%d\t×%.1f\t×%.1f\t×%.1f\t×%.2f\t×%.2f\t×%.2f\t×%.2f\t×%.2f\n",
				g.From, g.To, g.Chunks, g.IndexBytes, g.RSS, g.HybridP50, g.HybridP99, g.KeywordP50, g.VectorP50, g.ChunksPerSecond)
		}
	}
}
