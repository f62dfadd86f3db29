package atrium

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/paths"
)

// client is a minimal gateway client over a real WebSocket: it sends
// requests, matches responses by id and queues events.
type client struct {
	t      *testing.T
	c      *websocket.Conn
	mu     sync.Mutex
	nextID int
	resp   map[string]chan gateway.ResponseFrame
	events chan gateway.EventFrame
	// sideEffects: hello-ok features.sideEffects; call adds an
	// idempotencyKey to their params (map[string]any) when they lack one,
	// as the real clients do.
	sideEffects map[string]bool
}

func dial(t *testing.T, a *App) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, a.WSURL(), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(64 << 20)
	cl := &client{t: t, c: c, resp: map[string]chan gateway.ResponseFrame{}, events: make(chan gateway.EventFrame, 1024)}
	t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "") })
	// connect.challenge first, then connect.
	_, data, err := c.Read(ctx)
	if err != nil || !strings.Contains(string(data), `"connect.challenge"`) {
		t.Fatalf("want connect.challenge, got %s (%v)", data, err)
	}
	go cl.readLoop()
	hello := cl.call("connect", map[string]any{
		"minProtocol": 1, "maxProtocol": 1, "role": "operator",
		"client": map[string]any{"id": "atrium-test", "version": "test", "platform": "linux", "mode": "test", "instanceId": "t1"},
		"auth":   map[string]any{"token": a.Token},
	})
	if !hello.OK {
		t.Fatalf("connect refused: %+v", hello.Error)
	}
	var h gateway.Hello
	if err := json.Unmarshal(hello.Payload, &h); err != nil {
		t.Fatalf("hello-ok: %v", err)
	}
	cl.sideEffects = map[string]bool{}
	for _, m := range h.Features.SideEffects {
		cl.sideEffects[m] = true
	}
	return cl
}

func (cl *client) readLoop() {
	for {
		_, data, err := cl.c.Read(context.Background())
		if err != nil {
			close(cl.events)
			return
		}
		var head struct{ Type, ID string }
		_ = json.Unmarshal(data, &head)
		switch head.Type {
		case "res":
			var r gateway.ResponseFrame
			_ = json.Unmarshal(data, &r)
			cl.mu.Lock()
			ch := cl.resp[r.ID]
			delete(cl.resp, r.ID)
			cl.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		case "event":
			var e gateway.EventFrame
			_ = json.Unmarshal(data, &e)
			cl.events <- e
		}
	}
}

// send writes raw bytes and waits for the response with id (if any).
func (cl *client) raw(id string, frame []byte) gateway.ResponseFrame {
	cl.t.Helper()
	ch := make(chan gateway.ResponseFrame, 1)
	cl.mu.Lock()
	cl.resp[id] = ch
	cl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.c.Write(ctx, websocket.MessageText, frame); err != nil {
		cl.t.Fatalf("write: %v", err)
	}
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		cl.t.Fatalf("no response to %.80s", frame)
	}
	return gateway.ResponseFrame{}
}

func (cl *client) call(method string, params any) gateway.ResponseFrame {
	cl.t.Helper()
	cl.mu.Lock()
	cl.nextID++
	id := fmt.Sprintf("r%d", cl.nextID)
	cl.mu.Unlock()
	if m, ok := params.(map[string]any); ok && cl.sideEffects[method] && m["idempotencyKey"] == nil {
		m = maps.Clone(m)
		m["idempotencyKey"] = uuid.NewString()
		params = m
	}
	frame, _ := json.Marshal(map[string]any{"type": "req", "id": id, "method": method, "params": params})
	return cl.raw(id, frame)
}

// ok calls method and decodes a successful payload into out.
func (cl *client) ok(method string, params, out any) {
	cl.t.Helper()
	r := cl.call(method, params)
	if !r.OK {
		cl.t.Fatalf("%s failed: %+v", method, r.Error)
	}
	if out != nil {
		if err := json.Unmarshal(r.Payload, out); err != nil {
			cl.t.Fatalf("%s payload: %v", method, err)
		}
	}
}

// waitEvent returns the first event named name whose payload satisfies match.
func (cl *client) waitEvent(name string, match func(json.RawMessage) bool) json.RawMessage {
	cl.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, open := <-cl.events:
			if !open {
				cl.t.Fatalf("connection closed while waiting for %s", name)
			}
			if e.Event == name && (match == nil || match(e.Payload)) {
				return e.Payload
			}
		case <-deadline:
			cl.t.Fatalf("no %s event within 30 s", name)
		}
	}
}

// modelServer speaks just enough of the OpenAI API to misbehave: it answers
// chat completions with an HTML page, like a proxy error.
func garbageModel() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>502 upstream went away</body></html>")
	}))
}

func startApp(t *testing.T, getenv func(string) string) (*App, string) {
	t.Helper()
	return startAppWith(t, getenv, nil)
}

// startAppWith is startApp with a hook that may change the workspace
// (ws) and the options before the app is built.
func startAppWith(t *testing.T, getenv func(string) string, edit func(ws string, o *Options)) (*App, string) {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	must(t, os.MkdirAll(filepath.Join(ws, "memory"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("# Memory\n\nThe deploy key rotation happens every Friday.\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "memory", "2026-11-01.md"), []byte("# 日志\n\n今天把数据库连接池调到了 32。\n"), 0o644))
	// Bad input that must not stop anything: a binary file named .md.
	must(t, os.WriteFile(filepath.Join(ws, "memory", "broken.md"), []byte("\x00\x01\x02\xff\xfe binary"), 0o644))
	opts := Options{
		Layout:  paths.Layout{Home: filepath.Join(dir, "home"), Workspace: ws},
		Port:    -1,
		Version: "test",
		Getenv:  getenv,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		// The committed copy of the official A2UI schemas, as main.go
		// embeds it (frontend.A2UISchemas).
		A2UISchemas: os.DirFS(filepath.Join("..", "..", "frontend", "src", "lib", "a2ui", "schemas")),
	}
	if edit != nil {
		edit(ws, &opts)
	}
	a, _ := runOpts(t, opts)
	return a, ws
}

// runOpts builds and runs an app with opts until stop is called or the
// test ends (stop may be called more than once).
func runOpts(t *testing.T, opts Options) (a *App, stop func()) {
	t.Helper()
	a, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	must(t, a.Listen())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			a.Close()
		})
	}
	t.Cleanup(stop)
	return a, stop
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestFullStack drives the real app (memory engine, chat, gateway) over a
// real WebSocket with good and bad input; after every bad input the same
// connection keeps working.
func TestFullStack(t *testing.T) {
	model := garbageModel()
	env := map[string]string{"OPENAI_BASE_URL": model.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}
	a, ws := startApp(t, func(k string) string { return env[k] })
	cl := dial(t, a)

	// Memory is indexed on start; the binary file is reported, not fatal.
	var st memory.Status
	deadline := time.Now().Add(60 * time.Second)
	for {
		cl.ok("memory.status", nil, &st)
		if st.State != memory.StateIndexing && st.Chunks > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memory never became ready: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Files < 2 || !strings.Contains(st.LastError, "broken.md") {
		t.Errorf("status after indexing a binary file: %+v (want ≥2 files and lastError naming broken.md)", st)
	}

	search := func(q string) memory.SearchResponse {
		var res memory.SearchResponse
		cl.ok("memory.search", map[string]any{"query": q}, &res)
		return res
	}
	if res := search("数据库连接池"); len(res.Results) == 0 || res.Results[0].Path != "memory/2026-11-01.md" {
		t.Errorf("Chinese search: %+v", res)
	}
	if res := search("deploy key rotation"); len(res.Results) == 0 || res.Results[0].Path != "MEMORY.md" {
		t.Errorf("English search: %+v", res)
	}
	// A query of memory.MaxQueryChars characters searches; one character
	// more, or 13.8 MB, is INVALID_REQUEST saying the limit (issue 14
	// item 5), and the connection goes on.
	if res := search(strings.Repeat("数据库连接池", memory.MaxQueryChars/6) + "数据库连"); len(res.Results) == 0 {
		t.Errorf("a query of MaxQueryChars characters found nothing")
	}
	for _, q := range []string{strings.Repeat("数据库连接池", memory.MaxQueryChars/6) + "数据库连接", strings.Repeat("deploy key ", 13_800_000/11)} {
		r := cl.call("memory.search", map[string]any{"query": q})
		if r.OK || r.Error == nil || r.Error.Code != gateway.CodeInvalidRequest ||
			!strings.Contains(r.Error.Message, fmt.Sprintf("characters, the limit is %d", memory.MaxQueryChars)) {
			t.Errorf("memory.search with a %d-byte query = %+v, want INVALID_REQUEST naming the limit", len(q), r)
		}
	}

	// Import a note: it is written to disk, indexed at once and announced.
	var imp memory.ImportResult
	cl.ok("memory.import", map[string]any{"name": "季度计划.md", "content": "# 季度计划\n\n第四季度上线 QK-7731 功能。\n", "idempotencyKey": "imp-1"}, &imp)
	cl.waitEvent("memory.changed", func(p json.RawMessage) bool { return strings.Contains(string(p), "季度计划") })
	if _, err := os.Stat(filepath.Join(ws, filepath.FromSlash(imp.Path))); err != nil {
		t.Errorf("imported file not on disk at %s: %v", imp.Path, err)
	}
	if res := search("QK-7731"); len(res.Results) == 0 || res.Results[0].Path != imp.Path {
		t.Errorf("search for the imported identifier: %+v", res)
	}
	// The same idempotency key returns the first result, without a second file.
	var again memory.ImportResult
	cl.ok("memory.import", map[string]any{"name": "季度计划.md", "content": "# 季度计划\n\n第四季度上线 QK-7731 功能。\n", "idempotencyKey": "imp-1"}, &again)
	if again.Path != imp.Path {
		t.Errorf("idempotent import wrote a second file: %s vs %s", again.Path, imp.Path)
	}

	bad := []struct {
		name     string
		id       string
		frame    []byte
		wantCode string
	}{
		{"not JSON", "", []byte("this is not json"), gateway.CodeInvalidRequest},
		{"unknown method", "u1", []byte(`{"type":"req","id":"u1","method":"no.such.method","params":{}}`), gateway.CodeNotFound},
		{"bad params", "b1", []byte(`{"type":"req","id":"b1","method":"memory.search","params":{"query":42}}`), gateway.CodeInvalidRequest},
		{"invalid UTF-8", "u8", []byte("{\"type\":\"req\",\"id\":\"u8\",\"method\":\"memory.search\",\"params\":{\"query\":\"\xff\xfe\"}}"), gateway.CodeInvalidRequest},
		{"empty query", "e1", []byte(`{"type":"req","id":"e1","method":"memory.search","params":{"query":"  "}}`), gateway.CodeInvalidRequest},
		{"path escape", "p1", []byte(`{"type":"req","id":"p1","method":"memory.get","params":{"path":"../../etc/passwd"}}`), gateway.CodeInvalidRequest},
		{"binary import", "i1", []byte(`{"type":"req","id":"i1","method":"memory.import","params":{"name":"x.md","content":"a\u0000b"}}`), gateway.CodeInvalidRequest},
		{"oversized frame", "big", []byte(`{"type":"req","id":"big","method":"memory.import","params":{"name":"big.md","content":"` + strings.Repeat("x", 17<<20) + `"}}`), gateway.CodePayloadTooLarge},
	}
	for _, tc := range bad {
		r := cl.raw(tc.id, tc.frame)
		if r.OK || r.Error == nil || r.Error.Code != tc.wantCode || r.Error.Message == "" {
			t.Errorf("%s: got %+v, want error %s with a message", tc.name, r, tc.wantCode)
		} else if strings.Contains(r.Error.Message, "Go ") || strings.Contains(r.Error.Message, "struct") {
			t.Errorf("%s: error message shows Go internals: %q", tc.name, r.Error.Message)
		}
		var h map[string]any
		cl.ok("health", nil, &h) // the connection still works
	}
	if _, err := os.Stat(filepath.Join(ws, "memory", "big.md")); err == nil {
		t.Error("an oversized import was written")
	}

	// Chat against a model server that returns garbage, then one that is down:
	// each run ends in chat.error with a clear message; history keeps the question.
	for _, tc := range []struct {
		name, want string
		before     func()
	}{
		{"garbage reply", "model", func() {}},
		{"server down", "unreachable", model.Close},
	} {
		tc.before()
		var sent struct{ RunID, MessageID, SessionID string }
		cl.ok("chat.send", map[string]any{"profileId": "main", "message": "hello? " + tc.name, "idempotencyKey": "chat-" + tc.name}, &sent)
		p := cl.waitEvent("chat.error", func(p json.RawMessage) bool { return strings.Contains(string(p), sent.RunID) })
		var ev struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		must(t, json.Unmarshal(p, &ev))
		if !strings.Contains(ev.Error.Message, tc.want) {
			t.Errorf("%s: chat.error message %q does not mention %q", tc.name, ev.Error.Message, tc.want)
		}
		var page struct {
			Messages []struct{ Role, Content string }
		}
		cl.ok("history.profile", map[string]any{"profileId": "main", "limit": 50}, &page)
		found := false
		for _, m := range page.Messages {
			found = found || (m.Role == "user" && m.Content == "hello? "+tc.name)
		}
		if !found {
			t.Errorf("%s: the user message is not in history: %+v", tc.name, page.Messages)
		}
	}
	var h map[string]any
	cl.ok("health", nil, &h)
}

// TestOfflineChat: with no model anywhere, the main agent answers from
// memory with sources and says that no model is configured.
func TestOfflineChat(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	if a.Model.Provider != "offline" {
		t.Skipf("a model was detected (%s: %s); this test needs none (is Ollama running on 127.0.0.1:11434?)", a.Model.Provider, a.ModelReason)
	}
	cl := dial(t, a)
	if err := a.Memory.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sent struct{ RunID, MessageID string }
	cl.ok("chat.send", map[string]any{"profileId": "main", "message": "数据库连接池调到了多少？", "idempotencyKey": "offline-1"}, &sent)
	var chunks int
	var final struct {
		Message struct {
			ID, Role, Content string
			Sources           []struct{ Path string }
		} `json:"message"`
	}
	deadline := time.After(30 * time.Second)
	for final.Message.ID == "" {
		select {
		case e := <-cl.events:
			if !strings.Contains(string(e.Payload), sent.RunID) {
				continue
			}
			switch e.Event {
			case "chat.chunk":
				chunks++
			case "chat.final":
				must(t, json.Unmarshal(e.Payload, &final))
			case "chat.error":
				t.Fatalf("offline chat failed: %s", e.Payload)
			}
		case <-deadline:
			t.Fatal("no chat.final within 30 s")
		}
	}
	m := final.Message
	if m.ID != sent.MessageID || m.Role != "assistant" {
		t.Errorf("final message %+v does not match the run (messageId %s)", m, sent.MessageID)
	}
	if chunks < 2 {
		t.Errorf("offline answer arrived in %d chunks; it should stream", chunks)
	}
	if !strings.Contains(m.Content, "32") || !strings.Contains(m.Content, "memory/2026-11-01.md") {
		t.Errorf("offline answer does not quote the memory with its source:\n%s", m.Content)
	}
	if !strings.Contains(m.Content, "尚未配置模型") {
		t.Errorf("offline answer does not say that no model is configured:\n%s", m.Content)
	}
	if len(m.Sources) == 0 || m.Sources[0].Path != "memory/2026-11-01.md" {
		t.Errorf("sources: %+v", m.Sources)
	}
}

// TestListenFallback: a taken port is an error for `serve`, while the
// desktop window (AnyPortIfBusy) takes a free port and records it in
// gateway.json for the CLI.
func TestListenFallback(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	for _, anyPort := range []bool{false, true} {
		dir := t.TempDir()
		ws := filepath.Join(dir, "ws")
		a, err := New(context.Background(), Options{
			Layout:        paths.Layout{Home: filepath.Join(dir, "home"), Workspace: ws},
			Port:          port,
			Getenv:        func(string) string { return "" },
			Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
			AnyPortIfBusy: anyPort,
		})
		if err != nil {
			t.Fatal(err)
		}
		err = a.Listen()
		switch {
		case !anyPort && err == nil:
			t.Error("serve bound a port that is taken")
		case anyPort && err != nil:
			t.Errorf("desktop did not fall back to a free port: %v", err)
		case anyPort:
			info, ierr := ReadGatewayInfo(a.Layout.GatewayFile())
			if ierr != nil || info.Addr != a.Gateway.Addr() || strings.HasSuffix(info.Addr, fmt.Sprintf(":%d", port)) {
				t.Errorf("gateway.json %+v (%v), gateway at %s", info, ierr, a.Gateway.Addr())
			}
		}
		a.Close()
	}
}
