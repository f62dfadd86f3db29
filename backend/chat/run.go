package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/convo"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
)

// ToolMemorySearch is the name of the memory search tool offered to models.
const ToolMemorySearch = "memory_search"

// memorySearchTool is the tool definition (SPEC §4.3 memory_search).
var memorySearchTool = model.Tool{
	Name: ToolMemorySearch,
	Description: "Search the person's Markdown memory (notes, preferences, projects, decisions, daily logs) " +
		"with hybrid keyword and semantic search. Returns matching passages with path, line range, score and snippet.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"query":{"type":"string","description":"what to look for: keywords, names, identifiers or a question"},` +
		`"maxResults":{"type":"integer","minimum":1,"maximum":20,"description":"how many passages to return (default 6)"},` +
		`"minScore":{"type":"number","minimum":0,"maximum":1,"description":"lowest relevance score to return (default 0.35)"}` +
		`},"required":["query"]}`),
}

// systemPrompt is the persona of the main agent.
func systemPrompt(now time.Time, tools bool) string {
	var b strings.Builder
	b.WriteString("You are Main, the main agent of Atrium: a local-first desktop app where AI agents chat with a person " +
		"and share their Markdown memory. You are a helpful, honest and concise assistant.\n")
	if tools {
		b.WriteString("You can search the person's memory with the memory_search tool. Use it whenever the question may concern " +
			"their notes, projects, preferences, people or past decisions, or mentions an identifier you do not know. " +
			"When you use memory, cite the sources as path:startLine-endLine. If memory has nothing relevant, say so instead of guessing.\n")
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
		s.forget(rn)
		s.mu.Unlock()
		rn.cancel(nil)
	}()
	p := s.provider()
	s.log.Info("chat run started", "run", rn.RunID, "profile", rn.ProfileID, "session", rn.SessionID,
		"provider", p.Name(), "model", p.Model())
	s.emit(EventThinking, ThinkingEvent{RunRef: rn.RunRef, UserMessage: rn.userMsg})

	st := &runState{s: s, rn: rn}
	var err error
	if rn.onInstance {
		err = st.answerRemote() // on the instance's worker process (remote.go)
	} else {
		err = st.answer(p)
	}
	outcome := st.finish(err)
	s.log.Info("chat run finished", "run", rn.RunID, "session", rn.SessionID, "outcome", outcome,
		"chunks", st.chunks, "tool_calls", st.toolCalls, "duration_ms", s.opts.Now().Sub(start).Milliseconds(),
		"prompt_tokens", st.usage.PromptTokens, "completion_tokens", st.usage.CompletionTokens,
		"error", errText(err))
}

// runState accumulates one run's output (its text is in rn.out).
type runState struct {
	s         *Service
	rn        *run
	chunks    int  // chunks sent
	sep       bool // put a paragraph break before the next text (new model round)
	sources   []history.Source
	toolCalls int
	usage     history.Usage // summed over the run's model calls
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

// answer drives the model (and its tool calls) until it has answered.
func (st *runState) answer(p model.Provider) error {
	ctx := st.rn.ctx
	if off, ok := p.(*Offline); ok {
		_, src, err := off.Answer(ctx, st.rn.userText, st.onDelta)
		st.addSources(src)
		return err
	}
	msgs := append([]model.Message{{Role: model.RoleSystem, Content: systemPrompt(st.s.opts.Now(), true)}},
		st.s.context(ctx, st.rn)...)
	msgs = append(msgs, model.Message{Role: model.RoleUser, Content: st.rn.userText})
	for round := 0; ; round++ {
		req := model.Request{Messages: msgs}
		offer := round < st.s.opts.MaxToolRounds
		if offer {
			req.Tools = []model.Tool{memorySearchTool}
		}
		resp, err := p.Stream(ctx, req, st.onDelta)
		st.addUsage(resp.Usage)
		if err != nil {
			return err
		}
		if len(resp.ToolCalls) == 0 || !offer {
			if strings.TrimSpace(st.rn.out.String()) == "" {
				return errEmptyAnswer
			}
			return nil
		}
		calls := make([]model.ToolCall, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			if c.ID == "" {
				c.ID = fmt.Sprintf("call_%d_%d", round, i)
			}
			calls[i] = c
		}
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: resp.Content, ToolCalls: calls})
		for _, c := range calls {
			out, err := st.callTool(ctx, c)
			if err != nil {
				return err
			}
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: out})
		}
		st.sep = true
	}
}

// memorySearchArgs are memory_search's arguments as the model sends them.
type memorySearchArgs struct {
	Query      string   `json:"query"`
	MaxResults *int     `json:"maxResults"`
	MinScore   *float64 `json:"minScore"`
}

type toolResult struct {
	Results   []toolHit `json:"results"`
	Truncated bool      `json:"truncated,omitempty"`
}

type toolHit struct {
	Path      string  `json:"path"`
	StartLine int     `json:"startLine"`
	EndLine   int     `json:"endLine"`
	Score     float64 `json:"score"`
	Layer     string  `json:"layer,omitempty"`
	Snippet   string  `json:"snippet"`
}

func toolError(format string, args ...any) string {
	return string(marshal(map[string]string{"error": fmt.Sprintf(format, args...)}))
}

// marshal encodes v as compact JSON without HTML escaping (the model reads it).
func marshal(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":"cannot encode the tool result"}`)
	}
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// callTool runs one tool call and returns the text for the model. Bad calls
// (unknown tool, invalid JSON, failed search) become an error object for the
// model to read; only the run's own cancellation is returned as an error.
func (st *runState) callTool(ctx context.Context, c model.ToolCall) (string, error) {
	st.toolCalls++
	log := st.s.log.With("run", st.rn.RunID, "tool", c.Name, "call", c.ID)
	if c.Name != ToolMemorySearch {
		log.Warn("chat tool call rejected", "reason", "unknown tool")
		return toolError("unknown tool %q; the only tool is %s", c.Name, ToolMemorySearch), nil
	}
	var args memorySearchArgs
	raw := strings.TrimSpace(string(c.Arguments))
	if raw == "" {
		raw = "{}"
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&args); err != nil {
		log.Warn("chat tool call rejected", "reason", "invalid arguments", "error", err.Error())
		return toolError(`invalid arguments for %s (%v): send a JSON object like {"query": "text", "maxResults": 6}`, ToolMemorySearch, err), nil
	}
	args.Query = strings.TrimSpace(args.Query)
	if args.Query == "" {
		log.Warn("chat tool call rejected", "reason", "empty query")
		return toolError(`%s needs a non-empty "query" string`, ToolMemorySearch), nil
	}
	opts := memory.SearchOptions{Query: args.Query}
	if args.MaxResults != nil {
		opts.MaxResults = min(max(*args.MaxResults, 1), 20)
	}
	if args.MinScore != nil {
		opts.MinScore = math.Min(math.Max(*args.MinScore, 0), 1)
		if opts.MinScore == 0 {
			opts.MinScore = -1 // memory: negative means "no floor"; zero would mean the default
		}
	}
	tctx, cancel := context.WithTimeout(ctx, ToolTimeout)
	defer cancel()
	res, err := st.s.opts.Memory.Search(tctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		log.Warn("chat tool call failed", "error", err.Error())
		return toolError("memory search failed: %v", err), nil
	}
	out, src := encodeHits(res.Results, MaxToolResultChars)
	st.addSources(src)
	log.Info("chat tool call", "query_chars", utf8.RuneCountInString(args.Query), "results", len(res.Results))
	return out, nil
}

// encodeHits renders search results as JSON of at most limit bytes, cutting
// snippets and then dropping results from the end as needed. It returns the
// sources of the results that made it in.
func encodeHits(results []memory.SearchResult, limit int) (string, []history.Source) {
	tr := toolResult{Results: []toolHit{}}
	var src []history.Source
	for _, r := range results {
		h := toolHit{Path: r.Path, StartLine: r.StartLine, EndLine: r.EndLine,
			Score: math.Round(r.Score*1000) / 1000, Layer: r.Layer, Snippet: r.Snippet}
		tr.Results = append(tr.Results, h)
		if b := marshal(tr); len(b) > limit {
			// Try a shorter snippet before giving up on this result.
			tr.Truncated = true
			for try := 0; try < 4 && h.Snippet != ""; try++ { // escaping may need a second cut
				over := len(marshal(tr)) - limit
				if over <= 0 {
					break
				}
				h.Snippet = cutRunes(h.Snippet, len(h.Snippet)-over-8)
				tr.Results[len(tr.Results)-1] = h
			}
			if h.Snippet == "" || len(marshal(tr)) > limit {
				tr.Results = tr.Results[:len(tr.Results)-1]
				break
			}
		}
		src = append(src, history.Source{Path: r.Path, StartLine: r.StartLine, EndLine: r.EndLine})
	}
	return string(marshal(tr)), src
}

// cutRunes cuts s to at most n bytes without splitting a character, adding
// "…" when it cut.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// context builds the model context's history (SPEC §6 recency-first
// merge) through convo.BuildContext: the server history H_s is the
// conversation's recent messages when the send named a conversation, else
// the session's; the client history H_r is the send's history, less
// messages whose id history does not hold (deleted since the client saw
// them); the merge H_s ⊕ tail(H_r, |H_r| − ω) is then fitted newest first
// to at most convo.DefaultUserTurns user turns, HistoryMessages messages
// and HistoryChars characters, each cut at HistoryMessageChars; failed
// answers without text are skipped.
func (s *Service) context(ctx context.Context, rn *run) []model.Message {
	var (
		past []history.Message
		err  error
	)
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
	for _, m := range past {
		if m.ID == rn.userMsgID {
			continue
		}
		known[m.ID] = true
		server = append(server, convo.Message{ID: m.ID, TS: m.TS, Message: model.Message{Role: wireRole(m.Role), Content: m.Content}})
	}
	client := make([]convo.Message, 0, len(rn.client))
	dropped := 0
	for _, m := range rn.client {
		if m.ID == rn.userMsgID {
			continue
		}
		if m.ID != "" && !known[m.ID] {
			if _, err := s.opts.History.Get(ctx, m.ID); err != nil { // deleted (or never stored)
				dropped++
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
	out := make([]model.Message, len(fit))
	for i, m := range fit {
		out[i] = m.Message
	}
	return out
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
	msg := history.Message{
		ID: rn.MessageID, ProfileID: rn.ProfileID, SessionID: rn.SessionID, ConversationID: rn.conversationID, RunID: rn.RunID,
		Role: history.RoleAssistant, Content: st.rn.out.String(), TS: rn.userMsg.TS + 1, Sources: st.sources,
		EndedAt: s.opts.Now().UnixMilli(),
	}
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
	// next message as soon as it sees chat.final must not get ErrBusy.
	release := func() {
		s.mu.Lock()
		s.forget(rn)
		s.mu.Unlock()
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
		s.emit(EventFinal, FinalEvent{RunRef: rn.RunRef, Message: msg})
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
				ev.Message = &msg
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
		return CodeTimeout, err.Error()
	case errors.Is(err, model.ErrUnavailable), errors.Is(err, model.ErrRejected),
		errors.Is(err, model.ErrBadResponse), errors.Is(err, model.ErrIncomplete),
		errors.Is(err, errEmptyAnswer):
		return CodeUnavailable, err.Error()
	}
	return CodeInternal, err.Error()
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
