package atrium

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/paths"
)

// TestFirstRunSetup: an app started before anyone chose where memory lives
// serves setup.* only; it offers ~/Atrium and the OpenClaw workspace found
// in the home folder (with what is in it), refuses node connections and
// folders that cannot hold memory, and on a good choice writes config.json
// and ends Run, creating nothing else. The app then built on the choice
// reports it and refuses another choice.
func TestFirstRunSetup(t *testing.T) {
	userHome := t.TempDir()
	t.Setenv("HOME", userHome)
	oc := filepath.Join(userHome, ".openclaw", "workspace")
	must(t, os.MkdirAll(filepath.Join(oc, "memory"), 0o755))
	must(t, os.WriteFile(filepath.Join(oc, "MEMORY.md"), []byte("# 长期记忆\n\n- 用户喜欢简短的回答。\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(oc, "memory", "2026-11-28.md"), []byte("# Standup\n\n- The lighthouse budget was approved.\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(oc, "SOUL.md"), []byte("Be brief.\n"), 0o644))
	def := filepath.Join(userHome, "Atrium")
	layout := paths.Layout{Home: filepath.Join(userHome, ".atrium"), Workspace: def}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	a, err := New(context.Background(), Options{Layout: layout, Port: -1, Version: "test", Logger: log,
		Getenv: func(string) string { return "" }, FirstRun: true, WorkspaceSource: "default"})
	must(t, err)
	must(t, a.Listen())
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	node := gwDial(ctx, t, a, gateway.RoleNode, "setup-phone")
	for _, m := range []string{"setup.status", "setup.choose", "setup.pick"} {
		if err := node.Call(ctx, m, map[string]any{"path": oc}, nil); errCode(err) != gateway.CodeForbidden {
			t.Errorf("node %s: %v, want FORBIDDEN", m, err)
		}
	}
	op := gwDial(ctx, t, a, gateway.RoleOperator, "setup-op")
	if m := op.Hello().Features.Methods; strings.Contains(strings.Join(m, ","), "memory.search") {
		t.Fatalf("the first-run app serves %v", m)
	}
	var st api.SetupStatus
	must(t, op.Call(ctx, "setup.status", map[string]any{}, &st))
	if st.Chosen || st.Picker || st.Home != userHome || st.StateDir != layout.Home || len(st.Options) != 2 {
		t.Fatalf("status %+v", st)
	}
	if o := st.Options[0]; o.Kind != "new" || o.Path != def || o.Exists {
		t.Errorf("new option %+v", o)
	}
	if o := st.Options[1]; o.Kind != "openclaw" || o.Path != oc || !o.Exists || o.Notes != 2 || o.Daily != 1 || !o.MemoryFile ||
		strings.Join(o.Context, ",") != "SOUL.md" {
		t.Errorf("openclaw option %+v", o)
	}
	if err := op.Call(ctx, "setup.pick", map[string]any{}, nil); errCode(err) != gateway.CodeUnavailable {
		t.Errorf("setup.pick without a window: %v", err)
	}

	// Folders that cannot hold memory: the answer says why; nothing is written.
	must(t, os.WriteFile(filepath.Join(userHome, "notes.txt"), nil, 0o644))
	for _, bad := range []struct {
		path   string
		create bool
		want   string
	}{
		{"", false, "path (the workspace folder) is required"},
		{"notes", true, "is not a full path"},
		{"/", true, "root of a disk"},
		{"~", true, "your home folder"},
		{userHome + "/", true, "your home folder"},
		{filepath.Join(layout.Home, "ws"), true, "state folder"},
		{filepath.Join(userHome, "notes.txt"), true, "is a file"},
		{filepath.Join(userHome, "Missing"), false, "does not exist"},
		{filepath.Join(userHome, "a", "b"), true, "nor its parent"},
	} {
		err := op.Call(ctx, "setup.choose", map[string]any{"path": bad.path, "create": bad.create}, nil)
		if errCode(err) != gateway.CodeInvalidRequest || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("choose %q: %v, want INVALID_REQUEST with %q", bad.path, err, bad.want)
		}
	}
	if _, err := os.Stat(layout.ConfigFile()); !os.IsNotExist(err) {
		t.Fatalf("config.json written by a refused choice: %v", err)
	}

	// Choose the OpenClaw workspace ("~/" spelling): written, Run ends.
	// The app closes every connection at once to reopen: the answer may be
	// lost on the way (then setup.status says it after the reconnect).
	var res api.SetupResult
	if err := op.Call(ctx, "setup.choose", map[string]any{"path": "~/.openclaw/workspace"}, &res); err != nil {
		if errCode(err) == gateway.CodeInvalidRequest || !strings.Contains(err.Error(), "server shutting down") {
			t.Fatalf("choose: %v", err)
		}
	} else if res.Workspace != oc || res.Created || !res.Restarting {
		t.Fatalf("choose: %+v", res)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not end after the choice")
	}
	if a.Chosen() != oc {
		t.Fatalf("Chosen %q", a.Chosen())
	}
	must(t, a.Close())
	cfg, err := config.Load(layout.ConfigFile())
	must(t, err)
	if cfg.Workspace != oc {
		t.Fatalf("config.json workspace %q", cfg.Workspace)
	}
	if _, err := os.Stat(def); !os.IsNotExist(err) {
		t.Fatalf("~/Atrium was created: %v", err)
	}

	// The app on the chosen workspace: chosen, from config.json; no second choice.
	layout.Workspace = oc
	b, _ := runOpts(t, Options{Layout: layout, Port: -1, Version: "test", Logger: log, Getenv: func(string) string { return "" },
		WorkspaceSource: "config"})
	op2 := gwDial(ctx, t, b, gateway.RoleOperator, "setup-op2")
	must(t, op2.Call(ctx, "setup.status", map[string]any{}, &st))
	if !st.Chosen || st.Workspace != oc || st.Source != "config" {
		t.Fatalf("status in the app %+v", st)
	}
	err = op2.Call(ctx, "setup.choose", map[string]any{"path": def, "create": true}, nil)
	if errCode(err) != gateway.CodeConflict || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("second choice: %v, want CONFLICT naming config.json", err)
	}
}
