package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// toolModel is an OpenAI-compatible chat-completions server for one agent
// run: asked without a tool result in the conversation, it streams
// reasoning ("reasoning_content" deltas) and then a call of `tool` with
// `args`; asked with a tool result, it streams `reply`. It records the tool
// results it was sent.
type toolModel struct {
	tool, args, reasoning, reply string

	mu      sync.Mutex
	results []string // content of each tool message seen
}

func (m *toolModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readChatRequest(w, r)
	if !ok {
		return
	}
	var toolResult string
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			toolResult = fmt.Sprint(msg.Content)
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	if toolResult == "" {
		for _, word := range strings.SplitAfter(m.reasoning, " ") {
			send(map[string]any{"role": "assistant", "reasoning_content": word}, nil)
		}
		send(map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "call_e2e_1", "type": "function",
			"function": map[string]any{"name": m.tool, "arguments": m.args},
		}}}, nil)
		send(map[string]any{}, "tool_calls")
	} else {
		m.mu.Lock()
		m.results = append(m.results, toolResult)
		m.mu.Unlock()
		for _, word := range strings.SplitAfter(m.reply, " ") {
			send(map[string]any{"role": "assistant", "content": word}, nil)
		}
		send(map[string]any{}, "stop")
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func (m *toolModel) toolResults() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.results...)
}

// TestUIAgentRunPermission: a run whose model wants the network (web_fetch,
// level L3, SPEC §6) asks the person; the prompt names the profile, tool,
// level and arguments with a countdown; Deny closes it, the tool call shows
// as denied, the model gets the denial and answers; the run's reasoning is
// folded and opens on a click. Skipped while the gateway does not serve the
// agent loop's permission methods.
func TestUIAgentRunPermission(t *testing.T) {
	model := &toolModel{
		tool: "web_fetch", args: `{"url":"https://example.com/atrium-e2e"}`,
		reasoning: "The user asks about a web page, so I will fetch it. 我需要联网。",
		reply:     "I could not fetch the page: the request was denied.",
	}
	modelSrv := httptest.NewServer(model)
	t.Cleanup(modelSrv.Close)
	ctx, _ := openUIWith(t, nil, "OPENAI_BASE_URL="+modelSrv.URL+"/v1", "OPENAI_API_KEY=k", "OPENAI_MODEL=scripted")
	if js[bool](t, ctx, `document.querySelector('[data-testid=permission-support]')?.textContent.includes('unavailable')`) {
		t.Skip("e2e: this gateway does not serve agent.permissions (the agent loop is not in this build)")
	}

	do := boundedDo(t, ctx)
	do("send the question",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), "What does example.com say? 看看这个网页"),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`)))

	waitFor(t, ctx, "the permission prompt for web_fetch",
		`document.querySelector('[data-testid=permission-prompt] [data-testid=permission-tool]')?.textContent === 'web_fetch'`, 30*time.Second)
	prompt := js[string](t, ctx, `document.querySelector('[data-testid=permission-prompt]').innerText`)
	for _, want := range []string{"Main", "L3 network", "example.com/atrium-e2e", "Expires in"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt does not say %q:\n%s", want, prompt)
		}
	}
	waitFor(t, ctx, "main waiting for permission in the workbench",
		`document.querySelector('[data-testid=profile][data-profile=main]')?.dataset.activity === 'waiting'`, 10*time.Second)

	do("deny", chromedp.Click(chromedp.CSS(`[data-testid=permission-deny]`)))
	waitFor(t, ctx, "the prompt to close", `!document.querySelector('[data-testid=permission-prompt]')`, 10*time.Second)
	waitFor(t, ctx, "the final answer after the denial",
		`[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.textContent.includes('request was denied'))`, 30*time.Second)
	if st := js[string](t, ctx, `document.querySelector('[data-testid=chat-tool]')?.dataset.status ?? ''`); st != "denied" {
		t.Errorf("the web_fetch call shows status %q, want denied", st)
	}
	if len(model.toolResults()) == 0 {
		t.Error("the model never got the tool result of the denied call")
	}

	// The reasoning is folded; a click opens it.
	const reasoning = `document.querySelector('[data-testid=chat-message][data-role=assistant] [data-testid=chat-reasoning]')`
	waitFor(t, ctx, "a folded reasoning block", `!!`+reasoning+` && !`+reasoning+`.open`, 5*time.Second)
	do("expand the reasoning", chromedp.Click(chromedp.CSS(`[data-testid=chat-message][data-role=assistant] [data-testid=chat-reasoning] summary`)))
	waitFor(t, ctx, "the reasoning open with its text", reasoning+`.open && `+reasoning+`.textContent.includes('我需要联网')`, 5*time.Second)
}
