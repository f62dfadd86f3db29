package convo

import (
	"errors"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
	"github.com/atrium-dev/atrium/backend/model"
)

// ErrInvalid marks invalid options or arguments; errors returned by this
// package that are the caller's fault match it with errors.Is.
var ErrInvalid = errors.New("convo: invalid input")

// Ellipsis ends a message cut by Fit (it counts as one of the L characters).
const Ellipsis = "…"

// MessageOverheadTokens is added per message to its text's token estimate
// (role and framing, as chat-completion APIs count them).
const MessageOverheadTokens = 4

// Message is one message of a conversation: the model.Message sent to a
// model plus the identity history gives it.
//
// ID is the stable message id (history.Message.ID), "" when unknown (for
// example a client-side message, or a tool turn that is not stored). TS is
// when the message was written, Unix milliseconds, 0 when unknown; only
// NewNote reads it. In JSON the model.Message fields appear at the top
// level next to "id" and "ts".
type Message struct {
	ID string `json:"id,omitempty"`
	TS int64  `json:"ts,omitempty"`
	model.Message
}

// same is the equality Overlap uses: by ID when both messages have one,
// otherwise by role, content and ToolCallID.
func same(a, b Message) bool {
	if a.ID != "" && b.ID != "" {
		return a.ID == b.ID
	}
	return a.Role == b.Role && a.ToolCallID == b.ToolCallID && a.Content == b.Content
}

// hasCalls reports whether m is an assistant message that called tools.
func hasCalls(m Message) bool { return m.Role == model.RoleAssistant && len(m.ToolCalls) > 0 }

// Repair returns msgs with every tool call paired with its result (see the
// package doc, "Tool turns are indivisible"):
//   - a tool message is kept only when it directly follows (possibly after
//     other kept tool messages) an assistant message with a call of the same
//     ToolCallID, and only the first result of each call is kept;
//   - a call without such a result is removed from its assistant message;
//     an assistant message left with neither calls nor text (whitespace
//     only) is dropped.
//
// The result is a new slice; msgs and the messages in it are not changed
// (a repaired assistant message gets a new ToolCalls slice).
func Repair(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	for i := 0; i < len(msgs); {
		m := msgs[i]
		if m.Role == model.RoleTool { // not after an assistant call: orphan
			i++
			continue
		}
		if !hasCalls(m) {
			out = append(out, m)
			i++
			continue
		}
		j := i + 1
		for j < len(msgs) && msgs[j].Role == model.RoleTool {
			j++
		}
		calls := map[string]bool{}
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
		}
		answered := map[string]bool{}
		var results []Message
		for _, r := range msgs[i+1 : j] {
			if calls[r.ToolCallID] && !answered[r.ToolCallID] {
				answered[r.ToolCallID] = true
				results = append(results, r)
			}
		}
		if len(answered) < len(m.ToolCalls) {
			var kept []model.ToolCall
			for _, c := range m.ToolCalls {
				if answered[c.ID] {
					kept = append(kept, c)
					answered[c.ID] = false // a duplicated call id keeps one call
				}
			}
			m.ToolCalls = kept
		}
		if len(m.ToolCalls) > 0 || !blank(m.Content) {
			out = append(out, m)
			out = append(out, results...)
		}
		i = j
	}
	return out
}

// blank reports whether s holds only white space.
func blank(s string) bool {
	for _, r := range s {
		switch r {
		case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xA0, 0x3000:
		default:
			return false
		}
	}
	return true
}

// span is one indivisible unit of messages, msgs[start:end].
type span struct{ start, end int }

// units splits msgs into indivisible units: an assistant message with tool
// calls together with the tool messages right after it; every other
// message alone. Meant for repaired input.
func units(msgs []Message) []span {
	var out []span
	for i := 0; i < len(msgs); {
		j := i + 1
		if hasCalls(msgs[i]) {
			for j < len(msgs) && msgs[j].Role == model.RoleTool {
				j++
			}
		}
		out = append(out, span{i, j})
		i = j
	}
	return out
}

// cutRunes returns s cut to at most n characters: s itself when it is not
// longer, else its first n−1 characters followed by Ellipsis (n ≤ 0: "").
// It reads at most n+1 characters of s, so a multi-megabyte s costs
// nothing, and it never splits a UTF-8 sequence.
func cutRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n { // n bytes hold at most n characters
		return s
	}
	count, cut := 0, 0
	for i := range s {
		if count == n-1 {
			cut = i
		}
		if count == n {
			return s[:cut] + Ellipsis
		}
		count++
	}
	return s
}

// runes is the number of characters of s.
func runes(s string) int { return utf8.RuneCountInString(s) }

// callChars is the number of characters of m's tool call names and
// arguments (which are never cut: broken JSON helps nobody).
func callChars(m Message) int {
	n := 0
	for _, c := range m.ToolCalls {
		n += runes(c.Name) + utf8.RuneCount(c.Arguments)
	}
	return n
}

// Tokens estimates the tokens m costs in a prompt: the memory/chunk estimate
// of its content, tool call names, arguments and tool name, plus
// MessageOverheadTokens.
func Tokens(m Message) int {
	n := MessageOverheadTokens + chunk.EstimateTokens(m.Content) + chunk.EstimateTokens(m.Name)
	for _, c := range m.ToolCalls {
		n += chunk.EstimateTokens(c.Name) + chunk.EstimateTokens(string(c.Arguments))
	}
	return n
}

// TokensOf is the sum of Tokens over msgs.
func TokensOf(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += Tokens(m)
	}
	return n
}
