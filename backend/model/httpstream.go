package model

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults shared by the HTTP providers (OpenAIOptions, AnthropicOptions).
const (
	// DefaultHeaderTimeout bounds the wait for the response headers of one
	// request (a local server may need a while to load a model).
	DefaultHeaderTimeout = 60 * time.Second
	// DefaultIdleTimeout bounds the silence between two pieces of a stream.
	DefaultIdleTimeout = 90 * time.Second
	// DefaultDialTimeout bounds the TCP connect of the default HTTP client.
	DefaultDialTimeout = 5 * time.Second
	// DefaultMaxLineBytes caps one line of the event stream (and the body of a
	// non-streamed answer).
	DefaultMaxLineBytes = 4 << 20
)

// endpoint is what the HTTP providers share: the URL they POST to, the
// client, the timeouts, the logger, and the wording of their errors.
type endpoint struct {
	url           string // the full POST URL
	server        string // scheme://host, for messages
	endMarker     string // what a complete stream ends with ("[DONE]", "message_stop"), for messages
	client        *http.Client
	headerTimeout time.Duration
	idleTimeout   time.Duration
	maxLine       int
}

// newEndpoint fills in the shared defaults (zero durations and sizes mean
// the Default* constants, a nil client the default client).
func newEndpoint(postURL, base, endMarker string, client *http.Client, header, idle time.Duration, maxLine int) endpoint {
	if header <= 0 {
		header = DefaultHeaderTimeout
	}
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	if maxLine <= 0 {
		maxLine = DefaultMaxLineBytes
	}
	if client == nil {
		client = defaultHTTPClient()
	}
	return endpoint{url: postURL, server: serverLabel(base), endMarker: endMarker, client: client,
		headerTimeout: header, idleTimeout: idle, maxLine: maxLine}
}

// loggerOr returns l, or slog.Default() when l is nil.
func loggerOr(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

func defaultHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	return &http.Client{Transport: tr}
}

// serverLabel reduces a base URL to scheme://host for human-readable errors.
func serverLabel(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return base
	}
	return u.Scheme + "://" + u.Host
}

var (
	errHeaderTimeout = errors.New("header timeout")
	errIdleTimeout   = errors.New("idle timeout")
)

// call is one streamed request whose response headers have arrived with a
// 2xx status. Its body is read through the idle timer; close releases it.
type call struct {
	e      *endpoint
	ctx    context.Context // the caller's
	rctx   context.Context // ctx plus the header and idle timeouts (as causes)
	cancel context.CancelCauseFunc
	resp   *http.Response
	body   *bufio.Reader
	idle   *time.Timer
}

// post sends body as JSON to e.url with the extra header and waits at most
// e.headerTimeout for the response headers. A non-2xx status is returned
// as an error (see statusErr); so are transport failures (see transportErr).
func (e *endpoint) post(ctx context.Context, body []byte, header http.Header) (*call, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		cancel(nil)
		return nil, newErr(ErrRejected, err, "invalid model server URL %q", e.url)
	}
	for k, v := range header {
		hreq.Header[k] = v
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")

	headerTimer := time.AfterFunc(e.headerTimeout, func() { cancel(errHeaderTimeout) })
	resp, err := e.client.Do(hreq)
	headerTimer.Stop()
	if err != nil {
		err = e.transportErr(ctx, rctx, err)
		cancel(nil)
		return nil, err
	}
	idle := time.AfterFunc(e.idleTimeout, func() { cancel(errIdleTimeout) })
	c := &call{e: e, ctx: ctx, rctx: rctx, cancel: cancel, resp: resp, idle: idle,
		body: bufio.NewReaderSize(&idleReader{r: resp.Body, t: idle, d: e.idleTimeout}, 64<<10)}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := c.statusErr()
		c.close()
		return nil, err
	}
	return c, nil
}

// exchange is one provider call as stream runs it.
type exchange struct {
	provider, model string // for the log records
	req             Request
	encode          func(Request) ([]byte, error)
	header          http.Header
	// read parses the 2xx response, calling onDelta; on failure it
	// returns the partial Response with the error.
	read func(cl *call, onDelta func(Delta)) (Response, error)
}

// stream is the common body of the providers' Stream methods: it checks
// ctx, encodes the request, posts it, hands the response to x.read and
// logs the request and its outcome (debug records "model request" and
// "model response").
func (e *endpoint) stream(ctx context.Context, log *slog.Logger, x exchange, onDelta func(Delta)) (Response, error) {
	if onDelta == nil {
		onDelta = func(Delta) {}
	}
	if err := cancelled(ctx); err != nil {
		return Response{}, err
	}
	body, err := x.encode(x.req)
	if err != nil {
		return Response{}, err
	}
	start := time.Now()
	log.Debug("model request", "provider", x.provider, "model", x.model, "url", e.url,
		"messages", len(x.req.Messages), "tools", len(x.req.Tools))
	cl, err := e.post(ctx, body, x.header)
	if err != nil {
		return Response{}, err
	}
	defer cl.close()
	out, err := x.read(cl, onDelta)
	log.Debug("model response", "provider", x.provider, "model", x.model,
		"finish", out.FinishReason, "tool_calls", len(out.ToolCalls),
		"prompt_tokens", out.Usage.PromptTokens, "completion_tokens", out.Usage.CompletionTokens,
		"duration_ms", time.Since(start).Milliseconds(), "error", errString(err))
	return out, err
}

// mediaType is the response's content type without parameters, and
// whether the body is an event stream (by type, or by its first bytes).
func (c *call) mediaType() (string, bool) {
	ct, _, _ := mime.ParseMediaType(c.resp.Header.Get("Content-Type"))
	return ct, ct == "text/event-stream" || looksLikeSSE(c.body)
}

// notStream is the ErrBadResponse error for a body that is not an event stream.
func (c *call) notStream() error {
	snippet, _ := c.body.Peek(min(c.body.Buffered(), 200))
	return newErr(ErrBadResponse, nil, "model server at %s did not answer with an event stream (content type %q): %q",
		c.e.server, c.resp.Header.Get("Content-Type"), trimSnippet(string(snippet)))
}

// close stops the idle timer and releases the connection.
func (c *call) close() {
	c.idle.Stop()
	c.resp.Body.Close()
	c.cancel(nil)
}

// idleReader re-arms the idle timer after every read that returned data.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.t.Reset(r.d)
	}
	return n, err
}

// looksLikeSSE peeks at the start of a body without a helpful content type.
func looksLikeSSE(br *bufio.Reader) bool {
	b, _ := br.Peek(5)
	s := strings.TrimLeft(string(b), "\r\n")
	return strings.HasPrefix(s, "data:") || strings.HasPrefix(s, ":") || strings.HasPrefix(s, "event")
}

// nextData returns the payload of the next "data:" line of the event
// stream (trimmed), skipping blank lines, comments and the event, id and
// retry fields. It returns io.EOF when the stream ends cleanly between
// lines, an ErrBadResponse *Error for a line over e.maxLine bytes or a line
// that is not part of an event stream, and c.readErr for anything else.
func (c *call) nextData() (string, error) {
	for {
		line, err := readLine(c.body, c.e.maxLine)
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				return "", newErr(ErrBadResponse, nil, "model server at %s sent an event-stream line longer than %d bytes", c.e.server, c.e.maxLine)
			}
			if err == io.EOF && line == "" {
				return "", io.EOF
			}
			if err != io.EOF {
				return "", c.readErr(err)
			}
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" || strings.HasPrefix(line, ":"):
			continue
		case strings.HasPrefix(line, "event:"), strings.HasPrefix(line, "id:"), strings.HasPrefix(line, "retry:"):
			continue
		case !strings.HasPrefix(line, "data:"):
			return "", newErr(ErrBadResponse, nil, "model server at %s sent a line that is not part of an event stream: %q", c.e.server, trimSnippet(line))
		}
		if data := strings.TrimSpace(strings.TrimPrefix(line, "data:")); data != "" {
			return data, nil
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one '\n'-terminated line of at most max bytes. At EOF it
// returns what was read with io.EOF.
func readLine(br *bufio.Reader, max int) (string, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > max {
			return "", errLineTooLong
		}
		buf = append(buf, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return string(buf), err
	}
}

// errorMessage extracts a message from an OpenAI or Anthropic
// ({"message":...}) or Ollama ("text") error value; "" when there is none.
func errorMessage(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	return trimSnippet(string(raw))
}

// ---- error mapping ----

// cancelled reports ctx's error when the caller cancelled.
func cancelled(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("model request cancelled: %w", err)
	}
	return nil
}

func (e *endpoint) transportErr(ctx, rctx context.Context, err error) error {
	if cerr := cancelled(ctx); cerr != nil {
		return cerr
	}
	if context.Cause(rctx) == errHeaderTimeout {
		return newErr(ErrTimeout, nil, "model server at %s sent no response within %s", e.server, e.headerTimeout)
	}
	return newErr(ErrUnavailable, netCause(err), "model server at %s is unreachable", e.server)
}

// readErr maps a failed read of the body: the caller's cancellation, the
// idle timeout (ErrTimeout), or a cut stream (ErrIncomplete).
func (c *call) readErr(err error) error {
	if cerr := cancelled(c.ctx); cerr != nil {
		return cerr
	}
	if cause := context.Cause(c.rctx); cause == errIdleTimeout || cause == errHeaderTimeout {
		return newErr(ErrTimeout, nil, "model server at %s went silent for %s in the middle of an answer", c.e.server, c.e.idleTimeout)
	}
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return newErr(ErrIncomplete, nil, "the answer from the model server at %s stopped before it was complete (stream cut before %s)", c.e.server, c.e.endMarker)
	}
	return newErr(ErrIncomplete, netCause(err), "the answer from the model server at %s stopped before it was complete", c.e.server)
}

// statusErr maps a non-2xx answer: HTTP 429, 5xx (and Anthropic's 529) are
// ErrUnavailable, other statuses ErrRejected. The text carries the
// server's own message (OpenAI, Anthropic and Ollama error bodies) and the
// Retry-After header when there is one (also in Error.RetryAfter).
func (c *call) statusErr() error {
	status := c.resp.StatusCode
	b, err := io.ReadAll(io.LimitReader(c.body, 8<<10))
	if err != nil {
		if cerr := cancelled(c.ctx); cerr != nil {
			return cerr
		}
	}
	detail := ""
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil {
		detail = errorMessage(env.Error)
	}
	if detail == "" {
		detail = trimSnippet(strings.TrimSpace(string(b)))
	}
	kind := ErrRejected
	if status == http.StatusTooManyRequests || status >= 500 {
		kind = ErrUnavailable
	}
	text := http.StatusText(status)
	if status == 529 {
		text = "Overloaded" // Anthropic's own status
	}
	msg := strings.TrimSpace(fmt.Sprintf("model server at %s answered HTTP %d %s", c.e.server, status, text))
	if detail != "" {
		msg += ": " + detail
	}
	e := &Error{Kind: kind, Msg: msg}
	if d, ok := retryAfter(c.resp.Header.Get("Retry-After"), time.Now()); ok {
		e.RetryAfter = d
		e.Msg += fmt.Sprintf(" (retry after %s)", d)
	}
	return e
}

// retryAfter parses a Retry-After header: seconds, or an HTTP date
// (relative to now). ok is false when the header is absent or unusable.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if n, err := strconv.ParseFloat(h, 64); err == nil && n >= 0 && n < 1e7 {
		return time.Duration(n * float64(time.Second)).Round(time.Millisecond), true
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := t.Sub(now).Round(time.Second); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// causeErr gives a network error a short text while keeping it unwrappable.
type causeErr struct {
	msg string
	err error
}

func (e *causeErr) Error() string { return e.msg }
func (e *causeErr) Unwrap() error { return e.err }

// netCause shortens transport errors ("Post \"http://...\": dial tcp ...:
// connect: connection refused") to their essence ("connection refused").
func netCause(err error) error {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return &causeErr{"connection refused", err}
	case errors.Is(err, syscall.ECONNRESET):
		return &causeErr{"connection reset by the server", err}
	case errors.As(err, &dnsErr):
		return &causeErr{fmt.Sprintf("cannot resolve host %q", dnsErr.Name), err}
	case errors.As(err, &netErr) && netErr.Timeout():
		return &causeErr{"connection timed out", err}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return &causeErr{ue.Err.Error(), err}
	}
	return err
}

func trimSnippet(s string) string {
	const max = 160
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
