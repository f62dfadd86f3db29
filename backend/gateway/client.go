package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/pairing"
)

// ClientOptions configures Dial.
type ClientOptions struct {
	// URL is the WebSocket address, e.g. "ws://127.0.0.1:18789/ws" (required).
	URL string
	// Token is the local operator token (loopback only). Either Token or
	// Device is required.
	Token string
	// Device is this device's key: the connect request then carries a v2
	// proof (device.SignConnect) over GatewayID, the challenge nonce, the
	// client id and mode, Role, Scopes and the token field: DeviceToken if
	// set, else SetupCode normalised (pairing.NormalizeCode), else Token.
	Device *device.PrivateKey
	// GatewayID is the id of the gateway the device trusts (from the QR
	// code or its saved pairing; required with Device). Never taken from
	// the server: a signature is valid for this gateway only.
	GatewayID string
	// DeviceToken is the device's token for Role, from its approval.
	DeviceToken string
	// SetupCode is a pairing setup code ("XXXX-XXXX").
	SetupCode string
	// Client identifies this program in the connect request.
	Client ClientInfo
	// Role is RoleOperator (default) or RoleNode.
	Role string
	// Roles are the roles a pairing device asks for (default [Role]).
	Roles []string
	// Scopes, Caps and Commands go into the connect request as they are.
	Scopes, Caps, Commands []string
	// HTTPClient is used for the WebSocket upgrade (e.g. one pinning the
	// gateway's TLS certificate, gwid.PinnedClientConfig); default
	// http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock for signedAt; default time.Now.
	Now func() time.Time
	// MaxMessage caps inbound frames in bytes (default 64 MiB).
	MaxMessage int64
	// OnEvent, when set, receives every event, in order, on the
	// connection's reader goroutine before the next frame is read; Events
	// is then closed from the start. It must return quickly and must not
	// wait for a Call on this client (the same goroutine reads the
	// responses): hand longer work to another goroutine. Nothing is
	// dropped or reordered on this path.
	OnEvent func(EventFrame)
	// MaxEventBacklog bounds, in bytes (frame sizes as received), the
	// events received but not yet taken from Events (default 64 MiB, twice
	// the gateway's DefaultMaxBufferedBytes). Below it events wait in order
	// however many they are, so a caller busy with its requests never loses
	// one; an event that would take the backlog over it closes the
	// connection and Err reports ErrEventBacklog: an event is never
	// dropped silently. Not used with OnEvent.
	MaxEventBacklog int64

	// beforeWait is a test hook: it runs after a request was sent, before
	// Call waits for the response (done is the read loop's end).
	beforeWait func(done <-chan struct{})
}

// DefaultMaxEventBacklog is ClientOptions.MaxEventBacklog's default.
const DefaultMaxEventBacklog = 64 << 20 // bytes

// ErrEventBacklog ends a connection whose reader of Events fell behind by
// more than ClientOptions.MaxEventBacklog bytes (Client.Err wraps it).
var ErrEventBacklog = errors.New("gateway client: events not taken from Events, backlog over its limit")

// UpgradeError is a WebSocket upgrade the server answered with an HTTP
// status instead of 101, e.g. 503 when its cap of connections waiting for
// a handshake is full. RetryAfter is its Retry-After header (delay
// seconds or an HTTP date), 0 when absent or unreadable.
type UpgradeError struct {
	StatusCode int
	RetryAfter time.Duration
	Err        error
}

func (e *UpgradeError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %v", e.StatusCode, http.StatusText(e.StatusCode), e.Err)
}

func (e *UpgradeError) Unwrap() error { return e.Err }

// RetryAfter reports how long the server asked the client to wait before
// trying again: an *UpgradeError's Retry-After, or a refusal's
// error.details.retryAfterMs (e.g. reason "rate_limited" of a setup code,
// docs/PROTOCOL.md). False when err carries neither.
func RetryAfter(err error) (time.Duration, bool) {
	var ue *UpgradeError
	if errors.As(err, &ue) && ue.RetryAfter > 0 {
		return ue.RetryAfter, true
	}
	var ge *Error
	if errors.As(err, &ge) {
		if ms, ok := ge.Details["retryAfterMs"].(float64); ok && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	return 0, false
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP
// date (RFC 9110 §10.2.3).
func parseRetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Client is a gateway client over a real WebSocket: it performs the SPEC §3
// handshake, sends requests and matches responses by id, and delivers events
// in order without ever dropping one (ClientOptions.OnEvent,
// MaxEventBacklog). The CLI uses it to reach a running app; tests use it to
// drive the real server. Safe for concurrent use.
type Client struct {
	ws          *websocket.Conn
	hello       Hello
	sideEffects map[string]bool // hello-ok features.sideEffects
	events      chan EventFrame // unbuffered, fed by pump (closed at once with onEvent)
	onEvent     func(EventFrame)
	maxBacklog  int64

	mu       sync.Mutex
	nextID   uint64
	pending  map[string]chan ResponseFrame
	backlog  []queuedEvent // events received, not yet handed to Events
	backlogN int64         // their bytes
	overflow error         // ErrEventBacklog once the backlog went over maxBacklog
	err      error         // set when the read loop ends
	done     chan struct{} // closed when the read loop ends

	wake      chan struct{} // the pump: backlog grew (capacity 1)
	closed    chan struct{} // Close or CloseNow was called
	closeOnce sync.Once

	beforeWait func(done <-chan struct{}) // tests: runs between sending a request and waiting for its response
}

type queuedEvent struct {
	ev EventFrame
	n  int64 // frame bytes
}

// Dial connects and completes the handshake. A refused connect returns
// the server's *Error (errors.As), e.g. UNAUTHORIZED for a wrong token or
// one with details.reason "device_token_mismatch".
func Dial(ctx context.Context, o ClientOptions) (*Client, error) {
	if o.URL == "" || (o.Token == "" && o.Device == nil) {
		return nil, errors.New("gateway dial: URL and Token or Device are required")
	}
	if o.Device != nil && o.GatewayID == "" {
		return nil, errors.New("gateway dial: GatewayID is required with Device")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Role == "" {
		o.Role = RoleOperator
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = 64 << 20
	}
	if o.MaxEventBacklog <= 0 {
		o.MaxEventBacklog = DefaultMaxEventBacklog
	}
	ws, resp, err := websocket.Dial(ctx, o.URL, &websocket.DialOptions{HTTPClient: o.HTTPClient})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			err = &UpgradeError{StatusCode: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), o.Now()), Err: err}
		}
		return nil, fmt.Errorf("gateway dial %s: %w", o.URL, err)
	}
	ws.SetReadLimit(o.MaxMessage)
	c := &Client{
		ws:         ws,
		events:     make(chan EventFrame),
		onEvent:    o.OnEvent,
		maxBacklog: o.MaxEventBacklog,
		pending:    map[string]chan ResponseFrame{},
		done:       make(chan struct{}),
		wake:       make(chan struct{}, 1),
		closed:     make(chan struct{}),

		beforeWait: o.beforeWait,
	}
	if c.onEvent != nil {
		close(c.events)
	} else {
		go c.pump()
	}
	_, data, err := ws.Read(ctx)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("gateway dial: read challenge: %w", err)
	}
	var ev EventFrame
	if json.Unmarshal(data, &ev) != nil || ev.Type != frameEvent || ev.Event != EventChallenge {
		ws.CloseNow()
		return nil, fmt.Errorf("gateway dial: expected %s, got %.200s", EventChallenge, data)
	}
	var ch Challenge
	_ = json.Unmarshal(ev.Payload, &ch)
	params := ConnectParams{
		MinProtocol: ProtocolVersion, MaxProtocol: ProtocolVersion,
		Client: o.Client, Role: o.Role, Roles: o.Roles, Scopes: o.Scopes, Caps: o.Caps, Commands: o.Commands,
		Auth: ConnectAuth{Token: o.Token, DeviceToken: o.DeviceToken, SetupCode: o.SetupCode},
	}
	if o.Device != nil {
		if params.Device, err = signConnect(o, ch.Nonce); err != nil {
			ws.CloseNow()
			return nil, fmt.Errorf("gateway dial: %w", err)
		}
	}
	go c.readLoop()
	err = c.Call(ctx, MethodConnect, params, &c.hello)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("gateway dial: connect: %w", err)
	}
	c.sideEffects = make(map[string]bool, len(c.hello.Features.SideEffects))
	for _, m := range c.hello.Features.SideEffects {
		c.sideEffects[m] = true
	}
	return c, nil
}

// signConnect makes connect params "device" for o (see ClientOptions.Device).
func signConnect(o ClientOptions, nonce string) (*DeviceProof, error) {
	token := o.Token
	switch {
	case o.DeviceToken != "":
		token = o.DeviceToken
	case o.SetupCode != "":
		norm, ok := pairing.NormalizeCode(o.SetupCode)
		if !ok {
			return nil, fmt.Errorf("setup code %q is not a code of %d characters", o.SetupCode, pairing.CodeLen)
		}
		token = norm
	}
	proof, err := o.Device.SignConnect(device.Payload{Version: 2, GatewayID: o.GatewayID, ClientID: o.Client.ID,
		Mode: o.Client.Mode, Role: o.Role, Scopes: o.Scopes, SignedAtMs: o.Now().UnixMilli(), Token: token, Nonce: nonce})
	if err != nil {
		return nil, fmt.Errorf("sign connect: %w", err)
	}
	return &DeviceProof{ID: proof.ID, Algorithm: string(proof.Key.Alg), PublicKey: proof.Key.Encode(),
		Signature: base64.RawURLEncoding.EncodeToString(proof.Signature), SignedAt: proof.SignedAt, Nonce: proof.Nonce}, nil
}

// Hello is the server's hello-ok payload.
func (c *Client) Hello() Hello { return c.hello }

// Auth is hello-ok "auth": how this connection was admitted (status
// "operator", "paired" or "pending", device tokens being delivered).
func (c *Client) Auth() HelloAuth { return c.hello.Auth }

// Done is closed when the connection has ended; Err then says why (a
// websocket.CloseError carries the server's close code and reason).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is the error that ended the connection, nil while it is open.
func (c *Client) Err() error { return c.closeErr() }

// Events delivers server events in order, every one of them (see
// ClientOptions.MaxEventBacklog); it is closed once the connection has
// ended and the events received before were taken, or at Close. With
// ClientOptions.OnEvent it is closed from the start.
func (c *Client) Events() <-chan EventFrame { return c.events }

// Call sends a request and waits for its response. On ok:false it returns
// the server's *Error; out (may be nil) receives the decoded payload.
// params must encode as a JSON object or null. For a method with side
// effects (hello-ok features.sideEffects) params get a new random
// idempotencyKey unless they carry one; pass your own to retry the same
// action safely.
func (c *Client) Call(ctx context.Context, method string, params, out any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("%s: encode params: %w", method, err)
	}
	if c.sideEffects[method] {
		if raw, err = withIdempotencyKey(raw); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, err)
	}
	c.nextID++
	id := strconv.FormatUint(c.nextID, 10)
	ch := make(chan ResponseFrame, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	frame, err := json.Marshal(RequestFrame{Type: frameReq, ID: id, Method: method, Params: raw})
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", method, err)
	}
	if err := c.ws.Write(ctx, websocket.MessageText, frame); err != nil {
		return fmt.Errorf("%s: send: %w", method, err)
	}
	if c.beforeWait != nil {
		c.beforeWait(c.done)
	}
	select {
	case res := <-ch:
		return decodeResponse(method, res, out)
	case <-c.done:
		// The reader hands a response over (ch is buffered) before it
		// reads the close frame that follows it and closes done, so a
		// response that arrived first is in ch by now: a refused connect
		// is answered with its error, then closed. select picks at
		// random among ready cases; look at ch again before reporting
		// the close.
		select {
		case res := <-ch:
			return decodeResponse(method, res, out)
		default:
		}
		return fmt.Errorf("%s: connection closed: %w", method, c.closeErr())
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// decodeResponse turns a response frame into Call's result: its error, or
// its payload decoded into out.
func decodeResponse(method string, res ResponseFrame, out any) error {
	if !res.OK {
		if res.Error == nil {
			return &Error{Code: CodeInternal, Message: method + ": response without error details"}
		}
		return res.Error
	}
	if out != nil && len(res.Payload) > 0 {
		if err := json.Unmarshal(res.Payload, out); err != nil {
			return fmt.Errorf("%s: decode payload: %w", method, err)
		}
	}
	return nil
}

func (c *Client) closeErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) readLoop() {
	for {
		_, data, err := c.ws.Read(context.Background())
		if err != nil {
			c.mu.Lock()
			if c.overflow != nil {
				err = c.overflow
			}
			c.err = err
			c.mu.Unlock()
			close(c.done)
			return
		}
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(data, &head) != nil {
			continue
		}
		switch head.Type {
		case frameRes:
			var res ResponseFrame
			if json.Unmarshal(data, &res) != nil {
				continue
			}
			c.mu.Lock()
			ch := c.pending[res.ID]
			c.mu.Unlock()
			if ch != nil {
				ch <- res
			}
		case frameEvent:
			var ev EventFrame
			if json.Unmarshal(data, &ev) != nil {
				continue
			}
			if c.onEvent != nil {
				c.onEvent(ev)
				continue
			}
			c.queue(ev, int64(len(data)))
		}
	}
}

// queue appends ev to the backlog for the pump, or, when that would take
// the backlog over maxBacklog, ends the connection with ErrEventBacklog
// (one event larger than the limit is taken when the backlog is empty).
func (c *Client) queue(ev EventFrame, n int64) {
	c.mu.Lock()
	if c.overflow != nil {
		c.mu.Unlock()
		return // closing: the read fails next
	}
	if len(c.backlog) > 0 && c.backlogN+n > c.maxBacklog {
		c.overflow = fmt.Errorf("%w (%d events, %d bytes waiting; limit %d bytes)", ErrEventBacklog, len(c.backlog), c.backlogN, c.maxBacklog)
		c.mu.Unlock()
		c.ws.CloseNow()
		return
	}
	c.backlog = append(c.backlog, queuedEvent{ev: ev, n: n})
	c.backlogN += n
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pump hands the backlog to Events in order until the connection has
// ended and the backlog is empty, or Close was called.
func (c *Client) pump() {
	defer close(c.events)
	for {
		c.mu.Lock()
		if len(c.backlog) == 0 {
			c.mu.Unlock()
			select {
			case <-c.wake:
				continue
			case <-c.closed:
				return
			case <-c.done:
				c.mu.Lock()
				empty := len(c.backlog) == 0
				c.mu.Unlock()
				if empty {
					return
				}
				continue
			}
		}
		q := c.backlog[0]
		c.backlog[0] = queuedEvent{}
		c.backlog = c.backlog[1:]
		c.backlogN -= q.n
		c.mu.Unlock()
		select {
		case c.events <- q.ev:
		case <-c.closed:
			return
		}
	}
}

// Close closes the connection normally; Events is closed too (events not
// yet taken are discarded).
func (c *Client) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.ws.Close(websocket.StatusNormalClosure, "")
}

// CloseNow closes the socket without the close handshake, for a connection
// whose peer no longer answers (Close would wait for its close frame).
func (c *Client) CloseNow() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.ws.CloseNow()
}

// withIdempotencyKey adds a random "idempotencyKey" member to the JSON
// object raw ("null" counts as {}) unless it has one.
func withIdempotencyKey(raw []byte) ([]byte, error) {
	t := bytes.TrimSpace(raw)
	if string(t) == "null" {
		t = []byte("{}")
	}
	if len(t) < 2 || t[0] != '{' {
		return nil, errors.New("params must be a JSON object to carry an idempotencyKey")
	}
	var p struct {
		Key json.RawMessage `json:"idempotencyKey"`
	}
	if err := json.Unmarshal(t, &p); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if len(p.Key) > 0 && string(p.Key) != "null" && string(p.Key) != `""` {
		return raw, nil
	}
	if len(p.Key) > 0 {
		return nil, errors.New(`params: idempotencyKey is empty; omit it to get a new one`)
	}
	key, _ := json.Marshal(uuid.NewString())
	rest := bytes.TrimSpace(t[1:])
	out := append([]byte(`{"idempotencyKey":`), key...)
	if rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...), nil
}
