package atrium

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/atrium-dev/atrium/backend/agent"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// newScriptModel is an OpenAI-compatible chat-completions server that
// answers request i with turns[i] (modeltest.Turn: tool-call arguments in
// pieces, text in two deltas) and keeps every request body.
func newScriptModel(t *testing.T, turns ...modeltest.Turn) *modeltest.Server {
	return modeltest.New(t, modeltest.Options{}, modeltest.Turns(turns...)...)
}

// runEvents is what one run sent a client: the events in order, and the
// permission questions' closing events.
type runEvents struct {
	frames []gateway.EventFrame
}

func (r runEvents) named(name string) []json.RawMessage {
	var out []json.RawMessage
	for _, f := range r.frames {
		if f.Event == name {
			out = append(out, f.Payload)
		}
	}
	return out
}

// states is the agent.state moves as "from>to>to…".
func (r runEvents) states(t *testing.T) string {
	var path []string
	for _, p := range r.named("agent.state") {
		var st struct {
			From, To, Source string
			At               int64
		}
		must(t, json.Unmarshal(p, &st))
		if st.At == 0 || st.Source == "" {
			t.Errorf("agent.state without time or source: %s", p)
		}
		if len(path) == 0 {
			path = append(path, st.From)
		}
		path = append(path, st.To)
	}
	return strings.Join(path, ">")
}

// follow reads cl's events of run runID (and the agent.permission.answered
// of its questions) until the run's terminal event; react sees each one
// as it arrives (to answer a question, cancel ...).
func follow(t *testing.T, cl *client, runID string, react func(f gateway.EventFrame)) runEvents {
	t.Helper()
	var out runEvents
	asked := map[string]bool{}
	deadline := time.After(60 * time.Second)
	for {
		select {
		case f, open := <-cl.events:
			if !open {
				t.Fatal("connection closed")
			}
			var head struct{ RunID, ID string }
			_ = json.Unmarshal(f.Payload, &head)
			switch {
			case head.RunID == runID:
				if f.Event == "agent.permission" {
					asked[head.ID] = true
				}
			case f.Event == "agent.permission.answered" && asked[head.ID]:
			default:
				continue
			}
			out.frames = append(out.frames, f)
			if react != nil {
				react(f)
			}
			switch f.Event {
			case "chat.final", "chat.cancelled", "chat.error":
				return out
			}
		case <-deadline:
			t.Fatalf("run %s did not end; got %d events", runID, len(out.frames))
		}
	}
}

type permissionReq = chat.PermissionRequest

// onAsk returns a follow reaction that calls fn with each question the
// run asks.
func onAsk(t *testing.T, fn func(p permissionReq)) func(f gateway.EventFrame) {
	return func(f gateway.EventFrame) {
		if f.Event != "agent.permission" {
			return
		}
		var p permissionReq
		must(t, json.Unmarshal(f.Payload, &p))
		fn(p)
	}
}

type toolEv struct {
	CallID, Tool, Phase, ArgsSummary, Status, Summary string
}

func toolEvents(t *testing.T, r runEvents) []toolEv {
	var out []toolEv
	for _, p := range r.named("chat.tool") {
		var e toolEv
		must(t, json.Unmarshal(p, &e))
		out = append(out, e)
	}
	return out
}

// TestAgentChatOverGateway drives chat runs through the agent loop over
// the real gateway, with the real tools as role main, against a scripted
// OpenAI-compatible model: a memory_search run that answers with sources;
// an L3 web_fetch that asks the person (agent.permission, listed by
// agent.permissions to a client that connects late), allowed once with
// agent.permission.answer, then not asked again in the same session; a
// denial fed back to the model as "denied"; and a run cancelled while it
// waits for the person, which closes the question as "cancelled".
func TestAgentChatOverGateway(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "status: all systems green 状态良好\n")
	}))
	t.Cleanup(page.Close)
	fetch := fmt.Sprintf(`{"url":%q}`, page.URL+"/status")
	mdl := newScriptModel(t,
		modeltest.Turn{Calls: [][2]string{{"memory_search", `{"query":"deploy key rotation"}`}}}, // 0
		modeltest.Turn{Reasoning: "The note says Friday.", Text: "Every Friday (MEMORY.md:3)."},  // 1
		modeltest.Turn{Calls: [][2]string{{"web_fetch", fetch}}},                                 // 2: asks, allowed
		modeltest.Turn{Text: "The status page says all systems green."},                          // 3
		modeltest.Turn{Calls: [][2]string{{"web_fetch", fetch}}},                                 // 4: granted, no question
		modeltest.Turn{Text: "Still green."},                                                     // 5
		modeltest.Turn{Calls: [][2]string{{"web_fetch", fetch}}},                                 // 6: asks, denied
		modeltest.Turn{Text: "I was not allowed to fetch the page."},                             // 7
		modeltest.Turn{Calls: [][2]string{{"web_fetch", fetch}}},                                 // 8: asks, run cancelled
	)
	env := map[string]string{"OPENAI_BASE_URL": mdl.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "scripted"}
	a, _ := startAppWith(t, func(k string) string { return env[k] }, func(_ string, o *Options) { o.FetchAllowPrivate = true })
	must(t, a.Memory.Sync(context.Background()))
	cl := dial(t, a)
	type sendRes struct{ RunID, MessageID, SessionID string }
	send := func(session, text string) sendRes {
		var r sendRes
		cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": session, "message": text}, &r)
		return r
	}

	// 1. memory_search, then the answer with its sources.
	r1 := send("s-mem", "When is the deploy key rotated?")
	ev := follow(t, cl, r1.RunID, nil)
	var final struct {
		Message struct {
			Content string
			Sources []struct{ Path string }
			Tools   []struct {
				CallID, Tool, Status, Summary string
				Round                         int
				Data                          json.RawMessage
			}
		}
	}
	must(t, json.Unmarshal(ev.named("chat.final")[0], &final))
	if final.Message.Content != "Every Friday (MEMORY.md:3)." || len(final.Message.Sources) == 0 || final.Message.Sources[0].Path != "MEMORY.md" {
		t.Fatalf("final = %+v", final.Message)
	}
	if got := ev.states(t); got != "idle>analyzing>planning>acting>observing>planning>reporting>idle" {
		t.Errorf("states %s", got)
	}
	if te := toolEvents(t, ev); len(te) != 2 || te[0].Phase != "call" || te[0].Tool != "memory_search" || !strings.Contains(te[0].ArgsSummary, "deploy key") ||
		te[1].Phase != "result" || te[1].Status != "ok" || te[1].CallID != te[0].CallID || te[1].Summary == "" {
		t.Errorf("chat.tool events %+v", te)
	}
	if len(ev.named("chat.reasoning")) == 0 {
		t.Error("no chat.reasoning")
	}
	if tl := final.Message.Tools; len(tl) != 1 || tl[0].Tool != "memory_search" || tl[0].Status != "ok" || tl[0].Round != 1 ||
		!strings.Contains(string(tl[0].Data), "every Friday") {
		t.Errorf("stored tool calls %+v", tl)
	}

	// 2. web_fetch (L3) asks the person; a client that connects late lists
	// the question; an unknown id is NOT_FOUND; "yes" lets it run.
	var late *client
	var asked permissionReq
	r2 := send("s-net", "Fetch the status page")
	ev = follow(t, cl, r2.RunID, onAsk(t, func(p permissionReq) {
		asked = p
		late = dial(t, a)
		var open struct{ Requests []permissionReq }
		late.ok("agent.permissions", map[string]any{}, &open)
		if len(open.Requests) != 1 || !reflect.DeepEqual(open.Requests[0], asked) {
			t.Errorf("agent.permissions = %+v, want [%+v]", open.Requests, asked)
		}
		if asked.ReasonCode != agent.ReasonCodeLevel || asked.ReasonParams["level"] != "L3" {
			t.Errorf("the question's reason code %q params %v, want %q with level L3 (the UI words it)", asked.ReasonCode, asked.ReasonParams, agent.ReasonCodeLevel)
		}
		if r := late.call("agent.permission.answer", map[string]any{"id": "0000000000000000", "allow": true}); r.OK || r.Error.Code != "NOT_FOUND" {
			t.Errorf("answer of an unknown id = %+v", r)
		}
		var ans struct {
			ID      string
			Allowed bool
		}
		late.ok("agent.permission.answer", map[string]any{"id": asked.ID, "allow": true}, &ans)
		if ans.ID != asked.ID || !ans.Allowed {
			t.Errorf("answer = %+v", ans)
		}
	}))
	if asked.Kind != "level" || asked.Level != "L3" || asked.Tool != "web_fetch" || asked.RunID != r2.RunID || asked.SessionID != "s-net" ||
		asked.ProfileID != "main" || asked.MessageID != r2.MessageID || asked.CallID != "call_2_0" || !strings.Contains(asked.ArgsSummary, page.URL) ||
		asked.Reason == "" || asked.Expires-asked.At != int64((2*time.Minute)/time.Millisecond) {
		t.Fatalf("agent.permission = %+v", asked)
	}
	checkAnswered := func(ev runEvents, id string, allowed bool, by string) {
		t.Helper()
		got := ev.named("agent.permission.answered")
		var a struct {
			ID      string
			Allowed bool
			By      string
		}
		if len(got) != 1 || json.Unmarshal(got[0], &a) != nil || a.ID != id || a.Allowed != allowed || a.By != by {
			t.Fatalf("agent.permission.answered = %s, want %s %v by %s", got, id, allowed, by)
		}
	}
	checkAnswered(ev, asked.ID, true, "person")
	late.waitEvent("agent.permission.answered", func(p json.RawMessage) bool { return strings.Contains(string(p), asked.ID) })
	if te := toolEvents(t, ev); len(te) != 2 || te[1].Status != "ok" || !strings.Contains(te[1].Summary, "HTTP 200") {
		t.Errorf("chat.tool events %+v", te)
	}
	if fed := mdl.Request(3).ToolMessages()["call_2_0"]; !strings.Contains(fed, "all systems green") || !strings.Contains(fed, `"status":"ok"`) {
		t.Errorf("the fetched page did not reach the model: %s", fed)
	}
	if r := cl.call("agent.permission.answer", map[string]any{"id": asked.ID, "allow": false}); r.OK || r.Error.Code != "NOT_FOUND" {
		t.Errorf("second answer = %+v, want NOT_FOUND", r)
	}

	// 3. The same session within 10 minutes: granted, not asked again.
	r3 := send("s-net", "And now?")
	ev = follow(t, cl, r3.RunID, nil)
	if n := len(ev.named("agent.permission")); n != 0 {
		t.Errorf("asked %d times again within the grant", n)
	}
	if te := toolEvents(t, ev); len(te) != 2 || te[1].Status != "ok" {
		t.Errorf("chat.tool events %+v", te)
	}

	// 4. Another session is asked again; "no" is fed back as denied.
	r4 := send("s-deny", "Fetch the status page")
	var denied string
	ev = follow(t, cl, r4.RunID, onAsk(t, func(p permissionReq) {
		denied = p.ID
		cl.ok("agent.permission.answer", map[string]any{"id": p.ID, "allow": false}, nil)
	}))
	checkAnswered(ev, denied, false, "person")
	if te := toolEvents(t, ev); len(te) != 2 || te[1].Status != "denied" {
		t.Errorf("chat.tool events %+v", te)
	}
	if fed := mdl.Request(7).ToolMessages()["call_6_0"]; !strings.Contains(fed, `"status":"denied"`) || !strings.Contains(fed, "did not grant L3") {
		t.Errorf("the denial did not reach the model: %s", fed)
	}
	if final := ev.named("chat.final"); len(final) != 1 || !strings.Contains(string(final[0]), "not allowed") {
		t.Errorf("final = %s", final)
	}

	// 5. Cancelling a run that waits for the person closes the question.
	r5 := send("s-cancel", "Fetch the status page")
	var waiting string
	ev = follow(t, cl, r5.RunID, onAsk(t, func(p permissionReq) {
		waiting = p.ID
		cl.ok("chat.cancel", map[string]any{"profileId": "main", "sessionId": "s-cancel", "runId": r5.RunID}, nil)
	}))
	checkAnswered(ev, waiting, false, "cancelled")
	if last := ev.frames[len(ev.frames)-1]; last.Event != "chat.cancelled" {
		t.Errorf("last event %s %s", last.Event, last.Payload)
	}
	if !strings.HasSuffix(ev.states(t), ">acting>cancelled") {
		t.Errorf("states %s", ev.states(t))
	}
	var open struct{ Requests []permissionReq }
	cl.ok("agent.permissions", map[string]any{}, &open)
	if len(open.Requests) != 0 {
		t.Errorf("questions still open: %+v", open.Requests)
	}
	if n := mdl.Count(); n != 9 {
		t.Errorf("%d model calls, want 9", n)
	}
}

// TestChatCompactionLive: with a small context window from the profile's
// own model settings (persona front matter contextWindow), a long session
// gets the silent memory-flush turn first — the model is asked to store
// durable facts and does, with memory_note as role main, and none of it
// reaches the person — then a compaction summary, which later runs send
// in place of the older turns; a next run with nothing new to fold in
// keeps that summary.
func TestChatCompactionLive(t *testing.T) {
	mdl := newScriptModel(t,
		modeltest.Turn{Calls: [][2]string{{"memory_note", `{"text":"The person prefers green tea."}`}}}, // 0: flush turn
		modeltest.Turn{Text: "NO_REPLY"},                                        // 1: flush turn ends
		modeltest.Turn{Text: "SUMMARY-1: the person planned the Heron launch."}, // 2: compaction summary
		modeltest.Turn{Text: "Here is the answer."},                             // 3: the run's answer
		modeltest.Turn{Text: "Second answer."},                                  // 4: next run, no compaction
	)
	env := map[string]string{"OPENAI_BASE_URL": mdl.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "scripted"}
	// The window is sized so that the session below crosses the flush and
	// compaction thresholds before the first run (the system prompt and the
	// tool schemas, exec's included, count) and no longer after it.
	a, ws := startAppWith(t, func(k string) string { return env[k] }, func(ws string, o *Options) {
		must(t, os.MkdirAll(filepath.Join(ws, "memory", "roles", "main"), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, "memory", "roles", "main", "config.md"),
			[]byte("---\nmodel:\n  contextWindow: 4600\n---\n# Main\n"), 0o644))
	})
	if a.Model.ContextWindow != 4600 {
		t.Fatalf("model settings %+v (%s)", a.Model, a.ModelReason)
	}
	ctx := context.Background()
	// A long session: 8 exchanges of about 120 tokens each.
	ts := time.Now().Add(-time.Hour).UnixMilli()
	for i := range 8 {
		for j, role := range []string{"user", "assistant"} {
			text := fmt.Sprintf("%s turn %d: ", role, i) + strings.Repeat(fmt.Sprintf("heron launch detail %d ", i), 25)
			must(t, a.History.Append(ctx, history.Message{ID: fmt.Sprintf("long-%d-%d", i, j), ProfileID: "main", SessionID: "s-long",
				Role: role, Content: text, TS: ts + int64(4*i+j)}))
		}
	}
	cl := dial(t, a)
	var r1 struct{ RunID string }
	cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": "s-long", "message": "What did we decide?"}, &r1)
	ev := follow(t, cl, r1.RunID, nil)
	var text strings.Builder
	for _, p := range ev.named("chat.chunk") {
		var c struct{ Delta string }
		must(t, json.Unmarshal(p, &c))
		text.WriteString(c.Delta)
	}
	if text.String() != "Here is the answer." || len(ev.named("chat.tool")) != 0 {
		t.Fatalf("the person saw %q and %d tool events; the flush turn must be silent", text.String(), len(ev.named("chat.tool")))
	}
	// The flush turn: the flush prompt, offered only the memory writers.
	flush := mdl.Body(0)
	if !strings.Contains(flush, "Pre-compaction memory flush") || !strings.Contains(flush, `"memory_note"`) ||
		!strings.Contains(flush, `"memory_write"`) || strings.Contains(flush, `"web_fetch"`) {
		t.Fatalf("flush request: %.400s", flush)
	}
	notes, _ := filepath.Glob(filepath.Join(ws, "memory", "roles", "main", "20*.md"))
	found := false
	for _, n := range notes {
		b, _ := os.ReadFile(n)
		found = found || strings.Contains(string(b), "green tea")
	}
	if !found {
		t.Fatalf("the flush turn's memory_note is not in the daily log (%v)", notes)
	}
	// The compaction summary, then the answer with it in place of the old turns.
	if sum := mdl.Body(2); !strings.Contains(sum, "You compact a conversation") || !strings.Contains(sum, "user turn 0:") {
		t.Fatalf("summary request: %.400s", sum)
	}
	if ans := mdl.Body(3); !strings.Contains(ans, "SUMMARY-1") || strings.Contains(ans, "user turn 0:") || !strings.Contains(ans, "What did we decide?") {
		t.Fatalf("answer request: %.600s", ans)
	}
	sm, err := a.History.Summary(ctx, "s-long")
	if err != nil || sm.Compactions != 1 || !strings.HasPrefix(sm.Text, "SUMMARY-1") || sm.Flushed || sm.ThroughTS < ts {
		t.Fatalf("summary = %+v, %v", sm, err)
	}

	// Next run: below the thresholds now; the summary is sent again as it was.
	var r2 struct{ RunID string }
	cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": "s-long", "message": "Thanks."}, &r2)
	follow(t, cl, r2.RunID, nil)
	if n := mdl.Count(); n != 5 {
		t.Logf("request 4: %.300s", mdl.Body(4))
		t.Fatalf("%d model calls, want 5", n)
	}
	if next := mdl.Body(4); !strings.Contains(next, "SUMMARY-1") || strings.Contains(next, "Pre-compaction") {
		t.Fatalf("next request: %.400s", next)
	}
	if again, _ := a.History.Summary(ctx, "s-long"); again.Text != sm.Text || again.Compactions != 1 {
		t.Fatalf("summary changed: %+v", again)
	}
}
