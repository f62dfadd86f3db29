package index

import (
	"github.com/blevesearch/bleve/v2/analysis"

	"github.com/atrium-dev/atrium/backend/memory/hanzi"
)

// Simplified and Traditional Chinese find each other (issue 15).
//
// Every text the keyword leg analyses, chunk texts at index time and
// queries at search time, is first folded to one script: each Traditional
// character becomes its Simplified form, rune by rune, per OpenCC's data
// (package hanzi). 產業類別 and 产业类别 then give the same unigrams and
// bigrams, so either finds a note written in the other, with the same BM25
// statistics. The fold keeps every rune's UTF-8 length, so token offsets
// still point into the text as written; stored texts and snippets are
// never folded. analyzerVersion 7 introduced the fold: an older keyword
// index is rebuilt from SQLite on open.

// scriptFold is an analyzer that folds its input to one Chinese script and
// hands it to the wrapped analyzer.
type scriptFold struct{ an analysis.Analyzer }

// Analyze folds a copy of input (the caller's bytes are not changed) and
// analyses it.
func (f scriptFold) Analyze(input []byte) analysis.TokenStream {
	b := append([]byte(nil), input...)
	hanzi.FoldBytes(b)
	return f.an.Analyze(b)
}
