package convo

import (
	"fmt"
	"strings"

	"github.com/atrium-dev/atrium/backend/model"
)

// Tool-result pruning defaults (SPEC §6; the protection and the hard-clear
// budget are this package's choices).
const (
	// DefaultKeepLastAssistants: tool results at or after the third-newest
	// assistant message are never pruned.
	DefaultKeepLastAssistants = 3
	// DefaultSoftTrimChars: an older tool result longer than this many
	// characters is soft-trimmed.
	DefaultSoftTrimChars = 4000
	// DefaultHeadChars and DefaultTailChars are what a soft trim keeps.
	DefaultHeadChars = 1500
	DefaultTailChars = 1500
	// DefaultHardClearChars is the budget, in characters after trimming,
	// of the older tool results kept; the oldest beyond it are cleared.
	DefaultHardClearChars = 16000
	// DefaultPlaceholder replaces a hard-cleared tool result.
	DefaultPlaceholder = "[old tool result content cleared]"
)

// PruneOptions configure a Pruner. A zero field takes its default.
type PruneOptions struct {
	// KeepLastAssistants protects the tool results at or after the
	// KeepLastAssistants-th newest assistant message (all of them when there
	// are fewer assistant messages). Default DefaultKeepLastAssistants (3).
	KeepLastAssistants int
	// SoftTrimChars: an unprotected tool result longer than this many
	// characters keeps its first HeadChars and last TailChars around a
	// marker that says how much was left out. Default DefaultSoftTrimChars
	// (4000); HeadChars + TailChars must be smaller.
	SoftTrimChars int
	// HeadChars, TailChars: defaults DefaultHeadChars, DefaultTailChars (1500).
	HeadChars, TailChars int
	// HardClearChars: walking the unprotected tool results from the newest
	// to the oldest, once their (trimmed) characters add up to more than
	// this, that result and every older one become Placeholder. Default
	// DefaultHardClearChars (16000); negative: never clear.
	HardClearChars int
	// Placeholder replaces a cleared result. Default DefaultPlaceholder.
	Placeholder string
}

// Pruner trims old tool results in what is sent to a model (SPEC §6); the
// transcript it is given keeps the full text. Create it with NewPruner; it
// is safe for concurrent use.
type Pruner struct{ o PruneOptions }

// NewPruner checks o and fills in defaults. Errors: ErrInvalid when a field
// is negative (except HardClearChars) or HeadChars + TailChars is not below
// SoftTrimChars.
func NewPruner(o PruneOptions) (*Pruner, error) {
	if o.KeepLastAssistants < 0 || o.SoftTrimChars < 0 || o.HeadChars < 0 || o.TailChars < 0 {
		return nil, fmt.Errorf("new pruner: %w: negative option in %+v", ErrInvalid, o)
	}
	if o.KeepLastAssistants == 0 {
		o.KeepLastAssistants = DefaultKeepLastAssistants
	}
	if o.SoftTrimChars == 0 {
		o.SoftTrimChars = DefaultSoftTrimChars
	}
	if o.HeadChars == 0 {
		o.HeadChars = DefaultHeadChars
	}
	if o.TailChars == 0 {
		o.TailChars = DefaultTailChars
	}
	if o.HardClearChars == 0 {
		o.HardClearChars = DefaultHardClearChars
	}
	if o.Placeholder == "" {
		o.Placeholder = DefaultPlaceholder
	}
	if o.HeadChars+o.TailChars >= o.SoftTrimChars {
		return nil, fmt.Errorf("new pruner: %w: HeadChars %d + TailChars %d must be below SoftTrimChars %d",
			ErrInvalid, o.HeadChars, o.TailChars, o.SoftTrimChars)
	}
	return &Pruner{o: o}, nil
}

// PruneStats counts what Prune changed.
type PruneStats struct {
	Trimmed int `json:"trimmed"` // soft-trimmed tool results
	Cleared int `json:"cleared"` // tool results replaced by the placeholder
}

// Prune returns a copy of msgs (oldest first) to send to the model, in
// which the unprotected tool results (see PruneOptions) are soft-trimmed
// and the oldest of them hard-cleared. Nothing but Content of tool
// messages changes; msgs itself is never modified, so the transcript keeps
// the full text. A multi-megabyte result costs one pass over its text.
func (p *Pruner) Prune(msgs []Message) ([]Message, PruneStats) {
	out := make([]Message, len(msgs))
	copy(out, msgs)
	protect, seen := 0, 0 // tool results at index ≥ protect are kept whole
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == model.RoleAssistant {
			seen++
			if seen == p.o.KeepLastAssistants {
				protect = i
				break
			}
		}
	}
	var st PruneStats
	if seen < p.o.KeepLastAssistants {
		return out, st
	}
	kept, clearing := 0, false
	for i := protect - 1; i >= 0; i-- {
		m := &out[i]
		if m.Role != model.RoleTool {
			continue
		}
		if !clearing {
			text, trimmed := p.trim(m.Content)
			n := runes(text)
			if p.o.HardClearChars < 0 || kept+n <= p.o.HardClearChars {
				kept += n
				if trimmed {
					m.Content = text
					st.Trimmed++
				}
				continue
			}
			clearing = true
		}
		if m.Content != p.o.Placeholder {
			m.Content = p.o.Placeholder
			st.Cleared++
		}
	}
	return out, st
}

// trim soft-trims s when it is longer than SoftTrimChars.
func (p *Pruner) trim(s string) (string, bool) {
	if len(s) <= p.o.SoftTrimChars { // bytes ≥ characters
		return s, false
	}
	n := runes(s)
	if n <= p.o.SoftTrimChars {
		return s, false
	}
	head := byteIndexOfRune(s, p.o.HeadChars)
	tail := byteIndexOfRune(s, n-p.o.TailChars)
	var b strings.Builder
	b.Grow(head + len(s) - tail + 80)
	b.WriteString(s[:head])
	fmt.Fprintf(&b, "\n…[tool result trimmed: %d of %d characters left out]…\n", n-p.o.HeadChars-p.o.TailChars, n)
	b.WriteString(s[tail:])
	return b.String(), true
}

// byteIndexOfRune is the byte offset of the k-th character of s (len(s)
// when s has k characters or fewer).
func byteIndexOfRune(s string, k int) int {
	c := 0
	for i := range s {
		if c == k {
			return i
		}
		c++
	}
	return len(s)
}
