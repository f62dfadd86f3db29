package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/memory"
)

// runCLIIn is runCLI with standard input.
func runCLIIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, Options{Version: "test", Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin),
		Getenv: func(string) string { return "" }})
	return code, out.String(), errb.String()
}

// aclWorkspace is a workspace with two roles under the default ACL
// (no memory/.acl: roles/<r>/** is read+write for <r> and admin).
func aclWorkspace(t *testing.T) (home, ws string) {
	t.Helper()
	dir := t.TempDir()
	home, ws = filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	for rel, text := range map[string]string{
		"memory/global/user-profile.md":      "# User\n\nThe user likes short answers.\n",
		"memory/roles/code-expert/secret.md": "# Tips\n\nPrivate tip, codeword quasarlemon: pin the pool.\n",
		"memory/roles/writer/notes.md":       "# Notes\n\n文章草稿的笔记。\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home, ws
}

// tailJSON runs `atrium audit tail --json` with extra flags.
func tailJSON(t *testing.T, home, ws string, flags ...string) []audit.Entry {
	t.Helper()
	code, out, errOut := runCLIIn(t, "", append([]string{"audit", "tail", "--json", "--home", home, "--workspace", ws}, flags...)...)
	if code != 0 {
		t.Fatalf("audit tail: %d %s", code, errOut)
	}
	var r struct {
		Entries []audit.Entry `json:"entries"`
		Corrupt int           `json:"corrupt"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Corrupt != 0 {
		t.Fatalf("audit tail output %q: %v (corrupt %d)", out, err, r.Corrupt)
	}
	return r.Entries
}

// TestMemoryAsRole runs `atrium memory search|get|write --as ROLE` locally
// and through the running app, and `atrium audit tail` on what they left.
func TestMemoryAsRole(t *testing.T) {
	for _, serving := range []bool{false, true} {
		name := "local"
		if serving {
			name = "through the app"
		}
		t.Run(name, func(t *testing.T) {
			home, ws := aclWorkspace(t)
			common := []string{"--home", home, "--workspace", ws}
			if serving {
				serveApp(t, home, ws)
				// The app serves before its first index run ends; until then
				// a search through it finds nothing. Wait for that run.
				deadline := time.Now().Add(60 * time.Second)
				for {
					var st memory.Status
					code, out, errOut := runCLIIn(t, "", append([]string{"memory", "status", "--json"}, common...)...)
					if code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.State != memory.StateIndexing && st.Files > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("the app did not index the workspace within 60 s: %d %s %s", code, out, errOut)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			for _, tc := range []struct {
				args  []string
				stdin string
				code  int
				out   string // in stdout (code 0) or stderr
			}{
				{[]string{"memory", "get", "memory/roles/code-expert/secret.md", "--as", "writer"}, "", 1, "forbidden"},
				{[]string{"memory", "get", "memory/roles/writer/../code-expert/secret.md", "--as", "writer"}, "", 1, "invalid path"},
				{[]string{"memory", "get", "memory/roles/code-expert/secret.md", "--as", "code-expert"}, "", 0, "quasarlemon"},
				{[]string{"memory", "get", "memory/roles/code-expert/secret.md"}, "", 0, "quasarlemon"},
				{[]string{"memory", "search", "quasarlemon", "--as", "writer"}, "", 0, "No results."},
				{[]string{"memory", "search", "quasarlemon", "--as", "code-expert"}, "", 0, "memory/roles/code-expert/secret.md"},
				{[]string{"memory", "write", "memory/roles/code-expert/secret.md", "--mode", "append", "--as", "writer"}, "pwned\n", 1, "forbidden"},
				{[]string{"memory", "write", "memory/roles/writer/notes.md", "--mode", "append", "--as", "writer"}, "新的一行。\n", 0, "Wrote memory/roles/writer/notes.md"},
				{[]string{"memory", "write", "memory/roles/writer/notes.md", "--as", "writer"}, "x\n", 2, "--mode append"},
				{[]string{"memory", "get", "memory/roles/writer/notes.md", "--as", "admin"}, "", 2, "reserved"},
				// A role the workspace does not have is refused, with the list.
				{[]string{"memory", "search", "quasarlemon", "--as", "writr"}, "", 2, `--as "writr" is not a role of this workspace (known roles: code-expert, main, writer;`},
				{[]string{"memory", "get", "memory/roles/writer/notes.md", "--as", "Writer"}, "", 2, "known roles: code-expert, main, writer;"},
				{[]string{"memory", "write", "memory/roles/writr/notes.md", "--mode", "append", "--as", "writr"}, "x\n", 2, "known roles: code-expert, main, writer;"},
				{[]string{"memory", "search", "quasarlemon", "--as", "main"}, "", 0, "No results."},
			} {
				code, out, errOut := runCLIIn(t, tc.stdin, append(tc.args, common...)...)
				got := out
				if tc.code != 0 {
					got = errOut
				}
				if code != tc.code || !strings.Contains(got, tc.out) {
					t.Errorf("%v: exit %d, want %d with %q\nstdout: %s\nstderr: %s", tc.args, code, tc.code, tc.out, out, errOut)
				}
				if tc.code != 0 && strings.Contains(out+errOut, "quasarlemon") && tc.args[1] != "search" {
					t.Errorf("%v reveals the private text", tc.args)
				}
			}
			if b, err := os.ReadFile(filepath.Join(ws, "memory", "roles", "code-expert", "secret.md")); err != nil || strings.Contains(string(b), "pwned") {
				t.Errorf("secret.md: %q %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(ws, "memory", "roles", "writr")); err == nil {
				t.Errorf("a write as an unknown role created its folder")
			}

			denied := tailJSON(t, home, ws, "--role", "writer", "--result", "denied")
			ops := map[string]int{}
			for _, e := range denied {
				ops[e.Operation]++
				if e.Role != "writer" || e.Result != audit.Denied || e.Reason == "" {
					t.Errorf("denied entry %+v", e)
				}
			}
			if ops["get"] != 2 || ops["write"] != 1 || len(denied) != 3 {
				t.Errorf("writer's denials: %v (%d entries), want get 2, write 1", ops, len(denied))
			}
			searches := tailJSON(t, home, ws, "--operation", "search", "--role", "writer")
			if len(searches) != 1 || searches[0].Result != audit.Allowed || searches[0].Target != "quasarlemon" || !strings.Contains(searches[0].Reason, "1 files out of scope") {
				t.Errorf("writer's search entries: %+v", searches)
			}
			if all := tailJSON(t, home, ws, "-n", "2"); len(all) != 2 {
				t.Errorf("audit tail -n 2: %d entries", len(all))
			}
			if !serving {
				// A malformed .acl in a fresh process: nothing good was ever
				// loaded, so only admin may act (never fail open); status says
				// which line is wrong.
				if err := os.WriteFile(filepath.Join(ws, "memory", ".acl"), []byte("version: \"1.0\"\nrules:\n  roles/writer/*: {read: [writer], delete: [writer]}\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				code, out, errOut := runCLIIn(t, "", append([]string{"memory", "status"}, common...)...)
				if code != 0 || !strings.Contains(out, "admin-only") || !strings.Contains(out, "line 3") {
					t.Errorf("memory status with a bad .acl: %d\n%s\n%s", code, out, errOut)
				}
				if code, _, errOut := runCLIIn(t, "", append([]string{"memory", "get", "memory/roles/writer/notes.md", "--as", "writer"}, common...)...); code != 1 || !strings.Contains(errOut, "forbidden") {
					t.Errorf("get as writer under a bad .acl: %d %s", code, errOut)
				}
			}
			code, out, _ := runCLIIn(t, "", append([]string{"audit", "tail", "--result", "denied"}, common...)...)
			if code != 0 || !strings.Contains(out, "memory/roles/code-expert/secret.md") && !strings.Contains(out, "roles/code-expert/secret.md") || !strings.Contains(out, "denied") {
				t.Errorf("audit tail text: %d\n%s", code, out)
			}
		})
	}
}
