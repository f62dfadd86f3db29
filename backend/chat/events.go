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
	// EventMessageDeleted: a stored message was deleted (Service.Delete).
	EventMessageDeleted = "message.deleted"
)

// MessageDeletedEvent is the payload of message.deleted: the message
// MessageID (of profile ProfileID) is gone from both history domains;
// every client removes it from its view and cache.
type MessageDeletedEvent struct {
	MessageID string `json:"messageId"`
	ProfileID string `json:"profileId"`
}

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
	// Heartbeat marks every event of a heartbeat turn (Service.Heartbeat):
	// clients show nothing of it but a final event that is not Silent.
	Heartbeat bool `json:"heartbeat,omitempty"`
}

// ThinkingEvent is the payload of chat.thinking: the run was accepted and
// has started. UserMessage is the stored user message the run answers, so
// that every client (not only the sender) shows the question; clients merge
// it by id with their local copy.
type ThinkingEvent struct {
	RunRef
	UserMessage history.Message `json:"userMessage"`
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
	// Silent: a heartbeat turn answered HEARTBEAT_OK (IsHeartbeatAck);
	// the answer is not stored and clients show nothing.
	Silent bool `json:"silent,omitempty"`
}

// Reasons a run ended without an answer (CancelledEvent.Reason). They equal
// the Error of the stored message.
const (
	ReasonCancelled   = history.ErrorCancelled   // the person cancelled it
	ReasonInterrupted = history.ErrorInterrupted // the server stopped
)

// CancelledEvent is the payload of chat.cancelled. Reason is ReasonCancelled
// or ReasonInterrupted. Message is the persisted partial answer (Error =
// Reason); a cancelled run without text stores nothing (Message nil), an
// interrupted one is always stored.
type CancelledEvent struct {
	RunRef
	Reason  string           `json:"reason"`
	Message *history.Message `json:"message,omitempty"`
}

// ActiveRun describes a run in progress as history.profile reports it, so
// that a client that (re)connects mid-run can re-attach to it (SPEC §3).
// Content is the answer text streamed so far: exactly the concatenation of
// the run's chat.chunk deltas 1..Seq (Seq 0: nothing yet). The run's next
// chunk carries Seq+1, so a client shows Content and then appends only
// chunks with a larger seq. StartedAt is the Unix time (ms) the run was
// accepted, equal to the ts of its user message; the stored answer will
// have ts StartedAt+1.
type ActiveRun struct {
	RunRef
	// Content is the text so far; over MaxClientContent bytes, its last
	// MaxClientContent bytes (whole characters) with ContentTruncated set,
	// so that the deltas that follow still continue it.
	Content          string `json:"content"`
	ContentTruncated bool   `json:"contentTruncated,omitempty"`
	Seq              int    `json:"seq"`
	StartedAt        int64  `json:"startedAt"`
}

// HistoryPage is history.profile's payload: a page of stored messages and,
// on the newest page (no before cursor), the profile's runs in progress,
// oldest first. Active is never nil, so it encodes as [] when empty.
type HistoryPage struct {
	history.Page
	Active []ActiveRun `json:"active"`
}

// RunError is the error object of chat.error. Retryable: sending the same
// message again may succeed (the model server was unavailable or timed out,
// or the instance's worker crashed or hung and is being restarted).
type RunError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
}

// ErrorEvent is the payload of chat.error. The assistant message is persisted
// with its Error set to Error.Message (and any partial text as Content).
type ErrorEvent struct {
	RunRef
	Error RunError `json:"error"`
}

// Events of the agent loop in a chat run (docs/PROTOCOL.md "Agent loop";
// SPEC §6). Like the chat.* events they go to every operator connection.
const (
	// EventState: a transition of the run's agent state machine.
	EventState = "agent.state"
	// EventTool: a tool call starting (phase "call") or its result
	// (phase "result").
	EventTool = "chat.tool"
	// EventPermission: the run asks the person for a permission.
	EventPermission = "agent.permission"
	// EventPermissionAnswered: a permission question was closed (by the
	// person, by its timeout, or because its run was cancelled).
	EventPermissionAnswered = "agent.permission.answered"
)

// StateEvent is the payload of agent.state: one move of the run's agent
// state machine, From → To (the lower-case agent.State names: "idle",
// "analyzing", "planning", "acting", "observing", "reporting", "failed",
// "cancelled"), At in Unix ms, Source who caused it (agent.Source*:
// "loop", "model", "tools", "timeout", "cancel"), Reason a short sentence.
type StateEvent struct {
	RunRef
	From   string `json:"from"`
	To     string `json:"to"`
	At     int64  `json:"at"`
	Source string `json:"source"`
	Reason string `json:"reason,omitempty"`
}

// Tool event phases (ToolEvent.Phase).
const (
	ToolPhaseCall   = "call"
	ToolPhaseResult = "result"
)

// ToolEvent is the payload of chat.tool. Phase "call": the call CallID of
// Tool starts, ArgsSummary is its argument JSON cut to
// agent.MaxArgsSummaryChars characters. Phase "result": Status is "ok",
// "error", "denied" or "accepted" and Summary the one-line summary the
// model saw; the whole output is in the stored message's tools.
type ToolEvent struct {
	RunRef
	CallID      string `json:"callId"`
	Tool        string `json:"tool"`
	Phase       string `json:"phase"`
	ArgsSummary string `json:"argsSummary,omitempty"`
	Status      string `json:"status,omitempty"`
	Summary     string `json:"summary,omitempty"`
}

// PermissionRequest is the payload of agent.permission and an entry of
// agent.permissions: run RunRef asks the person whether Tool (call CallID,
// arguments ArgsSummary) may use Level ("L2" run programs, "L3" network;
// Kind "level": granted for that session and level for
// agent.DefaultGrantTTL) or may run this one command (Kind "exec", exec
// approval "ask"). Reason is the English sentence to show, ReasonCode and
// ReasonParams the same for the UI to say in the person's language; At and Expires are Unix
// ms (no answer by Expires counts as "no", SPEC §6).
type PermissionRequest struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	RunRef
	Tool        string `json:"tool"`
	CallID      string `json:"callId"`
	Level       string `json:"level"`
	ArgsSummary string `json:"argsSummary"`
	Reason      string `json:"reason"`
	// ReasonCode and ReasonParams say Reason as a code the UI translates
	// (agent.ReasonCode*; absent when the asker gave only the sentence).
	ReasonCode   string            `json:"reasonCode,omitempty"`
	ReasonParams map[string]string `json:"reasonParams,omitempty"`
	At           int64             `json:"at"`
	Expires      int64             `json:"expires"`
}

// Who closed a permission question (PermissionAnsweredEvent.By).
const (
	AnsweredByPerson    = "person"
	AnsweredByTimeout   = "timeout"
	AnsweredByCancelled = "cancelled"
)

// PermissionAnsweredEvent is the payload of agent.permission.answered:
// question ID is closed, Allowed or not, By AnsweredBy*. Every client
// closes its prompt for ID.
type PermissionAnsweredEvent struct {
	ID      string `json:"id"`
	Allowed bool   `json:"allowed"`
	By      string `json:"by"`
}

// PermissionAnswer is agent.permission.answer's payload.
type PermissionAnswer struct {
	ID      string `json:"id"`
	Allowed bool   `json:"allowed"`
}
