package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// DefaultOpenAIBaseURL is the API root used when OpenAIOptions.BaseURL is
// empty. The timeouts and limits default to the shared Default* constants
// (httpstream.go).
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

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
	// Vision: the model takes images (TakesImages). Default false: the
	// caller should give it an image's path and metadata as text.
	Vision bool
}

// OpenAI is a Provider for any server speaking the OpenAI chat-completions
// API with "stream": true (server-sent events). It is safe for concurrent use.
type OpenAI struct {
	opts OpenAIOptions
	ep   endpoint // POST <BaseURL>/chat/completions
	log  *slog.Logger
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
	ep := newEndpoint(opts.BaseURL+"/chat/completions", opts.BaseURL, "[DONE]", opts.HTTPClient,
		opts.HeaderTimeout, opts.IdleTimeout, opts.MaxLineBytes)
	opts.HeaderTimeout, opts.IdleTimeout, opts.MaxLineBytes, opts.HTTPClient = ep.headerTimeout, ep.idleTimeout, ep.maxLine, ep.client
	return &OpenAI{opts: opts, ep: ep, log: loggerOr(opts.Logger)}
}

// Name reports OpenAIOptions.Name.
func (c *OpenAI) Name() string { return c.opts.Name }

// Model reports OpenAIOptions.Model.
func (c *OpenAI) Model() string { return c.opts.Model }

// BaseURL reports the API root in use.
func (c *OpenAI) BaseURL() string { return c.opts.BaseURL }

// Vision reports OpenAIOptions.Vision.
func (c *OpenAI) Vision() bool { return c.opts.Vision }

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
	hdr := http.Header{}
	if c.opts.APIKey != "" {
		hdr.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	return c.ep.stream(ctx, c.log, exchange{provider: c.opts.Name, model: c.modelFor(req), req: req,
		encode: c.encode, header: hdr, read: c.read}, onDelta)
}

// read accepts an event stream, or one JSON completion from a server that
// ignored "stream".
func (c *OpenAI) read(cl *call, onDelta func(Delta)) (Response, error) {
	ct, sse := cl.mediaType()
	switch {
	case ct == "application/json":
		return c.readJSON(cl, onDelta)
	case sse:
		return c.readSSE(cl, onDelta)
	}
	return Response{}, cl.notStream()
}

func (c *OpenAI) modelFor(req Request) string {
	if req.Model != "" {
		return req.Model
	}
	return c.opts.Model
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
	Role string `json:"role"`
	// Content is a *string, nil (JSON null: an assistant turn of tool
	// calls only), or []wirePart for a user turn with images.
	Content    any            `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
}

// wirePart is one content part of a user message: {type:"text", text}
// or {type:"image_url", image_url:{url:"data:<mime>;base64,…"}}.
type wirePart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *wireImageURL `json:"image_url,omitempty"`
}

type wireImageURL struct {
	URL string `json:"url"`
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

// toolImagesNote opens the user message that carries a tool's images
// (see encode), with the call id and tool name.
const toolImagesNote = "The images returned by tool call %s (%s):"

func (c *OpenAI) encode(req Request) ([]byte, error) {
	w := wireRequest{Model: c.modelFor(req), Stream: true}
	if !c.opts.NoStreamUsage {
		w.StreamOptions = &wireStreamOptions{IncludeUsage: true}
	}
	images, err := loadImages(req.Messages)
	if err != nil {
		return nil, err
	}
	// A tool's images wait here until the run of tool messages they
	// belong to ends: the API wants every tool message of an assistant
	// turn right after it, before any other message.
	var pending []wireMessage
	flush := func() {
		w.Messages = append(w.Messages, pending...)
		pending = nil
	}
	for i, m := range req.Messages {
		if m.Role != RoleTool {
			flush()
		}
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
		if imgs := images[i]; len(imgs) > 0 {
			switch m.Role {
			case RoleUser:
				parts := []wirePart{{Type: "text", Text: m.Content}}
				wm.Content = append(parts, imageParts(imgs)...)
			case RoleTool:
				// Tool messages take text only (the Chat Completions API
				// reference: a tool message's content is a string or an
				// array of text parts), so the images follow as a user
				// message once the tool messages of the turn are done.
				parts := []wirePart{{Type: "text", Text: fmt.Sprintf(toolImagesNote, m.ToolCallID, m.Name)}}
				pending = append(pending, wireMessage{Role: RoleUser, Content: append(parts, imageParts(imgs)...)})
			default:
				return nil, newErr(ErrImage, nil, "images in a %s message cannot be sent (only user and tool messages carry images)", m.Role)
			}
		}
		w.Messages = append(w.Messages, wm)
	}
	flush()
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

// imageParts are imgs as image_url parts with data URLs (Ollama's
// OpenAI-compatible API takes base64 data URLs too, not remote URLs).
func imageParts(imgs []loadedImage) []wirePart {
	out := make([]wirePart, len(imgs))
	for i, l := range imgs {
		out[i] = wirePart{Type: "image_url", ImageURL: &wireImageURL{URL: l.dataURL()}}
	}
	return out
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

func (c *OpenAI) readSSE(cl *call, onDelta func(Delta)) (Response, error) {
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
		data, err := cl.nextData()
		if err == io.EOF {
			if out.FinishReason != "" {
				// Lenient: a finished answer without the closing [DONE].
				return finish(), nil
			}
			return finish(), cl.readErr(io.ErrUnexpectedEOF)
		}
		if err != nil {
			return finish(), err
		}
		if data == "[DONE]" {
			return finish(), nil
		}
		var ch wireChunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return finish(), newErr(ErrBadResponse, nil, "model server at %s sent a stream chunk that is not valid JSON: %q", c.ep.server, trimSnippet(data))
		}
		if msg := errorMessage(ch.Error); msg != "" {
			return finish(), newErr(ErrBadResponse, nil, "model server at %s reported an error: %s", c.ep.server, msg)
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
func (c *OpenAI) readJSON(cl *call, onDelta func(Delta)) (Response, error) {
	b, err := io.ReadAll(io.LimitReader(cl.body, int64(c.opts.MaxLineBytes)+1))
	if err != nil {
		return Response{}, cl.readErr(err)
	}
	if len(b) > c.opts.MaxLineBytes {
		return Response{}, newErr(ErrBadResponse, nil, "model server at %s sent a JSON answer larger than %d bytes", c.ep.server, c.opts.MaxLineBytes)
	}
	var ch wireChunk
	if err := json.Unmarshal(b, &ch); err != nil {
		return Response{}, newErr(ErrBadResponse, nil, "model server at %s sent invalid JSON: %q", c.ep.server, trimSnippet(string(b)))
	}
	if msg := errorMessage(ch.Error); msg != "" {
		return Response{}, newErr(ErrBadResponse, nil, "model server at %s reported an error: %s", c.ep.server, msg)
	}
	if len(ch.Choices) == 0 {
		return Response{}, newErr(ErrBadResponse, nil, "model server at %s sent JSON without choices: %q", c.ep.server, trimSnippet(string(b)))
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
