package mcpserve

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/mcpserve/mcptest"
	"github.com/atrium-dev/atrium/backend/memory"
)

// TestToolsAsTwoRoles: the SDK's client calls every tool, resource and the
// prompt as each of two roles; neither ever sees the other's private file.
func TestToolsAsTwoRoles(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for i, me := range mcptest.Roles {
		_, cs := s.connect(t, me, nil)
		mcptest.Exercise(ctx, t, cs, me, mcptest.Roles[1-i])
	}
	// The refusals were audited as the role that asked.
	es, err := s.al.Tail(500, audit.Filter{Result: audit.Denied})
	must(t, err)
	denied := map[string]bool{}
	for _, e := range es {
		denied[e.Role+" "+e.Operation+" "+e.Target] = true
	}
	for _, want := range []string{"coder get roles/writer/secret.md", "writer get roles/coder/notes.md", "coder get memory/roles/coder/../writer/secret.md"} {
		if !denied[want] {
			t.Errorf("audit: no denied %q in %v", want, denied)
		}
	}
}

// TestAuthenticatedOnly: a server without a role reads what
// `authenticated` may (the global layer) and no role's files, and has no
// daily log.
func TestAuthenticatedOnly(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, cs := s.connect(t, "", nil)
	var res struct {
		Results []struct{ Path string } `json:"results"`
	}
	if e := mcptest.Call(ctx, t, cs, ToolSearch, map[string]any{"query": "QK-7731 QK-9000 Bluebird key"}, &res); e != "" {
		t.Fatal(e)
	}
	for _, h := range res.Results {
		if strings.HasPrefix(h.Path, "memory/roles/") {
			t.Errorf("authenticated found %s", h.Path)
		}
	}
	for _, role := range mcptest.Roles {
		if e := mcptest.Call(ctx, t, cs, ToolGet, map[string]any{"path": mcptest.Private[role]}, nil); e == "" {
			t.Errorf("authenticated read %s", mcptest.Private[role])
		}
	}
	if e := mcptest.Call(ctx, t, cs, ToolNote, map[string]any{"text": "x"}, nil); !strings.Contains(e, "no daily log") {
		t.Errorf("memory_note as authenticated: %q, want no daily log", e)
	}
}

// TestResourceUpdates: a subscriber hears of a change to its file (by
// another writer, told through Refresh as the app's memory.changed does)
// and a new file makes the list change; a file of another role is not
// offered for subscription.
func TestResourceUpdates(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	updated := make(chan string, 16)
	listChanged := make(chan struct{}, 16)
	srv, cs := s.connect(t, "writer", &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			listChanged <- struct{}{}
		},
	})
	uri := URIPrefix + mcptest.Private["writer"]
	must(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
	// Another writer (the person, in the app) appends to the file.
	if _, err := s.local.Write(ctx, "writer", memWrite(mcptest.Private["writer"], "\nmore\n")); err != nil {
		t.Fatal(err)
	}
	// Under the SDK's newer protocol (SEP-2575) Subscribe opens a listen
	// stream in the background and may return before the server has
	// recorded the subscription, and nothing tells the client when it
	// has: refresh until the notification arrives (a CI run's single
	// refresh came first and was lost).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for got := ""; got == ""; {
		srv.Refresh(ctx, []string{mcptest.Private["writer"]})
		select {
		case got = <-updated:
			if got != uri {
				t.Errorf("updated %s, want %s", got, uri)
			}
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("no notifications/resources/updated")
		}
	}
	// A new file appears in the list.
	for len(listChanged) > 0 {
		<-listChanged
	}
	if _, err := s.local.Write(ctx, "writer", memWrite("memory/roles/writer/new.md", "# New\n")); err != nil {
		t.Fatal(err)
	}
	srv.Refresh(ctx, nil)
	rl, err := cs.ListResources(ctx, nil)
	must(t, err)
	found := false
	for _, r := range rl.Resources {
		found = found || r.URI == URIPrefix+"memory/roles/writer/new.md"
	}
	if !found {
		t.Error("the new file is not a resource")
	}
	select {
	case <-listChanged:
	case <-ctx.Done():
		t.Fatal("no notifications/resources/list_changed")
	}
}

// TestTokens: only the hash is stored; a token checks until revoked, its
// last use recorded; bad names and roles refused.
func TestTokens(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	ts, err := OpenTokens(ctx, s.db, TokensOptions{Now: func() time.Time { return now }})
	must(t, err)
	secret, info, err := ts.Create(ctx, "Claude Desktop", "writer")
	must(t, err)
	if !strings.HasPrefix(secret, TokenPrefix) || info.Role != "writer" || info.LastUsed != 0 {
		t.Fatalf("created %q %+v", secret, info)
	}
	var stored int
	must(t, s.db.QueryRow(`SELECT count(*) FROM mcp_tokens WHERE hash = ? OR id = ? AND instr(hash, ?) > 0`, secret, info.ID, secret[len(TokenPrefix):]).Scan(&stored))
	if stored != 0 {
		t.Error("the secret is stored")
	}
	now = now.Add(time.Hour)
	got, err := ts.Check(ctx, secret)
	if err != nil || got.ID != info.ID || got.LastUsed != now.UnixMilli() {
		t.Errorf("check: %+v %v", got, err)
	}
	list, err := ts.List(ctx)
	if err != nil || len(list) != 1 || list[0].LastUsed != now.UnixMilli() {
		t.Errorf("list: %+v %v", list, err)
	}
	for _, bad := range []string{"", "Bearer " + secret, secret + "x", strings.TrimPrefix(secret, TokenPrefix)} {
		if _, err := ts.Check(ctx, bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("check %q: %v, want ErrBadToken", bad, err)
		}
	}
	if _, err := ts.Revoke(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Check(ctx, secret); !errors.Is(err, ErrBadToken) {
		t.Errorf("revoked token: %v, want ErrBadToken", err)
	}
	if _, err := ts.Revoke(ctx, "nope"); !errors.Is(err, ErrTokenNotFound) {
		t.Errorf("revoke unknown: %v", err)
	}
	for _, c := range [][2]string{{"", "writer"}, {"x", "admin"}, {"x", "../writer"}, {"x", "$session_owner"}, {strings.Repeat("n", MaxTokenName+1), "writer"}} {
		if _, _, err := ts.Create(ctx, c[0], c[1]); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("create %q as %q: %v, want ErrInvalidToken", c[0], c[1], err)
		}
	}
}

// TestSearchSaysRewrite: when memory.search.rewrite put a weakly answered
// question into the chat model's words (a scripted model here), the MCP
// memory_search result says what was searched too and how long the model
// took, as the gateway's memory.search does (issue 25); the other role's
// note the rewrite names stays out of reach.
func TestSearchSaysRewrite(t *testing.T) {
	var asked []string
	rewrite := func(_ context.Context, q string) (string, error) {
		asked = append(asked, q)
		return "launch code name Bluebird QK-7731", nil
	}
	s := newStackMemory(t, func(o *memory.Options) { o.Rewrite, o.RewriteTimeout = rewrite, time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, cs := s.connect(t, "coder", nil)
	const q = "what do we call the thing we are about to release"
	var got struct { // as a client reads it
		Results []memory.ToolHit `json:"results"`
		memory.ToolRewrite
	}
	if e := mcptest.Call(ctx, t, cs, ToolSearch, map[string]any{"query": q}, &got); e != "" {
		t.Fatal(e)
	}
	if len(asked) != 1 || asked[0] != q {
		t.Fatalf("the model was asked %q; want the weak question once", asked)
	}
	if got.RewrittenQuery != "launch code name Bluebird QK-7731" || got.RewriteMs < 1 {
		t.Errorf("rewrittenQuery %q, rewriteMs %d; want the model's words and its time", got.RewrittenQuery, got.RewriteMs)
	}
	if len(got.Results) == 0 || got.Results[0].Path != mcptest.Global {
		t.Errorf("results %+v; want %s first", got.Results, mcptest.Global)
	}
	for _, h := range got.Results {
		if h.Path == mcptest.Private["writer"] {
			t.Errorf("the rewrite reached the writer's note: %+v", got.Results)
		}
	}
}
