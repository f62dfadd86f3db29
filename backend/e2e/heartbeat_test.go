package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// TestHeartbeatInTheWindow (issue 24 item 7): the built app, a workspace
// whose HEARTBEAT.md has a task (so the heartbeat is on by itself) and
// agents.heartbeat.every 1m (the shortest; the scheduler's own tests move
// an injected clock, this one waits for the real one): the first turn's
// answer HEARTBEAT_OK shows nothing in the window, the second one's news
// appears in main's chat marked Heartbeat; the model got the heartbeat
// prompt with HEARTBEAT.md in its context; at a phone's size the news is
// on the screen, nothing wider than it. Bounded waits, no timing
// assertions.
func TestHeartbeatInTheWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	mdl := modeltest.New(t, modeltest.Options{}, modeltest.Turns(
		modeltest.Turn{Text: "HEARTBEAT_OK"},
		modeltest.Turn{Text: "Reminder: the deploy key rotates today."},
	)...)
	bin := buildAtrium(t)
	tmp := t.TempDir()
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "workspace")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _ := json.Marshal(map[string]any{
		"model":  map[string]any{"provider": "openai", "baseUrl": mdl.URL + "/v1", "apiKey": "k-e2e", "model": "scripted"},
		"agents": map[string]any{"heartbeat": map[string]any{"every": "1m"}},
	})
	if err := os.WriteFile(filepath.Join(home, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "HEARTBEAT.md"), []byte("# Heartbeat\n\n- Remind me when the deploy key rotates.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	uiURL, _ := serve(t, bin, home, ws, freePort(t), nil)
	admin := newAdminSession(t, uiURL)
	desk := newBrowser(t, chromium, filepath.Join(tmp, "desk"))
	if err := chromedp.Do(desk, chromedp.Navigate(uiURL)); err != nil {
		t.Fatalf("open the UI: %v", err)
	}
	waitFor(t, desk, "the desktop UI", `document.querySelector('[data-testid=conn-state]')?.dataset.state === 'connected'`, 30*time.Second)

	outcome := func() string {
		var v struct {
			Heartbeat struct {
				On          bool
				LastOutcome string
			}
		}
		if err := json.Unmarshal(admin.call("config.get", nil), &v); err != nil {
			t.Fatal(err)
		}
		if !v.Heartbeat.On {
			t.Fatal("the heartbeat is off although HEARTBEAT.md has a task")
		}
		return v.Heartbeat.LastOutcome
	}
	deadline := time.Now().Add(3 * time.Minute)
	for outcome() != "silent" {
		if time.Now().After(deadline) {
			t.Fatalf("no silent heartbeat within 3 minutes (model requests: %d)", mdl.Count())
		}
		time.Sleep(time.Second)
	}
	req := mdl.Request(0)
	if !strings.Contains(string(req.Raw), "reply HEARTBEAT_OK") || !strings.Contains(string(req.Raw), "deploy key rotates") {
		t.Fatalf("the heartbeat turn's request lacks the prompt or HEARTBEAT.md:\n%.2000s", req.Raw)
	}
	if n := js[int](t, desk, `document.querySelectorAll('[data-testid=chat-message]').length`); n != 0 {
		t.Fatalf("a silent heartbeat shows %d messages in the chat", n)
	}
	waitFor(t, desk, "the heartbeat's news in main's chat", `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant]')].some(m => m.querySelector('[data-testid=chat-heartbeat]') && m.textContent.includes('the deploy key rotates today'))`, 3*time.Minute)
	if n := js[int](t, desk, `document.querySelectorAll('[data-testid=chat-message][data-role=user]').length`); n != 0 {
		t.Errorf("the heartbeat prompt shows as %d user messages", n)
	}
	shotViewport(t, desk, "everyday-desktop-heartbeat-chat-en.png")

	// The same window at a phone's size (390×844, touch): the news is on the screen in the
	// chat, nothing sticks out sideways, axe-core finds nothing serious.
	emulate(t, desk, phoneLayout)
	waitFor(t, desk, "the heartbeat's news on the phone-sized screen", `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant]')].some(m => { const b = m.getBoundingClientRect(); return m.querySelector('[data-testid=chat-heartbeat]') && b.width > 0 && b.left >= 0 && b.right <= window.innerWidth + 1; })`, 30*time.Second)
	overflowCheck(t, desk, "the heartbeat in the chat (phone)")
	axeCheck(t, desk, "the heartbeat in the chat (phone)")
	shotViewport(t, desk, "everyday-phone-heartbeat-chat-en.png")
}
