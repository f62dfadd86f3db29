//go:build unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atrium-dev/atrium/backend/atrium"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/mcpserve/mcptest"
)

// mcpCommand is `atrium mcp ARGS…` as a real process (this test binary
// re-executed as the command line).
func mcpCommand(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"mcp"}, args...)...)
	cmd.Env = []string{envCLIMain + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	return cmd
}

// mcpStdio starts `atrium mcp` with args and connects the SDK's client to
// it over its standard input and output.
func mcpStdio(ctx context.Context, t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	cmd := mcpCommand(t, args...)
	stderr := &syncWriter{w: &bytes.Buffer{}}
	cmd.Stderr = stderr
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("atrium mcp %v: %v\n%s", args, err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// startIndexedApp starts `atrium serve` on home and ws and waits until
// its index holds the workspace (`atrium memory index` asks the running
// app for memory.sync): a search right after the start would otherwise
// race the app's first index run.
func startIndexedApp(t *testing.T, home, ws string) {
	t.Helper()
	app := startAtrium(t, "serve", "--home", home, "--workspace", ws, "--port", freePort(t))
	app.running(t)
	if code, out, errs := runCLI(t, nil, "memory", "index", "--home", home, "--workspace", ws); code != 0 {
		t.Fatalf("memory index through the app: %d %s %s", code, out, errs)
	}
}

// appAdmin connects to the app running on home with its operator token
// (closed when the test ends) and returns the gateway's address with it.
func appAdmin(ctx context.Context, t *testing.T, home, id string) (addr string, gw *gateway.Client) {
	t.Helper()
	info, err := atrium.ReadGatewayInfo(filepath.Join(home, "gateway.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(home, "gateway.token"))
	if err != nil {
		t.Fatal(err)
	}
	gw, err = gateway.Dial(ctx, gateway.ClientOptions{URL: "ws://" + info.Addr + "/ws", Token: strings.TrimSpace(string(tok)),
		Client: gateway.ClientInfo{ID: id, Version: "test", Platform: "linux", Mode: "test", InstanceID: id}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return info.Addr, gw
}

// mcpToken creates a token of role for an MCP client of /mcp (admin's
// mcp.token.create) and returns its secret.
func mcpToken(ctx context.Context, t *testing.T, gw *gateway.Client, name, role string) string {
	t.Helper()
	var created struct {
		Token string `json:"token"`
	}
	if err := gw.Call(ctx, atrium.MethodMCPTokenCreate, map[string]string{"name": name, "role": role}, &created); err != nil {
		t.Fatal(err)
	}
	return created.Token
}

// auditLines reads every audit entry of home.
func auditLines(t *testing.T, home string) []map[string]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(home, "audit", "*.jsonl"))
	var out []map[string]any
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(l), &e) == nil {
				out = append(out, e)
			}
		}
	}
	return out
}

// TestMCPStdio: the SDK's client starts the real `atrium mcp --as ROLE` and
// calls every tool, resource and the prompt as each of two roles, first
// with no app running (the workspace opened by the command), then beside a
// running app (the calls go to it, its guard audits them with the
// connection's address); without --as only `authenticated`'s files; an
// oversized line ends the server instead of being buffered.
func TestMCPStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	for _, withApp := range []bool{false, true} {
		dir := t.TempDir()
		home, ws := filepath.Join(dir, "home"), filepath.Join(dir, "ws")
		mcptest.Seed(t, ws)
		if withApp {
			startIndexedApp(t, home, ws)
		}
		for i, me := range mcptest.Roles {
			cs := mcpStdio(ctx, t, "--as", me, "--home", home, "--workspace", ws)
			mcptest.Exercise(ctx, t, cs, me, mcptest.Roles[1-i])
			cs.Close()
		}
		// Without a role: what the ACL grants `authenticated` — by its
		// defaults no file at all.
		cs := mcpStdio(ctx, t, "--home", home, "--workspace", ws)
		for _, p := range []string{mcptest.Private["writer"], mcptest.Private["coder"], mcptest.Global} {
			if e := mcptest.Call(ctx, t, cs, "memory_get", map[string]any{"path": p}, nil); e == "" {
				t.Errorf("app %v: atrium mcp without --as read %s", withApp, p)
			}
		}
		var res struct {
			Results []any `json:"results"`
		}
		if e := mcptest.Call(ctx, t, cs, "memory_search", map[string]any{"query": mcptest.GlobalKey + " " + mcptest.Key["writer"]}, &res); e != "" || len(res.Results) != 0 {
			t.Errorf("app %v: atrium mcp without --as searched: %v %s", withApp, res.Results, e)
		}
		cs.Close()
		// The refusals are in the audit log as the role; beside the app,
		// the app wrote them (with the connection's address).
		found := false
		for _, e := range auditLines(t, home) {
			if e["role"] == "writer" && e["result"] == "denied" && e["target"] == "roles/coder/notes.md" {
				found = true
				if ip, _ := e["ip"].(string); withApp != (ip == "127.0.0.1") {
					t.Errorf("app %v: audit entry %v", withApp, e)
				}
			}
		}
		if !found {
			t.Errorf("app %v: no denied read of coder's file by writer in the audit log", withApp)
		}
	}
}

// TestMCPStdioOversized: a line longer than 1 MiB is not buffered: the
// server stops reading and ends.
func TestMCPStdioOversized(t *testing.T) {
	dir := t.TempDir()
	home, ws := filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	mcptest.Seed(t, ws)
	cmd := mcpCommand(t, "--as", "writer", "--home", home, "--workspace", ws)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	stderr := &syncWriter{w: &bytes.Buffer{}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}` + "\n"
		_, _ = in.Write([]byte(big)) // may fail once the server stopped reading
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr.String(), "line") {
			t.Errorf("atrium mcp after a 2 MiB line: %v, stderr %q; want an error about the line", err, stderr.String())
		}
	case <-time.After(120 * time.Second):
		t.Fatal("atrium mcp still runs after a 2 MiB line")
	}
}
