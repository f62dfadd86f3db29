package control

import (
	"context"
	"os"
	"runtime"
	"testing"
	"testing/fstest"
	"time"

	"github.com/atrium-dev/atrium/backend/worker"
)

// TestMain lets the test binary be re-executed as the app's workers
// (`atrium worker …`, SPEC §3), as backend/worker's and backend/cli's
// tests do.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(worker.Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// TestRunSmall runs the whole benchmark with small numbers (5 profiles, 2
// active, 10 clients) and checks that every figure is there and sane; no
// timing is judged.
func TestRunSmall(t *testing.T) {
	ui := fstest.MapFS{"index.html": {Data: []byte("<!doctype html><html><body>Atrium</body></html>")}}
	rep, err := Run(context.Background(), Options{Dir: t.TempDir(), UI: ui, Profiles: 5, Active: 2, Clients: 10,
		Duration: 1500 * time.Millisecond, Chunks: 10, ChunkInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *rep)
	if rep.Profiles != 5 || rep.Active != 2 || rep.Clients != 10 || rep.CPUs <= 0 || rep.Machine == "" {
		t.Fatalf("report header %+v", rep)
	}
	if rep.UsableMs <= 0 || rep.InstancesReadyMs < rep.UsableMs {
		t.Fatalf("start-up figures: usable %v ms, instances ready %v ms", rep.UsableMs, rep.InstancesReadyMs)
	}
	if runtime.GOOS == "linux" && (rep.AppRSS <= 0 || rep.WorkersRSS <= 0 || rep.AppRSSLoad <= 0) {
		t.Fatalf("RSS: app %d, workers %d, under load %d", rep.AppRSS, rep.WorkersRSS, rep.AppRSSLoad)
	}
	if rep.Requests <= 0 || rep.RequestsPerSec <= 0 || rep.Events <= 0 || rep.MessagesPerSec <= rep.RequestsPerSec {
		t.Fatalf("throughput: %d requests (%v/s), %d events, %v messages/s", rep.Requests, rep.RequestsPerSec, rep.Events, rep.MessagesPerSec)
	}
	if rep.ChunkSamples <= 0 || rep.ChunkP50Ms <= 0 || rep.ChunkP99Ms < rep.ChunkP50Ms || rep.ChunkMaxMs < rep.ChunkP99Ms {
		t.Fatalf("chunk latency: %d samples, p50 %v, p99 %v, max %v", rep.ChunkSamples, rep.ChunkP50Ms, rep.ChunkP99Ms, rep.ChunkMaxMs)
	}
	if rep.Answers <= 0 || rep.RunErrors != 0 || rep.ClientErrors != 0 {
		t.Fatalf("runs: %d answers, %d run errors %q, %d client errors %q",
			rep.Answers, rep.RunErrors, rep.RunErrorCauses, rep.ClientErrors, rep.ClientErrorCauses)
	}
}
