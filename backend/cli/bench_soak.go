package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"

	"github.com/atrium-dev/atrium/backend/bench/soak"
)

// runBenchSoak is `atrium bench soak [--duration 30m] [--warmup D]
// [--sample 5s] [--phones 3] [--nodes 2] [--dir DIR] [--json]`: the soak
// (package backend/bench/soak; figures in docs/BENCHMARKS.md). It runs
// this binary as `atrium serve`, `atrium node` and `atrium mcp` processes
// on loopback. Without --dir it works in a new folder under the system
// temp dir and removes it at the end (kept when the soak fails, so its
// serve.log and node logs can be read). Progress goes to stderr; the
// report (text, or the soak.Report JSON with --json) to stdout; exit
// status 1 when the soak found a problem.
func runBenchSoak(ctx context.Context, args []string, o Options) error {
	fs := newFlagSet("bench soak", o)
	duration := fs.Duration("duration", soak.DefaultDuration, "length of the load")
	warmUp := fs.Duration("warmup", 0, "first part of the load whose samples are not judged (default a sixth of --duration)")
	sample := fs.Duration("sample", soak.DefaultSampleEvery, "sampling period of the app's RSS, goroutines and descriptors")
	phones := fs.Int("phones", soak.DefaultPhones, "phones (device-signed WebSocket clients)")
	nodeCount := fs.Int("nodes", soak.DefaultNodes, "`atrium node` processes (0: none)")
	dir := fs.String("dir", "", "working folder (default: a temporary folder, removed afterwards unless the soak fails)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: bench soak takes no arguments", errUsage)
	}
	if *duration <= 0 || *sample <= 0 || *phones <= 0 || *nodeCount < 0 || *warmUp < 0 {
		return fmt.Errorf("%w: bench soak needs a positive --duration, --sample and --phones", errUsage)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench soak: this binary: %w", err)
	}
	work, cleanup, err := benchDir(*dir, "soak")
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := soak.Run(ctx, soak.Options{Dir: work, Duration: *duration, WarmUp: *warmUp, SampleEvery: *sample,
		Phones: *phones, Nodes: *nodeCount, NoNodes: *nodeCount == 0, Logger: log,
		Command: func(args ...string) *exec.Cmd {
			cmd := exec.Command(exe, args...)
			cmd.Env = os.Environ()
			return cmd
		}})
	if rep != nil {
		if *asJSON {
			if perr := printJSON(o.Stdout, rep); perr != nil && err == nil {
				err = perr
			}
		} else {
			printSoak(o.Stdout, rep)
		}
	}
	if err != nil {
		if *dir == "" {
			fmt.Fprintf(o.Stderr, "bench soak: the working folder is kept: %s\n", work)
		}
		return fmt.Errorf("bench soak: %w", err)
	}
	cleanup()
	return nil
}

// printSoak prints the report as text.
func printSoak(w io.Writer, r *soak.Report) {
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(w, "soak %s  %s  %d CPUs, load average %.2f\nload %.0f s, warm-up %.0f s, %d samples\n\n",
		r.Date, r.Machine, r.CPUs, r.LoadAvg, r.DurationSeconds, r.WarmUpSeconds, len(r.Samples))
	fmt.Fprintf(w, "\tbaseline (t≈%.0f s)\tend (t≈%.0f s)\tslope per hour\n", r.Baseline.AtSeconds, r.End.AtSeconds)
	fmt.Fprintf(w, "RSS\t%.1f MiB\t%.1f MiB\t%+.1f MiB\n", mib(r.Baseline.RSSBytes), mib(r.End.RSSBytes), r.RSSSlopePerHour/(1<<20))
	fmt.Fprintf(w, "  anonymous / file\t%.1f / %.1f MiB\t%.1f / %.1f MiB\n", mib(r.Baseline.RSSAnonBytes), mib(r.Baseline.RSSFileBytes),
		mib(r.End.RSSAnonBytes), mib(r.End.RSSFileBytes))
	fmt.Fprintf(w, "Go heap (live)\t%.1f MiB\t%.1f MiB\t%+.1f MiB\n", mib(r.Baseline.HeapLiveBytes), mib(r.End.HeapLiveBytes), r.HeapSlopePerHour/(1<<20))
	fmt.Fprintf(w, "goroutines\t%d\t%d\t%+.1f\n", r.Baseline.Goroutines, r.End.Goroutines, r.GoroutineSlopePerHour)
	fmt.Fprintf(w, "open descriptors\t%d\t%d\t%+.1f\n\n", r.Baseline.FDs, r.End.FDs, r.FDSlopePerHour)
	fmt.Fprintf(w, "operations (errors):\n")
	kinds := make([]string, 0, len(r.Ops))
	for k := range r.Ops {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-20s %6d (%d)\n", k, r.Ops[k], r.Errors[k])
	}
	fmt.Fprintf(w, "writes checked on disk and by search: %d, lost: %d\n", r.WritesChecked, len(r.Lost))
	for _, l := range r.Lost {
		fmt.Fprintf(w, "  lost: %s\n", l)
	}
	for _, c := range r.ErrorCauses {
		fmt.Fprintf(w, "  error: %s\n", c)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
}
