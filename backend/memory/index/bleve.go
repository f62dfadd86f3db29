package index

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	regexpchar "github.com/blevesearch/bleve/v2/analysis/char/regexp"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/exception"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/index/scorch/mergeplan"
	"github.com/blevesearch/bleve/v2/mapping"
	bindex "github.com/blevesearch/bleve_index_api"
)

// Names used inside the Bleve mapping. The analyzer is built through the
// index mapping (custom tokenizer/filter/analyzer entries), never through the
// global Bleve registry.
const (
	// AnalyzerName is the text analyzer: unicode word segmentation in which
	// every "other symbol" rune (Unicode category So: emoji such as 🧪 or ✅,
	// dingbats, ©) is a token of its own, then CJK width folding,
	// lower-casing and CJK bigrams that also emit unigrams (so one-character
	// CJK words and words shorter than a bigram match). Emoji modifiers
	// (variation selectors, skin tones, zero-width joiners) are dropped, so
	// "❤️" matches "❤" and a ZWJ sequence matches its parts. Before
	// segmentation, underscores at the edges of words are removed
	// (trimUnderscores), so `_detect_project_name()`, `__init__` and
	// Markdown's `__bold__` index as detect_project_name, init and bold.
	AnalyzerName = "atrium_text"
	trimFilter   = "atrium_trim_underscores"
	bigramFilter = "atrium_cjk_bigram"
	tokenizer    = "atrium_words_symbols"
	textField    = "text"
	// pathField holds the chunk's file path as one keyword term (indexed,
	// not stored, no norms or positions): the posting list of a path is the
	// set of that file's chunks, from which a search builds its scope
	// (scope.go).
	pathField = "path"
	// dirField holds the folder of the chunk's file (path.Dir) as one
	// keyword term: a scope that takes or leaves a whole folder (a role's
	// memory) marks it with one posting list instead of one per file.
	dirField = "dir"
	// symbolPattern selects the runes the tokenizer keeps as single-rune
	// tokens although Unicode word segmentation would drop them.
	symbolPattern = `\p{So}`
	// trimUnderscores matches runs of "_" that start or end a word (Unicode
	// segmentation counts "_" as a word character); trimReplace keeps the
	// neighbouring rune and puts a space where the underscores were.
	trimUnderscores = `(^|[^\p{L}\p{N}_])_+|_+([^\p{L}\p{N}_]|$)`
	trimReplace     = "${1} ${2}"
	// analyzerVersion is stored in the Bleve index; a change recreates it.
	// 1: unicode words + CJK bigrams; 2: symbols (So) kept as tokens, term
	// vectors stored; 3: underscores trimmed from word edges; 4: English
	// possessives and Snowball stems; 5: the keyword field "path"; 6: the
	// keyword field "dir"; 7: Traditional Chinese folded to Simplified
	// (scriptFold).
	analyzerVersion = "7"
)

var (
	internalGeneration = []byte("atrium.generation")
	internalAnalyzer   = []byte("atrium.analyzer")
)

// bleveRuntime keeps a second opener of the same directory from blocking forever.
func bleveRuntime() map[string]interface{} {
	return map[string]interface{}{"bolt_timeout": "10s"}
}

// NewMapping returns the Bleve index mapping used by the Store: BM25 scoring,
// one indexed (not stored) field "text" analysed by [AnalyzerName], with term
// vectors.
func NewMapping() (*mapping.IndexMappingImpl, error) {
	im := bleve.NewIndexMapping()
	im.ScoringModel = bindex.BM25Scoring
	if err := im.AddCustomTokenFilter(bigramFilter, map[string]interface{}{
		"type":           cjk.BigramName,
		"output_unigram": true,
	}); err != nil {
		return nil, fmt.Errorf("bleve mapping: %w", err)
	}
	if err := im.AddCustomCharFilter(trimFilter, map[string]interface{}{
		"type":    regexpchar.Name,
		"regexp":  trimUnderscores,
		"replace": trimReplace,
	}); err != nil {
		return nil, fmt.Errorf("bleve mapping: %w", err)
	}
	if err := im.AddCustomTokenizer(tokenizer, map[string]interface{}{
		"type":       exception.Name,
		"exceptions": []string{symbolPattern},
		"tokenizer":  unicode.Name,
	}); err != nil {
		return nil, fmt.Errorf("bleve mapping: %w", err)
	}
	if err := im.AddCustomAnalyzer(AnalyzerName, map[string]interface{}{
		"type":          custom.Name,
		"char_filters":  []string{trimFilter},
		"tokenizer":     tokenizer,
		"token_filters": []string{cjk.WidthName, lowercase.Name, en.PossessiveName, en.SnowballStemmerName, bigramFilter},
	}); err != nil {
		return nil, fmt.Errorf("bleve mapping: %w", err)
	}
	im.DefaultAnalyzer = AnalyzerName
	fm := bleve.NewTextFieldMapping()
	fm.Analyzer = AnalyzerName
	fm.Store = false
	fm.IncludeInAll = false
	// Term vectors (positions) let a search report which query terms a
	// chunk contains and where, for coverage and the phrase test. Chunks
	// are indexed as chunkTextFields, which keep none for CJK bigrams
	// (field.go).
	fm.IncludeTermVectors = true
	fm.DocValues = false
	pm := bleve.NewKeywordFieldMapping()
	pm.Store = false
	pm.IncludeInAll = false
	pm.IncludeTermVectors = false
	pm.DocValues = false
	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(textField, fm)
	dm.AddFieldMappingsAt(pathField, pm)
	dm.AddFieldMappingsAt(dirField, pm)
	im.DefaultMapping = dm
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false
	return im, nil
}

type bleveDoc struct {
	Text string `json:"text"`
	Path string `json:"path"`
	Dir  string `json:"dir"`
}

// newBleveDoc is the Bleve document of a chunk of file p.
func newBleveDoc(text, p string) bleveDoc {
	return bleveDoc{Text: text, Path: p, Dir: path.Dir(p)}
}

func docID(id int64) string { return strconv.FormatInt(id, 10) }

// openBleve opens the Bleve index, creating it when missing and moving a
// corrupt one aside. A Bleve index whose generation differs from the SQLite
// meta (or with an older analyzer) is recreated; reconcile refills it.
func (s *Store) openBleve() error {
	_, statErr := os.Stat(s.blPath)
	if statErr == nil {
		idx, err := openBleveSafely(s.blPath)
		if err == nil {
			gen, gerr := idx.GetInternal(internalGeneration)
			av, aerr := idx.GetInternal(internalAnalyzer)
			if gerr == nil && aerr == nil && string(gen) == s.meta.Generation && string(av) == analyzerVersion {
				s.bl = idx
				s.textAn = newTextAnalyzer(s.mappingAnalyzer())
				return nil
			}
			_ = idx.Close()
			s.log.Info("memory keyword index belongs to another database generation or analyzer version; rebuilding it from SQLite", "path", s.blPath, "analyzer", analyzerVersion)
			if err := os.RemoveAll(s.blPath); err != nil {
				return fmt.Errorf("open bleve: %w", err)
			}
		} else {
			s.log.Warn("memory keyword index unreadable; moving it aside and rebuilding", "path", s.blPath, "err", err)
			if merr := moveAside(s.blPath, false); merr != nil {
				return fmt.Errorf("open bleve: %w (and moving it aside failed: %v)", err, merr)
			}
		}
	} else if !errors.Is(statErr, os.ErrNotExist) {
		return fmt.Errorf("open bleve: %w", statErr)
	}
	m, err := NewMapping()
	if err != nil {
		return err
	}
	idx, err := bleve.NewUsing(s.blPath, m, bleve.Config.DefaultIndexType, bleve.Config.DefaultKVStore, bleveRuntime())
	if err != nil {
		return fmt.Errorf("create bleve: %w", err)
	}
	if err := idx.SetInternal(internalAnalyzer, []byte(analyzerVersion)); err != nil {
		_ = idx.Close()
		return fmt.Errorf("create bleve: %w", err)
	}
	// The generation is written only after a successful refill (reconcile),
	// so a crash during the refill recreates the index again next time.
	s.bl = idx
	s.textAn = newTextAnalyzer(s.mappingAnalyzer())
	s.blFresh = true
	return nil
}

// openBleveSafely opens the Bleve index at path. Bleve panics on some
// damaged segment files (zapx reads lengths from the file without bounds
// checks): the panic is returned as an error, so that the index is moved
// aside and rebuilt from SQLite instead of taking the process down.
func openBleveSafely(path string) (idx bleve.Index, err error) {
	defer func() {
		if p := recover(); p != nil {
			idx, err = nil, fmt.Errorf("open bleve: damaged index: %v", p)
		}
	}()
	return bleve.OpenUsing(path, bleveRuntime())
}

// analyze returns the distinct terms of text under the Store's analyzer, in
// order of first appearance.
func (s *Store) analyze(text string) []string {
	an := s.analyzer()
	if an == nil {
		return nil
	}
	return distinctTerms(an.Analyze([]byte(text)))
}

// analyzeText returns the analyzer's token stream of text. Its length is
// the field length Bleve records for the chunk (its norm is 1/√length),
// summed per file into files.tokens for BM25's average length (scope.go);
// the stream itself is handed to Bleve (analyzedDoc), so a chunk is
// analysed once.
func (s *Store) analyzeText(text string) analysis.TokenStream {
	if s.textAn != nil {
		return s.textAn.Analyze(text) // the same tokens, faster (analyze.go)
	}
	an := s.analyzer()
	if an == nil {
		return nil
	}
	return an.Analyze([]byte(text))
}

// analyzedDoc builds the Bleve document of chunk id as the mapping does,
// with ts (analyzeText of text) as its text field's tokens, in a
// chunkTextField (field.go).
func (s *Store) analyzedDoc(id int64, text, path string, ts analysis.TokenStream) (*document.Document, error) {
	doc := document.NewDocument(docID(id))
	if err := s.bl.Mapping().MapDocument(doc, newBleveDoc(text, path)); err != nil {
		return nil, fmt.Errorf("bleve: %w", err)
	}
	for i, f := range doc.Fields {
		if tf, ok := f.(*document.TextField); ok && tf.Name() == textField {
			doc.Fields[i] = newChunkTextField(tf.Value(), tf.ArrayPositions(), tf.Options(), ts)
		}
	}
	return doc, nil
}

// indexChunk adds chunk id of file path with the given text to b, analysed
// as PutFile analyses it.
func (s *Store) indexChunk(b *bleve.Batch, id int64, text, path string) error {
	doc, err := s.analyzedDoc(id, text, path, s.analyzeText(text))
	if err != nil {
		return err
	}
	if err := b.IndexAdvanced(doc); err != nil {
		return fmt.Errorf("bleve: %w", err)
	}
	return nil
}

// distinctTerms returns the distinct non-empty terms of toks in order.
func distinctTerms(toks analysis.TokenStream) []string {
	seen := map[string]bool{}
	var out []string
	for _, tok := range toks {
		t := string(tok.Term)
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	return out
}

// phraseTokens returns the token sequence used for phrase matching: every
// analysed token except the CJK bigrams (words, numbers, symbols and single
// CJK characters), in text order. Two texts share a run of these tokens when
// they contain the same words in the same order, whatever spaces or
// punctuation separate them.
func phraseTokens(toks analysis.TokenStream) []string {
	base := make([]*analysis.Token, 0, len(toks))
	for _, t := range toks {
		if t.Type != analysis.Double && len(t.Term) > 0 {
			base = append(base, t)
		}
	}
	sort.SliceStable(base, func(i, j int) bool { return base[i].Start < base[j].Start })
	out := make([]string, len(base))
	for i, t := range base {
		out[i] = string(t.Term)
	}
	return out
}

// analyzer returns the analyzer of chunk texts and queries: the mapping's
// [AnalyzerName] analyzer over the text folded to one Chinese script
// (scriptFold, fold.go).
func (s *Store) analyzer() analysis.Analyzer {
	if an := s.mappingAnalyzer(); an != nil {
		return scriptFold{an}
	}
	return nil
}

// mappingAnalyzer returns the mapping's [AnalyzerName] analyzer as Bleve
// builds it, without the script fold.
func (s *Store) mappingAnalyzer() analysis.Analyzer {
	if im, ok := s.bl.Mapping().(*mapping.IndexMappingImpl); ok {
		return im.AnalyzerNamed(AnalyzerName)
	}
	return nil
}

// refillBleve indexes every SQLite chunk into Bleve (used for a fresh Bleve
// index) and then records the generation.
func (s *Store) refillBleve(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, "SELECT id, text, path FROM chunks ORDER BY id")
	if err != nil {
		return fmt.Errorf("refill bleve: %w", err)
	}
	defer rows.Close()
	b := s.bl.NewBatch()
	n := 0
	for rows.Next() {
		var id int64
		var text, path string
		if err := rows.Scan(&id, &text, &path); err != nil {
			return fmt.Errorf("refill bleve: %w", err)
		}
		if err := s.indexChunk(b, id, text, path); err != nil {
			return fmt.Errorf("refill bleve: %w", err)
		}
		n++
		if b.Size() >= 1000 {
			if err := s.bl.Batch(b); err != nil {
				return fmt.Errorf("refill bleve: %w", err)
			}
			b.Reset()
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("refill bleve: %w", err)
	}
	if b.Size() > 0 {
		if err := s.bl.Batch(b); err != nil {
			return fmt.Errorf("refill bleve: %w", err)
		}
	}
	if _, err := s.db.ExecContext(ctx, "DELETE FROM bleve_journal"); err != nil {
		return fmt.Errorf("refill bleve: %w", err)
	}
	if err := s.bl.SetInternal(internalGeneration, []byte(s.meta.Generation)); err != nil {
		return fmt.Errorf("refill bleve: %w", err)
	}
	if n > 0 {
		s.log.Info("memory keyword index rebuilt from SQLite", "chunks", n)
	}
	return nil
}

// Compact merges the keyword index into a single segment and returns when
// the merge is done. Bleve computes BM25's average field length from the
// segments' term dictionaries, so scores drift slightly while background
// merges run after a write; once the index is one segment (and until the
// next write) every search of the same query scores identically. Searching
// never needs it; tests that compare scores across searches use it.
func (s *Store) Compact(ctx context.Context) error {
	ix, err := s.bl.Advanced()
	if err != nil {
		return fmt.Errorf("compact keyword index: %w", err)
	}
	sc, ok := ix.(*scorch.Scorch)
	if !ok {
		return nil // not a segmented index: nothing to merge
	}
	if err := sc.ForceMerge(ctx, &mergeplan.SingleSegmentMergePlanOptions); err != nil {
		return fmt.Errorf("compact keyword index: %w", err)
	}
	return nil
}
