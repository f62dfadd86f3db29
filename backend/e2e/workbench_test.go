package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestUIWorkbench drives the profiles workbench and the chat queue (SPEC §9)
// with the built-in offline provider (no model at all): spawn an instance of
// a role profile and see it become ready; two messages sent at once, the
// second queued and answered after the first; an answer that arrives while
// another profile is in view counts as unread until viewed; a draft survives
// switching profiles; the instance opens its own chat; stop the instance.
func TestUIWorkbench(t *testing.T) {
	ctx, url := openUIWith(t, func(ws string) {
		dir := filepath.Join(ws, "memory", "roles", "writer")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := "---\ntype: role\nrole: writer\ndescription: 写作助手 Writes and edits texts\n---\n# writer\n"
		if err := os.WriteFile(filepath.Join(dir, "config.md"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}, "OPENAI_API_KEY=", "OPENAI_BASE_URL=", "ANTHROPIC_API_KEY=")

	do := boundedDo(t, ctx)
	const (
		mainItem   = `[data-testid=profile][data-profile=main]`
		writerItem = `[data-testid=profile][data-profile=writer]`
		mainView   = `[data-testid=chat-view][data-profile=main]`
	)

	// 1. The workbench lists both profiles; spawn writer and see it ready.
	waitFor(t, ctx, "both profiles in the workbench",
		`!!document.querySelector('`+mainItem+`') && !!document.querySelector('`+writerItem+` [data-testid=profile-spawn]')`, 20*time.Second)
	do("spawn writer", chromedp.Click(chromedp.CSS(writerItem+` [data-testid=profile-spawn]`)))
	waitFor(t, ctx, "instance writer-1 ready",
		`document.querySelector('`+writerItem+` [data-testid=instance][data-instance-id=writer-1]')?.dataset.state === 'ready'`, 40*time.Second)

	// 2. Two messages at once: the second waits in the queue (a session
	// answers one at a time), then goes out and is answered. Typed and sent
	// in one script so the first is still in flight when the second is sent;
	// a MutationObserver records that the queue showed it.
	js[bool](t, ctx, `(() => {
		window.__queued = [];
		new MutationObserver(() => {
			for (const e of document.querySelectorAll('`+mainView+` [data-testid=chat-queued-text]')) window.__queued.push(e.textContent);
		}).observe(document.body, {subtree: true, childList: true, characterData: true});
		const input = document.querySelector('`+mainView+` [data-testid=chat-input]');
		for (const text of ['First question 第一个问题', 'Second question 第二个问题']) {
			input.value = text;
			input.dispatchEvent(new Event('input', {bubbles: true}));
			input.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true, cancelable: true}));
		}
		return true;
	})()`)
	const timeline = `[...document.querySelectorAll('` + mainView + ` [data-testid=chat-message]')].map(e => e.dataset.role + ':' + e.dataset.state)`
	waitFor(t, ctx, "both questions answered, in order",
		`JSON.stringify(`+timeline+`) === JSON.stringify(['user:final','assistant:final','user:final','assistant:final'])`, 30*time.Second)
	if !js[bool](t, ctx, `window.__queued.includes('Second question 第二个问题')`) {
		t.Error("the second message never showed in the queue")
	}
	if got := js[string](t, ctx, `[...document.querySelectorAll('`+mainView+` [data-testid=chat-message][data-role=user] [data-testid=chat-message-text]')].map(e => e.textContent.trim()).join(' | ')`); got != "First question 第一个问题 | Second question 第二个问题" {
		t.Errorf("questions in the chat = %q, want the first then the second", got)
	}
	if js[bool](t, ctx, `!!document.querySelector('`+mainView+` [data-testid=chat-queue]')`) {
		t.Error("the queue is still shown after both were sent")
	}
	// The offline provider produces no reasoning; a folded block, if any, opens.
	if js[bool](t, ctx, `!!document.querySelector('`+mainView+` [data-testid=chat-reasoning]')`) {
		do("expand reasoning", chromedp.Click(chromedp.CSS(mainView+` [data-testid=chat-reasoning] summary`)))
		waitFor(t, ctx, "the reasoning block open", `document.querySelector('`+mainView+` [data-testid=chat-reasoning]').open`, 5*time.Second)
	}

	// 3. A draft in main, then writer in view; main answers a question sent
	// from another connection: one unread on main.
	do("type a draft", chromedp.SendKeys(chromedp.CSS(mainView+` [data-testid=chat-input]`), "草稿 a draft"))
	do("open writer", chromedp.Click(chromedp.CSS(writerItem+` [data-testid=profile-open]`)))
	waitFor(t, ctx, "writer in view", `document.querySelector('[data-testid=chat-view][data-profile=writer]')?.hidden === false && document.querySelector('`+mainView+`').hidden`, 10*time.Second)
	gatewayCall(t, url, "chat.send", map[string]any{"profileId": "main", "message": "From another device 另一台设备", "idempotencyKey": "e2e-unread"})
	waitFor(t, ctx, "one unread answer on main", `document.querySelector('`+mainItem+` [data-testid=profile-unread]')?.textContent.trim() === '1'`, 20*time.Second)
	if n := js[int](t, ctx, `document.querySelectorAll('`+writerItem+` [data-testid=profile-unread]').length`); n != 0 {
		t.Errorf("writer (in view) shows %d unread badges", n)
	}

	do("open main", chromedp.Click(chromedp.CSS(mainItem+` [data-testid=profile-open]`)))
	waitFor(t, ctx, "main in view without unread, the answer shown",
		`!document.querySelector('`+mainView+`').hidden && !document.querySelector('`+mainItem+` [data-testid=profile-unread]') && `+
			`[...document.querySelectorAll('`+mainView+` [data-testid=chat-message][data-role=user]')].some(e => e.textContent.includes('另一台设备'))`, 10*time.Second)
	if got := js[string](t, ctx, `document.querySelector('`+mainView+` [data-testid=chat-input]').value`); got != "草稿 a draft" {
		t.Errorf("main's draft after switching = %q, want it kept", got)
	}

	// 4. The instance opens its own chat (its id is the chat's profileId).
	// A gateway that runs chats on instances answers through the worker (here
	// with an error: the worker has no model); one that does not refuses the
	// send. Either way the view shows the outcome, and nothing hangs.
	do("open writer-1's chat", chromedp.Click(chromedp.CSS(writerItem+` [data-testid=instance][data-instance-id=writer-1] [data-testid=instance-open]`)))
	const instView = `[data-testid=chat-view][data-profile=writer-1]`
	waitFor(t, ctx, "writer-1's chat in view", `document.querySelector('`+instView+`')?.hidden === false`, 10*time.Second)
	do("send to writer-1", chromedp.SendKeys(chromedp.CSS(instView+` [data-testid=chat-input]`), "Hello instance 你好\n"))
	waitFor(t, ctx, "writer-1's run to end, or the send to be refused",
		`[...document.querySelectorAll('`+instView+` [data-testid=chat-message]')].some(e => (e.dataset.role === 'assistant' && e.dataset.state !== 'streaming') || (e.dataset.role === 'user' && e.dataset.state === 'error'))`, 30*time.Second)
	t.Logf("writer-1's chat: %s", js[string](t, ctx, `[...document.querySelectorAll('`+instView+` [data-testid=chat-message]')].map(e => e.dataset.role + ':' + e.dataset.state + ': ' + e.textContent.trim()).join(' / ')`))

	// 5. Stop the instance.
	do("stop writer-1", chromedp.Click(chromedp.CSS(writerItem+` [data-testid=instance][data-instance-id=writer-1] [data-testid=instance-stop]`)))
	waitFor(t, ctx, "writer-1 stopped",
		`(() => { const e = document.querySelector('`+writerItem+` [data-testid=instance][data-instance-id=writer-1]'); return !e || e.dataset.state === 'stopped'; })()`, 20*time.Second)
	if js[bool](t, ctx, `!!document.querySelector('[data-testid=profile-error]')`) {
		t.Errorf("a spawn/stop error is shown: %s", js[string](t, ctx, `document.querySelector('[data-testid=profile-error]').textContent`))
	}
	// Without the agent loop's permission methods, no prompt and no error.
	if js[bool](t, ctx, `!!document.querySelector('[data-testid=permission-prompt]')`) {
		t.Error("a permission prompt is open although no run asked")
	}
}

// boundedDo returns a runner of UI actions in ctx, each call bounded by 15 s:
// an action waits for its element, so a missing element fails the test
// fast (with the page text) instead of hanging it.
func boundedDo(t *testing.T, ctx context.Context) func(what string, actions ...chromedp.Action[chromedp.Void]) {
	return func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := chromedp.Do(actx, actions...); err != nil {
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
			t.Fatalf("%s: %v\npage text:\n%s", what, err, body)
		}
	}
}
