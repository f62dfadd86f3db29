package mcpserve

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/mcpserve/mcptest"
)

// fuzzPost sends body to h as one POST /mcp from loopback with the given
// token and session (none when ""), bounded by a deadline.
func fuzzPost(t testing.TB, h http.Handler, token, session string, body []byte) *httptest.ResponseRecorder {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, Path, strings.NewReader(string(body)))
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if session != "" {
		r.Header.Set("Mcp-Session-Id", session)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// FuzzHTTP sends any bytes as a JSON-RPC body to the real /mcp handler
// (streamable HTTP, SDK handler, Atrium's tools over the real memory
// stack), acting as role writer, inside a session opened by initialize
// or, when fresh is set, without one. Properties: the handler answers
// every body (no panic, no hang past the deadline) with a client error or
// success, never a 5xx; no answer ever shows the coder's private file
// (mcptest.Private, readable by coder and admin only), whatever tool,
// resource or path trick the body tries; and that file is unchanged on
// disk.
func FuzzHTTP(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"QK key","maxResults":5}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"memory_get","arguments":{"path":"memory/roles/coder/notes.md"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"memory_get","arguments":{"path":"memory/roles/writer/../coder/notes.md","from":1,"lines":3}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"memory_write","arguments":{"path":"memory/roles/coder/notes.md","content":"x","mode":"append"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory_write","arguments":{"path":"memory/roles/writer/new.md","content":"# 笔记\n","mode":"replace"}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"memory_note","arguments":{"text":"remember plum"}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"atrium://memory/roles/coder/notes.md"}}`,
		`{"jsonrpc":"2.0","id":11,"method":"resources/subscribe","params":{"uri":"atrium://memory/roles/coder/notes.md"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"prompts/get","params":{"name":"memory_layers"}}`,
		`[{"jsonrpc":"2.0","id":13,"method":"ping"},{"jsonrpc":"2.0","id":14,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","id":15,"result":{}}`, `{"jsonrpc":"1.0","id":16,"method":"ping"}`, `{`, `null`, ``,
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`), true)
	s := newStack(f)
	ctx := context.Background()
	tokens, err := OpenTokens(ctx, s.db, TokensOptions{})
	must(f, err)
	writer, _, err := tokens.Create(ctx, "fuzz", "writer")
	must(f, err)
	h, err := NewHTTP(HTTPOptions{Memory: s.local, Tokens: tokens, Version: "fuzz", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	must(f, err)
	init := fuzzPost(f, h, writer, "", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`))
	session := init.Header().Get("Mcp-Session-Id")
	if init.Code != http.StatusOK || session == "" {
		f.Fatalf("initialize: %d %q", init.Code, init.Body)
	}
	if w := fuzzPost(f, h, writer, session, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); w.Code >= 300 {
		f.Fatalf("initialized: %d %q", w.Code, w.Body)
	}
	// The stack answers: writer reads its own private file through the
	// handler (so the property below is not met by an empty answer).
	own := fuzzPost(f, h, writer, session, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_get","arguments":{"path":"`+mcptest.Private["writer"]+`"}}}`))
	if !strings.Contains(own.Body.String(), mcptest.Key["writer"]) {
		f.Fatalf("writer cannot read its own file: %d %s", own.Code, own.Body)
	}
	secretPath := filepath.Join(s.ws, filepath.FromSlash(mcptest.Private["coder"]))
	secret := mcptest.Files[mcptest.Private["coder"]]
	secretLine := strings.TrimSpace(secret[strings.LastIndex(strings.TrimSpace(secret), "\n")+1:])
	f.Fuzz(func(t *testing.T, body []byte, fresh bool) {
		if len(body) > 64<<10 {
			return
		}
		sid := session
		if fresh {
			sid = ""
		}
		w := fuzzPost(t, h, writer, sid, body)
		if w.Code >= 500 {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		out := w.Body.String()
		if strings.Contains(out, secretLine) || strings.Contains(out, strings.ReplaceAll(secretLine, " ", `\u0020`)) {
			t.Fatalf("writer was shown coder's private file for %q: %s", body, out)
		}
		if w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("a JSON answer that is not JSON: %q", out)
		}
		got, err := os.ReadFile(secretPath)
		if err != nil || string(got) != secret {
			t.Fatalf("coder's private file changed after %q: %q, %v", body, got, err)
		}
	})
}

// TestURIOf: a resource URI parses as a URL whatever the file's name, and
// PathOf gives back exactly that name (FuzzHTTP found a file named with a
// lone "%" taking the server down in the SDK's AddResource).
func TestURIOf(t *testing.T) {
	for _, p := range []string{"memory/global/decisions.md", "memory/global/项目状态.md", "memory/roles/writer/笔记 2026.md",
		"memory/roles/writer/%ew.md", "memory/100%.md", "memory/a#b.md", "memory/a?b.md", "memory/a\x01b.md", "memory/a%2541.md"} {
		uri := URIOf(p)
		if _, err := url.Parse(uri); err != nil {
			t.Errorf("URIOf(%q) = %q does not parse: %v", p, uri, err)
		}
		if back, ok := PathOf(uri); !ok || back != p {
			t.Errorf("PathOf(URIOf(%q)) = %q, %v", p, back, ok)
		}
	}
	if got := URIOf("memory/global/项目状态.md"); got != URIPrefix+"memory/global/项目状态.md" {
		t.Errorf("an ordinary name is escaped: %q", got)
	}
	if _, ok := PathOf(URIPrefix + "memory/a%zz.md"); ok {
		t.Error("a malformed escape names a path")
	}
}
