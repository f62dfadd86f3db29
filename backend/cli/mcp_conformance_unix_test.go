//go:build unix

package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/mcpserve/mcptest"
)

// conformanceDir holds the pinned MCP conformance suite and the Node 22
// it needs (tests/mcp-conformance: `npm ci` there; make test does it).
const conformanceDir = "../../tests/mcp-conformance"

// TestMCPConformance runs the npm @modelcontextprotocol/conformance
// suite's server scenarios (the version pinned in
// tests/mcp-conformance/package.json, on the Node 22 pinned beside it)
// against a running app's /mcp. The suite sends no Authorization header,
// so it talks to a reverse proxy on 127.0.0.1 that adds a live token of
// role writer to each request and passes everything else (Host, Origin,
// the streams) through unchanged; the token checks themselves are tested
// in backend/mcpserve and backend/atrium. Scenarios that do not apply
// (they need the suite's own test tools, resources and prompts) are
// listed with the reason for each in tests/mcp-conformance/baseline.yml
// (and docs/PROTOCOL.md): the suite fails on any other failure, and on a
// listed scenario that passes.
func TestMCPConformance(t *testing.T) {
	nodeBin := filepath.Join(conformanceDir, "node_modules", ".bin", "node")
	suite := filepath.Join(conformanceDir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{nodeBin, suite} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("the MCP conformance suite is not installed (%v): run `npm ci` in tests/mcp-conformance (make test does)", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	home, ws := filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	mcptest.Seed(t, ws)
	startIndexedApp(t, home, ws)
	addr, gw := appAdmin(ctx, t, home, "conformance")
	token := mcpToken(ctx, t, gw, "conformance", "writer")

	// The proxy: the app's address as the target, the request's own Host
	// and Origin kept (the DNS rebinding scenario sends foreign ones).
	target, err := url.Parse("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1, // server-sent events as they come
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	out := t.TempDir()
	if d := os.Getenv("ATRIUM_CONFORMANCE_OUT"); d != "" {
		out = d // the suite's checks.json per scenario, kept to read
	}
	cmd := exec.CommandContext(ctx, nodeBin, suite, "server", "--url", "http://"+ln.Addr().String()+"/mcp",
		"--suite", "all", "--expected-failures", filepath.Join(conformanceDir, "baseline.yml"), "-o", out)
	cmd.Env = []string{"PATH=" + filepath.Dir(nodeBin) + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("conformance suite:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("conformance suite: %v (a failure not in tests/mcp-conformance/baseline.yml, or a listed one that passes)\n%s", err, stderr.String())
	}
}
