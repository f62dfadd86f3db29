// Package route picks the profile (role) a user message goes to (SPEC §5.4
// "Routing"; issue 4 item 7). Route is a pure function of the message, the
// current profile, the roles (their names, descriptions and capability
// keywords, as memory.ListRoles reads them from each role's config.md front
// matter) and, for the similarity step, an embedder (memory/embed; the
// offline builtin one by default in the app). It keeps no state and
// imports no other Atrium package except memory/embed.
//
// The steps, first match wins:
//
//  1. Mention: `@role` naming a known role (case-insensitive; not inside a
//     word or an e-mail address: the `@` must follow the start of the text,
//     a space or punctuation, and a Latin role name must end at a word
//     boundary). One role mentioned ⇒ that role; several different roles ⇒
//     ReasonAsk with them as candidates. Unknown names are ignored.
//  2. Capability: each role's capability keywords (Chinese and English)
//     are looked up in the message after NFKC folding (full-width letters
//     become ASCII) and lower-casing. A keyword of Latin letters or digits
//     must start at a word boundary ("debug" matches "debugging", not
//     "antidebug"); a keyword with CJK characters matches as a substring
//     ("性能" in "优化这段代码的性能"). A role scores the number of its distinct
//     keywords found; the highest score wins, a tie ⇒ ReasonAsk.
//  3. Similarity: the cosine between the message's embedding and each
//     role description's embedding; the best role at or above
//     Options.Threshold (default DefaultThreshold) wins; roles within
//     TieEpsilon of the best, also above the threshold ⇒ ReasonAsk. Skipped
//     when Options.Embedder is nil or no role has a description.
//  4. Stay: the current profile (ReasonStay).
//
// On ReasonAsk, Decision.Role is the current profile (nothing moves until
// the person chooses) and Candidates lists the tied roles, sorted by name.
package route

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/atrium-dev/atrium/backend/memory/embed"
)

// Reason says which step decided (the wire values of chat.route's reason).
type Reason string

// The reasons of Decision.
const (
	ReasonMention    Reason = "mention"
	ReasonCapability Reason = "capability"
	ReasonSimilarity Reason = "similarity"
	ReasonStay       Reason = "stay"
	ReasonAsk        Reason = "ask"
)

// DefaultThreshold is the cosine floor of the similarity step, chosen for
// the builtin embedder (hashed n-grams, lexical) on bilingual one-line
// descriptions: a message sharing a content word or a CJK word with a
// description scored 0.16–0.46 there, unrelated messages (small talk, the
// weather, dinner) −0.17–0.11 (measured in route_test.go,
// TestSimilarityThreshold, which fails if the gap closes). Semantic
// providers (ollama, openai) score unrelated text higher (often 0.3–0.5):
// set Options.Threshold for them.
const DefaultThreshold = 0.15

// TieEpsilon: two similarity scores closer than this are equal.
const TieEpsilon = 1e-6

// MaxTextChars caps the message Route looks at (characters); the rest is
// ignored, so that a huge paste costs a bounded embedding.
const MaxTextChars = 4000

// ErrInvalidInput: a malformed request (no roles is not an error; a
// message that is not UTF-8 is).
var ErrInvalidInput = errors.New("route: invalid input")

// Role is one routing target: Name is the role (profile) name, Description
// one line (config.md front matter `description`), Capabilities its
// keywords (`capabilities: [...]`).
type Role struct {
	Name         string   `json:"name"`
	Description  string   `json:"description,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// Options configures Route. The zero value is usable: no similarity step,
// DefaultThreshold.
type Options struct {
	// Embedder embeds the message and the descriptions for step 3; nil
	// skips it.
	Embedder embed.Embedder
	// Threshold is the cosine floor of step 3, in (0,1]; 0 means
	// DefaultThreshold.
	Threshold float64
}

// Decision is Route's answer. Role is the chosen role (the current one on
// ReasonStay and ReasonAsk); Candidates the tied roles on ReasonAsk (else
// nil); Matched the mention, the capability keywords found, or nothing;
// Score the number of keywords (capability) or the cosine (similarity),
// rounded to 4 decimals (memory.ScoreDecimals).
type Decision struct {
	Role       string   `json:"role"`
	Reason     Reason   `json:"reason"`
	Candidates []string `json:"candidates"`
	Matched    []string `json:"matched,omitempty"`
	Score      float64  `json:"score,omitempty"`
}

// Route decides where text goes (see the package doc for the steps).
// current is the profile the conversation is with ("" allowed: then stay
// answers ""). Errors: ErrInvalidInput (text not UTF-8), or the embedder's
// error wrapped (step 3 only; steps 1–2 never fail).
func Route(ctx context.Context, text, current string, roles []Role, o Options) (Decision, error) {
	if !utf8.ValidString(text) {
		return Decision{}, fmt.Errorf("route: %w: message is not valid UTF-8", ErrInvalidInput)
	}
	text = firstChars(text, MaxTextChars)
	folded := fold(text)
	if d, ok := mention(folded, current, roles); ok {
		return d, nil
	}
	if d, ok := capability(folded, current, roles); ok {
		return d, nil
	}
	d, ok, err := similarity(ctx, text, current, roles, o)
	if err != nil {
		return Decision{}, err
	}
	if ok {
		return d, nil
	}
	return Decision{Role: current, Reason: ReasonStay}, nil
}

// fold is the matching form of s: NFKC (full-width forms to ASCII) and
// lower case.
func fold(s string) string { return strings.ToLower(norm.NFKC.String(s)) }

// isWord reports whether r continues a Latin-style word (letters, digits,
// combining marks, '-' and '_' as in role names), CJK excluded.
func isWord(r rune) bool {
	if isCJK(r) {
		return false
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || r == '-' || r == '_'
}

// isCJK reports whether r is a Han, kana or hangul character.
func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// boundedAt reports whether the match of kw at text[i:] is a whole-word
// start (the rune before is not a word rune) and, when tail is set and kw
// ends in a Latin word rune, a whole-word end too.
func boundedAt(text string, i int, kw string, tail bool) bool {
	if i > 0 {
		if r, _ := utf8.DecodeLastRuneInString(text[:i]); isWord(r) {
			return false
		}
	}
	if !tail {
		return true
	}
	last, _ := utf8.DecodeLastRuneInString(kw)
	if !isWord(last) {
		return true
	}
	if j := i + len(kw); j < len(text) {
		if r, _ := utf8.DecodeRuneInString(text[j:]); isWord(r) {
			return false
		}
	}
	return true
}

// find reports whether kw (folded) occurs in text (folded) under the
// boundary rules: Latin keywords at a word start (and end, when tail),
// CJK keywords anywhere.
func find(text, kw string, tail bool) bool {
	if kw == "" {
		return false
	}
	first, _ := utf8.DecodeRuneInString(kw)
	for off := 0; off <= len(text); {
		i := strings.Index(text[off:], kw)
		if i < 0 {
			return false
		}
		i += off
		if isCJK(first) && !tail || boundedAt(text, i, kw, tail) {
			return true
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		off = i + size
	}
	return false
}

func mention(folded, current string, roles []Role) (Decision, bool) {
	if !strings.Contains(folded, "@") {
		return Decision{}, false
	}
	var hit []string
	for _, r := range roles {
		name := fold(r.Name)
		if name == "" {
			continue
		}
		// The '@' must not be inside a word (an e-mail address); the name
		// must end at a word boundary (so @code does not match code-expert).
		at := "@" + name
		for off := 0; off < len(folded); {
			i := strings.Index(folded[off:], at)
			if i < 0 {
				break
			}
			i += off
			if boundedAt(folded, i, at, true) {
				hit = append(hit, r.Name)
				break
			}
			off = i + 1
		}
	}
	hit = uniqueSorted(hit)
	switch len(hit) {
	case 0:
		return Decision{}, false
	case 1:
		return Decision{Role: hit[0], Reason: ReasonMention, Matched: []string{"@" + hit[0]}}, true
	}
	return Decision{Role: current, Reason: ReasonAsk, Candidates: hit}, true
}

func capability(folded, current string, roles []Role) (Decision, bool) {
	best, bestN := []string(nil), 0
	matched := map[string][]string{}
	for _, r := range roles {
		seen := map[string]bool{}
		for _, c := range r.Capabilities {
			kw := fold(strings.TrimSpace(c))
			if kw == "" || seen[kw] || !find(folded, kw, false) {
				continue
			}
			seen[kw] = true
			matched[r.Name] = append(matched[r.Name], c)
		}
		switch n := len(seen); {
		case n == 0:
		case n > bestN:
			best, bestN = []string{r.Name}, n
		case n == bestN:
			best = append(best, r.Name)
		}
	}
	best = uniqueSorted(best)
	switch len(best) {
	case 0:
		return Decision{}, false
	case 1:
		return Decision{Role: best[0], Reason: ReasonCapability, Matched: matched[best[0]], Score: float64(bestN)}, true
	}
	return Decision{Role: current, Reason: ReasonAsk, Candidates: best, Score: float64(bestN)}, true
}

func similarity(ctx context.Context, text, current string, roles []Role, o Options) (Decision, bool, error) {
	if o.Embedder == nil || strings.TrimSpace(text) == "" {
		return Decision{}, false, nil
	}
	threshold := o.Threshold
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	inputs := []string{text}
	var names []string
	for _, r := range roles {
		if strings.TrimSpace(r.Description) != "" && r.Name != "" {
			inputs = append(inputs, r.Description)
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		return Decision{}, false, nil
	}
	vecs, err := o.Embedder.Embed(ctx, inputs)
	if err != nil {
		return Decision{}, false, fmt.Errorf("route: embed the message and %d descriptions: %w", len(names), err)
	}
	if len(vecs) != len(inputs) {
		return Decision{}, false, fmt.Errorf("route: embedder returned %d vectors for %d inputs", len(vecs), len(inputs))
	}
	type scored struct {
		name  string
		score float64
	}
	var all []scored
	for i, n := range names {
		all = append(all, scored{n, cosine(vecs[0], vecs[i+1])})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].score > all[j].score })
	top := all[0]
	if top.score < threshold {
		return Decision{}, false, nil
	}
	var tied []string
	for _, s := range all {
		if top.score-s.score < TieEpsilon {
			tied = append(tied, s.name)
		}
	}
	tied = uniqueSorted(tied)
	if len(tied) > 1 {
		return Decision{Role: current, Reason: ReasonAsk, Candidates: tied, Score: math.Round(top.score*1e4) / 1e4}, true, nil
	}
	return Decision{Role: top.name, Reason: ReasonSimilarity, Score: math.Round(top.score*1e4) / 1e4}, true, nil
}

// cosine of a and b (0 when either is zero or their lengths differ).
func cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// firstChars returns the first n characters of s (whole code points).
func firstChars(s string, n int) string {
	k := 0
	for i := range s {
		if k == n {
			return s[:i]
		}
		k++
	}
	return s
}

func uniqueSorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
