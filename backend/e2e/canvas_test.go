package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	_ "image/png" // snapshots are PNGs
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
	"github.com/chromedp/chromedp"
)

// canvasForm is what the scripted model pushes: a form with every input
// of the v0.8 standard catalogue the issue names, and a Button whose
// action carries the bound values.
var canvasForm = []map[string]any{
	{"surfaceUpdate": map[string]any{"surfaceId": "form", "components": []any{
		comp("root", "Column", map[string]any{"children": map[string]any{"explicitList": []string{"title", "name", "agree", "level", "color", "send"}}}),
		comp("title", "Text", map[string]any{"text": lit("Trip form 旅行表"), "usageHint": "h3"}),
		comp("name", "TextField", map[string]any{"label": lit("Name"), "text": map[string]any{"path": "/form/name"}}),
		comp("agree", "CheckBox", map[string]any{"label": lit("I agree"), "value": map[string]any{"path": "/form/agree"}}),
		comp("level", "Slider", map[string]any{"label": lit("Level"), "value": map[string]any{"path": "/form/level"}, "minValue": 0, "maxValue": 10}),
		comp("color", "MultipleChoice", map[string]any{"selections": map[string]any{"path": "/form/colors"}, "maxAllowedSelections": 1,
			"options": []any{map[string]any{"label": lit("Red"), "value": "red"}, map[string]any{"label": lit("Blue"), "value": "blue"}}}),
		comp("sendText", "Text", map[string]any{"text": lit("Send")}),
		comp("send", "Button", map[string]any{"child": "sendText", "primary": true, "action": map[string]any{"name": "submit", "context": []any{
			map[string]any{"key": "name", "value": map[string]any{"path": "/form/name"}},
			map[string]any{"key": "agree", "value": map[string]any{"path": "/form/agree"}},
			map[string]any{"key": "level", "value": map[string]any{"path": "/form/level"}},
			map[string]any{"key": "colors", "value": map[string]any{"path": "/form/colors"}},
		}}}),
	}}},
	{"dataModelUpdate": map[string]any{"surfaceId": "form", "path": "/form", "contents": []any{
		map[string]any{"key": "name", "valueString": ""},
		map[string]any{"key": "agree", "valueBoolean": false},
		map[string]any{"key": "level", "valueNumber": 3},
		map[string]any{"key": "colors", "valueString": "[]"},
	}}},
	{"beginRendering": map[string]any{"surfaceId": "form", "root": "root"}},
}

func comp(id, typ string, props map[string]any) map[string]any {
	return map[string]any{"id": id, "component": map[string]any{typ: props}}
}

func lit(s string) map[string]any { return map[string]any{"literalString": s} }

// canvasModel is an OpenAI-compatible model for the Canvas: asked a
// question, it calls the canvas tool to push canvasForm, then says to fill
// it in; given a Canvas action, it thanks the person. It records the user
// messages it was sent.
type canvasModel struct {
	mu    sync.Mutex
	users []string
}

func (m *canvasModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readChatRequest(w, r)
	if !ok {
		return
	}
	last, lastRole := "", ""
	for _, msg := range req.Messages {
		lastRole = msg.Role
		if msg.Role == "user" {
			last = fmt.Sprint(msg.Content)
		}
	}
	m.mu.Lock()
	m.users = append(m.users, last)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	switch {
	case strings.HasPrefix(last, "Canvas action") && lastRole == "user":
		send(map[string]any{"role": "assistant", "content": "Thanks, I got the form."}, nil)
		send(map[string]any{}, "stop")
	case lastRole == "user":
		args, _ := json.Marshal(map[string]any{"action": "push", "messages": canvasForm})
		send(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_canvas_1", "type": "function",
			"function": map[string]any{"name": "canvas", "arguments": string(args)}}}}, nil)
		send(map[string]any{}, "tool_calls")
	default: // after the tool result
		send(map[string]any{"role": "assistant", "content": "Please fill in the form on the Canvas."}, nil)
		send(map[string]any{}, "stop")
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func (m *canvasModel) sawUser(pred func(string) bool) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, u := range m.users {
		if pred(u) {
			return u, true
		}
	}
	return "", false
}

// TestCanvasFormEndToEnd (issue 23): a scripted model pushes a form
// (TextField, CheckBox, Slider, MultipleChoice, Button) through its canvas
// tool; the desktop renders it; the test fills it in and presses the
// button in the real browser; the model's next request carries the values;
// a reload keeps the surface. Then hostile html presented on the Canvas is
// refused everything (the app's DOM, its token, cookies, IndexedDB, the
// gateway's WebSocket and HTTP, navigating the top window).
func TestCanvasFormEndToEnd(t *testing.T) {
	model := &canvasModel{}
	modelSrv := httptest.NewServer(model)
	t.Cleanup(modelSrv.Close)
	ctx, uiURL := openUIWith(t, nil, "OPENAI_BASE_URL="+modelSrv.URL+"/v1", "OPENAI_API_KEY=k", "OPENAI_MODEL=scripted")
	do := boundedDo(t, ctx)
	do("ask for the form",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), "Show me the trip form"),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`)))
	const surface = `document.querySelector('[data-testid=canvas] [data-surface=form]')`
	waitFor(t, ctx, "the form on the Canvas", `!!`+surface+`?.querySelector('input[type=range]') && `+surface+`.textContent.includes('旅行表')`, 60*time.Second)
	waitFor(t, ctx, "the model's answer after the push",
		`[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.textContent.includes('fill in the form'))`, 30*time.Second)

	// A reload keeps the surface (canvas.state at connect).
	do("reload", chromedp.Reload())
	waitFor(t, ctx, "the UI to connect again", connected, 30*time.Second)
	waitFor(t, ctx, "the form after the reload", `!!`+surface+`?.querySelector('input[type=range]')`, 30*time.Second)
	if !js[bool](t, ctx, `!!document.querySelector('[data-testid=canvas-dialog]:not(.canvas-hidden)')`) {
		do("open the Canvas", chromedp.Click(chromedp.CSS(`[data-testid=open-canvas]`)))
	}

	// Fill it in and press Send.
	do("type the name", chromedp.SendKeys(chromedp.CSS(`[data-surface=form] .a2-field input`), "Ada Lovelace 艾达"))
	do("tick the box", chromedp.Click(chromedp.CSS(`[data-surface=form] input[type=checkbox]`)))
	js[bool](t, ctx, `(() => { const s = document.querySelector('[data-surface=form] input[type=range]'); s.value = '7';
		s.dispatchEvent(new Event('input', {bubbles: true})); s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
	do("choose blue", chromedp.Click(chromedp.CSS(`[data-surface=form] input[value=blue]`)))
	do("press Send", chromedp.Click(chromedp.CSS(`[data-surface=form] button.a2-button`)))

	deadline := time.Now().Add(60 * time.Second)
	var got string
	for {
		var ok bool
		if got, ok = model.sawUser(func(u string) bool { return strings.HasPrefix(u, "Canvas action") }); ok {
			break
		}
		if time.Now().After(deadline) {
			body := js[string](t, ctx, `document.body.innerText.slice(0, 3000)`)
			t.Fatalf("the press never reached the model; page:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, block, _ := strings.Cut(got, "```json\n")
	block, _, _ = strings.Cut(block, "\n```")
	var ua struct {
		UserAction struct {
			Name, SurfaceID, SourceComponentID string
			Context                            map[string]any
		} `json:"userAction"`
	}
	if err := json.Unmarshal([]byte(block), &ua); err != nil {
		t.Fatalf("the action message: %v\n%s", err, got)
	}
	c := ua.UserAction.Context
	if ua.UserAction.Name != "submit" || ua.UserAction.SurfaceID != "form" || ua.UserAction.SourceComponentID != "send" ||
		c["name"] != "Ada Lovelace 艾达" || c["agree"] != true || fmt.Sprint(c["level"]) != "7" || fmt.Sprint(c["colors"]) != "[blue]" {
		t.Fatalf("the values the model got: %+v\n%s", ua.UserAction, got)
	}
	// The press is a visible turn: the message and the answer in the chat.
	waitFor(t, ctx, "the answer to the press",
		`[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.textContent.includes('got the form'))`, 30*time.Second)

	// A snapshot of the desktop's Canvas: the UI draws its surfaces, the PNG
	// lands in the media store.
	snap := snapshotMeta(t, gatewayCall(t, uiURL, "canvas.snapshot", map[string]any{"target": "desktop", "idempotencyKey": "snap-1"}))
	if snap.Media.Device != "desktop" {
		t.Errorf("snapshot: %+v", snap.Media)
	}

	hostileFrame(t, ctx, uiURL)
}

type snapshotResult struct {
	Media struct {
		ID, Path, MIME, Device, Command, Transport string
		Width, Height                              int
		Size                                       int64
	}
}

// snapshotMeta checks canvas.snapshot's answer: a PNG of some size stored
// in the media store as canvas.snapshot, whose file is a PNG of that size.
func snapshotMeta(t *testing.T, raw json.RawMessage) snapshotResult {
	t.Helper()
	var r snapshotResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("snapshot %s: %v", raw, err)
	}
	m := r.Media
	if m.MIME != "image/png" || m.Command != "canvas.snapshot" || m.Transport != "gateway" || m.Width < 50 || m.Height < 50 || m.Size == 0 {
		t.Fatalf("snapshot: %s", raw)
	}
	f, err := os.Open(m.Path)
	if err != nil {
		t.Fatalf("the snapshot's file: %v", err)
	}
	defer f.Close()
	cfg, format, err := image.DecodeConfig(f)
	if err != nil || format != "png" || cfg.Width != m.Width || cfg.Height != m.Height {
		t.Fatalf("the snapshot's file: %s %dx%d %v, want png %dx%d", format, cfg.Width, cfg.Height, err, m.Width, m.Height)
	}
	return r
}

// hostileHTML tries everything a presented page must not do and keeps
// the outcome of each in window.__r (read back through canvas.eval).
const hostileHTML = `<!doctype html><html><body><p>hostile page</p><script>
window.__r = {};
function tryIt(name, f) { try { window.__r[name] = 'allowed: ' + String(f()); } catch (e) { window.__r[name] = 'blocked: ' + e.name; } }
tryIt('parentDOM', () => parent.document.title);
tryIt('parentStorage', () => parent.localStorage.length);
tryIt('localStorage', () => localStorage.length);
tryIt('sessionStorage', () => sessionStorage.length);
tryIt('cookie', () => document.cookie);
tryIt('indexedDB', () => indexedDB.open('atrium'));
tryIt('topNavigate', () => { top.location.href = 'https://example.com/hijacked'; return 'no error'; });
window.__r.ws = 'pending';
try { const ws = new WebSocket('WSURL'); ws.onopen = () => { window.__r.ws = 'allowed: open'; }; ws.onerror = () => { window.__r.ws = 'blocked: error'; }; }
catch (e) { window.__r.ws = 'blocked: ' + e.name; }
window.__r.fetch = 'pending';
fetch('HTTPURL/healthz').then(() => { window.__r.fetch = 'allowed'; }, (e) => { window.__r.fetch = 'blocked: ' + e.name; });
</script></body></html>`

// hostileFrame presents hostileHTML on the desktop's Canvas (as the
// person, through the gateway) and reads back what it could do: nothing.
func hostileFrame(t *testing.T, ctx context.Context, uiURL string) {
	t.Helper()
	base, _, _ := strings.Cut(uiURL, "/#token=")
	html := strings.NewReplacer("WSURL", strings.Replace(base, "http://", "ws://", 1)+"/ws", "HTTPURL", base).Replace(hostileHTML)
	var shown struct {
		Rendered bool
		Reason   string
		FrameURL string
	}
	if err := json.Unmarshal(gatewayCall(t, uiURL, "canvas.present", map[string]any{"target": "desktop", "html": html, "idempotencyKey": "hostile-1"}), &shown); err != nil {
		t.Fatal(err)
	}
	if !shown.Rendered || !strings.HasPrefix(shown.FrameURL, "/canvas/frame/") {
		t.Fatalf("present: %+v", shown)
	}
	waitFor(t, ctx, "the sandboxed frame", `document.querySelector('[data-testid=canvas] iframe.canvas-frame')?.getAttribute('sandbox') === 'allow-scripts allow-forms'`, 30*time.Second)
	var r map[string]string
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		var ev struct {
			OK    bool
			Value map[string]string
			Error string
		}
		if err := json.Unmarshal(gatewayCall(t, uiURL, "canvas.eval", map[string]any{"target": "desktop", "js": "window.__r", "idempotencyKey": fmt.Sprintf("eval-%d", i)}), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.OK && ev.Value["ws"] != "pending" && ev.Value["fetch"] != "pending" && ev.Value["ws"] != "" {
			r = ev.Value
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hostile page's outcome: %+v", ev)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, k := range []string{"parentDOM", "parentStorage", "localStorage", "sessionStorage", "cookie", "indexedDB", "ws", "fetch"} {
		if !strings.HasPrefix(r[k], "blocked") {
			t.Errorf("the presented page could %s: %q", k, r[k])
		}
	}
	// Top navigation is refused (by an exception, or silently): the app
	// stays where it was.
	if !strings.HasPrefix(r["topNavigate"], "blocked") {
		if href := js[string](t, ctx, `location.href`); !strings.HasPrefix(href, base) {
			t.Errorf("the presented page navigated the app to %s", href)
		}
	}
	if href := js[string](t, ctx, `location.href`); !strings.HasPrefix(href, base) {
		t.Errorf("the app is at %s", href)
	}
	t.Logf("hostile page: %v", r)
}

// TestPhoneCanvas (issue 23): the same form pushed to a paired headless
// phone (the pairing page over TLS, a node that declares the Canvas
// commands) renders there and the push is acknowledged only then; the
// person fills it in and presses Send on the phone, and the press reaches
// the agent's session (here the person's own push: main, session canvas)
// with the values; a reload of the phone page gets the surface again from
// the gateway (replayed when its node connects).
func TestPhoneCanvas(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	g := startMediaGateway(t, tmp)
	phone, deviceID := g.pairBrowser(t, chromium, filepath.Join(tmp, "phone"),
		[]string{"canvas.a2ui.push", "canvas.a2ui.reset", "canvas.present", "canvas.eval"}, []string{"canvas"})

	var lines []string
	for _, m := range canvasForm {
		b, _ := json.Marshal(m)
		lines = append(lines, string(b))
	}
	var push struct {
		Applied  int
		Rendered bool
		Reason   string
	}
	if err := json.Unmarshal(g.admin.call("canvas.a2ui.push", map[string]any{"target": deviceID, "jsonl": strings.Join(lines, "\n")}), &push); err != nil {
		t.Fatal(err)
	}
	if push.Applied != 3 || !push.Rendered {
		t.Fatalf("push to the phone: %+v", push)
	}
	const surface = `document.querySelector('[data-testid=phone-canvas] [data-surface=form]')`
	// Acknowledged means drawn: the form is there already.
	if !js[bool](t, phone, `!!`+surface+`?.querySelector('input[type=range]')`) {
		t.Fatal("the push was acknowledged before the phone showed the form")
	}

	// Push → rendered on the phone, measured (docs/BENCHMARKS.md; logged,
	// never asserted): one bound value's update, from the admin's call to
	// the gateway's answer, which comes once the phone's DOM shows it.
	var took []time.Duration
	for i := range 21 { // the last one empties the field again
		line := fmt.Sprintf(`{"dataModelUpdate":{"surfaceId":"form","path":"/form/name","contents":[{"key":".","valueString":"name %d"}]}}`, i)
		if i == 20 {
			line = `{"dataModelUpdate":{"surfaceId":"form","path":"/form/name","contents":[{"key":".","valueString":""}]}}`
		}
		start := time.Now()
		if err := json.Unmarshal(g.admin.call("canvas.a2ui.push", map[string]any{"target": deviceID, "jsonl": line}), &push); err != nil {
			t.Fatal(err)
		}
		took = append(took, time.Since(start))
		if !push.Rendered {
			t.Fatalf("update %d not rendered: %+v", i, push)
		}
	}
	slices.Sort(took)
	t.Logf("push → rendered on the phone, 21 updates of a bound value: median %v, min %v, max %v", took[len(took)/2], took[0], took[len(took)-1])

	// A reload: the node connects again and the gateway sends its surface.
	do := boundedDo(t, phone)
	do("reload the phone page", chromedp.Reload())
	waitFor(t, phone, "the phone's node connected again", `document.querySelector('[data-testid=phone-node-state]')?.dataset.state === 'connected'`, 30*time.Second)
	waitFor(t, phone, "the form after the reload", `!!`+surface+`?.querySelector('input[type=range]')`, 30*time.Second)

	do("type the name", chromedp.SendKeys(chromedp.CSS(`[data-testid=phone-canvas] [data-surface=form] .a2-field input`), "Grace Hopper 格蕾丝"))
	do("tick the box", chromedp.Click(chromedp.CSS(`[data-testid=phone-canvas] [data-surface=form] input[type=checkbox]`)))
	js[bool](t, phone, `(() => { const s = document.querySelector('[data-testid=phone-canvas] [data-surface=form] input[type=range]'); s.value = '9';
		s.dispatchEvent(new Event('input', {bubbles: true})); s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
	do("choose red", chromedp.Click(chromedp.CSS(`[data-testid=phone-canvas] [data-surface=form] input[value=red]`)))
	do("press Send", chromedp.Click(chromedp.CSS(`[data-testid=phone-canvas] [data-surface=form] button.a2-button`)))

	// A snapshot of the phone's Canvas (node.invoke canvas.snapshot; the
	// page draws its surfaces).
	snap := snapshotMeta(t, g.admin.call("canvas.snapshot", map[string]any{"target": deviceID}))
	if snap.Media.Device != deviceID {
		t.Errorf("snapshot: %+v", snap.Media)
	}

	// The press is a user message in main's session "canvas" (a visible
	// turn the offline provider answers) with the values.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var page struct {
			Messages []struct{ Role, SessionID, Content string }
		}
		if err := json.Unmarshal(g.admin.call("history.profile", map[string]any{"profileId": "main", "limit": 50}), &page); err != nil {
			t.Fatal(err)
		}
		found := ""
		for _, m := range page.Messages {
			if m.Role == "user" && m.SessionID == "canvas" && strings.HasPrefix(m.Content, "Canvas action") {
				found = m.Content
			}
		}
		if found != "" {
			for _, want := range []string{`"name": "Grace Hopper 格蕾丝"`, `"agree": true`, `"level": 9`, `"red"`, `"sourceComponentId": "send"`} {
				if !strings.Contains(found, want) {
					t.Errorf("the message lacks %s:\n%s", want, found)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the phone's press never became a message: %+v", page)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
