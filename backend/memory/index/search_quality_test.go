package index

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"

	"github.com/atrium-dev/atrium/backend/memory/embed"
)

// Tests of the keyword score (coverage, phrase bonus), the symbol-aware
// analyzer and Query validation, against a real Store (SQLite + sqlite-vec +
// Bleve) with the builtin embedder.

// builtinStore is a Store whose vectors come from the real builtin embedder.
type builtinStore struct {
	*Store
	emb *embed.Builtin
}

func openBuiltin(t *testing.T, dir string) builtinStore {
	t.Helper()
	return openBuiltinQuant(t, dir, 0)
}

// openBuiltinQuant is openBuiltin with Options.QuantizeAbove set (1: the
// quantized vector leg for any index of two vectors or more; -1: never).
func openBuiltinQuant(t *testing.T, dir string, quantizeAbove int) builtinStore {
	t.Helper()
	emb := embed.NewBuiltin(embed.BuiltinOptions{})
	s := mustOpen(t, Options{Dir: dir, Provider: emb.Provider(), Model: emb.Model(), Dims: emb.Dims(), Chunking: "test", QuantizeAbove: quantizeAbove})
	return builtinStore{s, emb}
}

func (b builtinStore) vec(t *testing.T, text string) []float32 {
	t.Helper()
	vs, err := b.emb.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatal(err)
	}
	return vs[0]
}

// put stores one file whose chunks are texts, embedded by the builtin embedder.
func (b builtinStore) put(t *testing.T, path string, texts ...string) {
	t.Helper()
	var cs []ChunkRecord
	for i, tx := range texts {
		cs = append(cs, ChunkRecord{StartLine: i + 1, EndLine: i + 1, Text: tx, Hash: sha(tx), Vector: b.vec(t, tx)})
	}
	f := FileRecord{Path: path, Hash: sha(strings.Join(texts, "\n")), MTime: 1, Size: 1, Layer: "role", Role: "main"}
	if err := b.PutFile(context.Background(), f, cs); err != nil {
		t.Fatalf("PutFile %s: %v", path, err)
	}
}

func (b builtinStore) search(t *testing.T, q string, n int, minScore float64) []Hit {
	t.Helper()
	hs, err := b.Search(context.Background(), Query{Text: q, Vector: b.vec(t, q), MaxResults: n, MinScore: minScore})
	if err != nil {
		t.Fatalf("Search %q: %v", q, err)
	}
	return hs
}

func describeHits(hs []Hit) string {
	var out []string
	for _, h := range hs {
		out = append(out, fmt.Sprintf("%s:%d(%.3f v=%.2f k=%.2f cov=%.2f phrase=%v)", h.Path, h.StartLine, h.Score, h.Vector, h.Keyword, h.Coverage, h.Phrase))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// fillNotes stores a small, realistic mix of English and Chinese notes.
func fillNotes(t *testing.T, b builtinStore) {
	t.Helper()
	en := []string{
		"Deployed the billing service to staging; smoke tests passed and the release notes are in the wiki.",
		"The nightly build failed because of a flaky timeout in the e2e suite; retried and it passed.",
		"Reviewed the pull request for streaming responses and left comments about backpressure.",
		"Wrote a design note on incremental indexing with content hashes and mtime checks.",
		"The user prefers espresso over filter coffee and works from Lisbon in the mornings.",
		"Meeting with the data team about the retention policy for audit logs: keep 90 days.",
		"Fixed a race in the session store: two writers could append the same message twice.",
		"Benchmarked the vector search: p50 0.6 ms, p99 3 ms on the LoCoMo workspaces.",
	}
	zh := []string{
		"今天重构了缓存层，命中率提升到 92%，连续67天零回滚。",
		"补充了集成测试，覆盖率从 71% 到 88%，连续30天每日提交。",
		"修复了并发写入时的死锁问题，连续67天零回滚率，继续保持。",
		"整理了文档，补充了 API 示例和错误码说明。",
		"性能分析：p99 延迟从 120ms 降到 45ms，连续发布 12 次。",
		"✅ 所有测试通过 ✅ 文档已更新 ✅ 发布说明已写好",
	}
	for i := 0; i < 3; i++ {
		for j, tx := range en {
			b.put(t, fmt.Sprintf("memory/en-%d-%d.md", i, j), fmt.Sprintf("%s (week %d)", tx, i+1))
		}
		for j, tx := range zh {
			b.put(t, fmt.Sprintf("memory/zh-%d-%d.md", i, j), fmt.Sprintf("第%d周：%s", i+1, tx))
		}
	}
	b.put(t, "MEMORY.md",
		"# MEMORY.md\n名字：Catalyst 🧪，数字伙伴，负责代码实验室。主人偏好简洁的中文汇报。",
		"里程碑：prompt-router 发布 v1.2，连续63天零回滚率，测试从 81 增加到 142。每周日做一次记忆整理，把每日记录提炼到这里。",
		"技术决策：向量检索选用 sqlite-vec，关键词检索用 Bleve BM25；网关令牌使用 ES256 签名。")
	b.put(t, "memory/ticket.md",
		"Ticket QK-7731 reported by Dana: invoices rendered twice after a refresh. Root cause: a missing idempotency key on the export job.",
		"Follow-up on QK-7731: QK-7731 regression test added, QK-7731 closed.")
}

func TestKeywordScoreAbsolute(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	fillNotes(t, b)
	cases := []struct {
		name, q string
		// want is text of the expected first hit ("" = no hit may reach 0.35).
		want string
	}{
		{"unrelated English", "how to bake sourdough bread", ""},
		{"unrelated Chinese", "火锅 食谱", ""},
		{"stopword", "the", ""},
		{"stopwords", "what is the", ""},
		{"one shared CJK character", "乐谱 练习", ""},
		{"identifier", "QK-7731", "QK-7731"},
		{"identifier, lower case", "qk-7731", "QK-7731"},
		{"hyphenated name", "sqlite-vec", "sqlite-vec"},
		{"algorithm name", "ES256", "ES256"},
		{"English question", "why did the nightly build fail with a timeout?", "flaky timeout"},
		{"Chinese question", "缓存层命中率", "缓存层，命中率"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			all := b.search(t, c.q, 10, -1)
			if c.want == "" {
				if len(all) > 0 && all[0].Score >= 0.35 {
					t.Errorf("%q: best hit clears 0.35: %s", c.q, describeHits(all[:1]))
				}
				return
			}
			hs := b.search(t, c.q, 10, 0.35)
			if len(hs) == 0 || !strings.Contains(hs[0].Text, c.want) {
				t.Errorf("%q: want %q first at ≥ 0.35, got %s (no floor: %s)", c.q, c.want, describeHits(hs), describeHits(all[:min(3, len(all))]))
			}
		})
	}
}

// An identifier found only by the keyword leg clears minScore 0.35 in every
// chunk that contains it, not only in the one with the best BM25 score.
func TestIdentifierEveryChunkClearsFloor(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	fillNotes(t, b)
	qv := make([]float32, b.Meta().Dims) // orthogonal to everything: keyword leg only
	qv[0] = 1
	hs, err := b.Search(context.Background(), Query{Text: "QK-7731", Vector: qv, MaxResults: 6, MinScore: 0.35})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 {
		t.Fatalf("want both QK-7731 chunks, got %s", describeHits(hs))
	}
	for _, h := range hs {
		if h.Coverage != 1 || h.Keyword < KeywordRelBase || h.Score < 0.35 {
			t.Errorf("chunk %s", describeHits([]Hit{h}))
		}
	}
	// The chunk repeating the identifier has the higher BM25 score: rel
	// still orders chunks of equal coverage.
	if hs[0].StartLine != 2 || hs[0].Keyword <= hs[1].Keyword {
		t.Errorf("order %s", describeHits(hs))
	}
}

func TestPhraseRanksFirst(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	fillNotes(t, b)
	for _, q := range []string{"连续63天零回滚率", "连续63天 零回滚率", "prompt-router 发布 v1.2"} {
		hs := b.search(t, q, 5, -1)
		if len(hs) == 0 || hs[0].Path != "MEMORY.md" || hs[0].StartLine != 2 || !hs[0].Phrase {
			t.Errorf("%q: want MEMORY.md:2 first as a phrase match, got %s", q, describeHits(hs))
			continue
		}
		for _, h := range hs[1:] {
			if h.Phrase {
				t.Errorf("%q: near-miss marked as phrase: %s", q, describeHits([]Hit{h}))
			}
		}
	}
	// Same tokens, other order: no phrase.
	hs := b.search(t, "零回滚率 连续63天", 5, -1)
	for _, h := range hs {
		if h.Phrase {
			t.Errorf("reordered query matched as a phrase: %s", describeHits([]Hit{h}))
		}
	}
}

func TestSymbolTokens(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	cases := []struct {
		text string
		want []string
	}{
		{"Catalyst 🧪", []string{"catalyst", "🧪"}},
		{"❤️ ok", []string{"❤", "ok"}},                  // variation selector dropped
		{"👍🏽", []string{"👍"}},                           // skin tone dropped
		{"✅完成", []string{"✅", "完", "完成", "成"}},          // symbol next to CJK
		{"a→b © 2026", []string{"a", "b", "©", "2026"}}, // → is a math symbol (Sm): not a token
		{"??? !!! …", nil},
	}
	for _, c := range cases {
		if got := b.analyze(c.text); !slices.Equal(got, c.want) {
			t.Errorf("analyze(%q) = %q, want %q", c.text, got, c.want)
		}
	}
	fillNotes(t, b)
	hs := b.search(t, "🧪", 5, 0.35)
	if len(hs) == 0 || hs[0].Path != "MEMORY.md" || hs[0].StartLine != 1 {
		t.Errorf("🧪: got %s", describeHits(hs))
	}
	// Punctuation only: no terms, a zero query vector, an empty result.
	q := "???"
	hs, err := b.Search(context.Background(), Query{Text: q, Vector: b.vec(t, q), MaxResults: 5, MinScore: -1})
	if err != nil || len(hs) != 0 {
		t.Errorf("%q: %s, %v", q, describeHits(hs), err)
	}
}

// An index built by an older analyzer is rebuilt from SQLite on open.
func TestAnalyzerVersionRebuild(t *testing.T) {
	dir := t.TempDir()
	b := openBuiltin(t, dir)
	b.put(t, "MEMORY.md", "名字：Catalyst 🧪")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	idx, err := bleve.OpenUsing(filepath.Join(dir, BleveName), bleveRuntime())
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.SetInternal(internalAnalyzer, []byte("1")); err != nil {
		t.Fatal(err)
	}
	// Simulate the old index: drop the document.
	if err := idx.Delete("1"); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := openBuiltin(t, dir)
	hs := b2.search(t, "🧪", 3, -1)
	if len(hs) != 1 || hs[0].Keyword == 0 {
		t.Errorf("after reopening an index of analyzer 1: %s", describeHits(hs))
	}
	av, err := b2.bl.GetInternal(internalAnalyzer)
	if err != nil || string(av) != analyzerVersion {
		t.Errorf("analyzer version %q, %v", av, err)
	}
}

func TestQueryValidation(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	b.put(t, "memory/a.md", "espresso")
	for _, ms := range []float64{math.NaN(), 1.0001, math.Inf(1)} {
		if _, err := b.Search(context.Background(), Query{Text: "espresso", MaxResults: 3, MinScore: ms}); err == nil {
			t.Errorf("MinScore %v accepted", ms)
		}
	}
	for _, ms := range []float64{-1, math.Inf(-1), 0, 1} {
		if _, err := b.Search(context.Background(), Query{Text: "espresso", MaxResults: 3, MinScore: ms}); err != nil {
			t.Errorf("MinScore %v: %v", ms, err)
		}
	}
}

func TestKeywordScoreFormula(t *testing.T) {
	cases := []struct{ cov, rel, want float64 }{
		{1, 1, 1},
		{1, 0, 0.7},        // full coverage clears 0.35 on the floor
		{0.25, 1, 0.25},    // a quarter of the query's information
		{0, 1, 0},          // nothing matched
		{0.5, 1, 0.5},      // half the query's information, best BM25
		{0.5, 0, 0.35},     // half, weakest BM25
		{2, 2, 1},          // clamped
		{math.NaN(), 1, 0}, // defensive
	}
	for _, c := range cases {
		if got := KeywordScore(c.cov, c.rel); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("KeywordScore(%v,%v) = %v, want %v", c.cov, c.rel, got, c.want)
		}
	}
	// bm25IDF matches Bleve's BM25 idf and falls with df.
	if got, want := bm25IDF(100, 1), math.Log(1+99.5/1.5); math.Abs(got-want) > 1e-12 {
		t.Errorf("bm25IDF = %v, want %v", got, want)
	}
	if !(bm25IDF(100, 1) > bm25IDF(100, 5) && bm25IDF(100, 5) > bm25IDF(100, 100)) || bm25IDF(3, 9) <= 0 {
		t.Errorf("bm25IDF not decreasing or not positive")
	}
}

// Scores and order do not depend on MaxResults, with coverage and phrases.
func TestQualityOrderIndependentOfMaxResults(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	fillNotes(t, b)
	settle(t, b.Store)
	for _, q := range []string{"连续63天零回滚率", "QK-7731", "nightly build timeout", "🧪", "how to bake sourdough bread", "连续 天"} {
		one := b.search(t, q, 1, -1)
		five := b.search(t, q, 5, -1)
		many := b.search(t, q, 60, -1)
		if len(one) != 1 || len(five) < 1 || len(many) < len(five) {
			t.Fatalf("%q: %d / %d / %d hits", q, len(one), len(five), len(many))
		}
		for i := range five {
			if five[i].ChunkID != many[i].ChunkID || five[i].Score != many[i].Score {
				t.Errorf("%q: hit %d differs: %s vs %s", q, i, describeHits(five[i:i+1]), describeHits(many[i:i+1]))
			}
		}
		if one[0].ChunkID != five[0].ChunkID || one[0].Score != five[0].Score {
			t.Errorf("%q: first hit differs: %s vs %s", q, describeHits(one), describeHits(five[:1]))
		}
	}
}

// Identifiers with leading or trailing underscores (`_private()`,
// `__init__`) match their bare name, and Markdown's __bold__ its word.
func TestUnderscoreEdges(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	cases := []struct {
		text string
		want []string
	}{
		// Terms are English stems (analyzer v4): the Snowball stemmer
		// trims "name" to "nam" inside an identifier too, identically for
		// the query and the note.
		{"_detect_project_name()", []string{"detect_project_nam"}},
		{"def __init__(self):", []string{"def", "init", "self"}},
		{"__bold__ and snake_case", []string{"bold", "and", "snake_cas"}},
		{"___", nil},
	}
	for _, c := range cases {
		if got := b.analyze(c.text); !slices.Equal(got, c.want) {
			t.Errorf("analyze(%q) = %q, want %q", c.text, got, c.want)
		}
	}
	b.put(t, "memory/tools.md",
		"The helper `_detect_project_name()` reads the nearest package.json and falls back to the folder name.",
		"Unrelated: the espresso machine needs descaling every month.")
	for _, q := range []string{"detect_project_name", "_detect_project_name", "detect_project_name()"} {
		hs := b.search(t, q, 5, 0.35)
		if len(hs) == 0 || hs[0].Path != "memory/tools.md" || hs[0].StartLine != 1 {
			t.Errorf("%q: got %s", q, describeHits(hs))
		}
	}
}
