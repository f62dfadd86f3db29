package gateway

// The HTTP side of every gateway listener (issue 21 items 1 and 6): the
// http.Server each listener is served by, with every phase of a connection
// bounded (Timeouts), and the request-head check in front of net/http
// (guardConn), so that net/http never answers a request itself: whatever it
// would refuse is refused here first, with the security headers of every
// response.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Defaults of [Timeouts] and of Options.MaxRequestHead.
const (
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultRequestTimeout = 20 * time.Second
	DefaultWriteTimeout   = 60 * time.Second
	DefaultIdleTimeout    = 30 * time.Second
	DefaultMaxRequestHead = 32 << 10 // bytes
)

// Timeouts bound the phases of an HTTP connection of a gateway listener
// (the plain one on 127.0.0.1 and the LAN ones alike). Zero fields take
// the defaults. A WebSocket connection is bound by them until its upgrade:
// net/http clears a connection's deadlines when it is hijacked, and from
// then on the gateway's own limits apply (Options.HandshakeTimeout before
// hello-ok, Options.FrameWriteTimeout for every frame, CloseGrace).
type Timeouts struct {
	// Header bounds a request head, from its first byte (or, on a new
	// connection, from when net/http starts reading it) to its blank line
	// (http.Server.ReadHeaderTimeout); default 10 s.
	Header time.Duration
	// Request bounds reading a whole request, head and body
	// (http.Server.ReadTimeout); default 20 s. Only the upload route
	// (Options.Upload) takes a body, at most Options.MaxUploadBody bytes;
	// this bounds reading it (a request elsewhere that declares one is
	// refused with 413 before net/http reads it).
	Request time.Duration
	// Write bounds a response, from the end of its request's head to its
	// last byte (http.Server.WriteTimeout); default 60 s.
	Write time.Duration
	// Idle bounds the wait for the next request on a keep-alive
	// connection (http.Server.IdleTimeout); default 30 s.
	Idle time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Header <= 0 {
		t.Header = DefaultHeaderTimeout
	}
	if t.Request <= 0 {
		t.Request = DefaultRequestTimeout
	}
	if t.Write <= 0 {
		t.Write = DefaultWriteTimeout
	}
	if t.Idle <= 0 {
		t.Idle = DefaultIdleTimeout
	}
	return t
}

// HTTPServer serves one gateway listener: net/http with every phase
// bounded by Options.Timeouts and every request head checked before
// net/http reads it (see [Server.HTTPServer]).
type HTTPServer struct {
	srv     *http.Server
	maxHead int
	header  time.Duration
	log     *slog.Logger
	// bodyOK is Server.bodyAllowed: which request may carry a body.
	bodyOK bodyRule
}

// HTTPServer returns the server for a listener that serves h (the
// gateway's Handler or ExternalHandler, possibly wrapped by ServeHosts).
// connContext, when not nil, is http.Server.ConnContext (for example to
// attach [WithAuthenticatedHook]); it gets the accepted connection itself,
// as the listener returned it.
//
// Each request head (at most Options.MaxRequestHead bytes) is checked
// before net/http reads it, with the checks net/http applies, and refused
// here, with the security headers, when it would fail them: 400 (malformed
// request line or header, a missing, malformed or repeated Host, a bad
// Content-Length or transfer coding), 413 (a request body, except on the
// upload route: a POST or PUT there (Options.Upload) may declare a
// Content-Length of 1 … Options.MaxUploadBody bytes, no Transfer-Encoding;
// its body is then passed to net/http unchecked, under the same
// Timeouts.Request bound as the head, and the next request's head is
// checked again), 417 (an Expect other than 100-continue), 431 (head too large), 505
// (not HTTP/1.x). The connection is then closed.
func (s *Server) HTTPServer(h http.Handler, connContext func(ctx context.Context, c net.Conn) context.Context) *HTTPServer {
	t := s.opts.Timeouts
	hs := &HTTPServer{maxHead: s.opts.MaxRequestHead, header: t.Header, log: s.log, bodyOK: s.bodyAllowed}
	hs.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.Header,
		ReadTimeout:       t.Request,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		// Larger than any head guardConn lets through: net/http never
		// answers 431 itself.
		MaxHeaderBytes: 2 * s.opts.MaxRequestHead,
		ConnState: func(c net.Conn, st http.ConnState) {
			if g := asGuard(c); g != nil {
				g.setState(st)
			}
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if connContext != nil {
		hs.srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			if g := asGuard(c); g != nil {
				c = g.Conn
			}
			return connContext(ctx, c)
		}
	}
	return hs
}

// Serve serves the connections ln accepts until ln is closed or Shutdown
// is called; it returns http.ErrServerClosed after Shutdown (as
// http.Server.Serve). A *tls.Conn from ln keeps its TLS state (Request.TLS).
func (hs *HTTPServer) Serve(ln net.Listener) error {
	return hs.srv.Serve(guardListener{Listener: ln, hs: hs})
}

// Shutdown stops accepting and closes idle connections, waiting (until ctx
// ends) for active ones, as http.Server.Shutdown; hijacked WebSocket
// connections are the gateway's to close (Server.Run).
func (hs *HTTPServer) Shutdown(ctx context.Context) error { return hs.srv.Shutdown(ctx) }

// authHookKey carries a connection's authenticated hook in its context.
type authHookKey struct{}

// WithAuthenticatedHook returns ctx carrying f, for http.Server.ConnContext
// (the connContext of [Server.HTTPServer]): when a WebSocket of that
// connection completes its handshake (its credentials checked and
// confirmed, hello-ok queued, Options.OnAuthenticated run), the gateway
// calls f once, on the connection's goroutine. The LAN listeners count a
// connection as unauthenticated until then.
func WithAuthenticatedHook(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, authHookKey{}, f)
}

func authenticatedHook(ctx context.Context) func() {
	f, _ := ctx.Value(authHookKey{}).(func())
	return f
}

// guardListener wraps each accepted connection in a guardConn.
type guardListener struct {
	net.Listener
	hs *HTTPServer
}

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	g := &guardConn{Conn: c, hs: l.hs}
	if tc, ok := c.(*tls.Conn); ok {
		return &tlsGuardConn{guardConn: g, tc: tc}, nil
	}
	return g, nil
}

// refusal is a request refused by guardConn: the status and its text.
type refusal struct {
	status int
	text   string
	host   string // the request's Host when it could be read, for the CSP
	// authenticate is the WWW-Authenticate header of a 401 ("": none).
	authenticate string
}

// bodyRule decides whether the request whose head req is (its body not
// read) may carry its body: nil, or the refusal to answer instead.
type bodyRule func(req *http.Request) *refusal

// noBody is the refusal's text for a body where none is taken.
const noBody = "this gateway takes no request body here"

// guardConn sits between net/http and a connection: it hands net/http a
// request head only once the whole head arrived and passed the checks
// net/http would apply (checkHead). A head that fails them is not handed
// on: Read reports io.EOF (net/http then closes without answering) and
// Close writes the refusal first, with the security headers. Once net/http
// hijacked the connection (a WebSocket), bytes pass through unchecked.
//
// net/http reads a connection from one goroutine at a time; Close and the
// ConnState hook may run on others (mu).
type guardConn struct {
	net.Conn
	hs *HTTPServer

	in   []byte // read, not yet a whole head
	out  []byte // a checked head, not yet read by net/http
	body int64  // bytes of the checked head's body not yet read by net/http

	mu  sync.Mutex
	raw bool // hijacked: pass bytes through
	// upgrade: the head handed to net/http asks for a protocol upgrade (a
	// WebSocket) and net/http has neither hijacked the connection nor
	// finished its response. Bytes that arrive meanwhile belong to the new
	// protocol — a client sends its first frame as soon as the 101 arrives,
	// which net/http writes before Hijack stops its background read — and
	// pass through unread by the head checks (read as a head, a frame that
	// holds an empty line was cut in two or refused). passed: some did; if
	// the response then ends without a hijack the connection is dropped,
	// since net/http holds bytes no check has seen.
	upgrade, passed bool
	drop            bool      // an upgrade ended without a hijack after bytes passed: Read reports io.EOF
	refused         *refusal  // the head that failed the checks
	answered        bool      // the refusal was written
	deadline        time.Time // the read deadline net/http set
	headDL          time.Time // when the head being read must be complete (zero: no head begun)
}

// tlsGuardConn is a guardConn over a *tls.Conn: net/http fills
// Request.TLS from ConnectionState.
type tlsGuardConn struct {
	*guardConn
	tc *tls.Conn
}

func (c *tlsGuardConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

func asGuard(c net.Conn) *guardConn {
	switch g := c.(type) {
	case *guardConn:
		return g
	case *tlsGuardConn:
		return g.guardConn
	}
	return nil
}

// NetConn returns the connection under the guard.
func (g *guardConn) NetConn() net.Conn { return g.Conn }

// setState is the http.Server.ConnState hook: once the connection is
// hijacked, bytes pass through and only the deadlines its new owner sets
// apply (net/http cleared its own just before).
//
// A response to an upgrade request that ends without a hijack (StateIdle)
// ends the upgrade's pass-through (see guardConn.upgrade).
func (g *guardConn) setState(st http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch st {
	case http.StateHijacked:
		g.raw, g.upgrade, g.headDL = true, false, time.Time{}
		_ = g.Conn.SetReadDeadline(g.deadline)
	case http.StateIdle:
		if g.upgrade {
			g.upgrade = false
			g.drop = g.passed
		}
	}
}

// SetReadDeadline records net/http's deadline; while a head is being read
// the earlier of it and the head's own bound applies.
func (g *guardConn) SetReadDeadline(t time.Time) error {
	g.mu.Lock()
	g.deadline = t
	t = g.effectiveLocked()
	g.mu.Unlock()
	return g.Conn.SetReadDeadline(t)
}

func (g *guardConn) SetDeadline(t time.Time) error {
	if err := g.SetReadDeadline(t); err != nil {
		return err
	}
	return g.Conn.SetWriteDeadline(t)
}

func (g *guardConn) effectiveLocked() time.Time {
	t := g.deadline
	if !g.raw && !g.headDL.IsZero() && (t.IsZero() || g.headDL.Before(t)) {
		t = g.headDL
	}
	return t
}

func (g *guardConn) Read(p []byte) (int, error) {
	if len(g.out) > 0 {
		n := copy(p, g.out)
		g.out = g.out[n:]
		return n, nil
	}
	g.mu.Lock()
	raw, upgrade, refused := g.raw, g.upgrade, g.refused != nil || g.drop
	if upgrade && !raw {
		g.passed = true // net/http reads only to see whether more comes (its background read)
	}
	g.mu.Unlock()
	if raw || upgrade {
		if len(g.in) > 0 {
			n := copy(p, g.in)
			g.in = g.in[n:]
			return n, nil
		}
		return g.Conn.Read(p)
	}
	if refused {
		return 0, io.EOF
	}
	if g.body > 0 {
		return g.readBody(p)
	}
	for {
		if end := headEnd(g.in); end >= 0 {
			head := g.in[:end:end]
			g.in = bytes.Clone(g.in[end:])
			r, body, upgrade := checkHead(head, g.hs.bodyOK)
			g.headDone(!upgrade && int64(len(g.in)) > body)
			if r != nil {
				g.refuse(r)
				return 0, io.EOF
			}
			if upgrade {
				g.mu.Lock()
				g.upgrade = true
				g.mu.Unlock()
			}
			g.body = body
			n := copy(p, head)
			g.out = head[n:]
			return n, nil
		}
		if len(g.in) >= g.hs.maxHead {
			g.refuse(&refusal{status: http.StatusRequestHeaderFieldsTooLarge,
				text: fmt.Sprintf("request head larger than %d bytes", g.hs.maxHead)})
			return 0, io.EOF
		}
		var buf [4096]byte
		n, err := g.Conn.Read(buf[:min(len(buf), g.hs.maxHead-len(g.in))])
		if n > 0 {
			if len(g.in) == 0 {
				g.headBegun()
			}
			g.in = append(g.in, buf[:n]...)
		}
		if err != nil {
			if headEnd(g.in) >= 0 {
				continue // check what arrived; the error comes back at the next read
			}
			return 0, err
		}
	}
}

// readBody hands net/http the body of the head it was given (the upload
// route's), at most g.body bytes, without looking into it.
func (g *guardConn) readBody(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > g.body {
		p = p[:g.body]
	}
	if len(g.in) > 0 {
		n := copy(p, g.in)
		g.in = g.in[n:]
		g.body -= int64(n)
		if g.body == 0 && len(g.in) > 0 {
			g.headBegun() // a pipelined request's head came with the body
		}
		return n, nil
	}
	n, err := g.Conn.Read(p)
	g.body -= int64(n)
	return n, err
}

// headBegun starts the head's own bound (Timeouts.Header from its first
// byte): net/http waits for a keep-alive request's first bytes under its
// idle timeout, and sees nothing of a head until it is complete.
func (g *guardConn) headBegun() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.headDL = time.Now().Add(g.hs.header)
	_ = g.Conn.SetReadDeadline(g.effectiveLocked())
}

// headDone ends the bound of the head just read; next (bytes of the next
// request arrived with it) starts the next head's.
func (g *guardConn) headDone(next bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.headDL = time.Time{}
	if next {
		g.headDL = time.Now().Add(g.hs.header)
	}
	_ = g.Conn.SetReadDeadline(g.effectiveLocked())
}

func (g *guardConn) refuse(r *refusal) {
	g.mu.Lock()
	g.refused = r
	g.mu.Unlock()
	g.hs.log.Debug("gateway request refused before net/http", "remote", g.RemoteAddr().String(), "status", r.status, "reason", r.text)
}

// Close writes a pending refusal (once), then closes.
func (g *guardConn) Close() error {
	g.mu.Lock()
	r := g.refused
	write := r != nil && !g.answered && !g.raw
	g.answered = g.answered || write
	g.mu.Unlock()
	if write {
		writeRefusal(g.Conn, r.status, r.text, r.host, r.authenticate)
	}
	return g.Conn.Close()
}

// refusalGrace bounds writing a refusal and waiting for the client to
// read it (WriteRefusal).
const refusalGrace = 2 * time.Second

// WriteRefusal answers on c (not closing it) with status and text (the
// body, plain text) and the headers of every gateway response: the
// security headers (CSP with host in connect-src when it is a plain
// host[:port]), Cache-Control: no-store and Connection: close. It then
// half-closes c and reads (and drops) what the client still sends, up to
// 64 KiB, so that the answer is not lost to a reset; writing and waiting
// take at most about 2 s each. For answers written outside net/http: the
// refusals of guardConn and the LAN listeners' plaintext refusal.
func WriteRefusal(c net.Conn, status int, text, host string) {
	writeRefusal(c, status, text, host, "")
}

// writeRefusal is WriteRefusal with a WWW-Authenticate header (when
// authenticate is not "").
func writeRefusal(c net.Conn, status int, text, host, authenticate string) {
	body := fmt.Sprintf("%d %s: %s\n", status, http.StatusText(status), text)
	h := http.Header{}
	setSecurityHeaders(h, host)
	if authenticate != "" {
		h.Set("WWW-Authenticate", authenticate)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("Connection", "close")
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(&b)
	b.WriteString("\r\n")
	b.WriteString(body)
	_ = c.SetWriteDeadline(time.Now().Add(refusalGrace))
	if _, err := c.Write(b.Bytes()); err != nil {
		return
	}
	under := c
	if tc, ok := c.(*tls.Conn); ok {
		_ = tc.CloseWrite() // close_notify
		under = tc.NetConn()
	}
	if cw, ok := under.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = under.SetReadDeadline(time.Now().Add(refusalGrace))
	_, _ = io.Copy(io.Discard, io.LimitReader(under, 64<<10))
}

// headEnd returns the length of the request head at the start of b (up to
// and including its first empty line, "\n" or "\r\n" ending lines as for
// net/textproto), or -1 when b holds no whole head yet.
func headEnd(b []byte) int {
	pos := 0
	for {
		i := bytes.IndexByte(b[pos:], '\n')
		if i < 0 {
			return -1
		}
		line := b[pos : pos+i]
		pos += i + 1
		if len(line) == 0 || len(line) == 1 && line[0] == '\r' {
			return pos
		}
	}
}

// checkHead applies to a whole request head the checks net/http's server
// applies before it calls a handler (net/http server.go readRequest and
// request.go readRequest), and refuses what the gateway does not take: a
// request body, unless bodyOK (nil: none) allows it for the request's
// method, path and declared length, and an Expect other than 100-continue.
// It returns nil when net/http may have the head, with the length of the
// body that follows it (0: none) and whether it asks for a protocol upgrade.
func checkHead(head []byte, bodyOK bodyRule) (r *refusal, body int64, upgrade bool) {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return &refusal{status: http.StatusBadRequest, text: "malformed request line"}, 0, false
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return &refusal{status: http.StatusBadRequest, text: "malformed request header"}, 0, false
	}
	r, body = checkRequest(head, hdr, bodyOK)
	if r != nil {
		if hs := hdr["Host"]; len(hs) == 1 && validHostPort(hs[0]) {
			r.host = hs[0]
		}
		return r, 0, false
	}
	// RFC 9110 section 7.8: an upgrade is asked for with Upgrade and a
	// Connection header naming it.
	upgrade = hdr.Get("Upgrade") != "" && httpguts.HeaderValuesContainsToken(hdr["Connection"], "upgrade")
	return nil, body, upgrade
}

// checkRequest is checkHead once the header was read as hdr.
func checkRequest(head []byte, hdr textproto.MIMEHeader, bodyOK bodyRule) (*refusal, int64) {
	bad := func(text string) (*refusal, int64) { return &refusal{status: http.StatusBadRequest, text: text}, 0 }
	hosts := hdr["Host"]
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	switch {
	case err != nil && len(hosts) > 1:
		return bad("more than one Host header")
	case err != nil && (hdr.Get("Transfer-Encoding") != "" || hdr.Get("Content-Length") != ""):
		return bad("malformed request body framing (Content-Length or Transfer-Encoding)")
	case err != nil:
		return bad("malformed request")
	case req.ProtoMajor != 1:
		return &refusal{status: http.StatusHTTPVersionNotSupported, text: "only HTTP/1.x is served here"}, 0
	case req.ProtoAtLeast(1, 1) && len(hosts) == 0 && req.Method != http.MethodConnect:
		return bad("missing required Host header")
	case len(hosts) == 1 && !httpguts.ValidHostHeader(hosts[0]):
		return bad("malformed Host header")
	case req.RequestURI == "*":
		// net/http answers "OPTIONS *" itself (200, before any handler,
		// so without the security headers); no route serves the
		// asterisk form (RFC 9112 section 3.2.4) for any method.
		return bad("the request target * is not served here")
	}
	for k, vs := range hdr {
		if !httpguts.ValidHeaderFieldName(k) {
			return bad("invalid header name")
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return bad("invalid header value")
			}
		}
	}
	if e := hdr.Get("Expect"); e != "" && !strings.EqualFold(e, "100-continue") {
		return &refusal{status: http.StatusExpectationFailed, text: "unsupported Expect header"}, 0
	}
	if req.ContentLength == 0 && len(req.TransferEncoding) == 0 {
		return nil, 0
	}
	if bodyOK == nil {
		return &refusal{status: http.StatusRequestEntityTooLarge, text: noBody}, 0
	}
	if r := bodyOK(req); r != nil {
		return r, 0
	}
	return nil, req.ContentLength
}
