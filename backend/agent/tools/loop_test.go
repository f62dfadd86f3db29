package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/model"
)

// sseServer is a scripted OpenAI-compatible chat-completions server: the
// i-th request is answered with the i-th script (before which hooks[i],
// if any, runs), and every request body is kept.
type sseServer struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

type turn struct {
	calls [][2]string // name, raw arguments text
	text  string
	hook  func()
}

func newSSEServer(t *testing.T, turns []turn) *sseServer {
	s := &sseServer{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		i := len(s.bodies)
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		if i >= len(turns) {
			http.Error(w, "unexpected request", http.StatusInternalServerError)
			return
		}
		tn := turns[i]
		if tn.hook != nil {
			tn.hook()
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta any, finish string) {
			fr := any(nil)
			if finish != "" {
				fr = finish
			}
			c, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk", "model": "scripted",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fr}}})
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
		if len(tn.calls) > 0 {
			for k, c := range tn.calls {
				// Name first, then the arguments in two pieces, as servers stream them.
				chunk(map[string]any{"tool_calls": []any{map[string]any{"index": k, "id": fmt.Sprintf("call_%d_%d", i, k), "type": "function",
					"function": map[string]any{"name": c[0], "arguments": ""}}}}, "")
				half := len(c[1]) / 2
				for _, part := range []string{c[1][:half], c[1][half:]} {
					chunk(map[string]any{"tool_calls": []any{map[string]any{"index": k, "function": map[string]any{"arguments": part}}}}, "")
				}
			}
			chunk(map[string]any{}, "tool_calls")
		} else {
			chunk(map[string]any{"role": "assistant", "content": tn.text}, "")
			chunk(map[string]any{}, "stop")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// toolMessages returns the tool messages of request i, by call id.
func (s *sseServer) toolMessages(i int) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	msgs, _ := s.bodies[i]["messages"].([]any)
	for _, m := range msgs {
		mm := m.(map[string]any)
		if mm["role"] == "tool" {
			out[mm["tool_call_id"].(string)], _ = mm["content"].(string)
		}
	}
	return out
}

// TestLoopWithScriptedModel drives the whole loop through the real
// OpenAI-compatible client against a scripted server, with the real tools
// on the real memory stack: tool calls, broken JSON twice then valid, a
// tool the agent may not use and a file it may not read, exec needing L2
// (granted, reused within 10 minutes, asked again after they expire and
// refused), then the answer.
func TestLoopWithScriptedModel(t *testing.T) {
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo binary")
	}
	var mu sync.Mutex
	var asked []agent.PermissionRequest
	answers := []bool{true, false}
	asker := agent.AskerFunc(func(_ context.Context, r agent.PermissionRequest) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r)
		a := answers[0]
		answers = answers[1:]
		return a, nil
	})
	e := newTestEnv(t, Options{
		Exec:  &ExecOptions{Approval: ApprovalAllowlist, Allowlist: []string{filepath.Join(filepath.Dir(echo), "echo")}},
		Fetch: &FetchOptions{},
	})
	perms := agent.NewPermissions(agent.PermissionOptions{Session: "s-1", Role: "code-expert", Asker: asker, Now: e.clock.Now})
	broken := `{"path": "memory/global/project-status.md`
	srv := newSSEServer(t, []turn{
		{calls: [][2]string{{MemorySearch, `{"query":"parser rewrite"}`}, {ReadFile, `{"path":"notes/todo.txt"}`}}},
		{calls: [][2]string{{MemoryGet, broken}}},
		{calls: [][2]string{{MemoryGet, broken}}},
		{calls: [][2]string{{MemoryGet, `{"path":"memory/global/project-status.md"}`}}},
		{calls: [][2]string{{MemoryGet, `{"path":"memory/roles/writer/private.md"}`}, {WebFetch, `{"url":"https://example.com/"}`}}},
		{calls: [][2]string{{Exec, `{"argv":["echo","first"]}`}}},
		{calls: [][2]string{{Exec, `{"argv":["echo","second"]}`}}, hook: func() { e.clock.Add(5 * time.Minute) }},
		{calls: [][2]string{{Exec, `{"argv":["echo","third"]}`}}, hook: func() { e.clock.Add(6 * time.Minute) }},
		{text: "All done: the parser needs a rewrite.", hook: func() {}},
	})
	var trs []agent.Transition
	a, err := agent.New(agent.Options{
		Provider:     model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.srv.URL + "/v1", Model: "scripted", Logger: quiet()}),
		Tools:        e.reg,
		Permissions:  perms,
		AllowedTools: []string{MemorySearch, MemoryGet, ReadFile, Exec},
		OnTransition: func(tr agent.Transition) { trs = append(trs, tr) },
		Logger:       quiet(),
		Now:          e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.Run(context.Background(), agent.Task{System: "You are code-expert.", Input: "What about the parser?"})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rep.Text != "All done: the parser needs a rewrite." || rep.Rounds != 8 || a.State() != agent.StateIdle {
		t.Fatalf("report: text %q rounds %d state %s", rep.Text, rep.Rounds, a.State())
	}
	want := []struct {
		tool   string
		status agent.Status
		has    string
	}{
		{MemorySearch, agent.StatusOK, "roles/code-expert/notes.md"},
		{ReadFile, agent.StatusOK, "line two"},
		{MemoryGet, agent.StatusError, ""},
		{MemoryGet, agent.StatusError, ""},
		{MemoryGet, agent.StatusOK, "ships on Friday"},
		{MemoryGet, agent.StatusDenied, ""},
		{WebFetch, agent.StatusDenied, ""},
		{Exec, agent.StatusOK, "first"},
		{Exec, agent.StatusOK, "second"},
		{Exec, agent.StatusDenied, ""},
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("%d results: %+v", len(rep.Results), rep.Results)
	}
	for i, w := range want {
		r := rep.Results[i]
		if r.Tool != w.tool || r.Status != w.status || !strings.Contains(string(r.Data), w.has) {
			t.Errorf("result %d = %s %s %s %s, want %s %s containing %q", i, r.Tool, r.Status, r.Error, r.Data, w.tool, w.status, w.has)
		}
	}
	// Broken JSON was fed back to the model each time, and the run went on.
	for _, i := range []int{2, 3} {
		id := fmt.Sprintf("call_%d_0", i-1)
		if m := srv.toolMessages(i)[id]; !strings.Contains(m, "not valid JSON") || !strings.Contains(m, `"status":"error"`) {
			t.Errorf("request %d: feedback for %s: %s", i, id, m)
		}
	}
	// The denials reached the model with status denied and a reason.
	fed := srv.toolMessages(5)
	if !strings.Contains(fed["call_4_0"], `"status":"denied"`) || !strings.Contains(fed["call_4_1"], "not available to this agent") {
		t.Errorf("denials fed back: %v", fed)
	}
	if !strings.Contains(srv.toolMessages(8)["call_7_0"], "did not grant L2") {
		t.Errorf("expired grant feedback: %v", srv.toolMessages(8))
	}
	// The person was asked twice: first exec, and again after 11 minutes.
	if len(asked) != 2 || asked[0].Level != agent.L2 || asked[0].Tool != Exec || !strings.Contains(asked[0].ArgsSummary, "first") ||
		!strings.Contains(asked[1].ArgsSummary, "third") || asked[1].At.Sub(asked[0].At) != 11*time.Minute {
		t.Errorf("questions: %+v", asked)
	}
	// The refused read of writer's private memory was audited as denied.
	den := e.audits(audit.Filter{Result: audit.Denied, TargetPrefix: "roles/writer/private.md"})
	if len(den) != 1 || den[0].Role != "code-expert" || den[0].Operation != "get" {
		t.Errorf("audit: %+v", den)
	}
	// Transitions: eight rounds of planning → acting → observing, then the report.
	var path []string
	for _, tr := range trs {
		path = append(path, string(tr.To))
	}
	got := strings.Join(path, ">")
	if strings.Count(got, "acting>observing>planning") != 8 || !strings.HasPrefix(got, "analyzing>planning>acting") || !strings.HasSuffix(got, "planning>reporting>idle") {
		t.Errorf("transitions %s", got)
	}
	for _, tr := range trs {
		if tr.At.IsZero() || tr.Source == "" || tr.Reason == "" {
			t.Errorf("transition without time, source or reason: %+v", tr)
		}
	}
}
