package mcpserve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is the gateway route of the streamable HTTP transport.
const Path = "/mcp"

// DefaultMaxBody is HTTPOptions.MaxBody's default, in bytes: 1 MiB, room
// for a memory_write of a long file; a larger request is refused (413).
const DefaultMaxBody = 1 << 20

// DefaultSessionTimeout is HTTPOptions.SessionTimeout's default.
const DefaultSessionTimeout = 30 * time.Minute

// HTTPOptions configure an HTTP handler.
type HTTPOptions struct {
	// Memory is where every call goes (required).
	Memory Memory
	// Tokens are the clients' bearer tokens (required).
	Tokens *Tokens
	// Version is the server's version in initialize.
	Version string
	// MaxBody is the largest request body, in bytes; default
	// DefaultMaxBody. The gateway refuses a larger declared length before
	// reading it; the SDK bounds what it reads to the same.
	MaxBody int64
	// SessionTimeout closes a session idle that long; default
	// DefaultSessionTimeout. It also bounds a GET stream (notifications)
	// past the gateway's write timeout.
	SessionTimeout time.Duration
	// Logger; default slog.Default(). Token secrets are never logged.
	Logger *slog.Logger
}

// HTTP serves MCP's streamable HTTP transport at /mcp: every request needs
// "Authorization: Bearer <token>" of a live token (401 otherwise, with
// WWW-Authenticate), and acts as the token's role. Each role has its own
// SDK handler, so a session opened with one role's token is unknown (404)
// to a request carrying another role's token.
type HTTP struct {
	o    HTTPOptions
	mu   sync.Mutex
	byRo map[string]*roleHandler

	pendMu  sync.Mutex
	pending map[string]bool // paths changed since Run last delivered them
	wake    chan struct{}   // capacity 1: Run has work
}

type roleHandler struct {
	srv *Server
	h   *mcp.StreamableHTTPHandler
}

// NewHTTP returns the handler. Errors: no Memory or Tokens.
func NewHTTP(o HTTPOptions) (*HTTP, error) {
	if o.Memory == nil || o.Tokens == nil {
		return nil, errors.New("mcpserve: HTTPOptions.Memory and Tokens are required")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &HTTP{o: o, byRo: map[string]*roleHandler{}, pending: map[string]bool{}, wake: make(chan struct{}, 1)}, nil
}

// MaxBody is the largest request body served, in bytes.
func (h *HTTP) MaxBody() int64 { return h.o.MaxBody }

// Bearer is the token of an Authorization header value ("Bearer <token>",
// the scheme in any case); "" when there is none.
func Bearer(authorization string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// Authorized reports whether an Authorization header value carries a live
// token. The gateway calls it on a request's head, before any byte of its
// body is read.
func (h *HTTP) Authorized(ctx context.Context, authorization string) bool {
	_, err := h.o.Tokens.Check(ctx, Bearer(authorization))
	return err == nil
}

func (h *HTTP) handler(role string) (*roleHandler, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rh, ok := h.byRo[role]; ok {
		return rh, nil
	}
	srv, err := New(Options{Memory: h.o.Memory, Role: role, Version: h.o.Version, Logger: h.o.Logger})
	if err != nil {
		return nil, err
	}
	rh := &roleHandler{srv: srv, h: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() },
		&mcp.StreamableHTTPOptions{Logger: h.o.Logger, MaxRequestBodyBytes: h.o.MaxBody, SessionTimeout: h.o.SessionTimeout})}
	h.byRo[role] = rh
	return rh, nil
}

// ServeHTTP checks the bearer token and hands the request to its role's
// handler.
func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil && !loopback(r.RemoteAddr) {
		// The gateway serves plain HTTP on 127.0.0.1 only; this guards
		// any other listener this handler might be put behind.
		h.o.Logger.Warn("mcp request over plain HTTP from another machine refused", "remote", r.RemoteAddr)
		http.Error(w, "MCP is served over the LAN only with TLS", http.StatusForbidden)
		return
	}
	ti, err := h.o.Tokens.Check(r.Context(), Bearer(r.Header.Get("Authorization")))
	if err != nil {
		if !errors.Is(err, ErrBadToken) {
			h.o.Logger.Warn("mcp token check failed", "err", err)
		}
		h.o.Logger.Info("mcp request without a live token refused", "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="atrium-mcp"`)
		http.Error(w, "a live MCP token is required (Authorization: Bearer …; create one in Settings or with atrium mcp token create)", http.StatusUnauthorized)
		return
	}
	rh, err := h.handler(ti.Role)
	if err != nil {
		h.o.Logger.Error("mcp server could not be built", "role", ti.Role, "err", err)
		http.Error(w, "the MCP server could not start", http.StatusInternalServerError)
		return
	}
	if r.Method == http.MethodGet {
		// The notification stream outlives the gateway's write timeout;
		// it is bounded by the session's idle timeout instead.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.o.SessionTimeout))
	}
	rh.h.ServeHTTP(w, r)
}

// loopback reports whether addr (host:port) is a loopback address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Changed tells every role's server that memory changed (paths:
// workspace-relative, from memory.changed), so its resources and their
// subscribers are brought up to date (Server.Refresh). Roles without a
// server yet are skipped.
func (h *HTTP) Changed(ctx context.Context, paths []string) {
	h.mu.Lock()
	srvs := make([]*Server, 0, len(h.byRo))
	for _, rh := range h.byRo {
		srvs = append(srvs, rh.srv)
	}
	h.mu.Unlock()
	for _, s := range srvs {
		s.Refresh(ctx, paths)
	}
}

// Notify queues changed paths (memory.Options.OnChange) for Run to deliver
// through Changed. It never blocks: changes that arrive while a delivery
// runs are merged into the next one.
func (h *HTTP) Notify(paths []string) {
	h.pendMu.Lock()
	for _, p := range paths {
		h.pending[p] = true
	}
	h.pendMu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Run delivers the changes Notify queued until ctx ends; it returns nil
// then.
func (h *HTTP) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-h.wake:
		}
		h.pendMu.Lock()
		paths := make([]string, 0, len(h.pending))
		for p := range h.pending {
			paths = append(paths, p)
		}
		clear(h.pending)
		h.pendMu.Unlock()
		h.Changed(ctx, paths)
	}
}
