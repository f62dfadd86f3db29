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
	"strings"
	"syscall"
	"time"
)

// Defaults for OpenAIOptions.
const (
	// DefaultOpenAIBaseURL is the API root used when OpenAIOptions.BaseURL is empty.
	DefaultOpenAIBaseURL = "https://api.openai.com/v1"
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

// OpenAIOptions configure an OpenAI-compatible chat-completions client.
type OpenAIOptions struct {
	// BaseURL is the API root including its version path, e.g.
	// "https://api.openai.com/v1" or "http://127.0.0.1:11434/v1" (Ollama);
	// "/chat/completions" is appended. Default DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	APIKey string
	// Model is the model name used when Request.Model is empty.
	Model string
	// Name is what Name() reports (e.g. "openai", "ollama"). Default "openai".
	Name string
	// HTTPClient sends the requests. Default: a client with a
	// DefaultDialTimeout connect timeout and no overall timeout (streams may
	// be long; the header and idle timeouts below bound every wait).
	HTTPClient *http.Client
	// HeaderTimeout bounds the wait for response headers. Default DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout bounds the silence between two reads of the body. Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxLineBytes caps one event-stream line. Default DefaultMaxLineBytes.
	MaxLineBytes int
	// NoStreamUsage leaves out stream_options.include_usage for servers that
	// reject it. Default false (usage is asked for).
	NoStreamUsage bool
	// Logger receives debug records. Default slog.Default().
	Logger *slog.Logger
}

// OpenAI is a Provider for any server speaking the OpenAI chat-completions
// API with "stream": true (server-sent events). It is safe for concurrent use.
type OpenAI struct {
	opts     OpenAIOptions
	endpoint string // <BaseURL>/chat/completions
	server   string // scheme://host, for messages
	client   *http.Client
	log      *slog.Logger
}

// NewOpenAI returns a client with opts' defaults filled in. It does not
// contact the server.
func NewOpenAI(opts OpenAIOptions) *OpenAI {
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultOpenAIBaseURL
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	if opts.Name == "" {
		opts.Name = ProviderOpenAI
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = DefaultHeaderTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	client := opts.HTTPClient
	if client == nil {
		client = defaultHTTPClient()
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &OpenAI{
		opts:     opts,
		endpoint: opts.BaseURL + "/chat/completions",
		server:   serverLabel(opts.BaseURL),
		client:   client,
		log:      log,
	}
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

// Name reports OpenAIOptions.Name.
func (c *OpenAI) Name() string { return c.opts.Name }

// Model reports OpenAIOptions.Model.
func (c *OpenAI) Model() string { return c.opts.Model }

// BaseURL reports the API root in use.
func (c *OpenAI) BaseURL() string { return c.opts.BaseURL }

var (
	errHeaderTimeout = errors.New("header timeout")
	errIdleTimeout   = errors.New("idle timeout")
)

// Stream implements Provider: it POSTs req to <BaseURL>/chat/completions with
// "stream": true, calls onDelta for each content or reasoning piece
// ("reasoning_content" or "reasoning" in the delta), assembles streamed tool
// calls, and returns when the server sends "[DONE]".
//
// A server that ignores "stream" and answers with one JSON completion is
// accepted too. Errors: ErrUnavailable (unreachable, HTTP 429/5xx),
// ErrRejected (other HTTP errors), ErrBadResponse (not an event stream,
// garbage, bad JSON, an error object in the stream), ErrIncomplete (stream
// cut before "[DONE]"), ErrTimeout (header or idle timeout), or ctx's error.
func (c *OpenAI) Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	if onDelta == nil {
		onDelta = func(Delta) {}
	}
	if err := ctx.Err(); err != nil {
		return Response{}, fmt.Errorf("model request cancelled: %w", err)
	}
	body, err := c.encode(req)
	if err != nil {
		return Response{}, err
	}
	start := time.Now()
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return Response{}, newErr(ErrRejected, err, "invalid model server URL %q", c.opts.BaseURL)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if c.opts.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	c.log.Debug("model request", "provider", c.opts.Name, "model", c.modelFor(req), "url", c.endpoint,
		"messages", len(req.Messages), "tools", len(req.Tools))

	headerTimer := time.AfterFunc(c.opts.HeaderTimeout, func() { cancel(errHeaderTimeout) })
	resp, err := c.client.Do(hreq)
	headerTimer.Stop()
	if err != nil {
		return Response{}, c.transportErr(ctx, rctx, err)
	}
	defer resp.Body.Close()

	idle := time.AfterFunc(c.opts.IdleTimeout, func() { cancel(errIdleTimeout) })
	defer idle.Stop()
	body2 := &idleReader{r: resp.Body, t: idle, d: c.opts.IdleTimeout}

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Response{}, c.statusErr(ctx, rctx, resp.StatusCode, body2)
	}

	br := bufio.NewReaderSize(body2, 64<<10)
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var out Response
	switch {
	case ct == "application/json":
		out, err = c.readJSON(ctx, rctx, br, onDelta)
	case ct == "text/event-stream" || looksLikeSSE(br):
		out, err = c.readSSE(ctx, rctx, br, onDelta)
	default:
		snippet, _ := br.Peek(min(br.Buffered(), 200))
		err = newErr(ErrBadResponse, nil, "model server at %s did not answer with an event stream (content type %q): %q",
			c.server, resp.Header.Get("Content-Type"), trimSnippet(string(snippet)))
	}
	c.log.Debug("model response", "provider", c.opts.Name, "model", c.modelFor(req),
		"finish", out.FinishReason, "tool_calls", len(out.ToolCalls),
		"prompt_tokens", out.Usage.PromptTokens, "completion_tokens", out.Usage.CompletionTokens,
		"duration_ms", time.Since(start).Milliseconds(), "error", errString(err))
	return out, err
}

func (c *OpenAI) modelFor(req Request) string {
	if req.Model != "" {
		return req.Model
	}
	return c.opts.Model
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

// ---- request encoding ----

type wireFunc struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireToolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function wireFunc `json:"function"`
}

type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
}

type wireToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type wireTool struct {
	Type     string      `json:"type"`
	Function wireToolDef `json:"function"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireRequest struct {
	Model         string             `json:"model"`
	Messages      []wireMessage      `json:"messages"`
	Stream        bool               `json:"stream"`
	StreamOptions *wireStreamOptions `json:"stream_options,omitempty"`
	Tools         []wireTool         `json:"tools,omitempty"`
}

func (c *OpenAI) encode(req Request) ([]byte, error) {
	w := wireRequest{Model: c.modelFor(req), Stream: true}
	if !c.opts.NoStreamUsage {
		w.StreamOptions = &wireStreamOptions{IncludeUsage: true}
	}
	for _, m := range req.Messages {
		wm := wireMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		content := m.Content
		if !(m.Role == RoleAssistant && len(m.ToolCalls) > 0 && content == "") {
			wm.Content = &content
		}
		if m.Role != RoleTool {
			wm.Name = m.Name
		}
		for _, tc := range m.ToolCalls {
			args := string(tc.Arguments)
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			wm.ToolCalls = append(wm.ToolCalls, wireToolCall{ID: tc.ID, Type: "function",
				Function: wireFunc{Name: tc.Name, Arguments: args}})
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		w.Tools = append(w.Tools, wireTool{Type: "function",
			Function: wireToolDef{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, newErr(ErrRejected, err, "cannot encode the model request")
	}
	return b, nil
}

// ---- response decoding ----

type wireToolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type wireDelta struct {
	Content          string              `json:"content"`
	ReasoningContent string              `json:"reasoning_content"`
	Reasoning        string              `json:"reasoning"`
	ToolCalls        []wireToolCallDelta `json:"tool_calls"`
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type wireChunk struct {
	Choices []struct {
		Delta        wireDelta `json:"delta"`
		Message      wireDelta `json:"message"` // non-streamed completions
		FinishReason *string   `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// toolAsm assembles streamed tool-call pieces.
type toolAsm struct {
	calls []*toolPart
	byIdx map[int]*toolPart
}

type toolPart struct {
	id, name string
	args     strings.Builder
}

func (a *toolAsm) add(d wireToolCallDelta) {
	var p *toolPart
	switch {
	case d.Index != nil:
		if a.byIdx == nil {
			a.byIdx = map[int]*toolPart{}
		}
		p = a.byIdx[*d.Index]
		if p == nil {
			p = &toolPart{}
			a.byIdx[*d.Index] = p
			a.calls = append(a.calls, p)
		}
	case len(a.calls) > 0 && (d.ID == "" || d.ID == a.calls[len(a.calls)-1].id):
		p = a.calls[len(a.calls)-1]
	default:
		p = &toolPart{}
		a.calls = append(a.calls, p)
	}
	if p.id == "" {
		p.id = d.ID
	}
	if p.name == "" {
		p.name = d.Function.Name
	}
	raw := bytes.TrimSpace(d.Function.Arguments)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			p.args.WriteString(s)
		}
	} else if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		p.args.Write(raw) // some servers send the arguments as an object
	}
}

func (a *toolAsm) result() []ToolCall {
	var out []ToolCall
	for _, p := range a.calls {
		out = append(out, ToolCall{ID: p.id, Name: p.name, Arguments: json.RawMessage(p.args.String())})
	}
	return out
}

// applyChunk folds one decoded chunk into out.
func applyChunk(ch *wireChunk, d wireDelta, out *Response, content *strings.Builder, tools *toolAsm, onDelta func(Delta)) {
	reasoning := d.ReasoningContent
	if reasoning == "" {
		reasoning = d.Reasoning
	}
	if reasoning != "" || d.Content != "" {
		content.WriteString(d.Content)
		out.Content = content.String()
		onDelta(Delta{Content: d.Content, Reasoning: reasoning})
	}
	for _, tc := range d.ToolCalls {
		tools.add(tc)
	}
	if ch.Usage != nil {
		out.Usage = Usage{PromptTokens: ch.Usage.PromptTokens, CompletionTokens: ch.Usage.CompletionTokens}
	}
}

func (c *OpenAI) readSSE(ctx, rctx context.Context, br *bufio.Reader, onDelta func(Delta)) (Response, error) {
	var (
		out     Response
		content strings.Builder
		tools   toolAsm
	)
	finish := func() Response {
		out.Content = content.String()
		out.ToolCalls = tools.result()
		return out
	}
	for {
		line, err := readLine(br, c.opts.MaxLineBytes)
		if err != nil {
			if errors.Is(err, errLineTooLong) {
				return finish(), newErr(ErrBadResponse, nil, "model server at %s sent an event-stream line longer than %d bytes", c.server, c.opts.MaxLineBytes)
			}
			if err == io.EOF && line == "" {
				if out.FinishReason != "" {
					// Lenient: a finished answer without the closing [DONE].
					return finish(), nil
				}
				return finish(), c.readErr(ctx, rctx, io.ErrUnexpectedEOF)
			}
			if err != io.EOF {
				return finish(), c.readErr(ctx, rctx, err)
			}
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" || strings.HasPrefix(line, ":"):
			continue
		case strings.HasPrefix(line, "event:"), strings.HasPrefix(line, "id:"), strings.HasPrefix(line, "retry:"):
			continue
		case !strings.HasPrefix(line, "data:"):
			return finish(), newErr(ErrBadResponse, nil, "model server at %s sent a line that is not part of an event stream: %q", c.server, trimSnippet(line))
		}
		data := strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if data == "[DONE]" {
			return finish(), nil
		}
		if data == "" {
			continue
		}
		var ch wireChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return finish(), newErr(ErrBadResponse, nil, "model server at %s sent a stream chunk that is not valid JSON: %q", c.server, trimSnippet(data))
		}
		if msg := errorMessage(ch.Error); msg != "" {
			return finish(), newErr(ErrBadResponse, nil, "model server at %s reported an error: %s", c.server, msg)
		}
		var d wireDelta
		if len(ch.Choices) > 0 {
			d = ch.Choices[0].Delta
			if fr := ch.Choices[0].FinishReason; fr != nil && *fr != "" {
				out.FinishReason = *fr
			}
		}
		applyChunk(&ch, d, &out, &content, &tools, onDelta)
	}
}

// readJSON accepts a non-streamed completion from a server that ignored
// "stream": true.
func (c *OpenAI) readJSON(ctx, rctx context.Context, br *bufio.Reader, onDelta func(Delta)) (Response, error) {
	b, err := io.ReadAll(io.LimitReader(br, int64(c.opts.MaxLineBytes)+1))
	if err != nil {
		return Response{}, c.readErr(ctx, rctx, err)
	}
	if len(b) > c.opts.MaxLineBytes {
		return Response{}, newErr(ErrBadResponse, nil, "model server at %s sent a JSON answer larger than %d bytes", c.server, c.opts.MaxLineBytes)
	}
	var ch wireChunk
	if err := json.Unmarshal(b, &ch); err != nil {
		return Response{}, newErr(ErrBadResponse, nil, "model server at %s sent invalid JSON: %q", c.server, trimSnippet(string(b)))
	}
	if msg := errorMessage(ch.Error); msg != "" {
		return Response{}, newErr(ErrBadResponse, nil, "model server at %s reported an error: %s", c.server, msg)
	}
	if len(ch.Choices) == 0 {
		return Response{}, newErr(ErrBadResponse, nil, "model server at %s sent JSON without choices: %q", c.server, trimSnippet(string(b)))
	}
	var (
		out     Response
		content strings.Builder
		tools   toolAsm
	)
	if fr := ch.Choices[0].FinishReason; fr != nil {
		out.FinishReason = *fr
	}
	applyChunk(&ch, ch.Choices[0].Message, &out, &content, &tools, onDelta)
	out.Content = content.String()
	out.ToolCalls = tools.result()
	return out, nil
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

// errorMessage extracts a message from an OpenAI ({"message":...}) or
// Ollama ("text") error value; "" when there is none.
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

func (c *OpenAI) transportErr(ctx, rctx context.Context, err error) error {
	if cerr := cancelled(ctx); cerr != nil {
		return cerr
	}
	if context.Cause(rctx) == errHeaderTimeout {
		return newErr(ErrTimeout, nil, "model server at %s sent no response within %s", c.server, c.opts.HeaderTimeout)
	}
	return newErr(ErrUnavailable, netCause(err), "model server at %s is unreachable", c.server)
}

func (c *OpenAI) readErr(ctx, rctx context.Context, err error) error {
	if cerr := cancelled(ctx); cerr != nil {
		return cerr
	}
	if cause := context.Cause(rctx); cause == errIdleTimeout || cause == errHeaderTimeout {
		return newErr(ErrTimeout, nil, "model server at %s went silent for %s in the middle of an answer", c.server, c.opts.IdleTimeout)
	}
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return newErr(ErrIncomplete, nil, "the answer from the model server at %s stopped before it was complete (stream cut before [DONE])", c.server)
	}
	return newErr(ErrIncomplete, netCause(err), "the answer from the model server at %s stopped before it was complete", c.server)
}

func (c *OpenAI) statusErr(ctx, rctx context.Context, status int, body io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(body, 8<<10))
	if err != nil {
		if cerr := cancelled(ctx); cerr != nil {
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
	msg := fmt.Sprintf("model server at %s answered HTTP %d %s", c.server, status, http.StatusText(status))
	if detail != "" {
		msg += ": " + detail
	}
	return &Error{Kind: kind, Msg: msg}
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
