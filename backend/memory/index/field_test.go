package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
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

// TestChunkTextFieldEqualsTextFieldOnCorpora also checks the invariant
// that dropping bigram locations relies on: no term is both a CJK bigram
// and another token (so a phrase-sequence term never loses a position).
func TestChunkTextFieldEqualsTextFieldOnCorpora(t *testing.T) {
	texts := corpusTexts(t)
	s := openBuiltin(t, t.TempDir())
	bigrams, others := map[string]bool{}, map[string]bool{}
	for _, text := range texts {
		sameField(t, s.Store, text)
		for _, tok := range s.analyzeText(text) {
			if tok.Type == analysis.Double {
				bigrams[string(tok.Term)] = true
			} else {
				others[string(tok.Term)] = true
			}
		}
	}
	for term := range bigrams {
		if others[term] {
			t.Errorf("term %q is a CJK bigram and another token", term)
		}
	}
	t.Logf("%d texts: %d bigram terms, %d other terms", len(texts), len(bigrams), len(others))
}

func TestChunkTextFieldAnalyzeTwice(t *testing.T) {
	s := openBuiltin(t, t.TempDir())
	f := newChunkTextField([]byte("数据库 a b a"), nil, bindex.IndexField|bindex.IncludeTermVectors, s.analyzeText("数据库 a b a"))
	f.Analyze()
	n, terms, size := f.AnalyzedLength(), len(f.AnalyzedTokenFrequencies()), f.Size()
	f.Analyze()
	if n == 0 || f.AnalyzedLength() != n || len(f.AnalyzedTokenFrequencies()) != terms || f.Size() != size {
		t.Fatalf("second Analyze: length %d terms %d size %d, first %d %d %d", f.AnalyzedLength(), len(f.AnalyzedTokenFrequencies()), f.Size(), n, terms, size)
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

	// The journal replay: killed between a bulk group's commit and its
	// Bleve batch.
	dir = t.TempDir()
	b = openBuiltin(t, dir)
	b.BeginBulk()
	b.put(t, "a.md", text)
	b.wmu.Lock()
	err := b.commitBulk()
	b.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	kill(t, b.Store)
	check(openBuiltin(t, dir).Store, "journal replay")
}

// TestMixedSegmentsSearchAlike: an index written before chunkTextField has
// bigram locations in its segments. Segments of both kinds, alone, side by
// side and merged into one, give the same search results (scores, keyword
// scores, coverage, phrase flags) on CMRC 2018 passages and questions plus
// random substrings of the passages (phrases).
func TestMixedSegmentsSearchAlike(t *testing.T) {
	texts := corpusTexts(t)
	var zh []string
	for _, tx := range texts {
		if strings.ContainsRune(tx, '的') && len(zh) < 300 {
			zh = append(zh, tx)
		}
	}
	zh = append(zh, "カタカナのテキストとひらがな、ｶﾀｶﾅ半角 ｶﾞｷﾞ", "发布数据库索引 and the release notes 한국어 텍스트")
	rng := rand.New(rand.NewSource(7))
	qs := []string{"カタカナ", "ｶﾀｶﾅ", "release notes", "数据库索引", "索引数据库", "한국어 텍스트"}
	for len(qs) < 100 {
		rs := []rune(zh[rng.Intn(len(zh))])
		if len(rs) < 20 {
			continue
		}
		at := rng.Intn(len(rs) - 10)
		qs = append(qs, string(rs[at:at+2+rng.Intn(8)]))
	}
	b := openBuiltin(t, t.TempDir())
	for i := 0; i < len(zh); i += 3 {
		b.put(t, fmt.Sprintf("f%03d.md", i), zh[i:min(i+3, len(zh))]...)
	}
	s := b.Store
	ctx := context.Background()
	collect := func() map[string]map[int64][4]any {
		t.Helper()
		out := map[string]map[int64][4]any{}
		for _, q := range qs {
			hs, err := s.Search(ctx, Query{Text: q, MaxResults: 50, MinScore: -1})
			if err != nil {
				t.Fatal(err)
			}
			out[q] = map[int64][4]any{}
			for _, h := range hs {
				out[q][h.ChunkID] = [4]any{h.Score, h.Keyword, h.Coverage, h.Phrase}
			}
		}
		return out
	}
	compact := func() {
		t.Helper()
		if err := s.Compact(ctx); err != nil {
			t.Fatal(err)
		}
	}
	compact()
	states := map[string]map[string]map[int64][4]any{"new": collect()}
	reindexChunks(t, s, true, func(id int64) bool { return id%3 == 0 }, 40)
	states["mixed"] = collect()
	compact()
	states["mixed, merged"] = collect()
	reindexChunks(t, s, true, nil, 1000)
	compact()
	old := collect()
	phrases := 0
	for _, hs := range old {
		for _, h := range hs {
			if h[3].(bool) {
				phrases++
			}
		}
	}
	if phrases < 20 {
		t.Fatalf("only %d phrase hits: the test would not notice lost positions", phrases)
	}
	for name, got := range states {
		for _, q := range qs {
			if !reflect.DeepEqual(got[q], old[q]) {
				t.Errorf("%s: %q: results differ from the old-style index:\n%v\n%v", name, q, got[q], old[q])
			}
		}
	}
}

// reindexChunks indexes the chunks of s with keep(id) (all when keep is
// nil) again, in batches of n: with Bleve's own analysis and
// document.TextField, as the code before chunkTextField did (old), or as
// the Store does.
func reindexChunks(t *testing.T, s *Store, old bool, keep func(int64) bool, n int) {
	t.Helper()
	rows, err := s.db.Query("SELECT id, text, path FROM chunks ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	batch := s.bl.NewBatch()
	for rows.Next() {
		var id int64
		var text, path string
		if err := rows.Scan(&id, &text, &path); err != nil {
			t.Fatal(err)
		}
		if keep != nil && !keep(id) {
			continue
		}
		if old {
			err = batch.Index(docID(id), newBleveDoc(text, path))
		} else {
			err = s.indexChunk(batch, id, text, path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if batch.Size() >= n {
			if err := s.bl.Batch(batch); err != nil {
				t.Fatal(err)
			}
			batch.Reset()
		}
	}
	if err := errors.Join(rows.Err(), rows.Close(), s.bl.Batch(batch)); err != nil {
		t.Fatal(err)
	}
}
