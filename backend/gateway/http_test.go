package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func TestUI(t *testing.T) {
	ui := fstest.MapFS{
		"index.html":          {Data: []byte("<!doctype html><title>Atrium</title>")},
		"assets/app-1a2b.js":  {Data: []byte("console.log('hi')")},
		"assets/app-1a2b.css": {Data: []byte("body{margin:0}")},
		"favicon.svg":         {Data: []byte("<svg xmlns='http://www.w3.org/2000/svg'/>")},
		"docs/index.html":     {Data: []byte("<p>docs</p>")},
		"manifest.json":       {Data: []byte(`{"name":"Atrium"}`)},
	}
	s, err := New(Options{Token: testToken, UI: ui, Version: "v", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()

	tests := []struct {
		method, path string
		status       int
		ctype        string
		bodyPart     string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", "<title>Atrium"},
		{"GET", "/index.html", 200, "text/html; charset=utf-8", "<title>Atrium"},
		{"GET", "/chat/main/123", 200, "text/html; charset=utf-8", "<title>Atrium"},
		{"GET", "/settings", 200, "text/html; charset=utf-8", "<title>Atrium"},
		{"GET", "/assets/app-1a2b.js", 200, "text/javascript; charset=utf-8", "console.log"},
		{"GET", "/assets/app-1a2b.css", 200, "text/css; charset=utf-8", "margin"},
		{"GET", "/favicon.svg", 200, "image/svg+xml", "<svg"},
		{"GET", "/manifest.json", 200, "application/json", "Atrium"},
		{"GET", "/docs/", 200, "text/html; charset=utf-8", "docs"},
		{"GET", "/assets/missing.js", 404, "", ""},
		{"GET", "/../../etc/passwd", 200, "text/html; charset=utf-8", "<title>Atrium"}, // cleaned, never leaves the FS
		{"GET", "/../../etc/hosts.txt", 404, "", ""},
		{"HEAD", "/", 200, "text/html; charset=utf-8", ""},
		{"POST", "/", 405, "", ""},
		{"GET", "/healthz", 200, "application/json", `"ok":true`},
		{"GET", "/api/nothing", 404, "", ""},
		{"GET", "/ws", 426, "", ""}, // not an upgrade request
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, hs.URL+tt.path, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.status, body)
			}
			if tt.ctype != "" && resp.Header.Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tt.ctype)
			}
			if !strings.Contains(string(body), tt.bodyPart) {
				t.Errorf("body %q lacks %q", body, tt.bodyPart)
			}
			checkSecurityHeaders(t, resp.Header, strings.TrimPrefix(hs.URL, "http://"))
		})
	}
}

// checkSecurityHeaders asserts the headers every response carries.
func checkSecurityHeaders(t *testing.T, h http.Header, host string) {
	t.Helper()
	for name, want := range map[string]string{
		"X-Frame-Options":        "DENY",
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	csp := map[string]string{}
	for _, d := range strings.Split(h.Get("Content-Security-Policy"), ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		csp[name] = value
	}
	for name, want := range map[string]string{
		"default-src":     "'self'",
		"script-src":      "'self'",
		"style-src":       "'self'",
		"object-src":      "'none'",
		"base-uri":        "'none'",
		"form-action":     "'none'",
		"frame-ancestors": "'none'",
		"media-src":       "'self' blob:", // the gallery's clips (issue 22)
		"connect-src":     "'self' ws://" + host + " wss://" + host,
	} {
		if csp[name] != want {
			t.Errorf("Content-Security-Policy %s: %q, want %q (header %q)", name, csp[name], want, h.Get("Content-Security-Policy"))
		}
	}
}

// TestSecurityHeadersOnEveryResponse: the UI when not built, refusals
// (a forbidden origin, a full unauthenticated cap) and a Host that is not
// a plain host name all carry the headers; such a Host is left out of the
// CSP.
func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	s, err := New(Options{Token: testToken, Logger: quietLogger(), MaxUnauthenticated: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.preAuth["loopback"], s.preAuth["external"] = 1, 1 // the caps are full
	s.mu.Unlock()
	for _, tc := range []struct {
		path   string
		header http.Header
		status int
	}{
		{"/", nil, 200},
		{"/ws", http.Header{"Origin": {"https://evil.example"}}, 403},
		{"/ws", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}, 503},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", tc.path, nil)
		req.Host = "127.0.0.1:18789"
		for k, v := range tc.header {
			req.Header[k] = v
		}
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Fatalf("%s: status %d, want %d", tc.path, rec.Code, tc.status)
		}
		checkSecurityHeaders(t, rec.Header(), "127.0.0.1:18789")
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Host = "a b'; script-src *"
	s.Handler().ServeHTTP(rec, req)
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self';") || strings.Contains(csp, "*") {
		t.Fatalf("CSP with a strange Host: %q", csp)
	}
}

func TestUINotBuilt(t *testing.T) {
	s, err := New(Options{Token: testToken, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "not built") || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("got %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
}

// TestServeHosts: a listener wrapped by ServeHosts answers only for its
// hosts and loopback names (421 otherwise), and takes a WebSocket Origin
// naming one of its hosts, a DNS name included, as same-origin; the bare
// handler keeps refusing a DNS-name origin.
func TestServeHosts(t *testing.T) {
	s, err := New(Options{Token: testToken, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	lan := ServeHosts(s.Handler(), []string{"192.0.2.7", "Desk.local.", "[fd00::7]", "desk"})
	do := func(h http.Handler, path, host, origin string) int {
		req := httptest.NewRequest("GET", path, nil)
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, tc := range []struct {
		host   string
		status int
	}{
		{"192.0.2.7:18789", 200}, {"desk.local:18789", 200}, {"DESK.LOCAL.:18789", 200}, {"[fd00::7]:18789", 200},
		{"desk", 200}, {"127.0.0.1:18789", 200}, {"localhost:18789", 200},
		{"evil.example:18789", http.StatusMisdirectedRequest}, {"192.0.2.8:18789", http.StatusMisdirectedRequest},
		{"desk.local.evil.example", http.StatusMisdirectedRequest}, {"", http.StatusMisdirectedRequest},
	} {
		if got := do(lan, "/healthz", tc.host, ""); got != tc.status {
			t.Errorf("Host %q: status %d, want %d", tc.host, got, tc.status)
		}
	}
	// The bare handler serves any Host, as before.
	if got := do(s.Handler(), "/healthz", "evil.example", ""); got != 200 {
		t.Errorf("bare handler: status %d", got)
	}
	// Origins: 403 means refused by the origin check; anything else got past it.
	for _, tc := range []struct {
		h            http.Handler
		host, origin string
		refused      bool
	}{
		{lan, "desk.local:18789", "https://desk.local:18789", false},
		{lan, "192.0.2.7:18789", "https://192.0.2.7:18789", false},
		{lan, "[fd00::7]:18789", "https://[fd00::7]:18789", false},
		{lan, "desk.local:18789", "https://evil.example", true},
		{lan, "desk.local:18789", "https://desk.local:9999", true}, // another origin on a served host
		{lan, "192.0.2.7:18789", "https://desk.local:18789", true},
		{lan, "192.0.2.7:18789", "http://127.0.0.1:5173", false},
		{s.Handler(), "desk.local:18789", "https://desk.local:18789", true},
	} {
		got := do(tc.h, "/ws", tc.host, tc.origin)
		if (got == http.StatusForbidden) != tc.refused {
			t.Errorf("Origin %q Host %q: status %d, refused want %v", tc.origin, tc.host, got, tc.refused)
		}
	}
}
