// Package model talks to language-model servers for Atrium's agents
// (SPEC §6 "Models").
//
// It defines a small provider-neutral request/response shape (Message, Tool,
// Request, Response), the streaming Provider interface, an OpenAI-compatible
// chat-completions client (NewOpenAI: OpenAI, Ollama's /v1, llama.cpp server,
// vLLM, LM Studio, DeepSeek), an Anthropic Messages client (NewAnthropic),
// Detect, which decides which model to use from explicit configuration, the
// environment or a local Ollama, and ForProfile, which applies a profile's
// own model settings on top of that.
//
// The built-in "offline" provider, which answers from memory search when no
// model is configured, lives in package chat because it needs memory search.
//
// Every failure of a provider is an error that matches one of the sentinels
// below with errors.Is (ErrUnavailable, ErrRejected, ErrBadResponse,
// ErrIncomplete, ErrTimeout, and ErrImage for an image that cannot be
// sent) or wraps the context's error when the caller
// cancelled; its text is meant to be shown to a person as is.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Provider names used in Config.Provider and returned by Provider.Name.
const (
	ProviderOpenAI    = "openai"
	ProviderOllama    = "ollama"
	ProviderAnthropic = "anthropic"
	ProviderOffline   = "offline"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of the conversation sent to a model.
//
// Role is RoleSystem, RoleUser, RoleAssistant or RoleTool. An assistant turn
// that called tools carries them in ToolCalls; the answer to a call is a
// RoleTool message whose ToolCallID names the call and whose Name is the tool.
//
// Images go to the model with the message's text: in a user message, and
// in a tool message (a tool's picture, e.g. a node's camera.snap). Each
// provider sends them in its API's own shape (OpenAI-compatible:
// image_url parts with data URLs; Anthropic: image blocks, inside the
// tool_result for a tool's), bounded by MaxImageBase64Bytes and
// MaxImagesPerRequest (ErrImage). Only give images to a model that takes
// them (TakesImages); other messages may not carry images.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	Name       string     `json:"name,omitempty"`
	Images     []Image    `json:"images,omitempty"`
}

// ToolCall is one function call requested by the model. Arguments is the
// argument text exactly as the model produced it: normally a JSON object, but
// it is not validated here (a model may emit broken JSON; the caller decides
// what to do with it).
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Tool describes a function the model may call. Parameters is a JSON schema
// object describing the arguments.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call. Model overrides the provider's configured model
// when not empty. Tools may be empty (no tool use offered).
type Request struct {
	Model    string    `json:"model,omitempty"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
}

// Delta is one streamed increment: answer text (Content) or the model's
// visible reasoning (Reasoning). Deltas are increments, not cumulative text.
type Delta struct {
	Content   string
	Reasoning string
}

// Usage counts tokens as reported by the server (zero when it did not say).
type Usage struct {
	PromptTokens     int `json:"promptTokens"`
	CompletionTokens int `json:"completionTokens"`
}

// Response is the complete result of one streamed model call: the full
// answer text (the concatenation of every Delta.Content), the tool calls the
// model asked for (assembled from streamed pieces, in order), the server's
// finish reason ("stop", "tool_calls", "length", ...) and token usage.
type Response struct {
	Content      string     `json:"content"`
	ToolCalls    []ToolCall `json:"toolCalls,omitempty"`
	FinishReason string     `json:"finishReason"`
	Usage        Usage      `json:"usage"`
}

// Provider is a streaming chat model.
//
// Stream sends req and calls onDelta (from the calling goroutine, in order)
// for every piece of text as it arrives, then returns the complete Response.
// On failure it returns the partial Response gathered so far together with an
// error that matches one of the package sentinels, or wraps ctx's error when
// ctx was cancelled. Stream never blocks past ctx, and implementations bound
// the wait for a silent server with their own timeouts.
//
// A Provider is safe for concurrent use by several runs.
type Provider interface {
	// Name is the provider kind, e.g. "openai", "ollama", "anthropic", "offline".
	Name() string
	// Model is the model name used when Request.Model is empty.
	Model() string
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (Response, error)
}

// Sentinel errors. Provider errors match exactly one of them with errors.Is.
var (
	// ErrUnavailable: the model server cannot be reached (connection refused,
	// unknown host, TLS failure), answered with HTTP 429 or 5xx (Anthropic's
	// 529 "overloaded" included), or said mid-stream that it is overloaded
	// or failed internally. Retrying later may succeed; Error.RetryAfter
	// says when, if the server did.
	ErrUnavailable = errors.New("model server unavailable")
	// ErrRejected: the server refused the request with HTTP 4xx other than
	// 429 (bad key, unknown model, malformed request), or mid-stream for a
	// reason of the request (e.g. Anthropic's invalid_request_error). The
	// error text carries the server's own message.
	ErrRejected = errors.New("model server rejected the request")
	// ErrBadResponse: the server answered, but not with the event stream of
	// its API (wrong content type, garbage lines, chunks that are not JSON,
	// an error object inside the stream that names no known cause).
	ErrBadResponse = errors.New("bad response from model server")
	// ErrIncomplete: the event stream ended before its end marker ("[DONE]"
	// for OpenAI, message_stop for Anthropic): the connection was cut
	// mid-answer.
	ErrIncomplete = errors.New("model stream ended early")
	// ErrTimeout: the server sent no response headers within the header
	// timeout, or went silent between chunks for longer than the idle timeout.
	ErrTimeout = errors.New("model server timed out")
	// ErrConfig: Detect was given a configuration it cannot use (for example
	// an unknown provider name).
	ErrConfig = errors.New("invalid model configuration")
)

// Error is the error type returned by providers in this package. Error()
// is a complete human-readable sentence (for example "model server at
// http://127.0.0.1:9 is unreachable: connection refused"); errors.Is matches
// Kind (one of the sentinels) and anything Err wraps (such as
// context.Canceled).
type Error struct {
	Kind error  // one of ErrUnavailable, ErrRejected, ErrBadResponse, ErrIncomplete, ErrTimeout, ErrConfig
	Msg  string // human-readable description without the cause
	Err  error  // underlying cause, may be nil
	// RetryAfter is how long the server asked the client to wait before
	// trying again (its Retry-After header on HTTP 429/503/529, also stated
	// in Msg); 0 when it did not say.
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

// Unwrap returns the kind and the cause so that errors.Is matches both.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

func newErr(kind error, cause error, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...), Err: cause}
}
