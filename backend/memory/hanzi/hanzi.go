// Package hanzi handles the two scripts of written Chinese, Simplified and
// Traditional, for memory search and answers (SPEC §4.2, issue 15): a
// question in one script finds notes written in the other, and an answer is
// given in the script the person wrote in.
//
// All character data comes from OpenCC (Open Chinese Convert) through
// github.com/liuzl/gocc, which embeds OpenCC's dictionaries; nothing here
// is a hand-made table.
//
//   - Fold maps every Traditional character (and the Taiwan and Hong Kong
//     variant forms) to its Simplified form, rune by rune, and leaves every
//     other rune alone. Search folds both the indexed text and the query,
//     so 產業類別 and 产业类别 become the same terms. The table is built
//     once per process from the single-character entries of OpenCC's tw2s
//     and hk2s conversions (about 4,000 runes, about 50 ms);
//     a fold is then one array lookup per CJK rune. Only mappings that keep
//     a rune's UTF-8 length are kept, so a folded text has the byte offsets
//     of the original (tokens' offsets point into the text as written).
//     Folding is lossy on purpose (乾 and 幹 both become 干) and
//     idempotent (the few runes OpenCC maps in two steps, 麼 → 么 → 幺,
//     fold to the end of the chain): it is a search key, never shown.
//   - Detect tells which script a text is written in, by counting runes
//     that exist only in Traditional (those Fold changes) against runes
//     that exist only in Simplified (those OpenCC's s2t changes and does
//     not also list as Traditional). Its data is loaded on first use
//     (OpenCC's phrase dictionary, about 250 ms), never by folding.
//   - ToTraditional converts text to Traditional Chinese (Taiwan standard,
//     OpenCC s2tw, phrase-aware); it is for short texts such as an
//     answer's own words (about 0.5 MB/s), not for indexing.
package hanzi

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/liuzl/da"
	"github.com/liuzl/gocc"
)

// Script is the script a Chinese text is written in.
type Script int

const (
	// Unknown: no Chinese character that tells (no CJK, or only characters
	// shared by both scripts, or as many of one kind as of the other).
	Unknown Script = iota
	// Simplified Chinese.
	Simplified
	// Traditional Chinese.
	Traditional
)

// String returns "unknown", "simplified" or "traditional".
func (s Script) String() string {
	switch s {
	case Simplified:
		return "simplified"
	case Traditional:
		return "traditional"
	}
	return "unknown"
}

// The dense table covers the BMP block that holds every CJK rune OpenCC
// maps (radicals U+2E80 up to the compatibility ideographs U+FAFF); other
// runes, the supplementary planes among them, go through a small map.
const (
	denseLo = 0x2E80
	denseHi = 0xFB00
)

// tables is the fold data built once from OpenCC.
type tables struct {
	fold   []uint16      // fold[r-denseLo]: the folded rune, 0 = unchanged
	astral map[rune]rune // folds outside the dense range
}

// data builds the fold tables on first use (about 50 ms); they are
// read-only afterwards.
var data = sync.OnceValues(build)

// simplifiedData is what Detect and ToTraditional need beyond the fold
// tables: OpenCC's s2tw converter (its phrase dictionary takes about
// 250 ms to load, so it is built only when a script must be told or
// converted, never for indexing) and simp[r-denseLo], true when r exists
// only in Simplified. Read-only once built.
type simplifiedData struct {
	s2tw *gocc.OpenCC
	simp []bool
}

var simplified = sync.OnceValues(buildSimplified)

func buildSimplified() (*simplifiedData, error) {
	t, err := data()
	if err != nil {
		return nil, err
	}
	cc, err := gocc.New("s2tw")
	if err != nil {
		return nil, fmt.Errorf("hanzi: opencc s2tw: %w", err)
	}
	sd := &simplifiedData{s2tw: cc, simp: make([]bool, denseHi-denseLo)}
	for _, g := range cc.DictChains {
		for _, d := range g.Dicts {
			forEachEntry(d, func(key string, values []string) {
				r, n := utf8.DecodeRuneInString(key)
				if n != len(key) || r < denseLo || r >= denseHi || t.lookup(r) != r {
					return
				}
				for _, v := range values {
					if v == key {
						return // also written in Traditional (台, 后, 里)
					}
				}
				sd.simp[r-denseLo] = true
			})
		}
	}
	return sd, nil
}

// Ready builds the tables if they are not built yet and reports an error
// if OpenCC's data cannot be loaded (it is embedded in the binary, so this
// is a build defect). Fold and FoldRune call it themselves and fall back to
// the identity when it fails; Ready lets a caller check once.
func Ready() error {
	_, err := data()
	return err
}

func build() (*tables, error) {
	t := &tables{
		fold:   make([]uint16, denseHi-denseLo),
		astral: map[rune]rune{},
	}
	// Runes that OpenCC's standard conversion keeps, and the Simplified forms
	// themselves, stay as they are (keepSimplified): the Taiwan variant
	// table would otherwise fold 著 (著名) to 着 and 么 to 幺, merging two
	// characters of a Simplified text.
	var keep map[rune]bool
	for _, conv := range []string{"tw2s", "hk2s"} {
		cc, err := gocc.New(conv)
		if err != nil {
			return nil, fmt.Errorf("hanzi: opencc %s: %w", conv, err)
		}
		if keep == nil {
			keep = keepSimplified(cc)
		}
		for _, r := range singleRuneKeys(cc) {
			if keep[r] {
				continue
			}
			out, err := cc.Convert(string(r))
			if err != nil {
				return nil, fmt.Errorf("hanzi: opencc %s %q: %w", conv, r, err)
			}
			o, n := utf8.DecodeRuneInString(out)
			if n != len(out) || o == r || o == utf8.RuneError || utf8.RuneLen(o) != utf8.RuneLen(r) {
				continue
			}
			if t.lookup(r) != r {
				continue // the first conversion (Taiwan's) wins
			}
			if r >= denseLo && r < denseHi && o < 1<<16 {
				t.fold[r-denseLo] = uint16(o)
			} else {
				t.astral[r] = o
			}
		}
	}
	t.closeChains()
	return t, nil
}

// closeChains makes folding idempotent: OpenCC maps a few runes to runes
// it maps again (麼 → 么 → 幺, 薴 → 苧 → 苎); each then folds to the end of
// its chain, so that a text and its folded form fold alike.
func (t *tables) closeChains() {
	end := func(r rune) rune {
		for range 8 { // chains are at most two steps long; 8 guards cycles
			o := t.lookup(r)
			if o == r {
				break
			}
			r = o
		}
		return r
	}
	for i, o := range t.fold {
		if o != 0 {
			t.fold[i] = uint16(end(rune(o)))
		}
	}
	for r, o := range t.astral {
		t.astral[r] = end(o)
	}
}

// keepSimplified returns the runes that OpenCC's tw2s data cc shows to be
// Simplified characters as well: those whose TSCharacters entry maps the
// rune to itself first (著 → 著, 沈 → 沈 沉), and those that are the
// Simplified form of another rune (么 of 麼, 余 of 餘), which the Taiwan
// variant table would otherwise map on (么 → 幺).
func keepSimplified(cc *gocc.OpenCC) map[rune]bool {
	keep := map[rune]bool{}
	for _, g := range cc.DictChains {
		for i, d := range g.Dicts {
			if i >= len(g.Files) || g.Files[i] != "TSCharacters.txt" {
				continue
			}
			forEachEntry(d, func(key string, values []string) {
				r, n := utf8.DecodeRuneInString(key)
				if n != len(key) {
					return
				}
				if len(values) > 0 && values[0] == key {
					keep[r] = true // standard conversion keeps it (著 → 著)
				}
				for _, v := range values {
					if o, m := utf8.DecodeRuneInString(v); m == len(v) && v != key {
						keep[o] = true // a Simplified form
					}
				}
			})
		}
	}
	return keep
}

// singleRuneKeys returns the one-rune keys of every dictionary of cc.
func singleRuneKeys(cc *gocc.OpenCC) []rune {
	var out []rune
	for _, g := range cc.DictChains {
		for _, d := range g.Dicts {
			forEachEntry(d, func(key string, _ []string) {
				if r, n := utf8.DecodeRuneInString(key); n == len(key) && r != utf8.RuneError {
					out = append(out, r)
				}
			})
		}
	}
	return out
}

// forEachEntry calls fn with every key of d and its values.
func forEachEntry(d *da.Dict, fn func(key string, values []string)) {
	for _, id := range d.Trie.PrefixPredict(nil, 0) {
		key, err := d.Trie.Key(id)
		if err != nil {
			continue
		}
		v, err := d.Trie.Value(id)
		if err != nil || v < 0 || v >= len(d.Values) {
			continue
		}
		fn(string(key), d.Values[v])
	}
}

func (t *tables) lookup(r rune) rune {
	if r >= denseLo && r < denseHi {
		if o := t.fold[r-denseLo]; o != 0 {
			return rune(o)
		}
		return r
	}
	if r >= 1<<16 {
		if o, ok := t.astral[r]; ok {
			return o
		}
	}
	return r
}

// FoldRune returns the Simplified form of r, or r itself.
func FoldRune(r rune) rune {
	t, err := data()
	if err != nil {
		return r
	}
	return t.lookup(r)
}

// Fold returns s with every Traditional character replaced by its
// Simplified form (see the package doc). The result has the same length in
// bytes and the same rune boundaries as s; s itself is returned when
// nothing changes.
func Fold(s string) string {
	i := firstFoldable(s)
	if i < 0 {
		return s
	}
	b := []byte(s)
	FoldBytes(b[i:])
	return string(b)
}

// firstFoldable returns the offset of the first rune of s that might fold
// (a byte ≥ 0xE2 starts every rune from U+2000 on), or -1.
func firstFoldable(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xE2 {
			return i
		}
	}
	return -1
}

// FoldBytes folds b in place (see Fold); its length never changes. Invalid
// UTF-8 is left as it is.
func FoldBytes(b []byte) {
	t, err := data()
	if err != nil {
		return
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0xE2 {
			i++
			continue
		}
		if c <= 0xEF && i+2 < len(b) && b[i+1]&0xC0 == 0x80 && b[i+2]&0xC0 == 0x80 {
			// A three-byte rune (the whole BMP from U+2000 on), decoded
			// inline: this is the loop of every Chinese text.
			r := rune(c&0x0F)<<12 | rune(b[i+1]&0x3F)<<6 | rune(b[i+2]&0x3F)
			if r >= denseLo && r < denseHi {
				if o := t.fold[r-denseLo]; o != 0 {
					b[i] = 0xE0 | byte(o>>12)
					b[i+1] = 0x80 | byte(o>>6)&0x3F
					b[i+2] = 0x80 | byte(o)&0x3F
				}
			}
			i += 3
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if o := t.lookup(r); o != r && n > 1 {
			utf8.EncodeRune(b[i:i+n], o)
		}
		i += n
	}
}

// Detect returns the script s is written in: Traditional when it holds
// more Traditional-only characters than Simplified-only ones, Simplified
// when the reverse, else Unknown.
func Detect(s string) Script {
	t, err := data()
	if err != nil {
		return Unknown
	}
	sd, err := simplified()
	if err != nil {
		return Unknown
	}
	trad, simp := 0, 0
	for _, r := range s {
		if r < denseLo {
			continue
		}
		if t.lookup(r) != r {
			trad++
		} else if r < denseHi && sd.simp[r-denseLo] {
			simp++
		}
	}
	switch {
	case trad > simp:
		return Traditional
	case simp > trad:
		return Simplified
	}
	return Unknown
}

// ToTraditional converts s to Traditional Chinese (Taiwan standard, OpenCC
// s2tw). Text without Chinese comes back unchanged. It is meant for short
// texts (an answer's own sentences): OpenCC's phrase matching runs at
// about half a megabyte a second.
func ToTraditional(s string) (string, error) {
	if firstFoldable(s) < 0 {
		return s, nil
	}
	sd, err := simplified()
	if err != nil {
		return "", err
	}
	out, err := sd.s2tw.Convert(s)
	if err != nil {
		return "", fmt.Errorf("hanzi: convert to traditional: %w", err)
	}
	return out, nil
}
