package atrium

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// keyedModel is a scripted OpenAI-compatible server that wants one API key
// and records every Authorization header it was sent.
type keyedModel struct {
	srv   *httptest.Server
	mu    sync.Mutex
	auths []string
}

const keyedAnswer = "设置已生效 — the settings took effect."

func newKeyedModel(t *testing.T, key string) *keyedModel {
	m := &keyedModel{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.auths = append(m.auths, r.Header.Get("Authorization"))
		m.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided. You can find your API key in your account settings.","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"qwen-7b"},{"id":"llama-3"}]}`)
		case "/v1/chat/completions":
			modeltest.Stream(w, modeltest.Text(keyedAnswer[:9]), modeltest.Text(keyedAnswer[9:]), modeltest.Chunk(`{}`, "stop"), modeltest.Done)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *keyedModel) sawAuth(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.auths {
		if strings.Contains(a, s) {
			return true
		}
	}
	return false
}

// TestSettingsOverGateway drives config.* over real WebSockets against the
// real app: a model set, listed, tested (right and wrong key), chatted
// with at once; exec approvals and the embedding; bad patches; keys never
// in a response; node connections refused.
func TestSettingsOverGateway(t *testing.T) {
	srv := newKeyedModel(t, "sk-right-1234")
	other := newKeyedModel(t, "sk-other")
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"models":[{"name":"qwen2.5:7b"}]}`)
	}))
	defer ollama.Close()
	logs := &lockedBuffer{}
	a, _ := startAppWith(t, func(string) string { return "" }, func(ws string, o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.LocalModelServers = []model.LocalCandidate{
			{Name: "Ollama", Provider: model.ProviderOllama, BaseURL: ollama.URL + "/v1"},
			{Name: "llama.cpp", Provider: model.ProviderOpenAI, BaseURL: "http://127.0.0.1:1/v1"},
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	op := gwDial(ctx, t, a, gateway.RoleOperator, "ui")
	var seen []string // every payload, checked for keys at the end
	call := func(method string, params any, out any) error {
		t.Helper()
		var raw json.RawMessage
		err := op.Call(ctx, method, params, &raw)
		seen = append(seen, string(raw))
		if err == nil && out != nil {
			must(t, json.Unmarshal(raw, out))
		}
		return err
	}
	type view struct {
		Config  map[string]any `json:"config"`
		Model   struct{ Provider, Model, BaseURL string }
		Restart []string                    `json:"restartRequired"`
		Embed   struct{ Files, Chunks int } `json:"embedding"`
	}
	// The index is built (the embedding's cost counts its files).
	for deadline := time.Now().Add(60 * time.Second); a.Memory.Status().State == memory.StateIndexing || a.Memory.Status().Chunks == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("memory never became ready: %+v", a.Memory.Status())
		}
	}
	var v view
	must(t, call("config.get", nil, &v))
	if v.Model.Provider != model.ProviderOffline {
		t.Fatalf("model at start: %+v", v.Model)
	}

	// Set a model: it is in force at once, and its key is never shown.
	base := srv.srv.URL + "/v1"
	must(t, call("config.patch", map[string]any{"idempotencyKey": "p1", "patch": map[string]any{
		"model": map[string]any{"provider": "openai", "baseUrl": base, "apiKey": "sk-right-1234", "model": "qwen-7b"}}}, &v))
	if v.Model.Provider != "openai" || v.Model.Model != "qwen-7b" || v.Model.BaseURL != base {
		t.Fatalf("model after patch: %+v", v.Model)
	}
	if m := v.Config["model"].(map[string]any); m[config.KeySetField] != true {
		t.Fatalf("apiKeySet not true: %v", m)
	}
	var models struct{ Models []string }
	must(t, call("config.models", map[string]any{}, &models))
	if strings.Join(models.Models, ",") != "qwen-7b,llama-3" {
		t.Fatalf("models: %v", models.Models)
	}
	// Another server: the stored key is not sent to it.
	if err := call("config.models", map[string]any{"provider": "openai", "baseUrl": other.srv.URL + "/v1"}, nil); err == nil ||
		!strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("models of another server without its key: %v", err)
	}
	if other.sawAuth("sk-right") {
		t.Fatal("the stored key was sent to a server it was not saved for")
	}

	type testRes struct {
		OK            bool
		Answer, Error string
	}
	var tr testRes
	must(t, call("config.test", map[string]any{}, &tr))
	if !tr.OK || tr.Answer != keyedAnswer {
		t.Fatalf("test: %+v", tr)
	}
	must(t, call("config.test", map[string]any{"apiKey": "sk-wrong"}, &tr))
	if tr.OK || !strings.Contains(tr.Error, "HTTP 401") || !strings.Contains(tr.Error, "Incorrect API key provided") {
		t.Fatalf("test with a wrong key: %+v", tr)
	}

	// Chat answers with the new model, without a restart.
	var sent struct{ RunID string }
	must(t, call("chat.send", map[string]any{"profileId": "main", "sessionId": "s1", "message": "hello", "idempotencyKey": "c1"}, &sent))
	waitFinal(t, op, sent.RunID, keyedAnswer)

	// Exec approvals apply to the next tool call; the embedding needs a
	// restart and says what it costs.
	must(t, call("config.patch", map[string]any{"idempotencyKey": "p2", "patch": map[string]any{
		"agents": map[string]any{"exec": map[string]any{"approval": "deny"}},
		"memory": map[string]any{"embedding": map[string]any{"provider": "ollama", "model": "bge-m3"}}}}, &v))
	if a.Settings().Agents.Exec.Approval != "deny" {
		t.Fatalf("exec approval not in force: %+v", a.Settings().Agents.Exec)
	}
	if strings.Join(v.Restart, ",") != "memory.embedding" || v.Embed.Files == 0 {
		t.Fatalf("restart %v, embedding %+v", v.Restart, v.Embed)
	}

	// Bad patches: INVALID_REQUEST naming the key, the file unchanged.
	before, err := os.ReadFile(a.Layout.ConfigFile())
	must(t, err)
	for _, bad := range []map[string]any{
		{"patch": map[string]any{"model": map[string]any{"provider": "gpt"}}, "idempotencyKey": "b1"},
		{"patch": map[string]any{"gateway": map[string]any{"port": 99999}}, "idempotencyKey": "b2"},
		{"patch": map[string]any{"agents": map[string]any{"exec": map[string]any{"allowlist": []string{"git"}}}}, "idempotencyKey": "b3"},
		{"patch": "model=gpt", "idempotencyKey": "b4"},
		{"idempotencyKey": "b5"},
	} {
		if err := call("config.patch", bad, nil); errCode(err) != gateway.CodeInvalidRequest {
			t.Errorf("patch %v: %v, want INVALID_REQUEST", bad, err)
		}
	}
	if after, _ := os.ReadFile(a.Layout.ConfigFile()); string(after) != string(before) {
		t.Fatalf("a refused patch changed config.json:\n%s", after)
	}

	var local struct {
		Servers []model.LocalServer
	}
	must(t, call("config.detect", nil, &local))
	if len(local.Servers) != 1 || local.Servers[0].Name != "Ollama" || local.Servers[0].Models[0] != "qwen2.5:7b" {
		t.Fatalf("detect: %+v", local.Servers)
	}

	// A node connection may do none of it.
	node := gwDial(ctx, t, a, gateway.RoleNode, "phone")
	for _, m := range []string{"config.get", "config.patch", "config.models", "config.test", "config.detect"} {
		err := node.Call(ctx, m, map[string]any{"patch": map[string]any{"gateway": map[string]any{"port": 1}}, "idempotencyKey": "n-" + m}, nil)
		if errCode(err) != gateway.CodeForbidden {
			t.Errorf("node %s: %v, want FORBIDDEN", m, err)
		}
	}
	if c, _ := config.Load(a.Layout.ConfigFile()); c.Gateway.Port == 1 {
		t.Fatal("a node changed the settings")
	}

	for _, p := range seen {
		if strings.Contains(p, "sk-right") || strings.Contains(p, "sk-wrong") {
			t.Fatalf("a key is in a response: %s", p)
		}
	}
	if l := logs.String(); strings.Contains(l, "sk-right") || strings.Contains(l, "sk-wrong") || !strings.Contains(l, "settings changed") {
		t.Fatalf("the log has a key (or no record of the change):\n%s", l)
	}
	// And the key is in the file, for the app (mode 0600).
	data, _ := os.ReadFile(a.Layout.ConfigFile())
	fi, _ := os.Stat(a.Layout.ConfigFile())
	if !strings.Contains(string(data), "sk-right-1234") || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config.json (%v):\n%s", fi.Mode().Perm(), data)
	}
}

// lockedBuffer is a bytes.Buffer safe for the app's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFinal waits for chat.final of runID and checks its text.
func waitFinal(t *testing.T, cl *gateway.Client, runID, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, open := <-cl.Events():
			if !open {
				t.Fatal("connection closed before chat.final")
			}
			if !strings.Contains(string(e.Payload), runID) {
				continue
			}
			switch e.Event {
			case "chat.final":
				if !strings.Contains(string(e.Payload), want) {
					t.Fatalf("chat.final %s, want %q", e.Payload, want)
				}
				return
			case "chat.error":
				t.Fatalf("chat failed: %s", e.Payload)
			}
		case <-deadline:
			t.Fatal("no chat.final within 30 s")
		}
	}
}
