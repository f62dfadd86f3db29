package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The helpers below write the Messages API event stream byte for byte as
// api.anthropic.com sends it: "event: <type>\ndata: <json>\n\n", the JSON's
// "type" equal to the event name.

// antEv writes one event and flushes.
func antEv(w http.ResponseWriter, typ, data string) {
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
	w.(http.Flusher).Flush()
}

func antStart(w http.ResponseWriter, inputTokens int) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	antEv(w, "message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`, inputTokens))
}

func antTextStart(w http.ResponseWriter, index int) {
	antEv(w, "content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, index))
}

func antText(w http.ResponseWriter, index int, s string) {
	b, _ := json.Marshal(s)
	antEv(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, index, b))
}

func antStop(w http.ResponseWriter, index int) {
	antEv(w, "content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
}

func antEnd(w http.ResponseWriter, stopReason string, outputTokens int) {
	antEv(w, "message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stopReason, outputTokens))
	antEv(w, "message_stop", `{"type":"message_stop"}`)
}

func antPing(w http.ResponseWriter) { antEv(w, "ping", `{"type": "ping"}`) }

// antScripted is a scripted Anthropic server (POST /v1/messages).
type antScripted struct{ *scripted }

func newAntScripted(t *testing.T, handlers ...http.HandlerFunc) antScripted {
	t.Helper()
	return antScripted{newScriptedAt(t, "/v1/messages", handlers...)}
}

func (s antScripted) client(opts AnthropicOptions) *Anthropic {
	if opts.BaseURL == "" {
		opts.BaseURL = s.URL
	}
	if opts.Model == "" {
		opts.Model = "claude-test"
	}
	return NewAnthropic(opts)
}

var userX = []Message{{Role: RoleUser, Content: "x"}}

func TestAnthropicStreamText(t *testing.T) {
	s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
		antStart(w, 25)
		antTextStart(w, 0)
		antPing(w)
		antText(w, 0, "Hello")
		antText(w, 0, "，世界！")
		antText(w, 0, " 北京今天晴。")
		antStop(w, 0)
		antEnd(w, "end_turn", 15)
	})
	c := s.client(AnthropicOptions{APIKey: "sk-ant-test", BaseURL: s.URL + "/v1/"})
	if c.Name() != "anthropic" || c.Model() != "claude-test" || c.BaseURL() != s.URL {
		t.Fatalf("Name/Model/BaseURL = %s/%s/%s", c.Name(), c.Model(), c.BaseURL())
	}
	ds, on := collectDeltas()
	resp, err := c.Stream(context.Background(), Request{Messages: []Message{
		{Role: RoleSystem, Content: "be nice"}, {Role: RoleUser, Content: "你好"}}}, on)
	if err != nil {
		t.Fatal(err)
	}
	want := []Delta{{Content: "Hello"}, {Content: "，世界！"}, {Content: " 北京今天晴。"}}
	if !reflect.DeepEqual(*ds, want) {
		t.Fatalf("deltas = %q", *ds)
	}
	if resp.Content != "Hello，世界！ 北京今天晴。" || resp.FinishReason != "stop" || resp.Usage != (Usage{PromptTokens: 25, CompletionTokens: 15}) || resp.ToolCalls != nil {
		t.Fatalf("resp = %+v", resp)
	}
	req := s.request(0)
	if h := req.Header; h.Get("x-api-key") != "sk-ant-test" || h.Get("anthropic-version") != "2023-06-01" ||
		h.Get("Accept") != "text/event-stream" || h.Get("Content-Type") != "application/json" || req.Auth != "" {
		t.Fatalf("headers = %v", h)
	}
	wantBody := `{"model":"claude-test","max_tokens":4096,"system":"be nice",
		"messages":[{"role":"user","content":[{"type":"text","text":"你好"}]}],"stream":true}`
	assertJSON(t, req.Raw, wantBody)
}

// assertJSON compares two JSON texts by value.
func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		gb, _ := json.MarshalIndent(g, "", " ")
		wb, _ := json.MarshalIndent(w, "", " ")
		t.Fatalf("JSON differs\n got: %s\nwant: %s", gb, wb)
	}
}

func TestAnthropicRequestMapping(t *testing.T) {
	s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
		antStart(w, 1)
		antEnd(w, "end_turn", 1)
	})
	c := s.client(AnthropicOptions{MaxTokens: 1000})
	msgs := []Message{
		{Role: RoleAssistant, Content: "Earlier answer."}, // history cut before its question
		{Role: RoleSystem, Content: "You are Main."},
		{Role: RoleSystem, Content: "Current date: Monday 2026-03-02."},
		{Role: RoleUser, Content: "QK-7731 是什么？"},
		{Role: RoleUser, Content: "And ZX-9?"}, // merged into the previous user turn
		{Role: RoleAssistant, Content: "", ToolCalls: []ToolCall{
			{ID: "toolu_a", Name: "memory_search", Arguments: json.RawMessage(`{"query":"QK-7731"}`)},
			{ID: "toolu_b", Name: "memory_search", Arguments: json.RawMessage(`{"query": "ZX-9`)}, // broken: sent as {}
		}},
		{Role: RoleTool, ToolCallID: "toolu_a", Name: "memory_search", Content: `{"results":[{"path":"a.md"}]}`},
		{Role: RoleTool, ToolCallID: "toolu_b", Name: "memory_search", Content: `{"error":"invalid arguments"}`},
		{Role: RoleAssistant, Content: "Let me look again.", ToolCalls: []ToolCall{
			{ID: "toolu_c", Name: "now"}, // no arguments
		}},
		{Role: RoleUser, Content: "hurry"}, // written before the tool result: tool_result goes first
		{Role: RoleTool, ToolCallID: "toolu_c", Name: "now", Content: "12:00"},
		{Role: RoleUser, Content: "   "}, // empty text blocks are refused by the API: dropped
	}
	tools := []Tool{
		{Name: "memory_search", Description: "search memory", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
		{Name: "now"},
	}
	if _, err := c.Stream(context.Background(), Request{Model: "claude-override", Messages: msgs, Tools: tools}, nil); err != nil {
		t.Fatal(err)
	}
	assertJSON(t, s.request(0).Raw, `{
		"model": "claude-override", "max_tokens": 1000, "stream": true,
		"system": "You are Main.\n\nCurrent date: Monday 2026-03-02.",
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "(continued)"}]},
			{"role": "assistant", "content": [{"type": "text", "text": "Earlier answer."}]},
			{"role": "user", "content": [{"type": "text", "text": "QK-7731 是什么？"}, {"type": "text", "text": "And ZX-9?"}]},
			{"role": "assistant", "content": [
				{"type": "tool_use", "id": "toolu_a", "name": "memory_search", "input": {"query": "QK-7731"}},
				{"type": "tool_use", "id": "toolu_b", "name": "memory_search", "input": {}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_a", "content": "{\"results\":[{\"path\":\"a.md\"}]}"},
				{"type": "tool_result", "tool_use_id": "toolu_b", "content": "{\"error\":\"invalid arguments\"}"}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Let me look again."},
				{"type": "tool_use", "id": "toolu_c", "name": "now", "input": {}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_c", "content": "12:00"},
				{"type": "text", "text": "hurry"}]}
		],
		"tools": [
			{"name": "memory_search", "description": "search memory", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
			{"name": "now", "input_schema": {"type": "object", "properties": {}}}
		]}`)
}

func TestAnthropicThinking(t *testing.T) {
	s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
		antStart(w, 40)
		antEv(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
		antEv(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The person asks about 27 * 453. "}}`)
		antEv(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"先算 27×450=12150，再加 81。"}}`)
		antEv(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."}}`)
		antStop(w, 0)
		antTextStart(w, 1)
		antText(w, 1, "27 × 453 = 12231")
		antStop(w, 1)
		antEnd(w, "end_turn", 60)
	})
	ds, on := collectDeltas()
	resp, err := s.client(AnthropicOptions{}).Stream(context.Background(), Request{Messages: userX}, on)
	if err != nil {
		t.Fatal(err)
	}
	want := []Delta{{Reasoning: "The person asks about 27 * 453. "}, {Reasoning: "先算 27×450=12150，再加 81。"}, {Content: "27 × 453 = 12231"}}
	if !reflect.DeepEqual(*ds, want) {
		t.Fatalf("deltas = %q", *ds)
	}
	if resp.Content != "27 × 453 = 12231" || resp.Usage != (Usage{PromptTokens: 40, CompletionTokens: 60}) {
		t.Fatalf("resp = %+v", resp)
	}
}

// splitEvery cuts s into pieces of n bytes (the server splits JSON text
// anywhere, even inside an escape sequence; never inside a UTF-8 character,
// since each piece is itself a JSON string).
func splitEvery(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

func TestAnthropicToolUse(t *testing.T) {
	// The first call's input escapes its Chinese ("北京" as \u5317\u4eac),
	// cut inside the escapes; the second one's carries raw Chinese, cut one
	// character at a time.
	input1 := `{"query": "\u5317\u4eac weather", "maxResults": 3}`
	pieces1 := []string{`{"que`, `ry": "\u53`, `17\u4`, `eac wea`, `ther", "maxRes`, `ults": 3}`}
	if strings.Join(pieces1, "") != input1 {
		t.Fatal("pieces1 do not add up")
	}
	input2 := `{"query":"上海 天气 QK-7731"}`
	pieces2 := splitEvery(input2, 1)

	s := newAntScripted(t,
		func(w http.ResponseWriter, r *http.Request) {
			antStart(w, 472)
			antTextStart(w, 0)
			antText(w, 0, "Let me search ")
			antText(w, 0, "memory.")
			antStop(w, 0)
			antEv(w, "content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"memory_search","input":{}}}`)
			antEv(w, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`)
			for _, p := range pieces1 {
				b, _ := json.Marshal(p)
				antEv(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":%s}}`, b))
			}
			antStop(w, 1)
			antPing(w)
			antEv(w, "content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"memory_search","input":{}}}`)
			for _, p := range pieces2 {
				b, _ := json.Marshal(p)
				antEv(w, "content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":%s}}`, b))
			}
			antStop(w, 2)
			antEnd(w, "tool_use", 89)
		},
		func(w http.ResponseWriter, r *http.Request) {
			antStart(w, 600)
			antTextStart(w, 0)
			antText(w, 0, "北京晴，上海雨。")
			antStop(w, 0)
			antEnd(w, "end_turn", 12)
		})
	c := s.client(AnthropicOptions{})
	tool := Tool{Name: "memory_search", Description: "search memory",
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}
	msgs := []Message{{Role: RoleUser, Content: "北京和上海的天气？"}}
	ds, on := collectDeltas()
	resp, err := c.Stream(context.Background(), Request{Messages: msgs, Tools: []Tool{tool}}, on)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Let me search memory." || len(*ds) != 2 || resp.FinishReason != "tool_calls" || resp.Usage != (Usage{PromptTokens: 472, CompletionTokens: 89}) {
		t.Fatalf("resp = %+v, deltas %q", resp, *ds)
	}
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v", resp.ToolCalls)
	}
	c0, c1 := resp.ToolCalls[0], resp.ToolCalls[1]
	if c0.ID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" || c0.Name != "memory_search" || string(c0.Arguments) != input1 {
		t.Fatalf("call 0 = %+v (%s)", c0, c0.Arguments)
	}
	if c1.ID != "toolu_02" || string(c1.Arguments) != input2 {
		t.Fatalf("call 1 = %+v (%s)", c1, c1.Arguments)
	}
	var a0, a1 struct {
		Query      string `json:"query"`
		MaxResults int    `json:"maxResults"`
	}
	if err := json.Unmarshal(c0.Arguments, &a0); err != nil || a0.Query != "北京 weather" || a0.MaxResults != 3 {
		t.Fatalf("call 0 arguments = %+v, %v", a0, err)
	}
	if err := json.Unmarshal(c1.Arguments, &a1); err != nil || a1.Query != "上海 天气 QK-7731" {
		t.Fatalf("call 1 arguments = %+v, %v", a1, err)
	}

	// Round 2 sends the calls and their results back.
	msgs = append(msgs, Message{Role: RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls},
		Message{Role: RoleTool, ToolCallID: c0.ID, Name: c0.Name, Content: `{"results":[]}`},
		Message{Role: RoleTool, ToolCallID: c1.ID, Name: c1.Name, Content: `{"results":[{"snippet":"上海：雨"}]}`})
	resp, err = c.Stream(context.Background(), Request{Messages: msgs, Tools: []Tool{tool}}, on)
	if err != nil || resp.Content != "北京晴，上海雨。" || resp.FinishReason != "stop" || resp.ToolCalls != nil {
		t.Fatalf("round 2 = %+v, %v", resp, err)
	}
	body := s.request(1).Body
	wire, _ := json.Marshal(body["messages"])
	assertJSON(t, wire, `[
		{"role":"user","content":[{"type":"text","text":"北京和上海的天气？"}]},
		{"role":"assistant","content":[{"type":"text","text":"Let me search memory."},
			{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"memory_search","input":{"query":"北京 weather","maxResults":3}},
			{"type":"tool_use","id":"toolu_02","name":"memory_search","input":{"query":"上海 天气 QK-7731"}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","content":"{\"results\":[]}"},
			{"type":"tool_result","tool_use_id":"toolu_02","content":"{\"results\":[{\"snippet\":\"上海：雨\"}]}"}]}]`)
}

func TestAnthropicToolWithoutInput(t *testing.T) {
	s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
		antStart(w, 10)
		antEv(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_n","name":"now","input":{}}}`)
		antStop(w, 0)
		antEnd(w, "tool_use", 5)
	})
	resp, err := s.client(AnthropicOptions{}).Stream(context.Background(), Request{Messages: userX, Tools: []Tool{{Name: "now"}}}, nil)
	if err != nil || len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Arguments) != "{}" || resp.ToolCalls[0].Name != "now" {
		t.Fatalf("resp = %+v, %v", resp, err)
	}
}

func TestAnthropicStopReasons(t *testing.T) {
	for stop, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
		"refusal": "content_filter", "model_context_window_exceeded": "length", "pause_turn": "pause_turn",
	} {
		t.Run(stop, func(t *testing.T) {
			s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
				antStart(w, 3)
				antTextStart(w, 0)
				antText(w, 0, "partial answer")
				antStop(w, 0)
				antEnd(w, stop, 7)
			})
			resp, err := s.client(AnthropicOptions{}).Stream(context.Background(), Request{Messages: userX}, nil)
			if err != nil || resp.FinishReason != want || resp.Content != "partial answer" || resp.Usage.CompletionTokens != 7 {
				t.Fatalf("resp = %+v, %v; want finish %q", resp, err, want)
			}
		})
	}
}

// antErrorBody is an Anthropic HTTP error body.
func antErrorBody(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_011CSHoEeqs5C35K2UUqR7Fy")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, typ, msg)
}

func TestAnthropicErrors(t *testing.T) {
	hijack := func(w http.ResponseWriter) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err == nil {
			buf.Flush()
			conn.Close()
		}
	}
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		kind       error
		contains   []string
		partial    string
		prompt     int
		retryAfter time.Duration
	}{
		{
			name: "http 401 bad key",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antErrorBody(w, 401, "authentication_error", "invalid x-api-key")
			},
			kind:     ErrRejected,
			contains: []string{"HTTP 401 Unauthorized", "invalid x-api-key"},
		},
		{
			name: "http 403",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antErrorBody(w, 403, "permission_error", "Your API key does not have permission to use the specified resource.")
			},
			kind: ErrRejected, contains: []string{"HTTP 403", "does not have permission"},
		},
		{
			name: "http 400 invalid request",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antErrorBody(w, 400, "invalid_request_error", "messages: text content blocks must be non-empty")
			},
			kind: ErrRejected, contains: []string{"HTTP 400", "text content blocks must be non-empty"},
		},
		{
			name: "http 404 unknown model",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antErrorBody(w, 404, "not_found_error", "model: claude-9")
			},
			kind:     ErrRejected,
			contains: []string{"HTTP 404", "model: claude-9"},
		},
		{
			name: "http 429 with retry-after",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("retry-after", "20")
				w.Header().Set("anthropic-ratelimit-requests-remaining", "0")
				antErrorBody(w, 429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")
			},
			kind: ErrUnavailable, contains: []string{"HTTP 429 Too Many Requests", "per-minute rate limit", "(retry after 20s)"},
			retryAfter: 20 * time.Second,
		},
		{
			name:     "http 529 overloaded",
			handler:  func(w http.ResponseWriter, r *http.Request) { antErrorBody(w, 529, "overloaded_error", "Overloaded") },
			kind:     ErrUnavailable,
			contains: []string{"HTTP 529 Overloaded: Overloaded"},
		},
		{
			name: "http 500",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antErrorBody(w, 500, "api_error", "Internal server error")
			},
			kind:     ErrUnavailable,
			contains: []string{"HTTP 500", "Internal server error"},
		},
		{
			name: "overloaded error event mid-stream",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antStart(w, 11)
				antTextStart(w, 0)
				antText(w, 0, "半个答")
				antEv(w, "error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`)
			},
			kind: ErrUnavailable, contains: []string{"reported an error in the middle of the answer: overloaded_error: Overloaded"},
			partial: "半个答", prompt: 11,
		},
		{
			name: "request error event mid-stream",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antStart(w, 11)
				antEv(w, "error", `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`)
			},
			kind: ErrRejected, contains: []string{"invalid_request_error: prompt is too long"}, prompt: 11,
		},
		{
			name: "unknown error event type",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antStart(w, 11)
				antEv(w, "error", `{"type":"error","error":{"type":"mystery_error","message":"?"}}`)
			},
			kind: ErrBadResponse, contains: []string{"mystery_error"}, prompt: 11,
		},
		{
			name: "connection cut before message_stop",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antStart(w, 8)
				antTextStart(w, 0)
				antText(w, 0, "The answer is")
				hijack(w)
			},
			kind: ErrIncomplete, contains: []string{"stopped before it was complete"}, partial: "The answer is", prompt: 8,
		},
		{
			name: "clean end after message_delta without message_stop",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antStart(w, 8)
				antTextStart(w, 0)
				antText(w, 0, "Almost")
				antEv(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`)
			},
			kind: ErrIncomplete, contains: []string{"stream cut before message_stop"}, partial: "Almost", prompt: 8,
		},
		{
			name: "event that is not JSON",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antStart(w, 8)
				antEv(w, "content_block_delta", `{"type":"content_block_delta",`)
			},
			kind: ErrBadResponse, contains: []string{"not valid JSON"}, prompt: 8,
		},
		{
			name: "tool input for a text block",
			handler: func(w http.ResponseWriter, r *http.Request) {
				antStart(w, 8)
				antTextStart(w, 0)
				antEv(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`)
			},
			kind: ErrBadResponse, contains: []string{"not a tool_use block"}, prompt: 8,
		},
		{
			name: "html instead of a stream",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				io.WriteString(w, "<html><body>proxy login</body></html>")
			},
			kind: ErrBadResponse, contains: []string{"did not answer with an event stream", "proxy login"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newAntScripted(t, tc.handler)
			resp, err := s.client(AnthropicOptions{}).Stream(context.Background(), Request{Messages: userX}, nil)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want %v", err, tc.kind)
			}
			for _, want := range tc.contains {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if !strings.Contains(err.Error(), s.URL) {
				t.Errorf("error %q does not name the server %s", err, s.URL)
			}
			if resp.Content != tc.partial || resp.Usage.PromptTokens != tc.prompt {
				t.Errorf("partial = %+v, want content %q and %d prompt tokens", resp, tc.partial, tc.prompt)
			}
			var me *Error
			if !errors.As(err, &me) || me.RetryAfter != tc.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", me, tc.retryAfter)
			}
		})
	}
}

// antBlocking sends an answer's start and then waits until the client goes away.
func antBlocking(t *testing.T, first string) antScripted {
	release := make(chan struct{})
	s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
		antStart(w, 9)
		antTextStart(w, 0)
		antText(w, 0, first)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	return s
}

func TestAnthropicIdleTimeout(t *testing.T) {
	s := antBlocking(t, "第一句。")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang fails, not stalls
	defer cancel()
	t0 := time.Now()
	resp, err := s.client(AnthropicOptions{IdleTimeout: 80 * time.Millisecond}).Stream(ctx, Request{Messages: userX}, nil)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "went silent for 80ms") {
		t.Fatalf("err = %v", err)
	}
	if resp.Content != "第一句。" || resp.Usage.PromptTokens != 9 {
		t.Fatalf("partial = %+v", resp)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
}

func TestAnthropicHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	_, err := s.client(AnthropicOptions{HeaderTimeout: 50 * time.Millisecond}).Stream(context.Background(), Request{Messages: userX}, nil)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "sent no response within 50ms") {
		t.Fatalf("err = %v", err)
	}
}

// Pings count as data: a slow answer with pings in between is not idle.
func TestAnthropicPingsKeepAlive(t *testing.T) {
	// Pings for half as long again as the idle timeout, one every 1/50 of
	// it: only a pause of the whole process longer than the timeout (a
	// hang, not a slow machine) could fail this.
	const idle = time.Second
	s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
		antStart(w, 2)
		for start := time.Now(); time.Since(start) < idle*3/2; {
			time.Sleep(idle / 50)
			antPing(w)
		}
		antTextStart(w, 0)
		antText(w, 0, "late")
		antStop(w, 0)
		antEnd(w, "end_turn", 1)
	})
	resp, err := s.client(AnthropicOptions{IdleTimeout: idle}).Stream(context.Background(), Request{Messages: userX}, nil)
	if err != nil || resp.Content != "late" {
		t.Fatalf("resp = %+v, %v", resp, err)
	}
}

func TestAnthropicCancelMidStream(t *testing.T) {
	s := antBlocking(t, "slow ")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := s.client(AnthropicOptions{}).Stream(ctx, Request{Messages: userX}, func(d Delta) {
		if d.Content == "slow " {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrIncomplete) {
		t.Fatalf("err = %v, want context.Canceled only", err)
	}
	if resp.Content != "slow " || resp.Usage.PromptTokens != 9 {
		t.Fatalf("partial = %+v", resp)
	}
}

func TestAnthropicConnectionRefused(t *testing.T) {
	addr := closedAddr(t)
	_, err := NewAnthropic(AnthropicOptions{BaseURL: "http://" + addr, Model: "m"}).Stream(context.Background(), Request{Messages: userX}, nil)
	if !errors.Is(err, ErrUnavailable) || err.Error() != "model server at http://"+addr+" is unreachable: connection refused" {
		t.Fatalf("err = %v", err)
	}
}

// A multi-megabyte answer: many deltas, one of them a single 1 MB line.
func TestAnthropicLargeAnswer(t *testing.T) {
	piece := strings.Repeat("长文本 long text。", 40) // 40 × 23 bytes
	const n = 3000                                // ≈ 2.8 MB
	big := strings.Repeat("大", 1<<20/3)           // one 1 MB delta
	s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
		antStart(w, 5)
		antTextStart(w, 0)
		for i := 0; i < n; i++ {
			antText(w, 0, piece)
		}
		antText(w, 0, big)
		antStop(w, 0)
		antEnd(w, "end_turn", 900000)
	})
	count := 0
	resp, err := s.client(AnthropicOptions{}).Stream(context.Background(), Request{Messages: userX}, func(d Delta) { count++ })
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat(piece, n) + big
	if len(resp.Content) != len(want) || resp.Content != want || count != n+1 || resp.Usage.CompletionTokens != 900000 {
		t.Fatalf("got %d bytes in %d deltas, want %d bytes in %d", len(resp.Content), count, len(want), n+1)
	}
	if len(want) < 3<<20 {
		t.Fatalf("test answer is only %d bytes", len(want))
	}
}

func TestAnthropicLineTooLong(t *testing.T) {
	s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {
		antStart(w, 5)
		antTextStart(w, 0)
		antText(w, 0, "ok")
		antText(w, 0, strings.Repeat("x", 2048))
	})
	resp, err := s.client(AnthropicOptions{MaxLineBytes: 1024}).Stream(context.Background(), Request{Messages: userX}, nil)
	if !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), "longer than 1024 bytes") || resp.Content != "ok" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
}
