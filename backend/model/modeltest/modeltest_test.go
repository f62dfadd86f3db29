package modeltest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// TestServerAgainstTheClient: the real OpenAI-compatible client reads the
// scripted turns (reasoning and text; tool calls whose arguments come in
// pieces), the server records each request, runs hooks before answering,
// and refuses requests past the script.
func TestServerAgainstTheClient(t *testing.T) {
	var hooked atomic.Int32
	srv := modeltest.New(t, modeltest.Options{}, modeltest.Turns(
		modeltest.Turn{Calls: [][2]string{{"memory_search", `{"query":"QK-7731"}`}, {"memory_get", `{"path":"MEMORY.md"}`}}, Hook: func() { hooked.Add(1) }},
		modeltest.Turn{Reasoning: "look it up", Text: "QK-7731 是发布代码。"},
	)...)
	c := model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.BaseURL(), Model: "m", APIKey: "sk-test"})
	ctx := context.Background()
	resp, err := c.Stream(ctx, model.Request{Messages: []model.Message{{Role: "user", Content: "what is QK-7731?"}}}, nil)
	if err != nil {
		t.Fatalf("turn 0: %v", err)
	}
	if resp.FinishReason != "tool_calls" || len(resp.ToolCalls) != 2 ||
		resp.ToolCalls[0].ID != "call_0_0" || resp.ToolCalls[0].Name != "memory_search" || string(resp.ToolCalls[0].Arguments) != `{"query":"QK-7731"}` ||
		resp.ToolCalls[1].ID != "call_0_1" || resp.ToolCalls[1].Name != "memory_get" || string(resp.ToolCalls[1].Arguments) != `{"path":"MEMORY.md"}` {
		t.Fatalf("turn 0 = %+v", resp)
	}
	if hooked.Load() != 1 {
		t.Fatalf("the hook ran %d times before turn 0, want 1", hooked.Load())
	}
	var reasoning, text strings.Builder
	resp, err = c.Stream(ctx, model.Request{Messages: []model.Message{{Role: "user", Content: "again"}}}, func(d model.Delta) {
		reasoning.WriteString(d.Reasoning)
		text.WriteString(d.Content)
	})
	if err != nil || resp.FinishReason != "stop" || resp.Content != "QK-7731 是发布代码。" || text.String() != resp.Content || reasoning.String() != "look it up" {
		t.Fatalf("turn 1 = %+v (deltas %q, reasoning %q), %v", resp, text.String(), reasoning.String(), err)
	}
	if _, err := c.Stream(ctx, model.Request{Messages: []model.Message{{Role: "user", Content: "more"}}}, nil); err == nil {
		t.Fatal("a request past the script was answered")
	}
	if srv.Count() != 3 {
		t.Fatalf("Count = %d, want 3", srv.Count())
	}
	r := srv.Request(0)
	if r.Auth != "Bearer sk-test" || r.Header.Get("Authorization") != r.Auth || !strings.Contains(string(r.Raw), "what is QK-7731?") {
		t.Fatalf("request 0 recorded as %+v", r)
	}
	if ms := r.Messages(); len(ms) != 1 || ms[0]["role"] != "user" || ms[0]["content"] != "what is QK-7731?" {
		t.Fatalf("request 0 messages = %v", ms)
	}
	if srv.Body(0) != string(r.Raw) || srv.Body(3) != "" {
		t.Fatalf("Body(0) = %q, Body(3) = %q", srv.Body(0), srv.Body(3))
	}
}

// TestToolMessages: what the client sends back for each tool call, by id.
func TestToolMessages(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{}, modeltest.Turns(modeltest.Turn{Text: "ok"})...)
	c := model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.BaseURL(), Model: "m"})
	_, err := c.Stream(context.Background(), model.Request{Messages: []model.Message{
		{Role: "user", Content: "look"},
		{Role: "assistant", ToolCalls: []model.ToolCall{{ID: "call_0_0", Name: "memory_search", Arguments: []byte(`{}`)}, {ID: "call_0_1", Name: "memory_get", Arguments: []byte(`{}`)}}},
		{Role: "tool", ToolCallID: "call_0_0", Content: `{"status":"ok"}`},
		{Role: "tool", ToolCallID: "call_0_1", Content: `{"status":"denied"}`},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Request(0).ToolMessages()
	if len(got) != 2 || got["call_0_0"] != `{"status":"ok"}` || got["call_0_1"] != `{"status":"denied"}` {
		t.Fatalf("ToolMessages = %v", got)
	}
}

// TestServerOptions: RepeatLast answers past the script with the last
// handler; Path moves the endpoint; other paths, other methods and bodies
// that are not JSON are refused and not counted.
func TestServerOptions(t *testing.T) {
	srv := modeltest.New(t, modeltest.Options{Path: "/v1/messages", RepeatLast: true},
		func(w http.ResponseWriter, _ *http.Request) {
			modeltest.Stream(w, modeltest.Text("first"), modeltest.Done)
		},
		func(w http.ResponseWriter, _ *http.Request) {
			modeltest.Start(w)
			modeltest.Stream(w, modeltest.Text("again"), modeltest.Chunk(`{}`, "stop"), modeltest.Done)
		})
	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	if code, _ := post(modeltest.ChatPath, `{}`); code != http.StatusNotFound {
		t.Fatalf("the default path when Path is set: %d", code)
	}
	if code, _ := post("/v1/messages", `not json`); code != http.StatusBadRequest {
		t.Fatalf("a body that is not JSON: %d", code)
	}
	if resp, err := http.Get(srv.URL + "/v1/messages"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET: %v %v", resp, err)
	}
	want := []string{`"content":"first"`, `"content":"again"`, `"content":"again"`}
	for i, w := range want {
		code, body := post("/v1/messages", `{"n":1}`)
		if code != http.StatusOK || !strings.Contains(body, w) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
			t.Fatalf("request %d: %d %q, want %s", i, code, body, w)
		}
	}
	if srv.Count() != 3 {
		t.Fatalf("Count = %d, want 3 (refused requests are not counted)", srv.Count())
	}
}

// TestStreamToAGoneClient: Stream reports a write that fails.
func TestStreamToAGoneClient(t *testing.T) {
	if !modeltest.Stream(&failingWriter{h: http.Header{}}) {
		t.Fatal("Stream of nothing failed")
	}
	w := &failingWriter{h: http.Header{}}
	if modeltest.Stream(w, modeltest.Text("x")) {
		t.Fatal("Stream reported success on a failing writer")
	}
	if w.h.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("Content-Type = %q", w.h.Get("Content-Type"))
	}
}

type failingWriter struct{ h http.Header }

func (f *failingWriter) Header() http.Header       { return f.h }
func (f *failingWriter) Write([]byte) (int, error) { return 0, errors.New("client gone") }
func (f *failingWriter) WriteHeader(int)           {}
