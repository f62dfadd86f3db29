package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// keyedServer puts an API key check and a model list in front of a
// scripted model: a wrong key gets OpenAI's 401 answer.
type keyedServer struct {
	key    string
	model  *scriptedModel
	denied atomic.Int32
}

const wrongKeyMessage = "Incorrect API key provided: sk-wr**ng. You can find your API key at https://platform.openai.com/account/api-keys."

func (k *keyedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+k.key {
		k.denied.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","code":"invalid_api_key"}}`, wrongKeyMessage)
		return
	}
	if r.URL.Path == "/v1/models" {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"scripted-large"},{"id":"scripted-small"}]}`)
		return
	}
	k.model.ServeHTTP(w, r)
}

// TestUISettings sets a model in the Settings panel against a scripted
// OpenAI-compatible server: a wrong key shows the server's 401 message;
// with the right key the model list comes from the server, the test call
// answers, chat uses it at once; after a restart the setting holds and the
// key is never shown.
func TestUISettings(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	bin := buildAtrium(t)
	tmp := t.TempDir()
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "workspace")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	srv := &keyedServer{key: "sk-e2e-right", model: &scriptedModel{reply: modelReply, delay: 5 * time.Millisecond}}
	modelSrv := httptest.NewServer(srv)
	defer modelSrv.Close()
	// No model in the environment: the app starts offline.
	env := []string{"OPENAI_API_KEY=", "OPENAI_BASE_URL=", "OPENAI_MODEL=", "ANTHROPIC_API_KEY="}
	port := freePort(t)
	url, stop := serve(t, bin, home, ws, port, env)

	ctx := newBrowser(t, chromium, tmp)
	do := boundedDo(t, ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil { // allocates the tab: not on a bounded context
		t.Fatalf("navigate: %v", err)
	}
	waitFor(t, ctx, "the UI to connect", connected, 30*time.Second)
	do("open Settings", chromedp.Click(chromedp.CSS(`[data-testid=open-settings]`)))
	waitFor(t, ctx, "the model in use", `document.querySelector('[data-testid=model-in-use]')?.textContent.includes('offline')`, 20*time.Second)
	shot(t, ctx, "settings-offline.png")

	setProvider := `(() => { const s = document.querySelector('[data-testid=model-provider]'); s.value = 'openai'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`
	js[bool](t, ctx, setProvider)
	do("type the server and a wrong key",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=model-base]`), modelSrv.URL+"/v1"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=model-key]`), "sk-wrong"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=model-name]`), "scripted-large"),
		chromedp.Click(chromedp.CSS(`[data-testid=model-test]`)))
	waitFor(t, ctx, "the server's 401 message", `(() => { const e = document.querySelector('[data-testid=model-test-result]'); return e && e.textContent.includes('401') && e.textContent.includes('Incorrect API key provided'); })()`, 30*time.Second)
	shot(t, ctx, "settings-wrong-key.png")

	// The right key: the model list comes from the server; test; save.
	js[bool](t, ctx, `(() => { const k = document.querySelector('[data-testid=model-key]'); k.value = ''; k.dispatchEvent(new Event('input', {bubbles: true})); const m = document.querySelector('[data-testid=model-name]'); m.value = ''; m.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
	do("type the right key and list the models",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=model-key]`), "sk-e2e-right"),
		chromedp.Click(chromedp.CSS(`[data-testid=model-list]`)))
	waitFor(t, ctx, "the server's models", `[...document.querySelectorAll('[data-testid=model-options] button')].map(b => b.textContent).join(',') === 'scripted-large,scripted-small'`, 30*time.Second)
	do("pick a model and test it",
		chromedp.Click(chromedp.CSS(`[data-testid=model-options] button:nth-child(2)`)),
		chromedp.Click(chromedp.CSS(`[data-testid=model-test]`)))
	waitFor(t, ctx, "the test answer", `(() => { const e = document.querySelector('[data-testid=model-test-result]'); return e && e.textContent.includes('✓ scripted-small') && e.textContent.includes('scripted model says hello'); })()`, 30*time.Second)
	do("save", chromedp.Click(chromedp.CSS(`[data-testid=model-save]`)))
	waitFor(t, ctx, "the model in force", `document.querySelector('[data-testid=model-in-use]')?.textContent.includes('openai / scripted-small')`, 30*time.Second)
	if v := js[string](t, ctx, `document.querySelector('[data-testid=model-key]').value`); v != "" {
		t.Fatalf("the key field shows %q after saving", v)
	}
	shot(t, ctx, "settings-saved.png")

	// Chat answers with it, without a restart.
	const question = "Does the new model answer?"
	do("chat", chromedp.Click(chromedp.CSS(`[data-testid=close-settings]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), question),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`)))
	final := `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.querySelector('[data-testid=chat-message-text]')?.textContent.includes('scripted model says hello'))`
	waitFor(t, ctx, "the answer of the new model", final, 30*time.Second)
	if !srv.model.sawMessage(question) {
		t.Fatal("the scripted server never got the question")
	}

	// Restart: the setting holds; the key is still not shown.
	stop()
	url, _ = serve(t, bin, home, ws, port, env)
	do("open the UI again", chromedp.Navigate(url))
	waitFor(t, ctx, "the UI to reconnect", connected, 30*time.Second)
	do("open Settings", chromedp.Click(chromedp.CSS(`[data-testid=open-settings]`)))
	waitFor(t, ctx, "the model after the restart", `document.querySelector('[data-testid=model-in-use]')?.textContent.includes('openai / scripted-small')`, 30*time.Second)
	if ph := js[string](t, ctx, `document.querySelector('[data-testid=model-key]').placeholder + '|' + document.querySelector('[data-testid=model-key]').value`); !strings.HasPrefix(ph, "set") || !strings.HasSuffix(ph, "|") {
		t.Fatalf("key field after restart: %q", ph)
	}
	if body := js[string](t, ctx, `document.documentElement.outerHTML`); strings.Contains(body, "sk-e2e-right") {
		t.Fatal("the key is in the page")
	}
	const again = "Still there after the restart?"
	do("chat again", chromedp.Click(chromedp.CSS(`[data-testid=close-settings]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), again),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`)))
	waitFor(t, ctx, "the model answering after the restart", `(() => { const ms = [...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')]; return ms.length >= 2; })()`, 30*time.Second)
	if !srv.model.sawMessage(again) {
		t.Fatal("after the restart the scripted server never got the question")
	}
	if log, _ := os.ReadFile(filepath.Join(home, "serve.log")); strings.Contains(string(log), "sk-e2e-right") || strings.Contains(string(log), "sk-wrong") {
		t.Fatal("a key is in the app's log")
	}
}
