package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory"
)

// agentsWorkspace is workspace() plus global memory and a private note of
// another role.
func agentsWorkspace(t *testing.T) (home, ws string) {
	t.Helper()
	home, ws = workspace(t)
	for rel, body := range map[string]string{
		"memory/global/user-profile.md": "# 用户画像\n\n用户是后端工程师，关注数据库性能。\n",
		"memory/global/decisions.md":    "# 决策\n\n- 2026-11-20 决定每周一发布性能报告\n",
		"memory/roles/writer/drafts.md": "# 草稿\n\n数据库性能报告草稿，暗号 鹦鹉螺七号。\n",
	} {
		p := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home, ws
}

func TestAgentsCommands(t *testing.T) {
	home, ws := agentsWorkspace(t)
	common := []string{"--home", home, "--workspace", ws}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"no subcommand", []string{"agents"}, 2, "", "agents needs a subcommand"},
		{"unknown subcommand", append([]string{"agents", "spawnify"}, common...), 2, "", "unknown agents subcommand"},
		{"create without description", append([]string{"agents", "create", "analyst"}, common...), 2, "", "needs a role name and a quoted description"},
		{"list takes no arguments", append([]string{"agents", "list", "x"}, common...), 2, "", "takes no arguments"},
		{"reserved role", append([]string{"agents", "create", "admin", "d"}, common...), 1, "", "reserved"},
		{"create", append([]string{"agents", "create", "分析师", "分析数据库性能数据，撰写性能报告", "--capabilities", "数据分析, 报告"}, common...), 0, "初始上下文：分析师", ""},
		{"create saves its starting context", append([]string{"agents", "create", "审稿人", "审阅文章，给出修改意见"}, common...), 0, "Starting context saved to memory/roles/审稿人/MEMORY.md", ""},
		{"create again", append([]string{"agents", "create", "分析师", "again"}, common...), 1, "", "already exists"},
		{"list", append([]string{"agents", "list"}, common...), 0, "memory/roles/分析师/config.md", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if strings.Contains(out, "鹦鹉螺七号") {
				t.Fatalf("another role's private note in the output:\n%s", out)
			}
		})
	}
	// The role exists on disk with its rule; the summary named global memory.
	acl, err := os.ReadFile(filepath.Join(ws, "memory", ".acl"))
	if err != nil || !strings.Contains(string(acl), `"roles/分析师/**"`) {
		t.Fatalf(".acl: %v\n%s", err, acl)
	}
	code, out, errOut := runCLI(t, nil, append([]string{"agents", "list", "--json"}, common...)...)
	var list struct{ Roles []memory.RoleInfo }
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("list --json: %d %v\n%s%s", code, err, out, errOut)
	}
	var found *memory.RoleInfo
	for i := range list.Roles {
		if list.Roles[i].Role == "分析师" {
			found = &list.Roles[i]
		}
	}
	if found == nil || strings.Join(found.Capabilities, ",") != "数据分析,报告" || found.Files != 2 { // config.md and MEMORY.md (the saved starting context)
		t.Fatalf("roles %+v", list.Roles)
	}
	code, out, errOut = runCLI(t, nil, append([]string{"agents", "create", "reporter", "Writes weekly database performance reports", "--json"}, common...)...)
	var res memory.CreateRoleResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
		t.Fatalf("create --json: %d %v\n%s%s", code, err, out, errOut)
	}
	if res.Path != "memory/roles/reporter/config.md" || !strings.Contains(res.Summary, "memory/global/user-profile.md") || strings.Contains(res.Summary, "鹦鹉螺七号") {
		t.Fatalf("create --json = %+v", res)
	}
}

// TestAgentsWhileServing: while the app holds the index, agents commands go
// through its gateway (profiles.create, roles.list).
func TestAgentsWhileServing(t *testing.T) {
	home, ws := agentsWorkspace(t)
	serveApp(t, home, ws)
	common := []string{"--home", home, "--workspace", ws}
	code, out, errOut := runCLI(t, nil, append([]string{"agents", "create", "ops", "Keeps the staging servers running", "--capabilities", "deploys"}, common...)...)
	if code != 0 || !strings.Contains(out, "Created role ops") || !strings.Contains(out, "Starting context for ops") {
		t.Fatalf("create through the app: %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, nil, append([]string{"agents", "list"}, common...)...)
	if code != 0 || !strings.Contains(out, "ops") || !strings.Contains(out, "[deploys]") {
		t.Fatalf("list through the app: %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, nil, append([]string{"agents", "create", "ops", "again"}, common...)...); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("second create through the app: %d %s", code, errOut)
	}
}

// serveApp runs `atrium serve` on a free port until the test ends (then it
// checks the exit status and that gateway.json was removed) and returns
// the port once the app is running.
func serveApp(t *testing.T, home, ws string) string {
	t.Helper()
	port := freePort(t)
	serveMain(t, nil, "serve", "--home", home, "--workspace", ws, "--port", port)
	// The app indexes the workspace in the background after it starts; a
	// search before its first sync ends finds nothing.
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out, errOut := runCLI(t, nil, "memory", "status", "--json", "--home", home, "--workspace", ws, "--port", port)
		var st memory.Status
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.State == memory.StateReady {
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("the app's first index did not end within 60 s: exit %d\n%s\n%s", code, out, errOut)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// serveMain runs Main with args (a serve or desktop command, with --home)
// in this process until the test ends, then checks its exit status and
// that gateway.json was removed; it returns the app's stdout once the app
// is running.
func serveMain(t *testing.T, env map[string]string, args ...string) *syncWriter {
	t.Helper()
	home := ""
	for i, a := range args {
		if a == "--home" && i+1 < len(args) {
			home = args[i+1]
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan int, 1)
	serveOut, serveErr := &syncWriter{w: &bytes.Buffer{}}, &syncWriter{w: &bytes.Buffer{}}
	go func() {
		served <- Main(args, Options{
			Version: "test", Stdout: serveOut, Stderr: serveErr,
			Getenv: func(k string) string { return env[k] }, Context: ctx,
			A2UISchemas: os.DirFS(filepath.Join("..", "..", "frontend", "src", "lib", "a2ui", "schemas")),
		})
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-served; code != 0 {
			t.Errorf("%v: exit %d\n%s", args, code, serveErr)
		}
		if _, err := os.Stat(filepath.Join(home, "gateway.json")); err == nil {
			t.Error("gateway.json left behind after the app stopped")
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(serveOut.String(), "is running") {
		select {
		case code := <-served:
			served <- code
			t.Fatalf("%v ended with exit %d before it ran:\n%s", args, code, serveErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v did not start within 60 s", args)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return serveOut
}
