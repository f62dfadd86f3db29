package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// TestPhoneLayout (issue 24 item 9): the phone page at 390×844 once paired
// gives the chat at least 60 % of the screen's height (the pairing header,
// node bar and language picker took about 45 % before); the tabs are a bar
// at the bottom; no drop zone; with the on-screen keyboard open (the
// visual viewport shrunk by 340 px, as a keyboard does) the chat's input
// is still above it; axe-core finds no serious or critical violation; in
// English and Chinese.
func TestPhoneLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	axeSrc, err := os.ReadFile(filepath.Join("..", "..", "frontend", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Skipf("axe-core not installed (npm ci in frontend): %v", err)
	}
	tmp := t.TempDir()
	g := startMediaGatewayWith(t, tmp, func(home string) {
		// Settings → Heartbeat shows a schedule in force (the desktop screenshots).
		cfg := `{"agents": {"heartbeat": {"enabled": true, "every": "45m", "activeHours": {"start": "08:00", "end": "22:00"}}}}`
		if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	})

	// The desktop window's Settings → Heartbeat and the bind in force, en and zh (screenshots only).
	desk := newBrowser(t, chromium, filepath.Join(tmp, "desk"))
	if err := chromedp.Do(desk, chromedp.Navigate(g.uiURL)); err != nil {
		t.Fatalf("open the UI: %v", err)
	}
	waitFor(t, desk, "the desktop UI", `document.querySelector('[data-testid=conn-state]')?.dataset.state === 'connected'`, 30*time.Second)
	click(t, desk, `[data-testid=open-settings]`)
	waitFor(t, desk, "Settings → Heartbeat", `document.querySelector('[data-testid=heartbeat-in-use]')?.dataset.on === 'true'`, 20*time.Second)
	if got := text(t, desk, `[data-testid=gateway-bind-in-use]`); got != "(bind in force: 127.0.0.2)" {
		t.Errorf("Settings says %q of the bind in force, want 127.0.0.2", got)
	}
	for _, lang := range []string{"en", "zh"} {
		js[bool](t, desk, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = '`+lang+`'; s.dispatchEvent(new Event('change', {bubbles: true})); document.querySelector('[data-testid=heartbeat-settings]').scrollIntoView(); return true; })()`)
		waitFor(t, desk, "the desktop in "+lang, `document.documentElement.lang.startsWith('`+lang+`')`, 10*time.Second)
		shotViewport(t, desk, "everyday-desktop-heartbeat-"+lang+".png")
	}
	phone, _ := g.pairBrowser(t, chromium, filepath.Join(tmp, "phone"), []string{"location.get"}, nil,
		chromedp.UserAgent(phoneUA), chromedp.WindowSize(390, 844))
	if err := chromedp.Do(phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch)); err != nil {
		t.Fatalf("emulate 390×844: %v", err)
	}
	waitFor(t, phone, "the chat on the phone", `!!document.querySelector('[data-testid=chat-input]')?.offsetParent`, 30*time.Second)

	for _, lang := range []string{"en", "zh"} {
		js[bool](t, phone, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = '`+lang+`'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
		waitFor(t, phone, "the page in "+lang, `document.documentElement.lang.startsWith('`+lang+`')`, 10*time.Second)
		// The page sizes itself to the visual viewport on its resize
		// events, which the 390×844 emulation sends asynchronously: wait
		// for the layout to follow it (a CI run measured the tab bar at
		// 701 px, the window's height before the emulation) before
		// measuring.
		waitFor(t, phone, "the layout at the emulated 844 px (the tab bar at the bottom)",
			`(() => { const b = document.querySelector('.app.phone .tabs')?.getBoundingClientRect().bottom ?? 0; return Math.abs(b - window.innerHeight) <= 1; })()`, 20*time.Second)

		share := js[float64](t, phone, `document.querySelector('.chat-panel.active').getBoundingClientRect().height / window.innerHeight`)
		if share < 0.6 {
			t.Errorf("%s: the chat takes %.0f %% of the 844 px, want ≥ 60 %%", lang, share*100)
		}
		if js[bool](t, phone, `!!document.querySelector('[data-testid=phone-details]')?.open`) {
			t.Errorf("%s: the pairing details are unfolded once paired", lang)
		}
		tabs := js[float64](t, phone, `document.querySelector('.app.phone .tabs').getBoundingClientRect().bottom`)
		if vh := js[float64](t, phone, `window.innerHeight`); tabs < vh-2 || tabs > vh+1 {
			t.Errorf("%s: the tab bar ends at %.0f px, the screen at %.0f: not at the bottom", lang, tabs, vh)
		}
		// The memory tab: no drop zone a phone cannot use (its file chooser stays).
		click(t, phone, `.app.phone .tabs button:nth-child(3)`)
		waitFor(t, phone, "the memory tab", `!!document.querySelector('.memory-panel.active')`, 10*time.Second)
		if js[bool](t, phone, `(() => { const d = document.querySelector('[data-testid=memory-dropzone] .drop-title'); return !!d && d.offsetParent !== null; })()`) {
			t.Errorf("%s: a drop zone is shown on the phone", lang)
		}
		shotViewport(t, phone, "everyday-phone-memory-"+lang+".png")
		click(t, phone, `.app.phone .tabs button:nth-child(2)`)
		waitFor(t, phone, "the chat tab", `!!document.querySelector('.chat-panel.active [data-testid=chat-input]')?.offsetParent`, 10*time.Second)
		if lang == "zh" && js[bool](t, phone, `/[A-Za-z]{4,} [a-z]{3,} [a-z]{3,}/.test(document.querySelector('[data-testid=chat-history-error]')?.textContent ?? '')`) {
			t.Errorf("zh: the refused history says %q", text(t, phone, `[data-testid=chat-history-error]`))
		}
		shotViewport(t, phone, "everyday-phone-"+lang+".png")

		// The keyboard: the visual viewport shrinks by 340 px; the input stays above it.
		bottom := js[float64](t, phone, `(() => {
			const vv = window.visualViewport, h = vv.height;
			Object.defineProperty(vv, 'height', { configurable: true, get: () => h - 340 });
			vv.dispatchEvent(new Event('resize'));
			return document.querySelector('[data-testid=chat-input]').getBoundingClientRect().bottom;
		})()`)
		if limit := 844.0 - 340; bottom > limit {
			t.Errorf("%s: with the keyboard open the input ends at %.0f px, under the keyboard (from %.0f px)", lang, bottom, limit)
		}
		shotViewport(t, phone, "everyday-phone-keyboard-"+lang+".png")
		js[bool](t, phone, `(() => { const vv = window.visualViewport; delete vv.height; vv.dispatchEvent(new Event('resize')); return true; })()`)

		js[bool](t, phone, string(axeSrc)+`; true`)
		bad, err := chromedp.Run(phone, chromedp.Evaluate[[]string](`(async () => {
			const r = await axe.run(document, { resultTypes: ['violations'], rules: { 'color-contrast': { enabled: false } } });
			return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(', '));
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("axe-core: %v", err)
		}
		if len(bad) > 0 {
			t.Errorf("%s: axe-core: %v", lang, bad)
		}
	}
}

// shotViewport saves what the screen shows (not the whole page) into
// $ATRIUM_E2E_OUT, when set.
func shotViewport(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("ATRIUM_E2E_OUT")
	if dir == "" {
		return
	}
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(dir, name), buf, 0o644)
	}
}
