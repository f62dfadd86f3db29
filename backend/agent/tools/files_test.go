package tools

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/memory"
)

func TestReadFileAdversarial(t *testing.T) {
	e := newTestEnv(t, Options{})
	// A symlink inside the workspace pointing out of it, and one to a
	// folder outside.
	if err := os.Symlink(filepath.Join(e.outside, "secret.txt"), filepath.Join(e.ws, "notes", "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.outside, filepath.Join(e.ws, "out")); err != nil {
		t.Fatal(err)
	}
	// A symlink to another role's private memory, from a workspace file.
	if err := os.Symlink(filepath.Join(e.ws, "memory", "roles", "writer", "private.md"), filepath.Join(e.ws, "notes", "private.md")); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(filepath.Join(e.ws, "notes", "todo.txt"))
	cases := []struct{ name, path string }{
		{"dotdot", "../outside/secret.txt"},
		{"dotdot inside", "notes/../memory/roles/writer/private.md"},
		{"absolute outside", filepath.Join(e.outside, "secret.txt")},
		{"absolute etc", "/etc/passwd"},
		{"absolute inside", abs},
		{"symlink file out", "notes/link.txt"},
		{"symlink dir out", "out/secret.txt"},
		{"other role's private memory", "memory/roles/writer/private.md"},
		{"symlink to other role's memory", "notes/private.md"},
		{"hidden", ".git/config"},
		{"acl file", "memory/.acl"},
		{"backslash", `notes\todo.txt`},
		{"percent", "notes/%2e%2e/x"},
		{"case trick", "Notes/todo.txt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := e.call(ReadFile, map[string]any{"path": c.path})
			if res.Status != agent.StatusDenied {
				t.Fatalf("read_file %q = %s %s %s", c.path, res.Status, res.Error, res.Data)
			}
			if contains(res.Error, "marmotfig") || contains(res.Error, "outside secret") || len(res.Data) != 0 {
				t.Fatalf("leaked: %+v", res)
			}
			a := e.newest()
			if a.Result != audit.Denied || a.Role != "code-expert" || a.Session != "s-1" || a.Operation != ReadFile {
				t.Fatalf("audit %+v", a)
			}
		})
	}
	// What the agent may read.
	res := e.call(ReadFile, map[string]any{"path": "notes/todo.txt", "from": 2, "lines": 1})
	if res.Status != agent.StatusOK || dataOf[readResult](t, res).Text != "line two\n" {
		t.Fatalf("workspace file: %+v", res)
	}
	if a := e.newest(); a.Result != audit.Allowed || a.Target != "notes/todo.txt" {
		t.Errorf("audit %+v", a)
	}
	res = e.call(ReadFile, map[string]any{"path": "memory/roles/code-expert/notes.md"})
	if res.Status != agent.StatusOK || !contains(dataOf[readResult](t, res).Text, "parser") {
		t.Fatalf("own memory: %+v", res)
	}
	if a := e.newest(); a.Result != audit.Allowed || a.Target != "roles/code-expert/notes.md" {
		t.Errorf("audit %+v", a)
	}
	if res := e.call(ReadFile, map[string]any{"path": "memory/global/project-status.md"}); res.Status != agent.StatusOK {
		t.Errorf("global memory: %+v", res)
	}
	if res := e.call(ReadFile, map[string]any{"path": "notes/missing.txt"}); res.Status != agent.StatusError {
		t.Errorf("missing file: %+v", res)
	}
}

func TestWriteFile(t *testing.T) {
	e := newTestEnv(t, Options{Files: FilesOptions{Deny: []string{"build"}}})
	for _, p := range []string{"../outside/x.txt", "/tmp/x.txt", ".env", "build/out.txt", "memory/roles/writer/private.md", "memory/global/project-status.md"} {
		res := e.call(WriteFile, map[string]any{"path": p, "content": "pwned"})
		if res.Status != agent.StatusDenied {
			t.Errorf("write_file %q = %s %s", p, res.Status, res.Error)
			continue
		}
		if a := e.newest(); a.Result != audit.Denied || a.Operation != WriteFile {
			t.Errorf("audit of %q: %+v", p, a)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, "memory", "roles", "writer", "private.md")); strings.Contains(string(b), "pwned") {
		t.Fatal("another role's memory was written")
	}
	// A workspace file: created atomically, then appended to.
	if res := e.call(WriteFile, map[string]any{"path": "notes/new/plan.txt", "content": "a\n"}); res.Status != agent.StatusOK {
		t.Fatalf("create: %+v", res)
	}
	if res := e.call(WriteFile, map[string]any{"path": "notes/new/plan.txt", "content": "b\n", "mode": "append"}); res.Status != agent.StatusOK {
		t.Fatalf("append: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, "notes", "new", "plan.txt")); string(b) != "a\nb\n" {
		t.Fatalf("content %q", b)
	}
	ents, _ := os.ReadDir(filepath.Join(e.ws, "notes", "new"))
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	// Own memory goes through the engine: versioned and indexed.
	res := e.call(WriteFile, map[string]any{"path": "memory/roles/code-expert/ideas.md", "content": "# Ideas\n\nquokkabyte compiler\n"})
	if res.Status != agent.StatusOK || !contains(string(res.Data), `"version"`) {
		t.Fatalf("memory write: %+v", res)
	}
	if hits := e.call(MemorySearch, map[string]any{"query": "quokkabyte"}); !contains(string(hits.Data), "ideas.md") {
		t.Errorf("written memory not indexed: %s", hits.Data)
	}
	// A symlink planted inside the workspace pointing out is refused for writes too.
	if err := os.Symlink(e.outside, filepath.Join(e.ws, "notes", "out")); err != nil {
		t.Fatal(err)
	}
	if res := e.call(WriteFile, map[string]any{"path": "notes/out/secret.txt", "content": "pwned"}); res.Status != agent.StatusDenied {
		t.Errorf("write through symlink: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(e.outside, "secret.txt")); string(b) != "outside secret\n" {
		t.Fatalf("outside file changed: %q", b)
	}
}

func TestMemoryTools(t *testing.T) {
	e := newTestEnv(t, Options{})
	// Search never shows another role's private memory, and is audited.
	res := e.call(MemorySearch, map[string]any{"query": "marmotfig codeword"})
	if res.Status != agent.StatusOK || contains(string(res.Data), "marmotfig") || contains(string(res.Data), "writer/private") {
		t.Fatalf("search leaked: %+v", res)
	}
	if a := e.newest(); a.Operation != "search" || a.Role != "code-expert" {
		t.Errorf("search audit %+v", a)
	}
	res = e.call(MemorySearch, map[string]any{"query": "parser rewrite"})
	if !contains(string(res.Data), "roles/code-expert/notes.md") {
		t.Errorf("own memory not found: %s", res.Data)
	}
	if !contains(string(res.Data), `"confidence":{"level":"`) || contains(string(res.Data), `"note"`) {
		t.Errorf("a found note: want a confidence and no weak-results note: %s", res.Data)
	}
	// Weak results say so to the model (issue 25): the other role's
	// private note is out of scope, so nothing answers "marmotfig".
	res = e.call(MemorySearch, map[string]any{"query": "marmotfig codeword"})
	if !contains(string(res.Data), `"level":"low"`) || !contains(string(res.Data), `"note":"`) {
		t.Errorf("weak search: want confidence low and a note for the model: %s", res.Data)
	}
	// A query of memory.MaxQueryChars characters searches; one more is
	// refused before any search (no audit entry), saying the limit (the
	// schema's maxLength, else the handler's check).
	before := len(e.audits(audit.Filter{}))
	if res := e.call(MemorySearch, map[string]any{"query": strings.Repeat("parser rewrite ", memory.MaxQueryChars/15)}); res.Status != agent.StatusOK {
		t.Errorf("search at the query limit: %+v", res)
	}
	if res := e.call(MemorySearch, map[string]any{"query": strings.Repeat("解析器重写", memory.MaxQueryChars/5) + "!"}); res.Status == agent.StatusOK ||
		!contains(res.Error, "maxLength") && !contains(res.Error, "the limit is "+strconv.Itoa(memory.MaxQueryChars)) {
		t.Errorf("search over the query limit: %+v", res)
	}
	if n := len(e.audits(audit.Filter{})); n != before+1 {
		t.Errorf("%d audit entries for one search and one refused query", n-before)
	}
	// Get: another role's private file is denied and audited.
	res = e.call(MemoryGet, map[string]any{"path": "memory/roles/writer/private.md"})
	if res.Status != agent.StatusDenied || contains(res.Error, "marmotfig") {
		t.Fatalf("get other role: %+v", res)
	}
	if a := e.newest(); a.Result != audit.Denied || a.Operation != "get" || a.Target != "roles/writer/private.md" {
		t.Errorf("get audit %+v", a)
	}
	if res := e.call(MemoryGet, map[string]any{"path": "../outside/secret.txt"}); res.Status != agent.StatusDenied {
		t.Errorf("get outside: %+v", res)
	}
	if res := e.call(MemoryGet, map[string]any{"path": "memory/global/project-status.md", "from": 3, "lines": 1}); res.Status != agent.StatusOK ||
		dataOf[struct{ Text string }](t, res).Text != "The calculator project ships on Friday.\n" {
		t.Errorf("get global: %+v", res)
	}
	// Write: own memory yes, global (write admin+main) no.
	if res := e.call(MemoryWrite, map[string]any{"path": "memory/roles/code-expert/notes.md", "content": "More notes.", "mode": "append"}); res.Status != agent.StatusOK {
		t.Fatalf("write own: %+v", res)
	}
	if a := e.newest(); a.Result != audit.Allowed || a.Operation != "write" {
		t.Errorf("write audit %+v", a)
	}
	if res := e.call(MemoryWrite, map[string]any{"path": "memory/global/project-status.md", "content": "x", "mode": "replace"}); res.Status != agent.StatusDenied {
		t.Errorf("write global: %+v", res)
	}
	if res := e.call(MemoryWrite, map[string]any{"path": "memory/roles/code-expert/notes.md", "content": "x", "mode": "overwrite"}); res.Status != agent.StatusError ||
		!contains(res.Error, "mode") {
		t.Errorf("schema enum: %+v", res)
	}
	// Note: today's log of the agent's own role.
	res = e.call(MemoryNote, map[string]any{"text": "tried the quokka idea"})
	if res.Status != agent.StatusOK {
		t.Fatalf("note: %+v", res)
	}
	b, _ := os.ReadFile(filepath.Join(e.ws, "memory", "roles", "code-expert", "2026-05-01.md"))
	if !strings.Contains(string(b), "- 10:00:00 tried the quokka idea") || !strings.HasPrefix(string(b), "- 09:00:00 started") {
		t.Errorf("daily log %q", b)
	}
	// Exactly one audit entry per write decision (the engine's hook
	// sees the write was checked).
	if n := len(e.audits(audit.Filter{Operation: "note"})); n != 1 {
		t.Errorf("%d note audit entries", n)
	}
	if n := len(e.audits(audit.Filter{Operation: "write", TargetPrefix: "roles/code-expert/notes.md"})); n != 1 {
		t.Errorf("%d write audit entries for notes.md", n)
	}
}

// write_file keeps the mode of the file it replaces (issue 14 item 10),
// and refuses a new name that looks like an existing one, naming it, for
// workspace files and memory alike (issue 14 item 7).
func TestWriteFileModesAndLookalikes(t *testing.T) {
	e := newTestEnv(t, Options{})
	todo := filepath.Join(e.ws, "notes", "todo.txt")
	if err := os.Chmod(todo, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"replace", "append"} {
		if res := e.call(WriteFile, map[string]any{"path": "notes/todo.txt", "content": "more\n", "mode": mode}); res.Status != agent.StatusOK {
			t.Fatalf("%s: %+v", mode, res)
		}
		if info, err := os.Stat(todo); err != nil || info.Mode() != 0o640 {
			t.Fatalf("%s: mode %v, %v; want 0640", mode, info.Mode(), err)
		}
	}
	own := e.call(WriteFile, map[string]any{"path": "memory/roles/code-expert/ideas.md", "content": "# Ideas\n"})
	if own.Status != agent.StatusOK {
		t.Fatalf("own memory: %+v", own)
	}
	for _, tc := range []struct{ path, existing string }{
		{"notes/ＴＯＤＯ.txt", "notes/todo.txt"},
		{"notes/Todo.TXT", "notes/todo.txt"},
		{"ＮＯＴＥＳ/plan.txt", "notes"},
		{"memory/roles/code-expert/ＩＤＥＡＳ.md", "memory/roles/code-expert/ideas.md"},
		// UTS #39 confusables (issue 21 item 5).
		{"notes/t\u043ed\u043e.txt", "notes/todo.txt"},                                  // Cyrillic о
		{"n\u043etes/plan.txt", "notes"},                                                // a folder
		{"memory/roles/code-expert/\u0456deas.md", "memory/roles/code-expert/ideas.md"}, // Cyrillic і
	} {
		res := e.call(WriteFile, map[string]any{"path": tc.path, "content": "x"})
		// (A case-only variant is already refused by the ACL's path
		// canonicalisation, with its own words.)
		if res.Status == agent.StatusOK || !contains(res.Error, "looks like the existing "+tc.existing) &&
			!contains(res.Error, "differs only in letter case from the existing \""+path.Base(tc.existing)+"\"") {
			t.Errorf("write_file %s = %s %s; want a refusal naming %s", tc.path, res.Status, res.Error, tc.existing)
		}
		if _, err := os.Lstat(filepath.Join(e.ws, filepath.FromSlash(tc.path))); err == nil {
			t.Errorf("%s was created", tc.path)
		}
	}
	if res := e.call(WriteFile, map[string]any{"path": "notes/笔记（一）.txt", "content": "一"}); res.Status != agent.StatusOK {
		t.Fatalf("a Chinese name: %+v", res)
	}
	if res := e.call(WriteFile, map[string]any{"path": "notes/笔记(一).txt", "content": "一"}); res.Status == agent.StatusOK ||
		!contains(res.Error, "looks like the existing notes/笔记（一）.txt") {
		t.Errorf("a fullwidth look-alike: %+v", res)
	}
}

// TestMemorySearchSaysRewrite: when memory.search.rewrite put a weakly
// answered question into the chat model's words (here a scripted model),
// memory_search tells the agent what was searched too and how long the
// model took, as the gateway's memory.search does (issue 25); without a
// rewrite neither field is there.
func TestMemorySearchSaysRewrite(t *testing.T) {
	var asked []string
	rewrite := func(_ context.Context, q string) (string, error) {
		asked = append(asked, q)
		return "parser needs a rewrite", nil
	}
	e := newTestEnvMemory(t, Options{}, func(o *memory.Options) { o.Rewrite, o.RewriteTimeout = rewrite, time.Minute })
	const q = "which component of ours must be redone from scratch"
	res := e.call(MemorySearch, map[string]any{"query": q})
	if res.Status != agent.StatusOK {
		t.Fatalf("memory_search: %+v", res)
	}
	if len(asked) != 1 || asked[0] != q {
		t.Fatalf("the model was asked %q; want the weak question once", asked)
	}
	got := dataOf[struct {
		Results []memory.ToolHit `json:"results"`
		memory.ToolRewrite
	}](t, res)
	if got.RewrittenQuery != "parser needs a rewrite" || got.RewriteMs < 1 {
		t.Errorf("rewrittenQuery %q, rewriteMs %d; want the model's words and its time: %s", got.RewrittenQuery, got.RewriteMs, res.Data)
	}
	if len(got.Results) == 0 || got.Results[0].Path != "memory/roles/code-expert/notes.md" {
		t.Errorf("results %+v; want the note the rewrite found first", got.Results)
	}
	plain := newTestEnv(t, Options{}).call(MemorySearch, map[string]any{"query": q})
	if contains(string(plain.Data), "rewrittenQuery") || contains(string(plain.Data), "rewriteMs") {
		t.Errorf("no rewriter, yet the tool says a rewrite: %s", plain.Data)
	}
}
