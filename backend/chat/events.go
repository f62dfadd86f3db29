package chat

import "github.com/atrium-dev/atrium/backend/history"

// Event names passed to Options.Emit (docs/PROTOCOL.md "Events").
const (
	EventThinking  = "chat.thinking"
	EventReasoning = "chat.reasoning"
	EventChunk     = "chat.chunk"
	EventFinal     = "chat.final"
	EventCancelled = "chat.cancelled"
	EventError     = "chat.error"
)

// Error codes used in ErrorEvent.Error.Code (the gateway's codes, SPEC §3).
const (
	CodeUnavailable = "UNAVAILABLE" // the model server is down, refused the request or answered garbage
	CodeTimeout     = "TIMEOUT"     // the model went silent or the run exceeded Options.RunTimeout
	CodeInternal    = "INTERNAL"    // anything else
)

// RunRef identifies the run an event belongs to; it is part of every event's
// payload (SPEC §3). MessageID is the id of the assistant message the run
// produces (SendResult.MessageID).
type RunRef struct {
	RunID     string `json:"runId"`
	ProfileID string `json:"profileId"`
	SessionID string `json:"sessionId"`
	MessageID string `json:"messageId"`
}

// ThinkingEvent is the payload of chat.thinking: the run was accepted and
// has started.
type ThinkingEvent struct {
	RunRef
}

// ReasoningEvent is the payload of chat.reasoning: a piece of the model's
// visible reasoning (models that stream it, e.g. DeepSeek-R1, Qwen3). It is
// never persisted.
type ReasoningEvent struct {
	RunRef
	Delta string `json:"delta"`
}

// ChunkEvent is the payload of chat.chunk: a piece of answer text (a delta,
// not cumulative). Seq starts at 1 and increases by one per chunk of a run.
type ChunkEvent struct {
	RunRef
	Delta string `json:"delta"`
	Seq   int    `json:"seq"`
}

// FinalEvent is the payload of chat.final: the complete assistant message,
// persisted just before the event. Message.Content equals the concatenation
// of the run's chunks.
type FinalEvent struct {
	RunRef
	Message history.Message `json:"message"`
}

// CancelledEvent is the payload of chat.cancelled. Message is the persisted
// partial answer (Error "cancelled"), or nil when no text had arrived.
type CancelledEvent struct {
	RunRef
	Message *history.Message `json:"message,omitempty"`
}

// ActiveRun describes a run in progress as history.profile reports it, so
// that a client that (re)connects mid-run can re-attach to it (SPEC §3).
// Content is the answer text streamed so far: exactly the concatenation of
// the run's chat.chunk deltas 1..Seq (Seq 0: nothing yet). The run's next
// chunk carries Seq+1, so a client shows Content and then appends only
// chunks with a larger seq. StartedAt is the Unix time (ms) the run was
// accepted, equal to the ts of its user message.
type ActiveRun struct {
	RunRef
	Content   string `json:"content"`
	Seq       int    `json:"seq"`
	StartedAt int64  `json:"startedAt"`
}

// HistoryPage is history.profile's payload: a page of stored messages and,
// on the newest page (no before cursor), the profile's runs in progress,
// oldest first. Active is never nil, so it encodes as [] when empty.
type HistoryPage struct {
	history.Page
	Active []ActiveRun `json:"active"`
}

// RunError is the error object of chat.error.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ErrorEvent is the payload of chat.error. The assistant message is persisted
// with its Error set to Error.Message (and any partial text as Content).
type ErrorEvent struct {
	RunRef
	Error RunError `json:"error"`
}
