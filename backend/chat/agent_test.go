package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func (c *testClock) Set(t time.Time)     { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// callTool streams one call of tool with args.
func callTool(id, tool, args string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		modeltest.Stream(w, modeltest.Chunk(fmt.Sprintf(`{"role":"assistant","tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}]}`, id, tool, args), ""),
			modeltest.Chunk(`{}`, "tool_calls"), "[DONE]")
	}
}

// toolFed returns the content of the tool message for callID in request body.
func toolFed(body map[string]any, callID string) string {
	for _, m := range wireMessages(body) {
		if m["role"] == "tool" && m["tool_call_id"] == callID {
			s, _ := m["content"].(string)
			return s
		}
	}
	return ""
}

// TestPermissionQuestions: an L3 tool of a run asks the person through
// agent.permission; no answer within AskTimeout closes the question as
// "timeout" and feeds "denied" to the model; a "yes" grants L3 to that
// session for GrantTTL (asked again after it expired, and in another
// session); unknown ids are ErrNotFound.
func TestPermissionQuestions(t *testing.T) {
	clk := &testClock{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	var probes []string
	var mu sync.Mutex
	ms := newModelServer(t,
		callTool("p1", "net_probe", `{"host":"example.com"}`), answer("no answer, no probe"), // run 1: timeout
		callTool("p2", "net_probe", `{"host":"example.com"}`), answer("probed"), // run 2: yes
		callTool("p3", "net_probe", `{"host":"example.org"}`), answer("probed again"), // run 3: granted
		callTool("p4", "net_probe", `{"host":"example.net"}`), answer("asked again"), // run 4: expired, no
		callTool("p5", "net_probe", `{"host":"example.net"}`), answer("other session"), // run 5: other session
	)
	e := newEnv(t, ms.provider(), &fakeSearcher{}, func(o *Options) {
		o.Now = clk.Now
		o.AskTimeout = 300 * time.Millisecond
		o.Tools = func(sc ToolScope) (*agent.Registry, error) {
			reg, err := defaultTools(o.Memory)
			if err != nil {
				return nil, err
			}
			err = reg.Register(agent.Spec{Name: "net_probe", Level: agent.L3, Schema: json.RawMessage(`{"type":"object","properties":{"host":{"type":"string"}},"required":["host"]}`)},
				func(_ context.Context, c agent.Call) (agent.Output, error) {
					mu.Lock()
					probes = append(probes, sc.SessionID+" "+string(c.Args))
					mu.Unlock()
					return agent.Output{Data: map[string]string{"reachable": "yes"}, LogSummary: "reachable"}, nil
				})
			return reg, err
		}
	})
	// run drives one run; answer (nil: none) answers its question.
	run := func(session string, answer *bool) ([]event, []PermissionRequest) {
		t.Helper()
		res := e.send(t, session, "probe it")
		var asked []PermissionRequest
		var evs []event
		deadline := time.After(20 * time.Second)
		for {
			var ev event
			select {
			case ev = <-e.rec.ch:
			case <-deadline:
				t.Fatalf("run %s did not end", res.RunID)
			}
			if a, ok := ev.payload.(PermissionAnsweredEvent); ok {
				for _, q := range asked {
					if q.ID == a.ID {
						evs = append(evs, ev)
					}
				}
				continue
			}
			if ref(ev.payload).RunID != res.RunID {
				continue
			}
			evs = append(evs, ev)
			if q, ok := ev.payload.(PermissionRequest); ok {
				asked = append(asked, q)
				if open := e.svc.Permissions(); len(open) != 1 || !reflect.DeepEqual(open[0], q) {
					t.Errorf("open questions %+v", open)
				}
				if answer != nil {
					if got, err := e.svc.AnswerPermission(q.ID, *answer); err != nil || got != (PermissionAnswer{ID: q.ID, Allowed: *answer}) {
						t.Errorf("answer = %+v, %v", got, err)
					}
				}
			}
			if terminal(ev.name) {
				return evs, asked
			}
		}
	}
	answered := func(evs []event) PermissionAnsweredEvent {
		for _, ev := range evs {
			if a, ok := ev.payload.(PermissionAnsweredEvent); ok {
				return a
			}
		}
		return PermissionAnsweredEvent{}
	}
	result := func(evs []event) ToolEvent {
		for _, ev := range evs {
			if te, ok := ev.payload.(ToolEvent); ok && te.Phase == ToolPhaseResult {
				return te
			}
		}
		return ToolEvent{}
	}
	yes, no := true, false

	evs, asked := run("s1", nil)
	if len(asked) != 1 || asked[0].Level != "L3" || asked[0].Kind != agent.KindLevel || asked[0].Tool != "net_probe" || asked[0].CallID != "p1" ||
		asked[0].Expires-asked[0].At != 300 || !strings.Contains(asked[0].ArgsSummary, "example.com") {
		t.Fatalf("questions %+v", asked)
	}
	// The sentence as a code and its values, for the UI's own words (issue 24 item 8).
	if want := map[string]string{"role": "main", "level": "L3", "ttlSeconds": "600"}; asked[0].ReasonCode != agent.ReasonCodeLevel || !reflect.DeepEqual(asked[0].ReasonParams, want) {
		t.Fatalf("reason code %q params %v, want %v", asked[0].ReasonCode, asked[0].ReasonParams, want)
	}
	if a := answered(evs); a.ID != asked[0].ID || a.Allowed || a.By != AnsweredByTimeout {
		t.Fatalf("answered %+v", a)
	}
	if r := result(evs); r.Status != string(agent.StatusDenied) || !strings.Contains(toolFed(ms.body(1), "p1"), `"status":"denied"`) {
		t.Fatalf("result %+v, fed %s", r, toolFed(ms.body(1), "p1"))
	}
	if _, err := e.svc.AnswerPermission(asked[0].ID, true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("late answer: %v", err)
	}
	if _, err := e.svc.AnswerPermission("", true); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("empty id: %v", err)
	}

	evs, asked = run("s1", &yes)
	if a := answered(evs); len(asked) != 1 || a.ID != asked[0].ID || !a.Allowed || a.By != AnsweredByPerson || result(evs).Status != "ok" {
		t.Fatalf("asked %+v answered %+v result %+v", asked, a, result(evs))
	}
	clk.Add(9 * time.Minute)
	if evs, asked = run("s1", nil); len(asked) != 0 || result(evs).Status != "ok" {
		t.Fatalf("within the grant: asked %+v, result %+v", asked, result(evs))
	}
	clk.Add(2 * time.Minute) // 11 minutes after the grant
	if evs, asked = run("s1", &no); len(asked) != 1 || result(evs).Status != "denied" {
		t.Fatalf("after the grant: asked %+v, result %+v", asked, result(evs))
	}
	if _, asked = run("s2", &no); len(asked) != 1 {
		t.Fatalf("another session was not asked: %+v", asked)
	}
	if len(probes) != 2 || !strings.HasPrefix(probes[0], "s1 ") || !strings.Contains(probes[1], "example.org") {
		t.Fatalf("probes %v", probes)
	}
	if open := e.svc.Permissions(); len(open) != 0 {
		t.Fatalf("open questions left: %+v", open)
	}
}

// blockingSearcher blocks every search until its context ends.
type blockingSearcher struct {
	fakeSearcher
	started chan struct{}
}

func (b *blockingSearcher) Search(ctx context.Context, o memory.SearchOptions) (memory.SearchResponse, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return memory.SearchResponse{}, ctx.Err()
}

// noOrphans fails when a request's messages hold a tool result without its
// call right before it, or a call without its result.
func noOrphans(t *testing.T, body map[string]any) {
	t.Helper()
	msgs := wireMessages(body)
	for i, m := range msgs {
		calls, _ := m["tool_calls"].([]any)
		if m["role"] == "assistant" && len(calls) > 0 {
			for _, c := range calls {
				id := c.(map[string]any)["id"]
				found := false
				for j := i + 1; j < len(msgs) && msgs[j]["role"] == "tool"; j++ {
					found = found || msgs[j]["tool_call_id"] == id
				}
				if !found {
					t.Errorf("call %v has no result", id)
				}
			}
		}
		if m["role"] == "tool" {
			j := i - 1
			for j >= 0 && msgs[j]["role"] == "tool" {
				j--
			}
			ok := false
			if j >= 0 {
				cs, _ := msgs[j]["tool_calls"].([]any)
				for _, c := range cs {
					ok = ok || c.(map[string]any)["id"] == m["tool_call_id"]
				}
			}
			if !ok {
				t.Errorf("orphaned tool result %v", m["tool_call_id"])
			}
		}
	}
}

// TestAbortedToolCallThenCompaction: a run cancelled while its tool runs is
// stored with the call and no result; the next run compacts the session
// (a small context window) and neither the summary call nor the answer's
// request holds an orphaned call or result, while a complete tool turn
// stored earlier stays paired.
func TestAbortedToolCallThenCompaction(t *testing.T) {
	mem := &blockingSearcher{started: make(chan struct{}, 1)}
	ms := newModelServer(t, func(w http.ResponseWriter, r *http.Request) {
		modeltest.Stream(w, modeltest.Text("Let me look."),
			modeltest.Chunk(`{"tool_calls":[{"index":0,"id":"c-aborted","type":"function","function":{"name":"memory_search","arguments":"{\"query\":\"heron\"}"}}]}`, ""),
			modeltest.Chunk(`{}`, "tool_calls"), "[DONE]")
	}, answer("SUMMARY-A"), answer("Fine."))
	e := newEnv(t, ms.provider(), &mem.fakeSearcher, func(o *Options) {
		o.Memory = mem
		o.ContextWindow = 1200 // threshold 600, flush at 450, keep 150 tokens
	})
	ctx := context.Background()
	res := e.send(t, "s", "look up heron")
	<-mem.started
	if ok, err := e.svc.Cancel(CancelRequest{ProfileID: "main", SessionID: "s", RunID: res.RunID}); !ok || err != nil {
		t.Fatalf("cancel = %v, %v", ok, err)
	}
	if evs := e.rec.runEvents(t, res.RunID); evs[len(evs)-1].name != EventCancelled {
		t.Fatalf("terminal = %+v", evs[len(evs)-1])
	}
	stored, err := e.store.Get(ctx, res.MessageID)
	if err != nil || stored.Content != "Let me look." || len(stored.Tools) != 1 || stored.Tools[0].CallID != "c-aborted" || stored.Tools[0].Status != "" {
		t.Fatalf("stored = %+v, %v", stored, err)
	}

	// Earlier turns (stored before it: older ts), one with a complete tool call.
	for i, m := range []history.Message{
		{ID: "old-u", Role: "user", Content: "first question " + strings.Repeat("filler ", 150)},
		{ID: "old-a", Role: "assistant", Content: "first answer " + strings.Repeat("filler ", 150), Tools: []history.ToolRecord{{
			CallID: "c-done", Tool: ToolMemorySearch, Round: 1, Args: json.RawMessage(`{"query":"first"}`), Status: "ok",
			Summary: "1 results", Data: json.RawMessage(`{"results":[]}`)}}},
	} {
		m.ProfileID, m.SessionID, m.TS = "main", "s", int64(1000+i)
		if err := e.store.Append(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	res2 := e.send(t, "s", "and now?")
	if fin, ok := checkRun(t, res2, e.rec.runEvents(t, res2.RunID)).payload.(FinalEvent); !ok || fin.Message.Content != "Fine." {
		t.Fatalf("second run: %+v", fin)
	}
	if ms.count() != 3 {
		t.Fatalf("%d model calls, want 3 (aborted, summary, answer)", ms.count())
	}
	sumReq := fmt.Sprint(ms.body(1)["messages"])
	if !strings.Contains(sumReq, "You compact a conversation") || strings.Contains(sumReq, "c-aborted") || strings.Contains(sumReq, `"query":"heron"`) ||
		!strings.Contains(sumReq, "[tool memory_search result]") || !strings.Contains(sumReq, "first question") {
		t.Fatalf("summary request %.800s", sumReq)
	}
	noOrphans(t, ms.body(2))
	if s := fmt.Sprint(ms.body(2)["messages"]); !strings.Contains(s, "SUMMARY-A") || strings.Contains(s, "first question") || strings.Contains(s, "c-aborted") {
		t.Fatalf("answer request %.800s", s)
	}
	sm, _ := e.store.Summary(ctx, "s")
	if sm.Text != "SUMMARY-A" || sm.Compactions != 1 {
		t.Fatalf("summary %+v", sm)
	}
}

// TestCompactingWithNothingNewKeepsSummary: compaction is due (the window
// is tiny) but every message is already in the summary: no summary call is
// made and the earlier summary is sent and kept as it was.
func TestCompactingWithNothingNewKeepsSummary(t *testing.T) {
	ms := newModelServer(t, answer("ok"))
	e := newEnv(t, ms.provider(), nil, func(o *Options) { o.ContextWindow = 400 })
	ctx := context.Background()
	if err := e.store.Append(ctx, history.Message{ID: "u0", ProfileID: "main", SessionID: "s", Role: "user", Content: "ANCIENT-QUESTION", TS: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetSummary(ctx, history.Summary{SessionID: "s", Text: "EARLIER-SUMMARY", Compactions: 1, ThroughTS: 1000}); err != nil {
		t.Fatal(err)
	}
	res := e.send(t, "s", "next")
	checkRun(t, res, e.rec.runEvents(t, res.RunID))
	if ms.count() != 1 {
		t.Fatalf("%d model calls, want 1 (no summary call)", ms.count())
	}
	msgs := wireMessages(ms.body(0))
	if msgs[1]["role"] != "system" || !strings.Contains(msgs[1]["content"].(string), "EARLIER-SUMMARY") || strings.Contains(fmt.Sprint(msgs), "ANCIENT-QUESTION") {
		t.Fatalf("messages %v", msgs)
	}
	sm, _ := e.store.Summary(ctx, "s")
	if sm.Text != "EARLIER-SUMMARY" || sm.Compactions != 1 || !sm.Flushed {
		t.Fatalf("summary %+v", sm)
	}
}

// TestOldToolResultsPrunedInWhatIsSent: by the fifth model call of a run,
// the first round's large tool result is soft-trimmed in the request
// (older than the three newest assistant messages) while the stored
// answer keeps the whole output.
func TestOldToolResultsPrunedInWhatIsSent(t *testing.T) {
	big := []memory.SearchResult{{Path: "notes/big.md", StartLine: 1, EndLine: 90, Score: 0.9, Snippet: strings.Repeat("word ", 1400)}}
	ms := newModelServer(t, toolCall("c1", `{"query":"a"}`), toolCall("c2", `{"query":"b"}`), toolCall("c3", `{"query":"c"}`),
		toolCall("c4", `{"query":"d"}`), answer("done"))
	e := newEnv(t, ms.provider(), &fakeSearcher{results: big})
	res := e.send(t, "s", "dig")
	fin := checkRun(t, res, e.rec.runEvents(t, res.RunID)).payload.(FinalEvent)
	first := toolFed(ms.body(4), "c1")
	if !strings.Contains(first, "tool result trimmed") || len([]rune(first)) > 3200 {
		t.Fatalf("first result as sent (%d chars): %.200s", len([]rune(first)), first)
	}
	if last := toolFed(ms.body(4), "c4"); strings.Contains(last, "trimmed") || len(last) < 6000 {
		t.Fatalf("newest result was pruned: %d chars", len(last))
	}
	if len(fin.Message.Tools) != 4 || len(fin.Message.Tools[0].Data) < 6000 || fin.Message.Tools[3].Round != 4 {
		t.Fatalf("stored tools: %d, first data %d bytes", len(fin.Message.Tools), len(fin.Message.Tools[0].Data))
	}
}

// The built-in memory_search refuses a query longer than
// memory.MaxQueryChars before searching, and saying so; one of exactly
// that length is searched.
func TestBuiltinSearchQueryLimit(t *testing.T) {
	mem := &fakeSearcher{}
	reg, err := defaultTools(mem)
	if err != nil {
		t.Fatal(err)
	}
	call := func(q string) agent.Result {
		args, _ := json.Marshal(map[string]string{"query": q})
		return reg.Invoke(context.Background(), agent.Call{ID: "c", Tool: ToolMemorySearch, Args: args}, nil)
	}
	if res := call(strings.Repeat("记忆检索", memory.MaxQueryChars/4)); res.Status != agent.StatusOK {
		t.Fatalf("a query at the limit: %+v", res)
	}
	for _, q := range []string{strings.Repeat("记忆检索", memory.MaxQueryChars/4) + "记", strings.Repeat("memory ", 14_000)} {
		if res := call(q); res.Status == agent.StatusOK || !strings.Contains(res.Error, "maxLength") {
			t.Fatalf("a query of %d bytes: %+v", len(q), res)
		}
	}
	if seen := mem.seen(); len(seen) != 1 {
		t.Fatalf("%d searches, want the one at the limit", len(seen))
	}
}

// TestSearchToolSaysWeak: the built-in memory_search carries the search's
// confidence, and tells the model in words when it is low (issue 25).
func TestSearchToolSaysWeak(t *testing.T) {
	weak := encodeHits(memory.SearchResponse{Results: sampleHits, Confidence: memory.Confidence{Level: memory.ConfidenceLow, Score: 0.2}}, defaultToolOutputBytes)
	if !strings.Contains(weak, `"confidence":{"level":"low","score":0.2}`) || !strings.Contains(weak, `"note":"Weak results`) {
		t.Errorf("low confidence: %s", weak)
	}
	sure := encodeHits(memory.SearchResponse{Results: sampleHits, Confidence: memory.Confidence{Level: memory.ConfidenceHigh, Score: 0.82}}, defaultToolOutputBytes)
	if !strings.Contains(sure, `"level":"high"`) || strings.Contains(sure, `"note"`) {
		t.Errorf("high confidence: %s", sure)
	}
}

// TestBuiltinSearchSaysRewrite: when memory.search.rewrite put a weakly
// answered question into the chat model's words (a scripted model over a
// real memory engine here), the built-in memory_search tells the model
// what was searched too and how long the model took, as the gateway's
// memory.search does (issue 25).
func TestBuiltinSearchSaysRewrite(t *testing.T) {
	ws := t.TempDir()
	notes := map[string]string{
		"memory/2026-04-01.md": "# Disk\n\nAdded logrotate for /var/log/nginx on the web server; the root volume was full.\n",
		"memory/2026-04-03.md": "# Lunch\n\nNoodles at the corner shop; the soup was too salty for the team.\n",
	}
	for rel, text := range notes {
		p := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var asked []string
	rewrite := func(_ context.Context, q string) (string, error) {
		asked = append(asked, q)
		return "logrotate /var/log root volume full", nil
	}
	m, err := memory.Open(memory.Options{Workspace: ws, IndexDir: filepath.Join(t.TempDir(), "index"), DisableWatcher: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Rewrite: rewrite, RewriteTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg, err := defaultTools(m)
	if err != nil {
		t.Fatal(err)
	}
	const q = "how did we free up space on the machine"
	args, _ := json.Marshal(map[string]string{"query": q})
	res := reg.Invoke(context.Background(), agent.Call{ID: "c", Tool: ToolMemorySearch, Args: args}, nil)
	if res.Status != agent.StatusOK || len(asked) != 1 || asked[0] != q {
		t.Fatalf("memory_search: %+v; the model was asked %q, want the weak question once", res, asked)
	}
	var got struct {
		Results []toolHit `json:"results"`
		memory.ToolRewrite
	}
	if err := json.Unmarshal(res.Data, &got); err != nil {
		t.Fatal(err)
	}
	if got.RewrittenQuery != "logrotate /var/log root volume full" || got.RewriteMs < 1 {
		t.Errorf("rewrittenQuery %q, rewriteMs %d; want the model's words and its time: %s", got.RewrittenQuery, got.RewriteMs, res.Data)
	}
	if len(got.Results) == 0 || got.Results[0].Path != "memory/2026-04-01.md" {
		t.Errorf("results %+v; want the logrotate note first", got.Results)
	}
}
