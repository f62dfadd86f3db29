package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/convo"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/model"
)

// Context economy (SPEC §6) in live runs, through package convo:
//
//   - Before a run answers, its session's transcript since the last
//     compaction summary (every stored message with its tool turns) is
//     counted afresh together with the system prompt, the tool specs and
//     the new message (convo.Economy.Assess, Options.ContextWindow minus
//     convo.DefaultReserveTokens).
//   - When the memory flush is due (convo.DefaultFlushSoftTokens before
//     the threshold, once per compaction), a silent agent turn asks the
//     model to store durable facts with memory_write / memory_note
//     (convo.FlushPrompt); nothing of it is streamed to the person.
//   - When compaction is due, the older turns are summarised by one model
//     call (compactPrompt) and the summary is stored with the session
//     (history.Summary); recent turns stay whole. Later runs put the
//     summary in the prompt in place of the turns it covers.
//   - Every model call of a run sends old tool results pruned
//     (convo.Pruner); the transcript and history keep them whole.

// summaryPrefix opens the system message that carries a session's summary.
const summaryPrefix = "Summary of the earlier part of this conversation (older turns were compacted):\n"

func summaryMessage(text string) model.Message {
	return model.Message{Role: model.RoleSystem, Content: summaryPrefix + text}
}

// compactPrompt instructs the summary call.
const compactPrompt = "You compact a conversation between a person and an AI agent. Write a concise summary of the turns below " +
	"that keeps every fact, decision, preference, open question, identifier and tool outcome needed to continue the conversation. " +
	"If a previous summary is given, the new summary must cover it too. Write in the language of the conversation. " +
	"Answer with the summary only."

// expand turns a stored message into the messages a model saw: for an
// answer with tool calls, per round an assistant message with the calls
// and a tool message per result (the model's view, agent.ToolMessage: the
// call's pictures attached again when vision, else named by path and
// metadata), then the answer text. A call without a result (the run ended mid-call) stays
// a call without a result here; convo.Repair removes it before anything
// is sent or compacted. Every message carries the stored message's ID and
// TS, so the merge with the client's history never duplicates it.
func expand(m history.Message, vision bool) []convo.Message {
	msg := func(mm model.Message) convo.Message { return convo.Message{ID: m.ID, TS: m.TS, Message: mm} }
	if m.Role != history.RoleAssistant || len(m.Tools) == 0 {
		return []convo.Message{msg(model.Message{Role: wireRole(m.Role), Content: m.Content})}
	}
	var out []convo.Message
	rounds := map[int][]history.ToolRecord{}
	var order []int
	for _, t := range m.Tools {
		if _, ok := rounds[t.Round]; !ok {
			order = append(order, t.Round)
		}
		rounds[t.Round] = append(rounds[t.Round], t)
	}
	sort.Ints(order)
	for _, r := range order {
		calls := rounds[r]
		asst := model.Message{Role: model.RoleAssistant}
		for _, t := range calls {
			asst.ToolCalls = append(asst.ToolCalls, model.ToolCall{ID: t.CallID, Name: t.Tool, Arguments: t.Args})
		}
		out = append(out, msg(asst))
		for _, t := range calls {
			if t.Status == "" {
				continue
			}
			res := agent.Result{CallID: t.CallID, Tool: t.Tool, Status: agent.Status(t.Status), Data: t.Data, LogSummary: t.Summary, Error: t.Error}
			for _, img := range t.Images {
				res.Images = append(res.Images, agent.Image(img))
			}
			out = append(out, msg(agent.ToolMessage(t.CallID, t.Tool, res, MaxToolResultChars, vision)))
		}
	}
	if strings.TrimSpace(m.Content) != "" {
		out = append(out, msg(model.Message{Role: model.RoleAssistant, Content: m.Content}))
	}
	return out
}

// plain returns the model messages of msgs.
func plain(msgs []convo.Message) []model.Message {
	out := make([]model.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m.Message
	}
	return out
}

// outgoing is the agent's Outgoing hook: the run's messages with old tool
// results pruned (convo.Pruner), for what is sent only.
func (s *Service) outgoing(msgs []model.Message) []model.Message {
	in := make([]convo.Message, len(msgs))
	for i, m := range msgs {
		in[i] = convo.Message{Message: m}
	}
	out, st := s.pruner.Prune(in)
	if st.Trimmed+st.Cleared == 0 {
		return msgs
	}
	s.log.Debug("chat tool results pruned", "trimmed", st.Trimmed, "cleared", st.Cleared)
	return plain(out)
}

// transcript is the session's compaction view: the summary state and the
// stored messages after it, expanded into tool turns, oldest first.
func (s *Service) transcript(ctx context.Context, rn *run) (history.Summary, []convo.Message, error) {
	sum, err := s.opts.History.Summary(ctx, rn.SessionID)
	if err != nil {
		return sum, nil, err
	}
	past, err := s.opts.History.Session(ctx, rn.SessionID, history.MaxLimit)
	if err != nil {
		return sum, nil, err
	}
	var msgs []convo.Message
	for _, m := range past {
		if m.ID == rn.userMsgID || m.TS <= sum.ThroughTS {
			continue
		}
		msgs = append(msgs, expand(m, false)...)
	}
	return sum, msgs, nil
}

// economize runs the memory flush turn and the compaction when they are
// due (see the comment at the top of this file). Only the run's own end
// (its context) is an error; a failed flush or summary is logged and the
// run goes on with the context as it is.
func (st *runState) economize(ctx context.Context, p model.Provider, reg *agent.Registry) error {
	s, rn := st.s, st.rn
	log := s.log.With("run", rn.RunID, "session", rn.SessionID)
	sum, msgs, err := s.transcript(ctx, rn)
	if err != nil {
		log.Warn("chat context economy skipped", "error", err.Error())
		return nil
	}
	t := convo.Transcript{Summary: sum.Text, Messages: msgs, Compactions: sum.Compactions, Flushed: sum.Flushed}
	extra := convo.Tokens(convo.Message{Message: model.Message{Role: model.RoleSystem, Content: systemPrompt(st.persona, s.opts.Now(), toolNames(reg))}}) +
		convo.Tokens(convo.Message{Message: model.Message{Role: model.RoleUser, Content: rn.userText}}) + toolTokens(reg)
	as := s.economy().Assess(t, extra)
	if !as.Flush && !as.Compact {
		return nil
	}
	log.Info("chat context economy", "tokens", as.Tokens, "threshold", as.Threshold, "flush_at", as.FlushAt,
		"flush", as.Flush, "compact", as.Compact, "messages", len(msgs))
	if as.Flush {
		if err := st.flush(ctx, p, reg); err != nil {
			if ctx.Err() != nil {
				return err
			}
			log.Warn("chat memory flush failed", "error", err.Error())
		}
		t.Flushed = true
		sum.Flushed = true
		sum.UpdatedAt = s.opts.Now().UnixMilli()
		if err := s.opts.History.SetSummary(ctx, sum); err != nil {
			log.Warn("chat summary not stored", "error", err.Error())
		}
	}
	if !as.Compact {
		return nil
	}
	out, compacted, err := s.economy().Compact(ctx, t, func(ctx context.Context, previous string, older []convo.Message) (string, error) {
		return st.summarize(ctx, p, previous, older)
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		log.Warn("chat compaction failed", "error", err.Error())
		return nil
	case !compacted: // nothing old enough to fold in: the summary stays
		log.Info("chat compaction had nothing to summarise", "compactions", t.Compactions)
		return nil
	}
	through := sum.ThroughTS
	if len(out.Messages) > 0 {
		through = max(through, out.Messages[0].TS-1)
	} else if len(msgs) > 0 {
		through = max(through, msgs[len(msgs)-1].TS)
	}
	next := history.Summary{SessionID: rn.SessionID, Text: out.Summary, Compactions: out.Compactions, ThroughTS: through,
		UpdatedAt: s.opts.Now().UnixMilli()}
	if err := s.opts.History.SetSummary(ctx, next); err != nil {
		log.Warn("chat summary not stored", "error", err.Error())
		return nil
	}
	log.Info("chat session compacted", "compactions", next.Compactions, "through_ts", through, "kept", len(out.Messages),
		"summary_chars", len([]rune(out.Summary)))
	return nil
}

// toolTokens estimates what the tool specs cost in a prompt.
func toolTokens(reg *agent.Registry) int {
	b, _ := json.Marshal(reg.ModelTools(nil))
	return convo.Tokens(convo.Message{Message: model.Message{Content: string(b)}})
}

// flushTools are the tools the memory flush turn may use.
var flushTools = []string{"memory_write", "memory_note"}

// flush is the silent memory-flush turn (SPEC §6): the agent, offered
// only memory_write and memory_note, is asked to store durable facts
// before the session is compacted. Its text and tool calls are not
// streamed (no chat.chunk, chat.tool or agent.state); they are logged.
func (st *runState) flush(ctx context.Context, p model.Provider, reg *agent.Registry) error {
	s, rn := st.s, st.rn
	var allowed []string
	for _, n := range flushTools {
		if _, ok := reg.Spec(n); ok {
			allowed = append(allowed, n)
		}
	}
	if len(allowed) == 0 {
		return fmt.Errorf("memory flush: the profile has none of %s", strings.Join(flushTools, ", "))
	}
	past, sum := s.context(ctx, rn, false) // the flush writes facts: pictures by path suffice
	hist := slices.Clone(past)
	if sum.Text != "" {
		hist = append([]model.Message{summaryMessage(sum.Text)}, hist...)
	}
	ag, err := agent.New(agent.Options{
		Provider: p, Tools: reg, Permissions: s.broker.permissions(rn), AllowedTools: allowed,
		Outgoing: s.outgoing, MaxRounds: s.opts.MaxToolRounds, ResultChars: MaxToolResultChars,
		OnToolResult: func(c agent.Call, res agent.Result) {
			s.log.Info("chat memory flush tool call", "run", rn.RunID, "tool", c.Tool, "status", res.Status, "summary", res.LogSummary)
		},
		Logger: s.log.With("run", rn.RunID, "session", rn.SessionID, "turn", "memory-flush"), Now: s.opts.Now,
	})
	if err != nil {
		return fmt.Errorf("memory flush: %w", err)
	}
	rep, err := ag.Run(ctx, agent.Task{System: systemPrompt(st.persona, s.opts.Now(), allowed), History: hist,
		Input: convo.FlushPrompt(rn.ProfileID, s.opts.Now())})
	st.addUsage(rep.Usage)
	if err != nil {
		return fmt.Errorf("memory flush: %w", err)
	}
	s.log.Info("chat memory flush done", "run", rn.RunID, "tool_calls", len(rep.Results), "no_reply", convo.IsNoReply(rep.Text))
	return nil
}

// summarize is the compaction's Summarizer: one model call without tools.
func (st *runState) summarize(ctx context.Context, p model.Provider, previous string, older []convo.Message) (string, error) {
	var b strings.Builder
	if previous != "" {
		b.WriteString("Previous summary:\n" + previous + "\n\n")
	}
	b.WriteString("Turns to fold in:\n")
	for _, m := range older {
		switch {
		case m.Role == model.RoleTool:
			fmt.Fprintf(&b, "[tool %s result] %s\n", m.Name, cutRunes(m.Content, HistoryMessageChars))
		case len(m.ToolCalls) > 0:
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "[%s called %s %s]\n", m.Role, c.Name, cutRunes(string(c.Arguments), 300))
			}
			if strings.TrimSpace(m.Content) != "" {
				fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
			}
		default:
			fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
		}
	}
	resp, err := p.Stream(ctx, model.Request{Messages: []model.Message{
		{Role: model.RoleSystem, Content: compactPrompt},
		{Role: model.RoleUser, Content: b.String()},
	}}, func(model.Delta) {})
	st.addUsage(resp.Usage)
	if err != nil {
		return "", err
	}
	return resp.Content, nil
}
