//go:build unix

package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atrium-dev/atrium/backend/mcpserve/mcptest"
)

// bearerRT adds a bearer token to every request.
type bearerRT string

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPSearchLatency measures memory_search as role writer over MCP
// (stdio with the app running, stdio without an app, streamable HTTP at
// /mcp) next to the gateway's memory.search, on the same workspace: a
// measurement for docs/BENCHMARKS.md, run on purpose with
// ATRIUM_BENCH_MCP=1 (N searches each, default 200: ATRIUM_BENCH_MCP_N).
func TestMCPSearchLatency(t *testing.T) {
	if os.Getenv("ATRIUM_BENCH_MCP") == "" {
		t.Skip("a measurement: set ATRIUM_BENCH_MCP=1 (docs/BENCHMARKS.md)")
	}
	n := 200
	if v := os.Getenv("ATRIUM_BENCH_MCP_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()
	home, ws := filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	mcptest.Seed(t, ws)
	// A workspace of some size: 200 notes of the writer, 200 global.
	for i := range 200 {
		for _, d := range []string{"memory/roles/writer", "memory/global"} {
			p := filepath.Join(ws, d, fmt.Sprintf("note-%03d.md", i))
			benchMust(t, os.WriteFile(p, []byte(fmt.Sprintf("# Note %d\n\nMeeting %d about the launch plan, the budget and chapter %d of the manuscript.\n", i, i, i%17)), 0o644))
		}
	}
	queries := []string{"launch plan budget", "QK-7731", "chapter 3 manuscript", "what did we decide about the budget?"}
	stats := func(name string, f func(q string) error) {
		var ds []time.Duration
		for i := range n {
			start := time.Now()
			if err := f(queries[i%len(queries)]); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
		t.Logf("%-34s n=%d median %s ms, p95 %s ms, min %s ms", name, n, ms(ds[n/2]), ms(ds[n*95/100]), ms(ds[0]))
	}
	search := func(cs *mcp.ClientSession) func(string) error {
		return func(q string) error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_search", Arguments: map[string]any{"query": q}})
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error %v", res.Content)
			}
			return err
		}
	}

	// Without an app: each call opens the workspace.
	cs := mcpStdio(ctx, t, "--as", "writer", "--home", home, "--workspace", ws)
	stats("MCP stdio, no app (index per call)", search(cs))
	cs.Close()

	startIndexedApp(t, home, ws)
	addr, gw := appAdmin(ctx, t, home, "bench")
	stats("gateway memory.search (WebSocket)", func(q string) error {
		return gw.Call(ctx, "memory.search", map[string]any{"query": q, "as": "writer"}, nil)
	})
	cs = mcpStdio(ctx, t, "--as", "writer", "--home", home, "--workspace", ws)
	stats("MCP stdio, through the app", search(cs))
	cs.Close()
	token := mcpToken(ctx, t, gw, "bench", "writer")
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	hs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: bearerRT(token), Timeout: time.Minute}}, nil)
	benchMust(t, err)
	defer hs.Close()
	stats("MCP streamable HTTP /mcp", search(hs))
}

func benchMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
