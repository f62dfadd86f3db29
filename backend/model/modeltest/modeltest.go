// Package modeltest is the server side of the OpenAI-compatible chat
// completions API (POST /v1/chat/completions, streamed as server-sent
// events) for tests of the code that talks to a model: the chunks a
// server streams (Chunk, Text, Done), writing them (Start, Stream), the
// scripted answers of an agent loop (Turn: tool calls, reasoning, text),
// and Server, a real HTTP server on 127.0.0.1 that answers its i-th
// request with its i-th handler and records every request. It imports no
// Atrium package, so that package model's own tests may use it too. It is
// imported by tests only.
//
//	srv := modeltest.New(t, modeltest.Options{}, modeltest.Turn{Text: "hello"}.Handler())
//	client := model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.BaseURL(), Model: "m"})
package modeltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"unicode/utf8"
)

// Done is the payload of the event that ends a complete stream.
const Done = "[DONE]"

// ChatPath is the path of the chat completions endpoint under a base URL
// ending in /v1.
const ChatPath = "/v1/chat/completions"

// Chunk returns the JSON text of one chat.completion.chunk with one choice:
// delta is the choice's delta as JSON text (`{"content":"hi"}`, `{}`), and
// finish its finish_reason ("" for null; "stop", "tool_calls", "length").
func Chunk(delta, finish string) string {
	fr := "null"
	if finish != "" {
		fr = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"scripted","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, delta, fr)
}

// Text returns a chunk whose delta carries content s.
func Text(s string) string { return Chunk(fmt.Sprintf(`{"content":%q}`, s), "") }

// Start sends the headers of an event stream (200, text/event-stream)
// before any event, as a server that is slow to answer does.
func Start(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
}

// Stream writes each payload as one event ("data: <payload>\n\n") and
// flushes; the Content-Type is set to text/event-stream unless the
// handler set one. It reports whether every write succeeded (false: the
// client went away).
func Stream(w http.ResponseWriter, payloads ...string) bool {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	for _, p := range payloads {
		if _, err := fmt.Fprintf(w, "data: %s\n\n", p); err != nil {
			return false
		}
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

// Turn is one scripted model answer: tool calls, or reasoning and text.
type Turn struct {
	// Calls are tool calls as (function name, arguments JSON text). Each
	// is streamed as servers stream them: its id and name first, then
	// its arguments in two pieces; the turn ends with finish_reason
	// "tool_calls". Call k of the turn answering request i has the id
	// "call_<i>_<k>".
	Calls [][2]string
	// Reasoning, if set, is streamed first as reasoning_content.
	Reasoning string
	// Text is the answer when there are no Calls, streamed in two deltas
	// (the first with role "assistant"); the turn ends with "stop".
	Text string
	// Hook, if set, runs before the turn is streamed.
	Hook func()
}

// Events returns the turn as the events of the answer to request i (0
// based), ending with Done.
func (tn Turn) Events(i int) []string {
	delta := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("modeltest: marshal a delta: %v", err)) // maps of strings always marshal
		}
		return string(b)
	}
	var ev []string
	if tn.Reasoning != "" {
		ev = append(ev, Chunk(delta(map[string]any{"reasoning_content": tn.Reasoning}), ""))
	}
	if len(tn.Calls) > 0 {
		for k, c := range tn.Calls {
			ev = append(ev, Chunk(delta(map[string]any{"tool_calls": []any{map[string]any{"index": k, "id": fmt.Sprintf("call_%d_%d", i, k), "type": "function",
				"function": map[string]any{"name": c[0], "arguments": ""}}}}), ""))
			a, b := halves(c[1])
			for _, part := range []string{a, b} {
				ev = append(ev, Chunk(delta(map[string]any{"tool_calls": []any{map[string]any{"index": k, "function": map[string]any{"arguments": part}}}}), ""))
			}
		}
		return append(ev, Chunk(`{}`, "tool_calls"), Done)
	}
	a, b := halves(tn.Text)
	return append(ev,
		Chunk(delta(map[string]any{"role": "assistant", "content": a}), ""),
		Chunk(delta(map[string]any{"content": b}), ""),
		Chunk(`{}`, "stop"), Done)
}

// halves splits s in two at the rune boundary nearest its middle byte, so
// that each half is valid UTF-8 (Chinese text streams in whole runes).
func halves(s string) (string, string) {
	h := len(s) / 2
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	return s[:h], s[h:]
}

// Turns returns one handler per turn, for New: handler i runs turn i's
// Hook and streams turn i's Events(i).
func Turns(turns ...Turn) []http.HandlerFunc {
	hs := make([]http.HandlerFunc, len(turns))
	for i, tn := range turns {
		hs[i] = func(w http.ResponseWriter, _ *http.Request) {
			if tn.Hook != nil {
				tn.Hook()
			}
			Stream(w, tn.Events(i)...)
		}
	}
	return hs
}

// Request is one request a Server received.
type Request struct {
	Auth   string         // the Authorization header
	Header http.Header    // all headers
	Raw    []byte         // the body as sent
	Body   map[string]any // the body as JSON
}

// Messages returns the body's messages (nil when it has none).
func (r Request) Messages() []map[string]any {
	var out []map[string]any
	ms, _ := r.Body["messages"].([]any)
	for _, m := range ms {
		if mm, ok := m.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// ToolMessages returns the contents of the body's tool messages (role
// "tool": what the client sent back for each tool call) by tool_call_id.
func (r Request) ToolMessages() map[string]string {
	out := map[string]string{}
	for _, m := range r.Messages() {
		if m["role"] != "tool" {
			continue
		}
		id, _ := m["tool_call_id"].(string)
		out[id], _ = m["content"].(string)
	}
	return out
}

// Options configure a Server.
type Options struct {
	// Path is the one path answered (POST only; other requests get 404).
	// Default ChatPath.
	Path string
	// RepeatLast: requests past the handlers are answered by the last
	// one. Default false: they get HTTP 500 "unexpected request".
	RepeatLast bool
}

// Server is a scripted model server: request i (counted from 0, in the
// order they arrive) is answered by handlers[i]. A body that is not JSON
// gets HTTP 400 and is not counted. Its methods are safe for concurrent
// use.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Request
}

// New starts a Server on 127.0.0.1, closed when t ends.
func New(t testing.TB, o Options, handlers ...http.HandlerFunc) *Server {
	t.Helper()
	if o.Path == "" {
		o.Path = ChatPath
	}
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != o.Path || r.Method != http.MethodPost {
			http.Error(w, "wrong path "+r.URL.Path, http.StatusNotFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		i := len(s.requests)
		s.requests = append(s.requests, Request{Auth: r.Header.Get("Authorization"), Header: r.Header.Clone(), Raw: b, Body: body})
		s.mu.Unlock()
		switch {
		case i < len(handlers):
			handlers[i](w, r)
		case o.RepeatLast && len(handlers) > 0:
			handlers[len(handlers)-1](w, r)
		default:
			http.Error(w, "unexpected request", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// BaseURL is the server's OpenAI base URL (ending in /v1), for a client's
// options.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Request returns request i; it panics when fewer arrived (a test bug).
func (s *Server) Request(i int) Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[i]
}

// Body returns the body of request i as sent, or "" when fewer than i+1
// requests arrived.
func (s *Server) Body(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.requests) {
		return ""
	}
	return string(s.requests[i].Raw)
}

// Count returns how many requests arrived.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// AnthropicPath is the path of the Anthropic Messages endpoint under the
// server's root (an Anthropic client's base URL is Server.URL).
const AnthropicPath = "/v1/messages"

// AnthropicEvents returns the turn as the Messages API streams it (event
// name and JSON data of each event, in order): message_start, for Calls
// one tool_use block each (its input in two input_json_delta pieces) and
// stop_reason "tool_use", else a thinking block for Reasoning and a text
// block of Text in two deltas and "end_turn"; then message_stop. Call k of
// the turn answering request i has the id "toolu_<i>_<k>".
func (tn Turn) AnthropicEvents(i int) [][2]string {
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("modeltest: marshal an event: %v", err)) // maps of strings always marshal
		}
		return string(b)
	}
	ev := [][2]string{{"message_start", enc(map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_%d", i), "type": "message", "role": "assistant", "content": []any{}, "model": "scripted",
		"stop_reason": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})}}
	block := func(idx int, start map[string]any, deltas ...map[string]any) {
		ev = append(ev, [2]string{"content_block_start", enc(map[string]any{"type": "content_block_start", "index": idx, "content_block": start})})
		for _, d := range deltas {
			ev = append(ev, [2]string{"content_block_delta", enc(map[string]any{"type": "content_block_delta", "index": idx, "delta": d})})
		}
		ev = append(ev, [2]string{"content_block_stop", enc(map[string]any{"type": "content_block_stop", "index": idx})})
	}
	stop := "end_turn"
	if len(tn.Calls) > 0 {
		stop = "tool_use"
		for k, c := range tn.Calls {
			a, b := halves(c[1])
			block(k, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", i, k), "name": c[0], "input": map[string]any{}},
				map[string]any{"type": "input_json_delta", "partial_json": a}, map[string]any{"type": "input_json_delta", "partial_json": b})
		}
	} else {
		idx := 0
		if tn.Reasoning != "" {
			block(idx, map[string]any{"type": "thinking", "thinking": ""}, map[string]any{"type": "thinking_delta", "thinking": tn.Reasoning})
			idx++
		}
		a, b := halves(tn.Text)
		block(idx, map[string]any{"type": "text", "text": ""},
			map[string]any{"type": "text_delta", "text": a}, map[string]any{"type": "text_delta", "text": b})
	}
	return append(ev,
		[2]string{"message_delta", enc(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]any{"output_tokens": 5}})},
		[2]string{"message_stop", `{"type":"message_stop"}`})
}

// AnthropicTurns returns one handler per turn, for New with Options.Path
// AnthropicPath: handler i runs turn i's Hook and streams turn i's
// AnthropicEvents(i) ("event: <name>\ndata: <json>\n\n" each).
func AnthropicTurns(turns ...Turn) []http.HandlerFunc {
	hs := make([]http.HandlerFunc, len(turns))
	for i, tn := range turns {
		hs[i] = func(w http.ResponseWriter, _ *http.Request) {
			if tn.Hook != nil {
				tn.Hook()
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for _, e := range tn.AnthropicEvents(i) {
				if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1]); err != nil {
					return
				}
			}
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}
	return hs
}
