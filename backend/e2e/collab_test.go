package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// collabModel is a scripted OpenAI-compatible server for one agent:
// a message naming a key of asks makes it call ask_role with those
// arguments; a tool result makes it say what came back; anything else gets
// reply.
type collabModel struct {
	reply string
	asks  map[string]string // part of the person's message → ask_role arguments (JSON)
}

func (m *collabModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	last := req.Messages[len(req.Messages)-1]
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	text := func(s string) {
		send(map[string]any{"role": "assistant", "content": s}, nil)
		send(map[string]any{}, "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	if last.Role == "tool" {
		// The tool message: the agent loop's envelope around the tool's data.
		var env struct {
			Data struct{ Status, Answer, Note string }
		}
		_ = json.Unmarshal([]byte(fmt.Sprint(last.Content)), &env)
		res := env.Data
		text(fmt.Sprintf("Collaboration %s. %s %s", res.Status, res.Answer, res.Note))
		return
	}
	for key, args := range m.asks {
		if strings.Contains(fmt.Sprint(last.Content), key) {
			send(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call-" + key[:4], "type": "function",
				"function": map[string]any{"name": "ask_role", "arguments": args}}}}, nil)
			send(map[string]any{}, "tool_calls")
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
	}
	text(m.reply)
}

// TestUICollaboration (issue 24 item 4, in the real window): main asks the
// writer for help through the ask_role tool, three times. On the brief
// (the ACL lets the writer collaborate on it) the writer's instance
// accepts, answers in a turn of its own, and main's chat shows the answer;
// the Collaborations panel lists it as completed with the result. On
// main's own config the person decides: a prompt comes over the chat,
// Accept (by the keyboard) lets the writer answer; the third (the diary:
// global, both may read it, only main may collaborate on it) the person
// declines from the panel, where the open collaboration shows its task,
// state, the token's time left and its shared file in a read-only viewer.
// axe-core finds nothing serious; en and zh; desktop and phone width;
// screenshots collab-*.png.
func TestUICollaboration(t *testing.T) {
	writer := httptest.NewServer(&collabModel{reply: "Release line: Atrium 1.0 ships on Friday. (writer)"})
	t.Cleanup(writer.Close)
	main := httptest.NewServer(&collabModel{reply: "ok", asks: map[string]string{
		"brief": `{"action":"ask","role":"writer","task":"Write one line announcing the release.","context":["memory/global/brief.md"]}`,
		"plan":  `{"action":"ask","role":"writer","task":"Review my plan for Friday."}`,
		"diary": `{"action":"ask","role":"writer","task":"Proofread my diary.","context":["memory/global/diary.md"]}`,
	}})
	t.Cleanup(main.Close)
	ctx, _ := openUIWith(t, func(ws string) {
		for rel, body := range map[string]string{
			"memory/.acl": `version: "1.0"
rules:
  global/brief.md: {read: ["*"], write: [admin, main], collaborate: [main, writer]}
  global/**:       {read: ["*"], write: [admin, main], collaborate: [admin, main]}
  roles/main/**:   {read: [main, admin], write: [main, admin], collaborate: [main, admin]}
  roles/writer/**: {read: [writer, admin], write: [writer, admin], collaborate: [writer, admin]}
`,
			"memory/global/brief.md":      "# Brief\n\nAtrium 1.0 ships on Friday.\n",
			"memory/global/diary.md":      "# Diary\n\nDear diary, Friday is close.\n",
			"memory/roles/main/config.md": "---\ndescription: main\n---\nYou are main.\n",
			"memory/roles/writer/config.md": "---\ndescription: writer\nmodel: {provider: openai, baseUrl: \"" + writer.URL + "/v1\", model: scripted-writer}\n---\n" +
				"You are the writer.\n",
		} {
			p := filepath.Join(ws, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}, "OPENAI_BASE_URL="+main.URL+"/v1", "OPENAI_API_KEY=k", "OPENAI_MODEL=scripted")
	send := func(msg string) {
		t.Helper()
		typeInChat(t, ctx, msg+"\n")
	}
	bodyHas := func(what, s string, d time.Duration) {
		t.Helper()
		waitFor(t, ctx, what, `document.body.innerText.includes(`+jsString(s)+`)`, d)
	}

	// 1. The ACL lets the writer collaborate on the brief: no question.
	send("Ask the writer about the brief")
	bodyHas("the writer's answer in main's chat", "Collaboration completed. Release line: Atrium 1.0 ships on Friday. (writer)", 3*time.Minute)
	press(t, ctx, `[data-testid=open-collab]`)
	waitFor(t, ctx, "the completed collaboration in the panel", `[...document.querySelectorAll('[data-testid=collab-done]')].some(e => e.dataset.status === 'completed' && e.textContent.includes('Atrium 1.0 ships on Friday'))`, 30*time.Second)
	press(t, ctx, `[data-testid=close-collab]`)

	// 2. Main's own config: the person accepts, by the keyboard, from the prompt over the chat.
	send("Ask the writer to review my plan")
	waitFor(t, ctx, "the prompt over the chat", `(() => { const d = document.querySelector('[role=alertdialog][data-testid=collab-prompt]'); return !!d && d.getBoundingClientRect().height > 0 })()`, 2*time.Minute)
	if got := text(t, ctx, `[data-testid=collab-prompt] pre`); got != "Review my plan for Friday." {
		t.Errorf("the prompt shows %q", got)
	}
	axeCheck(t, ctx, "the collaboration prompt")
	shotViewport(t, ctx, "collab-prompt-en-desktop.png")
	js[bool](t, ctx, `(document.querySelector('[data-testid=collab-prompt-accept]').focus(), true)`)
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	bodyHas("the writer's answer after the person accepted", "Collaboration completed. Release line", 3*time.Minute)
	waitFor(t, ctx, "the prompt to close", `!document.querySelector('[data-testid=collab-prompt]')`, 30*time.Second)

	// 3. The person declines from the panel, in zh, after reading the shared file.
	send("Ask the writer to proofread my diary")
	waitFor(t, ctx, "the third prompt", `!!document.querySelector('[data-testid=collab-prompt]')`, 2*time.Minute)
	press(t, ctx, `[data-testid=collab-prompt-open]`)
	waitFor(t, ctx, "the open collaboration in the panel", `[...document.querySelectorAll('[data-testid=collab-open]')].some(e => e.dataset.status === 'pending' && e.textContent.includes('Proofread my diary.'))`, 30*time.Second)
	expiry := text(t, ctx, `[data-testid=collab-open] [data-testid=collab-expiry]`)
	if !strings.HasPrefix(expiry, "Token expires in ") || !strings.Contains(expiry, "min") {
		t.Errorf("expiry shown as %q", expiry)
	}
	waitFor(t, ctx, "the countdown to move", `document.querySelector('[data-testid=collab-open] [data-testid=collab-expiry]').textContent !== `+jsString(expiry), 20*time.Second)
	press(t, ctx, `[data-testid=collab-open] [data-testid=collab-details]`)
	press(t, ctx, `[data-testid=collab-file]`)
	waitFor(t, ctx, "the read-only viewer", `document.querySelector('[data-testid=collab-file-text]')?.readOnly && document.querySelector('[data-testid=collab-file-text]').value.includes('Dear diary, Friday is close.')`, 30*time.Second)
	axeCheck(t, ctx, "the Collaborations panel")
	shot(t, ctx, "collab-panel-en-desktop.png")
	js[bool](t, ctx, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = 'zh'; s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
	waitFor(t, ctx, "the panel in Chinese", `document.querySelector('[data-testid=collab-open] [data-testid=collab-state]').textContent === '等待你决定' && document.querySelector('[data-testid=collab-open] [data-testid=collab-expiry]').textContent.startsWith('令牌将在')`, 20*time.Second)
	axeCheck(t, ctx, "the Collaborations panel in zh")
	shot(t, ctx, "collab-panel-zh-desktop.png")
	js[bool](t, ctx, `(document.querySelector('[data-testid=collab-open] [data-testid=collab-decline]').focus(), true)`)
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the declined one in the history", `[...document.querySelectorAll('[data-testid=collab-done]')].some(e => e.dataset.status === 'declined' && e.textContent.includes('Proofread my diary.'))`, 30*time.Second)
	press(t, ctx, `[data-testid=close-collab]`)
	bodyHas("main told of the decline", "Collaboration declined.", 2*time.Minute)

	// Phone width: the panel over the chat, the prompt reachable.
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	press(t, ctx, `[data-testid=open-collab]`)
	waitFor(t, ctx, "the panel at phone width", `document.querySelectorAll('[data-testid=collab-done]').length === 3`, 30*time.Second)
	axeCheck(t, ctx, "the Collaborations panel at phone width")
	shotViewport(t, ctx, "collab-panel-zh-phone.png")
	js[bool](t, ctx, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = 'en'; s.dispatchEvent(new Event('change', {bubbles: true})); return true })()`)
	shotViewport(t, ctx, "collab-panel-en-phone.png")
}
