package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory"
)

// TestMemoryMv runs `atrium memory mv` locally and through the running
// app: a rename as a role that may write both paths, refusals for a path
// the role may not write (either end), a look-alike name and a stale
// --base, each leaving the files as they were, and the audit entries.
func TestMemoryMv(t *testing.T) {
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
				deadline := time.Now().Add(60 * time.Second)
				for {
					var st memory.Status
					code, out, _ := runCLIIn(t, "", append([]string{"memory", "status", "--json"}, common...)...)
					if code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.State != memory.StateIndexing && st.Files > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the app did not index the workspace within 60 s")
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			for _, tc := range []struct {
				args []string
				code int
				out  string
			}{
				{[]string{"memory", "mv", "memory/roles/writer/notes.md", "memory/roles/code-expert/notes.md", "--as", "writer"}, 1, "forbidden"},
				{[]string{"memory", "mv", "memory/roles/code-expert/secret.md", "memory/roles/writer/secret.md", "--as", "writer"}, 1, "forbidden"},
				{[]string{"memory", "mv", "memory/roles/writer/notes.md", "memory/roles/writer/nоtes.md", "--as", "writer"}, 1, "looks like"},
				{[]string{"memory", "mv", "memory/roles/writer/notes.md", "memory/roles/writer/n2.md", "--base", "writer=7", "--as", "writer"}, 1, "changed since"},
				{[]string{"memory", "mv", "memory/roles/writer/notes.md"}, 2, "PATH and NEWPATH"},
				{[]string{"memory", "mv", "memory/roles/writer/notes.md", "memory/roles/writer/drafts/文章.md", "--as", "writer"}, 0, "Renamed memory/roles/writer/notes.md to memory/roles/writer/drafts/文章.md"},
			} {
				code, out, errOut := runCLIIn(t, "", append(tc.args, common...)...)
				got := out
				if tc.code != 0 {
					got = errOut
				}
				if code != tc.code || !strings.Contains(got, tc.out) {
					t.Errorf("%v: exit %d, want %d with %q\nstdout: %s\nstderr: %s", tc.args, code, tc.code, tc.out, out, errOut)
				}
			}
			if b, err := os.ReadFile(filepath.Join(ws, "memory", "roles", "writer", "drafts", "文章.md")); err != nil || !strings.Contains(string(b), "文章草稿") {
				t.Errorf("renamed note: %q %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(ws, "memory", "roles", "writer", "notes.md")); !os.IsNotExist(err) {
				t.Errorf("the old name is still there: %v", err)
			}
			if _, err := os.Stat(filepath.Join(ws, "memory", "roles", "code-expert", "secret.md")); err != nil {
				t.Errorf("secret.md after a refused move: %v", err)
			}
			denied := tailJSON(t, home, ws, "--role", "writer", "--result", "denied", "--operation", "rename")
			if len(denied) != 2 {
				t.Errorf("denied renames audited: %+v, want 2 (one per refused path)", denied)
			}
		})
	}
}
