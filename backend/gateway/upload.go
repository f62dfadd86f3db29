package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// UploadPrefix is the path prefix of the media upload route
// (Options.Upload).
const UploadPrefix = "/media/upload/"

// DefaultMaxUploadBody is Options.MaxUploadBody's default, in bytes: a
// media block of at most 4 MiB (backend/media MaxBlockSize) and 1 KiB to
// spare.
const DefaultMaxUploadBody = 4<<20 + 1<<10

// uploadRoute reports whether method and path name a request of the upload
// route (Options.Upload), and whether such a request carries a body: POST
// /media/upload/{id} (the plan) and PUT /media/upload/{id}/{block} do, GET
// and DELETE /media/upload/{id} do not. {id} is 32 lower-case hex digits,
// {block} 1 to 7 decimal digits.
func uploadRoute(method, path string) (route, body bool) {
	rest, ok := strings.CutPrefix(path, UploadPrefix)
	if !ok {
		return false, false
	}
	id, block, hasBlock := strings.Cut(rest, "/")
	if !uploadID(id) {
		return false, false
	}
	if hasBlock {
		return method == http.MethodPut && uploadIndex(block), true
	}
	switch method {
	case http.MethodPost:
		return true, true
	case http.MethodGet, http.MethodDelete:
		return true, false
	}
	return false, false
}

func uploadID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func uploadIndex(s string) bool {
	if s == "" || len(s) > 7 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// bodyAllowed is the listeners' rule for a request body (req: its head):
// a request of the upload route that carries one (uploadRoute), when the
// route is served, with a Content-Length of 1 … Options.MaxUploadBody; a
// POST to /mcp (Options.MCP) with a Content-Length of 1 …
// Options.MaxMCPBody and a live bearer token (Options.MCPAuthorized: 401
// otherwise); never a Transfer-Encoding. Anything else is 413.
func (s *Server) bodyAllowed(req *http.Request) *refusal {
	n, chunked := req.ContentLength, len(req.TransferEncoding) > 0
	tooLarge := &refusal{status: http.StatusRequestEntityTooLarge, text: noBody}
	if s == nil || chunked || n <= 0 {
		return tooLarge
	}
	if req.URL.Path == MCPPath && req.Method == http.MethodPost && s.opts.MCP != nil {
		if n > s.opts.MaxMCPBody {
			return &refusal{status: http.StatusRequestEntityTooLarge, text: fmt.Sprintf("an MCP request is at most %d bytes", s.opts.MaxMCPBody)}
		}
		if s.opts.MCPAuthorized == nil || !s.opts.MCPAuthorized(req.Context(), req.Header.Get("Authorization")) {
			s.log.Info("gateway mcp request without a live token refused")
			return &refusal{status: http.StatusUnauthorized, text: "a live MCP token is required (Authorization: Bearer …)",
				authenticate: `Bearer realm="atrium-mcp"`}
		}
		return nil
	}
	if s.opts.Upload == nil || n > s.opts.MaxUploadBody {
		return tooLarge
	}
	if route, body := uploadRoute(req.Method, req.URL.Path); route && body {
		return nil
	}
	return tooLarge
}

// sameOrigin reports whether r has no Origin header (not a browser: the
// device token decides) or one equal to the request's own scheme://host:
// the upload route serves the gateway's own pages only, never another
// origin (no CORS).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Path != "" && u.Path != "/" || u.User != nil {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host)
}

// serveUpload hands a request of the upload route to Options.Upload,
// after the same-origin check; anything else under UploadPrefix is 404
// (405 for a known path with another method).
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	route, _ := uploadRoute(r.Method, r.URL.Path)
	switch {
	case s.opts.Upload == nil:
		http.NotFound(w, r)
	case !route:
		if ok, _ := uploadRoute(http.MethodPut, r.URL.Path); ok {
			w.Header().Set("Allow", "PUT")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if ok, _ := uploadRoute(http.MethodGet, r.URL.Path); ok {
			w.Header().Set("Allow", "GET, POST, DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		http.NotFound(w, r)
	case !sameOrigin(r):
		s.log.Warn("gateway upload from another origin refused", "remote", r.RemoteAddr)
		refuseOrigin(w, "uploads are taken from this gateway's own pages only")
	default:
		w.Header().Set("Cache-Control", "no-store")
		s.opts.Upload.ServeHTTP(w, r)
	}
}

// refuseOrigin answers 403 with text to a request from another origin and
// closes the connection, so that net/http does not read its unread body
// to reuse it.
func refuseOrigin(w http.ResponseWriter, text string) {
	w.Header().Set("Connection", "close")
	http.Error(w, text, http.StatusForbidden)
}
