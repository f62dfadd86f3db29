package atrium

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/mcpserve/mcptest"
)

// bearer adds a token to every request of an HTTP client.
type bearer struct {
	token  string
	origin string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	if b.origin != "" {
		r.Header.Set("Origin", b.origin)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect opens an MCP session on the app's /mcp with token (the SDK's
// streamable HTTP client), closed when the test ends.
func mcpConnect(ctx context.Context, t *testing.T, a *App, token string) (*mcp.ClientSession, error) {
	t.Helper()
	cl := mcp.NewClient(&mcp.Implementation{Name: "atrium-test", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + a.Gateway.Addr() + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: token}, Timeout: 60 * time.Second}, MaxRetries: 1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// createToken asks the app for a token (mcp.token.create, admin).
func createToken(ctx context.Context, t *testing.T, cl *gateway.Client, name, role string) (string, string) {
	t.Helper()
	var out struct {
		Token string `json:"token"`
		Info  struct {
			ID   string `json:"id"`
			Role string `json:"role"`
		} `json:"info"`
	}
	if err := cl.Call(ctx, MethodMCPTokenCreate, map[string]string{"name": name, "role": role}, &out); err != nil {
		t.Fatalf("mcp.token.create %s as %s: %v", name, role, err)
	}
	if out.Info.Role != role || !strings.HasPrefix(out.Token, "atrium_mcp_") {
		t.Fatalf("mcp.token.create: %+v", out)
	}
	return out.Token, out.Info.ID
}

// rawHead sends a request head alone (no body, whatever it declares) and
// returns the status the gateway answers: a refusal on the head means the
// body was never read.
func rawHead(t *testing.T, addr, head string) (int, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a head alone: %v", err)
	}
	defer res.Body.Close()
	return res.StatusCode, res.Header.Get("WWW-Authenticate")
}

// TestMCPOverHTTP: the SDK's streamable HTTP client calls every tool,
// resource and the prompt on the app's /mcp with a token for each of two
// roles (neither sees the other's private file); a session is its token's
// role's only; no token, a revoked token, another page's Origin and an
// oversized request are refused, the last two and a missing token on the
// request's head before any body byte is read.
func TestMCPOverHTTP(t *testing.T) {
	a, _ := startAppWith(t, func(string) string { return "" }, func(ws string, _ *Options) { mcptest.Seed(t, ws) })
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	must(t, a.Memory.Sync(ctx))
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "mcp-admin")
	tokens := map[string]string{}
	ids := map[string]string{}
	for _, role := range mcptest.Roles {
		tokens[role], ids[role] = createToken(ctx, t, admin, "client of "+role, role)
	}
	for i, me := range mcptest.Roles {
		cs, err := mcpConnect(ctx, t, a, tokens[me])
		if err != nil {
			t.Fatalf("connect as %s: %v", me, err)
		}
		mcptest.Exercise(ctx, t, cs, me, mcptest.Roles[1-i])
	}

	var list struct {
		Tokens []struct {
			ID       string `json:"id"`
			LastUsed int64  `json:"lastUsedMs"`
		} `json:"tokens"`
	}
	must(t, admin.Call(ctx, MethodMCPTokenList, nil, &list))
	if len(list.Tokens) != 2 || list.Tokens[0].LastUsed == 0 || list.Tokens[1].LastUsed == 0 {
		t.Errorf("mcp.token.list: %+v, want two used tokens", list)
	}
	if err := admin.Call(ctx, MethodMCPTokenCreate, map[string]string{"name": "x", "role": "ghost"}, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Errorf("token for an unknown role: %v", err)
	}

	addr := a.Gateway.Addr()
	url := "http://" + addr + "/mcp"
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	post := func(tok, origin, body string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		must(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := (&http.Client{Transport: bearer{token: tok, origin: origin}, Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("POST /mcp: %v", err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := post(tokens["writer"], "", init); got != http.StatusOK {
		t.Errorf("initialize with a token: %d", got)
	}
	if got := post(tokens["writer"], "http://"+addr, init); got != http.StatusOK {
		t.Errorf("initialize from the gateway's own origin: %d", got)
	}
	for name, c := range map[string]struct {
		tok, origin string
		want        int
	}{
		"no token":      {"", "", http.StatusUnauthorized},
		"a wrong token": {"atrium_mcp_nope", "", http.StatusUnauthorized},
		"another page":  {tokens["writer"], "http://evil.example", http.StatusForbidden},
		"a null origin": {tokens["writer"], "null", http.StatusForbidden},
	} {
		if got := post(c.tok, c.origin, init); got != c.want {
			t.Errorf("%s: %d, want %d", name, got, c.want)
		}
	}
	// Refused on the head, the body never sent: no token, too large.
	head := func(auth string, n int) string {
		return fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", addr, auth, n)
	}
	if st, www := rawHead(t, addr, head("", 200)); st != http.StatusUnauthorized || !strings.HasPrefix(www, "Bearer") {
		t.Errorf("a body without a token: %d %q, want 401 with WWW-Authenticate before the body", st, www)
	}
	if st, _ := rawHead(t, addr, head("Authorization: Bearer "+tokens["writer"]+"\r\n", 2<<20)); st != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB request: %d, want 413 before the body", st)
	}
	if st, _ := rawHead(t, addr, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+tokens["writer"]+"\r\nTransfer-Encoding: chunked\r\n\r\n"); st != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked request: %d, want 413", st)
	}

	// A session opened with one role's token is not the other's.
	csW, err := mcpConnect(ctx, t, a, tokens["writer"])
	must(t, err)
	sid := csW.ID()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"memory_get","arguments":{"path":"`+mcptest.Private["writer"]+`"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	res, err := (&http.Client{Transport: bearer{token: tokens["coder"]}, Timeout: 60 * time.Second}).Do(req)
	must(t, err)
	body := make([]byte, 4096)
	n, _ := res.Body.Read(body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK || strings.Contains(string(body[:n]), mcptest.Key["writer"]) {
		t.Errorf("writer's session with coder's token: %d %s", res.StatusCode, body[:n])
	}

	// A revoked token: refused at once, its open session too.
	csC, err := mcpConnect(ctx, t, a, tokens["coder"])
	must(t, err)
	must(t, admin.Call(ctx, MethodMCPTokenRevoke, map[string]string{"id": ids["coder"]}, nil))
	if got := post(tokens["coder"], "", init); got != http.StatusUnauthorized {
		t.Errorf("a revoked token: %d, want 401", got)
	}
	if _, err := csC.CallTool(ctx, &mcp.CallToolParams{Name: "memory_get", Arguments: map[string]any{"path": mcptest.Private["coder"]}}); err == nil {
		t.Error("a session of a revoked token still answers")
	}
	if _, err := mcpConnect(ctx, t, a, tokens["coder"]); err == nil {
		t.Error("connected with a revoked token")
	}
}
