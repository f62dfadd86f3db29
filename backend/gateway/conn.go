package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// conn is one WebSocket connection. A reader goroutine (the HTTP handler)
// reads frames and dispatches requests; a writer goroutine drains the
// outbound queue in order; every frame goes through the queue.
type conn struct {
	s      *Server
	id     string
	ws     *websocket.Conn
	tcp    net.Conn // the hijacked connection under ws
	remote string
	opened time.Time
	// loopback: the connection came through Server.Handler on a loopback
	// local address (the operator token is accepted).
	loopback bool
	ctx      context.Context // cancelled when the connection ends
	cancel   context.CancelFunc
	// inFlight holds one token per request being served (Options.MaxInFlight).
	inFlight chan struct{}

	// Set during the handshake, read-only afterwards.
	nonce     string
	client    ClientInfo
	role      string
	principal Principal
	info      ConnInfo
	authed    bool

	mu          sync.Mutex
	queue       [][]byte
	queued      int64 // bytes accepted but not yet written (part of Server.totalQueued)
	seq         uint64
	closing     bool
	held        bool // hello-ok is queued but its hooks have not run: write nothing yet (unless closing)
	dropped     bool // queue discarded: the writer sends the close frame after the frame in flight
	stopped     bool // the connection ended: the writer returns at once
	closeCode   websocket.StatusCode
	closeReason string

	wake       chan struct{}
	writerDone chan struct{}
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !s.originAllowed(r) {
		s.log.Warn("websocket origin rejected", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		http.Error(w, "origin not allowed", http.StatusForbidden)
		return
	}
	s.mu.RLock()
	closing := s.shuttingDown
	s.mu.RUnlock()
	if closing {
		http.Error(w, "server shutting down", http.StatusServiceUnavailable)
		return
	}
	ip := remoteIP(r.RemoteAddr)
	pool := preAuthPool(onLoopbackListener(r))
	if reason := s.admitPreAuth(pool, ip); reason != "" {
		s.log.Warn("websocket refused", "remote", r.RemoteAddr, "reason", reason)
		w.Header().Set("Retry-After", "5")
		http.Error(w, reason, http.StatusServiceUnavailable)
		return
	}
	preAuth := true // the slot is given back at hello-ok or when the connection ends
	defer func() {
		if preAuth {
			s.releasePreAuth(pool, ip)
		}
	}()
	// The origin was checked above with our own rules. Compression stays
	// off (the default): a small deflated frame could inflate to a large one.
	hj := &hijackCapture{ResponseWriter: w}
	ws, err := websocket.Accept(hj, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.log.Debug("websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	// Before hello-ok the library itself refuses frames over
	// MaxPreAuthPayload (its limit applies from the next Reader call, so it
	// is set before the first read); readMessage stops earlier still and
	// closes with a reason. After hello-ok MaxPayload is enforced in
	// readMessage, which discards the excess without closing.
	ws.SetReadLimit(s.opts.MaxPreAuthPayload)
	// The connection's context keeps the request's values but not its
	// cancellation: net/http may cancel a hijacked request's context when
	// its background read is aborted at Hijack, which would end the
	// handshake's first read at once. The connection ends when its socket
	// does, or when the server shuts down (closeWith on every connection).
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	c := &conn{
		s:          s,
		id:         uuid.NewString(),
		ws:         ws,
		tcp:        hj.conn,
		remote:     r.RemoteAddr,
		loopback:   onLoopbackListener(r),
		opened:     s.now(),
		ctx:        ctx,
		cancel:     cancel,
		wake:       make(chan struct{}, 1),
		writerDone: make(chan struct{}),
		inFlight:   make(chan struct{}, s.opts.MaxInFlight),
	}
	if !s.addConn(c) {
		cancel()
		_ = ws.Close(websocket.StatusGoingAway, "server shutting down")
		return
	}
	defer s.removeConn(c)
	go c.writeLoop()
	hook := authenticatedHook(r.Context()) // a LAN listener's count of unauthenticated connections
	c.run(func() {
		s.releasePreAuth(pool, ip)
		preAuth = false
		if hook != nil {
			hook()
		}
	})
}

// run serves the connection; authenticated is called once at hello-ok.
func (c *conn) run(authenticated func()) {
	log := c.s.log.With("connId", c.id)
	log.Debug("connection opened", "remote", c.remote)
	if c.handshake() {
		authenticated()
		c.ws.SetReadLimit(-1) // readMessage enforces MaxPayload from now on
		c.readLoop()
	}
	c.s.dropConn(c)
	if c.authed && c.s.opts.OnClosed != nil {
		c.s.opts.OnClosed(c.info)
	}
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		// Let the writer flush and finish the close handshake (each of its
		// phases is bounded by the websocket library).
		t := time.NewTimer(3 * shutdownGrace)
		select {
		case <-c.writerDone:
		case <-t.C:
		}
		t.Stop()
	}
	// From now on enqueue refuses frames (late handler responses, events)
	// and the writer stops.
	c.mu.Lock()
	c.closing, c.stopped = true, true
	c.dropQueueLocked()
	c.mu.Unlock()
	c.signal()
	c.cancel()
	<-c.writerDone
	_ = c.ws.CloseNow()
	log.Info("connection closed", "dur", c.s.now().Sub(c.opened))
}

// handshake sends the challenge and processes the connect request. It
// returns true once the connection is authenticated.
func (c *conn) handshake() bool {
	var nb [16]byte
	_, _ = rand.Read(nb[:])
	c.nonce = hex.EncodeToString(nb[:])
	c.sendEvent(EventChallenge, Challenge{Nonce: c.nonce, TS: c.s.now().UnixMilli()})

	timer := time.AfterFunc(c.s.opts.HandshakeTimeout, func() {
		c.s.log.Info("handshake failed", "connId", c.id, "reason", "timeout")
		c.closeWith(CloseHandshakeFailed, "handshake timeout: no connect request", true)
	})
	limit := c.s.opts.MaxPreAuthPayload
	typ, data, size, err := c.readMessage(limit, false)
	if !timer.Stop() || err != nil {
		return false
	}
	fail := func(code websocket.StatusCode, reason string) bool {
		c.s.log.Info("handshake failed", "connId", c.id, "reason", reason)
		c.closeWith(code, reason, true)
		return false
	}
	if size > 0 {
		// Read no more of it: the close handshake would otherwise drain
		// the rest of the frame (up to MaxPayload, byte by byte in the
		// websocket library) for every such connection.
		c.stopReading()
		return fail(CloseHandshakeFailed, preAuthTooLargeReason(limit))
	}
	if typ != websocket.MessageText {
		return fail(CloseHandshakeFailed, "first frame must be a connect request (binary frame)")
	}
	req, perr := parseRequest(data)
	if perr != nil || req.Method != MethodConnect {
		return fail(CloseHandshakeFailed, "first frame must be a connect request")
	}
	var p ConnectParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		c.respond(req.ID, nil, Errorf(CodeInvalidRequest, "bad connect params: %v", err))
		return fail(CloseHandshakeFailed, "bad connect params")
	}
	if p.Role == "" {
		p.Role = RoleOperator
	}
	refuse := func(e *Error, code websocket.StatusCode) bool {
		c.refuse(p, e.Message)
		c.respond(req.ID, nil, e)
		reason := "unauthorized"
		switch {
		case e.Code == CodeForbidden || e.Code == CodeNotPaired || e.Code == CodeInvalidRequest:
			reason = e.Message
		case code != CloseUnauthorized:
			reason = "authentication failed"
		}
		return fail(code, closeReason(reason))
	}
	minP, maxP := p.MinProtocol, p.MaxProtocol
	if minP == 0 {
		minP = ProtocolVersion
	}
	if maxP == 0 {
		maxP = minP
	}
	if minP > ProtocolVersion || maxP < ProtocolVersion {
		c.respond(req.ID, nil, Errorf(CodeInvalidRequest, "protocol %d-%d not supported; server speaks %d", minP, maxP, ProtocolVersion))
		return fail(CloseHandshakeFailed, "unsupported protocol version")
	}
	if p.Role != RoleOperator && p.Role != RoleNode {
		c.respond(req.ID, nil, Errorf(CodeInvalidRequest, "unknown role %q", p.Role))
		return fail(CloseHandshakeFailed, "unknown role")
	}
	res, aerr, acode := c.authenticate(&p)
	if aerr != nil {
		return refuse(aerr, acode)
	}
	c.client, c.principal = p.Client, res.Principal
	c.role = c.principal.Role
	c.info = ConnInfo{ConnID: c.id, Principal: c.principal, Client: c.client, RemoteIP: remoteIP(c.remote),
		Caps: res.Caps, Commands: res.Commands, ConnectedAt: c.opened, Loopback: c.loopback}
	hello := Hello{
		Type:     helloType,
		Protocol: ProtocolVersion,
		Server:   ServerInfo{Version: c.s.opts.Version, ConnID: c.id, GatewayID: c.s.opts.GatewayID},
		Features: c.s.features(c.principal),
		Snapshot: c.s.snapshotFor(res.Principal),
		Policy: Policy{
			MaxPayload:       c.maxPayload(),
			MaxBufferedBytes: c.s.opts.MaxBufferedBytes,
			TickIntervalMs:   c.s.opts.TickInterval.Milliseconds(),
		},
		Auth: HelloAuth{Role: c.principal.Role, DeviceID: c.principal.Device, Status: res.Status,
			RequestID: res.RequestID, DeviceTokens: res.DeviceTokens, GatewayID: c.s.opts.GatewayID},
	}
	body, err := json.Marshal(hello)
	if err != nil {
		c.respond(req.ID, nil, &Error{Code: CodeInternal, Message: "encode hello-ok: " + err.Error()})
		return fail(websocket.StatusInternalError, "internal error")
	}
	// hello-ok and registration are atomic with respect to Broadcast: every
	// broadcast is either entirely before hello-ok (not delivered) or after
	// it (delivered). The writer holds hello-ok (and what follows it) back
	// until Confirm and OnAuthenticated have run, so a client that has
	// hello-ok is known to every hook's listener (node registry, presence)
	// and was admitted by a credential still valid after it could be
	// closed by CloseWhere (a revoke either closes it or fails Confirm).
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
	c.s.bcastMu.Lock()
	c.s.authenticate(c)
	c.respond(req.ID, body, nil)
	c.s.bcastMu.Unlock()
	if res.Confirm != nil {
		if e := res.Confirm(c.ctx); e != nil {
			c.s.log.Info("handshake failed", "connId", c.id, "reason", e.Message)
			c.closeWith(CloseUnauthorized, closeReason(e.Message), false) // hello-ok is discarded unsent
			return false
		}
	}
	c.authed = true
	c.s.log.Info("connection authenticated", "connId", c.id, "role", c.role, "device", c.principal.Device,
		"status", res.Status, "clientId", c.client.ID, "clientVersion", c.client.Version,
		"platform", c.client.Platform, "mode", c.client.Mode)
	if c.s.opts.OnAuthenticated != nil {
		c.s.opts.OnAuthenticated(c.info)
	}
	c.mu.Lock()
	c.held = false
	c.mu.Unlock()
	c.signal()
	go c.tickLoop()
	return true
}

// tokenEqual compares in constant time (hashing first hides the length).
func tokenEqual(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return got != "" && subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// readMessage reads one message, buffering at most limit+1 bytes. When it
// is larger than limit it returns the first limit bytes and size > 0: the
// full size after discarding the rest (discard), else limit+1 with the
// rest left unread (the caller closes the connection).
func (c *conn) readMessage(limit int64, discard bool) (typ websocket.MessageType, data []byte, size int64, err error) {
	typ, r, err := c.ws.Reader(c.ctx)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("next frame: %w", err)
	}
	data, err = io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return 0, nil, 0, fmt.Errorf("read frame: %w", err)
	}
	if int64(len(data)) <= limit {
		return typ, data, 0, nil
	}
	if !discard {
		return typ, data[:limit], limit + 1, nil
	}
	rest, err := io.Copy(io.Discard, r)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("discard oversized frame: %w", err)
	}
	return typ, data[:limit], int64(len(data)) + rest, nil
}

// maxPayload is the largest frame read after hello-ok: MaxPayload, or for
// an unpaired device, which may only ask about its pairing (and may hold
// many connections), MaxPreAuthPayload.
func (c *conn) maxPayload() int64 {
	if c.principal.Class() == Unpaired {
		return min(c.s.opts.MaxPayload, c.s.opts.MaxPreAuthPayload)
	}
	return c.s.opts.MaxPayload
}

func (c *conn) readLoop() {
	limit := c.maxPayload()
	for {
		typ, data, size, err := c.readMessage(limit, true)
		if err != nil {
			c.s.log.Debug("connection read ended", "connId", c.id, "err", err)
			return
		}
		if size > 0 {
			c.reject(peekID(data), "", Errorf(CodePayloadTooLarge,
				"frame of %d bytes exceeds maxPayload of %d bytes", size, limit))
			continue
		}
		if typ != websocket.MessageText {
			c.reject("", "", Errorf(CodeInvalidRequest, "binary frames are not supported; send JSON text frames"))
			continue
		}
		req, perr := parseRequest(data)
		if perr != nil {
			c.reject(req.ID, req.Method, perr)
			continue
		}
		if req.Method == MethodConnect {
			c.reject(req.ID, req.Method, Errorf(CodeInvalidRequest, "already connected: connect is only valid as the first frame"))
			continue
		}
		select {
		case c.inFlight <- struct{}{}:
			go func() {
				defer func() { <-c.inFlight }()
				c.dispatch(req)
			}()
		default:
			c.reject(req.ID, req.Method, &Error{Code: CodeUnavailable, Retryable: true, Message: fmt.Sprintf(
				"%d requests of this connection are being served (the most at once); send this one again when one has been answered",
				cap(c.inFlight))})
		}
	}
}

func (c *conn) reject(id, method string, e *Error) {
	c.s.log.Debug("request rejected", "connId", c.id, "method", method, "code", e.Code, "err", e.Message)
	c.respond(id, nil, e)
}

func (c *conn) dispatch(req RequestFrame) {
	start := c.s.now()
	call := &Call{ConnID: c.id, Method: req.Method, Params: req.Params, Client: c.client, Role: c.role,
		RemoteIP: remoteIP(c.remote), Principal: c.principal, Caps: c.info.Caps, Commands: c.info.Commands}
	payload, e := c.s.call(c.ctx, call)
	c.respond(req.ID, payload, e)
	dur := c.s.now().Sub(start)
	switch {
	case e == nil:
		c.s.log.Debug("request served", "connId", c.id, "method", req.Method, "dur", dur)
	case e.Code == CodeInternal:
		c.s.log.Error("request failed", "connId", c.id, "method", req.Method, "code", e.Code, "dur", dur, "err", e.Message)
	default:
		c.s.log.Debug("request failed", "connId", c.id, "method", req.Method, "code", e.Code, "dur", dur, "err", e.Message)
	}
}

// call runs the handler for call.Method: it refuses principals the
// method's kind does not name, requires an idempotencyKey on methods with
// side effects, and deduplicates those per (principal, method, key), bound
// to the params they were first called with.
func (s *Server) call(ctx context.Context, call *Call) (json.RawMessage, *Error) {
	m, forbidden := s.lookup(call.Method)
	if m.h == nil {
		return nil, Errorf(CodeNotFound, "unknown method %q", call.Method)
	}
	call.Kind = m.kind
	if !m.kind.Allows(call.Principal) {
		reason := fmt.Sprintf("%s: only %s may call it (this connection is %s)", call.Method, m.kind.Who, call.Principal.Class())
		if forbidden != nil {
			forbidden(call, reason)
		}
		return nil, &Error{Code: CodeForbidden, Message: reason}
	}
	key, e := idempotencyKey(call.Params)
	if e != nil {
		return nil, e
	}
	if !m.kind.SideEffects() {
		return s.invoke(ctx, m.h, call)
	}
	if key == "" {
		return nil, Errorf(CodeInvalidRequest, "%s: idempotencyKey is required (a method with side effects takes a unique key per intended action, reused only to retry it)", call.Method)
	}
	sum, e := paramsHash(call.Params)
	if e != nil {
		return nil, e
	}
	entry, leader, e := s.idem.begin(call.Principal.Key(), call.Method, key, sum)
	if e != nil {
		return nil, e
	}
	if !leader {
		select {
		case <-entry.done:
			return entry.payload, entry.err
		case <-ctx.Done():
			return nil, toError(ctx.Err())
		}
	}
	payload, e := s.invoke(ctx, m.h, call)
	s.idem.finish(entry, payload, e)
	return payload, e
}

// invoke runs h, recovering panics, and encodes its result.
func (s *Server) invoke(ctx context.Context, h Handler, call *Call) (payload json.RawMessage, gerr *Error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("handler panic", "connId", call.ConnID, "method", call.Method,
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			payload, gerr = nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("internal error in %s", call.Method)}
		}
	}()
	v, err := h(ctx, call)
	if err != nil {
		return nil, toError(err)
	}
	if v == nil {
		return json.RawMessage(`{}`), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("encode %s response: %v", call.Method, err)}
	}
	return b, nil
}

func (c *conn) respond(id string, payload json.RawMessage, e *Error) {
	c.enqueue(encodeResponse(id, payload, e), nil, nil)
}

func (c *conn) sendEvent(event string, payload any) bool {
	nameJSON, body, err := encodeEvent(event, payload)
	if err != nil {
		c.s.log.Error("event payload not encodable", "connId", c.id, "event", event, "err", err)
		return false
	}
	return c.sendEventRaw(nameJSON, body)
}

func (c *conn) sendEventRaw(nameJSON, body []byte) bool {
	return c.enqueue(nil, nameJSON, body)
}

// enqueue appends a frame: either a ready frame, or an event built here so
// that its seq is assigned in queue order. It returns false when the
// connection is closing or has just been closed for exceeding
// MaxBufferedBytes. A frame that takes the server's total over
// MaxTotalBufferedBytes makes the slowest consumers close (Server.shed).
func (c *conn) enqueue(frame, eventName, eventBody []byte) bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	n := int64(len(frame))
	if frame == nil {
		n = int64(len(eventName) + len(eventBody) + 64)
	}
	if c.queued+n > c.s.opts.MaxBufferedBytes {
		buffered := c.queued
		c.mu.Unlock()
		if n > c.s.opts.MaxBufferedBytes {
			// One frame larger than the whole buffer: not the client's
			// fault, say what it was.
			c.s.log.Warn("oversized frame; connection closed", "connId", c.id, "frame", n, "limit", c.s.opts.MaxBufferedBytes)
			c.closeWith(websocket.StatusPolicyViolation,
				fmt.Sprintf("frame of %d bytes exceeds the send buffer of %d bytes", n, c.s.opts.MaxBufferedBytes), false)
			return false
		}
		c.s.log.Warn("slow consumer disconnected", "connId", c.id, "buffered", buffered, "frame", n, "limit", c.s.opts.MaxBufferedBytes)
		c.closeWith(websocket.StatusPolicyViolation,
			fmt.Sprintf("slow consumer: send buffer over %d bytes", c.s.opts.MaxBufferedBytes), false)
		return false
	}
	if frame == nil {
		c.seq++
		frame = appendEvent(make([]byte, 0, n), eventName, eventBody, c.seq)
		n = int64(len(frame))
	}
	c.queue = append(c.queue, frame)
	c.queued += n
	total := c.s.totalQueued.Add(n)
	c.mu.Unlock()
	c.signal()
	if total > c.s.opts.MaxTotalBufferedBytes {
		c.s.shed()
	}
	return true
}

// queuedBytes is the connection's share of Server.totalQueued.
func (c *conn) queuedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// dropQueueLocked discards the queue and gives its bytes back to the
// server's budget. c.mu is held.
func (c *conn) dropQueueLocked() {
	c.s.totalQueued.Add(-c.queued)
	c.queue, c.queued, c.dropped = nil, 0, true
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// closeWith starts closing the connection with a close code and reason.
// With flush, frames already queued are written first; without, the queue
// is discarded (its bytes given back to the budget at once) and the close
// frame follows the frame being written, if any. A client that does not
// read has Options.CloseGrace to catch up and get the close frame before
// the socket is dropped. The first call sets code and reason; a later call
// without flush still discards the queue of a connection that was
// flushing.
func (c *conn) closeWith(code websocket.StatusCode, reason string, flush bool) {
	c.mu.Lock()
	if c.dropped || c.stopped || (c.closing && flush) {
		c.mu.Unlock()
		return
	}
	if !c.closing {
		c.closing, c.closeCode, c.closeReason = true, code, reason
	}
	if !flush {
		c.dropQueueLocked()
	}
	c.mu.Unlock()
	c.s.dropConn(c)
	c.signal()
	if !flush {
		// The writer may be blocked on a socket the client does not read.
		t := time.AfterFunc(c.s.opts.CloseGrace, func() { _ = c.ws.CloseNow() })
		go func() {
			<-c.writerDone
			t.Stop()
		}()
	}
}

// writeLoop writes the queue in order. When the connection is closing and
// the queue is empty (flushed, or discarded), it sends the close frame
// and returns; it returns at once when the connection has ended.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	for {
		c.mu.Lock()
		if c.held && !c.closing && !c.stopped {
			c.mu.Unlock()
			select {
			case <-c.wake:
				continue
			case <-c.ctx.Done():
				return
			}
		}
		batch := c.queue
		c.queue = nil
		closing, stopped, code, reason := c.closing, c.stopped, c.closeCode, c.closeReason
		c.mu.Unlock()
		if stopped {
			return
		}
		if len(batch) == 0 {
			if closing {
				_ = c.ws.Close(code, reason)
				return
			}
			select {
			case <-c.wake:
				continue
			case <-c.ctx.Done():
				return
			}
		}
		for _, f := range batch {
			if err := c.writeFrame(f); err != nil {
				c.s.log.Debug("connection write failed", "connId", c.id, "err", err)
				c.cancel()
				return
			}
			c.mu.Lock()
			dropped := c.dropped
			if !dropped {
				c.queued -= int64(len(f))
				c.s.totalQueued.Add(-int64(len(f)))
			}
			c.mu.Unlock()
			if dropped {
				break // the rest of the batch was discarded; send the close frame
			}
		}
	}
}

// writeFrame writes one frame within Options.FrameWriteTimeout; when the
// time runs out the websocket library closes the socket.
func (c *conn) writeFrame(f []byte) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.opts.FrameWriteTimeout)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, f)
}

func (c *conn) tickLoop() {
	t := time.NewTicker(c.s.opts.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			if !c.sendEvent(EventTick, Tick{TS: c.s.now().UnixMilli()}) {
				return
			}
		}
	}
}

// remoteIP is the host part of an HTTP RemoteAddr ("ip:port").
func remoteIP(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// stopReading shuts the read side of the TCP connection (when it is one):
// what the client still sends is not read, and the close handshake ends at
// once instead of draining it. The close frame is still written; a client
// that keeps sending may then see the connection reset instead.
func (c *conn) stopReading() {
	if cr, ok := c.tcp.(interface{ CloseRead() error }); ok {
		_ = cr.CloseRead()
	}
}

// hijackCapture passes Hijack through and keeps the connection, so that
// the gateway can shut its read side (stopReading).
type hijackCapture struct {
	http.ResponseWriter
	conn net.Conn
}

func (h *hijackCapture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.conn = c
	return c, rw, err
}

// maxCloseReason is the longest close reason a WebSocket close frame
// carries (RFC 6455 §5.5: 125 bytes of payload, 2 of them the code).
const maxCloseReason = 123

// closeReason cuts reason to maxCloseReason bytes on a UTF-8 boundary.
func closeReason(reason string) string {
	if len(reason) <= maxCloseReason {
		return reason
	}
	cut := maxCloseReason
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut]
}
