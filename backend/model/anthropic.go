package model

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Defaults for AnthropicOptions. The timeouts and limits default to the
// shared Default* constants (httpstream.go).
const (
	// DefaultAnthropicBaseURL is the API root used when
	// AnthropicOptions.BaseURL is empty ("/v1/messages" is appended).
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	// DefaultAnthropicModel is used when no model is configured and the
	// server's /v1/models list cannot be read (Detect).
	DefaultAnthropicModel = "claude-sonnet-4-5"
	// DefaultAnthropicMaxTokens is the "max_tokens" sent when
	// AnthropicOptions.MaxTokens is 0. The Messages API requires the field;
	// 4096 is within the output limit of every Claude model, older ones
	// included.
	DefaultAnthropicMaxTokens = 4096
	// AnthropicVersion is the "anthropic-version" header sent with every
	// request: the API version whose event stream this client parses.
	AnthropicVersion = "2023-06-01"
)

// AnthropicOptions configure an Anthropic Messages API client.
type AnthropicOptions struct {
	// BaseURL is the API root without the version path, e.g.
	// "https://api.anthropic.com" or a proxy; "/v1/messages" is appended
	// (a trailing "/v1" is accepted and dropped). Default DefaultAnthropicBaseURL.
	BaseURL string
	// APIKey is sent as "x-api-key" when not empty.
	APIKey string
	// Model is the model name used when Request.Model is empty.
	Model string
	// MaxTokens is "max_tokens": the most output tokens one call may
	// produce (the answer stops with FinishReason "length" there).
	// Default DefaultAnthropicMaxTokens.
	MaxTokens int
	// HTTPClient sends the requests. Default: a client with a
	// DefaultDialTimeout connect timeout and no overall timeout.
	HTTPClient *http.Client
	// HeaderTimeout bounds the wait for response headers. Default DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout bounds the silence between two reads of the body (the
	// API's own "ping" events count as data). Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxLineBytes caps one event-stream line. Default DefaultMaxLineBytes.
	MaxLineBytes int
	// Logger receives debug records. Default slog.Default().
	Logger *slog.Logger
	// Vision: the model takes images (TakesImages). Default false.
	Vision bool
}

// Anthropic is a Provider for the Anthropic Messages API (POST /v1/messages
// with "stream": true) (SPEC §6 "Models"). It is safe for concurrent use.
//
// Request mapping: system messages become the top-level "system" text
// (joined by blank lines); user and assistant turns become messages of
// content blocks, consecutive turns of one role merged into one (the API
// wants alternating turns; a conversation that starts with the assistant
// gets a "(continued)" user turn first); an assistant's ToolCalls become
// "tool_use" blocks; RoleTool messages become "tool_result" blocks (by
// ToolCallID) of a user turn, placed before any text of that turn; Tools
// become "tools" [{name, description, input_schema}]. Images become
// "image" blocks with a base64 source {type, media_type, data}: before the
// text of a user turn, and inside the tool_result's content (then an array
// of a text block and the image blocks) for a tool's.
//
// Extended thinking is not requested: a tool-result turn after thinking
// would have to send back the signed thinking blocks, which Message does
// not carry. Thinking blocks a server sends anyway are streamed as
// Delta.Reasoning.
type Anthropic struct {
	opts AnthropicOptions
	ep   endpoint // POST <BaseURL>/v1/messages
	log  *slog.Logger
}

// NewAnthropic returns a client with opts' defaults filled in. It does not
// contact the server.
func NewAnthropic(opts AnthropicOptions) *Anthropic {
	opts.BaseURL = anthropicRoot(opts.BaseURL)
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultAnthropicMaxTokens
	}
	ep := newEndpoint(opts.BaseURL+"/v1/messages", opts.BaseURL, "message_stop", opts.HTTPClient,
		opts.HeaderTimeout, opts.IdleTimeout, opts.MaxLineBytes)
	opts.HeaderTimeout, opts.IdleTimeout, opts.MaxLineBytes, opts.HTTPClient = ep.headerTimeout, ep.idleTimeout, ep.maxLine, ep.client
	return &Anthropic{opts: opts, ep: ep, log: loggerOr(opts.Logger)}
}

// Name reports ProviderAnthropic.
func (c *Anthropic) Name() string { return ProviderAnthropic }

// Model reports AnthropicOptions.Model.
func (c *Anthropic) Model() string { return c.opts.Model }

// BaseURL reports the API root in use (without "/v1").
func (c *Anthropic) BaseURL() string { return c.opts.BaseURL }

// Vision reports AnthropicOptions.Vision.
func (c *Anthropic) Vision() bool { return c.opts.Vision }

// Stream implements Provider: it POSTs req to <BaseURL>/v1/messages with
// "stream": true and parses the event stream (message_start,
// content_block_start/delta/stop, message_delta, message_stop, ping,
// error). Text deltas go to onDelta as Delta.Content, thinking deltas as
// Delta.Reasoning; tool_use blocks are assembled from their input_json_delta
// pieces into ToolCalls (Arguments is the JSON text, "{}" when the tool
// takes no input). FinishReason uses the OpenAI vocabulary: end_turn and
// stop_sequence → "stop", tool_use → "tool_calls", max_tokens → "length",
// refusal → "content_filter" (others as sent). Usage: PromptTokens is
// input_tokens plus cache_creation_input_tokens and cache_read_input_tokens;
// CompletionTokens is output_tokens.
//
// Errors: ErrUnavailable (unreachable; HTTP 429, 5xx, 529; an error event
// of type overloaded_error, api_error or rate_limit_error), ErrRejected
// (other HTTP errors, e.g. 400/401/403/404, with the server's message; an
// error event of a request-related type), ErrBadResponse (not an event
// stream, a chunk that is not JSON, an unknown error type), ErrIncomplete
// (stream cut before message_stop), ErrTimeout (header or idle timeout), or
// ctx's error. With an error the partial Response so far is returned.
func (c *Anthropic) Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error) {
	hdr := http.Header{}
	hdr.Set("anthropic-version", AnthropicVersion)
	if c.opts.APIKey != "" {
		hdr.Set("x-api-key", c.opts.APIKey)
	}
	return c.ep.stream(ctx, c.log, exchange{provider: ProviderAnthropic, model: c.modelFor(req), req: req,
		encode: c.encode, header: hdr, read: c.read}, onDelta)
}

// read accepts an event stream only (the API has no non-streamed fallback
// once "stream" is true).
func (c *Anthropic) read(cl *call, onDelta func(Delta)) (Response, error) {
	if _, sse := cl.mediaType(); !sse {
		return Response{}, cl.notStream()
	}
	return c.readSSE(cl, onDelta)
}

func (c *Anthropic) modelFor(req Request) string {
	if req.Model != "" {
		return req.Model
	}
	return c.opts.Model
}

// ---- request encoding ----

// antBlock is one content block of a request message.
type antBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`        // text
	ID        string          `json:"id,omitempty"`          // tool_use
	Name      string          `json:"name,omitempty"`        // tool_use
	Input     json.RawMessage `json:"input,omitempty"`       // tool_use
	ToolUseID string          `json:"tool_use_id,omitempty"` // tool_result
	// Content of a tool_result: a *string, or []antBlock (text and image
	// blocks) when the tool returned images.
	Content any        `json:"content,omitempty"`
	Source  *antSource `json:"source,omitempty"` // image
}

// antSource is an image block's {type:"base64", media_type, data}.
type antSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// antImages are imgs as image blocks.
func antImages(imgs []loadedImage) []antBlock {
	out := make([]antBlock, len(imgs))
	for i, l := range imgs {
		out[i] = antBlock{Type: "image", Source: &antSource{Type: "base64", MediaType: l.mime, Data: l.b64}}
	}
	return out
}

type antMessage struct {
	Role    string     `json:"role"`
	Content []antBlock `json:"content"`
}

type antTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type antRequest struct {
	Model     string       `json:"model"`
	MaxTokens int          `json:"max_tokens"`
	System    string       `json:"system,omitempty"`
	Messages  []antMessage `json:"messages"`
	Tools     []antTool    `json:"tools,omitempty"`
	Stream    bool         `json:"stream"`
}

// continuedTurn opens a conversation whose first kept turn is the assistant's.
const continuedTurn = "(continued)"

func (c *Anthropic) encode(req Request) ([]byte, error) {
	w := antRequest{Model: c.modelFor(req), MaxTokens: c.opts.MaxTokens, Stream: true, Messages: []antMessage{}}
	var system []string
	add := func(role string, blocks ...antBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(w.Messages); n > 0 && w.Messages[n-1].Role == role {
			w.Messages[n-1].Content = append(w.Messages[n-1].Content, blocks...)
			return
		}
		if len(w.Messages) == 0 && role == RoleAssistant {
			w.Messages = append(w.Messages, antMessage{Role: RoleUser, Content: []antBlock{{Type: "text", Text: continuedTurn}}})
		}
		w.Messages = append(w.Messages, antMessage{Role: role, Content: blocks})
	}
	images, err := loadImages(req.Messages)
	if err != nil {
		return nil, err
	}
	for i, m := range req.Messages {
		if len(images[i]) > 0 && m.Role != RoleUser && m.Role != RoleTool {
			return nil, newErr(ErrImage, nil, "images in a %s message cannot be sent (only user and tool messages carry images)", m.Role)
		}
		switch m.Role {
		case RoleSystem:
			if strings.TrimSpace(m.Content) != "" {
				system = append(system, m.Content)
			}
		case RoleTool:
			content := m.Content
			b := antBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: &content}
			if imgs := images[i]; len(imgs) > 0 {
				// A tool's images travel inside its tool_result (the
				// Messages API takes text and image blocks there).
				b.Content = append([]antBlock{{Type: "text", Text: m.Content}}, antImages(imgs)...)
			}
			add(RoleUser, b)
		case RoleAssistant:
			var blocks []antBlock
			if strings.TrimSpace(m.Content) != "" { // the API refuses empty text blocks
				blocks = append(blocks, antBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				blocks = append(blocks, antBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
			}
			add(RoleAssistant, blocks...)
		default: // user: images first, then the text (Anthropic's advice for image prompts)
			blocks := antImages(images[i])
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, antBlock{Type: "text", Text: m.Content})
			}
			add(RoleUser, blocks...)
		}
	}
	// tool_result blocks must open their user turn.
	for i := range w.Messages {
		if w.Messages[i].Role == RoleUser {
			sortToolResultsFirst(w.Messages[i].Content)
		}
	}
	w.System = strings.Join(system, "\n\n")
	for _, t := range req.Tools {
		w.Tools = append(w.Tools, antTool{Name: t.Name, Description: t.Description, InputSchema: toolSchema(t.Parameters)})
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, newErr(ErrRejected, err, "cannot encode the model request")
	}
	return b, nil
}

// toolSchema is a tool's parameter schema, or an empty object schema.
func toolSchema(params json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(params)) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return params
}

// toolInput is a tool call's arguments as the JSON object tool_use wants:
// empty or not an object (a model's broken JSON) becomes {}.
func toolInput(args json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if t := bytes.TrimSpace(args); len(t) > 0 && t[0] == '{' && json.Unmarshal(t, &obj) == nil {
		return t
	}
	return json.RawMessage(`{}`)
}

// sortToolResultsFirst moves tool_result blocks before the others, keeping
// the order within each group.
func sortToolResultsFirst(bs []antBlock) {
	var results, rest []antBlock
	for _, b := range bs {
		if b.Type == "tool_result" {
			results = append(results, b)
		} else {
			rest = append(rest, b)
		}
	}
	copy(bs, append(results, rest...))
}

// ---- response decoding ----

type antUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

func (u *antUsage) prompt() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// antEvent is the data of one event; Type names the event.
type antEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		Usage *antUsage `json:"usage"`
	} `json:"message"` // message_start
	ContentBlock *struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
		Text  string          `json:"text"`
	} `json:"content_block"` // content_block_start
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"` // content_block_delta, message_delta
	Usage *antUsage `json:"usage"` // message_delta
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"` // error
}

// antToolBlock is a tool_use block being streamed.
type antToolBlock struct {
	id, name string
	start    json.RawMessage // content_block_start's input (normally {})
	args     strings.Builder
}

// antStopReasons maps stop_reason to the package's finish vocabulary.
var antStopReasons = map[string]string{
	"end_turn":      "stop",
	"stop_sequence": "stop",
	"tool_use":      "tool_calls",
	"max_tokens":    "length",
	"refusal":       "content_filter",
	// the context window filled before max_tokens
	"model_context_window_exceeded": "length",
}

// antErrorKinds maps the "type" of an error event to a sentinel.
var antErrorKinds = map[string]error{
	"overloaded_error":      ErrUnavailable,
	"api_error":             ErrUnavailable,
	"rate_limit_error":      ErrUnavailable,
	"timeout_error":         ErrUnavailable,
	"invalid_request_error": ErrRejected,
	"authentication_error":  ErrRejected,
	"permission_error":      ErrRejected,
	"not_found_error":       ErrRejected,
	"request_too_large":     ErrRejected,
	"billing_error":         ErrRejected,
}

func (c *Anthropic) readSSE(cl *call, onDelta func(Delta)) (Response, error) {
	var (
		out     Response
		content strings.Builder
		tools   = map[int]*antToolBlock{}
		order   []int // tool block indexes in stream order
	)
	finish := func() Response {
		out.Content = content.String()
		out.ToolCalls = nil
		for _, i := range order {
			b := tools[i]
			args := b.args.String()
			if strings.TrimSpace(args) == "" {
				args = "{}"
				if s := bytes.TrimSpace(b.start); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
					args = string(s)
				}
			}
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: b.id, Name: b.name, Arguments: json.RawMessage(args)})
		}
		return out
	}
	for {
		data, err := cl.nextData()
		if err == io.EOF {
			return finish(), cl.readErr(io.ErrUnexpectedEOF)
		}
		if err != nil {
			return finish(), err
		}
		var ev antEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return finish(), newErr(ErrBadResponse, nil, "model server at %s sent a stream event that is not valid JSON: %q", c.ep.server, trimSnippet(data))
		}
		switch ev.Type {
		case "message_start":
			if ev.Message != nil && ev.Message.Usage != nil {
				out.Usage = Usage{PromptTokens: ev.Message.Usage.prompt(), CompletionTokens: ev.Message.Usage.OutputTokens}
			}
		case "content_block_start":
			if cb := ev.ContentBlock; cb != nil {
				switch cb.Type {
				case "tool_use":
					if tools[ev.Index] == nil {
						order = append(order, ev.Index)
					}
					tools[ev.Index] = &antToolBlock{id: cb.ID, name: cb.Name, start: cb.Input}
				case "text":
					if cb.Text != "" {
						content.WriteString(cb.Text)
						onDelta(Delta{Content: cb.Text})
					}
				}
			}
		case "content_block_delta":
			if ev.Delta == nil {
				continue
			}
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" {
					content.WriteString(ev.Delta.Text)
					onDelta(Delta{Content: ev.Delta.Text})
				}
			case "thinking_delta":
				if ev.Delta.Thinking != "" {
					onDelta(Delta{Reasoning: ev.Delta.Thinking})
				}
			case "input_json_delta":
				if b := tools[ev.Index]; b != nil {
					b.args.WriteString(ev.Delta.PartialJSON)
				} else {
					return finish(), newErr(ErrBadResponse, nil, "model server at %s sent tool input for content block %d, which is not a tool_use block", c.ep.server, ev.Index)
				}
			}
			// signature_delta and citations_delta carry nothing Atrium shows.
		case "message_delta":
			if ev.Delta != nil && ev.Delta.StopReason != "" {
				out.FinishReason = ev.Delta.StopReason
				if fr, ok := antStopReasons[ev.Delta.StopReason]; ok {
					out.FinishReason = fr
				}
			}
			if u := ev.Usage; u != nil {
				out.Usage.CompletionTokens = u.OutputTokens
				if p := u.prompt(); p > 0 { // newer servers repeat the (cumulative) input count here
					out.Usage.PromptTokens = p
				}
			}
		case "message_stop":
			return finish(), nil
		case "error":
			typ, msg := "", ""
			if ev.Error != nil {
				typ, msg = ev.Error.Type, ev.Error.Message
			}
			kind, ok := antErrorKinds[typ]
			if !ok {
				kind = ErrBadResponse
			}
			return finish(), newErr(kind, nil, "model server at %s reported an error in the middle of the answer: %s: %s", c.ep.server, typ, msg)
		}
		// content_block_stop, ping and event types added by later API
		// versions need nothing (the API's versioning policy says to ignore
		// unknown events).
	}
}
