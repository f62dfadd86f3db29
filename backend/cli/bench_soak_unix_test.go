//go:build unix

package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/bench/soak"
)

// TestBenchSoak is the soak's short run (issue 26 item 6; `make soak` and
// `atrium bench soak` run it for 30 minutes): this test binary as `atrium
// serve`, two `atrium node` processes (one killed and restarted at least
// once), two phones pairing and reconnecting, chat, memory writes, notes
// and searches, an MCP client over /mcp and `atrium mcp` over stdio, and
// files edited on disk, for 90 s of load. The app's RSS, goroutines and
// descriptors must be flat after the warm-up (soak.Flat: medians of the
// first and last thirds, bounds that do not depend on time), no operation
// may fail, and every acknowledged write must be on disk and found by
// search at the end.
func TestBenchSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak's short run takes two minutes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := soak.Run(ctx, soak.Options{Dir: dir, Duration: 90 * time.Second, WarmUp: 30 * time.Second, SampleEvery: 3 * time.Second,
		Phones: 2, Nodes: 2, PhoneCycle: 8 * time.Second, NodeRestartEvery: 15 * time.Second, Logger: log,
		Command: func(args ...string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = []string{envCLIMain + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "user")}
			return cmd
		}})
	if err != nil {
		var nodeLogs []byte
		files, _ := filepath.Glob(filepath.Join(dir, "node-*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			nodeLogs = append(append(nodeLogs, "== "+f+"\n"...), tail(b, 3000)...)
		}
		serveLog, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
		t.Fatalf("soak: %v\nreport: %+v\nprogress:\n%s\nnodes:\n%s\nserve.log (end):\n%s", err, rep, logs.String(), nodeLogs, tail(serveLog, 8000))
	}
	for _, k := range []string{"chat", "memory.write", "memory.note", "memory.search", "mcp.http.write", "mcp.http.get", "mcp.http.search",
		"mcp.stdio.write", "mcp.stdio.process", "disk.edit", "phone.pair", "phone.connect", "node.pair", "node.restart"} {
		if rep.Ops[k] == 0 {
			t.Errorf("no %s operation in the soak: %v", k, rep.Ops)
		}
	}
	if rep.WritesChecked == 0 {
		t.Error("no write checked")
	}
	t.Logf("ops %v; RSS %d → %d MiB, goroutines %d → %d, fds %d → %d; %d writes checked",
		rep.Ops, rep.Baseline.RSSBytes>>20, rep.End.RSSBytes>>20, rep.Baseline.Goroutines, rep.End.Goroutines,
		rep.Baseline.FDs, rep.End.FDs, rep.WritesChecked)
}

// TestSoakFlat: the criterion itself (soak.Flat) on figures a leak makes
// and on figures that are flat.
func TestSoakFlat(t *testing.T) {
	base := soak.Sample{RSSBytes: 100 << 20, Goroutines: 200, FDs: 40}
	if p := soak.Flat(base, soak.Sample{RSSBytes: 130 << 20, Goroutines: 215, FDs: 50}); p != nil {
		t.Errorf("flat figures judged not flat: %v", p)
	}
	for _, end := range []soak.Sample{
		{RSSBytes: 200 << 20, Goroutines: 200, FDs: 40},
		{RSSBytes: 100 << 20, Goroutines: 300, FDs: 40},
		{RSSBytes: 100 << 20, Goroutines: 200, FDs: 90},
	} {
		if p := soak.Flat(base, end); len(p) != 1 {
			t.Errorf("%+v → %+v: %v, want one problem", base, end, p)
		}
	}
}

// tail is the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
