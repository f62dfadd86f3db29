// Package chat runs conversations between the person and Atrium's agents
// (SPEC §3 chat.*, §6 agents). The app's own profile is "main", answered in
// this process; with Options.Remote, a profileId that is a profile
// instance id ("<profile>-<k>") is answered by that instance's worker
// process (remote.go; docs/PROTOCOL.md "Chat on instances").
//
// Send stores the user's message in history and starts a run in the
// background; the run builds the model context (a system prompt, the
// recency-first merge of the server's history — the conversation's, else
// the session's — with the client's recent history, SPEC §6; the message),
// streams the model's answer as
// events through Options.Emit (chat.thinking, which carries the stored user
// message so every client can show the question, chat.reasoning,
// chat.chunk, then exactly one of chat.final, chat.cancelled or chat.error;
// payloads as in docs/PROTOCOL.md), and stores the assistant message when
// the run ends. The run is driven by the agent loop (package agent, SPEC
// §6): every state move is an agent.state event, every tool call and
// result a chat.tool event, and a call above the session's base level
// asks the person (agent.permission; answered with AnswerPermission, a
// grant holds 10 minutes for that session and level). The tools come from
// Options.Tools (the app's: package agent/tools, acting as the profile's
// role) or the built-in memory_search. Before a run, the context economy
// may run a silent memory-flush turn and compact the session (economy.go). Messages are
// stored in both history domains (profile and conversation, SPEC §6);
// Delete removes one from both and emits message.deleted. Without a model
// the built-in offline provider (Offline) answers from memory search.
//
// Timestamps follow history's ordering rule: user messages get strictly
// increasing ts at least 2 ms apart, and a run's assistant message gets its
// user message's ts + 1, so answers stay next to their questions.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/convo"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
)

// ProfileMain is the id of the one profile of the walking skeleton.
const ProfileMain = "main"

// Profile states reported by Profiles.
const (
	StateIdle    = "idle"
	StateRunning = "running"
)

// Limits and defaults.
const (
	// DefaultRunTimeout bounds one run (all model rounds and tool calls).
	DefaultRunTimeout = 5 * time.Minute
	// DefaultHistoryMessages caps the session history put in the model context.
	DefaultHistoryMessages = 20
	// DefaultHistoryChars caps the characters of that history (newest kept).
	DefaultHistoryChars = 12000
	// HistoryMessageChars cuts each history message in the context (SPEC §6 L).
	HistoryMessageChars = 2000
	// DefaultMaxToolRounds caps the model calls that may use tools in one run;
	// after that the model is asked once more without tools.
	DefaultMaxToolRounds = 4
	// DefaultMaxRuns caps the runs in progress at once (all sessions).
	DefaultMaxRuns = 16
	// MaxMessageChars caps the user message (characters).
	MaxMessageChars = 64000
	// MaxToolResultChars caps the JSON text of one tool result given to the model.
	MaxToolResultChars = 8000
	// MaxSessionIDLen caps a client-chosen session id, conversation id or
	// message id.
	MaxSessionIDLen = 128
	// MaxClientHistory caps the messages of chat.send's history (SPEC §6
	// H_r, the client's recent history).
	MaxClientHistory = 50
	// MaxClientHistoryMessageChars caps one message of that history (characters).
	MaxClientHistoryMessageChars = 16000
	// MaxClientHistoryChars caps the characters of that whole history.
	MaxClientHistoryChars = 64000
	// IdempotencyWindow is how long Send remembers an idempotency key (SPEC §3).
	IdempotencyWindow = 5 * time.Minute
	// ToolTimeout bounds one call of the built-in memory_search.
	ToolTimeout = 30 * time.Second
	// DefaultContextWindow is the model's context window (tokens) assumed
	// when the profile's model settings name none (model.Config.ContextWindow).
	DefaultContextWindow = 128000
)

// Sentinel errors returned by Service methods (wrapped with context).
var (
	// ErrNotFound: unknown profile, unknown history cursor, or no run in
	// progress that a cancel names.
	ErrNotFound = errors.New("not found")
	// ErrInvalidInput: a request field is missing or malformed.
	ErrInvalidInput = errors.New("invalid input")
	// ErrForbidden: the caller may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrBusy: the session already has a run in progress, or too many runs
	// are in progress.
	ErrBusy = errors.New("busy")
	// ErrClosed: the service has been closed.
	ErrClosed = errors.New("chat service closed")
)

// Searcher is the memory search the chat needs (memory_search tool and
// offline answers); the memory engine implements it.
type Searcher interface {
	Search(ctx context.Context, o memory.SearchOptions) (memory.SearchResponse, error)
}

// Options configure a Service. History, Memory and Emit are required.
type Options struct {
	// History stores user and assistant messages. Required.
	History *history.Store
	// Provider is the model. Nil means the built-in offline provider.
	Provider model.Provider
	// Memory serves memory_search. Required.
	Memory Searcher
	// SearcherFor returns the memory search of a role (its ACL applied):
	// the offline answers of an instance without a model search as the
	// instance's profile. Nil: such instances fail with the worker's
	// "no model configured".
	SearcherFor func(role string) Searcher
	// Emit delivers run events (Event* names, *Event payload structs); the
	// gateway broadcasts them. It is called from run goroutines, possibly
	// from several at once; calls of one run are sequential and in order. It
	// should not block for long. Required.
	Emit func(event string, payload any)
	// RunTimeout bounds one run. Default DefaultRunTimeout.
	RunTimeout time.Duration
	// HistoryMessages caps the history messages in the model context.
	// Default DefaultHistoryMessages.
	HistoryMessages int
	// HistoryChars caps the characters of that history. Default DefaultHistoryChars.
	HistoryChars int
	// MaxToolRounds caps model calls offered tools per run. Default DefaultMaxToolRounds.
	MaxToolRounds int
	// Tools builds the tool registry of a run (SPEC §6: tools act as the
	// profile's role, so the ACL applies); it is called once per run with
	// the run's profile and session. The app passes package agent/tools'
	// memory, file, exec and web_fetch tools here. Nil: the built-in
	// registry with only memory_search over Memory.
	Tools func(ToolScope) (*agent.Registry, error)
	// ContextWindow is the model's context window in tokens, for the
	// context economy (compaction at ContextWindow − 20000, the memory
	// flush 4000 before; see economy.go). Default DefaultContextWindow.
	ContextWindow int
	// AskTimeout bounds a permission question to the person; no answer in
	// time is a denial. Default agent.DefaultAskTimeout (2 min).
	AskTimeout time.Duration
	// GrantTTL is how long a level the person granted holds for its
	// session. Default agent.DefaultGrantTTL (10 min).
	GrantTTL time.Duration
	// MaxRuns caps runs in progress at once. Default DefaultMaxRuns.
	MaxRuns int
	// Remote runs the runs of profile instances (remote.go): a send whose
	// profileId is an instance id goes to that instance's worker process.
	// Default nil: only "main", answered in this process.
	Remote RemoteRunner
	// MainContext returns the main agent's standing context, appended to
	// its persona in the system prompt of each of its runs (main_context.go):
	// in an OpenClaw workspace its SOUL.md, IDENTITY.md, USER.md,
	// AGENTS.md, TOOLS.md and HEARTBEAT.md (memory.Manager.MainContext).
	// Nil or "": the built-in persona alone.
	MainContext func(ctx context.Context) (string, error)
	// OfflineCard, when set, gets what each offline answer (no model
	// configured) found, after the answer was made; the wiring shows it as
	// a small A2UI card on the Canvas (issue 23). It must not block.
	OfflineCard func(OfflineCard)
	// SaveNote writes the dated note of a closed session (lifecycle.go,
	// SPEC §6: `/new`, `/reset`, the daily and idle resets) into role's
	// memory; note.Path is memory/roles/<role>/YYYY-MM-DD-<slug>.md, a
	// daily log name, so write it with mode append. Nil: sessions close
	// without a note.
	SaveNote func(ctx context.Context, role string, note convo.Note) error
	// ResetPolicy closes sessions on its own (daily, idle; see
	// RunLifecycle and Service.SetResetPolicy). Nil: only `/new` and
	// `/reset` close sessions.
	ResetPolicy *convo.ResetPolicy
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Profile describes an agent profile (profiles.list in docs/PROTOCOL.md).
type Profile struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Model       string `json:"model"`
	Provider    string `json:"provider"`
	State       string `json:"state"` // StateIdle | StateRunning
}

// SendRequest is chat.send's params. SessionID empty starts a new session.
// ConversationID, when set, names the client's conversation (SPEC §6: the
// conversation domain of history); the question and its answer are stored
// in it, and the model context's server history is the conversation's.
// History is the client's recent messages before Message, oldest first
// (SPEC §6 H_r), merged recency-first with the server's (see
// Service.context). IdempotencyKey, when set, makes a repeat within
// IdempotencyWindow return the first result without sending again.
type SendRequest struct {
	ProfileID      string          `json:"profileId"`
	SessionID      string          `json:"sessionId,omitempty"`
	ConversationID string          `json:"conversationId,omitempty"`
	Message        string          `json:"message"`
	History        []ClientMessage `json:"history,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
	// StartInstance lets a send to an instance that is not running
	// (after a restart of the app, or a stop) start it under its id
	// first; without it such a send is ErrUnavailable. Set by the caller
	// for senders who may start processes (the gateway: operator
	// connections acting as themselves), never read from the wire.
	StartInstance bool `json:"-"`
	// Meta is stored with the user message (history.Message.Meta, a JSON
	// object): Talk's {"talk": {utteranceId, durationMs, mediaId?}}. Set
	// by the caller (the wiring's Talk), never read from the wire.
	Meta json.RawMessage `json:"-"`
	// heartbeat marks a heartbeat turn (Service.Heartbeat, heartbeat.go).
	heartbeat bool
}

// ClientMessage is one message of chat.send's history: Role "user" or
// "assistant", Content its text (at most MaxClientHistoryMessageChars
// characters), ID the server's message id when the client has it (the
// merge matches by it; a message with an ID that history no longer has,
// because it was deleted, is left out of the context), TS Unix ms
// (informational).
type ClientMessage struct {
	ID      string `json:"id,omitempty"`
	Role    string `json:"role"`
	Content string `json:"content"`
	TS      int64  `json:"ts,omitempty"`
}

// SendResult is chat.send's payload. MessageID is the id the assistant
// message will have (every event of the run carries it); UserMessageID is the
// id of the stored user message.
type SendResult struct {
	RunID         string `json:"runId"`
	MessageID     string `json:"messageId"`
	SessionID     string `json:"sessionId"`
	UserMessageID string `json:"userMessageId"`
	// Reset is set, and RunID, MessageID and UserMessageID are empty, when
	// the message was `/new` or `/reset` (IsResetCommand): the session was
	// closed and nothing was sent to a model (lifecycle.go).
	Reset *ResetResult `json:"reset,omitempty"`
}

// CancelRequest is chat.cancel's params. RunID empty cancels the session's
// run in progress, if any.
type CancelRequest struct {
	ProfileID string `json:"profileId"`
	SessionID string `json:"sessionId"`
	RunID     string `json:"runId,omitempty"`
}

// Service runs chats. It is safe for concurrent use.
type Service struct {
	opts    Options
	offline *Offline
	log     *slog.Logger
	builtin *agent.Registry // Options.Tools == nil
	broker  *broker
	pruner  *convo.Pruner
	// model is the provider in use and the context economy of its
	// window; SetModel replaces both at once while the service runs.
	model atomic.Pointer[modelState]

	mu        sync.Mutex
	closed    bool
	runs      map[string]*run // by run id
	bySession map[string]*run
	idem      map[string]idemEntry
	wg        sync.WaitGroup
	// lastTS is the ts (Unix ms) of the newest user message this service
	// stored; the next one gets at least lastTS+2 (see nextTS).
	lastTS int64
	// sessions: the last activity of each open session this service saw;
	// closedSessions: a closed session → the one that follows it, with
	// closedOrder to forget the oldest (lifecycle.go).
	sessions       map[string]sessionInfo
	closedSessions map[string]string
	closedOrder    []string
	resetPolicy    atomic.Pointer[convo.ResetPolicy]
}

type idemEntry struct {
	res  SendResult
	seen time.Time
}

// run is one answer in progress.
type run struct {
	RunRef
	userMsg   history.Message // the stored user message (its TS is the run's start)
	userMsgID string
	userText  string
	// conversationID is SendRequest.ConversationID; client the validated
	// SendRequest.History.
	conversationID string
	client         []ClientMessage
	startedAt      time.Time // = userMsg.TS
	ctx            context.Context
	cancel         context.CancelCauseFunc
	// stored is set (under Service.mu) once the user message is in
	// history; only then does the run show in HistoryPage.Active.
	stored bool
	out    stream
	// onInstance: ProfileID is an instance id; the run goes to its worker
	// (Options.Remote, remote.go).
	onInstance bool
	// done is closed when the run has ended and its terminal event is
	// out; outcome ("final", "cancelled", "interrupted", "error") and, for
	// a heartbeat, silent and answer are set before.
	done    chan struct{}
	outcome string
	silent  bool
	answer  string
}

// stream is the answer text a run has sent as chat.chunk events. One lock
// guards the text and the chunk counter, so a snapshot's text is always
// exactly the concatenation of chunks 1..seq.
type stream struct {
	mu   sync.Mutex
	text strings.Builder
	seq  int
}

// add appends delta as the next chunk and returns its seq (1, 2, ...).
func (o *stream) add(delta string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.text.WriteString(delta)
	o.seq++
	return o.seq
}

// snapshot returns the text so far and the seq of its last chunk.
func (o *stream) snapshot() (string, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.text.String(), o.seq
}

// String returns the text so far.
func (o *stream) String() string {
	text, _ := o.snapshot()
	return text
}

// Run-ending causes. A run ended by errClosing is stored and reported as
// interrupted (history.ErrorInterrupted), one ended by errCancelled as
// cancelled.
var (
	errCancelled  = errors.New("cancelled by the user")
	errClosing    = errors.New("chat service closing")
	errRunTimeout = errors.New("run timeout")
)

// New checks opts, fills in defaults and returns a Service.
// Errors: ErrInvalidInput when History, Memory or Emit is missing.
func New(opts Options) (*Service, error) {
	var missing []string
	if opts.History == nil {
		missing = append(missing, "History")
	}
	if opts.Memory == nil {
		missing = append(missing, "Memory")
	}
	if opts.Emit == nil {
		missing = append(missing, "Emit")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("new chat service: %w: missing %s", ErrInvalidInput, strings.Join(missing, ", "))
	}
	if opts.RunTimeout <= 0 {
		opts.RunTimeout = DefaultRunTimeout
	}
	if opts.HistoryMessages <= 0 {
		opts.HistoryMessages = DefaultHistoryMessages
	}
	if opts.HistoryChars <= 0 {
		opts.HistoryChars = DefaultHistoryChars
	}
	if opts.MaxToolRounds <= 0 {
		opts.MaxToolRounds = DefaultMaxToolRounds
	}
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = DefaultMaxRuns
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ContextWindow <= 0 {
		opts.ContextWindow = DefaultContextWindow
	}
	if opts.AskTimeout <= 0 {
		opts.AskTimeout = agent.DefaultAskTimeout
	}
	if opts.GrantTTL <= 0 {
		opts.GrantTTL = agent.DefaultGrantTTL
	}
	s := &Service{
		opts:      opts,
		offline:   NewOffline(OfflineOptions{Memory: opts.Memory}),
		log:       opts.Logger,
		runs:      map[string]*run{},
		bySession: map[string]*run{},
		idem:      map[string]idemEntry{},

		sessions:       map[string]sessionInfo{},
		closedSessions: map[string]string{},
	}
	s.resetPolicy.Store(opts.ResetPolicy)
	// Sessions closed before this start still move on (lifecycle.go).
	closed, err := opts.History.ClosedSessions(context.Background(), maxClosed)
	if err != nil {
		return nil, fmt.Errorf("new chat service: %w", err)
	}
	for _, c := range closed {
		s.rememberClosed(c.SessionID, c.NextSessionID)
	}
	if s.builtin, err = defaultTools(opts.Memory); err != nil {
		return nil, fmt.Errorf("new chat service: %w", err)
	}
	if err := s.SetModel(opts.Provider, opts.ContextWindow); err != nil {
		return nil, fmt.Errorf("new chat service: %w", err)
	}
	if s.pruner, err = convo.NewPruner(convo.PruneOptions{}); err != nil {
		return nil, fmt.Errorf("new chat service: %w", err)
	}
	s.broker = newBroker(s)
	return s, nil
}

// ReplyID is the id of the assistant message that answers run runID. It is
// derived from the run id (a name-based UUID) rather than random, so that a
// restarted server can store the answer of a run its predecessor was killed
// in (RecoverInterrupted) under the id the clients already know.
func ReplyID(runID string) string {
	return uuid.NewSHA1(replyNamespace, []byte(runID)).String()
}

// replyNamespace scopes ReplyID's name-based UUIDs.
var replyNamespace = uuid.MustParse("6f0f3b58-7c1e-4d6a-9a53-0a7c1f5e2b91")

// RecoverInterrupted stores an "interrupted" answer for every question whose
// run never ended with an answer because the process died (kill -9, power
// loss): without it, clients that saw the run start would show a reply that
// history does not have. Call it once at start-up, before serving. It
// returns how many runs it closed.
func (s *Service) RecoverInterrupted(ctx context.Context) (int, error) {
	qs, err := s.opts.History.Unanswered(ctx)
	if err != nil {
		return 0, fmt.Errorf("recover interrupted runs: %w", err)
	}
	now := s.opts.Now().UnixMilli()
	for _, q := range qs {
		a := history.Message{
			ID: ReplyID(q.RunID), ProfileID: q.ProfileID, SessionID: q.SessionID, ConversationID: q.ConversationID, RunID: q.RunID,
			Role: history.RoleAssistant, TS: q.TS + 1, Error: history.ErrorInterrupted, EndedAt: now,
		}
		if err := s.opts.History.Append(ctx, a); err != nil {
			return 0, fmt.Errorf("recover interrupted run %s: %w", q.RunID, err)
		}
	}
	if len(qs) > 0 {
		s.log.Info("chat runs recovered as interrupted", "count", len(qs))
	}
	return len(qs), nil
}

// modelState is the model a Service uses now.
type modelState struct {
	provider model.Provider // nil: the offline provider
	economy  *convo.Economy
}

// SetModel makes p (nil: the offline provider) the model of the runs that
// start from now on, with its context window in tokens (0 or less:
// DefaultContextWindow) for the context economy. Runs already going keep
// the model they started with. It is how a settings change reaches chat
// without a restart.
func (s *Service) SetModel(p model.Provider, contextWindow int) error {
	if contextWindow <= 0 {
		contextWindow = DefaultContextWindow
	}
	econ, err := convo.NewEconomy(convo.EconomyOptions{ContextWindow: contextWindow})
	if err != nil {
		return fmt.Errorf("set model: %w", err)
	}
	s.model.Store(&modelState{provider: p, economy: econ})
	return nil
}

// provider returns the configured provider or the offline one.
func (s *Service) provider() model.Provider {
	if p := s.model.Load().provider; p != nil {
		return p
	}
	return s.offline
}

// economy is the context economy of the model in use.
func (s *Service) economy() *convo.Economy { return s.model.Load().economy }

// Profiles lists the profiles: in v0 only "main", with the model in use and
// whether it is answering right now.
func (s *Service) Profiles() []Profile {
	p := s.provider()
	s.mu.Lock()
	state := StateIdle
	for _, rn := range s.runs {
		if !rn.onInstance { // runs of instances are their instances' (profiles.list instances)
			state = StateRunning
			break
		}
	}
	s.mu.Unlock()
	return []Profile{{
		ID:          ProfileMain,
		Name:        "Main",
		Description: "The main assistant: answers questions and searches your memory.",
		Model:       p.Model(),
		Provider:    p.Name(),
		State:       state,
	}}
}

func checkProfile(id string) error {
	if id == "" {
		return fmt.Errorf("%w: profileId is required", ErrInvalidInput)
	}
	if id != ProfileMain {
		return fmt.Errorf("profile %q: %w", id, ErrNotFound)
	}
	return nil
}

// checkSessionID accepts 1..MaxSessionIDLen characters of [A-Za-z0-9._:-]
// (session ids name folders under memory/sessions/, SPEC §4.1).
func checkSessionID(id string) error { return checkID("sessionId", id) }

// checkID is checkSessionID's rule for any client-chosen id named field.
func checkID(field, id string) error {
	if id == "" || len(id) > MaxSessionIDLen {
		return fmt.Errorf("%w: %s must be 1..%d characters", ErrInvalidInput, field, MaxSessionIDLen)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':'
		if !ok {
			return fmt.Errorf("%w: %s %q may only hold letters, digits and . _ : -", ErrInvalidInput, field, id)
		}
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: %s %q", ErrInvalidInput, field, id)
	}
	return nil
}

// checkClientHistory validates chat.send's history: at most
// MaxClientHistory messages, roles user or assistant, each at most
// MaxClientHistoryMessageChars and all together at most
// MaxClientHistoryChars characters, ids (when given) valid ids.
func checkClientHistory(h []ClientMessage) error {
	if len(h) > MaxClientHistory {
		return fmt.Errorf("%w: history has %d messages (at most %d)", ErrInvalidInput, len(h), MaxClientHistory)
	}
	total := 0
	for i, m := range h {
		if m.Role != history.RoleUser && m.Role != history.RoleAssistant {
			return fmt.Errorf("%w: history[%d].role %q (want %q or %q)", ErrInvalidInput, i, m.Role, history.RoleUser, history.RoleAssistant)
		}
		n := utf8.RuneCountInString(m.Content)
		if n > MaxClientHistoryMessageChars {
			return fmt.Errorf("%w: history[%d] has %d characters (at most %d)", ErrInvalidInput, i, n, MaxClientHistoryMessageChars)
		}
		if total += n; total > MaxClientHistoryChars {
			return fmt.Errorf("%w: history has more than %d characters", ErrInvalidInput, MaxClientHistoryChars)
		}
		if m.ID != "" {
			if err := checkID(fmt.Sprintf("history[%d].id", i), m.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// Send stores the user message and starts the answer in the background. It
// returns at once with the run id, the assistant message id and the session
// id (a new one when r.SessionID is empty). A send to an instance that is
// not running starts it first when r.StartInstance is set. Errors:
// ErrNotFound (unknown profile or instance), ErrUnavailable (an instance
// that is not running, and r.StartInstance not set), ErrBusy from
// starting it (too many instances),
// ErrInvalidInput (empty or too long message, bad session id), ErrBusy
// (the session is already answering, or too many runs), ErrClosed, or a
// wrapped history error (then nothing was started).
func (s *Service) Send(ctx context.Context, r SendRequest) (SendResult, error) {
	res, _, err := s.send(ctx, r)
	return res, err
}

// send is Send, also returning the run it started.
func (s *Service) send(ctx context.Context, r SendRequest) (SendResult, *run, error) {
	if err := s.checkProfile(r.ProfileID); err != nil {
		return SendResult{}, nil, fmt.Errorf("chat send: %w", err)
	}
	onInstance, mustStart, err := s.checkRemoteSend(r.ProfileID, r.StartInstance)
	if err != nil {
		return SendResult{}, nil, fmt.Errorf("chat send: %w", err)
	}
	text := strings.TrimSpace(r.Message)
	if text == "" {
		return SendResult{}, nil, fmt.Errorf("chat send: %w: message is empty", ErrInvalidInput)
	}
	if n := utf8.RuneCountInString(text); n > MaxMessageChars {
		return SendResult{}, nil, fmt.Errorf("chat send: %w: message has %d characters (at most %d)", ErrInvalidInput, n, MaxMessageChars)
	}
	if r.SessionID != "" {
		if err := checkSessionID(r.SessionID); err != nil {
			return SendResult{}, nil, fmt.Errorf("chat send: %w", err)
		}
	}
	if r.ConversationID != "" {
		if err := checkID("conversationId", r.ConversationID); err != nil {
			return SendResult{}, nil, fmt.Errorf("chat send: %w", err)
		}
		// A conversation is one profile's: its history is that profile's
		// context, which may quote what only that profile's role may read.
		owner, ok, err := s.opts.History.ConversationProfile(ctx, r.ConversationID)
		if err != nil {
			return SendResult{}, nil, fmt.Errorf("chat send: %w", err)
		}
		if ok && owner != r.ProfileID {
			return SendResult{}, nil, fmt.Errorf("chat send: %w: conversation %s belongs to profile %s; start a new conversation for %s",
				ErrInvalidInput, r.ConversationID, owner, r.ProfileID)
		}
	}
	if err := checkClientHistory(r.History); err != nil {
		return SendResult{}, nil, fmt.Errorf("chat send: %w", err)
	}
	if IsResetCommand(text) && !r.heartbeat { // never sent to a model (SPEC §6)
		rr, err := s.Reset(ctx, ResetRequest{ProfileID: r.ProfileID, SessionID: r.SessionID, Reason: ResetCommand})
		if err != nil {
			return SendResult{}, nil, fmt.Errorf("chat send: %w", err)
		}
		return SendResult{SessionID: rr.SessionID, Reset: &rr}, nil, nil
	}
	// A heartbeat's own session is never reset: it holds only the answers
	// that reached the person (heartbeat.go).
	if why := s.dueReset(ctx, r.SessionID, s.opts.Now()); why != "" && !r.heartbeat {
		if _, err := s.Reset(ctx, ResetRequest{ProfileID: r.ProfileID, SessionID: r.SessionID, Reason: why}); err != nil &&
			!errors.Is(err, ErrBusy) {
			return SendResult{}, nil, fmt.Errorf("chat send: %w", err)
		}
	}
	if mustStart { // the run waits until it is ready (RemoteRunner.Stream)
		if err := s.opts.Remote.Start(r.ProfileID); err != nil {
			return SendResult{}, nil, fmt.Errorf("chat send: start instance %s: %w", r.ProfileID, err)
		}
		s.log.Info("chat started instance", "instance", r.ProfileID)
	}
	now := s.opts.Now()
	idemKey := ""
	if r.IdempotencyKey != "" {
		idemKey = r.ProfileID + "\x00" + r.IdempotencyKey
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return SendResult{}, nil, fmt.Errorf("chat send: %w", ErrClosed)
	}
	for k, e := range s.idem {
		if now.Sub(e.seen) > IdempotencyWindow {
			delete(s.idem, k)
		}
	}
	if e, ok := s.idem[idemKey]; ok && idemKey != "" {
		s.mu.Unlock()
		return e.res, nil, nil
	}
	if r.SessionID != "" && s.bySession[r.SessionID] != nil {
		s.mu.Unlock()
		return SendResult{}, nil, fmt.Errorf("chat send: %w: session %s is still answering the previous message", ErrBusy, r.SessionID)
	}
	if len(s.runs) >= s.opts.MaxRuns {
		s.mu.Unlock()
		return SendResult{}, nil, fmt.Errorf("chat send: %w: %d answers in progress", ErrBusy, len(s.runs))
	}
	sessionID, moved := s.redirect(r.SessionID)
	if moved {
		// The session was closed: the client's history is the old one's.
		r.History = nil
		if s.bySession[sessionID] != nil {
			s.mu.Unlock()
			return SendResult{}, nil, fmt.Errorf("chat send: %w: session %s is still answering the previous message", ErrBusy, sessionID)
		}
	}
	if sessionID == "" {
		sessionID = uuid.NewString()
	}
	s.touch(r.ProfileID, sessionID, now)
	ts := s.nextTS(now)
	base, cancel := context.WithCancelCause(context.Background())
	rctx, stop := context.WithTimeoutCause(base, s.opts.RunTimeout, errRunTimeout)
	runID := uuid.NewString()
	rn := &run{
		RunRef:         RunRef{RunID: runID, ProfileID: r.ProfileID, SessionID: sessionID, MessageID: ReplyID(runID), Heartbeat: r.heartbeat},
		userMsgID:      uuid.NewString(),
		userText:       text,
		conversationID: r.ConversationID,
		client:         r.History,
		startedAt:      time.UnixMilli(ts),
		onInstance:     onInstance,
		ctx:            rctx,
		cancel:         func(cause error) { cancel(cause); stop() },
		done:           make(chan struct{}),
	}
	rn.userMsg = history.Message{
		ID: rn.userMsgID, ProfileID: rn.ProfileID, SessionID: sessionID, ConversationID: r.ConversationID,
		RunID: rn.RunID, Role: history.RoleUser, Content: text, TS: ts, Meta: r.Meta,
	}
	res := SendResult{RunID: rn.RunID, MessageID: rn.MessageID, SessionID: sessionID, UserMessageID: rn.userMsgID}
	s.runs[rn.RunID] = rn
	s.bySession[sessionID] = rn
	s.wg.Add(1) // under the lock, while not closed: Close waits for this run
	if idemKey != "" {
		s.idem[idemKey] = idemEntry{res: res, seen: now}
	}
	s.mu.Unlock()

	if r.heartbeat {
		// A heartbeat's prompt is not the person's words: it is not
		// stored, and the run is not listed as active (heartbeat.go).
		go s.execute(rn)
		return res, rn, nil
	}
	err = s.opts.History.Append(ctx, rn.userMsg)
	if err != nil {
		s.mu.Lock()
		s.forget(rn)
		delete(s.idem, idemKey)
		s.mu.Unlock()
		rn.cancel(nil)
		s.wg.Done()
		return SendResult{}, nil, fmt.Errorf("chat send: store user message: %w", err)
	}
	s.mu.Lock()
	rn.stored = true
	s.mu.Unlock()

	go s.execute(rn)
	return res, rn, nil
}

// nextTS returns the ts (Unix ms) for a new user message: now, but at least
// 2 ms after the previous one, so that the assistant message of that
// previous run (its ts + 1) fits between them. s.mu must be held.
func (s *Service) nextTS(now time.Time) int64 {
	ts := max(now.UnixMilli(), s.lastTS+2)
	s.lastTS = ts
	return ts
}

// forget removes rn from the run maps; s.mu must be held.
func (s *Service) forget(rn *run) {
	delete(s.runs, rn.RunID)
	if s.bySession[rn.SessionID] == rn {
		delete(s.bySession, rn.SessionID)
	}
}

// Cancel stops a run in progress; its partial text is kept as an assistant
// message with Error "cancelled" and chat.cancelled is emitted. The run is
// the one in progress in r.SessionID (r.RunID empty), or r.RunID; either
// way it must be a run of r.ProfileID in r.SessionID. A request that
// matches no such run (nothing in progress, the run already ended, or the
// run is another profile's or another session's) is ErrNotFound, with the
// same message whichever it was, so a caller learns nothing about other
// profiles' runs, and those runs go on. On success it returns true.
// Errors: ErrNotFound (unknown profile, or no matching run),
// ErrInvalidInput (no sessionId).
func (s *Service) Cancel(r CancelRequest) (bool, error) {
	if err := s.checkProfile(r.ProfileID); err != nil {
		return false, fmt.Errorf("chat cancel: %w", err)
	}
	if r.SessionID == "" {
		return false, fmt.Errorf("chat cancel: %w: sessionId is required", ErrInvalidInput)
	}
	s.mu.Lock()
	rn := s.bySession[r.SessionID]
	if r.RunID != "" {
		rn = s.runs[r.RunID]
	}
	if rn != nil && (rn.ProfileID != r.ProfileID || rn.SessionID != r.SessionID) {
		rn = nil // another profile's or session's run: not one this request names
	}
	s.mu.Unlock()
	if rn == nil {
		what := "no run"
		if r.RunID != "" {
			what = "run " + r.RunID + " is not"
		}
		return false, fmt.Errorf("chat cancel: %w: %s in progress for profile %s in session %s", ErrNotFound, what, r.ProfileID, r.SessionID)
	}
	rn.cancel(errCancelled)
	return true, nil
}

// History returns a page of the profile's timeline, oldest first (see
// history.Store.Profile). On the newest page (before empty) it also lists
// the profile's runs in progress with the text streamed so far (see
// ActiveRun), so a client can re-attach to them. The runs are snapshotted
// before the messages are read: a run that ends in between shows up only
// as its stored message, never twice and never not at all. Errors:
// ErrNotFound for an unknown profile or cursor, or a wrapped history error.
func (s *Service) History(ctx context.Context, profileID, before string, limit int) (HistoryPage, error) {
	if err := s.checkProfile(profileID); err != nil {
		return HistoryPage{}, fmt.Errorf("chat history: %w", err)
	}
	var active []ActiveRun
	if before == "" {
		active = s.Active(profileID)
	}
	page, err := s.opts.History.Profile(ctx, profileID, before, limit)
	if errors.Is(err, history.ErrNotFound) {
		return HistoryPage{}, fmt.Errorf("chat history: cursor %q: %w", before, ErrNotFound)
	}
	if err != nil {
		return HistoryPage{}, fmt.Errorf("chat history: %w", err)
	}
	return withActive(page, active), nil
}

// ConversationHistory is History for the conversation domain (SPEC §6,
// history.conversation): a page of conversationID's messages, oldest
// first, and on the newest page the runs of that conversation in progress.
// Errors: ErrInvalidInput (missing or malformed conversationId),
// ErrNotFound (unknown cursor, or one of another conversation), or a
// wrapped history error.
func (s *Service) ConversationHistory(ctx context.Context, conversationID, before string, limit int) (HistoryPage, error) {
	if err := checkID("conversationId", conversationID); err != nil {
		return HistoryPage{}, fmt.Errorf("chat conversation history: %w", err)
	}
	var active []ActiveRun
	if before == "" {
		s.mu.Lock()
		for _, rn := range s.runs {
			if rn.conversationID == conversationID && rn.stored {
				active = append(active, rn.active())
			}
		}
		s.mu.Unlock()
		sortActive(active)
	}
	page, err := s.opts.History.Conversation(ctx, conversationID, before, limit)
	if errors.Is(err, history.ErrNotFound) {
		return HistoryPage{}, fmt.Errorf("chat conversation history: cursor %q: %w", before, ErrNotFound)
	}
	if err != nil {
		return HistoryPage{}, fmt.Errorf("chat conversation history: %w", err)
	}
	return withActive(page, active), nil
}

// withActive is page with the runs of active whose answer it does not
// hold yet (a run that ended between the snapshot and the read shows up
// only as its stored message).
// What clients receive of stored messages is bounded, so that one frame
// always fits the gateway's send buffer (32 MiB; a larger frame closes the
// connection): a run's tool outputs are stored whole (up to a MiB per
// web_fetch), a model may answer tens of MB, and fifty such messages make
// one history page. The limits below are for what is sent; state.db keeps
// everything whole.
const (
	// MaxClientToolData caps, in bytes, the output of one tool call: a
	// longer one is sent as a JSON string holding its first bytes, with
	// dataBytes and dataTruncated set (history.ToolRecord); the model saw
	// its own cut form.
	MaxClientToolData = 16 << 10
	// MaxClientContent caps, in bytes, a message's text: a longer one is
	// sent as its first bytes (whole UTF-8 characters), with contentBytes
	// and contentTruncated set (history.Message).
	MaxClientContent = 4 << 20
	// MaxClientPageBytes bounds a history page: the oldest messages of a
	// page that would be larger are left for the next page (nextBefore).
	MaxClientPageBytes = 8 << 20
)

// ForClient returns m as clients receive it: text and tool outputs over
// MaxClientContent and MaxClientToolData are cut (see there); m itself is
// not changed.
func ForClient(m history.Message) history.Message {
	if len(m.Content) > MaxClientContent {
		m.ContentBytes, m.ContentTruncated = len(m.Content), true
		m.Content = strings.ToValidUTF8(m.Content[:MaxClientContent], "")
	}
	cut := false
	for _, t := range m.Tools {
		cut = cut || len(t.Data) > MaxClientToolData
	}
	if !cut {
		return m
	}
	tools := slices.Clone(m.Tools)
	for i, t := range tools {
		if len(t.Data) <= MaxClientToolData {
			continue
		}
		head := strings.ToValidUTF8(string(t.Data[:MaxClientToolData]), "")
		b, _ := json.Marshal(head)
		tools[i].DataBytes, tools[i].DataTruncated, tools[i].Data = len(t.Data), true, b
	}
	m.Tools = tools
	return m
}

// clientSize estimates the bytes of m in a frame.
func clientSize(m history.Message) int {
	n := 512 + len(m.Content) + len(m.Error)
	for _, s := range m.Sources {
		n += 64 + len(s.Path)
	}
	for _, t := range m.Tools {
		n += 256 + len(t.Args) + len(t.Data) + len(t.Summary) + len(t.Error)
	}
	return n
}

func withActive(page history.Page, active []ActiveRun) HistoryPage {
	stored := make(map[string]bool, len(page.Messages))
	for _, m := range page.Messages {
		stored[m.ID] = true
	}
	for i, m := range page.Messages {
		page.Messages[i] = ForClient(m)
	}
	// Newest first until the page's budget; the older rest is the next
	// page's (the cursor is the oldest message kept).
	size, keep := 0, 0
	for i := len(page.Messages) - 1; i >= 0; i-- {
		size += clientSize(page.Messages[i])
		if size > MaxClientPageBytes && keep > 0 {
			break
		}
		keep++
	}
	if keep < len(page.Messages) {
		page.Messages = page.Messages[len(page.Messages)-keep:]
		page.NextBefore = page.Messages[0].ID
	}
	out := HistoryPage{Page: page, Active: []ActiveRun{}}
	for _, a := range active {
		if !stored[a.MessageID] { // ended between the snapshot and the read
			out.Active = append(out.Active, a)
		}
	}
	return out
}

// active is rn's ActiveRun snapshot.
func (rn *run) active() ActiveRun {
	text, seq := rn.out.snapshot()
	a := ActiveRun{RunRef: rn.RunRef, Content: text, Seq: seq, StartedAt: rn.startedAt.UnixMilli()}
	if len(text) > MaxClientContent {
		a.Content, a.ContentTruncated = strings.ToValidUTF8(text[len(text)-MaxClientContent:], ""), true
	}
	return a
}

func sortActive(out []ActiveRun) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].StartedAt != out[j].StartedAt {
			return out[i].StartedAt < out[j].StartedAt
		}
		return out[i].RunID < out[j].RunID
	})
}

// Delete removes the stored message messageID from both history domains
// (profile and conversation, SPEC §6) and then emits EventMessageDeleted,
// which the gateway broadcasts to every operator connection. It reports
// whether a message was removed: deleting an id that is not stored (never
// was, or already deleted) returns false and emits nothing, so repeating a
// delete is not an error. A message of a run still in progress (its
// question, or the answer id it will be stored under) cannot be deleted:
// ErrBusy (retryable; cancel the run or wait for its end). Deleting a
// question leaves its answer, and the other way round. Errors also:
// ErrInvalidInput (missing or malformed messageId), or a wrapped history
// error.
func (s *Service) Delete(ctx context.Context, messageID string) (bool, error) {
	if err := checkID("messageId", messageID); err != nil {
		return false, fmt.Errorf("chat delete message: %w", err)
	}
	s.mu.Lock()
	for _, rn := range s.runs {
		if rn.userMsgID == messageID || rn.MessageID == messageID {
			s.mu.Unlock()
			return false, fmt.Errorf("chat delete message %s: %w: it belongs to run %s, still in progress (cancel it or wait for its end)",
				messageID, ErrBusy, rn.RunID)
		}
	}
	s.mu.Unlock()
	// Safe outside the lock: a run never takes an id that is already
	// stored, and a run's answer is stored while the run is still listed.
	m, err := s.opts.History.Get(ctx, messageID)
	if errors.Is(err, history.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("chat delete message: %w", err)
	}
	ok, err := s.opts.History.Delete(ctx, messageID)
	if err != nil {
		return false, fmt.Errorf("chat delete message: %w", err)
	}
	if !ok { // deleted concurrently: that delete emitted the event
		return false, nil
	}
	s.log.Info("chat message deleted", "message", messageID, "profile", m.ProfileID, "role", m.Role)
	s.emit(EventMessageDeleted, MessageDeletedEvent{MessageID: messageID, ProfileID: m.ProfileID})
	return true, nil
}

// Active returns the runs of profileID in progress, oldest first, each with
// the text streamed so far and the seq of its last chunk (taken under the
// lock that numbers the chunks, so Content and Seq always agree).
func (s *Service) Active(profileID string) []ActiveRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ActiveRun{}
	for _, rn := range s.runs {
		if rn.ProfileID != profileID || !rn.stored {
			continue
		}
		out = append(out, rn.active())
	}
	sortActive(out)
	return out
}

// Close refuses new messages, interrupts the runs in progress (each ends
// with chat.cancelled, reason "interrupted", and is stored with Error
// history.ErrorInterrupted and its partial text, even when empty, so every
// client learns from history how it ended) and waits for them to finish. It
// is safe to call more than once.
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	for _, rn := range s.runs {
		rn.cancel(errClosing)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// emit delivers one event, shielding the run from a panicking Emit.
func (s *Service) emit(event string, payload any) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("chat emit panicked", "event", event, "panic", fmt.Sprint(p))
		}
	}()
	s.opts.Emit(event, payload)
}

// Retryable reports whether repeating the request that returned err may
// succeed without changing it: ErrBusy (the session's run, or the runs in
// progress, will end), ErrClosed (the service is stopping; a restarted
// one will take it) and ErrUnavailable (the instance is not ready yet).
func Retryable(err error) bool {
	return errors.Is(err, ErrBusy) || errors.Is(err, ErrClosed) || errors.Is(err, ErrUnavailable)
}

// ErrorCode maps an error returned by a Service method to the gateway's
// error code (SPEC §3): NOT_FOUND, INVALID_REQUEST, FORBIDDEN, CONFLICT
// (ErrBusy, retryable: see Retryable), UNAVAILABLE (ErrClosed,
// ErrUnavailable), else INTERNAL.
func ErrorCode(err error) string {
	switch {
	case errors.Is(err, ErrNotFound):
		return "NOT_FOUND"
	case errors.Is(err, ErrInvalidInput):
		return "INVALID_REQUEST"
	case errors.Is(err, ErrForbidden):
		return "FORBIDDEN"
	case errors.Is(err, ErrBusy):
		return "CONFLICT"
	case errors.Is(err, ErrClosed), errors.Is(err, ErrUnavailable):
		return CodeUnavailable
	}
	return CodeInternal
}
