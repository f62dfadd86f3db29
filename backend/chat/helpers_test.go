package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"

	"github.com/atrium-dev/atrium/backend/model/modeltest"
	"github.com/atrium-dev/atrium/backend/statedb"
)

// ---- fake memory ----

type fakeSearcher struct {
	mu      sync.Mutex
	results []memory.SearchResult
	err     error
	queries []memory.SearchOptions
}

func (f *fakeSearcher) Search(ctx context.Context, o memory.SearchOptions) (memory.SearchResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, o)
	if f.err != nil {
		return memory.SearchResponse{}, f.err
	}
	return memory.SearchResponse{Results: f.results, Provider: "builtin", Model: "hash"}, nil
}

func (f *fakeSearcher) seen() []memory.SearchOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]memory.SearchOptions(nil), f.queries...)
}

var sampleHits = []memory.SearchResult{
	{Path: "memory/global/decisions.md", StartLine: 3, EndLine: 7, Score: 0.82, Layer: "global", Source: "memory",
		Snippet: "## Launch\nQK-7731 is the launch code for project Heron.\n\nDecided on 2024-05-01."},
	{Path: "MEMORY.md", StartLine: 10, EndLine: 12, Score: 0.51, Layer: "role", Role: "main", Source: "memory",
		Snippet: "Heron ships in June."},
}

// ---- events ----

type event struct {
	name    string
	payload any
}

type recorder struct {
	mu     sync.Mutex
	events []event
	ch     chan event
}

func newRecorder() *recorder { return &recorder{ch: make(chan event, 4096)} }

func (r *recorder) emit(name string, payload any) {
	r.mu.Lock()
	r.events = append(r.events, event{name, payload})
	r.mu.Unlock()
	r.ch <- event{name, payload}
}

func ref(p any) RunRef {
	switch v := p.(type) {
	case ThinkingEvent:
		return v.RunRef
	case ReasoningEvent:
		return v.RunRef
	case ChunkEvent:
		return v.RunRef
	case FinalEvent:
		return v.RunRef
	case CancelledEvent:
		return v.RunRef
	case ErrorEvent:
		return v.RunRef
	case StateEvent:
		return v.RunRef
	case ToolEvent:
		return v.RunRef
	case PermissionRequest:
		return v.RunRef
	case MessageDeletedEvent, PermissionAnsweredEvent, ResetEvent: // not an event of a run
		return RunRef{}
	}
	panic(fmt.Sprintf("unexpected payload %T", p))
}

func terminal(name string) bool {
	return name == EventFinal || name == EventCancelled || name == EventError
}

// until reads events until one for runID satisfies stop, and returns the
// run's events seen so far. It fails after a generous deadline.
func (r *recorder) until(t *testing.T, runID string, stop func(event) bool) []event {
	t.Helper()
	var got []event
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-r.ch:
			if ref(e.payload).RunID != runID {
				continue
			}
			got = append(got, e)
			if stop(e) {
				return got
			}
		case <-deadline:
			t.Fatalf("run %s: no matching event; got %v", runID, got)
		}
	}
}

// runEvents waits for the run's terminal event and returns all its events.
func (r *recorder) runEvents(t *testing.T, runID string) []event {
	t.Helper()
	return r.until(t, runID, func(e event) bool { return terminal(e.name) })
}

// ---- service ----

type env struct {
	svc   *Service
	store *history.Store
	mem   *fakeSearcher
	rec   *recorder
}

func newEnv(t *testing.T, p model.Provider, mem *fakeSearcher, edit ...func(*Options)) *env {
	t.Helper()
	db, err := statedb.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := history.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if mem == nil {
		mem = &fakeSearcher{}
	}
	rec := newRecorder()
	opts := Options{History: store, Provider: p, Memory: mem, Emit: rec.emit}
	for _, e := range edit {
		e(&opts)
	}
	svc, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return &env{svc: svc, store: store, mem: mem, rec: rec}
}

func (e *env) send(t *testing.T, session, text string) SendResult {
	t.Helper()
	res, err := e.svc.Send(context.Background(), SendRequest{ProfileID: "main", SessionID: session, Message: text})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkRun verifies the invariants every run's events must hold and returns
// the terminal event.
func checkRun(t *testing.T, res SendResult, evs []event) event {
	t.Helper()
	want := RunRef{RunID: res.RunID, ProfileID: "main", SessionID: res.SessionID, MessageID: res.MessageID}
	if len(evs) == 0 || evs[0].name != EventThinking {
		t.Fatalf("first event = %v, want chat.thinking", evs)
	}
	seq := 0
	for i, e := range evs {
		if ref(e.payload) != want {
			t.Fatalf("event %d %s carries %+v, want %+v", i, e.name, ref(e.payload), want)
		}
		if c, ok := e.payload.(ChunkEvent); ok {
			seq++
			if c.Seq != seq {
				t.Fatalf("chunk seq %d, want %d", c.Seq, seq)
			}
		}
		if terminal(e.name) != (i == len(evs)-1) {
			t.Fatalf("terminal event out of place: %v", evs)
		}
	}
	return evs[len(evs)-1]
}

// chatEvents returns the chat.* events of evs (without the agent loop's).
func chatEvents(evs []event) []event {
	var out []event
	for _, e := range evs {
		if strings.HasPrefix(e.name, "chat.") && e.name != EventTool {
			out = append(out, e)
		}
	}
	return out
}

// statePath is the agent.state moves of evs as "from>to>to…".
func statePath(evs []event) string {
	var path []string
	for _, e := range evs {
		if st, ok := e.payload.(StateEvent); ok {
			if len(path) == 0 {
				path = append(path, st.From)
			}
			path = append(path, st.To)
		}
	}
	return strings.Join(path, ">")
}

func chunksText(evs []event) string {
	s := ""
	for _, e := range evs {
		if c, ok := e.payload.(ChunkEvent); ok {
			s += c.Delta
		}
	}
	return s
}

// ---- scripted OpenAI-compatible server ----

type modelServer struct {
	mu       sync.Mutex
	bodies   []map[string]any
	handlers []http.HandlerFunc
	srv      *httptest.Server
	release  chan struct{}
}

// newModelServer serves request i with handlers[i] (the last one repeats).
func newModelServer(t *testing.T, handlers ...http.HandlerFunc) *modelServer {
	t.Helper()
	m := &modelServer{handlers: handlers, release: make(chan struct{})}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		m.mu.Lock()
		i := len(m.bodies)
		m.bodies = append(m.bodies, body)
		m.mu.Unlock()
		m.handlers[min(i, len(m.handlers)-1)](w, r)
	}))
	t.Cleanup(m.srv.Close)
	t.Cleanup(func() { close(m.release) }) // runs first: unblocks slow handlers
	return m
}

func (m *modelServer) provider() *model.OpenAI {
	return model.NewOpenAI(model.OpenAIOptions{BaseURL: m.srv.URL + "/v1", Model: "scripted"})
}

func (m *modelServer) body(i int) map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bodies[i]
}

func (m *modelServer) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.bodies)
}

func wireMessages(body map[string]any) []map[string]any {
	var out []map[string]any
	for _, m := range body["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// answer streams texts then stops.
func answer(texts ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var ps []string
		for _, s := range texts {
			ps = append(ps, modeltest.Text(s))
		}
		modeltest.Stream(w, append(ps, modeltest.Chunk(`{}`, "stop"), "[DONE]")...)
	}
}

// toolCall streams one memory_search call whose arguments arrive in pieces.
func toolCall(id string, argPieces ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ps := []string{modeltest.Chunk(fmt.Sprintf(`{"role":"assistant","tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":"memory_search","arguments":""}}]}`, id), "")}
		for _, a := range argPieces {
			ps = append(ps, modeltest.Chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%q}}]}`, a), ""))
		}
		modeltest.Stream(w, append(ps, modeltest.Chunk(`{}`, "tool_calls"), "[DONE]")...)
	}
}

// slow streams first, then holds the stream open until the client leaves.
func (m *modelServer) slow(first ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var ps []string
		for _, s := range first {
			ps = append(ps, modeltest.Text(s))
		}
		modeltest.Stream(w, ps...)
		select {
		case <-r.Context().Done():
		case <-m.release:
		}
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
