package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/convo"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

func TestOfflineAnswers(t *testing.T) {
	tests := []struct {
		name    string
		mem     *fakeSearcher
		want    []string
		sources int
	}{
		{
			name: "quotes memory with sources",
			mem:  &fakeSearcher{results: sampleHits},
			want: []string{"`memory/global/decisions.md:3-7`", "> QK-7731 is the launch code for project Heron.", "`MEMORY.md:10-12`",
				"> Heron ships in June.", "(2 passages)"},
			sources: 2,
		},
		{name: "nothing found", mem: &fakeSearcher{}, want: []string{"I found nothing in memory that matches “What is QK-7731?”"}},
		{name: "search fails", mem: &fakeSearcher{err: errors.New("index is rebuilding")}, want: []string{"Memory search failed: index is rebuilding"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, tc.mem)
			if p := e.svc.Profiles(); len(p) != 1 || p[0].ID != "main" || p[0].Provider != "offline" || p[0].Model != OfflineModel {
				t.Fatalf("profiles = %+v", p)
			}
			res := e.send(t, "", "What is QK-7731?")
			if res.SessionID == "" || res.RunID == "" || res.MessageID == "" || res.UserMessageID == "" {
				t.Fatalf("result = %+v", res)
			}
			evs := e.rec.runEvents(t, res.RunID)
			last := checkRun(t, res, evs)
			final, ok := last.payload.(FinalEvent)
			if !ok {
				t.Fatalf("terminal = %s %+v", last.name, last.payload)
			}
			text := final.Message.Content
			for _, w := range append(tc.want, "No model is configured", "config.json", "OPENAI_API_KEY", "OPENAI_BASE_URL", "Ollama", "127.0.0.1:11434") {
				if !strings.Contains(text, w) {
					t.Errorf("answer lacks %q:\n%s", w, text)
				}
			}
			if chunks := len(evs) - 2; chunks < 3 {
				t.Errorf("answer came in %d chunks, want several", chunks)
			}
			if chunksText(evs) != text {
				t.Errorf("chunks do not add up to the final text")
			}
			if len(final.Message.Sources) != tc.sources {
				t.Errorf("sources = %+v", final.Message.Sources)
			}
			if tc.sources > 0 && final.Message.Sources[0] != (history.Source{Path: "memory/global/decisions.md", StartLine: 3, EndLine: 7}) {
				t.Errorf("source 0 = %+v", final.Message.Sources[0])
			}
			if q := e.mem.seen(); len(q) != 1 || q[0].Query != "What is QK-7731?" {
				t.Errorf("searches = %+v", q)
			}
			page, err := e.svc.History(context.Background(), "main", "", 10)
			if err != nil || len(page.Messages) != 2 {
				t.Fatalf("history = %+v, %v", page, err)
			}
			u, a := page.Messages[0], page.Messages[1]
			if u.ID != res.UserMessageID || u.Role != "user" || u.Content != "What is QK-7731?" || u.RunID != res.RunID || u.SessionID != res.SessionID {
				t.Errorf("user message = %+v", u)
			}
			if a.ID != res.MessageID || a.Role != "assistant" || a.Content != text || len(a.Sources) != tc.sources || a.Error != "" {
				t.Errorf("assistant message = %+v", a)
			}
		})
	}
}

func TestModelRunStreamsAndPersists(t *testing.T) {
	ms := newModelServer(t, func(w http.ResponseWriter, r *http.Request) {
		modeltest.Stream(w, modeltest.Chunk(`{"reasoning_content":"The user greets me."}`, ""), modeltest.Text("Hello"), modeltest.Text(", Ada!"),
			modeltest.Chunk(`{}`, "stop"), "[DONE]")
	})
	e := newEnv(t, ms.provider(), nil)
	if p := e.svc.Profiles()[0]; p.Provider != "openai" || p.Model != "scripted" || p.State != StateIdle {
		t.Fatalf("profile = %+v", p)
	}
	res := e.send(t, "s-1", "  Hi, I am Ada  ")
	if res.SessionID != "s-1" {
		t.Fatalf("session = %s", res.SessionID)
	}
	evs := e.rec.runEvents(t, res.RunID)
	final := checkRun(t, res, evs).payload.(FinalEvent)
	if final.Message.Content != "Hello, Ada!" || chunksText(evs) != "Hello, Ada!" {
		t.Fatalf("final = %+v", final.Message)
	}
	chats := chatEvents(evs)
	if r, ok := chats[1].payload.(ReasoningEvent); !ok || r.Delta != "The user greets me." {
		t.Fatalf("event 1 = %+v", chats[1])
	}
	// The agent loop's moves, each an agent.state event (SPEC §6).
	if got := statePath(evs); got != "idle>analyzing>planning>reporting>idle" {
		t.Fatalf("states %s", got)
	}
	// The request: system prompt, the (trimmed) user message, the tool offered.
	body := ms.body(0)
	msgs := wireMessages(body)
	if len(msgs) != 2 || msgs[0]["role"] != "system" || !strings.Contains(msgs[0]["content"].(string), "Atrium") ||
		msgs[1]["role"] != "user" || msgs[1]["content"] != "Hi, I am Ada" {
		t.Fatalf("messages = %v", msgs)
	}
	tools := body["tools"].([]any)
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "memory_search" || !strings.Contains(fmt.Sprint(fn["parameters"]), "query") {
		t.Fatalf("tools = %v", tools)
	}
	got, err := e.store.Get(context.Background(), res.MessageID)
	if err != nil || got.Content != "Hello, Ada!" || got.RunID != res.RunID {
		t.Fatalf("stored = %+v, %v", got, err)
	}
}

func TestToolRounds(t *testing.T) {
	tests := []struct {
		name       string
		args       []string // streamed argument pieces
		wantQuery  string   // "" = no search expected
		toolResult []string // substrings of the tool message sent back
		sources    int
	}{
		{
			name: "search then answer", args: []string{`{"que`, `ry": "QK-77`, `31", "maxResults": 3}`},
			wantQuery: "QK-7731", toolResult: []string{`"path":"memory/global/decisions.md"`, `"startLine":3`, "QK-7731 is the launch code"},
			sources: 2,
		},
		{
			name: "invalid JSON is fed back", args: []string{`{"query": "QK`},
			toolResult: []string{`"status":"error"`, "not valid JSON", "call memory_search again"},
		},
		{
			name: "missing query is fed back", args: []string{`{"maxResults": 2}`},
			toolResult: []string{`"status":"error"`, "invalid tool arguments for memory_search", `missing property 'query'`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms := newModelServer(t, toolCall("call_1", tc.args...), answer("QK-7731 is ", "Heron's launch code."))
			e := newEnv(t, ms.provider(), &fakeSearcher{results: sampleHits})
			res := e.send(t, "", "What is QK-7731?")
			evs := e.rec.runEvents(t, res.RunID)
			final, ok := checkRun(t, res, evs).payload.(FinalEvent)
			if !ok {
				t.Fatalf("terminal = %+v", evs[len(evs)-1])
			}
			if final.Message.Content != "QK-7731 is Heron's launch code." {
				t.Fatalf("content = %q", final.Message.Content)
			}
			if len(final.Message.Sources) != tc.sources {
				t.Fatalf("sources = %+v", final.Message.Sources)
			}
			q := e.mem.seen()
			if tc.wantQuery == "" && len(q) != 0 || tc.wantQuery != "" && (len(q) != 1 || q[0].Query != tc.wantQuery || q[0].MaxResults != 3) {
				t.Fatalf("searches = %+v", q)
			}
			if ms.count() != 2 {
				t.Fatalf("%d model calls", ms.count())
			}
			msgs := wireMessages(ms.body(1))
			asst, tool := msgs[len(msgs)-2], msgs[len(msgs)-1]
			calls := asst["tool_calls"].([]any)
			if asst["role"] != "assistant" || calls[0].(map[string]any)["id"] != "call_1" {
				t.Fatalf("assistant turn = %v", asst)
			}
			if tool["role"] != "tool" || tool["tool_call_id"] != "call_1" {
				t.Fatalf("tool turn = %v", tool)
			}
			for _, w := range tc.toolResult {
				if !strings.Contains(tool["content"].(string), w) {
					t.Errorf("tool result %s lacks %s", tool["content"], w)
				}
			}
		})
	}
}

func TestToolRoundsAreCapped(t *testing.T) {
	ms := newModelServer(t, toolCall("c1", `{"query":"a"}`), toolCall("c2", `{"query":"b"}`),
		toolCall("c3", `{"query":"c"}`), toolCall("c4", `{"query":"d"}`), answer("Enough searching."))
	e := newEnv(t, ms.provider(), &fakeSearcher{results: sampleHits[:1]})
	res := e.send(t, "", "dig deep")
	evs := e.rec.runEvents(t, res.RunID)
	if final, ok := checkRun(t, res, evs).payload.(FinalEvent); !ok || final.Message.Content != "Enough searching." {
		t.Fatalf("terminal = %+v", evs[len(evs)-1])
	}
	if ms.count() != 5 || len(e.mem.seen()) != 4 {
		t.Fatalf("model calls %d, searches %d", ms.count(), len(e.mem.seen()))
	}
	for i := range 4 {
		if _, ok := ms.body(i)["tools"]; !ok {
			t.Fatalf("round %d offered no tools", i)
		}
	}
	if _, ok := ms.body(4)["tools"]; ok {
		t.Fatal("the last round still offered tools")
	}
}

func TestTextBeforeToolCallIsSeparated(t *testing.T) {
	ms := newModelServer(t, func(w http.ResponseWriter, r *http.Request) {
		modeltest.Stream(w, modeltest.Text("Let me check."),
			modeltest.Chunk(`{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"memory_search","arguments":"{\"query\":\"x\"}"}}]}`, ""),
			modeltest.Chunk(`{}`, "tool_calls"), "[DONE]")
	}, answer("Found it."))
	e := newEnv(t, ms.provider(), nil)
	res := e.send(t, "", "q")
	evs := e.rec.runEvents(t, res.RunID)
	final := checkRun(t, res, evs).payload.(FinalEvent)
	if final.Message.Content != "Let me check.\n\nFound it." || chunksText(evs) != final.Message.Content {
		t.Fatalf("content = %q", final.Message.Content)
	}
}

func TestModelFailures(t *testing.T) {
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		contains string
		partial  string
		// retryable: chat.error's retryable (the server may answer later)
		retryable bool
	}{
		{"http 500", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			w.Write([]byte(`{"error":{"message":"CUDA out of memory"}}`))
		}, "HTTP 500 Internal Server Error: CUDA out of memory", "", true},
		{"garbage body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("hello, I am not a model"))
		}, "did not answer with an event stream", "", false},
		{"cut stream", func(w http.ResponseWriter, r *http.Request) {
			modeltest.Stream(w, modeltest.Text("I was about to"))
			if conn, buf, err := http.NewResponseController(w).Hijack(); err == nil {
				buf.Flush()
				conn.Close()
			}
		}, "stopped before it was complete", "I was about to", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms := newModelServer(t, tc.handler, answer("Back again."))
			e := newEnv(t, ms.provider(), nil)
			res := e.send(t, "s", "hello")
			evs := e.rec.runEvents(t, res.RunID)
			ev, ok := checkRun(t, res, evs).payload.(ErrorEvent)
			if !ok || ev.Error.Code != CodeUnavailable || !strings.Contains(ev.Error.Message, tc.contains) ||
				!strings.Contains(ev.Error.Message, ms.srv.URL) || ev.Error.Retryable != tc.retryable {
				t.Fatalf("terminal = %+v", evs[len(evs)-1])
			}
			page, _ := e.svc.History(context.Background(), "main", "", 10)
			if len(page.Messages) != 2 || page.Messages[0].Content != "hello" ||
				page.Messages[1].Error != ev.Error.Message || page.Messages[1].Content != tc.partial {
				t.Fatalf("history = %+v", page.Messages)
			}
			// The service keeps working, in the same session.
			res2 := e.send(t, "s", "still there?")
			evs2 := e.rec.runEvents(t, res2.RunID)
			final, ok := checkRun(t, res2, evs2).payload.(FinalEvent)
			if !ok || final.Message.Content != "Back again." {
				t.Fatalf("second run = %+v", evs2[len(evs2)-1])
			}
			// The failed answer's partial text is context; an empty failed answer is not.
			msgs := wireMessages(ms.body(1))
			if tc.partial != "" && (len(msgs) != 4 || msgs[2]["content"] != tc.partial) ||
				tc.partial == "" && len(msgs) != 3 {
				t.Fatalf("second context = %v", msgs)
			}
		})
	}
}

func TestModelServerDown(t *testing.T) {
	addr := closedAddr(t)
	p := model.NewOpenAI(model.OpenAIOptions{BaseURL: "http://" + addr + "/v1", Model: "m"})
	e := newEnv(t, p, nil)
	for i := range 2 {
		res := e.send(t, "s", fmt.Sprintf("hello %d", i))
		evs := e.rec.runEvents(t, res.RunID)
		ev, ok := checkRun(t, res, evs).payload.(ErrorEvent)
		want := "model server at http://" + addr + " is unreachable: connection refused"
		if !ok || ev.Error.Code != CodeUnavailable || ev.Error.Message != want || !ev.Error.Retryable {
			t.Fatalf("terminal = %+v, want message %q, retryable", evs[len(evs)-1], want)
		}
	}
	page, _ := e.svc.History(context.Background(), "main", "", 10)
	if len(page.Messages) != 4 || page.Messages[2].Content != "hello 1" {
		t.Fatalf("history = %+v", page.Messages)
	}
}

func TestCancel(t *testing.T) {
	for _, byRunID := range []bool{true, false} {
		t.Run(fmt.Sprintf("byRunID=%v", byRunID), func(t *testing.T) {
			ms := newModelServer(t)
			ms.handlers = []http.HandlerFunc{ms.slow("partial ", "answer")}
			// writer-1 is an instance id the service knows (a real one in
			// backend/atrium's instance tests): its cancels reach Cancel.
			e := newEnv(t, ms.provider(), nil, func(o *Options) { o.Remote = knownInstances{"writer-1": "writer"} })
			res := e.send(t, "mine", "tell me a long story")
			e.rec.until(t, res.RunID, func(ev event) bool {
				c, ok := ev.payload.(ChunkEvent)
				return ok && c.Seq == 2
			})
			if e.svc.Profiles()[0].State != StateRunning {
				t.Fatal("profile not running")
			}
			// Neither another session nor another profile cancels this run
			// (by its id or by its session): NOT_FOUND, the same answer as
			// for no run at all, and the run goes on.
			for _, foreign := range []CancelRequest{
				{ProfileID: "main", SessionID: "theirs", RunID: res.RunID},
				{ProfileID: "writer-1", SessionID: "mine", RunID: res.RunID},
				{ProfileID: "writer-1", SessionID: "mine"},
				{ProfileID: "main", SessionID: "theirs"},
			} {
				ok, err := e.svc.Cancel(foreign)
				if ok || !errors.Is(err, ErrNotFound) || ErrorCode(err) != "NOT_FOUND" || !strings.Contains(err.Error(), "in progress for profile "+foreign.ProfileID+" in session "+foreign.SessionID) {
					t.Fatalf("foreign cancel %+v = %v, %v; want NOT_FOUND", foreign, ok, err)
				}
			}
			if e.svc.Profiles()[0].State != StateRunning {
				t.Fatal("a foreign cancel stopped the run")
			}
			if _, err := e.svc.Send(context.Background(), SendRequest{ProfileID: "main", SessionID: "mine", Message: "x"}); !errors.Is(err, ErrBusy) || !Retryable(err) || ErrorCode(err) != "CONFLICT" {
				t.Fatalf("second send: %v (want a retryable CONFLICT)", err)
			}
			req := CancelRequest{ProfileID: "main", SessionID: "mine"}
			if byRunID {
				req.RunID = res.RunID
			}
			ok, err := e.svc.Cancel(req)
			if !ok || err != nil {
				t.Fatalf("cancel = %v, %v", ok, err)
			}
			evs := e.rec.runEvents(t, res.RunID)
			ev, isCancel := evs[len(evs)-1].payload.(CancelledEvent)
			if !isCancel || ev.Reason != ReasonCancelled || ev.Message == nil || ev.Message.Content != "partial answer" ||
				ev.Message.Error != history.ErrorCancelled || ev.Message.ID != res.MessageID {
				t.Fatalf("terminal = %+v", evs[len(evs)-1])
			}
			stored, err := e.store.Get(context.Background(), res.MessageID)
			if err != nil || stored.Content != "partial answer" || stored.Error != "cancelled" {
				t.Fatalf("stored = %+v, %v", stored, err)
			}
			// Nothing left to cancel, and the session is free again.
			if ok, err := e.svc.Cancel(req); ok || !errors.Is(err, ErrNotFound) {
				t.Fatalf("second cancel = %v, %v; want NOT_FOUND", ok, err)
			}
			ms.handlers = []http.HandlerFunc{answer("ok")}
			res2 := e.send(t, "mine", "short one then")
			if _, ok := checkRun(t, res2, e.rec.runEvents(t, res2.RunID)).payload.(FinalEvent); !ok {
				t.Fatal("no final after cancel")
			}
		})
	}
}

// knownInstances is a RemoteRunner that only names instances (id →
// profile), all stopped: checkProfile accepts their ids, and no run can go
// to them.
type knownInstances map[string]string

func (k knownInstances) Instance(id string) (RemoteInstance, bool) {
	p, ok := k[id]
	return RemoteInstance{ID: id, ProfileID: p, State: "stopped"}, ok
}
func (knownInstances) Start(id string) error {
	return fmt.Errorf("%w: %s cannot start here", ErrUnavailable, id)
}
func (knownInstances) Persona(string) (string, error) { return "", nil }
func (knownInstances) Offline(string) bool            { return false }
func (knownInstances) Stream(context.Context, RemoteRequest, func(model.Delta)) (model.Response, error) {
	return model.Response{}, &RemoteError{Kind: "stopped", Message: "not running"}
}

func TestCancelBeforeAnyText(t *testing.T) {
	ms := newModelServer(t)
	ms.handlers = []http.HandlerFunc{ms.slow()}
	e := newEnv(t, ms.provider(), nil)
	res := e.send(t, "s", "hi")
	evs := e.rec.until(t, res.RunID, func(ev event) bool { return ev.name == EventThinking })
	if ok, err := e.svc.Cancel(CancelRequest{ProfileID: "main", SessionID: "s", RunID: res.RunID}); !ok || err != nil {
		t.Fatalf("cancel = %v, %v", ok, err)
	}
	evs = append(evs, e.rec.runEvents(t, res.RunID)...)
	if ev, ok := checkRun(t, res, evs).payload.(CancelledEvent); !ok || ev.Message != nil {
		t.Fatalf("terminal = %+v", evs[len(evs)-1])
	}
	b, _ := json.Marshal(evs[len(evs)-1].payload)
	if strings.Contains(string(b), "message\"") {
		t.Fatalf("payload = %s", b)
	}
	page, _ := e.svc.History(context.Background(), "main", "", 10)
	if len(page.Messages) != 1 {
		t.Fatalf("history = %+v", page.Messages)
	}
}

func TestRunTimeout(t *testing.T) {
	ms := newModelServer(t)
	ms.handlers = []http.HandlerFunc{ms.slow("thinking about it")}
	e := newEnv(t, ms.provider(), nil, func(o *Options) { o.RunTimeout = time.Second })
	res := e.send(t, "", "hi")
	evs := e.rec.runEvents(t, res.RunID)
	ev, ok := checkRun(t, res, evs).payload.(ErrorEvent)
	if !ok || ev.Error.Code != CodeTimeout || !strings.Contains(ev.Error.Message, "longer than 1s") {
		t.Fatalf("terminal = %+v", evs[len(evs)-1])
	}
	// What was streamed before the timeout is kept. (On a loaded machine
	// the first chunk may not arrive within the timeout: then nothing was
	// streamed and nothing is kept; the test does not depend on which.)
	var streamed string
	for _, ev := range evs {
		if c, ok := ev.payload.(ChunkEvent); ok {
			streamed += c.Delta
		}
	}
	stored, err := e.store.Get(context.Background(), res.MessageID)
	if err != nil || stored.Content != streamed || stored.Error == "" || streamed != "" && streamed != "thinking about it" {
		t.Fatalf("stored = %+v, %v; streamed %q", stored, err, streamed)
	}
}

func TestCloseCancelsRuns(t *testing.T) {
	ms := newModelServer(t)
	ms.handlers = []http.HandlerFunc{ms.slow("half")}
	e := newEnv(t, ms.provider(), nil)
	res := e.send(t, "", "hi")
	e.rec.until(t, res.RunID, func(ev event) bool { return ev.name == EventChunk })
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited: the terminal event is already recorded.
	e.rec.mu.Lock()
	last := e.rec.events[len(e.rec.events)-1]
	e.rec.mu.Unlock()
	if ev, ok := last.payload.(CancelledEvent); !ok || ev.Reason != ReasonInterrupted || ev.Message == nil ||
		ev.Message.Content != "half" || ev.Message.Error != history.ErrorInterrupted {
		t.Fatalf("last event = %+v", last)
	}
	stored, err := e.store.Get(context.Background(), res.MessageID)
	if err != nil || stored.Content != "half" || stored.Error != history.ErrorInterrupted {
		t.Fatalf("stored = %+v, %v", stored, err)
	}
	if _, err := e.svc.Send(context.Background(), SendRequest{ProfileID: "main", Message: "x"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestIdempotentSend(t *testing.T) {
	e := newEnv(t, nil, nil)
	req := SendRequest{ProfileID: "main", Message: "once", IdempotencyKey: "k1"}
	a, err := e.svc.Send(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.svc.Send(context.Background(), req)
	if err != nil || a != b {
		t.Fatalf("repeat = %+v, %v; first %+v", b, err, a)
	}
	e.rec.runEvents(t, a.RunID)
	c, err := e.svc.Send(context.Background(), req) // after the run ended, still the first result
	if err != nil || c != a {
		t.Fatalf("late repeat = %+v, %v", c, err)
	}
	page, _ := e.svc.History(context.Background(), "main", "", 10)
	if len(page.Messages) != 2 {
		t.Fatalf("history = %+v", page.Messages)
	}
}

func TestInvalidRequests(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"unknown profile", func() error {
			_, err := e.svc.Send(ctx, SendRequest{ProfileID: "writer", Message: "x"})
			return err
		}, ErrNotFound},
		{"no profile", func() error { _, err := e.svc.Send(ctx, SendRequest{Message: "x"}); return err }, ErrInvalidInput},
		{"blank message", func() error {
			_, err := e.svc.Send(ctx, SendRequest{ProfileID: "main", Message: " \n\t"})
			return err
		}, ErrInvalidInput},
		{"huge message", func() error {
			_, err := e.svc.Send(ctx, SendRequest{ProfileID: "main", Message: strings.Repeat("x", MaxMessageChars+1)})
			return err
		}, ErrInvalidInput},
		{"session id with a slash", func() error {
			_, err := e.svc.Send(ctx, SendRequest{ProfileID: "main", SessionID: "../etc", Message: "x"})
			return err
		}, ErrInvalidInput},
		{"cancel without session", func() error { _, err := e.svc.Cancel(CancelRequest{ProfileID: "main"}); return err }, ErrInvalidInput},
		{"cancel unknown profile", func() error {
			_, err := e.svc.Cancel(CancelRequest{ProfileID: "x", SessionID: "s"})
			return err
		}, ErrNotFound},
		{"history unknown profile", func() error { _, err := e.svc.History(ctx, "x", "", 1); return err }, ErrNotFound},
		{"history unknown cursor", func() error { _, err := e.svc.History(ctx, "main", "nope", 1); return err }, ErrNotFound},
		{"new without memory", func() error { _, err := New(Options{Emit: func(string, any) {}}); return err }, ErrInvalidInput},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if ok, err := e.svc.Cancel(CancelRequest{ProfileID: "main", SessionID: "s", RunID: "unknown"}); ok || !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel unknown run = %v, %v; want NOT_FOUND", ok, err)
	}
}

func TestContextIsCapped(t *testing.T) {
	ms := newModelServer(t, answer("ok"))
	e := newEnv(t, ms.provider(), nil)
	ctx := context.Background()
	for i := range 40 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		content := fmt.Sprintf("msg-%02d ", i) + strings.Repeat("é", 300)
		if i == 39 {
			content = "msg-39 " + strings.Repeat("long ", 1000) // cut at 2000 characters
		}
		if i == 37 {
			content = "" // a failed answer without text: skipped
		}
		if err := e.store.Append(ctx, history.Message{ID: fmt.Sprintf("h%02d", i), ProfileID: "main", SessionID: "s", Role: role,
			Content: content, TS: int64(1000 + i), Error: map[bool]string{true: "boom"}[i == 37]}); err != nil {
			t.Fatal(err)
		}
	}
	// Another session never leaks in.
	e.store.Append(ctx, history.Message{ID: "other", ProfileID: "main", SessionID: "t", Role: "user", Content: "secret", TS: 5000})
	res := e.send(t, "s", "latest question")
	e.rec.runEvents(t, res.RunID)
	msgs := wireMessages(ms.body(0))
	if msgs[0]["role"] != "system" || msgs[len(msgs)-1]["content"] != "latest question" {
		t.Fatalf("ends = %v / %v", msgs[0], msgs[len(msgs)-1])
	}
	hist := msgs[1 : len(msgs)-1]
	total := 0
	for _, m := range hist {
		c := m["content"].(string)
		total += len([]rune(c))
		if len([]rune(c)) > HistoryMessageChars+1 || c == "" || strings.Contains(c, "secret") {
			t.Fatalf("bad history message %q", c[:min(40, len(c))])
		}
	}
	if len(hist) > DefaultHistoryMessages || total > DefaultHistoryChars {
		t.Fatalf("history: %d messages, %d chars", len(hist), total)
	}
	if !strings.HasPrefix(hist[len(hist)-1]["content"].(string), "msg-39") || !strings.HasPrefix(hist[len(hist)-2]["content"].(string), "msg-38") {
		t.Fatalf("newest not kept: %v", hist[len(hist)-1]["content"].(string)[:10])
	}
	t.Logf("context: %d history messages, %d chars", len(hist), total)
}

func TestEventJSONShapes(t *testing.T) {
	ref := RunRef{RunID: "r", ProfileID: "main", SessionID: "s", MessageID: "m"}
	tests := []struct {
		payload any
		want    string
	}{
		{ThinkingEvent{RunRef: ref, UserMessage: history.Message{ID: "u", ProfileID: "main", SessionID: "s", RunID: "r", Role: "user", Content: "q", TS: 1}},
			`{"runId":"r","profileId":"main","sessionId":"s","messageId":"m","userMessage":{"id":"u","profileId":"main","sessionId":"s","runId":"r","role":"user","content":"q","ts":1}}`},
		{ChunkEvent{RunRef: ref, Delta: "d", Seq: 3}, `{"runId":"r","profileId":"main","sessionId":"s","messageId":"m","delta":"d","seq":3}`},
		{ReasoningEvent{RunRef: ref, Delta: "d"}, `{"runId":"r","profileId":"main","sessionId":"s","messageId":"m","delta":"d"}`},
		{FinalEvent{RunRef: ref, Message: history.Message{ID: "m", ProfileID: "main", SessionID: "s", RunID: "r", Role: "assistant", Content: "c", TS: 1}},
			`{"runId":"r","profileId":"main","sessionId":"s","messageId":"m","message":{"id":"m","profileId":"main","sessionId":"s","runId":"r","role":"assistant","content":"c","ts":1}}`},
		{CancelledEvent{RunRef: ref, Reason: ReasonCancelled}, `{"runId":"r","profileId":"main","sessionId":"s","messageId":"m","reason":"cancelled"}`},
		{ErrorEvent{RunRef: ref, Error: RunError{Code: "UNAVAILABLE", Message: "x"}},
			`{"runId":"r","profileId":"main","sessionId":"s","messageId":"m","error":{"code":"UNAVAILABLE","message":"x"}}`},
		{SendResult{RunID: "r", MessageID: "m", SessionID: "s", UserMessageID: "u"}, `{"runId":"r","messageId":"m","sessionId":"s","userMessageId":"u"}`},
	}
	for _, tc := range tests {
		b, _ := json.Marshal(tc.payload)
		if string(b) != tc.want {
			t.Errorf("%T JSON = %s\nwant %s", tc.payload, b, tc.want)
		}
	}
}

func TestSearcherArgsClamped(t *testing.T) {
	ms := newModelServer(t, toolCall("c", `{"query":"x","maxResults":500,"minScore":0}`), answer("done"))
	mem := &fakeSearcher{results: []memory.SearchResult{{Path: "a.md", StartLine: 1, EndLine: 1, Snippet: strings.Repeat("<&>", 5000)}}}
	e := newEnv(t, ms.provider(), mem)
	res := e.send(t, "", "q")
	e.rec.runEvents(t, res.RunID)
	q := mem.seen()
	if len(q) != 1 || q[0].MaxResults != 20 || q[0].MinScore >= 0 {
		t.Fatalf("search options = %+v", q)
	}
	msgs := wireMessages(ms.body(1))
	content := msgs[len(msgs)-1]["content"].(string)
	if len(content) > MaxToolResultChars || !strings.Contains(content, "<&>") || !strings.Contains(content, `"truncated":true`) {
		t.Fatalf("tool result (%d bytes) = %.200s", len(content), content)
	}
	var parsed map[string]any
	if err := json.Unmarshal([]byte(content), &parsed); err != nil {
		t.Fatalf("tool result is not JSON: %v", err)
	}
}

func TestErrorCode(t *testing.T) {
	tests := map[error]string{
		fmt.Errorf("x: %w", ErrNotFound):     "NOT_FOUND",
		fmt.Errorf("x: %w", ErrInvalidInput): "INVALID_REQUEST",
		fmt.Errorf("x: %w", ErrForbidden):    "FORBIDDEN",
		fmt.Errorf("x: %w", ErrBusy):         "CONFLICT",
		fmt.Errorf("x: %w", ErrClosed):       "UNAVAILABLE",
		fmt.Errorf("x: %w", ErrUnavailable):  "UNAVAILABLE",
		errors.New("disk full"):              "INTERNAL",
	}
	for err, want := range tests {
		if got := ErrorCode(err); got != want {
			t.Errorf("ErrorCode(%v) = %s, want %s", err, got, want)
		}
		// Only a busy session, a closing service or an instance not ready
		// yet is worth repeating as is.
		if got, want := Retryable(err), errors.Is(err, ErrBusy) || errors.Is(err, ErrClosed) || errors.Is(err, ErrUnavailable); got != want {
			t.Errorf("Retryable(%v) = %v, want %v", err, got, want)
		}
	}
}

// Both providers satisfy model.Provider.
var (
	_ model.Provider = (*Offline)(nil)
	_ model.Provider = (*model.OpenAI)(nil)
	_ Searcher       = (*fakeSearcher)(nil)
)

func TestContextKeepsTenUserTurns(t *testing.T) {
	ms := newModelServer(t, answer("ok"))
	e := newEnv(t, ms.provider(), nil, func(o *Options) { o.HistoryMessages = 100 })
	ctx := context.Background()
	for i := range 14 {
		for j, role := range []string{"user", "assistant"} {
			if err := e.store.Append(ctx, history.Message{ID: fmt.Sprintf("t%02d%d", i, j), ProfileID: "main", SessionID: "s",
				Role: role, Content: fmt.Sprintf("%s-%02d 第%d轮", role, i, i), TS: int64(1000 + 2*i + j)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	res := e.send(t, "s", "latest question")
	e.rec.runEvents(t, res.RunID)
	msgs := wireMessages(ms.body(0))
	hist := msgs[1 : len(msgs)-1]
	users := 0
	for _, m := range hist {
		if m["role"] == "user" {
			users++
		}
	}
	if users != convo.DefaultUserTurns || hist[0]["content"] != "user-04 第4轮" || hist[len(hist)-1]["content"] != "assistant-13 第13轮" {
		t.Fatalf("%d user turns, first %v, last %v", users, hist[0]["content"], hist[len(hist)-1]["content"])
	}
}

// A tool output over MaxClientToolData reaches clients cut, with its
// size; shorter ones and the stored message stay whole.
func TestForClientCutsLongToolData(t *testing.T) {
	long, _ := json.Marshal(strings.Repeat("数据 data ", MaxClientToolData))
	m := history.Message{ID: "a", Tools: []history.ToolRecord{
		{CallID: "c1", Tool: "web_fetch", Data: long},
		{CallID: "c2", Tool: "memory_search", Data: json.RawMessage(`{"results":[]}`)},
	}}
	got := ForClient(m)
	if len(m.Tools[0].Data) != len(long) {
		t.Fatal("ForClient changed the stored message")
	}
	c := got.Tools[0]
	var head string
	if err := json.Unmarshal(c.Data, &head); err != nil || !c.DataTruncated || c.DataBytes != len(long) ||
		len(head) > MaxClientToolData || !utf8.ValidString(head) || !strings.HasPrefix(string(long), head[:100]) {
		t.Fatalf("cut tool data: truncated %v, bytes %d, head %d bytes, err %v", c.DataTruncated, c.DataBytes, len(head), err)
	}
	if string(got.Tools[1].Data) != `{"results":[]}` || got.Tools[1].DataTruncated {
		t.Fatalf("short tool data changed: %+v", got.Tools[1])
	}
}

// History pages fit a gateway frame: texts over MaxClientContent are cut
// (with their size), and a page of many large messages stops at
// MaxClientPageBytes with a cursor to the rest, so that following the
// cursors still yields every message once.
func TestHistoryPagesFitAFrame(t *testing.T) {
	e := newEnv(t, NewOffline(OfflineOptions{}), &fakeSearcher{})
	ctx := context.Background()
	big := strings.Repeat("长答案 long answer ", (MaxClientContent+MaxClientContent/4)/22)
	for i := 0; i < 6; i++ {
		if err := e.store.Append(ctx, history.Message{ID: fmt.Sprintf("m%02d", i), ProfileID: "main", SessionID: "s",
			Role: "assistant", Content: fmt.Sprintf("%02d ", i) + big, TS: int64(1000 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	before, pages := "", 0
	for {
		page, err := e.svc.History(ctx, "main", before, 50)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		b, _ := json.Marshal(page)
		if len(b) > MaxClientPageBytes+MaxClientContent {
			t.Fatalf("page %d is %d bytes", pages, len(b))
		}
		for _, m := range page.Messages {
			if seen[m.ID] {
				t.Fatalf("%s twice", m.ID)
			}
			seen[m.ID] = true
			if !m.ContentTruncated || m.ContentBytes != len(fmt.Sprintf("%02d ", 0)+big) || len(m.Content) > MaxClientContent || !utf8.ValidString(m.Content) {
				t.Fatalf("%s: truncated %v, %d of %d bytes", m.ID, m.ContentTruncated, len(m.Content), m.ContentBytes)
			}
		}
		if page.NextBefore == "" {
			break
		}
		before = page.NextBefore
	}
	if len(seen) != 6 || pages < 2 {
		t.Fatalf("%d messages in %d pages", len(seen), pages)
	}
}

// A conversation belongs to one profile: sending into another profile's
// conversation is refused (its history would become this profile's
// context), before anything is stored.
func TestConversationBelongsToOneProfile(t *testing.T) {
	e := newEnv(t, NewOffline(OfflineOptions{}), &fakeSearcher{})
	ctx := context.Background()
	if err := e.store.Append(ctx, history.Message{ID: "w1", ProfileID: "writer-1", SessionID: "s", ConversationID: "conv-w",
		Role: "user", Content: "writer's private draft", TS: 1000}); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Send(ctx, SendRequest{ProfileID: "main", SessionID: "s2", ConversationID: "conv-w", Message: "what did writer say?"})
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "belongs to profile writer-1") {
		t.Fatalf("send into another profile's conversation: %v", err)
	}
	page, err := e.svc.ConversationHistory(ctx, "conv-w", "", 50)
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("conversation after the refused send: %d messages, %v", len(page.Messages), err)
	}
	if _, err := e.svc.Send(ctx, SendRequest{ProfileID: "main", SessionID: "s2", ConversationID: "conv-main", Message: "hi"}); err != nil {
		t.Fatalf("send into a new conversation: %v", err)
	}
}
