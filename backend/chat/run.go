package chat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/convo"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/model"
)

// mainPersona is the persona of the main agent.
const mainPersona = "You are Main, the main agent of Atrium: a local-first desktop app where AI agents chat with a person " +
	"and share their Markdown memory. You are a helpful, honest and concise assistant."

// ToolCanvas is the canvas tool's name (agent/tools.CanvasTool): when it is
// offered, the system prompt says how to use A2UI (canvasPrompt).
const ToolCanvas = "canvas"

// CanvasExample is the A2UI v0.8 example of the system prompt: a form with
// a bound text field and a button whose press comes back with the value.
// Every line is valid against the official schemas (backend/atrium
// TestCanvasPromptExample).
const CanvasExample = `[{"surfaceUpdate":{"surfaceId":"ask","components":[` +
	`{"id":"root","component":{"Column":{"children":{"explicitList":["q","name","go"]}}}},` +
	`{"id":"q","component":{"Text":{"text":{"literalString":"Which city?"},"usageHint":"h3"}}},` +
	`{"id":"name","component":{"TextField":{"label":{"literalString":"City"},"text":{"path":"/city"}}}},` +
	`{"id":"goText","component":{"Text":{"text":{"literalString":"Show weather"}}}},` +
	`{"id":"go","component":{"Button":{"child":"goText","primary":true,"action":{"name":"weather","context":[{"key":"city","value":{"path":"/city"}}]}}}}]}},` +
	`{"dataModelUpdate":{"surfaceId":"ask","contents":[{"key":"city","valueString":"Paris"}]}},` +
	`{"beginRendering":{"surfaceId":"ask","root":"root"}}]`

// canvasPrompt tells a model how to show UI with the canvas tool.
const canvasPrompt = "With the canvas tool you can show UI to the person (A2UI, rendered natively in Atrium's Canvas): push " +
	"messages in order — surfaceUpdate (components, each {id, component:{Type:{…}}}; text as {\"literalString\":…} or bound to " +
	"the data model with {\"path\":\"/x\"}), dataModelUpdate (values), then beginRendering {surfaceId, root}. Components: Text, " +
	"Image, Icon, Row, Column, List, Card, Tabs, Divider, Modal, Button, CheckBox, TextField, DateTimeInput, MultipleChoice, Slider. " +
	"A Button's action {name, context:[{key, value:{path}}]} comes back to you as a message \"Canvas action …\" with the values " +
	"as JSON; answer it. A refused line comes back with its number and reason: fix that line and push again. Example " +
	"(messages): " + CanvasExample + "\n"

// systemPrompt is a run's system prompt: the agent's persona (mainPersona,
// or an instance's profile persona, see instancePersona), what its tools
// are for (tools are the names of the tools it is offered), the language
// rule and the date.
func systemPrompt(persona string, now time.Time, tools []string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(persona))
	b.WriteString("\n\n")
	if slices.Contains(tools, ToolMemorySearch) {
		b.WriteString("You can search the person's memory with the memory_search tool. Use it whenever the question may concern " +
			"their notes, projects, preferences, people or past decisions, or mentions an identifier you do not know. " +
			"When you use memory, cite the sources as path:startLine-endLine. If memory has nothing relevant, say so instead of guessing.\n")
	}
	if others := slices.DeleteFunc(slices.Clone(tools), func(n string) bool { return n == ToolMemorySearch }); len(others) > 0 {
		fmt.Fprintf(&b, "Other tools: %s. Tools that run programs or reach the network ask the person first; "+
			"a call they refuse comes back with status \"denied\": do not retry it, say what you could not do.\n", strings.Join(others, ", "))
	}
	if slices.Contains(tools, ToolCanvas) {
		b.WriteString(canvasPrompt)
	}
	b.WriteString("Answer in the language of the person's message. Use Markdown when it helps.\n")
	fmt.Fprintf(&b, "Current date: %s.", now.Format("Monday 2006-01-02"))
	return b.String()
}

// execute runs rn to its end and always emits exactly one terminal event.
func (s *Service) execute(rn *run) {
	start := s.opts.Now()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		s.forget(rn) // finish's release did it, unless finish panicked
		s.mu.Unlock()
		rn.cancel(nil)
	}()
	p := s.provider()
	s.log.Info("chat run started", "run", rn.RunID, "profile", rn.ProfileID, "session", rn.SessionID,
		"provider", p.Name(), "model", p.Model())
	s.emit(EventThinking, ThinkingEvent{RunRef: rn.RunRef, UserMessage: rn.userMsg})

	st := &runState{s: s, rn: rn, persona: mainPersona, role: ProfileMain}
	if !rn.onInstance {
		st.persona = s.mainPersona(rn)
	}
	if rn.onInstance {
		// The agent loop runs here as for main; its model calls run on the
		// instance's worker process (remote.go).
		p = st.onRemote()
	}
	err := st.answer(p)
	outcome := st.finish(err)
	rn.outcome = outcome
	defer close(rn.done)
	s.log.Info("chat run finished", "run", rn.RunID, "session", rn.SessionID, "outcome", outcome,
		"chunks", st.chunks, "tool_calls", st.toolCalls, "duration_ms", s.opts.Now().Sub(start).Milliseconds(),
		"prompt_tokens", st.usage.PromptTokens, "completion_tokens", st.usage.CompletionTokens,
		"error", errText(err))
}

// runState accumulates one run's output (its text is in rn.out). The
// agent loop calls its callbacks from the run's goroutine, in order.
type runState struct {
	s         *Service
	rn        *run
	persona   string // the system prompt's persona (systemPrompt)
	role      string // the role the run's tools act as (ToolScope.Role)
	chunks    int    // chunks sent
	sep       bool   // put a paragraph break before the next text (new model round)
	round     int    // the current tool round (1-based; 0 before the first)
	sources   []history.Source
	toolCalls int
	usage     history.Usage // summed over the run's model calls
	vision    bool          // the run's model takes images (model.TakesImages)
	mu        sync.Mutex    // guards tools (finish may read it after a cancelled run)
	tools     []history.ToolRecord
}

// addUsage counts one model call's tokens (also those of a call that
// failed part-way: the server may have reported the prompt's).
func (st *runState) addUsage(u model.Usage) {
	st.usage.PromptTokens += u.PromptTokens
	st.usage.CompletionTokens += u.CompletionTokens
}

func (st *runState) onDelta(d model.Delta) {
	if d.Reasoning != "" {
		st.s.emit(EventReasoning, ReasoningEvent{RunRef: st.rn.RunRef, Delta: d.Reasoning})
	}
	if d.Content == "" {
		return
	}
	if st.sep {
		st.sep = false
		if text := st.rn.out.String(); text != "" && !strings.HasSuffix(text, "\n\n") {
			st.chunk("\n\n")
		}
	}
	st.chunk(d.Content)
}

// chunk records delta as the run's next chunk and emits it. Emitting outside
// the stream's lock is safe: a snapshot taken in between already includes
// the chunk, and clients skip chunks whose seq the snapshot covers.
func (st *runState) chunk(delta string) {
	seq := st.rn.out.add(delta)
	st.chunks = seq
	st.s.emit(EventChunk, ChunkEvent{RunRef: st.rn.RunRef, Delta: delta, Seq: seq})
}

func (st *runState) addSources(src []history.Source) {
	for _, n := range src {
		dup := false
		for _, o := range st.sources {
			if o == n {
				dup = true
				break
			}
		}
		if !dup {
			st.sources = append(st.sources, n)
		}
	}
}

// errEmptyAnswer: the model finished without any text.
var errEmptyAnswer = errors.New("the model returned an empty answer")

// offlineRun is the offline provider for one run: its answers' sources
// go to the run's sources.
type offlineRun struct {
	*Offline
	add  func([]history.Source)
	card func(OfflineCard) // Options.OfflineCard with the run's profile and session; nil: none
	rn   RunRef
}

func (o offlineRun) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	q := lastUserText(req)
	resp, src, results, err := o.answer(ctx, q, onDelta)
	o.add(src)
	if err == nil && o.card != nil && len(results) > 0 {
		o.card(OfflineCard{ProfileID: o.rn.ProfileID, SessionID: o.rn.SessionID, Query: oneLine(q, 120), Results: results, Chinese: hasHan(q)})
	}
	return resp, err
}

// answer runs the person's message through the agent loop (SPEC §6: the
// state machine, the tool registry, the session's permissions) until the
// model has answered. Before it, the context economy may run a silent
// memory flush turn and a compaction (economize).
func (st *runState) answer(p model.Provider) error {
	s, rn := st.s, st.rn
	ctx := context.WithValue(rn.ctx, runKey{}, rn)
	reg, err := s.tools(rn, st.role)
	if err != nil {
		return err
	}
	st.vision = model.TakesImages(p)
	if off, ok := p.(*Offline); ok {
		p = offlineRun{Offline: off, add: st.addSources, card: s.opts.OfflineCard, rn: rn.RunRef}
	} else if err := st.economize(ctx, p, reg); err != nil {
		return err
	}
	ag, err := agent.New(agent.Options{
		Provider:     p,
		Tools:        reg,
		Permissions:  s.broker.permissions(rn),
		Prepare:      func(ctx context.Context, _ agent.Task) ([]model.Message, error) { return st.prepare(ctx, reg), nil },
		OnTransition: st.onTransition,
		OnDelta:      st.onDelta,
		OnToolCall:   st.onToolCall,
		OnToolResult: st.onToolResult,
		Outgoing:     s.outgoing,
		MaxRounds:    s.opts.MaxToolRounds,
		ResultChars:  MaxToolResultChars,
		// A long answer of a slow local model may stream for minutes: one
		// model call is bounded by the run's own timeout, not less.
		Timeouts: agent.Timeouts{Planning: s.opts.RunTimeout},
		Logger:   s.log.With("run", rn.RunID, "session", rn.SessionID),
		Now:      s.opts.Now,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	rep, err := ag.Run(ctx, agent.Task{Input: rn.userText})
	st.addUsage(rep.Usage)
	if err != nil {
		return err
	}
	if strings.TrimSpace(rn.out.String()) == "" {
		return errEmptyAnswer
	}
	return nil
}

// tools returns the registry of rn's run: Options.Tools' for its profile
// and session, else the built-in one.
func (s *Service) tools(rn *run, role string) (*agent.Registry, error) {
	if s.opts.Tools == nil {
		return s.builtin, nil
	}
	reg, err := s.opts.Tools(ToolScope{ProfileID: rn.ProfileID, Role: role, SessionID: rn.SessionID, Permissions: s.broker.permissions(rn)})
	if err != nil {
		return nil, fmt.Errorf("tools of profile %s: %w", rn.ProfileID, err)
	}
	return reg, nil
}

// prepare is the Analyzing step: the system prompt, the session's
// compaction summary (if any), the history context, the message.
func (st *runState) prepare(ctx context.Context, reg *agent.Registry) []model.Message {
	msgs := []model.Message{{Role: model.RoleSystem, Content: systemPrompt(st.persona, st.s.opts.Now(), toolNames(reg))}}
	past, sum := st.s.context(ctx, st.rn, st.vision)
	if sum.Text != "" {
		msgs = append(msgs, summaryMessage(sum.Text))
	}
	msgs = append(msgs, past...)
	return append(msgs, model.Message{Role: model.RoleUser, Content: st.rn.userText})
}

func toolNames(reg *agent.Registry) []string {
	var out []string
	for _, sp := range reg.Specs() {
		out = append(out, sp.Name)
	}
	return out
}

// onTransition emits agent.state; a new Planning round after tool results
// puts a paragraph break before its text.
func (st *runState) onTransition(tr agent.Transition) {
	switch {
	case tr.To == agent.StateActing:
		st.round++
	case tr.From == agent.StateObserving && tr.To == agent.StatePlanning:
		st.sep = true
	}
	st.s.emit(EventState, StateEvent{RunRef: st.rn.RunRef, From: string(tr.From), To: string(tr.To), At: tr.At.UnixMilli(),
		Source: tr.Source, Reason: tr.Reason})
}

// onToolCall records a call and emits chat.tool {phase: "call"}.
func (st *runState) onToolCall(c agent.Call) {
	st.toolCalls++
	st.mu.Lock()
	st.tools = append(st.tools, history.ToolRecord{CallID: c.ID, Tool: c.Tool, Round: st.round, Args: argsJSON(c.Args)})
	st.mu.Unlock()
	summary, _ := agent.Truncate(strings.TrimSpace(string(c.Args)), agent.MaxArgsSummaryChars)
	st.s.emit(EventTool, ToolEvent{RunRef: st.rn.RunRef, CallID: c.ID, Tool: c.Tool, Phase: ToolPhaseCall, ArgsSummary: summary})
}

// onToolResult records a result (the whole output) with its call, takes
// memory_search's sources and emits chat.tool {phase: "result"}.
func (st *runState) onToolResult(c agent.Call, res agent.Result) {
	st.mu.Lock()
	for i := len(st.tools) - 1; i >= 0; i-- {
		if t := &st.tools[i]; t.CallID == c.ID && t.Status == "" {
			t.Status, t.Summary, t.Error, t.Data = string(res.Status), res.LogSummary, res.Error, res.Data
			for _, img := range res.Images {
				t.Images = append(t.Images, history.ImageRef(img))
			}
			break
		}
	}
	st.mu.Unlock()
	st.addSources(sourcesOf(res))
	st.s.log.Info("chat tool call", "run", st.rn.RunID, "tool", c.Tool, "call", c.ID, "status", res.Status, "summary", res.LogSummary)
	st.s.emit(EventTool, ToolEvent{RunRef: st.rn.RunRef, CallID: c.ID, Tool: c.Tool, Phase: ToolPhaseResult,
		Status: string(res.Status), Summary: res.LogSummary})
}

// context builds the model context's history (SPEC §6 recency-first
// merge) through convo.BuildContext: the server history H_s is the
// conversation's recent messages when the send named a conversation, else
// the session's, less what the session's compaction summary (returned
// too) covers, and with each answer's tool calls and results as tool
// turns (expand; their pictures attached again when vision, the model
// takes images, else named by path); the client history H_r is the send's history, less
// messages whose id history does not hold (deleted since the client saw
// them); the merge H_s ⊕ tail(H_r, |H_r| − ω) is then fitted newest first
// to at most convo.DefaultUserTurns user turns, HistoryMessages messages
// and HistoryChars characters, each cut at HistoryMessageChars; failed
// answers without text are skipped.
func (s *Service) context(ctx context.Context, rn *run, vision bool) ([]model.Message, history.Summary) {
	var (
		past []history.Message
		err  error
	)
	sum, serr := s.opts.History.Summary(ctx, rn.SessionID)
	if serr != nil {
		s.log.Warn("chat summary unavailable", "run", rn.RunID, "session", rn.SessionID, "error", serr.Error())
	}
	n := s.opts.HistoryMessages*2 + 1
	if rn.conversationID != "" {
		var page history.Page
		page, err = s.opts.History.Conversation(ctx, rn.conversationID, "", n)
		past = page.Messages
	} else {
		past, err = s.opts.History.Session(ctx, rn.SessionID, n)
	}
	if err != nil {
		s.log.Warn("chat history unavailable", "run", rn.RunID, "session", rn.SessionID, "error", err.Error())
		past = nil
	}
	server := make([]convo.Message, 0, len(past))
	known := make(map[string]bool, len(past))
	closed := map[string]bool{} // the closed sessions among past's
	s.mu.Lock()
	for _, m := range past {
		if _, gone := s.closedSessions[m.SessionID]; gone {
			closed[m.SessionID] = true
		}
	}
	s.mu.Unlock()
	for _, m := range past {
		if m.ID == rn.userMsgID {
			continue
		}
		if closed[m.SessionID] && m.SessionID != rn.SessionID {
			continue // a closed session (`/new`, a reset) is not this one's context
		}
		known[m.ID] = true
		if m.SessionID == rn.SessionID && m.TS <= sum.ThroughTS {
			continue // the summary stands for it
		}
		server = append(server, expand(m, vision)...)
	}
	client := make([]convo.Message, 0, len(rn.client))
	dropped := 0
	for _, m := range rn.client {
		if m.ID == rn.userMsgID {
			continue
		}
		if m.ID != "" && !known[m.ID] {
			stored, err := s.opts.History.Get(ctx, m.ID)
			if err != nil { // deleted (or never stored)
				dropped++
				continue
			}
			if stored.SessionID != rn.SessionID && s.isClosed(stored.SessionID) {
				dropped++ // of a closed session (`/new`, a reset)
				continue
			}
		}
		client = append(client, convo.Message{ID: m.ID, TS: m.TS, Message: model.Message{Role: wireRole(m.Role), Content: m.Content}})
	}
	if dropped > 0 {
		s.log.Info("chat client history pruned", "run", rn.RunID, "dropped", dropped)
	}
	fit := convo.BuildContext(server, client, convo.Budget{
		MessageChars: HistoryMessageChars, TotalChars: s.opts.HistoryChars, MaxMessages: s.opts.HistoryMessages,
	})
	return plain(fit), sum
}

// wireRole maps a history role to the model's.
func wireRole(role string) string {
	if role == history.RoleAssistant {
		return model.RoleAssistant
	}
	return model.RoleUser
}

// finish persists the assistant message and emits the terminal event for
// the outcome of answer; it returns "final", "cancelled", "interrupted" or
// "error". The message's TS is its user message's TS + 1 (history's
// ordering rule), EndedAt the time now.
func (st *runState) finish(err error) string {
	s, rn := st.s, st.rn
	cause := context.Cause(rn.ctx)
	ended := s.opts.Now()
	msg := history.Message{
		ID: rn.MessageID, ProfileID: rn.ProfileID, SessionID: rn.SessionID, ConversationID: rn.conversationID, RunID: rn.RunID,
		Role: history.RoleAssistant, Content: st.rn.out.String(), TS: rn.userMsg.TS + 1, Sources: st.sources,
		EndedAt: ended.UnixMilli(),
	}
	st.mu.Lock()
	msg.Tools = slices.Clone(st.tools)
	st.mu.Unlock()
	if st.usage != (history.Usage{}) {
		u := st.usage
		msg.Usage = &u
	}
	// The run's context may be done: store with a fresh, bounded one.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := func(m history.Message) bool {
		if err := s.opts.History.Append(sctx, m); err != nil {
			s.log.Error("chat store answer failed", "run", rn.RunID, "message", m.ID, "error", err.Error())
			return false
		}
		return true
	}

	// Free the session before the terminal event: a client that sends its
	// next message as soon as it sees chat.final must not get ErrBusy. Its
	// last activity is the answer's end, recorded here too: a reset rule
	// (daily at 04:00, idle) judges that next send by when the answer
	// ended, not by when this goroutine got round to noting it.
	release := func() {
		s.mu.Lock()
		s.forget(rn)
		if _, open := s.sessions[rn.SessionID]; open {
			s.touch(rn.ProfileID, rn.SessionID, ended)
		}
		s.mu.Unlock()
	}

	if rn.Heartbeat {
		return st.finishHeartbeat(err, msg, store, release)
	}
	switch {
	case err == nil:
		ok := store(msg)
		release()
		if !ok {
			s.emit(EventError, ErrorEvent{RunRef: rn.RunRef, Error: RunError{Code: CodeInternal,
				Message: "the answer could not be saved to history"}})
			return "error"
		}
		s.emit(EventFinal, FinalEvent{RunRef: rn.RunRef, Message: ForClient(msg)})
		return "final"
	case rn.ctx.Err() != nil && (cause == errCancelled || cause == errClosing):
		ev := CancelledEvent{RunRef: rn.RunRef, Reason: ReasonCancelled}
		if cause == errClosing {
			// Stored even without text: the server is going away and its
			// clients may miss this event, so history must tell them.
			ev.Reason = ReasonInterrupted
		}
		if msg.Content != "" || ev.Reason == ReasonInterrupted {
			msg.Error = ev.Reason
			if store(msg) {
				cm := ForClient(msg)
				ev.Message = &cm
			}
		}
		release()
		s.emit(EventCancelled, ev)
		return ev.Reason
	}
	code, text := classify(err, cause, s.opts.RunTimeout)
	msg.Error = text
	store(msg)
	release()
	s.emit(EventError, ErrorEvent{RunRef: rn.RunRef, Error: RunError{Code: code, Message: text, Retryable: runRetryable(err)}})
	return "error"
}

// classify maps a run failure to a gateway error code and a message for the person.
func classify(err, cause error, runTimeout time.Duration) (string, string) {
	switch {
	case cause == errRunTimeout:
		return CodeTimeout, fmt.Sprintf("the answer took longer than %s and was stopped", runTimeout)
	case errors.Is(err, model.ErrTimeout):
		return CodeTimeout, modelText(err)
	case errors.Is(err, agent.ErrStepTimeout):
		return CodeTimeout, err.Error()
	case errors.Is(err, model.ErrUnavailable), errors.Is(err, model.ErrRejected),
		errors.Is(err, model.ErrBadResponse), errors.Is(err, model.ErrIncomplete):
		return CodeUnavailable, modelText(err)
	case errors.Is(err, errEmptyAnswer), errors.Is(err, agent.ErrNoAnswer):
		return CodeUnavailable, errEmptyAnswer.Error()
	}
	return CodeInternal, err.Error()
}

// modelText is the text of the model's own error inside err (the agent
// loop adds its step as a prefix, which the person does not need).
func modelText(err error) string {
	var me *model.Error
	if errors.As(err, &me) {
		return me.Error()
	}
	return err.Error()
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
