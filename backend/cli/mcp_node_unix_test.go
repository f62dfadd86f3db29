//go:build unix

package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/mcpserve/mcptest"
)

// TestMCPNodeClient: the npm @modelcontextprotocol/sdk client (a client
// nobody here wrote; frontend/scripts/mcp-client.mjs) calls every tool,
// resource and the prompt as each of two roles over stdio (the real
// `atrium mcp`) and over /mcp of a running app, and never sees the other
// role's private file. Needs node and frontend's npm packages (make test
// installs them with npm ci); skipped without them.
func TestMCPNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	front, err := filepath.Abs(filepath.Join("..", "..", "frontend"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(front, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Skip("frontend/node_modules has no @modelcontextprotocol/sdk: run npm ci in frontend")
	}
	script := filepath.Join(front, "scripts", "mcp-client.mjs")
	run := func(ctx context.Context, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
		cmd.Dir = front
		cmd.Env = []string{envCLIMain + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || !strings.Contains(out.String(), `"ok":true`) {
			t.Errorf("node client %v: %v\n%s\n%s", args[:4], err, out.String(), errb.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()

	dir := t.TempDir()
	home, ws := filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	mcptest.Seed(t, ws)
	for i, me := range mcptest.Roles {
		run(ctx, "--role", me, "--other", mcptest.Roles[1-i], "--", os.Args[0], "mcp", "--as", me, "--home", home, "--workspace", ws)
	}

	dir = t.TempDir()
	home, ws = filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	mcptest.Seed(t, ws)
	startIndexedApp(t, home, ws)
	addr, gw := appAdmin(ctx, t, home, "node-test")
	for i, me := range mcptest.Roles {
		tok := mcpToken(ctx, t, gw, "node "+me, me)
		run(ctx, "--role", me, "--other", mcptest.Roles[1-i], "--http", "http://"+addr+"/mcp", "--token", tok)
	}
}
