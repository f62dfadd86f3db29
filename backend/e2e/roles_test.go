package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// recordingModel is a scripted OpenAI-compatible server that keeps every
// request's messages whole (system prompt included) and answers reply.
type recordingModel struct {
	reply string
	mu    sync.Mutex
	reqs  [][]map[string]any
}

func (m *recordingModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, req.Messages)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	b, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": m.reply}, "finish_reason": nil}}})
	fmt.Fprintf(w, "data: %s\n\n", b)
	fmt.Fprint(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

// request returns the messages of the first request whose last user
// message contains text, or nil.
func (m *recordingModel) request(text string) []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, msgs := range m.reqs {
		last := ""
		for _, msg := range msgs {
			if msg["role"] == "user" {
				last = fmt.Sprint(msg["content"])
			}
		}
		if strings.Contains(last, text) {
			return msgs
		}
	}
	return nil
}

// press clicks the first element sel matches with a script (a hidden tab
// button as well), once it exists; at most 30 s.
func press(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	waitFor(t, ctx, sel, `!!document.querySelector(`+jsString(sel)+`)`, 30*time.Second)
	js[bool](t, ctx, `(document.querySelector(`+jsString(sel)+`).click(), true)`)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// visibleChat is the chat view in front.
const visibleChat = `[data-testid=chat-view]:not([hidden])`

// typeInChat focuses the visible chat box and types text (keys, so
// completion and Enter work as for a person).
func typeInChat(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(visibleChat+` [data-testid=chat-input]`), text)); err != nil {
		t.Fatalf("type %q: %v", text, err)
	}
}

// TestUIRolesRoutingSessions (issue 24 items 1–3, in the real window):
// a role created in the Profiles panel answers its first message with its
// saved starting context in the system prompt the model gets; `@name`
// completion routes a message from main's chat box to that role ("routed
// to X because you mentioned …" first); "ask the right agent" routes by
// capability and the person re-routes to main; `/new` closes main's
// session and writes its note. axe-core finds nothing serious on each
// screen, and each step is done with the keyboard where a person would.
func TestUIRolesRoutingSessions(t *testing.T) {
	model := &recordingModel{reply: "Understood, noted."}
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	var ws string
	ctx, _ := openUIWith(t, func(dir string) {
		ws = dir
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.MkdirAll(filepath.Join(dir, "memory", "global"), 0o755))
		must(os.WriteFile(filepath.Join(dir, "memory", "global", "user-profile.md"),
			[]byte("# User profile\n\nThe person ships Project Kestrel every Friday.\n"), 0o644))
	}, "OPENAI_BASE_URL="+srv.URL+"/v1", "OPENAI_API_KEY=k", "OPENAI_MODEL=scripted")

	// 1. Create a role from a template, then rename it and make it ours.
	press(t, ctx, `nav.tabs button:first-child`)
	press(t, ctx, `[data-testid=role-create-open]`)
	js[bool](t, ctx, `(() => { const s = document.querySelector('[data-testid=role-template]'); s.value = 'writer'; s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
	waitFor(t, ctx, "the template to fill the form", `document.querySelector('[data-testid=role-persona]').value.includes('release notes')`, 10*time.Second)
	js[bool](t, ctx, `(() => { const i = document.querySelector('[data-testid=role-name]'); i.value = ''; i.dispatchEvent(new Event('input', {bubbles: true})); return true })()`)
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`[data-testid=role-name]`), "reviewer")); err != nil {
		t.Fatal(err)
	}
	js[bool](t, ctx, `(() => { const i = document.querySelector('[data-testid=role-capabilities]'); i.value = 'review, 审阅'; i.dispatchEvent(new Event('input', {bubbles: true})); return true })()`)
	waitFor(t, ctx, "the ACL preview to name the role", `document.querySelector('[data-testid=role-acl-preview]').textContent.includes('memory/roles/reviewer/**')`, 10*time.Second)
	axeCheck(t, ctx, "the new-role form")
	shot(t, ctx, "roles-create-en-desktop.png")
	press(t, ctx, `[data-testid=role-create-submit]`)
	waitFor(t, ctx, "the role to be created", `document.querySelector('[data-testid=role-created]')?.textContent.includes('memory/roles/reviewer/MEMORY.md')`, 60*time.Second)
	saved, err := os.ReadFile(filepath.Join(ws, "memory", "roles", "reviewer", "MEMORY.md"))
	if err != nil || !strings.Contains(string(saved), "memory/global/user-profile.md") {
		t.Fatalf("starting context on disk: %v\n%s", err, saved)
	}

	// Its first turn carries the starting context.
	press(t, ctx, `[data-testid=role-created-chat]`)
	waitFor(t, ctx, "reviewer-1's chat", `!!document.querySelector('`+visibleChat+`[data-profile="reviewer-1"]')`, 20*time.Second)
	typeInChat(t, ctx, "First task for you\n")
	waitFor(t, ctx, "reviewer-1's answer", `[...document.querySelectorAll('`+visibleChat+` [data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.textContent.includes('Understood'))`, 90*time.Second)
	first := model.request("First task for you")
	if len(first) == 0 || first[0]["role"] != "system" {
		t.Fatalf("the model got no system prompt for the first turn: %v", first)
	}
	sys := fmt.Sprint(first[0]["content"])
	if !strings.Contains(sys, "## Your memory (memory/roles/reviewer/MEMORY.md)") || !strings.Contains(sys, "memory/global/user-profile.md") ||
		!strings.Contains(sys, "release notes") {
		t.Fatalf("the first turn's system prompt lacks the starting context:\n%s", sys)
	}

	// 2a. @mention with completion, from main's chat box.
	press(t, ctx, `nav.tabs button:first-child`)
	press(t, ctx, `[data-testid=profile-open][data-profile=main]`)
	waitFor(t, ctx, "main's chat", `!!document.querySelector('`+visibleChat+`[data-profile="main"]')`, 20*time.Second)
	typeInChat(t, ctx, "@rev")
	waitFor(t, ctx, "the completion list", `[...document.querySelectorAll('`+visibleChat+` [data-testid=chat-mention]')].some(e => e.textContent === '@reviewer')`, 10*time.Second)
	axeCheck(t, ctx, "the @name completion")
	typeInChat(t, ctx, "\tplease check the Friday notes\n")
	waitFor(t, ctx, "the routing decision", `document.querySelector('`+visibleChat+` [data-testid=chat-route-plan]')?.dataset.reason === 'mention'`, 20*time.Second)
	if why := js[string](t, ctx, `document.querySelector('`+visibleChat+` [data-testid=chat-route-why]').textContent`); !strings.Contains(why, "Routed to reviewer") || !strings.Contains(why, "@reviewer") {
		t.Fatalf("routing shown as %q", why)
	}
	if model.request("please check the Friday notes") != nil {
		t.Fatal("the message was sent before the person confirmed the route")
	}
	axeCheck(t, ctx, "the routing decision")
	shot(t, ctx, "roles-route-en-desktop.png")
	// The Send button has the focus: Enter confirms.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "reviewer-1 to answer the routed message", `!!document.querySelector('`+visibleChat+`[data-profile="reviewer-1"] [data-testid=chat-routed-here]') && [...document.querySelectorAll('`+visibleChat+` [data-testid=chat-message][data-role=user]')].some(e => e.textContent.includes('please check the Friday notes'))`, 30*time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for model.request("@reviewer please check the Friday notes") == nil {
		if time.Now().After(deadline) {
			t.Fatal("the routed message never reached the model")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// 2b. "Ask the right agent": capability routing, and the person re-routes to main.
	press(t, ctx, `nav.tabs button:first-child`)
	press(t, ctx, `[data-testid=profile-open][data-profile=main]`)
	waitFor(t, ctx, "main's chat", `!!document.querySelector('`+visibleChat+`[data-profile="main"]')`, 20*time.Second)
	press(t, ctx, visibleChat+` [data-testid=chat-route-mode]`)
	typeInChat(t, ctx, "Could you review this paragraph?\n")
	waitFor(t, ctx, "capability routing", `(p => p && p.dataset.reason === 'capability' && p.dataset.role === 'reviewer')(document.querySelector('`+visibleChat+` [data-testid=chat-route-plan]'))`, 20*time.Second)
	js[bool](t, ctx, `(() => { const s = document.querySelector('`+visibleChat+` [data-testid=chat-route-choose]'); s.value = 'main'; s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
	waitFor(t, ctx, "the re-route to main", `document.querySelector('`+visibleChat+` [data-testid=chat-route-plan]').dataset.role === 'main'`, 10*time.Second)
	press(t, ctx, visibleChat+` [data-testid=chat-route-send]`)
	waitFor(t, ctx, "main's answer", `[...document.querySelectorAll('`+visibleChat+`[data-profile="main"] [data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.textContent.includes('Understood'))`, 60*time.Second)
	if model.request("Could you review this paragraph?") == nil {
		t.Fatal("the re-routed message never reached the model")
	}
	press(t, ctx, visibleChat+` [data-testid=chat-route-mode]`)

	// 3. /new closes main's session and writes its dated note.
	typeInChat(t, ctx, "/new\n")
	waitFor(t, ctx, "the session divider with the note", `(d => d && d.dataset.note.startsWith('memory/roles/main/'))(document.querySelector('`+visibleChat+` [data-testid=chat-reset]'))`, 30*time.Second)
	note := js[string](t, ctx, `document.querySelector('`+visibleChat+` [data-testid=chat-reset]').dataset.note`)
	body, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(note)))
	if err != nil || !strings.Contains(string(body), "Could you review this paragraph?") {
		t.Fatalf("note %s: %v\n%s", note, err, body)
	}
	if model.request("/new") != nil {
		t.Fatal("/new went to the model")
	}
	axeCheck(t, ctx, "the closed session")
	shot(t, ctx, "roles-session-en-desktop.png")

	// Screenshots in Chinese and on a phone-sized window (ATRIUM_E2E_OUT).
	if os.Getenv("ATRIUM_E2E_OUT") != "" {
		js[bool](t, ctx, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = 'zh'; s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
		waitFor(t, ctx, "the Chinese UI", `document.documentElement.lang.startsWith('zh')`, 10*time.Second)
		axeCheck(t, ctx, "the Chinese UI")
		shot(t, ctx, "roles-session-zh-desktop.png")
		typeInChat(t, ctx, "@reviewer 请看看周五的笔记\n")
		waitFor(t, ctx, "the routing decision (zh)", `!!document.querySelector('`+visibleChat+` [data-testid=chat-route-plan]')`, 20*time.Second)
		shot(t, ctx, "roles-route-zh-desktop.png")
		if _, err := chromedp.Call(ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 2, Mobile: true}); err != nil {
			t.Fatal(err)
		}
		axeCheck(t, ctx, "the phone-sized window")
		shot(t, ctx, "roles-route-zh-phone.png")
		press(t, ctx, visibleChat+` [data-testid=chat-route-cancel]`)
		press(t, ctx, `nav.tabs button:first-child`)
		press(t, ctx, `[data-testid=role-create-open]`)
		shot(t, ctx, "roles-create-zh-phone.png")
		js[bool](t, ctx, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = 'en'; s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
		shot(t, ctx, "roles-create-en-phone.png")
		press(t, ctx, `nav.tabs button:nth-child(2)`)
		shot(t, ctx, "roles-session-en-phone.png")
	}
}
