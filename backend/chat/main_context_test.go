package chat

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// TestMainRunsCarryTheWorkspaceContext (issue 15, item 6): in a real
// OpenClaw workspace, main's system prompt holds its SOUL.md, IDENTITY.md,
// USER.md, AGENTS.md, TOOLS.md and HEARTBEAT.md, as OpenClaw gives them to
// its main agent, after Atrium's own persona.
func TestMainRunsCarryTheWorkspaceContext(t *testing.T) {
	root := os.Getenv("ATRIUM_CORPORA")
	if root == "" {
		root = filepath.Join("..", "..", "..", "shared", "corpora")
	}
	ws := filepath.Join(root, "workspaces", "sandmark78-openclaw-workspace")
	if _, err := os.Stat(filepath.Join(ws, "SOUL.md")); err != nil {
		t.Skipf("corpus workspace absent (%v); set ATRIUM_CORPORA", err)
	}
	m, err := memory.Open(memory.Options{Workspace: ws, IndexDir: filepath.Join(t.TempDir(), "index"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DisableWatcher: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	ms := newModelServer(t, func(w http.ResponseWriter, r *http.Request) {
		modeltest.Stream(w, modeltest.Text("ok"), modeltest.Chunk(`{}`, "stop"), "[DONE]")
	})
	e := newEnv(t, ms.provider(), nil, func(o *Options) { o.MainContext = m.MainContext })
	res := e.send(t, "s-1", "你是谁？")
	checkRun(t, res, e.rec.runEvents(t, res.RunID))
	msgs := wireMessages(ms.body(0))
	sys, _ := msgs[0]["content"].(string)
	if msgs[0]["role"] != "system" || !strings.HasPrefix(sys, mainPersona) {
		t.Fatalf("system prompt does not start with main's persona:\n%.300s", sys)
	}
	present := 0
	for _, name := range []string{"AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md"} {
		b, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil {
			continue // not every workspace has all six
		}
		present++
		first := firstNonEmptyLine(string(b))
		if !strings.Contains(sys, "## "+name+"\n") || !strings.Contains(sys, first) {
			t.Errorf("system prompt lacks %s (%q)", name, first)
		}
	}
	if present < 5 {
		t.Fatalf("only %d context files in %s", present, ws)
	}
	// An Atrium-layout workspace has none: the built-in persona alone.
	empty, err := memory.Open(memory.Options{Workspace: t.TempDir(), IndexDir: filepath.Join(t.TempDir(), "index"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), DisableWatcher: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = empty.Close() })
	if text, err := empty.MainContext(context.Background()); err != nil || text != "" {
		t.Fatalf("MainContext of an empty workspace = %q, %v", text, err)
	}
}

func firstNonEmptyLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}
