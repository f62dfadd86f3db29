package index

import (
	"unsafe"

	"github.com/blevesearch/bleve/v2/analysis"
	bindex "github.com/blevesearch/bleve_index_api"
)

// The chunk text field.
//
// A chunk's text reaches Bleve as a chunkTextField, not as Bleve's
// document.TextField, for two reasons.
//
// Term vectors of CJK bigrams are not kept. The text field has term vectors
// because the phrase test (hasPhrase) reads the positions of the query's
// phrase-sequence terms, and that sequence is every token but the CJK
// bigrams (phraseTokens): no search reads a bigram's positions. In Chinese
// text a bigram follows nearly every character, so they are up to half of
// the locations that a segment build encodes and every merge decodes and
// writes again. A bigram token still counts in its term's frequency and in
// the field length, so BM25 is unchanged.
//
// Term frequencies are built with a few allocations per chunk instead of a
// few per distinct term (analysis.TokenFrequency's), and the field's size,
// which scorch asks of every analysed document for its statistics, is
// computed once instead of by walking every location.
//
// Apart from the bigrams' locations a chunkTextField gives Bleve what a
// document.TextField with the same token stream gives: the same terms,
// frequencies, locations (in token order) and length
// (TestChunkTextFieldEqualsTextField).

// chunkTextField is the Bleve field textField of one chunk, with its token
// stream analysed beforehand (Store.analyzeText). It implements
// document.Field.
type chunkTextField struct {
	value          []byte
	arrayPositions []uint64
	options        bindex.FieldIndexingOptions
	tokens         analysis.TokenStream
	length         int
	freqs          bindex.TokenFrequencies
	size           int
}

func newChunkTextField(value []byte, arrayPositions []uint64, options bindex.FieldIndexingOptions, ts analysis.TokenStream) *chunkTextField {
	f := &chunkTextField{value: value, arrayPositions: arrayPositions, options: options, tokens: ts}
	f.size = f.baseSize()
	return f
}

func (f *chunkTextField) Name() string                                      { return textField }
func (f *chunkTextField) ArrayPositions() []uint64                          { return f.arrayPositions }
func (f *chunkTextField) Options() bindex.FieldIndexingOptions              { return f.options }
func (f *chunkTextField) Value() []byte                                     { return f.value }
func (f *chunkTextField) NumPlainTextBytes() uint64                         { return uint64(len(f.value)) }
func (f *chunkTextField) EncodedFieldType() byte                            { return 't' }
func (f *chunkTextField) AnalyzedLength() int                               { return f.length }
func (f *chunkTextField) AnalyzedTokenFrequencies() bindex.TokenFrequencies { return f.freqs }
func (f *chunkTextField) Size() int                                         { return f.size }

// Text returns the field's text (bleve_index_api.TextField).
func (f *chunkTextField) Text() string { return string(f.value) }

// Analyze turns the token stream into term frequencies. Scorch's analysis
// workers call it once per document; a second call builds the same result
// again, as document.TextField's does.
func (f *chunkTextField) Analyze() {
	ts := f.tokens
	f.length = len(ts)
	var freqBytes int
	f.freqs, freqBytes = f.termFrequencies(ts)
	f.size = f.baseSize() + freqBytes
}

// termFrequencies groups ts by term. The TokenFreqs live in one slab and
// the locations of each term are a sub-slice of one slab of pointers, in
// token order, so a chunk costs four allocations besides the map. A term
// has at most as many locations as occurrences, which sizes its sub-slice.
// It also returns the size of the result as TokenFrequencies.Size counts it.
func (f *chunkTextField) termFrequencies(ts analysis.TokenStream) (bindex.TokenFrequencies, int) {
	n := len(ts)
	freqs := make(bindex.TokenFrequencies, n)
	slab := make([]bindex.TokenFreq, 0, n) // never grows: pointers into it stay valid
	owner := make([]*bindex.TokenFreq, n)
	for i, tok := range ts {
		tf := freqs[string(tok.Term)]
		if tf == nil {
			slab = append(slab, bindex.TokenFreq{Term: tok.Term})
			tf = &slab[len(slab)-1]
			freqs[string(tok.Term)] = tf
		}
		tf.SetFrequency(tf.Frequency() + 1)
		owner[i] = tf
	}
	size := sizeOfPtr + len(slab)*(sizeOfString+sizeOfPtr+sizeOfTokenFreq)
	for i := range slab {
		size += 2 * len(slab[i].Term) // the map key and the term
	}
	if f.options.IncludeTermVectors() {
		locs := make([]bindex.TokenLocation, n)
		ptrs := make([]*bindex.TokenLocation, n)
		off := 0
		for i := range slab {
			c := slab[i].Frequency()
			slab[i].Locations = ptrs[off : off : off+c]
			off += c
		}
		for i, tok := range ts {
			if tok.Type == analysis.Double {
				continue
			}
			locs[i] = bindex.TokenLocation{
				ArrayPositions: f.arrayPositions,
				Start:          tok.Start,
				End:            tok.End,
				Position:       tok.Position,
			}
			owner[i].Locations = append(owner[i].Locations, &locs[i])
			size += sizeOfTokenLocation + len(f.arrayPositions)*sizeOfUint64
		}
		for i := range slab {
			if len(slab[i].Locations) == 0 {
				slab[i].Locations = nil // a bigram's term
			}
		}
	}
	if f.options.SkipFreqNorm() {
		for i := range slab {
			slab[i].SetFrequency(0)
		}
	}
	return freqs, size
}

// Sizes as bleve_index_api counts them (TokenFrequencies.Size and friends).
const (
	sizeOfPtr           = int(unsafe.Sizeof(uintptr(0)))
	sizeOfString        = int(unsafe.Sizeof(""))
	sizeOfUint64        = 8
	sizeOfTokenFreq     = int(unsafe.Sizeof(bindex.TokenFreq{}))
	sizeOfTokenLocation = int(unsafe.Sizeof(bindex.TokenLocation{}))
	sizeOfField         = int(unsafe.Sizeof(chunkTextField{}))
)

func (f *chunkTextField) baseSize() int {
	return sizeOfField + sizeOfPtr + len(textField) + len(f.arrayPositions)*sizeOfUint64 + len(f.value)
}
