package e2e

import (
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
	g := startMediaGateway(t, tmp)
	phone, _ := g.pairBrowser(t, chromium, filepath.Join(tmp, "phone"), []string{"location.get"}, nil,
		chromedp.UserAgent(phoneUA), chromedp.WindowSize(390, 844))
	if err := chromedp.Do(phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch)); err != nil {
		t.Fatalf("emulate 390×844: %v", err)
	}
	waitFor(t, phone, "the chat on the phone", `!!document.querySelector('[data-testid=chat-input]')?.offsetParent`, 30*time.Second)

	for _, lang := range []string{"en", "zh"} {
		js[bool](t, phone, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = '`+lang+`'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
		waitFor(t, phone, "the page in "+lang, `document.documentElement.lang.startsWith('`+lang+`')`, 10*time.Second)

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
		shot(t, phone, "everyday-phone-memory-"+lang+".png")
		click(t, phone, `.app.phone .tabs button:nth-child(2)`)
		waitFor(t, phone, "the chat tab", `!!document.querySelector('.chat-panel.active [data-testid=chat-input]')?.offsetParent`, 10*time.Second)
		shot(t, phone, "everyday-phone-"+lang+".png")

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
		shot(t, phone, "everyday-phone-keyboard-"+lang+".png")
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
