// Package chunk splits Markdown memory files into overlapping, line-addressed
// chunks for the memory index (SPEC §4.2: "line-based, ~400 tokens with 80
// tokens overlap; each chunk keeps path, startLine, endLine, text,
// hash(sha256) ... a single long line is split").
//
// Token counts are estimates, not a real tokenizer: EstimateTokens counts a
// CJK character (ideograph, kana, hangul, CJK punctuation, full-width form) as
// one token and every other rune as a quarter of a token, rounded up over the
// whole string. The same estimate sizes chunks here and embedding batches
// elsewhere, so the two always agree.
//
// Input handling, in order:
//   - a leading UTF-8 byte order mark (U+FEFF) is dropped;
//   - each run of invalid UTF-8 bytes becomes one U+FFFD (strings.ToValidUTF8);
//   - lines are separated by "\n"; one trailing "\r" per line (CRLF) is
//     dropped. A lone "\r" elsewhere is ordinary text.
//
// Line numbers are 1-based and count every line of that normalised text, so
// they match what an editor shows for the file. Split is deterministic and
// safe for concurrent use; it never panics on any input.
package chunk

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Chunking defaults from SPEC §4.2.
const (
	// DefaultMaxTokens is the chunk budget (estimated tokens) used when
	// Options.MaxTokens <= 0.
	DefaultMaxTokens = 400
	// DefaultOverlapTokens is the overlap (estimated tokens) used when
	// Options.OverlapTokens == 0.
	DefaultOverlapTokens = 80
)

// Options tunes Split. The zero value means the SPEC §4.2 defaults.
type Options struct {
	// MaxTokens is the largest EstimateTokens(Chunk.Text) of any chunk.
	// Values <= 0 mean DefaultMaxTokens (400).
	MaxTokens int
	// OverlapTokens is how many estimated tokens of trailing whole lines of
	// one chunk are repeated at the start of the next. 0 means
	// DefaultOverlapTokens (80); a negative value (use -1) disables overlap.
	// The effective overlap is capped at MaxTokens/2 so that every chunk
	// carries new text and output size stays linear in the input.
	OverlapTokens int
}

// Chunk is one piece of a file, addressed by lines.
type Chunk struct {
	// StartLine is the first line, 1-based, inclusive.
	StartLine int
	// EndLine is the last line, 1-based, inclusive. A piece of a split long
	// line has StartLine == EndLine == that line.
	EndLine int
	// Text is the exact text of lines StartLine..EndLine joined by "\n"
	// (without their "\r"), or, for a split long line, an exact substring of
	// that line. It never starts or ends with a blank line.
	Text string
	// Hash is the lowercase hex SHA-256 of Text (64 characters).
	Hash string
}

// IsCJK reports whether r is one of the rune classes that EstimateTokens
// counts as one token each (SPEC §4.2: "a CJK or full-width character counts
// about one token"): Han ideographs (all blocks, radicals, compatibility
// ideographs), Hiragana, Katakana (including half-width), Bopomofo, Hangul
// (syllables and jamo), CJK Symbols and Punctuation (U+3000–U+303F), enclosed
// CJK letters and CJK compatibility (U+3200–U+33FF), vertical, CJK
// compatibility and small forms (U+FE10–U+FE1F, U+FE30–U+FE6F), and the
// Halfwidth and Fullwidth Forms block (U+FF01–U+FFEF).
func IsCJK(r rune) bool {
	switch {
	case r < 0x1100: // below Hangul Jamo: Latin, Greek, Cyrillic, ...
		return false
	case r >= 0x4E00 && r <= 0x9FFF: // CJK Unified Ideographs
		return true
	case r >= 0x3000 && r <= 0x30FF: // CJK punctuation, Hiragana, Katakana
		return true
	case r >= 0xAC00 && r <= 0xD7AF: // Hangul Syllables
		return true
	case r >= 0xFF01 && r <= 0xFFEF: // Halfwidth and Fullwidth Forms
		return true
	case r >= 0x3100 && r <= 0x33FF: // Bopomofo, Hangul compat jamo, Kanbun, enclosed, compat
		return true
	case r >= 0xFE10 && r <= 0xFE1F, r >= 0xFE30 && r <= 0xFE6F: // vertical, compat and small forms
		return true
	}
	return unicode.In(r, unicode.Han, unicode.Hangul, unicode.Hiragana, unicode.Katakana, unicode.Bopomofo)
}

// EstimateTokens estimates the token count of s (SPEC §4.2): every rune for
// which IsCJK is true counts 1; all other runes (letters, digits, spaces,
// newlines, punctuation, U+FFFD for invalid bytes) count 1/4, and that part
// is rounded up once for the whole string. EstimateTokens("") == 0.
func EstimateTokens(s string) int {
	cjk, other := countRunes(s)
	return cost(cjk, other)
}

// cost turns rune counts into the token estimate used everywhere here.
func cost(cjk, other int) int { return cjk + (other+3)/4 }

// countRunes counts CJK and other runes of s.
func countRunes(s string) (cjk, other int) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			other++
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if IsCJK(r) {
			cjk++
		} else {
			other++
		}
		i += n
	}
	return cjk, other
}

// normalize applies the input rules from the package doc.
func normalize(text string) string {
	text = strings.TrimPrefix(text, "\uFEFF")
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	return text
}

// line is one line of normalised text, as byte offsets plus rune counts.
type line struct {
	start, end int // text[start:end], without "\n" and trailing "\r"
	cjk, other int
	blank      bool
}

func splitLines(text string) []line {
	lines := make([]line, 0, strings.Count(text, "\n")+1)
	for start := 0; ; {
		nl := strings.IndexByte(text[start:], '\n')
		end := len(text)
		if nl >= 0 {
			end = start + nl
		}
		e := end
		if e > start && text[e-1] == '\r' {
			e--
		}
		s := text[start:e]
		cjk, other := countRunes(s)
		lines = append(lines, line{start: start, end: e, cjk: cjk, other: other, blank: strings.TrimSpace(s) == ""})
		if nl < 0 {
			return lines
		}
		start = end + 1
	}
}

// splitter holds the state of one Split call.
type splitter struct {
	text     string
	lines    []line
	max, ov  int
	crlf     bool // text contains '\r': lines cannot be sliced out in one piece
	out      []Chunk
	lastEnd  int // EndLine of the last emitted chunk, 0 = none
	prefCJK  []int
	prefOth  []int
	pieceBuf []int
	// onPiece, when set (tests only), sees the byte span [from, to) within
	// line lineIdx (0-based) of every emitted piece of a split long line.
	onPiece func(lineIdx, from, to int)
}

// Split cuts text into chunks following SPEC §4.2:
//
//   - Lines are accumulated while EstimateTokens of the joined text stays
//     <= MaxTokens (joining "\n"s count as other runes).
//   - Each following chunk starts with the longest run of trailing whole lines
//     of the previous chunk whose estimate is <= the overlap budget; lines are
//     dropped from the front of that run until the next new line fits, so
//     every chunk contains at least one line not yet emitted.
//   - A line whose own estimate exceeds MaxTokens is emitted on its own as
//     pieces of <= MaxTokens, cut at rune boundaries, preferably right after
//     whitespace or punctuation (looking back at most half a piece), and never
//     before a combining mark, variation selector or after a zero-width
//     joiner. Consecutive pieces overlap by up to the overlap budget, starting
//     at a word boundary when there is one. No line overlap is carried into or
//     out of a split line.
//   - Leading and trailing blank (whitespace-only) lines are trimmed from each
//     chunk; a chunk that would be blank, or that would add no line beyond the
//     previous chunk, is dropped. Empty and whitespace-only input yield nil.
//
// Chunks are returned in file order. Every non-blank line lies within at least
// one chunk, and EstimateTokens(c.Text) <= MaxTokens for every chunk.
func Split(text string, opts Options) []Chunk {
	return split(text, opts, nil)
}

func split(text string, opts Options, onPiece func(lineIdx, from, to int)) []Chunk {
	maxTok := opts.MaxTokens
	if maxTok <= 0 {
		maxTok = DefaultMaxTokens
	}
	ov := opts.OverlapTokens
	switch {
	case ov == 0:
		ov = DefaultOverlapTokens
	case ov < 0:
		ov = 0
	}
	ov = min(ov, maxTok/2)
	text = normalize(text)
	if strings.TrimSpace(text) == "" {
		return nil
	}
	sp := &splitter{
		text:    text,
		lines:   splitLines(text),
		max:     maxTok,
		ov:      ov,
		crlf:    strings.IndexByte(text, '\r') >= 0,
		onPiece: onPiece,
	}
	sp.run()
	return sp.out
}

// rangeCost is the estimate of lines[a:b] joined by "\n".
func (sp *splitter) rangeCost(a, b int) int {
	if a >= b {
		return 0
	}
	return cost(sp.prefCJK[b]-sp.prefCJK[a], sp.prefOth[b]-sp.prefOth[a]+(b-a-1))
}

func (sp *splitter) run() {
	n := len(sp.lines)
	sp.prefCJK = make([]int, n+1)
	sp.prefOth = make([]int, n+1)
	for i, l := range sp.lines {
		sp.prefCJK[i+1] = sp.prefCJK[i] + l.cjk
		sp.prefOth[i+1] = sp.prefOth[i] + l.other
	}
	a := 0 // current chunk is lines[a:j]
	for j := 0; j < n; j++ {
		if cost(sp.lines[j].cjk, sp.lines[j].other) > sp.max {
			sp.emitLines(a, j)
			sp.emitLongLine(j)
			a = j + 1
			continue
		}
		if sp.rangeCost(a, j+1) <= sp.max {
			continue
		}
		sp.emitLines(a, j)
		// Overlap: longest trailing run of lines[a:j] within the budget ...
		b := j
		for sp.ov > 0 && b > a && sp.rangeCost(b-1, j) <= sp.ov {
			b--
		}
		// ... shortened until line j fits after it (line j alone always fits).
		for sp.rangeCost(b, j+1) > sp.max {
			b++
		}
		a = b
	}
	sp.emitLines(a, n)
}

// emitLines emits lines[a:b] (0-based, half-open) after trimming blank lines.
func (sp *splitter) emitLines(a, b int) {
	for a < b && sp.lines[a].blank {
		a++
	}
	for b > a && sp.lines[b-1].blank {
		b--
	}
	if a >= b || b <= sp.lastEnd {
		return
	}
	var txt string
	if !sp.crlf {
		txt = sp.text[sp.lines[a].start:sp.lines[b-1].end]
	} else {
		var sb strings.Builder
		for i := a; i < b; i++ {
			if i > a {
				sb.WriteByte('\n')
			}
			sb.WriteString(sp.text[sp.lines[i].start:sp.lines[i].end])
		}
		txt = sb.String()
	}
	sp.add(a+1, b, txt)
}

func (sp *splitter) add(start, end int, txt string) {
	sum := sha256.Sum256([]byte(txt))
	sp.out = append(sp.out, Chunk{StartLine: start, EndLine: end, Text: txt, Hash: hex.EncodeToString(sum[:])})
	sp.lastEnd = end
}

// emitLongLine splits line j (0-based), whose estimate exceeds max, into
// pieces. Positions are rune indexes into the line.
func (sp *splitter) emitLongLine(j int) {
	s := sp.text[sp.lines[j].start:sp.lines[j].end]
	runes := []rune(s)
	n := len(runes)
	// off[i] is the byte offset of rune i; cjkP/othP are prefix counts.
	need := 3 * (n + 1)
	if cap(sp.pieceBuf) < need {
		sp.pieceBuf = make([]int, need)
	}
	buf := sp.pieceBuf[:need]
	off, cjkP, othP := buf[:n+1], buf[n+1:2*(n+1)], buf[2*(n+1):]
	b := 0
	for i, r := range runes {
		off[i] = b
		b += utf8.RuneLen(r)
		cjkP[i+1], othP[i+1] = cjkP[i], othP[i]
		if IsCJK(r) {
			cjkP[i+1]++
		} else {
			othP[i+1]++
		}
	}
	off[n] = b
	pc := func(x, y int) int { return cost(cjkP[y]-cjkP[x], othP[y]-othP[x]) }

	for st, prevEnd := 0, 0; st < n; {
		// Greedy end: the largest e with pc(st, e) <= max (cost grows with e;
		// one rune costs at most 1 <= max, so e > st).
		e := st + sort.Search(n-st, func(k int) bool { return pc(st, st+k+1) > sp.max })
		minEnd := max(st+1, prevEnd+1)
		if e < n {
			e = cutPoint(runes, st, e, minEnd)
		}
		piece := s[off[st]:off[e]]
		if strings.TrimSpace(piece) != "" {
			sp.add(j+1, j+1, piece)
			if sp.onPiece != nil {
				sp.onPiece(j, off[st], off[e])
			}
		}
		if e >= n {
			return
		}
		// Next start: the earliest p in (st, e) with pc(p, e) <= ov, moved
		// forward to a word start if one exists before e.
		next := e
		if sp.ov > 0 {
			p := st + 1 + sort.Search(e-st-1, func(k int) bool { return pc(st+1+k, e) <= sp.ov })
			q := p
			for q < e && !isBreakAfter(runes[q-1]) {
				q++
			}
			if q == e {
				q = p
			}
			for q < e && isUnsplittable(runes, q) {
				q++
			}
			next = q
		}
		// With ov <= max/2 the next greedy end passes e, so pieces advance.
		st, prevEnd = next, e
	}
}

// cutPoint chooses where to end a piece that starts at st and may extend to
// greedy (exclusive); the result is in [minEnd, greedy] whenever possible.
func cutPoint(runes []rune, st, greedy, minEnd int) int {
	lo := max(st+(greedy-st)/2, minEnd)
	for p := greedy; p >= lo && p > st; p-- {
		if isBreakAfter(runes[p-1]) {
			return p
		}
	}
	p := greedy
	for p > minEnd && isUnsplittable(runes, p) {
		p--
	}
	return p
}

// isBreakAfter reports whether a piece may preferably end right after r.
func isBreakAfter(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }

// isUnsplittable reports whether cutting between runes[p-1] and runes[p]
// would separate parts of one user-perceived character.
func isUnsplittable(runes []rune, p int) bool {
	if p <= 0 || p >= len(runes) {
		return false
	}
	r := runes[p]
	return runes[p-1] == 0x200D || r == 0x200D ||
		(r >= 0xFE00 && r <= 0xFE0F) || (r >= 0xE0100 && r <= 0xE01EF) ||
		(r >= 0x1F3FB && r <= 0x1F3FF) ||
		unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc)
}
