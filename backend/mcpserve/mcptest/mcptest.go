// Package mcptest is the check every MCP transport's tests share
// (issue 26): a workspace with two roles, each with a private file, and
// Exercise, which calls every tool, resource and the prompt of an Atrium
// MCP server through the official SDK's client acting as one role, and
// checks that the other role's private file never shows (search, get,
// resources, path tricks) while the role's own memory works (writes with
// base versions and conflicts, notes).
package mcptest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Roles are the workspace's two roles.
var Roles = []string{"writer", "coder"}

// Private is each role's private file (the ACL's defaults: only the role
// and admin read memory/roles/<role>/**), Key a word only that file holds.
var (
	Private = map[string]string{"writer": "memory/roles/writer/secret.md", "coder": "memory/roles/coder/notes.md"}
	Key     = map[string]string{"writer": "QK-7731", "coder": "QK-9000"}
)

// Global is a file every role reads, GlobalKey a word in it.
const (
	Global    = "memory/global/team.md"
	GlobalKey = "Bluebird"
)

// Files are the workspace's files, workspace-relative.
var Files = map[string]string{
	Global:            "# Team\n\nThe launch code name is Bluebird.\n",
	Private["writer"]: "# Writer's secret\n\nThe manuscript key is QK-7731 plum.\n",
	Private["coder"]:  "# Coder notes\n\nThe build cache key is QK-9000 turnip.\n",
}

// Seed writes Files under ws.
func Seed(t testing.TB, ws string) {
	t.Helper()
	for rel, text := range Files {
		p := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Call calls a tool and decodes its structured result into out (may be
// nil); it returns the result's text when the tool reported an error
// (isError), "" otherwise. A protocol error fails the test.
func Call(ctx context.Context, t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, out any) (toolErr string) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return "error: " + b.String()
	}
	if out != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			err = json.Unmarshal(raw, out)
		}
		if err != nil {
			t.Fatalf("%s: structured result %v: %v", tool, res.StructuredContent, err)
		}
	}
	return ""
}

type hit struct {
	Path    string  `json:"path"`
	Score   float64 `json:"score"`
	Snippet string  `json:"snippet"`
}

type write struct {
	Path     string          `json:"path"`
	Version  string          `json:"version"`
	Merged   bool            `json:"merged"`
	Pending  bool            `json:"pending"`
	Conflict json.RawMessage `json:"conflict"`
}

// Exercise calls everything the server offers as role me and checks what
// comes back; other is the other role, whose private file must never
// show. The workspace is Seed's; Exercise writes memory/roles/<me>/mcp.md
// and today's log of me.
func Exercise(ctx context.Context, t testing.TB, cs *mcp.ClientSession, me, other string) {
	t.Helper()
	// Tools: the four, each described with an object schema.
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range tl.Tools {
		names = append(names, tool.Name)
		if len(tool.Description) < 40 || tool.InputSchema == nil {
			t.Errorf("tool %s: description %q, schema %v: too thin for a model", tool.Name, tool.Description, tool.InputSchema)
		}
	}
	slices.Sort(names)
	if want := []string{"memory_get", "memory_note", "memory_search", "memory_write"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}

	// memory_search: own and global files found; the other's never.
	leak := func(what, s string) {
		if strings.Contains(s, Key[other]) || strings.Contains(s, Private[other]) {
			t.Errorf("%s as %s: %s's private file leaked: %s", what, me, other, s)
		}
	}
	for _, q := range []string{Key[me], GlobalKey, Key[other], "key " + Key[other] + " turnip plum"} {
		var res struct {
			Results    []hit  `json:"results"`
			Provider   string `json:"provider"`
			Confidence struct {
				Level string `json:"level"`
			} `json:"confidence"`
		}
		if e := Call(ctx, t, cs, "memory_search", map[string]any{"query": q}, &res); e != "" {
			t.Fatalf("memory_search %q as %s: %s", q, me, e)
		}
		raw, _ := json.Marshal(res)
		leak("memory_search "+q, string(raw))
		if l := res.Confidence.Level; l != "high" && l != "medium" && l != "low" {
			t.Errorf("memory_search %q as %s: confidence %q, want high, medium or low", q, me, l)
		}
		var paths []string
		for _, h := range res.Results {
			paths = append(paths, h.Path)
			if h.Score <= 0 || h.Score > 1 || h.Snippet == "" {
				t.Errorf("memory_search %q: hit %+v without score or snippet", q, h)
			}
		}
		switch q {
		case Key[me]:
			if !slices.Contains(paths, Private[me]) {
				t.Errorf("memory_search %q as %s: %v, want %s", q, me, paths, Private[me])
			}
		case GlobalKey:
			if !slices.Contains(paths, Global) {
				t.Errorf("memory_search %q as %s: %v, want %s", q, me, paths, Global)
			}
		}
	}

	// memory_get: own file with its version; the other's and path tricks refused.
	var got struct {
		Path, Text, Version string
	}
	if e := Call(ctx, t, cs, "memory_get", map[string]any{"path": Private[me]}, &got); e != "" || !strings.Contains(got.Text, Key[me]) {
		t.Errorf("memory_get %s as %s: %+v %s", Private[me], me, got, e)
	}
	for _, p := range []string{Private[other], "../" + filepath.Base(Private[other]), "/etc/passwd",
		"memory/roles/" + me + "/../" + other + "/" + filepath.Base(Private[other]),
		"memory/roles/" + strings.ToUpper(other) + "/" + filepath.Base(Private[other]), "memory/roles/" + other + "/./" + filepath.Base(Private[other])} {
		var g struct{ Text string }
		e := Call(ctx, t, cs, "memory_get", map[string]any{"path": p}, &g)
		if e == "" {
			t.Errorf("memory_get %q as %s: answered %q, want a refusal", p, me, g.Text)
		}
		leak("memory_get "+p, e+g.Text)
	}

	// memory_write: a new file, a replace on its version, a stale base.
	mine := "memory/roles/" + me + "/mcp.md"
	var w1, w2, w3 write
	if e := Call(ctx, t, cs, "memory_write", map[string]any{"path": mine, "content": "# From MCP\n\nfirst\n", "mode": "replace"}, &w1); e != "" || w1.Version == "" {
		t.Fatalf("memory_write %s as %s: %+v %s", mine, me, w1, e)
	}
	if e := Call(ctx, t, cs, "memory_get", map[string]any{"path": mine}, &got); e != "" || got.Version != w1.Version || !strings.Contains(got.Text, "first") {
		t.Errorf("memory_get %s after the write: %+v %s, want version %s", mine, got, e, w1.Version)
	}
	if e := Call(ctx, t, cs, "memory_write", map[string]any{"path": mine, "content": "# From MCP\n\nsecond\n", "mode": "replace", "baseVersion": w1.Version}, &w2); e != "" || w2.Version == w1.Version || len(w2.Conflict) > 0 && string(w2.Conflict) != "null" {
		t.Errorf("memory_write on its base: %+v %s", w2, e)
	}
	if e := Call(ctx, t, cs, "memory_write", map[string]any{"path": mine, "content": "# From MCP\n\nstale\n", "mode": "replace", "baseVersion": w1.Version}, &w3); e != "" || len(w3.Conflict) == 0 || string(w3.Conflict) == "null" {
		t.Errorf("memory_write on a stale base: %+v %s, want a conflict", w3, e)
	}
	if e := Call(ctx, t, cs, "memory_write", map[string]any{"path": "memory/roles/" + other + "/from-" + me + ".md", "content": "x", "mode": "append"}, nil); e == "" {
		t.Errorf("memory_write into %s's folder as %s: written", other, me)
	}
	if e := Call(ctx, t, cs, "memory_write", map[string]any{"path": "../escape.md", "content": "x", "mode": "append"}, nil); e == "" {
		t.Errorf("memory_write ../escape.md as %s: written", me)
	}

	// memory_note: today's log of the role.
	var n write
	if e := Call(ctx, t, cs, "memory_note", map[string]any{"text": "met the editor about chapter 3"}, &n); e != "" || !strings.HasPrefix(n.Path, "memory/roles/"+me+"/") {
		t.Errorf("memory_note as %s: %+v %s", me, n, e)
	}

	// Resources: the role's readable files, never the other's.
	rl, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatalf("resources/list: %v", err)
	}
	var uris []string
	for _, r := range rl.Resources {
		uris = append(uris, r.URI)
	}
	raw, _ := json.Marshal(uris)
	leak("resources/list", string(raw))
	if !slices.Contains(uris, "atrium:///"+Private[me]) || !slices.Contains(uris, "atrium:///"+Global) {
		t.Errorf("resources as %s: %v, want its own file and the global one", me, uris)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "atrium:///" + Private[me]})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, Key[me]) {
		t.Errorf("resources/read own file as %s: %+v %v", me, rr, err)
	}
	for _, uri := range []string{"atrium:///" + Private[other], "atrium:///memory/roles/" + me + "/../" + other + "/" + filepath.Base(Private[other])} {
		rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err == nil {
			t.Errorf("resources/read %s as %s: %+v, want refused", uri, me, rr)
			raw, _ := json.Marshal(rr)
			leak("resources/read", string(raw))
		}
	}

	// The prompt.
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "memory_layers"})
	if err != nil || len(pr.Messages) == 0 {
		t.Fatalf("prompts/get memory_layers: %v %v", pr, err)
	}
	if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "global") || !strings.Contains(tc.Text, me) {
		t.Errorf("memory_layers as %s: %+v", me, pr.Messages[0].Content)
	}
}
