package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// antEvents writes Anthropic Messages stream events ("event: <type>\ndata:
// <json>\n\n"); each data's "type" names its event.
func antEvents(w http.ResponseWriter, data ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, d := range data {
		var ev struct{ Type string }
		json.Unmarshal([]byte(d), &ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, d)
	}
	w.(http.Flusher).Flush()
}

func antMessageStart(input int) string {
	return fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`, input)
}

func antMessageEnd(stop string, output int) []string {
	return []string{
		fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, output),
		`{"type":"message_stop"}`,
	}
}

func anthropicProvider(m *modelServer) *model.Anthropic {
	return model.NewAnthropic(model.AnthropicOptions{BaseURL: m.srv.URL, APIKey: "sk-ant-test", Model: "claude-test"})
}

// TestUsageAnthropicRun: a run through the Anthropic provider with a tool
// round records the tokens of both model calls with its message, in
// chat.final and in history.profile.
func TestUsageAnthropicRun(t *testing.T) {
	ms := newModelServer(t,
		func(w http.ResponseWriter, r *http.Request) {
			antEvents(w, append([]string{antMessageStart(1200),
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"memory_search","input":{}}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"QK-"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"7731 \\u53d1\\u5c04\"}"}}`,
				`{"type":"content_block_stop","index":0}`}, antMessageEnd("tool_use", 31)...)...)
		},
		func(w http.ResponseWriter, r *http.Request) {
			antEvents(w, append([]string{antMessageStart(1650),
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"QK-7731 是 Heron 项目的发射代码"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" (memory/global/decisions.md:3-7)."}}`,
				`{"type":"content_block_stop","index":0}`}, antMessageEnd("end_turn", 42)...)...)
		})
	e := newEnv(t, anthropicProvider(ms), &fakeSearcher{results: sampleHits})
	if p := e.svc.Profiles()[0]; p.Provider != "anthropic" || p.Model != "claude-test" {
		t.Fatalf("profile = %+v", p)
	}
	res := e.send(t, "s-ant", "QK-7731 是什么？")
	evs := e.rec.runEvents(t, res.RunID)
	last := checkRun(t, res, evs)
	final, ok := last.payload.(FinalEvent)
	if !ok {
		t.Fatalf("terminal = %+v", last)
	}
	want := history.Usage{PromptTokens: 1200 + 1650, CompletionTokens: 31 + 42}
	if final.Message.Usage == nil || *final.Message.Usage != want {
		t.Fatalf("final usage = %+v, want %+v", final.Message.Usage, want)
	}
	if final.Message.Content != "QK-7731 是 Heron 项目的发射代码 (memory/global/decisions.md:3-7)." {
		t.Fatalf("final = %q", final.Message.Content)
	}
	if q := e.mem.seen(); len(q) != 1 || q[0].Query != "QK-7731 发射" {
		t.Fatalf("searches = %+v", q)
	}
	// The payload as clients get it.
	b, _ := json.Marshal(final)
	if !strings.Contains(string(b), `"usage":{"promptTokens":2850,"completionTokens":73}`) {
		t.Fatalf("chat.final JSON = %s", b)
	}
	// history.profile returns the same.
	page, err := e.svc.History(context.Background(), "main", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var stored *history.Message
	for i := range page.Messages {
		if page.Messages[i].ID == res.MessageID {
			stored = &page.Messages[i]
		}
	}
	if stored == nil || stored.Usage == nil || *stored.Usage != want {
		t.Fatalf("stored = %+v", stored)
	}
	// The second request carried the tool_use and its tool_result.
	wire, _ := json.Marshal(ms.body(1)["messages"])
	if !strings.Contains(string(wire), `"tool_use_id":"toolu_1"`) || !strings.Contains(string(wire), `"input":{"query":"QK-7731 发射"}`) {
		t.Fatalf("round 2 messages = %s", wire)
	}
}

// TestUsageOfFailedRun: a run that fails mid-stream keeps the tokens the
// server had reported (Anthropic reports the prompt, and one output
// token, in message_start).
func TestUsageOfFailedRun(t *testing.T) {
	ms := newModelServer(t, func(w http.ResponseWriter, r *http.Request) {
		antEvents(w, antMessageStart(900),
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Half an"}}`,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	})
	e := newEnv(t, anthropicProvider(ms), nil)
	res := e.send(t, "s-fail", "hello")
	evs := e.rec.runEvents(t, res.RunID)
	if ev, ok := checkRun(t, res, evs).payload.(ErrorEvent); !ok || ev.Error.Code != CodeUnavailable || !strings.Contains(ev.Error.Message, "overloaded_error") {
		t.Fatalf("terminal = %+v", evs[len(evs)-1])
	}
	got, err := e.store.Get(context.Background(), res.MessageID)
	if err != nil || got.Content != "Half an" || got.Usage == nil || *got.Usage != (history.Usage{PromptTokens: 900, CompletionTokens: 1}) {
		t.Fatalf("stored = %+v, %v", got, err)
	}
}

// TestUsageOpenAIRun: the OpenAI-compatible path records usage too, and a
// server that reports none leaves it out.
func TestUsageOpenAIRun(t *testing.T) {
	ms := newModelServer(t,
		func(w http.ResponseWriter, r *http.Request) {
			modeltest.Stream(w, modeltest.Text("Hi"), modeltest.Chunk(`{}`, "stop"),
				`{"choices":[],"usage":{"prompt_tokens":321,"completion_tokens":2,"total_tokens":323}}`, "[DONE]")
		},
		answer("Nothing more."))
	e := newEnv(t, ms.provider(), nil)
	res := e.send(t, "s-oa", "hi")
	final := checkRun(t, res, e.rec.runEvents(t, res.RunID)).payload.(FinalEvent)
	if final.Message.Usage == nil || *final.Message.Usage != (history.Usage{PromptTokens: 321, CompletionTokens: 2}) {
		t.Fatalf("usage = %+v", final.Message.Usage)
	}
	res = e.send(t, "s-oa", "again")
	final = checkRun(t, res, e.rec.runEvents(t, res.RunID)).payload.(FinalEvent)
	if final.Message.Usage != nil {
		t.Fatalf("usage = %+v, want none", final.Message.Usage)
	}
	if b, _ := json.Marshal(final.Message); strings.Contains(string(b), `"usage"`) {
		t.Fatalf("JSON = %s", b)
	}
}
