package atrium

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/heartbeat"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// TestHeartbeatOnSchedule (issue 24 item 7): a workspace that uses
// HEARTBEAT.md gets main's heartbeat without being asked; at the injected
// clock's turn time main's model is sent the heartbeat prompt with
// HEARTBEAT.md in its context; HEARTBEAT_OK ends silently (chat.final
// silent, nothing in history), another answer reaches the chat; Settings
// shows the schedule and the last outcome, and turning it off stops it.
func TestHeartbeatOnSchedule(t *testing.T) {
	mdl := newScriptModel(t,
		modeltest.Turn{Text: "HEARTBEAT_OK"},
		modeltest.Turn{Text: "The deploy key rotates today: Friday."},
	)
	env := map[string]string{"OPENAI_BASE_URL": mdl.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "scripted"}
	start := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	clk := heartbeat.NewManualClock(start)
	a, _ := startAppWith(t, func(k string) string { return env[k] }, func(ws string, o *Options) {
		must(t, os.WriteFile(filepath.Join(ws, "HEARTBEAT.md"), []byte("# Heartbeat\n\n- Remind me of the deploy key rotation on Fridays.\n"), 0o644))
		o.HeartbeatClock, o.HeartbeatLocation = clk, time.UTC
	})
	cl := dial(t, a)
	// scheduled waits until the scheduler sets its next wait, for want: it
	// does so after it has recorded the turn before (Settings' lastRun,
	// lastOutcome), which is after that turn's chat.final went out.
	scheduled := func(want time.Time) {
		t.Helper()
		select {
		case at := <-clk.Waits:
			if !at.Equal(want) {
				t.Fatalf("heartbeat set for %v, want %v", at, want)
			}
		case <-time.After(time.Minute):
			t.Fatal("no heartbeat scheduled within a minute")
		}
	}
	next := func(want time.Time) {
		t.Helper()
		scheduled(want)
		clk.Set(want)
	}
	isHeartbeatFinal := func(p json.RawMessage) bool {
		var f struct{ Heartbeat bool }
		return json.Unmarshal(p, &f) == nil && f.Heartbeat
	}

	next(start.Add(heartbeat.DefaultEvery))
	var quiet struct {
		Silent  bool
		Message struct{ Content string }
	}
	must(t, json.Unmarshal(cl.waitEvent("chat.final", isHeartbeatFinal), &quiet))
	if !quiet.Silent {
		t.Fatalf("HEARTBEAT_OK final not silent: %+v", quiet)
	}
	req := mdl.Request(0)
	msgs := req.Messages()
	if last := msgs[len(msgs)-1]; last["content"] != "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK." {
		t.Fatalf("heartbeat turn sent %v last", last)
	}
	if !strings.Contains(string(req.Raw), "deploy key rotation on Fridays") {
		t.Fatal("the heartbeat turn's context lacks HEARTBEAT.md")
	}
	var page struct {
		Messages []struct{ Role, Content string }
	}
	cl.ok("history.profile", map[string]any{"profileId": "main", "limit": 50}, &page)
	if len(page.Messages) != 0 {
		t.Fatalf("history after a silent heartbeat: %+v", page.Messages)
	}

	next(start.Add(2 * heartbeat.DefaultEvery))
	var loud struct {
		Silent  bool
		Message struct{ Content string }
	}
	must(t, json.Unmarshal(cl.waitEvent("chat.final", isHeartbeatFinal), &loud))
	if loud.Silent || loud.Message.Content != "The deploy key rotates today: Friday." {
		t.Fatalf("heartbeat with news: %+v", loud)
	}
	cl.ok("history.profile", map[string]any{"profileId": "main", "limit": 50}, &page)
	if len(page.Messages) != 1 || page.Messages[0].Content != loud.Message.Content || page.Messages[0].Role != "assistant" {
		t.Fatalf("history after a heartbeat with news: %+v", page.Messages)
	}

	scheduled(start.Add(3 * heartbeat.DefaultEvery))
	var view api.SettingsView
	cl.ok("config.get", map[string]any{}, &view)
	hb := view.Heartbeat
	if !hb.On || !hb.Auto || !hb.FileUsed || hb.EveryMinutes != 30 || hb.LastOutcome != "shown" ||
		hb.LastRun != start.Add(2*heartbeat.DefaultEvery).UnixMilli() || hb.Next != start.Add(3*heartbeat.DefaultEvery).UnixMilli() {
		t.Fatalf("Settings' heartbeat: %+v", hb)
	}
	view = api.SettingsView{}
	cl.ok("config.patch", map[string]any{"patch": map[string]any{"agents": map[string]any{"heartbeat": map[string]any{"enabled": false}}},
		"idempotencyKey": "hb-off"}, &view)
	if view.Heartbeat.On || view.Heartbeat.Auto || view.Heartbeat.Next != 0 {
		t.Fatalf("after turning it off: %+v", view.Heartbeat)
	}
	bad := cl.call("config.patch", map[string]any{"patch": map[string]any{"agents": map[string]any{"heartbeat": map[string]any{"every": "5s"}}},
		"idempotencyKey": "hb-bad"})
	if bad.OK || bad.Error == nil || !strings.Contains(bad.Error.Message, "agents.heartbeat.every") {
		t.Fatalf("every 5s: %+v", bad)
	}
}

// A workspace without HEARTBEAT.md (or with only headings) has no
// heartbeat until the person turns it on.
func TestHeartbeatOffWithoutFile(t *testing.T) {
	ws := t.TempDir()
	if heartbeatUsed(ws) {
		t.Fatal("no HEARTBEAT.md counts as used")
	}
	must(t, os.WriteFile(filepath.Join(ws, "HEARTBEAT.md"), []byte("# Heartbeat\n\n<!-- add tasks\nbelow -->\n\n## Daily\n"), 0o644))
	if heartbeatUsed(ws) {
		t.Fatal("a HEARTBEAT.md of headings and comments counts as used")
	}
	must(t, os.WriteFile(filepath.Join(ws, "HEARTBEAT.md"), []byte("# Heartbeat\n- check mail\n"), 0o644))
	if !heartbeatUsed(ws) {
		t.Fatal("a HEARTBEAT.md with a task does not count as used")
	}
}
