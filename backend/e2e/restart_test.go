package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// TestUIInstanceAfterRestart (issue 14 item 11): the app restarts while
// the UI has an instance's chat in view. Instances are processes and do not
// survive the restart; the UI keeps the chat selected, says the instance is
// not running and starts when a message is sent, and a send gets an answer
// (the app starts the instance on demand) — no protocol error in the
// person's own message.
func TestUIInstanceAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	bin := buildAtrium(t)
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "workspace")
	dir := filepath.Join(ws, "memory", "roles", "writer")
	for _, d := range []string{home, dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := "---\ntype: role\nrole: writer\ndescription: 写作助手 Writes and edits texts\n---\n# writer\n"
	if err := os.WriteFile(filepath.Join(dir, "config.md"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// No model at all: instances answer with the offline provider.
	env := []string{"OPENAI_API_KEY=", "OPENAI_BASE_URL=", "ANTHROPIC_API_KEY="}
	port := freePort(t)
	url, stop := serve(t, bin, home, ws, port, env)
	ctx := newBrowser(t, chromium, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	waitFor(t, ctx, "the UI to connect", connected, 30*time.Second)
	do := boundedDo(t, ctx)
	const (
		writerItem = `[data-testid=profile][data-profile=writer]`
		view       = `[data-testid=chat-view][data-profile=writer-1]`
	)

	// Spawn writer-1 and open its chat.
	waitFor(t, ctx, "writer in the workbench", `!!document.querySelector('`+writerItem+` [data-testid=profile-spawn]')`, 20*time.Second)
	do("spawn writer", chromedp.Click(chromedp.CSS(writerItem+` [data-testid=profile-spawn]`)))
	waitFor(t, ctx, "instance writer-1 ready",
		`document.querySelector('`+writerItem+` [data-testid=instance][data-instance-id=writer-1]')?.dataset.state === 'ready'`, 40*time.Second)
	do("open writer-1", chromedp.Click(chromedp.CSS(writerItem+` [data-testid=instance-open]`)))
	waitFor(t, ctx, "writer-1's chat in view", `!!document.querySelector('`+view+`') && !document.querySelector('`+view+`').hidden`, 10*time.Second)

	// The app restarts (same home, workspace and port): the instance is gone.
	stop()
	waitFor(t, ctx, "the UI to see the app gone", `document.querySelector('[data-testid=conn-state]')?.dataset.state === 'disconnected'`, 30*time.Second)
	serve(t, bin, home, ws, port, env)
	// The client retries with a backoff; "Reconnect now" skips the wait.
	waitFor(t, ctx, "the UI to reconnect", `(() => {
		const b = [...document.querySelectorAll('.conn-detail button')][0];
		if (b) b.click();
		return document.querySelector('[data-testid=conn-state]')?.dataset.state === 'connected';
	})()`, 60*time.Second)

	// The chat stays in view and says the instance starts when a message is sent.
	waitFor(t, ctx, "writer-1 shown as not running",
		`!document.querySelector('`+view+`').hidden && !!document.querySelector('`+view+` [data-testid=chat-not-running]')`, 20*time.Second)
	if js[bool](t, ctx, `!!document.querySelector('`+writerItem+` [data-testid=instance][data-instance-id=writer-1]')`) {
		t.Error("the workbench still lists writer-1 after the restart")
	}

	// A send gets an answer: the app starts writer-1 again on demand.
	const question = "Still there after the restart? 重启之后还在吗？"
	do("type", chromedp.SendKeys(chromedp.CSS(view+` [data-testid=chat-input]`), question))
	do("send", chromedp.Click(chromedp.CSS(view+` [data-testid=chat-send]`)))
	waitFor(t, ctx, "an answer from writer-1",
		`[...document.querySelectorAll('`+view+` [data-testid=chat-message][data-role=assistant]')].some(e => e.dataset.state === 'final' && e.textContent.trim().length > 0)`, 60*time.Second)
	if js[bool](t, ctx, `!!document.querySelector('`+view+` [data-testid=chat-send-error]')`) {
		t.Errorf("a send error is shown: %s", js[string](t, ctx, `document.querySelector('`+view+` [data-testid=chat-send-error]').textContent`))
	}
	mine := js[string](t, ctx, `[...document.querySelectorAll('`+view+` [data-testid=chat-message][data-role=user]')].map(e => e.dataset.state + ':' + e.querySelector('[data-testid=chat-message-text]').textContent.trim()).join('|')`)
	if mine != "final:"+question {
		t.Errorf("the person's messages = %q, want only the question, stored", mine)
	}
	waitFor(t, ctx, "writer-1 listed again, ready",
		`document.querySelector('`+writerItem+` [data-testid=instance][data-instance-id=writer-1]')?.dataset.state === 'ready'`, 30*time.Second)
	if js[bool](t, ctx, `!!document.querySelector('`+view+` [data-testid=chat-not-running]')`) {
		t.Error("writer-1 still shown as not running after it answered")
	}
}
