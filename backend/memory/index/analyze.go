package index

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/exception"
	unicodetok "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"

	"github.com/atrium-dev/atrium/backend/memory/hanzi"
)

// The chunk analyzer.
//
// Analysis is a sixth of a full sync's CPU, and four steps of the
// [AnalyzerName] chain do work whose result is known in advance for most
// text: the char filter trimUnderscores cannot change a text without "_";
// the tokenizer's exception regexp (symbolPattern, \p{So}) finds nothing in
// a text without an "other symbol" rune, and the exception tokenizer then
// returns exactly the unicode tokenizer's tokens; the CJK width filter
// changes only terms with a fullwidth or halfwidth form (U+FF01–U+FF9F) or
// invalid UTF-8, which it re-encodes, and rebuilds every other term as it
// was; and the Snowball stemmer is a pure function of the term, which
// repeats (Zipf). textAnalyzer skips the first two when they cannot apply,
// runs the width filter only on the terms it can change, and memoises the
// stemmer, so that analyzeText returns token for token what the mapping's
// analyzer returns (TestTextAnalyzerEqualsMapping, also over the corpora).
// Every chunk text Bleve indexes goes through analyzeText (PutFile, the
// journal replay, the refill: Store.indexChunk); queries use the mapping's
// analyzer.

// maxStemMemo bounds the stemmer memo (distinct terms of at most
// maxStemMemoLen bytes, so under 200 bytes each). Past it, and for longer
// terms, terms are stemmed and not remembered.
const (
	maxStemMemo    = 1 << 17
	maxStemMemoLen = 48
)

// textAnalyzer is the mapping's [AnalyzerName] analyzer with the shortcuts
// described above, over the text folded to one Chinese script (fold.go).
// It is safe for concurrent use.
type textAnalyzer struct {
	full    *analysis.DefaultAnalyzer
	words   analysis.Tokenizer     // the exception tokenizer's remaining tokenizer
	filters []analysis.TokenFilter // full.TokenFilters, the stemmer memoised
}

// newTextAnalyzer wraps an, which must have the shape NewMapping builds it
// with (one char filter, the exception tokenizer, the Snowball stemmer among
// the token filters); for any other analyzer it returns nil and callers use
// an itself.
func newTextAnalyzer(an analysis.Analyzer) *textAnalyzer {
	d, ok := an.(*analysis.DefaultAnalyzer)
	if !ok || len(d.CharFilters) != 1 {
		return nil
	}
	if _, ok := d.Tokenizer.(*exception.ExceptionsTokenizer); !ok {
		return nil
	}
	t := &textAnalyzer{full: d, words: unicodetok.NewUnicodeTokenizer()}
	stemmers := 0
	for _, f := range d.TokenFilters {
		switch tf := f.(type) {
		case *en.EnglishStemmerFilter:
			f = &memoStemmer{stem: tf, terms: map[string]string{}}
			stemmers++
		case *cjk.CJKWidthFilter:
			f = widthFilter{tf}
		}
		t.filters = append(t.filters, f)
	}
	if stemmers != 1 {
		return nil
	}
	return t
}

// Analyze returns the token stream of text, folded to one Chinese script
// first as scriptFold does.
func (t *textAnalyzer) Analyze(text string) analysis.TokenStream {
	input := []byte(text)
	hanzi.FoldBytes(input)
	if strings.Contains(text, "_") {
		input = t.full.CharFilters[0].Filter(input)
	}
	var ts analysis.TokenStream
	if hasOtherSymbol(input) {
		ts = t.full.Tokenizer.Tokenize(input)
	} else {
		ts = t.words.Tokenize(input)
	}
	for _, f := range t.filters {
		ts = f.Filter(ts)
	}
	return ts
}

// hasOtherSymbol reports whether b holds a rune of Unicode category So, the
// class symbolPattern matches. Invalid UTF-8 decodes as U+FFFD, which is So,
// as it is for Go's regexp. No ASCII byte is So.
func hasOtherSymbol(b []byte) bool {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if unicode.Is(unicode.So, r) {
			return true
		}
		i += n
	}
	return false
}

// widthFilter applies the CJK width filter to the tokens whose term it can
// change. The others keep their term slices, which point into the analysed
// text (Analyze's own copy, with disjoint ranges per token): the lowercase
// filter that follows rewrites them in place, and the stemmer gives each
// token a slice of its own.
type widthFilter struct{ width *cjk.CJKWidthFilter }

func (w widthFilter) Filter(input analysis.TokenStream) analysis.TokenStream {
	for i, tok := range input {
		if hasWidthForm(tok.Term) {
			w.width.Filter(input[i : i+1])
		}
	}
	return input
}

// hasWidthForm reports whether the CJK width filter can change term: it
// holds a rune encoded EF BC xx – EF BE xx (U+FF00–U+FFBF, which contains
// the filter's ranges U+FF01–U+FF5E and U+FF65–U+FF9F) or is not valid
// UTF-8 (the filter decodes and re-encodes every term, so invalid bytes
// become U+FFFD).
func hasWidthForm(term []byte) bool {
	for i := 0; i+1 < len(term); i++ {
		if term[i] == 0xEF && term[i+1] >= 0xBC && term[i+1] <= 0xBE {
			return true
		}
	}
	return !utf8.Valid(term)
}

// memoStemmer is a Snowball stemmer filter that remembers the stem of each
// term it has seen (at most maxStemMemo terms).
type memoStemmer struct {
	stem  *en.EnglishStemmerFilter
	mu    sync.RWMutex
	terms map[string]string
}

// Filter stems every token in place, as the stemmer does: each token gets a
// term slice of its own.
func (m *memoStemmer) Filter(input analysis.TokenStream) analysis.TokenStream {
	for _, tok := range input {
		if !stemmable(tok.Term) {
			tok.Term = append([]byte(nil), tok.Term...)
			continue
		}
		m.mu.RLock()
		stem, ok := m.terms[string(tok.Term)]
		m.mu.RUnlock()
		if ok {
			tok.Term = []byte(stem)
			continue
		}
		term := string(tok.Term)
		m.stem.Filter(analysis.TokenStream{tok})
		if len(term) > maxStemMemoLen {
			continue
		}
		m.mu.Lock()
		if len(m.terms) < maxStemMemo {
			m.terms[term] = string(tok.Term)
		}
		m.mu.Unlock()
	}
	return input
}

// stemmable reports whether the English Snowball stemmer can change term.
// Every literal of the algorithm (suffixes, the prelude's "'" and "y", the
// exception words) and its vowel groupings are made of ASCII letters and the
// apostrophe, so a term without one (numbers, CJK, most scripts other than
// Latin) comes out as it went in. Skipping those keeps numbers, codes and
// ideographs, which are many and rarely repeat, out of the memo.
func stemmable(term []byte) bool {
	for _, c := range term {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '\'' {
			return true
		}
	}
	return false
}
