package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// openClawNotes is a small OpenClaw workspace (MEMORY.md, daily logs, a
// context file), in Chinese and English.
var openClawNotes = map[string]string{
	"MEMORY.md":            "# 长期记忆\n\n- 用户喜欢简短的回答，中文和英文都可以。\n- The user's cat is called Miso.\n",
	"SOUL.md":              "Be brief and kind.\n",
	"memory/2026-11-20.md": "# Standup 2026-11-20\n\n- The lighthouse renovation budget was approved: 48,000 euros.\n",
	"memory/2026-11-28.md": "# 周会纪要 2026-11-28\n\n- 决定把灯塔监控系统迁移到新的服务器，代号 PX-4471。\n",
}

// TestUIFirstRun (issue 17): the app started without a terminal, with a
// fresh state dir and a home folder holding an OpenClaw workspace, asks in
// the UI where memory lives; it offers that workspace with what is in it;
// choosing it writes config.json and opens it in the same process (the UI
// reconnects by itself), and a memory search in the UI finds its notes in
// Chinese and English. The next start asks nothing.
func TestUIFirstRun(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	bin := buildAtrium(t)
	tmp := t.TempDir()
	userHome, state := filepath.Join(tmp, "user"), filepath.Join(tmp, "state")
	oc := filepath.Join(userHome, ".openclaw", "workspace")
	for rel, text := range openClawNotes {
		p := filepath.Join(oc, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// No window (no display), no workspace from anywhere, no model.
	env := []string{"HOME=" + userHome, "DISPLAY=", "WAYLAND_DISPLAY=", "ATRIUM_WORKSPACE=", "ATRIUM_HOME=",
		"OPENAI_API_KEY=", "OPENAI_BASE_URL=", "ANTHROPIC_API_KEY="}
	port := freePort(t)
	url, stop := runApp(t, bin, state, env, "--home", state, "--port", fmt.Sprint(port))

	ctx := newBrowser(t, chromium, tmp)
	do := boundedDo(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	waitFor(t, ctx, "the UI to connect", connected, 30*time.Second)
	waitFor(t, ctx, "the first-start screen", `document.querySelector('[data-testid=app]')?.dataset.setup === 'first' && !!document.querySelector('[data-testid=firstrun]')`, 20*time.Second)
	const openclaw = `[data-testid=setup-choice][data-kind=openclaw]`
	waitFor(t, ctx, "the OpenClaw workspace offered, chosen at first, with its notes",
		`(() => { const c = document.querySelector('`+openclaw+`'); return !!c && c.querySelector('input').checked &&
			c.textContent.includes('~/.openclaw/workspace') &&
			c.querySelector('[data-testid=setup-contents]').textContent === '3 notes (2 daily logs) · MEMORY.md · SOUL.md'; })()`, 10*time.Second)
	if !js[bool](t, ctx, `!!document.querySelector('[data-testid=setup-choice][data-kind=new]')?.textContent.includes('~/Atrium')`) {
		t.Error("a new ~/Atrium is not offered")
	}
	if js[bool](t, ctx, `!!document.querySelector('[data-testid=open-settings]') || !!document.querySelector('[data-testid=chat-input]')`) {
		t.Error("the panels show before a workspace is chosen")
	}
	shot(t, ctx, "firstrun.png")

	do("use the OpenClaw workspace", chromedp.Click(chromedp.CSS(`[data-testid=setup-use]`)))
	// The app reopens on it; the client reconnects ("Reconnect now" skips the backoff).
	waitFor(t, ctx, "the panels on the chosen workspace", `(() => {
		const b = document.querySelector('.conn-detail button');
		if (b) b.click();
		return document.querySelector('[data-testid=app]')?.dataset.setup === 'chosen' && !document.querySelector('[data-testid=firstrun]') && !!document.querySelector('[data-testid=memory-search-input]') &&
			document.querySelector('[data-testid=conn-state]')?.dataset.state === 'connected';
	})()`, 60*time.Second)
	waitFor(t, ctx, "the workspace indexed", `/ready/.test(document.querySelector('[data-testid=memory-status]')?.textContent ?? '')`, 60*time.Second)

	for _, q := range []struct{ query, path, snippet string }{
		{"灯塔监控系统", "memory/2026-11-28.md", "PX-4471"},
		{"lighthouse renovation budget", "memory/2026-11-20.md", "48,000"},
	} {
		qj, _ := json.Marshal(q.query)
		js[bool](t, ctx, `(() => { const i = document.querySelector('[data-testid=memory-search-input]'); i.value = `+string(qj)+`; i.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
		do("search "+q.query, chromedp.SendKeys(chromedp.CSS(`[data-testid=memory-search-input]`), "\n"))
		waitFor(t, ctx, "a result from the OpenClaw note "+q.path,
			`[...document.querySelectorAll('[data-testid=memory-result]')].some(e => e.querySelector('[data-testid=result-path]')?.textContent.includes('`+q.path+`') && e.textContent.includes('`+q.snippet+`'))`,
			30*time.Second)
	}
	shot(t, ctx, "firstrun-search.png")

	var cfg struct {
		Workspace string `json:"workspace"`
	}
	data, err := os.ReadFile(filepath.Join(state, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.Workspace != oc {
		t.Fatalf("config.json %s (%v), want workspace %s", data, err, oc)
	}
	if _, err := os.Stat(filepath.Join(userHome, "Atrium")); !os.IsNotExist(err) {
		t.Fatalf("~/Atrium was created: %v", err)
	}

	// The next start opens the chosen workspace and asks nothing.
	stop()
	url, _ = runApp(t, bin, state, env, "--home", state, "--port", fmt.Sprint(port))
	do("open the UI again", chromedp.Navigate(url))
	waitFor(t, ctx, "the app to say the workspace is chosen", `document.querySelector('[data-testid=app]')?.dataset.setup === 'chosen'`, 30*time.Second)
	if js[bool](t, ctx, `!!document.querySelector('[data-testid=firstrun]') || !document.querySelector('[data-testid=memory-search-input]')`) {
		t.Fatal("the first-start screen shows again after the choice")
	}
}
