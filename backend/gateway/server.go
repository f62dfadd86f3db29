package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Defaults for [Options].
const (
	DefaultAddr             = "127.0.0.1:18789"
	DefaultMaxPayload       = 16 << 20 // bytes: a 4 MiB note survives JSON escaping
	DefaultMaxBufferedBytes = 32 << 20 // bytes
	DefaultTickInterval     = 30 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxInFlight caps the requests of one connection served at
	// once (an `atrium node` host sends at most 8 results at a time, the
	// UI a handful of calls).
	DefaultMaxInFlight = 256
	// DefaultMaxPreAuthPayload is the largest frame read before hello-ok
	// (a connect request is a few hundred bytes; OpenClaw also uses 64 KiB).
	DefaultMaxPreAuthPayload = 64 << 10 // bytes
	// DefaultMaxUnauthenticated caps connections that have not completed
	// the handshake, in total and from one IP address.
	DefaultMaxUnauthenticated      = 64
	DefaultMaxUnauthenticatedPerIP = 16
	// DefaultMaxTotalBufferedBytes bounds the outbound queues of all
	// connections together.
	DefaultMaxTotalBufferedBytes = 128 << 20 // bytes
	// DefaultCloseGrace is how long a connection closed for being slow may
	// take to receive the rest of its current frame and the close frame.
	DefaultCloseGrace = 30 * time.Second
	// DefaultFrameWriteTimeout bounds writing one WebSocket frame.
	DefaultFrameWriteTimeout = 60 * time.Second
)

// WebSocket close codes used by the gateway besides the standard 1001
// (server shutting down) and 1008 (slow consumer).
const (
	// CloseUnauthorized follows an UNAUTHORIZED connect response.
	CloseUnauthorized websocket.StatusCode = 4001
	// CloseHandshakeFailed: the first frame was not a valid connect
	// request, or none arrived in time. The close reason says which.
	CloseHandshakeFailed websocket.StatusCode = 4002
)

// Options configure a [Server]. Zero values take the documented defaults.
type Options struct {
	// Addr is the TCP listen address for [Server.Run]; default
	// "127.0.0.1:18789". Port 0 picks a free port (see [Server.Addr]).
	Addr string
	// Token is the local operator token (connect params auth.token),
	// accepted on loopback listeners only. Required. Compared in constant
	// time.
	Token string
	// GatewayID is this gateway's id (package gwid), sent in hello-ok
	// server.gatewayId and auth.gatewayId; devices sign it. Optional.
	GatewayID string
	// Authenticate admits a connect request without auth.token (a device:
	// params.device with auth.deviceToken, auth.setupCode or neither). It
	// returns an *Error to refuse (UNAUTHORIZED, NOT_PAIRED, FORBIDDEN;
	// the connection is then closed with code 4001, INVALID_REQUEST with
	// 4002). Nil refuses every such request with UNAUTHORIZED. It runs
	// before hello-ok, on the connection's goroutine.
	Authenticate func(ctx context.Context, r *AuthRequest) (*AuthResult, error)
	// OnAuthenticated is called once per connection after it is
	// registered and its hello-ok was queued, and before hello-ok is
	// written: a client that has hello-ok was heard by it (events sent
	// from it arrive after hello-ok). OnClosed is called once when a
	// connection OnAuthenticated heard of has ended. Both run on the
	// connection's goroutine and should return quickly. Optional.
	OnAuthenticated func(ConnInfo)
	OnClosed        func(ConnInfo)
	// UI is the embedded web UI served at "/". Paths without a file
	// extension that match no file get index.html (SPA fallback); missing
	// files with an extension get 404. Nil serves a short page saying the UI
	// is not built.
	UI fs.FS
	// MaxPayload is the largest accepted inbound frame in bytes after the
	// handshake; default 16 MiB. Larger frames get PAYLOAD_TOO_LARGE and are
	// discarded without being buffered.
	MaxPayload int64
	// MaxPreAuthPayload is the largest frame read before hello-ok, in
	// bytes; default 64 KiB. A larger first frame closes the connection
	// (code 4002) after at most this many bytes were buffered, so an
	// unauthenticated client cannot make the server hold MaxPayload.
	MaxPreAuthPayload int64
	// MaxUnauthenticated caps the connections that have not completed the
	// handshake (default 64); MaxUnauthenticatedPerIP caps them per
	// remote IP address (default 16). Connections through ExternalHandler
	// (the LAN listeners) and through Handler on a loopback address (the
	// window, the CLI) have a cap each, so the LAN can never fill the
	// loopback listener's. An upgrade request over a cap gets
	// HTTP 503 with Retry-After. HandshakeTimeout frees a slot that is
	// held without a connect request.
	MaxUnauthenticated      int
	MaxUnauthenticatedPerIP int
	// MaxBufferedBytes bounds each connection's outbound queue in bytes
	// (frames accepted but not yet written to the socket); default 32 MiB.
	// A connection that would exceed it is closed with code 1008 and a
	// "slow consumer" reason.
	MaxBufferedBytes int64
	// MaxTotalBufferedBytes bounds the outbound queues of all connections
	// together, in bytes; default 128 MiB. When a frame takes the total
	// over it, the connection with the largest queue (the slowest
	// consumer) is closed with code 1008 and a reason saying so, its queue
	// discarded, until the total is within the budget again.
	MaxTotalBufferedBytes int64
	// CloseGrace is how long a connection closed for being slow may take
	// to receive the rest of the frame being written and the close frame
	// with its reason; default 30 s. A client that reads again within it
	// gets the reason; after it the socket is dropped.
	CloseGrace time.Duration
	// TickInterval is the period of the "tick" event; default 30 s.
	TickInterval time.Duration
	// HandshakeTimeout bounds the wait for the connect request; default 10 s.
	HandshakeTimeout time.Duration
	// MaxInFlight caps the requests of one authenticated connection being
	// served at once (each runs in its own goroutine until its response is
	// queued); default DefaultMaxInFlight (256). A request over it is
	// answered at once with UNAVAILABLE, retryable, and not run: a client
	// that floods requests costs the server a bounded number of handlers.
	MaxInFlight int
	// FrameWriteTimeout bounds writing one WebSocket frame to the socket;
	// default 60 s. A connection whose peer does not take a frame in that
	// time (it stopped reading, and the socket's buffers are full) is
	// dropped: net/http's WriteTimeout does not reach a WebSocket, which
	// it hands over (hijacks).
	FrameWriteTimeout time.Duration
	// Timeouts bound each phase of an HTTP connection of every listener
	// ([Server.HTTPServer]: the one Run serves on 127.0.0.1 and the LAN
	// ones); zero fields take the defaults ([Timeouts]).
	Timeouts Timeouts
	// MaxRequestHead is the largest request head (request line and
	// header) the listeners read, in bytes; default 32 KiB. A larger one is
	// answered 431 and the connection closed.
	MaxRequestHead int
	// Version is reported in hello-ok server.version and /healthz.
	Version string
	// Upload serves the media upload route, the HTTPS fallback of a media
	// transfer (docs/PROTOCOL.md "Media transfers"; package upload):
	// POST, GET and DELETE /media/upload/{id} and PUT
	// /media/upload/{id}/{block}, {id} 32 lower-case hex digits, {block}
	// a decimal index. It is the only route whose requests may carry a
	// body (see [Server.HTTPServer]); the gateway refuses a request with
	// an Origin other than its own scheme://host first (403). Nil: 404,
	// and no request may carry a body.
	Upload http.Handler
	// MaxUploadBody is the largest body a request of the Upload route may
	// declare, in bytes (Content-Length); default DefaultMaxUploadBody
	// (4 MiB + 1 KiB, the largest media block with room for nothing else).
	// A larger one is refused 413 before its first byte is read.
	MaxUploadBody int64
	// MCP serves /mcp (MCPPath), the Model Context Protocol's streamable
	// HTTP transport (package mcpserve; docs/PROTOCOL.md "MCP"). Besides
	// the upload route it is the only route whose requests may carry a
	// body: a POST with a Content-Length of 1 … MaxMCPBody bytes and a
	// bearer token MCPAuthorized accepts, both checked on the request's
	// head before any byte of the body is read (413, 401). The gateway
	// refuses a request with an Origin other than its own scheme://host
	// (403). Nil: /mcp is 404, and takes no body.
	MCP http.Handler
	// MCPAuthorized reports whether an Authorization header value carries
	// a live MCP token (required with MCP; called with the head only).
	MCPAuthorized func(ctx context.Context, authorization string) bool
	// MaxMCPBody is the largest body a request to /mcp may declare, in
	// bytes; default DefaultMaxMCPBody (1 MiB).
	MaxMCPBody int64
	// AllowedOrigins are extra WebSocket Origin patterns (path.Match syntax,
	// case-insensitive): a pattern containing "://" matches "scheme://host"
	// (e.g. "wails://wails"), otherwise the origin's host[:port] (e.g.
	// "wails.localhost"). Loopback http(s) origins (localhost, *.localhost,
	// 127.0.0.0/8, ::1) are always allowed, as are requests without an
	// Origin header and same-origin requests whose host is an IP literal
	// (LAN mode; a DNS name is not trusted, against DNS rebinding). Other
	// origins get HTTP 403. The token is required in every case.
	AllowedOrigins []string
	// Snapshot returns presence and profiles for hello-ok of operator
	// connections (admin, paired operator devices); nodes and unpaired
	// devices get empty lists. Optional.
	Snapshot func() Snapshot
	// Logger receives structured logs; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Handler serves one request method. The returned value is JSON-encoded as
// the response payload (nil encodes as {}). A returned error becomes the
// error response: an *Error anywhere in the chain passes through as is;
// context.DeadlineExceeded becomes TIMEOUT (retryable); context.Canceled
// becomes UNAVAILABLE (retryable); anything else becomes INTERNAL with the
// error text. A panic is recovered, logged and answered with INTERNAL.
//
// ctx is cancelled when the connection ends. Handlers run concurrently.
type Handler func(ctx context.Context, call *Call) (any, error)

// Call is one request as seen by a [Handler].
type Call struct {
	// ConnID identifies the connection (a UUID, also in hello-ok).
	ConnID string
	// Method is the request method, e.g. "memory.search".
	Method string
	// Params is the request's params object ({} when absent).
	Params json.RawMessage
	// Client is what the client reported in its connect request.
	Client ClientInfo
	// Role is RoleOperator, RoleNode or RoleUnpaired (= Principal.Role).
	Role string
	// RemoteIP is the peer's IP address (from the HTTP request's
	// RemoteAddr, without the port), for the audit log.
	RemoteIP string
	// Principal is who the connection acts for (Principal.Role == Role).
	Principal Principal
	// Caps and Commands: what a node connection may use (a paired node:
	// declared ∩ approved; the local node: declared); nil for others.
	Caps     []string
	Commands []string
	// Kind is the method's registered kind.
	Kind Kind
}

// method is a registered handler and its kind.
type method struct {
	h    Handler
	kind Kind
}

// Server is the gateway. Create it with [New], register handlers, then call
// [Server.Run] or mount [Server.Handler]. All methods are safe for
// concurrent use.
type Server struct {
	opts     Options
	log      *slog.Logger
	now      func() time.Time
	started  time.Time
	handler  http.Handler
	external http.Handler
	idem     *idemCache

	mu           sync.RWMutex
	handlers     map[string]method
	events       map[string]struct{}
	all          map[*conn]struct{} // every open connection
	authed       map[string]*conn   // authenticated, by connID
	preAuth      map[string]int     // connections before hello-ok, by pool (preAuthPool)
	preAuthByIP  map[string]int     // the same by pool and IP address
	forbidden    func(call *Call, reason string)
	deviceEvents DeviceEventFilter       // see OnDeviceEvent
	pages        map[string]http.Handler // HandlePages: path prefix → handler
	shuttingDown bool
	connWG       sync.WaitGroup

	// totalQueued is the sum of every open connection's queued bytes
	// (conn.queued); shedMu serialises shedding the slowest consumers.
	totalQueued atomic.Int64
	shedMu      sync.Mutex

	bcastMu sync.Mutex // orders Broadcast/Send calls and hello-ok registration

	lnMu    sync.Mutex
	ln      net.Listener
	ready   chan struct{}
	running bool
}

// New validates opts, applies defaults and returns a Server. It fails when
// Token is empty, a limit is negative, or an AllowedOrigins pattern is
// malformed.
func New(opts Options) (*Server, error) {
	if opts.Token == "" {
		return nil, errors.New("gateway: Options.Token is required")
	}
	if opts.MaxPayload < 0 || opts.MaxBufferedBytes < 0 || opts.TickInterval < 0 || opts.HandshakeTimeout < 0 ||
		opts.MaxPreAuthPayload < 0 || opts.MaxUnauthenticated < 0 || opts.MaxUnauthenticatedPerIP < 0 ||
		opts.MaxTotalBufferedBytes < 0 || opts.CloseGrace < 0 || opts.MaxInFlight < 0 ||
		opts.FrameWriteTimeout < 0 || opts.MaxRequestHead < 0 || opts.MaxUploadBody < 0 || opts.MaxMCPBody < 0 ||
		opts.Timeouts.Header < 0 || opts.Timeouts.Request < 0 || opts.Timeouts.Write < 0 || opts.Timeouts.Idle < 0 {
		return nil, errors.New("gateway: negative limit in Options")
	}
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return nil, fmt.Errorf("gateway: bad Options.Addr %q: %w", opts.Addr, err)
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = DefaultMaxPayload
	}
	if opts.MaxBufferedBytes == 0 {
		opts.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if opts.MaxPreAuthPayload == 0 {
		opts.MaxPreAuthPayload = DefaultMaxPreAuthPayload
	}
	if opts.MaxUnauthenticated == 0 {
		opts.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if opts.MaxUnauthenticatedPerIP == 0 {
		opts.MaxUnauthenticatedPerIP = DefaultMaxUnauthenticatedPerIP
	}
	if opts.MaxTotalBufferedBytes == 0 {
		opts.MaxTotalBufferedBytes = DefaultMaxTotalBufferedBytes
	}
	if opts.CloseGrace == 0 {
		opts.CloseGrace = DefaultCloseGrace
	}
	if opts.TickInterval == 0 {
		opts.TickInterval = DefaultTickInterval
	}
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.FrameWriteTimeout == 0 {
		opts.FrameWriteTimeout = DefaultFrameWriteTimeout
	}
	if opts.MaxUploadBody == 0 {
		opts.MaxUploadBody = DefaultMaxUploadBody
	}
	if opts.MaxMCPBody == 0 {
		opts.MaxMCPBody = DefaultMaxMCPBody
	}
	if opts.MCP != nil && opts.MCPAuthorized == nil {
		return nil, errors.New("gateway: Options.MCP needs Options.MCPAuthorized")
	}
	if opts.MaxRequestHead == 0 {
		opts.MaxRequestHead = DefaultMaxRequestHead
	}
	opts.Timeouts = opts.Timeouts.withDefaults()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for _, p := range opts.AllowedOrigins {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("gateway: bad AllowedOrigins pattern %q: %w", p, err)
		}
	}
	opts.AllowedOrigins = slices.Clone(opts.AllowedOrigins)
	s := &Server{
		opts:        opts,
		log:         opts.Logger,
		now:         opts.Now,
		started:     opts.Now(),
		idem:        newIdemCache(opts.Now, IdempotencyWindow, defaultIdemMaxEntries, defaultIdemMaxBytes),
		handlers:    make(map[string]method),
		events:      make(map[string]struct{}),
		all:         make(map[*conn]struct{}),
		authed:      make(map[string]*conn),
		preAuth:     make(map[string]int),
		preAuthByIP: make(map[string]int),
		ready:       make(chan struct{}),
	}
	s.handler = http.HandlerFunc(s.route)
	s.external = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.route(w, r.WithContext(context.WithValue(r.Context(), externalKey{}, true)))
	})
	return s, nil
}

// Handle registers h for method with its kind ([Read] or [Write] of the
// principals that may call it); it is then listed in hello-ok
// features.methods (and features.sideEffects, features.operatorOnly,
// features.callable). Register before serving: connections authenticated
// earlier do not learn about it. It panics on an empty method, a nil
// handler, a kind without callers, "connect" or a duplicate registration
// (programming errors).
func (s *Server) Handle(name string, kind Kind, h Handler) {
	if name == "" || h == nil {
		panic("gateway: Handle needs a method name and a handler")
	}
	if !kind.valid() {
		panic("gateway: Handle " + name + ": kind needs callers (gateway.Read(who) or gateway.Write(who))")
	}
	if name == MethodConnect {
		panic("gateway: the connect method is reserved for the handshake")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.handlers[name]; dup {
		panic("gateway: duplicate handler for " + name)
	}
	s.handlers[name] = method{h: h, kind: kind}
}

// HandlePages serves the HTTP GET requests whose path starts with prefix
// ("/canvas/frame/": it must start and end with "/", and not be "/",
// "/ws/" or "/api/") with h instead of the UI, on every listener, after
// the gateway's checks of the request and with its security headers set;
// h may replace them (a presented Canvas page has a CSP of its own). It
// panics on a bad or duplicate prefix (programming errors). Register
// before serving.
func (s *Server) HandlePages(prefix string, h http.Handler) {
	if len(prefix) < 3 || prefix[0] != '/' || prefix[len(prefix)-1] != '/' || prefix == "/ws/" || prefix == "/api/" || h == nil {
		panic("gateway: HandlePages needs a prefix /x/ (not /ws/ or /api/) and a handler")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pages == nil {
		s.pages = map[string]http.Handler{}
	}
	if _, dup := s.pages[prefix]; dup {
		panic("gateway: duplicate HandlePages " + prefix)
	}
	s.pages[prefix] = h
}

// page is the HandlePages handler of path, nil when none.
func (s *Server) page(path string) http.Handler {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for prefix, h := range s.pages {
		if strings.HasPrefix(path, prefix) {
			return h
		}
	}
	return nil
}

// MethodKind returns the kind method was registered with, or the zero
// Kind (String "invalid") when it is not registered.
func (s *Server) MethodKind(name string) Kind {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.handlers[name].kind
}

// OnForbidden sets f, called synchronously for every call the gateway
// refuses because the method is not open to the caller's principal
// (before the FORBIDDEN response), and for every refused connect request
// (call.Method "connect", call.Principal.Device the claimed device id if
// any, reason the error message), e.g. to audit them. Set it before
// serving.
func (s *Server) OnForbidden(f func(call *Call, reason string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forbidden = f
}

// DeclareEvents lists event names in hello-ok features.events. The built-in
// "connect.challenge" and "tick" are always listed. Broadcasting an
// undeclared event still works.
func (s *Server) DeclareEvents(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if n != "" {
			s.events[n] = struct{}{}
		}
	}
}

// features lists the methods and events; Callable for principal p.
func (s *Server) features(p Principal) Features {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f := Features{Methods: make([]string, 0, len(s.handlers)), Events: []string{EventChallenge, EventTick},
		SideEffects: []string{}, OperatorOnly: []string{}, Callable: []string{}}
	for name, m := range s.handlers {
		f.Methods = append(f.Methods, name)
		if m.kind.SideEffects() {
			f.SideEffects = append(f.SideEffects, name)
		}
		if m.kind.Who&Nodes == 0 {
			f.OperatorOnly = append(f.OperatorOnly, name)
		}
		if m.kind.Allows(p) {
			f.Callable = append(f.Callable, name)
		}
	}
	for e := range s.events {
		if e != EventChallenge && e != EventTick {
			f.Events = append(f.Events, e)
		}
	}
	sort.Strings(f.Methods)
	sort.Strings(f.Events)
	sort.Strings(f.SideEffects)
	sort.Strings(f.OperatorOnly)
	sort.Strings(f.Callable)
	return f
}

func (s *Server) lookup(name string) (method, func(*Call, string)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.handlers[name], s.forbidden
}

// Broadcast sends event with payload (JSON-encoded once) to every
// authenticated operator connection ([Operators]: admin and paired
// operator devices). Events from sequential Broadcast calls arrive in call
// order on every connection, each with that connection's next seq. It never
// blocks on a slow client: a connection whose queue would exceed
// MaxBufferedBytes is disconnected (code 1008). An unencodable payload is
// logged and not sent.
func (s *Server) Broadcast(event string, payload any) {
	s.BroadcastTo(Operators, event, payload)
}

func (s *Server) broadcast(keep func(*conn) bool, event string, payload any) {
	nameJSON, body, err := encodeEvent(event, payload)
	if err != nil {
		s.log.Error("broadcast payload not encodable", "event", event, "err", err)
		return
	}
	s.bcastMu.Lock()
	defer s.bcastMu.Unlock()
	s.mu.RLock()
	targets := make([]*conn, 0, len(s.authed))
	for _, c := range s.authed {
		if keep(c) {
			targets = append(targets, c)
		}
	}
	filter := s.deviceEvents
	s.mu.RUnlock()
	var perDevice map[string][]byte // the filter's answer per device, once per broadcast (nil: withheld)
	for _, c := range targets {
		out := body
		if filter != nil && c.principal.Class() == OperatorDevice {
			got, seen := perDevice[c.principal.Device]
			if !seen {
				var ok bool
				switch got, ok = filter(c.principal, event, body); {
				case !ok:
					got = nil
				case got == nil:
					got = body
				}
				if perDevice == nil {
					perDevice = map[string][]byte{}
				}
				perDevice[c.principal.Device] = got
			}
			if got == nil {
				continue
			}
			out = got
		}
		c.sendEventRaw(nameJSON, out)
	}
}

// Send sends event with payload to one authenticated connection (operator
// or node). It fails with a NOT_FOUND *Error when no such connection is
// open, UNAVAILABLE when it is closing, and INTERNAL when the payload cannot
// be encoded.
func (s *Server) Send(connID, event string, payload any) error {
	nameJSON, body, err := encodeEvent(event, payload)
	if err != nil {
		return &Error{Code: CodeInternal, Message: fmt.Sprintf("encode %s payload: %v", event, err)}
	}
	s.bcastMu.Lock() // never ahead of hello-ok (see conn.handshake)
	defer s.bcastMu.Unlock()
	s.mu.RLock()
	c := s.authed[connID]
	s.mu.RUnlock()
	if c == nil {
		return Errorf(CodeNotFound, "no connection %q", connID)
	}
	if !c.sendEventRaw(nameJSON, body) {
		return Errorf(CodeUnavailable, "connection %q is closing", connID)
	}
	return nil
}

// Queued is the bytes waiting in connection connID's send queue (its
// events and responses not yet written to the socket), for a producer that
// paces itself before the connection hits Options.MaxBufferedBytes (a live
// view ends for a slow viewer rather than have its connection closed).
// False when no such authenticated connection is open.
func (s *Server) Queued(connID string) (int64, bool) {
	s.mu.RLock()
	c := s.authed[connID]
	s.mu.RUnlock()
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued, true
}

func encodeEvent(event string, payload any) (nameJSON, body []byte, err error) {
	if event == "" {
		return nil, nil, errors.New("empty event name")
	}
	nameJSON, err = json.Marshal(event)
	if err != nil {
		return nil, nil, fmt.Errorf("encode event name: %w", err)
	}
	if payload == nil {
		return nameJSON, []byte(`{}`), nil
	}
	body, err = json.Marshal(payload)
	if err != nil {
		return nil, nil, fmt.Errorf("encode event payload: %w", err)
	}
	return nameJSON, body, nil
}

// Handler returns the HTTP handler: "/ws" (WebSocket gateway), "/healthz"
// (200 {"ok":true,"version","uptimeMs"}) and the UI at every other path.
// The operator token is accepted through it only on connections whose
// local address is loopback; mount [Server.ExternalHandler] on LAN
// listeners.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen binds Options.Addr. It is optional before [Server.Run] (which
// calls it) and lets callers read [Server.Addr] when using port 0. Calling
// it again is a no-op.
func (s *Server) Listen() error { return s.ListenOn(s.opts.Addr) }

// ListenOn binds addr instead of Options.Addr (for example "127.0.0.1:0"
// when the configured port is taken and any port will do, as for the
// desktop window, which is handed the address). Calling it when already
// listening is a no-op.
func (s *Server) ListenOn(addr string) error {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w", addr, err)
	}
	s.ln = ln
	close(s.ready)
	s.log.Info("gateway listening", "addr", ln.Addr().String())
	return nil
}

// Ready is closed once the server is listening.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr returns the bound address ("127.0.0.1:54321") once listening, else "".
func (s *Server) Addr() string {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// shutdownGrace bounds each phase of a graceful shutdown.
const shutdownGrace = 5 * time.Second

// Run listens (if [Server.Listen] was not called) and serves until ctx is
// done, then shuts down gracefully: it stops accepting, closes every
// WebSocket with code 1001 "server shutting down" after flushing its queue,
// and waits (bounded) for connections to end. It returns nil after a
// shutdown caused by ctx, or the error that stopped serving. Run may be
// called once.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.lnMu.Lock()
	if s.running {
		s.lnMu.Unlock()
		return errors.New("gateway: Run called twice")
	}
	s.running = true
	ln := s.ln
	s.lnMu.Unlock()

	srv := s.HTTPServer(s.handler, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var runErr error
	select {
	case err := <-served:
		runErr = fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("gateway shutting down")
	shCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	conns := s.beginShutdown()
	for _, c := range conns {
		c.closeWith(websocket.StatusGoingAway, "server shutting down", true)
	}
	if err := srv.Shutdown(shCtx); err != nil && runErr == nil && !errors.Is(err, context.DeadlineExceeded) {
		runErr = fmt.Errorf("gateway: shutdown: %w", err)
	}
	if !s.waitConns(shCtx) {
		for _, c := range conns {
			c.cancel() // force: closes the socket without a close handshake
		}
		forceCtx, cancel2 := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel2()
		if !s.waitConns(forceCtx) {
			s.log.Warn("gateway connections still open after shutdown")
		}
	}
	if runErr == nil {
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("gateway: serve: %w", err)
		}
	}
	s.log.Info("gateway stopped")
	return runErr
}

// beginShutdown refuses new connections and returns the open ones.
func (s *Server) beginShutdown() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shuttingDown = true
	out := make([]*conn, 0, len(s.all))
	for c := range s.all {
		out = append(out, c)
	}
	return out
}

func (s *Server) waitConns(ctx context.Context) bool {
	done := make(chan struct{})
	go func() { s.connWG.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// addConn registers a new connection; false while shutting down.
func (s *Server) addConn(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return false
	}
	s.all[c] = struct{}{}
	s.connWG.Add(1)
	return true
}

func (s *Server) authenticate(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.all[c]; ok {
		s.authed[c.id] = c
	}
}

// dropConn removes c from broadcast targets (on close or overflow).
func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.authed[c.id] == c {
		delete(s.authed, c.id)
	}
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.all[c]; !ok {
		return
	}
	delete(s.all, c)
	if s.authed[c.id] == c {
		delete(s.authed, c.id)
	}
	s.connWG.Done()
}

// numAuthed reports the number of authenticated connections (tests).
func (s *Server) numAuthed() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.authed)
}

// snapshotFor is hello-ok's snapshot for principal p: Options.Snapshot for
// the person's connections ([Operators]), empty lists for nodes and
// unpaired devices (presence and profiles are not theirs to see).
func (s *Server) snapshotFor(p Principal) Snapshot {
	if !Operators.Has(p.Class()) {
		return Snapshot{Presence: []any{}, Profiles: []any{}}
	}
	return s.snapshot()
}

func (s *Server) snapshot() (snap Snapshot) {
	if s.opts.Snapshot != nil {
		func() {
			defer func() {
				if r := recover(); r != nil {
					s.log.Error("snapshot panic", "panic", fmt.Sprint(r))
					snap = Snapshot{}
				}
			}()
			snap = s.opts.Snapshot()
		}()
	}
	if snap.Presence == nil {
		snap.Presence = []any{}
	}
	if snap.Profiles == nil {
		snap.Profiles = []any{}
	}
	return snap
}
