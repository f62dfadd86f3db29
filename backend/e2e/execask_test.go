package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// TestExecAskOverAnyPanel (issue 24 item 10): an `atrium node` asks to run
// a command while the person is on the chat (the Nodes panel closed): the
// ask is a prompt over the window, with the command; Allow once lets the
// invoke finish; axe-core finds no serious or critical violation in the
// prompt; en and zh, at desktop size and at a phone's (390×844 with touch:
// the prompt and its buttons on the screen, nothing wider than it).
func TestExecAskOverAnyPanel(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts the app and a node")
	}
	chromium := chromiumtest.Path(t)
	axeSrc, err := os.ReadFile(filepath.Join("..", "..", "frontend", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Skipf("axe-core not installed (npm ci in frontend): %v", err)
	}
	bin := buildAtrium(t)
	tmp := t.TempDir()
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "ws")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	uiURL, _ := serve(t, bin, home, ws, freePort(t), nil, "--bind", "127.0.0.2")
	admin := newAdminSession(t, uiURL)
	var code struct{ URL string }
	if err := json.Unmarshal(admin.call("device.pair.code", nil), &code); err != nil {
		t.Fatal(err)
	}
	node := startNode(t, bin, filepath.Join(tmp, "node"), "--url", code.URL, "--name", "build-box")
	pend := node.waitState(t, "pending")
	reqID, _ := pend["requestId"].(string)
	deviceID, _ := pend["deviceId"].(string)
	admin.call("device.pair.approve", map[string]any{"requestId": reqID})
	node.waitState(t, "paired")
	admin.waitConnected(deviceID)

	desk := newBrowser(t, chromium, filepath.Join(tmp, "desk"))
	if err := chromedp.Do(desk, chromedp.Navigate(uiURL)); err != nil {
		t.Fatalf("open the UI: %v", err)
	}
	waitFor(t, desk, "the desktop UI", `document.querySelector('[data-testid=conn-state]')?.dataset.state === 'connected'`, 30*time.Second)

	// Each language at desktop size, then at a phone's (the desktop UI on a phone, with touch).
	type run struct {
		l    layout
		lang string
	}
	runs := []run{{desktopLayout, "en"}, {desktopLayout, "zh"}, {phoneLayout, "en"}, {phoneLayout, "zh"}}
	for i, r := range runs {
		lang := r.lang
		emulate(t, desk, r.l)
		js[bool](t, desk, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = '`+lang+`'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
		type result struct {
			raw json.RawMessage
			err error
		}
		done := make(chan result, 1)
		word := fmt.Sprintf("hello-%d", i)
		go func() {
			raw, err := admin.try("node.invoke", map[string]any{"nodeId": deviceID, "command": "system.run",
				"params": map[string]any{"command": []string{"echo", word}}, "timeoutMs": 120000, "idempotencyKey": "ask-" + word})
			done <- result{raw, err}
		}()
		waitFor(t, desk, "the exec ask over the chat", `(() => { const d = document.querySelector('[role=alertdialog][data-testid=exec-ask]'); return !!d && d.getBoundingClientRect().height > 0; })()`, 60*time.Second)
		if js[bool](t, desk, `!!document.querySelector('[data-testid=nodes-panel]')`) {
			t.Fatal("the Nodes panel opened: the ask must come to where the person is")
		}
		if got := text(t, desk, `[data-testid=exec-ask] pre`); !strings.HasSuffix(got, "echo "+word) {
			t.Errorf("%s: the prompt shows %q", lang, got)
		}
		// The prompt and its buttons are on the screen, nothing sticks out sideways.
		if off := js[[]string](t, desk, `[...document.querySelectorAll('[data-testid=exec-ask], [data-testid=exec-ask] button')].filter(e => { const b = e.getBoundingClientRect(); return b.left < 0 || b.top < 0 || b.right > window.innerWidth + 1 || b.bottom > window.innerHeight + 1; }).map(e => e.dataset.testid || e.textContent)`); len(off) > 0 {
			t.Errorf("%s, %s: off the screen: %v", lang, r.l.name, off)
		}
		if r.l.touch {
			overflowCheck(t, desk, "the exec ask ("+lang+", phone)")
		}
		shotViewport(t, desk, "everyday-"+r.l.name+"-exec-ask-"+lang+".png")
		js[bool](t, desk, string(axeSrc)+`; true`)
		bad, err := chromedp.Run(desk, chromedp.Evaluate[[]string](`(async () => {
			const r = await axe.run(document.querySelector('[data-testid=exec-ask]'), { resultTypes: ['violations'], rules: { 'color-contrast': { enabled: false } } });
			return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => v.id);
		})()`, chromedp.EvalAwaitPromise))
		if err != nil || len(bad) > 0 {
			t.Errorf("%s, %s: axe-core: %v %v", lang, r.l.name, bad, err)
		}
		click(t, desk, `[data-testid=exec-allow-once]`)
		select {
		case r := <-done:
			var inv struct {
				OK      bool
				Payload struct{ Stdout string }
			}
			if r.err != nil || json.Unmarshal(r.raw, &inv) != nil || !inv.OK || inv.Payload.Stdout != word+"\n" {
				t.Fatalf("%s: system.run after Allow once: %s %v", lang, r.raw, r.err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: the invoke did not finish within 2 minutes of Allow once", lang)
		}
		waitFor(t, desk, "the prompt to close", `!document.querySelector('[data-testid=exec-ask]')`, 20*time.Second)
	}
}
