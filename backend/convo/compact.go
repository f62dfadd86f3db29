package convo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/model"
)

// Context economy defaults (SPEC §6).
const (
	// DefaultReserveTokens is kept free below the model's window: compaction
	// is due when the context reaches window − reserve.
	DefaultReserveTokens = 20000
	// DefaultFlushSoftTokens: the memory flush turn is due this many tokens
	// before the compaction threshold.
	DefaultFlushSoftTokens = 4000
)

// NoReply is what the agent answers to the flush turn when it has nothing
// to store; the caller shows nothing to the person either way.
const NoReply = "NO_REPLY"

// ErrEmptySummary: the Summarizer returned no text. Compact then changes
// nothing (an existing summary is never replaced with an empty one, and no
// turn is dropped without a summary).
var ErrEmptySummary = errors.New("convo: the summary is empty")

// EconomyOptions configure an Economy. ContextWindow is required.
type EconomyOptions struct {
	// ContextWindow is the model's context window in tokens. Required (> 0).
	ContextWindow int
	// ReserveTokens is kept free below the window. Default
	// DefaultReserveTokens (20000). On a small window the reserve is capped
	// at half the window, so the threshold is never below half the window.
	ReserveTokens int
	// FlushSoftTokens is how far before the threshold the memory flush is
	// due. Default DefaultFlushSoftTokens (4000); capped at a quarter of the
	// threshold. A negative value disables the flush.
	FlushSoftTokens int
	// KeepRecentTokens is how many tokens of the newest turns compaction
	// keeps whole. Default: a quarter of the threshold (45000 for a
	// 200000-token window). The newest unit is always kept.
	KeepRecentTokens int
}

// Economy decides when a transcript needs a memory flush or a compaction,
// and compacts it. Create it with NewEconomy; it holds no state of its own
// and is safe for concurrent use.
type Economy struct {
	threshold, flushAt, keep int
	flush                    bool
}

// NewEconomy checks o and fills in defaults. Errors: ErrInvalid when
// ContextWindow ≤ 0 or another field is out of range.
func NewEconomy(o EconomyOptions) (*Economy, error) {
	if o.ContextWindow <= 0 {
		return nil, fmt.Errorf("new economy: %w: ContextWindow must be > 0 tokens, got %d", ErrInvalid, o.ContextWindow)
	}
	if o.ReserveTokens < 0 || o.KeepRecentTokens < 0 {
		return nil, fmt.Errorf("new economy: %w: ReserveTokens (%d) and KeepRecentTokens (%d) must not be negative",
			ErrInvalid, o.ReserveTokens, o.KeepRecentTokens)
	}
	if o.ReserveTokens == 0 {
		o.ReserveTokens = DefaultReserveTokens
	}
	e := &Economy{threshold: o.ContextWindow - min(o.ReserveTokens, o.ContextWindow/2)}
	switch {
	case o.FlushSoftTokens < 0:
	case o.FlushSoftTokens == 0:
		o.FlushSoftTokens = DefaultFlushSoftTokens
		fallthrough
	default:
		e.flush = true
		e.flushAt = e.threshold - min(o.FlushSoftTokens, e.threshold/4)
	}
	e.keep = o.KeepRecentTokens
	if e.keep == 0 {
		e.keep = e.threshold / 4
	}
	return e, nil
}

// Threshold is the token count at which compaction is due (window − reserve).
func (e *Economy) Threshold() int { return e.threshold }

// FlushAt is the token count at which the memory flush is due (0 when the
// flush is disabled).
func (e *Economy) FlushAt() int { return e.flushAt }

// Transcript is a session's context as compaction sees it.
type Transcript struct {
	// Summary stands for every turn compacted away so far ("" before the
	// first compaction). The caller puts it in the prompt before Messages.
	Summary string `json:"summary,omitempty"`
	// Messages are the turns since the summary, oldest first.
	Messages []Message `json:"messages"`
	// Compactions counts the compactions that produced Summary.
	Compactions int `json:"compactions"`
	// Flushed: the memory flush turn has run since the last compaction.
	// The caller sets it after running the flush; Compact clears it.
	Flushed bool `json:"flushed,omitempty"`
	// RecordedTokens is the prompt size the model server reported for the
	// last call (model.Usage.PromptTokens), 0 when unknown. It is stale by
	// design (it predates whatever was added since), so Assess never relies
	// on it alone; Compact resets it.
	RecordedTokens int `json:"recordedTokens,omitempty"`
}

// Assessment is what Assess found. Tokens is the count it judged by; Flush
// and Compact say what is due. When both are due, run the flush first.
type Assessment struct {
	Tokens    int  `json:"tokens"`
	Threshold int  `json:"threshold"`
	FlushAt   int  `json:"flushAt"`
	Flush     bool `json:"flush"`
	Compact   bool `json:"compact"`
}

// Assess counts t afresh — the token estimate of the summary and every
// message, plus extraTokens for what the caller adds (system prompt, tool
// specs, the new user message) — and takes the larger of that and
// t.RecordedTokens. Compaction is due at Threshold; the memory flush is due
// at FlushAt unless it already ran since the last compaction (t.Flushed).
func (e *Economy) Assess(t Transcript, extraTokens int) Assessment {
	fresh := max(extraTokens, 0) + TokensOf(t.Messages)
	if t.Summary != "" {
		fresh += Tokens(Message{Message: model.Message{Role: model.RoleSystem, Content: t.Summary}})
	}
	n := max(fresh, t.RecordedTokens)
	return Assessment{
		Tokens: n, Threshold: e.threshold, FlushAt: e.flushAt,
		Flush:   e.flush && !t.Flushed && n >= e.flushAt,
		Compact: n >= e.threshold,
	}
}

// Plan is the split Compact would make. Summarize are the older messages
// (after Repair) that the Summarizer folds into the summary, Keep the recent
// ones kept whole; Summarize ⊕ Keep = Repair(t.Messages). KeepTokens is the
// estimate of Keep.
type Plan struct {
	Summarize  []Message
	Keep       []Message
	KeepTokens int
}

// Plan splits t.Messages for compaction, on the repaired transcript (so a
// dangling tool call from an aborted run or a stray tool result is gone
// before anything is cut). Keep is the newest stretch of whole units that
// fits in KeepRecentTokens, moved forward to start at a user message when
// one is in it, so recent turns are kept whole; the newest unit is always
// kept. The cut is between units, so no kept tool result loses its call and
// no kept call loses its result. Summarize is empty when everything fits.
func (e *Economy) Plan(t Transcript) Plan {
	msgs := Repair(t.Messages)
	us := units(msgs)
	if len(us) == 0 {
		return Plan{}
	}
	first, tokens := len(us)-1, TokensOf(msgs[us[len(us)-1].start:])
	for u := len(us) - 2; u >= 0; u-- {
		n := TokensOf(msgs[us[u].start:us[u].end])
		if tokens+n > e.keep {
			break
		}
		first, tokens = u, tokens+n
	}
	if first == 0 { // everything fits
		return Plan{Keep: msgs, KeepTokens: tokens}
	}
	for u := first; u < len(us); u++ { // start the kept part at a turn
		if msgs[us[u].start].Role == model.RoleUser {
			first = u
			break
		}
	}
	cut := us[first].start
	keep := msgs[cut:]
	return Plan{Summarize: msgs[:cut:cut], Keep: keep, KeepTokens: TokensOf(keep)}
}

// Summarizer folds older turns into a summary (normally a model call).
// previous is the summary so far ("" at the first compaction); older are
// the turns to fold in, oldest first. It returns the new summary, which
// must cover previous too.
type Summarizer func(ctx context.Context, previous string, older []Message) (string, error)

// Compact summarises what Plan puts in Summarize and returns the compacted
// transcript: the new summary, Plan's Keep, Compactions + 1, Flushed and
// RecordedTokens cleared. compacted is false, and t is returned as it was,
// when there is nothing to summarise (then sum is not called: compacting
// again with nothing new keeps the earlier summary). Errors (t returned
// unchanged): ErrInvalid for a nil sum; the Summarizer's error, wrapped;
// ErrEmptySummary when it returned only white space.
func (e *Economy) Compact(ctx context.Context, t Transcript, sum Summarizer) (out Transcript, compacted bool, err error) {
	if sum == nil {
		return t, false, fmt.Errorf("compact: %w: nil Summarizer", ErrInvalid)
	}
	p := e.Plan(t)
	if len(p.Summarize) == 0 {
		return t, false, nil
	}
	s, err := sum(ctx, t.Summary, p.Summarize)
	if err != nil {
		return t, false, fmt.Errorf("compact: summarise %d messages: %w", len(p.Summarize), err)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return t, false, fmt.Errorf("compact: summarise %d messages: %w", len(p.Summarize), ErrEmptySummary)
	}
	return Transcript{
		Summary:     s,
		Messages:    append([]Message(nil), p.Keep...),
		Compactions: t.Compactions + 1,
	}, true, nil
}

// FlushPrompt is the user-role text of the silent memory-flush turn (SPEC
// §6), naming the daily log of role for day (its date as given, in its
// location): memory/roles/<role>/YYYY-MM-DD.md.
func FlushPrompt(role string, day time.Time) string {
	return "Pre-compaction memory flush: this session is about to be compacted and older turns will be summarised. " +
		"Store durable memories now — decisions, facts, preferences, open questions — with memory_note or memory_write " +
		"(memory/roles/" + role + "/" + day.Format("2006-01-02") + ".md). " +
		"If there is nothing to store, reply " + NoReply + "."
}

// IsNoReply reports whether an answer to the flush turn means "nothing to
// store" (NoReply, ignoring surrounding white space and case).
func IsNoReply(answer string) bool { return strings.EqualFold(strings.TrimSpace(answer), NoReply) }
