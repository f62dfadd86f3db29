// Package e2e holds the end-to-end test: it builds the real `atrium` binary,
// runs `atrium serve` on a free port against a temporary workspace and a
// scripted OpenAI-compatible model server, and drives the real UI in headless
// Chromium (chromedp): import a note by drag and drop, find it by search,
// chat with a streamed reply, reload and see the history.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildAtrium builds the root package once per test run and returns the binary path.
func buildAtrium(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "frontend", "dist", "index.html")); err != nil {
		t.Skip("e2e: the UI is not built (frontend/dist/index.html missing); run `make frontend` or `make test`")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "atrium-e2e-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "atrium")
		cmd := exec.Command("go", "build", "-o", builtBin, ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// scriptedModel is an OpenAI-compatible chat-completions server that streams
// a fixed reply as SSE deltas and records the user messages it was sent.
type scriptedModel struct {
	reply    string        // streamed word by word
	delay    time.Duration // between words
	mu       sync.Mutex
	requests []string // last user message of each request
}

const modelReply = "你好! The scripted model says hello from Atrium."

// chatRequest is the part of a chat-completions request the scripted
// servers read.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
}

// readChatRequest decodes a POST to /v1/chat/completions; anything else is
// answered (404, 400) and gives ok false.
func readChatRequest(w http.ResponseWriter, r *http.Request) (req chatRequest, ok bool) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return req, false
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return req, false
	}
	return req, true
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readChatRequest(w, r)
	if !ok {
		return
	}
	last := ""
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			last = fmt.Sprint(msg.Content)
		}
	}
	m.mu.Lock()
	m.requests = append(m.requests, last)
	m.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	words := strings.SplitAfter(m.reply, " ")
	for i, word := range words {
		chunk := map[string]any{
			"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": word}, "finish_reason": nil}},
		}
		if i == 0 {
			chunk["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)["role"] = "assistant"
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
		select { // let the UI show the stream growing; stop when the client goes away
		case <-time.After(m.delay):
		case <-r.Context().Done():
			return
		}
	}
	fmt.Fprint(w, "data: {\"id\":\"chatcmpl-e2e\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func (m *scriptedModel) sawMessage(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.requests {
		if strings.Contains(r, s) {
			return true
		}
	}
	return false
}

// startServe runs `atrium serve` and returns the UI URL (with token) it printed.
func startServe(t *testing.T, bin, home, ws string, port int, env []string) string {
	t.Helper()
	url, _ := serve(t, bin, home, ws, port, env)
	return url
}

// serve is startServe that also returns a stop function (SIGINT, then
// wait; safe to call again, and called at the end of the test). args are
// more `atrium serve` flags (e.g. "--bind", "127.0.0.2").
func serve(t *testing.T, bin, home, ws string, port int, env []string, args ...string) (string, func()) {
	t.Helper()
	return runApp(t, bin, home, env, append([]string{"serve", "--home", home, "--workspace", ws, "--port", fmt.Sprint(port)}, args...)...)
}

// runApp runs bin with args (an app: `serve …`, or no command), its
// stderr appended to home/serve.log, and returns the UI URL (with token)
// it printed first and a stop function as serve's.
func runApp(t *testing.T, bin, home string, env []string, args ...string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(home, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) // a restart appends
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			_ = cmd.Wait() // stopped by SIGINT: a clean exit is status 0
			if ps := cmd.ProcessState; ps != nil && ps.ExitCode() > 0 {
				t.Errorf("atrium %s exited with status %d after SIGINT", strings.Join(args, " "), ps.ExitCode())
			}
			logf.Close()
			if t.Failed() {
				if b, err := os.ReadFile(logf.Name()); err == nil {
					t.Logf("atrium serve log:\n%s", b)
				}
			}
		})
	}
	t.Cleanup(stop)
	urlRe := regexp.MustCompile(`http://127\.0\.0\.1:\d+/#token=[0-9a-f]+`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if u := urlRe.FindString(sc.Text()); u != "" && !sent {
				found <- u
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case u := <-found:
		return u, stop
	case <-time.After(60 * time.Second):
		t.Fatal("atrium serve did not print its URL within 60 s")
	}
	return "", stop
}

// js evaluates expr in the page and fails the test on error.
func js[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %q: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it is truthy or the step times out.
func waitFor(t *testing.T, ctx context.Context, what, predicate string, timeout time.Duration) {
	t.Helper()
	waitForEvery(t, ctx, what, predicate, timeout, 100*time.Millisecond)
}

// waitForEvery is waitFor polling every interval (a short one where the
// test measures how long the step took). A page that replaces its
// document while it is asked (the UI drops the token from its address as
// it starts; a reload) ends the poll with "Inspected target navigated or
// closed" or "Cannot find context with specified id": the poll is started
// again in the new document, within the same timeout.
func waitForEvery(t *testing.T, ctx context.Context, what, predicate string, timeout, interval time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(interval)))
		if err == nil {
			return
		}
		if documentReplaced(err) && time.Until(deadline) > interval {
			time.Sleep(interval)
			continue
		}
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
		t.Fatalf("waiting for %s: %v\npage text:\n%s", what, err, body)
	}
}

// documentReplaced tells whether err is the DevTools protocol's answer to
// an evaluation whose document went away (a navigation) while it ran.
func documentReplaced(err error) bool {
	m := err.Error()
	for _, s := range []string{"Cannot find context with specified id", "Execution context was destroyed", "Inspected target navigated or closed"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// newBrowser starts headless Chromium (chromiumtest.New: closed at the
// end of the test) and returns a chromedp context for one tab that fails
// the test on a CSP violation. extra options come after the defaults (so
// they may override one, e.g. the window size). Its profile is
// tmp/chromium: two browsers need two tmp folders.
func newBrowser(t *testing.T, chromium, tmp string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		// The UI picks its language from the browser's (lib/i18n.svelte.ts); the tests read English.
		chromedp.Flag("lang", "en-US"),
		chromedp.WindowSize(1280, 900),
	}
	ctx := chromiumtest.New(t, chromiumtest.Options{Exec: chromium, Dir: tmp, Extra: append(opts, extra...)})
	watchCSP(t, ctx)
	return ctx
}

// cspWatch records the page's Content-Security-Policy violations.
const cspWatch = `window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) =>
  window.__cspViolations.push(e.violatedDirective + ' blocked ' + (e.blockedURI || '(inline)') + ' at ' + (e.sourceFile || '?') + ':' + e.lineNumber));`

// watchCSP makes every page of tab record CSP violations, and fails the
// test at its end if there were any: the UI must work under the gateway's
// CSP (issue 14 item 6), not merely load.
func watchCSP(t *testing.T, tab context.Context) {
	t.Helper()
	if _, err := chromedp.Call(tab, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspWatch}); err != nil {
		t.Fatalf("install the CSP watch: %v", err)
	}
	t.Cleanup(func() { // runs before the browser is closed (cleanups run last-in first-out)
		v, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`window.__cspViolations ?? ["the CSP watch was not installed"]`))
		if err != nil {
			t.Errorf("read the CSP violations: %v", err)
			return
		}
		if len(v) > 0 {
			t.Errorf("the UI broke its Content-Security-Policy %d times: %v", len(v), v)
		}
	})
}

const connected = `document.querySelector('[data-testid=conn-state]')?.dataset.state === 'connected'`

func TestUIEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	bin := buildAtrium(t)
	home := filepath.Join(tmp, "home")
	ws := filepath.Join(tmp, "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("# Long-term memory\n\nThe user prefers short answers.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}

	model := &scriptedModel{reply: modelReply, delay: 40 * time.Millisecond}
	modelSrv := httptest.NewServer(model)
	defer modelSrv.Close()

	url := startServe(t, bin, home, ws, freePort(t), []string{
		"OPENAI_BASE_URL=" + modelSrv.URL + "/v1",
		"OPENAI_API_KEY=e2e-test-key",
		"OPENAI_MODEL=scripted",
	})

	ctx := newBrowser(t, chromium, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	waitFor(t, ctx, "the UI to connect", connected, 30*time.Second)

	// 0. The UI runs under the gateway's CSP: an injected inline script is
	// blocked (and seen by the CSP watch, which is then emptied: the UI's
	// own work below must not break the policy).
	if js[bool](t, ctx, `(() => {
		const s = document.createElement("script");
		s.textContent = "window.__inlineRan = true";
		document.head.append(s);
		return window.__inlineRan === true;
	})()`) {
		t.Fatal("an inline script ran: the page has no effective Content-Security-Policy")
	}
	waitFor(t, ctx, "the CSP watch to report the blocked script", `window.__cspViolations.length === 1`, 10*time.Second)
	js[bool](t, ctx, `(window.__cspViolations = [], true)`)

	// 1. Drop a note onto the memory panel (a real DragEvent with a File).
	note := "# 项目备忘 Project memo\n\n星期三的会议决定：把向量索引迁移到 sqlite-vec，代号 QK-7731。\nThe Wednesday meeting moved the vector index to sqlite-vec.\n"
	noteJSON, _ := json.Marshal(note)
	js[bool](t, ctx, `(() => {
		const dt = new DataTransfer();
		dt.items.add(new File([`+string(noteJSON)+`], "会议纪要-e2e.md", {type: "text/markdown"}));
		const zone = document.querySelector('[data-testid=memory-dropzone]');
		for (const type of ["dragenter", "dragover", "drop"]) {
			zone.dispatchEvent(new DragEvent(type, {bubbles: true, cancelable: true, dataTransfer: dt}));
		}
		return true;
	})()`)
	waitFor(t, ctx, "the import to finish", `[...document.querySelectorAll('[data-testid=import-result]')].some(e => e.dataset.status === 'ok')`, 30*time.Second)
	waitFor(t, ctx, "the file list to show the note", `[...document.querySelectorAll('[data-testid=memory-file]')].some(e => e.textContent.includes('会议纪要-e2e'))`, 30*time.Second)
	if _, err := os.Stat(filepath.Join(ws, "memory", "会议纪要-e2e.md")); err != nil {
		t.Fatalf("imported note not on disk: %v", err)
	}

	// 2. Find it by a Chinese search.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`[data-testid=memory-search-input]`), "向量索引迁移\n")); err != nil {
		t.Fatalf("type search: %v", err)
	}
	waitFor(t, ctx, "a search result naming the note",
		`[...document.querySelectorAll('[data-testid=memory-result]')].some(e => e.querySelector('[data-testid=result-path]')?.textContent.includes('会议纪要-e2e.md') && e.querySelector('[data-testid=result-snippet]')?.textContent.includes('sqlite-vec'))`,
		20*time.Second)
	score := js[string](t, ctx, `document.querySelector('[data-testid=memory-result] [data-testid=result-score]').textContent`)
	if !regexp.MustCompile(`\d\.\d\d`).MatchString(score) {
		t.Errorf("result score %q is not shown as a number", score)
	}

	// 3. Chat: the reply streams in from the scripted model.
	const question = "What did the Wednesday meeting decide?"
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), question),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`)),
	); err != nil {
		t.Fatalf("send chat: %v", err)
	}
	// The stream is visible while it grows (a partial reply in the streaming state) ...
	waitFor(t, ctx, "a streaming assistant message",
		`[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant]')].some(e => e.dataset.state === 'streaming' && e.textContent.length > 0)`, 20*time.Second)
	// ... and ends as the final message.
	const finalReply = `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.querySelector('[data-testid=chat-message-text]')?.textContent.includes('scripted model says hello'))`
	waitFor(t, ctx, "the final assistant message", finalReply, 20*time.Second)
	if !model.sawMessage(question) {
		t.Errorf("the model server never received the question; got %v", model.requests)
	}

	// 4. Reload: the history comes back from the server.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	waitFor(t, ctx, "the UI to reconnect after reload", connected, 30*time.Second)
	waitFor(t, ctx, "the user message in history",
		`[...document.querySelectorAll('[data-testid=chat-message][data-role=user]')].some(e => e.textContent.includes(`+"`"+question+"`"+`))`, 20*time.Second)
	waitFor(t, ctx, "the assistant reply in history", finalReply, 20*time.Second)
	n := js[int](t, ctx, `document.querySelectorAll('[data-testid=chat-message]').length`)
	if n != 2 {
		t.Errorf("after reload the chat shows %d messages, want 2 (no duplicates)", n)
	}
}

// openUI runs `atrium serve` on an empty workspace with the scripted model
// and opens the UI in a new headless Chromium; it returns the tab (connected)
// and the UI URL.
func openUI(t *testing.T, model *scriptedModel) (context.Context, string) {
	t.Helper()
	modelSrv := httptest.NewServer(model)
	t.Cleanup(modelSrv.Close)
	return openUIWith(t, nil, "OPENAI_BASE_URL="+modelSrv.URL+"/v1", "OPENAI_API_KEY=k", "OPENAI_MODEL=scripted")
}

// openUIWith runs `atrium serve` with env on an empty workspace, after
// prepare (when not nil) has filled it, and opens the UI in a new headless
// Chromium; it returns the tab (connected) and the UI URL.
func openUIWith(t *testing.T, prepare func(ws string), env ...string) (context.Context, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	bin := buildAtrium(t)
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "workspace")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if prepare != nil {
		prepare(ws)
	}
	url := startServe(t, bin, home, ws, freePort(t), env)
	ctx := newBrowser(t, chromium, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	waitFor(t, ctx, "the UI to connect", connected, 30*time.Second)
	return ctx, url
}

// TestUIReattachAndCancel: a reload in the middle of a slow stream shows the
// whole answer so far (re-attach, SPEC §3), and Cancel after the reload stops
// the run while the question stays on screen.
func TestUIReattachAndCancel(t *testing.T) {
	words := make([]string, 400)
	words[0] = "Opening-words-of-a-long-answer"
	for i := 1; i < len(words); i++ {
		words[i] = fmt.Sprintf("w%03d", i)
	}
	// ~20 s in all: long enough to reload and cancel in the middle.
	ctx, _ := openUI(t, &scriptedModel{reply: strings.Join(words, " "), delay: 50 * time.Millisecond})

	const question = "Tell me a long story, please."
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), question),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`)),
	); err != nil {
		t.Fatalf("send chat: %v", err)
	}
	const streamingHas = `(s) => [...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=streaming]')].some(e => e.textContent.includes(s))`
	waitFor(t, ctx, "the stream to pass w020", `(`+streamingHas+`)('w020')`, 20*time.Second)

	// Reload mid-stream: the bubble must again hold the opening words.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	waitFor(t, ctx, "the UI to reconnect", connected, 30*time.Second)
	waitFor(t, ctx, "the re-attached stream with its beginning and new words",
		`(`+streamingHas+`)('Opening-words-of-a-long-answer') && (`+streamingHas+`)('w040')`, 20*time.Second)

	// Cancel the re-attached run.
	waitFor(t, ctx, "the cancel button", `!!document.querySelector('[data-testid=chat-cancel]')`, 10*time.Second)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=chat-cancel]`))); err != nil {
		t.Fatalf("click cancel: %v", err)
	}
	waitFor(t, ctx, "the reply to end cancelled",
		`[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant]')].some(e => e.dataset.state === 'cancelled' && e.textContent.includes('Opening-words'))`, 20*time.Second)
	waitFor(t, ctx, "the question to stay on screen",
		`[...document.querySelectorAll('[data-testid=chat-message][data-role=user]')].some(e => e.textContent.includes(`+"`"+question+"`"+`))`, 5*time.Second)
	last := js[string](t, ctx, `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant]')].pop().textContent`)
	if strings.Contains(last, "w399") {
		t.Errorf("the cancelled reply ran to the end: %.200s…", last)
	}
}

// TestUITwoTabs: two browser tabs on one gateway see the same timeline: the
// question sent in one tab and its streamed answer appear in the other, in
// the same order.
func TestUITwoTabs(t *testing.T) {
	tab1, url := openUI(t, &scriptedModel{reply: "First tab answer streams into both tabs.", delay: 60 * time.Millisecond})
	tab2, cancel2 := chromedp.NewContext(tab1) // a second tab in the same browser
	defer cancel2()
	if err := chromedp.Do(tab2, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate tab 2: %v", err)
	}
	waitFor(t, tab2, "tab 2 to connect", connected, 30*time.Second)

	const question = "Question from the first tab"
	if err := chromedp.Do(tab1,
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), question),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`)),
	); err != nil {
		t.Fatalf("send from tab 1: %v", err)
	}
	waitFor(t, tab2, "the question and the streaming answer in tab 2",
		`(() => { const ms = [...document.querySelectorAll('[data-testid=chat-message]')];
		  const q = ms.findIndex(e => e.dataset.role === 'user' && e.textContent.includes('`+question+`'));
		  return q >= 0 && ms.slice(q + 1).some(e => e.dataset.role === 'assistant' && e.dataset.state === 'streaming'); })()`, 20*time.Second)
	const final = `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.textContent.includes('streams into both tabs'))`
	waitFor(t, tab1, "the final answer in tab 1", final, 20*time.Second)
	waitFor(t, tab2, "the final answer in tab 2", final, 20*time.Second)
	timeline := `[...document.querySelectorAll('[data-testid=chat-message]')].map(e => e.dataset.role + ':' + e.dataset.state + ':' + e.querySelector('[data-testid=chat-message-text]').textContent.trim()).join('\n')`
	one, two := js[string](t, tab1, timeline), js[string](t, tab2, timeline)
	if one != two {
		t.Errorf("the tabs show different timelines:\ntab 1:\n%s\ntab 2:\n%s", one, two)
	}
}

// cli runs the built binary against the running app's home and workspace
// (memory commands ask the running app over its gateway) and returns
// stdout; wantOK says whether it must succeed or fail.
func cli(t *testing.T, bin, home, ws string, port int, stdin string, wantOK bool, args ...string) string {
	t.Helper()
	args = append(args, "--home", home, "--workspace", ws, "--port", fmt.Sprint(port))
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if (err == nil) != wantOK {
		t.Fatalf("atrium %s: err %v (want ok %v)\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, wantOK, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestUIConflictsAndAudit: a stale replace (written through the running
// app by the CLI) makes a conflict; the memory panel's conflicts queue shows
// both sides with the differing lines marked, "Take other" resolves it and
// the file on disk holds the other side; the files view shows layer and
// access; the audit view shows a denied read, highlighted.
func TestUIConflictsAndAudit(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	bin := buildAtrium(t)
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "workspace")
	secret := filepath.Join(ws, "memory", "roles", "code-expert", "secret.md")
	// writer is a role of the workspace (the CLI refuses an --as that is none), without access to code-expert's notes.
	writer := filepath.Join(ws, "memory", "roles", "writer")
	for _, d := range []string{home, filepath.Dir(secret), writer} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(secret, []byte("# Secret\n\nPrivate tip.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(writer, "config.md"), []byte("---\ndescription: writes\n---\n# writer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	modelSrv := httptest.NewServer(&scriptedModel{reply: "ok"})
	t.Cleanup(modelSrv.Close)
	port := freePort(t)
	url := startServe(t, bin, home, ws, port, []string{"OPENAI_BASE_URL=" + modelSrv.URL + "/v1", "OPENAI_API_KEY=k", "OPENAI_MODEL=scripted"})

	// Two writers start from v1; the second write is based on the stale v1.
	const plan = "memory/global/plan.md"
	const v1 = "# 计划 Plan\n\n第一步：整理索引。\nStep two: ship.\n"
	const v2 = "# 计划 Plan\n\n第一步：整理索引（已完成）。\nStep two: ship.\n"
	const v3 = "# 计划 Plan\n\n第一步：整理索引。\nStep two: ship on Friday.\n"
	var w1, w3 struct {
		Version  string `json:"version"`
		Conflict *struct {
			ID int64 `json:"id"`
		} `json:"conflict"`
	}
	if err := json.Unmarshal([]byte(cli(t, bin, home, ws, port, v1, true, "memory", "write", plan, "--mode", "replace", "--json")), &w1); err != nil || w1.Version == "" {
		t.Fatalf("write v1: %v %+v", err, w1)
	}
	cli(t, bin, home, ws, port, v2, true, "memory", "write", plan, "--mode", "replace", "--base", w1.Version, "--json")
	if err := json.Unmarshal([]byte(cli(t, bin, home, ws, port, v3, true, "memory", "write", plan, "--mode", "replace", "--base", w1.Version, "--json")), &w3); err != nil || w3.Conflict == nil {
		t.Fatalf("the stale write made no conflict: %v %+v", err, w3)
	}
	// A role's read of another role's private file: refused and audited.
	cli(t, bin, home, ws, port, "", false, "memory", "get", "memory/roles/code-expert/secret.md", "--as", "writer")

	ctx := newBrowser(t, chromium, tmp)
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	waitFor(t, ctx, "the UI to connect", connected, 30*time.Second)

	// Files: the plan is L1 global, readable by all, written by admin and main (the defaults).
	waitFor(t, ctx, "the plan in the file list with its layer and access",
		`[...document.querySelectorAll('[data-testid=memory-file]')].some(e => e.textContent.includes('plan.md')
		  && e.querySelector('[data-testid=file-layer]')?.textContent === 'L1 global'
		  && e.querySelector('[data-testid=file-access]')?.textContent.includes('read: * · write: admin, main'))`, 30*time.Second)
	shot(t, ctx, "memory-files.png")
	waitFor(t, ctx, "the open conflict count", `document.querySelector('[data-testid=conflicts-count]')?.textContent === '1'`, 10*time.Second)

	// Conflicts: open it and see both sides.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=memory-view-conflicts]`))); err != nil {
		t.Fatalf("open conflicts: %v", err)
	}
	waitFor(t, ctx, "the conflict in the queue", `[...document.querySelectorAll('[data-testid=conflict-item]')].some(e => e.textContent.includes('memory/global/plan.md'))`, 10*time.Second)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=conflict-item]`))); err != nil {
		t.Fatalf("open the conflict: %v", err)
	}
	waitFor(t, ctx, "both sides, differing lines marked",
		`(() => { const l = [...document.querySelectorAll('[data-testid=diff-left][data-changed=true]')].map(e => e.textContent);
		  const r = [...document.querySelectorAll('[data-testid=diff-right][data-changed=true]')].map(e => e.textContent);
		  return l.includes('Step two: ship on Friday.') && l.includes('第一步：整理索引。') && r.includes('第一步：整理索引（已完成）。') && r.includes('Step two: ship.'); })()`, 10*time.Second)
	shot(t, ctx, "memory-conflict.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=conflict-take-other]`))); err != nil {
		t.Fatalf("take other: %v", err)
	}
	waitFor(t, ctx, "the queue to be empty", `!!document.querySelector('[data-testid=conflicts-empty]')`, 10*time.Second)
	b, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(plan)))
	if err != nil || string(b) != v2 {
		t.Fatalf("after taking the other side the file holds %q (%v), want %q", b, err, v2)
	}
	if left, _ := filepath.Glob(filepath.Join(ws, "memory", "global", "plan.conflict-*.md")); len(left) != 0 {
		t.Errorf("conflict files left after resolving: %v", left)
	}

	// Audit: the denied read is listed and highlighted; the denied filter keeps it.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=memory-view-audit]`))); err != nil {
		t.Fatalf("open audit: %v", err)
	}
	const deniedRow = `[...document.querySelectorAll('[data-testid=audit-row][data-result=denied]')].some(e => e.classList.contains('denied') && e.textContent.includes('roles/code-expert/secret.md') && e.textContent.includes('writer'))`
	waitFor(t, ctx, "the denied read in the audit view", deniedRow, 10*time.Second)
	js[bool](t, ctx, `(() => { const s = document.querySelector('[data-testid=audit-result]'); s.value = 'denied'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
	waitFor(t, ctx, "only denied rows", `(() => { const rows = [...document.querySelectorAll('[data-testid=audit-row]')]; return rows.length > 0 && rows.every(e => e.dataset.result === 'denied'); })() && `+deniedRow, 10*time.Second)
	shot(t, ctx, "memory-audit.png")
}

// shot saves a screenshot of the page into $ATRIUM_E2E_OUT, when set.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("ATRIUM_E2E_OUT")
	if dir == "" {
		return
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(dir, name), buf, 0o644)
	}
}
