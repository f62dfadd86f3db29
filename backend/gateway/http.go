package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
)

// route dispatches "/ws", "/healthz", the upload route (Options.Upload), "/mcp" (Options.MCP) and the UI, every response with the
// security headers. On a listener wrapped by ServeHosts, a request for
// another host is refused first.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header(), r.Host)
	if hosts, ok := servedHosts(r); ok && !hostServed(r.Host, hosts) {
		s.log.Warn("gateway request for a host not served here", "host", r.Host, "remote", r.RemoteAddr)
		http.Error(w, "this gateway does not serve that host name", http.StatusMisdirectedRequest)
		return
	}
	switch p := r.URL.Path; {
	case p == "/ws":
		s.serveWS(w, r)
	case p == "/healthz":
		s.serveHealth(w, r)
	case strings.HasPrefix(p, UploadPrefix):
		s.serveUpload(w, r)
	case p == MCPPath:
		s.serveMCP(w, r)
	case strings.HasPrefix(p, "/ws/") || p == "/api" || strings.HasPrefix(p, "/api/"):
		http.NotFound(w, r)
	case s.page(p) != nil:
		s.page(p).ServeHTTP(w, r)
	default:
		s.serveUI(w, r)
	}
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	body, _ := json.Marshal(struct {
		OK       bool   `json:"ok"`
		Version  string `json:"version"`
		UptimeMs int64  `json:"uptimeMs"`
	}{true, s.opts.Version, s.now().Sub(s.started).Milliseconds()})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

// servedHostsKey carries the hosts of a ServeHosts listener in a request's
// context.
type servedHostsKey struct{}

// ServeHosts returns h (the gateway's Handler or ExternalHandler) for a
// listener reached under hosts: IP literals and DNS names without port (a
// LAN listener's address, the machine's host name, <host>.local). Through
// it, a request whose Host header names another host gets 421 Misdirected
// Request (a DNS-rebinding page names its own host), and a WebSocket whose
// Origin is http(s)://<one of hosts>[:port] equal to its Host is
// same-origin, a DNS name included. Loopback names stay allowed as Host
// and Origin.
func ServeHosts(h http.Handler, hosts []string) http.Handler {
	norm := make([]string, 0, len(hosts))
	for _, x := range hosts {
		if x = normHost(x); x != "" {
			norm = append(norm, x)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), servedHostsKey{}, norm)))
	})
}

func servedHosts(r *http.Request) ([]string, bool) {
	hosts, ok := r.Context().Value(servedHostsKey{}).([]string)
	return hosts, ok
}

// hostServed reports whether hostport (a Host header) names a loopback
// host or one of hosts (normalised).
func hostServed(hostport string, hosts []string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = normHost(h)
	return h != "" && (isLoopbackHost(h) || slices.Contains(hosts, h))
}

// normHost lower-cases a host name or IP literal, drops brackets and a
// trailing dot, and writes an IP in its canonical form.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(strings.TrimSpace(h), "[]")), ".")
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// originAllowed applies the WebSocket origin policy documented on
// Options.AllowedOrigins. A same-origin request is allowed when the host is
// an IP literal (LAN mode) or, on a ServeHosts listener, one of its hosts:
// another DNS name equal to Host is not enough, which defeats DNS-rebinding
// pages.
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser; the token still decides
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	web := u.Scheme == "http" || u.Scheme == "https"
	if web && isLoopbackHost(host) {
		return true
	}
	if web && strings.EqualFold(u.Host, r.Host) && net.ParseIP(host) != nil {
		return true
	}
	if hosts, ok := servedHosts(r); ok && web && strings.EqualFold(u.Host, r.Host) && slices.Contains(hosts, normHost(host)) {
		return true
	}
	for _, p := range s.opts.AllowedOrigins {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(target)); ok {
			return true
		}
	}
	return false
}

// contentSecurityPolicy is the CSP of every response. The built UI
// (frontend/dist) loads one module script and one stylesheet from
// ./assets/ and has no inline script or style; it talks to the gateway over
// a WebSocket on its own host. Images: its own, and data:/blob: URLs
// (pictures in rendered Markdown from elsewhere are not fetched); media:
// its own and blob: URLs (the gallery plays a node's clip from a blob of
// its bytes, issue 22). Frames: its own pages (a Canvas page presented as
// html, served on an opaque sandboxed origin by package canvas) and http(s)
// pages an agent presents by url, which the UI shows only in an iframe
// sandboxed without allow-same-origin (docs/PROTOCOL.md "Presented
// pages"). Nothing
// may frame it, and no <base>, <object> or form target can redirect it.
// %[1]s is the request's host ("127.0.0.1:18789"), for the WebSocket
// (older WebKit does not match ws: against 'self').
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data: blob:; media-src 'self' blob:; font-src 'self' data:; connect-src 'self'%[1]s; " +
	"frame-src 'self' http: https:; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// setSecurityHeaders sets the CSP, anti-framing, nosniff and referrer
// headers on h. host (the request's Host header) is added to connect-src
// as ws:// and wss:// when it is a plain host[:port].
func setSecurityHeaders(h http.Header, host string) {
	ws := ""
	if validHostPort(host) {
		ws = " ws://" + host + " wss://" + host
	}
	h.Set("Content-Security-Policy", fmt.Sprintf(contentSecurityPolicy, ws))
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// validHostPort reports whether host is letters, digits and . - : [ ]
// only (a DNS name, IPv4 or bracketed IPv6 literal with an optional port),
// so that it cannot change the meaning of a header it is put in.
func validHostPort(host string) bool {
	if host == "" || len(host) > 255 {
		return false
	}
	for _, r := range host {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == ':', r == '[', r == ']':
		default:
			return false
		}
	}
	return true
}

func isLoopbackHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// contentType pins the types of common UI assets so that they do not
// depend on the host's mime database; "" lets http.ServeContent decide.
func contentType(ext string) string {
	switch strings.ToLower(ext) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".json", ".map":
		return "application/json"
	case ".webmanifest":
		return "application/manifest+json"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".ico":
		return "image/x-icon"
	case ".wasm":
		return "application/wasm"
	case ".woff2":
		return "font/woff2"
	case ".txt":
		return "text/plain; charset=utf-8"
	}
	return ""
}

const notBuiltPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>Atrium</title></head>
<body><h1>Atrium</h1>
<p>The gateway is running, but the web UI is not built into this binary.
Build the frontend and rebuild Atrium. The WebSocket endpoint is <code>/ws</code>.</p>
</body></html>
`

func (s *Server) serveUI(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	fsys := s.opts.UI
	if fsys == nil {
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		_, _ = io.WriteString(w, notBuiltPage)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	if !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	if st, err := fs.Stat(fsys, name); err == nil && st.IsDir() {
		name = path.Join(name, "index.html")
	}
	if s.serveFile(w, r, fsys, name) {
		return
	}
	if path.Ext(name) != "" {
		http.NotFound(w, r) // a missing asset must not turn into HTML
		return
	}
	if !s.serveFile(w, r, fsys, "index.html") {
		http.NotFound(w, r)
	}
}

// serveFile serves a regular file and reports whether it existed.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, fsys fs.FS, name string) bool {
	f, err := fsys.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	rs, ok := f.(io.ReadSeeker)
	if !ok {
		b, err := io.ReadAll(f)
		if err != nil {
			s.log.Error("ui file unreadable", "path", name, "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return true
		}
		rs = bytes.NewReader(b)
	}
	if ct := contentType(path.Ext(name)); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	switch {
	case path.Base(name) == "index.html":
		w.Header().Set("Cache-Control", "no-cache")
	case strings.HasPrefix(name, "assets/"):
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	}
	http.ServeContent(w, r, name, st.ModTime(), rs)
	return true
}
