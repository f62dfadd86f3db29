package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory"
)

// runCLI runs Main with args and an environment that has no model and no
// display, returning the exit status and outputs.
func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, Options{
		Version: "test",
		Stdout:  &out,
		Stderr:  &errb,
		Getenv:  func(k string) string { return env[k] },
	})
	return code, out.String(), errb.String()
}

func workspace(t *testing.T) (home, ws string) {
	t.Helper()
	dir := t.TempDir()
	home, ws = filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"MEMORY.md":            "# Memory\n\nThe staging server is called bluefin.\n",
		"memory/2026-11-20.md": "# 日志\n\n把数据库连接池从 16 调到 32。\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home, ws
}

func TestCommands(t *testing.T) {
	home, ws := workspace(t)
	common := []string{"--home", home, "--workspace", ws}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		stdout   string // substring of stdout
		stderr   string // substring of stderr
	}{
		{"version", []string{"version"}, 0, "atrium test", ""},
		{"help", []string{"help"}, 0, "atrium memory search", ""},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"memory without subcommand", []string{"memory"}, 2, "", "memory needs a subcommand"},
		{"unknown memory subcommand", append([]string{"memory", "frob"}, common...), 2, "", "unknown memory subcommand"},
		{"search without query", append([]string{"memory", "search"}, common...), 2, "", "needs an argument"},
		{"bad flag", []string{"memory", "status", "--nope"}, 2, "", "flag provided but not defined"},
		{"command help lists its flags", []string{"memory", "search", "--help"}, 0, "-max-results", ""},
		{"port out of range", []string{"memory", "status", "--port", "99999"}, 2, "", "is not a TCP port"},
		{"desktop help says nothing about displays", []string{"--help"}, 0, "Usage:", ""},
		{"index", append([]string{"memory", "index"}, common...), 0, "2 files", ""},
		{"status", append([]string{"memory", "status"}, common...), 0, "openclaw layout", ""},
		{"search Chinese, flags after the query", append([]string{"memory", "search", "数据库连接池"}, common...), 0, "memory/2026-11-20.md:", ""},
		{"search English", append([]string{"memory", "search", "--max-results", "1"}, append(common, "staging server")...), 0, "1. MEMORY.md:", ""},
		{"search at the query limit", append([]string{"memory", "search", strings.Repeat("数据库连接池", memory.MaxQueryChars/6) + "数据库连"}, common...), 0, "memory/2026-11-20.md:", ""},
		{"search over the query limit", append([]string{"memory", "search", strings.Repeat("数据库连接池", memory.MaxQueryChars/6) + "数据库连接"}, common...), 2, "",
			fmt.Sprintf("query is %d characters, the limit is %d", memory.MaxQueryChars+1, memory.MaxQueryChars)},
		{"search over the query limit in many words", append([]string{"memory", "search"}, append(slices.Repeat([]string{"staging"}, memory.MaxQueryChars/8+1), common...)...), 2, "",
			fmt.Sprintf("the limit is %d", memory.MaxQueryChars)},
		{"get with line range", append([]string{"memory", "get", "MEMORY.md", "--from", "3", "--lines", "1"}, common...), 0, "bluefin", ""},
		{"get outside the workspace", append([]string{"memory", "get", "../../etc/passwd"}, common...), 1, "", "invalid path"},
		{"get missing", append([]string{"memory", "get", "memory/nope.md"}, common...), 1, "", "not found"},
		{"flags before the command", append(append([]string{}, common...), "memory", "search", "--max-results", "1", "staging server"), 0, "1. MEMORY.md:", ""},
		{"flags before an unknown command", append(append([]string{}, common...), "frobnicate"), 2, "", `unknown command "frobnicate"`},
		{"empty --as is not admin", append([]string{"memory", "get", "MEMORY.md", "--as", ""}, common...), 2, "", "--as needs a role name"},
		{"--as a reserved principal", append([]string{"memory", "get", "MEMORY.md", "--as", "admin"}, common...), 2, "", "reserved principal"},
		{"mistyped workspace is not created", []string{"memory", "status", "--home", home, "--workspace", ws + "-typo"}, 1, "", "does not exist"},
	}
	t.Cleanup(func() {
		if _, err := os.Stat(ws + "-typo"); err == nil {
			t.Error("a mistyped --workspace was created")
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, tt.args...)
			if code != tt.wantCode || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tt.wantCode, out, errOut)
			}
			if tt.stderr != "" && strings.Count(errOut, tt.stderr) != 1 {
				t.Errorf("the error is printed %d times:\n%s", strings.Count(errOut, tt.stderr), errOut)
			}
			if code == 0 && (strings.Contains(errOut, "level=INFO") || strings.Contains(errOut, "display")) {
				t.Errorf("a memory command logged progress to stderr:\n%s", errOut)
			}
		})
	}
}

func TestSearchJSON(t *testing.T) {
	home, ws := workspace(t)
	code, out, errOut := runCLI(t, nil, "memory", "search", "--json", "--home", home, "--workspace", ws, "bluefin")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res memory.SearchResponse
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(res.Results) == 0 || res.Results[0].Path != "MEMORY.md" || res.Provider != "builtin" {
		t.Fatalf("results: %+v", res)
	}
}

// TestMemoryWhileServing: while `atrium serve` holds the index, the memory
// commands go through its gateway instead of touching the index.
func TestMemoryWhileServing(t *testing.T) {
	home, ws := workspace(t)
	port := serveApp(t, home, ws)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := runCLI(t, nil, "memory", "search", "--home", home, "--workspace", ws, "--port", port, "bluefin")
		if code == 0 && strings.Contains(out, "MEMORY.md") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memory search never answered through the running app: exit %d, %s", code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, out, errOut := runCLI(t, nil, "memory", "index", "--home", home, "--workspace", ws, "--port", port); code != 0 || !strings.Contains(out, "2 files") {
		t.Fatalf("memory index through the app: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, nil, "memory", "get", "../x", "--home", home, "--workspace", ws, "--port", port); code != 1 || !strings.Contains(errOut, "invalid path") {
		t.Fatalf("bad path through the app: exit %d, %s", code, errOut)
	}
	// Without --port the CLI finds the app through $ATRIUM_HOME/gateway.json.
	if code, out, errOut := runCLI(t, nil, "memory", "status", "--home", home, "--workspace", ws); code != 0 || !strings.Contains(out, "ready") {
		t.Fatalf("status without --port: exit %d\n%s\n%s", code, out, errOut)
	}
	// The workspace goes away while the app runs: the CLI still asks the
	// app, which keeps its index and reports the error.
	if err := os.Rename(ws, ws+".gone"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(ws+".gone", ws)
	for {
		code, out, errOut := runCLI(t, nil, "memory", "status", "--home", home, "--workspace", ws)
		if code == 0 && strings.Contains(out, "is missing") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status with the workspace gone: exit %d\n%s\n%s", code, out, errOut)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, out, _ := runCLI(t, nil, "memory", "search", "--home", home, "--workspace", ws, "bluefin"); code != 0 || !strings.Contains(out, "MEMORY.md") {
		t.Fatalf("search with the workspace gone: exit %d\n%s", code, out)
	}
	// Another workspace name is not this app's: refused, not answered for.
	if code, _, errOut := runCLI(t, nil, "memory", "status", "--home", home, "--workspace", ws+"-typo"); code != 1 || !strings.Contains(errOut, "does not exist") {
		t.Fatalf("status for a mistyped workspace while the app runs: exit %d\n%s", code, errOut)
	}
}

// syncWriter makes a writer safe for the serving goroutine and the test.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestStatusSeesChanges: a fresh process reports files changed since the
// last index as dirty and the index as stale.
func TestStatusSeesChanges(t *testing.T) {
	home, ws := workspace(t)
	common := []string{"--home", home, "--workspace", ws}
	if code, out, errOut := runCLI(t, nil, append([]string{"memory", "index"}, common...)...); code != 0 {
		t.Fatalf("index: %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, nil, append([]string{"memory", "status"}, common...)...); code != 0 || !strings.Contains(out, "ready") || !strings.Contains(out, "(0 dirty)") {
		t.Fatalf("status after index: %d\n%s", code, out)
	}
	later := time.Now().Add(2 * time.Second)
	p := filepath.Join(ws, "MEMORY.md")
	if err := os.WriteFile(p, []byte("# Memory\n\nThe staging server is now called orca.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, nil, append([]string{"memory", "status", "--json"}, common...)...)
	var st memory.Status
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("status --json: %d %v\n%s", code, err, out)
	}
	if st.Dirty != 1 || st.State == memory.StateReady {
		t.Fatalf("status after an edit: %+v (want 1 dirty and not ready)", st)
	}
}
