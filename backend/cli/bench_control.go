package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/atrium-dev/atrium/backend/bench/control"
)

// runBenchControl is `atrium bench control [--profiles 100] [--active 10]
// [--clients 200] [--duration 10s] [--dir DIR] [--json]`: the
// control-center benchmark (package backend/bench/control; results in
// docs/BENCHMARKS.md). It runs the real app in this process with the
// binary's own UI and re-executes this binary as the workers. Without
// --dir it works in a new folder under the system temp dir and removes it
// at the end. Progress goes to stderr; the report (text, or the
// control.Report JSON with --json) to stdout.
func runBenchControl(ctx context.Context, args []string, o Options) error {
	fs := newFlagSet("bench control", o)
	profiles := fs.Int("profiles", control.DefaultProfiles, "profiles to create (memory/roles/<r>/config.md)")
	active := fs.Int("active", control.DefaultActive, "profiles running as worker instances (at most 16)")
	clients := fs.Int("clients", control.DefaultClients, "concurrent WebSocket clients of the load phase")
	duration := fs.Duration("duration", control.DefaultDuration, "length of the load phase")
	chunks := fs.Int("chunks", control.DefaultChunks, "chunks per scripted model answer")
	interval := fs.Duration("chunk-interval", control.DefaultChunkInterval, "time between two chunks of an answer")
	pause := fs.Duration("request-interval", 0, "a client's pause between two requests (0: back to back)")
	dir := fs.String("dir", "", "working folder for the workspace and the app's home (default: a temporary folder, removed afterwards)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: bench control takes no arguments", errUsage)
	}
	if *profiles <= 0 || *active <= 0 || *active > 16 || *active > *profiles || *clients <= 0 || *duration <= 0 || *chunks <= 0 || *interval <= 0 || *pause < 0 {
		return fmt.Errorf("%w: bench control needs positive numbers, --active at most 16 and at most --profiles", errUsage)
	}
	if o.UI == nil {
		return fmt.Errorf("bench control: this binary has no UI to serve (build the frontend first)")
	}
	work, cleanup, err := benchDir(*dir, "control")
	if err != nil {
		return err
	}
	defer cleanup()
	log := slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := control.Run(ctx, control.Options{Dir: work, UI: o.UI, Profiles: *profiles, Active: *active, Clients: *clients,
		Duration: *duration, RequestInterval: *pause, Chunks: *chunks, ChunkInterval: *interval, Logger: log})
	if rep != nil && err == nil {
		if *asJSON {
			err = printJSON(o.Stdout, rep)
		} else {
			printControl(o.Stdout, rep)
		}
	}
	if err != nil {
		return fmt.Errorf("bench control: %w", err)
	}
	return nil
}

// printControl prints the report as text.
func printControl(w io.Writer, r *control.Report) {
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(w, "control bench %s  %s  %d CPUs, load average %.2f\n%d profiles, %d active instances, %d clients (request interval %.0f ms), load %.1f s\n\n",
		r.Date, r.Machine, r.CPUs, r.LoadAvg, r.Profiles, r.Active, r.Clients, r.RequestIntervalMs, r.LoadSeconds)
	fmt.Fprintf(w, "start → usable UI (hello-ok, profiles.list, index.html)\t%.1f ms\n", r.UsableMs)
	fmt.Fprintf(w, "start → %d instances ready\t%.1f ms\n", r.Active, r.InstancesReadyMs)
	fmt.Fprintf(w, "app RSS after start\t%.1f MB\nworkers RSS (sum of %d)\t%.1f MB (PSS %.1f MB)\napp RSS peak under load (with the clients)\t%.1f MB\n",
		mb(r.AppRSS), r.Active, mb(r.WorkersRSS), mb(r.WorkersPSS), mb(r.AppRSSLoad))
	fmt.Fprintf(w, "requests\t%d (%.0f/s, p99 %.2f ms)\nchat events to clients\t%d (%.0f/s)\nmessages/s\t%.0f\n",
		r.Requests, r.RequestsPerSec, r.RequestP99Ms, r.Events, r.EventsPerSec, r.MessagesPerSec)
	fmt.Fprintf(w, "chunk latency (model → client)\tp50 %.2f ms, p99 %.2f ms, max %.2f ms (%d samples)\n",
		r.ChunkP50Ms, r.ChunkP99Ms, r.ChunkMaxMs, r.ChunkSamples)
	fmt.Fprintf(w, "answers\t%d (run errors %d, client errors %d)\n", r.Answers, r.RunErrors, r.ClientErrors)
	for _, c := range append(r.RunErrorCauses, r.ClientErrorCauses...) {
		fmt.Fprintf(w, "  error: %s\n", c)
	}
}
