package index

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/document"
	bindex "github.com/blevesearch/bleve_index_api"
)

// replayAnalyzer hands document.TextField a token stream analysed before.
type replayAnalyzer struct{ ts analysis.TokenStream }

func (r replayAnalyzer) Analyze([]byte) analysis.TokenStream { return r.ts }

// sameField fails t unless the chunkTextField of text gives what Bleve's
// document.TextField gives with the same tokens, minus the locations of
// CJK bigrams: length, terms, frequencies, locations in order, and its Size.
func sameField(t *testing.T, s *Store, text string) {
	t.Helper()
	opts := bindex.IndexField | bindex.IncludeTermVectors
	ap := []uint64{}
	got := newChunkTextField([]byte(text), ap, opts, s.analyzeText(text))
	ts := s.analyzeText(text)
	want := document.NewTextFieldCustom(textField, ap, []byte(text), opts, replayAnalyzer{ts})
	got.Analyze()
	want.Analyze()
	bigram := map[[3]int]bool{}
	for _, tok := range ts {
		if tok.Type == analysis.Double {
			bigram[[3]int{tok.Start, tok.End, tok.Position}] = true
		}
	}
	if got.AnalyzedLength() != want.AnalyzedLength() {
		t.Fatalf("%.60q: length %d, TextField %d", text, got.AnalyzedLength(), want.AnalyzedLength())
	}
	gf, wf := got.AnalyzedTokenFrequencies(), want.AnalyzedTokenFrequencies()
	if len(gf) != len(wf) {
		t.Fatalf("%.60q: %d terms, TextField %d", text, len(gf), len(wf))
	}
	for term, w := range wf {
		g := gf[term]
		if g == nil || string(g.Term) != string(w.Term) || g.Frequency() != w.Frequency() {
			t.Fatalf("%.60q: term %q is %+v, TextField %+v", text, term, g, w)
		}
		var wl []string
		for _, l := range w.Locations {
			if !bigram[[3]int{l.Start, l.End, l.Position}] {
				wl = append(wl, fmt.Sprintf("%+v", *l))
			}
		}
		var gl []string
		for _, l := range g.Locations {
			gl = append(gl, fmt.Sprintf("%+v", *l))
		}
		if !slices.Equal(gl, wl) {
			t.Fatalf("%.60q: term %q locations %v, want %v", text, term, gl, wl)
		}
	}
	if fs := got.Size() - got.baseSize(); fs != gf.Size() {
		t.Fatalf("%.60q: frequencies size %d, TokenFrequencies.Size %d", text, fs, gf.Size())
	}
}

func TestChunkTextFieldEqualsTextField(t *testing.T) {
	s := openBuiltin(t, t.TempDir())
	texts := []string{
		"", "   ", "one",
		"the cat saw the other cat; the end", // repeated terms
		"连续63天零回滚率，发布 数据库 索引；数据库的索引 ＡＢＣ全角 123",
		"日本語のテキスト カタカナ 한국어 텍스트 mixed with English 日本",
		"emoji 🎉🎉 and ✅ QK-7731 ✅",
		"bad \xff\xfe bytes \xe4\xb8 cut rune",
		strings.Repeat("memory search 记忆检索 ", 200),
	}
	for _, text := range texts {
		sameField(t, s.Store, text)
	}
}

func TestChunkTextFieldEqualsTextFieldOnCorpora(t *testing.T) {
	texts := corpusTexts(t)
	s := openBuiltin(t, t.TempDir())
	for _, text := range texts {
		sameField(t, s.Store, text)
	}
}

// TestBigramsHaveNoLocations checks what reaches the index, through
// PutFile and through a refill: a CJK bigram's postings carry its
// frequency and no locations; unigrams and words keep theirs, and the
// phrase test still finds a Chinese phrase.
func TestBigramsHaveNoLocations(t *testing.T) {
	dir := t.TempDir()
	b := openBuiltin(t, dir)
	text := "发布数据库索引 and the release notes"
	b.put(t, "a.md", text)
	check := func(s *Store, when string) {
		t.Helper()
		ix, err := s.bl.Advanced()
		if err != nil {
			t.Fatal(err)
		}
		r, err := ix.Reader()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for term, wantLocs := range map[string]bool{"数据": false, "据库": false, "数": true, "库": true, "releas": true} {
			tfr, err := r.TermFieldReader(context.Background(), []byte(term), textField, true, true, true)
			if err != nil {
				t.Fatal(err)
			}
			d, err := tfr.Next(nil)
			tfr.Close()
			if err != nil || d == nil {
				t.Fatalf("%s: term %q not indexed (%v)", when, term, err)
			}
			if d.Freq != 1 || (len(d.Vectors) > 0) != wantLocs {
				t.Errorf("%s: term %q: freq %d, %d locations; want freq 1, locations %v", when, term, d.Freq, len(d.Vectors), wantLocs)
			}
		}
		for q, phrase := range map[string]bool{"数据库索引": true, "release notes": true, "索引数据库": false} {
			hs, err := s.Search(context.Background(), Query{Text: q, Vector: b.vec(t, q), MaxResults: 1, MinScore: -1})
			if err != nil || len(hs) != 1 || hs[0].Phrase != phrase {
				t.Fatalf("%s: search %q: %+v %v; want one hit, phrase %v", when, q, hs, err, phrase)
			}
		}
	}
	check(b.Store, "PutFile")
	b.Close()
	if err := os.RemoveAll(filepath.Join(dir, BleveName)); err != nil {
		t.Fatal(err)
	}
	check(openBuiltin(t, dir).Store, "refill") // a fresh Bleve index is refilled from SQLite
}
