package convo

import "github.com/atrium-dev/atrium/backend/model"

// Recency-first merge defaults (SPEC §6).
const (
	// DefaultUserTurns is U: the most user turns Fit keeps.
	DefaultUserTurns = 10
	// DefaultMessageChars is L: the characters Fit keeps of one message.
	DefaultMessageChars = 2000
	// DefaultTotalChars is B: the characters Fit keeps in all.
	DefaultTotalChars = 12000
)

// Budget bounds the history Fit keeps. A field ≤ 0 takes its default.
type Budget struct {
	// UserTurns is U, the most user messages kept (a user turn is a user
	// message and the replies after it). Default DefaultUserTurns (10).
	UserTurns int
	// MessageChars is L: a longer message content is cut to L−1
	// characters plus Ellipsis. Default DefaultMessageChars (2000).
	MessageChars int
	// TotalChars is B: the kept contents (after the L cut) plus tool call
	// names and arguments add up to at most B characters. Default
	// DefaultTotalChars (12000).
	TotalChars int
	// MaxMessages, when > 0, also caps the number of messages kept.
	// Default 0: no cap beyond U and B.
	MaxMessages int
}

func (b Budget) withDefaults() Budget {
	if b.UserTurns <= 0 {
		b.UserTurns = DefaultUserTurns
	}
	if b.MessageChars <= 0 {
		b.MessageChars = DefaultMessageChars
	}
	if b.TotalChars <= 0 {
		b.TotalChars = DefaultTotalChars
	}
	return b
}

// Overlap returns ω: the largest k such that the last k messages of server
// equal the first k of client (0 when none do, or a side is empty).
// Equality is by ID when both messages have one, else by role, content and
// ToolCallID. It makes O(min(|server|,|client|)²) comparisons.
func Overlap(server, client []Message) int {
	for k := min(len(server), len(client)); k > 0; k-- {
		tail := server[len(server)-k:]
		match := true
		for i := range k {
			if !same(tail[i], client[i]) {
				match = false
				break
			}
		}
		if match {
			return k
		}
	}
	return 0
}

// Merge returns server ⊕ tail(client, |client| − ω) with ω = Overlap(server,
// client) (SPEC §6), with two refinements for a client that is behind the
// server, where the plain formula would re-append old messages after newer
// ones:
//   - when the whole of client occurs as a contiguous run inside server,
//     nothing is appended (the client has nothing the server lacks);
//   - a message of the appended tail whose ID is already in server is
//     skipped (a message with an ID is never duplicated).
//
// Messages without IDs that differ from every run of server are appended
// as they are: they are what the client has seen and the server has not.
// The result is a new slice; neither input is changed.
func Merge(server, client []Message) []Message {
	out := make([]Message, len(server), len(server)+len(client))
	copy(out, server)
	w := Overlap(server, client)
	if w == len(client) || contains(server, client) {
		return out
	}
	ids := make(map[string]bool, len(server))
	for _, m := range server {
		if m.ID != "" {
			ids[m.ID] = true
		}
	}
	for _, m := range client[w:] {
		if m.ID != "" && ids[m.ID] {
			continue
		}
		out = append(out, m)
	}
	return out
}

// contains reports whether sub (not empty) occurs as a contiguous run of s.
func contains(s, sub []Message) bool {
	if len(sub) == 0 || len(sub) > len(s) {
		return false
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		match := true
		for j := range sub {
			if !same(s[i+j], sub[j]) {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// Fit applies the budget to msgs, a history oldest first, and returns what
// goes into the prompt, oldest first (SPEC §6: C(normalize(H_m), U, L, B)):
//
//   - normalize: Repair, then drop user and assistant messages whose
//     content is blank and that call no tool (failed answers without text);
//   - walking from the newest unit (see the package doc) to the oldest, a
//     unit is kept when it fits: U user messages have not been kept yet
//     (a reply older than the U-th newest user message belongs to an older
//     turn and goes too), it would not make the user messages more than U, the messages more than MaxMessages (if set) or the
//     characters (each content cut at L, plus tool call names and
//     arguments) more than B. The walk stops at the first unit that does
//     not fit, so what is kept is always the newest contiguous stretch; a
//     tool call and its results are kept or dropped together.
//
// The result is a new slice; msgs is not changed. Cost: linear in the
// number of messages, and a long content is read only up to L characters.
func Fit(msgs []Message, b Budget) []Message {
	b = b.withDefaults()
	norm := Repair(msgs)
	keep := norm[:0:0]
	for _, m := range norm {
		if (m.Role == model.RoleUser || m.Role == model.RoleAssistant) && !hasCalls(m) && blank(m.Content) {
			continue
		}
		keep = append(keep, m)
	}
	us := units(keep)
	var rev []Message // kept, newest first
	users, chars := 0, 0
	for u := len(us) - 1; u >= 0; u-- {
		if users >= b.UserTurns { // anything older belongs to an older turn
			break
		}
		part := keep[us[u].start:us[u].end]
		cut := make([]Message, len(part))
		n, nu := 0, 0
		for i, m := range part {
			m.Content = cutRunes(m.Content, b.MessageChars)
			n += runes(m.Content) + callChars(m)
			if m.Role == model.RoleUser {
				nu++
			}
			cut[i] = m
		}
		if users+nu > b.UserTurns || chars+n > b.TotalChars ||
			b.MaxMessages > 0 && len(rev)+len(cut) > b.MaxMessages {
			break
		}
		users += nu
		chars += n
		for i := len(cut) - 1; i >= 0; i-- {
			rev = append(rev, cut[i])
		}
	}
	out := make([]Message, len(rev))
	for i, m := range rev {
		out[len(rev)-1-i] = m
	}
	return out
}

// BuildContext is Fit(Merge(server, client), b): the recency-first context
// of SPEC §6 from the server's history and the client's recent history.
func BuildContext(server, client []Message, b Budget) []Message {
	return Fit(Merge(server, client), b)
}
