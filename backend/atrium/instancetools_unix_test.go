//go:build unix

package atrium

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// TestInstanceRunUsesAgentLoop runs a chat on a profile instance whose
// scripted model calls memory_search and then answers: the agent loop, its
// tools and agent.state/chat.tool events are the same as for main, the
// model calls go through the instance's worker process (with the tools
// offered and the tool call answered), and the tool acts as the
// instance's profile: the search finds that role's private note, never
// another role's.
func TestInstanceRunUsesAgentLoop(t *testing.T) {
	mdl := newScriptModel(t,
		modeltest.Turn{Calls: [][2]string{{"memory_search", `{"query":"ferry code"}`}}},
		modeltest.Turn{Reasoning: "The note has it.", Text: "The ferry code is QK-7731 (memory/roles/alpha/ferry.md:1)."},
	)
	env := map[string]string{"OPENAI_BASE_URL": mdl.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "scripted"}
	a, ws := startApp(t, func(k string) string { return env[k] })
	writeFiles(t, ws, twoRoles())
	must(t, a.Memory.Sync(context.Background()))
	cl := dial(t, a)
	spawnReady(t, cl, "alpha")

	var sent struct{ RunID string }
	cl.ok("chat.send", map[string]any{"profileId": "alpha-1", "sessionId": "s-a", "message": "What is the ferry code?"}, &sent)
	ev := follow(t, cl, sent.RunID, nil)
	if ev.named("chat.final") == nil {
		t.Fatalf("run did not end with chat.final: %v", ev.frames)
	}
	var final struct {
		ProfileID string
		Message   struct {
			Content string
			Sources []struct{ Path string }
		}
	}
	must(t, json.Unmarshal(ev.named("chat.final")[0], &final))
	if final.ProfileID != "alpha-1" || !strings.Contains(final.Message.Content, "QK-7731") ||
		len(final.Message.Sources) == 0 || final.Message.Sources[0].Path != "memory/roles/alpha/ferry.md" {
		t.Fatalf("final = %+v", final)
	}
	if got := ev.states(t); got != "idle>analyzing>planning>acting>observing>planning>reporting>idle" {
		t.Errorf("states %s", got)
	}
	if te := toolEvents(t, ev); len(te) != 2 || te[0].Tool != "memory_search" || te[1].Status != "ok" {
		t.Errorf("chat.tool events %+v", te)
	}
	if len(ev.named("chat.reasoning")) == 0 {
		t.Error("the worker's reasoning deltas did not arrive")
	}
	if n := mdl.Count(); n != 2 {
		t.Fatalf("%d model calls, want 2", n)
	}
	var first struct {
		Messages []struct{ Role, Content string }
		Tools    []struct{ Function struct{ Name string } }
	}
	must(t, json.Unmarshal([]byte(mdl.Body(0)), &first))
	if len(first.Messages) == 0 || !strings.HasPrefix(first.Messages[0].Content, "You are Alpha, the release manager.") {
		t.Errorf("the instance's system prompt is not its persona: %+v", first.Messages)
	}
	offered := false
	for _, tl := range first.Tools {
		offered = offered || tl.Function.Name == "memory_search"
	}
	if !offered {
		t.Errorf("memory_search not offered to the model: %s", mdl.Body(0))
	}
	res := mdl.Request(1).ToolMessages()
	if len(res) != 1 {
		t.Fatalf("second model call carries %d tool results, want 1: %s", len(res), mdl.Body(1))
	}
	for _, content := range res {
		if !strings.Contains(content, "QK-7731") || strings.Contains(content, "ZX-9904") || strings.Contains(content, "roles/beta") {
			t.Errorf("memory_search as alpha returned %s", content)
		}
	}
}

// TestInstanceWithoutModelAnswersOffline: with no model anywhere, a run on
// an instance is answered like main's, by the offline provider from memory
// search — searching as the instance's profile (its own private note, never
// another role's).
func TestInstanceWithoutModelAnswersOffline(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	writeFiles(t, ws, twoRoles())
	must(t, a.Memory.Sync(context.Background()))
	cl := dial(t, a)
	spawnReady(t, cl, "alpha")
	var sent struct{ RunID string }
	cl.ok("chat.send", map[string]any{"profileId": "alpha-1", "sessionId": "s-o", "message": "ferry code"}, &sent)
	ev := follow(t, cl, sent.RunID, nil)
	if ev.named("chat.final") == nil {
		t.Fatalf("run did not end with chat.final: %v", ev.frames)
	}
	var final struct {
		Message struct {
			Content string
			Sources []struct{ Path string }
		}
	}
	must(t, json.Unmarshal(ev.named("chat.final")[0], &final))
	if !strings.Contains(final.Message.Content, "QK-7731") || strings.Contains(final.Message.Content, "ZX-9904") ||
		len(final.Message.Sources) == 0 || final.Message.Sources[0].Path != "memory/roles/alpha/ferry.md" {
		t.Fatalf("offline answer on the instance: %+v", final.Message)
	}
}

// writeFiles writes files (workspace-relative path → content) under ws.
func writeFiles(t *testing.T, ws string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		path := filepath.Join(ws, filepath.FromSlash(p))
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte(body), 0o644))
	}
}

// spawnReady spawns the first instance of profile and waits until it is
// the one instance listed, ready.
func spawnReady(t *testing.T, cl *client, profile string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := cl.call("profiles.spawn", map[string]any{"profileId": profile})
		if r.OK {
			break
		}
		if r.Error.Code != "UNAVAILABLE" || time.Now().After(deadline) { // UNAVAILABLE: App.Run is starting the pool
			t.Fatalf("spawn: %+v", r.Error)
		}
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var list struct {
			Instances []struct{ InstanceID, State string }
		}
		cl.ok("profiles.list", map[string]any{}, &list)
		if len(list.Instances) == 1 && list.Instances[0].State == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance not ready: %+v", list)
		}
	}
}

// twoRoles are two roles, each with a private note holding a ferry code:
// alpha may read only its own, beta only its own (the default ACL).
func twoRoles() map[string]string {
	return map[string]string{
		"memory/roles/alpha/config.md": "---\ndescription: alpha\n---\nYou are Alpha, the release manager. 你负责发布。\n",
		"memory/roles/alpha/ferry.md":  "Ferry code for the island trip: QK-7731.\n",
		"memory/roles/beta/config.md":  "---\ndescription: beta\n---\nYou are Beta.\n",
		"memory/roles/beta/ferry.md":   "Beta's private ferry code: ZX-9904.\n",
	}
}
