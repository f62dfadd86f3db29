package talk

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Cutter cuts a streaming answer into sentences to speak, as the deltas
// arrive: a sentence ends at . ! ? ; (followed by a space or the end) or
// at 。！？；… and a newline ends one too. The reply's first sentence is
// cut earlier, at a clause (, ， 、 : ：) once it has FirstClauseRunes
// characters, so that the first words play soon. A sentence longer than
// MaxRunes is cut at its last space (or at MaxRunes). Markdown marks
// (*, _, `, #, >) are dropped: they are not spoken. Not safe for
// concurrent use.
type Cutter struct {
	buf   []rune
	first bool // a sentence was already cut
}

// Cutting bounds.
const (
	FirstClauseRunes = 12
	MaxRunes         = 400
)

// Add takes the next delta and returns the sentences it completed, in
// order (trimmed, never empty).
func (c *Cutter) Add(delta string) []string {
	var out []string
	for _, r := range delta {
		switch r {
		case '*', '_', '`', '#', '>':
			continue
		}
		c.buf = append(c.buf, r)
		if c.cutHere() {
			out = c.emit(out, len(c.buf))
		} else if len(c.buf) >= MaxRunes {
			at := len(c.buf)
			for i := len(c.buf) - 1; i > MaxRunes/2; i-- {
				if unicode.IsSpace(c.buf[i]) {
					at = i + 1
					break
				}
			}
			out = c.emit(out, at)
		}
	}
	return out
}

// cutHere reports whether the buffer ends a sentence, or (for the first
// one) a long enough clause. A '.' between digits or letters (3.5, e.g)
// waits for what follows: Add sees the next rune before cutting, so an
// ASCII mark cuts when the rune after it is a space.
func (c *Cutter) cutHere() bool {
	n := len(c.buf)
	last := c.buf[n-1]
	switch last {
	case '。', '！', '？', '；', '…', '\n':
		return true
	case '，', '、', '：':
		return !c.first && n >= FirstClauseRunes
	}
	if !unicode.IsSpace(last) || n < 2 {
		return false
	}
	switch c.buf[n-2] {
	case '.', '!', '?', ';':
		return true
	case ',', ':':
		return !c.first && n >= FirstClauseRunes
	}
	return false
}

func (c *Cutter) emit(out []string, at int) []string {
	s := strings.TrimSpace(string(c.buf[:at]))
	c.buf = append(c.buf[:0], c.buf[at:]...)
	if s == "" || !speakable(s) {
		return out
	}
	c.first = true
	return append(out, s)
}

// Flush returns what is left (the answer ended), or nothing.
func (c *Cutter) Flush() []string {
	return c.emit(nil, len(c.buf))
}

// speakable: s has a letter or digit (not only punctuation).
func speakable(s string) bool {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
		s = s[n:]
	}
	return false
}
