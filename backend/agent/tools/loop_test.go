package tools

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

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
	srv := modeltest.New(t, modeltest.Options{}, modeltest.Turns([]modeltest.Turn{
		{Calls: [][2]string{{MemorySearch, `{"query":"parser rewrite"}`}, {ReadFile, `{"path":"notes/todo.txt"}`}}},
		{Calls: [][2]string{{MemoryGet, broken}}},
		{Calls: [][2]string{{MemoryGet, broken}}},
		{Calls: [][2]string{{MemoryGet, `{"path":"memory/global/project-status.md"}`}}},
		{Calls: [][2]string{{MemoryGet, `{"path":"memory/roles/writer/private.md"}`}, {WebFetch, `{"url":"https://example.com/"}`}}},
		{Calls: [][2]string{{Exec, `{"argv":["echo","first"]}`}}},
		{Calls: [][2]string{{Exec, `{"argv":["echo","second"]}`}}, Hook: func() { e.clock.Add(5 * time.Minute) }},
		{Calls: [][2]string{{Exec, `{"argv":["echo","third"]}`}}, Hook: func() { e.clock.Add(6 * time.Minute) }},
		{Text: "All done: the parser needs a rewrite.", Hook: func() {}},
	}...)...)
	var trs []agent.Transition
	a, err := agent.New(agent.Options{
		Provider:     model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.BaseURL(), Model: "scripted", Logger: quiet()}),
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
		if m := srv.Request(i).ToolMessages()[id]; !strings.Contains(m, "not valid JSON") || !strings.Contains(m, `"status":"error"`) {
			t.Errorf("request %d: feedback for %s: %s", i, id, m)
		}
	}
	// The denials reached the model with status denied and a reason.
	fed := srv.Request(5).ToolMessages()
	if !strings.Contains(fed["call_4_0"], `"status":"denied"`) || !strings.Contains(fed["call_4_1"], "not available to this agent") {
		t.Errorf("denials fed back: %v", fed)
	}
	if !strings.Contains(srv.Request(8).ToolMessages()["call_7_0"], "did not grant L2") {
		t.Errorf("expired grant feedback: %v", srv.Request(8).ToolMessages())
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
