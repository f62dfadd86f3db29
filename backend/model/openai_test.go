package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// scripted is an OpenAI-compatible server (modeltest.Server): the i-th
// request is served with handlers[i], and every request is recorded.
type scripted struct{ *modeltest.Server }

// newScripted scripts an OpenAI-compatible server (POST /v1/chat/completions).
func newScripted(t *testing.T, handlers ...http.HandlerFunc) *scripted {
	t.Helper()
	return newScriptedAt(t, modeltest.ChatPath, handlers...)
}

// newScriptedAt scripts the answers to POST path; other requests get 404.
func newScriptedAt(t *testing.T, path string, handlers ...http.HandlerFunc) *scripted {
	t.Helper()
	return &scripted{modeltest.New(t, modeltest.Options{Path: path}, handlers...)}
}

func (s *scripted) client(opts OpenAIOptions) *OpenAI {
	opts.BaseURL = s.BaseURL()
	if opts.Model == "" {
		opts.Model = "test-model"
	}
	return NewOpenAI(opts)
}

func (s *scripted) request(i int) modeltest.Request { return s.Request(i) }

func collectDeltas() (*[]Delta, func(Delta)) {
	var ds []Delta
	return &ds, func(d Delta) { ds = append(ds, d) }
}

func TestStreamText(t *testing.T) {
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		modeltest.Start(w)
		w.Write([]byte(": keep-alive comment\n\n"))
		modeltest.Stream(w, modeltest.Chunk(`{"role":"assistant","content":""}`, ""), modeltest.Text("Hel"), modeltest.Text("lo, "))
		modeltest.Stream(w, modeltest.Text("world"), modeltest.Chunk(`{}`, "stop"))
		modeltest.Stream(w, `{"id":"x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`, "[DONE]")
	})
	c := s.client(OpenAIOptions{APIKey: "sk-test", Name: "ollama"})
	if c.Name() != "ollama" || c.Model() != "test-model" {
		t.Fatalf("Name/Model = %s/%s", c.Name(), c.Model())
	}
	ds, on := collectDeltas()
	resp, err := c.Stream(context.Background(), Request{Messages: []Message{
		{Role: RoleSystem, Content: "be nice"}, {Role: RoleUser, Content: "hi"}}}, on)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range *ds {
		got = append(got, d.Content)
	}
	if strings.Join(got, "|") != "Hel|lo, |world" {
		t.Fatalf("deltas = %q", got)
	}
	if resp.Content != "Hello, world" || resp.FinishReason != "stop" || resp.Usage != (Usage{PromptTokens: 12, CompletionTokens: 3}) {
		t.Fatalf("resp = %+v", resp)
	}
	req := s.request(0)
	if req.Auth != "Bearer sk-test" {
		t.Fatalf("auth = %q", req.Auth)
	}
	if req.Body["model"] != "test-model" || req.Body["stream"] != true {
		t.Fatalf("body = %v", req.Body)
	}
	if so, _ := req.Body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Fatalf("stream_options = %v", req.Body["stream_options"])
	}
	if _, ok := req.Body["tools"]; ok {
		t.Fatal("tools sent without tools")
	}
	msgs := req.Body["messages"].([]any)
	if len(msgs) != 2 || msgs[1].(map[string]any)["content"] != "hi" {
		t.Fatalf("messages = %v", msgs)
	}
}

func TestStreamReasoning(t *testing.T) {
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		modeltest.Start(w)
		modeltest.Stream(w,
			modeltest.Chunk(`{"reasoning_content":"Let me think. "}`, ""), // DeepSeek, vLLM, llama.cpp
			modeltest.Chunk(`{"reasoning":"Still thinking."}`, ""),        // Ollama, OpenRouter
			modeltest.Text("42"), modeltest.Chunk(`{}`, "stop"), "[DONE]")
	})
	ds, on := collectDeltas()
	resp, err := s.client(OpenAIOptions{}).Stream(context.Background(), Request{Model: "override",
		Messages: []Message{{Role: "user", Content: "?"}}}, on)
	if err != nil {
		t.Fatal(err)
	}
	want := []Delta{{Reasoning: "Let me think. "}, {Reasoning: "Still thinking."}, {Content: "42"}}
	if fmt.Sprint(*ds) != fmt.Sprint(want) {
		t.Fatalf("deltas = %+v", *ds)
	}
	if resp.Content != "42" {
		t.Fatalf("content = %q", resp.Content)
	}
	if s.request(0).Body["model"] != "override" || s.request(0).Auth != "" {
		t.Fatalf("request = %+v", s.request(0))
	}
}

func TestStreamToolCallsThenText(t *testing.T) {
	s := newScripted(t,
		func(w http.ResponseWriter, r *http.Request) {
			modeltest.Start(w)
			modeltest.Stream(w,
				modeltest.Chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"memory_search","arguments":""}}]}`, ""),
				modeltest.Chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"que"}}]}`, ""),
				modeltest.Chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ry\": \"QK-77"}}]}`, ""),
				modeltest.Chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"memory_search","arguments":"{\"query\":"}}]}`, ""),
				modeltest.Chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"31\"}"}}]}`, ""),
				modeltest.Chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"x\"}"}}]}`, ""),
				modeltest.Chunk(`{}`, "tool_calls"), "[DONE]")
		},
		func(w http.ResponseWriter, r *http.Request) {
			modeltest.Start(w)
			modeltest.Stream(w, modeltest.Text("QK-7731 is "), modeltest.Text("the launch code."), modeltest.Chunk(`{}`, "stop"), "[DONE]")
		})
	c := s.client(OpenAIOptions{})
	tool := Tool{Name: "memory_search", Description: "search memory",
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}
	msgs := []Message{{Role: "user", Content: "what is QK-7731?"}}
	ds, on := collectDeltas()
	resp, err := c.Stream(context.Background(), Request{Messages: msgs, Tools: []Tool{tool}}, on)
	if err != nil {
		t.Fatal(err)
	}
	if len(*ds) != 0 || resp.Content != "" || resp.FinishReason != "tool_calls" {
		t.Fatalf("round 1: deltas %v, resp %+v", *ds, resp)
	}
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v", resp.ToolCalls)
	}
	tc := resp.ToolCalls[0]
	if tc.ID != "call_a" || tc.Name != "memory_search" || string(tc.Arguments) != `{"query": "QK-7731"}` {
		t.Fatalf("call 0 = %+v (%s)", tc, tc.Arguments)
	}
	if resp.ToolCalls[1].ID != "call_b" || string(resp.ToolCalls[1].Arguments) != `{"query":"x"}` {
		t.Fatalf("call 1 = %+v", resp.ToolCalls[1])
	}
	// Second round: the assistant's tool calls and the tool results go back.
	msgs = append(msgs, Message{Role: RoleAssistant, ToolCalls: resp.ToolCalls},
		Message{Role: RoleTool, ToolCallID: "call_a", Name: "memory_search", Content: `{"results":[]}`},
		Message{Role: RoleTool, ToolCallID: "call_b", Name: "memory_search", Content: `{"results":[]}`})
	resp, err = c.Stream(context.Background(), Request{Messages: msgs, Tools: []Tool{tool}}, on)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "QK-7731 is the launch code." || len(resp.ToolCalls) != 0 || len(*ds) != 2 {
		t.Fatalf("round 2 = %+v, deltas %v", resp, *ds)
	}
	// The wire shape of round 1's tools and round 2's messages.
	tools := s.request(0).Body["tools"].([]any)
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	if tools[0].(map[string]any)["type"] != "function" || fn["name"] != "memory_search" || fn["parameters"].(map[string]any)["type"] != "object" {
		t.Fatalf("tools = %v", tools)
	}
	wire := s.request(1).Body["messages"].([]any)
	asst := wire[1].(map[string]any)
	if asst["content"] != nil {
		t.Fatalf("assistant content = %v, want null", asst["content"])
	}
	calls := asst["tool_calls"].([]any)
	f0 := calls[0].(map[string]any)["function"].(map[string]any)
	if calls[0].(map[string]any)["id"] != "call_a" || f0["arguments"] != `{"query": "QK-7731"}` {
		t.Fatalf("assistant tool_calls = %v", calls)
	}
	toolMsg := wire[2].(map[string]any)
	if toolMsg["role"] != "tool" || toolMsg["tool_call_id"] != "call_a" || toolMsg["content"] != `{"results":[]}` {
		t.Fatalf("tool message = %v", toolMsg)
	}
}

func TestStreamNonStreamingJSONAnswer(t *testing.T) {
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"plain"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	})
	ds, on := collectDeltas()
	resp, err := s.client(OpenAIOptions{}).Stream(context.Background(), Request{Messages: []Message{{Role: "user", Content: "x"}}}, on)
	if err != nil || resp.Content != "plain" || len(*ds) != 1 {
		t.Fatalf("resp = %+v, %v", resp, err)
	}
}

func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		kind     error
		contains []string
		partial  string
	}{
		{
			name: "http 500 with OpenAI error",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(500)
				io.WriteString(w, `{"error":{"message":"model crashed","type":"server_error"}}`)
			},
			kind: ErrUnavailable, contains: []string{"HTTP 500", "model crashed"},
		},
		{
			name: "http 429",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "slow down", http.StatusTooManyRequests)
			},
			kind: ErrUnavailable, contains: []string{"HTTP 429", "slow down"},
		},
		{
			name: "http 429 with Retry-After",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "7")
				http.Error(w, "slow down", http.StatusTooManyRequests)
			},
			kind: ErrUnavailable, contains: []string{"HTTP 429", "slow down", "(retry after 7s)"},
		},
		{
			name: "http 404 unknown model (Ollama error string)",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(404)
				io.WriteString(w, `{"error":"model \"llama9\" not found, try pulling it first"}`)
			},
			kind: ErrRejected, contains: []string{"HTTP 404", `model "llama9" not found`},
		},
		{
			name: "html body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				io.WriteString(w, "<html><body>It works!</body></html>")
			},
			kind: ErrBadResponse, contains: []string{"did not answer with an event stream", "text/html", "It works!"},
		},
		{
			name: "garbage line inside the stream",
			handler: func(w http.ResponseWriter, r *http.Request) {
				modeltest.Start(w)
				modeltest.Stream(w, modeltest.Text("ok "))
				io.WriteString(w, "<<<garbage>>>\n\n")
			},
			kind: ErrBadResponse, contains: []string{"not part of an event stream", "<<<garbage>>>"}, partial: "ok ",
		},
		{
			name: "chunk that is not JSON",
			handler: func(w http.ResponseWriter, r *http.Request) {
				modeltest.Start(w)
				modeltest.Stream(w, "{not json")
			},
			kind: ErrBadResponse, contains: []string{"not valid JSON"},
		},
		{
			name: "error object in the stream",
			handler: func(w http.ResponseWriter, r *http.Request) {
				modeltest.Start(w)
				modeltest.Stream(w, modeltest.Text("par"), `{"error":{"message":"context length exceeded"}}`)
			},
			kind: ErrBadResponse, contains: []string{"reported an error", "context length exceeded"}, partial: "par",
		},
		{
			name: "stream cut before [DONE]",
			handler: func(w http.ResponseWriter, r *http.Request) {
				modeltest.Start(w)
				modeltest.Stream(w, modeltest.Text("The answer is"))
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err == nil {
					buf.Flush()
					conn.Close()
				}
			},
			kind: ErrIncomplete, contains: []string{"stopped before it was complete"}, partial: "The answer is",
		},
		{
			name: "stream ends cleanly but without [DONE] or finish_reason",
			handler: func(w http.ResponseWriter, r *http.Request) {
				modeltest.Start(w)
				modeltest.Stream(w, modeltest.Text("half"))
			},
			kind: ErrIncomplete, contains: []string{"[DONE]"}, partial: "half",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScripted(t, tc.handler)
			resp, err := s.client(OpenAIOptions{}).Stream(context.Background(),
				Request{Messages: []Message{{Role: "user", Content: "x"}}}, nil)
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
			if resp.Content != tc.partial {
				t.Errorf("partial = %q, want %q", resp.Content, tc.partial)
			}
		})
	}
}

func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestStreamConnectionRefused(t *testing.T) {
	addr := closedAddr(t)
	c := NewOpenAI(OpenAIOptions{BaseURL: "http://" + addr + "/v1", Model: "m"})
	_, err := c.Stream(context.Background(), Request{Messages: []Message{{Role: "user", Content: "x"}}}, nil)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	want := "model server at http://" + addr + " is unreachable: connection refused"
	if err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
}

// blockingServer sends first (if any) and then waits until the client goes
// away or the test ends.
func blockingServer(t *testing.T, beforeHeaders bool, first ...string) *scripted {
	release := make(chan struct{})
	s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		if !beforeHeaders {
			modeltest.Start(w)
			modeltest.Stream(w, first...)
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	return s
}

func TestStreamCancelMidStream(t *testing.T) {
	s := blockingServer(t, false, modeltest.Text("slow "), modeltest.Text("answer"))
	c := s.client(OpenAIOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	resp, err := c.Stream(ctx, Request{Messages: []Message{{Role: "user", Content: "x"}}}, func(d Delta) {
		got = append(got, d.Content)
		if len(got) == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if resp.Content != "slow answer" {
		t.Fatalf("partial = %q", resp.Content)
	}
}

func TestStreamTimeouts(t *testing.T) {
	tests := []struct {
		name          string
		beforeHeaders bool
		opts          OpenAIOptions
		contains      string
	}{
		{"no headers", true, OpenAIOptions{HeaderTimeout: 50 * time.Millisecond}, "sent no response within 50ms"},
		{"silent mid-stream", false, OpenAIOptions{IdleTimeout: 50 * time.Millisecond}, "went silent for 50ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := blockingServer(t, tc.beforeHeaders, modeltest.Text("hi"))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang fails, not stalls
			defer cancel()
			_, err := s.client(tc.opts).Stream(ctx, Request{Messages: []Message{{Role: "user", Content: "x"}}}, nil)
			if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestStreamAlreadyCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewOpenAI(OpenAIOptions{BaseURL: "http://" + closedAddr(t)}).Stream(ctx, Request{}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		h    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"30", 30 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"Sun, 01 Mar 2026 12:00:20 GMT", 20 * time.Second, true},
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0, true}, // in the past: retry now
		{"soon", 0, false},
		{"-3", 0, false},
	}
	for _, tc := range tests {
		got, ok := retryAfter(tc.h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}
