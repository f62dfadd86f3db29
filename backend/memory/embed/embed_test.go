package embed

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/width"
)

func embedOne(t testing.TB, e Embedder, s string) []float32 {
	t.Helper()
	vs, err := e.Embed(context.Background(), []string{s})
	if err != nil {
		t.Fatalf("Embed(%q): %v", s, err)
	}
	if len(vs) != 1 || len(vs[0]) != e.Dims() {
		t.Fatalf("Embed(%q): got %d vectors, want 1 of %d dims", s, len(vs), e.Dims())
	}
	return vs[0]
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func vecHash(v []float32) string {
	h := sha256.New()
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestBuiltinIdentity(t *testing.T) {
	b := NewBuiltin(BuiltinOptions{})
	if b.Provider() != "builtin" || b.Model() != "hashed-ngram-v3" || b.Dims() != 384 || b.MaxInputTokens() != 8192 {
		t.Fatalf("identity = %s/%s/%d/%d", b.Provider(), b.Model(), b.Dims(), b.MaxInputTokens())
	}
	if d := NewBuiltin(BuiltinOptions{Dims: 64}).Dims(); d != 64 {
		t.Fatalf("Dims = %d, want 64", d)
	}
	if d := NewBuiltin(BuiltinOptions{Dims: -3}).Dims(); d != 384 {
		t.Fatalf("Dims = %d, want default 384", d)
	}
	var zero Builtin
	if zero.Dims() != 384 || len(embedOne(t, &zero, "hello")) != 384 {
		t.Fatal("zero Builtin must behave like the default")
	}
}

func TestBuiltinDeterministicAndGolden(t *testing.T) {
	texts := []string{
		"Atrium keeps agent memory in Markdown; QK-7731 tracks the watcher bug.",
		"数据库连接池配置：最大连接数设为 CPU 核数的两倍。",
		"カタカナとひらがな、한국어 텍스트",
	}
	a, err := NewBuiltin(BuiltinOptions{}).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBuiltin(BuiltinOptions{}).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		if vecHash(a[i]) != vecHash(b[i]) {
			t.Fatalf("text %d: two instances disagree", i)
		}
		// Batch position must not matter either.
		if single := embedOne(t, NewBuiltin(BuiltinOptions{}), texts[i]); vecHash(single) != vecHash(a[i]) {
			t.Fatalf("text %d: batch and single embedding differ", i)
		}
	}
	// Golden values pin hashed-ngram-v3 across processes, runs and releases.
	// If this fails, the model changed: ship it under a new model name.
	golden := []string{
		"5d4f492b6cc3fec91cb059ce9a41c80e454989729e81c2421331e47721858b35",
		"1331e82a6f4564a3a40dba91d02de2cee0a701e0ce81bbd1eb8b3d0e71a08954",
		"306f29e71a5488879671f2aa12f54e0fce75a52bf2bc93677b69db1b7caeb749",
	}
	for i := range texts {
		if got := vecHash(a[i]); got != golden[i] {
			t.Errorf("text %d: vector hash %s, want %s", i, got, golden[i])
		}
	}
}

// TestBuiltinStemMemo checks that the shared stem memo changes no vector:
// calls that find every word remembered, from two goroutines, give the
// zero value's vectors (which has no memo) bit for bit.
func TestBuiltinStemMemo(t *testing.T) {
	texts := append(benchTexts(8), "painted painting paints; the painter's paintings", "Caroline ran, running, runs")
	want, err := (&Builtin{}).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	e := NewBuiltin(BuiltinOptions{})
	var wg sync.WaitGroup
	errs := make(chan string, 6)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 3; round++ {
				got, err := e.Embed(context.Background(), texts)
				if err != nil {
					errs <- err.Error()
					return
				}
				for i := range texts {
					if vecHash(got[i]) != vecHash(want[i]) {
						errs <- fmt.Sprintf("round %d, text %d: vector differs from the zero value's", round, i)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := len(e.stems.words); n == 0 {
		t.Fatal("the memo stayed empty: the test did not exercise it")
	}
}

func TestBuiltinUnitNormAndEmpty(t *testing.T) {
	b := NewBuiltin(BuiltinOptions{Dims: 256})
	for _, s := range []string{"a", "hello world", "中", "数据库连接池配置", strings.Repeat("长文本 long text ", 2000), "x\u0301y", "\xff\xfeabc"} {
		if n := norm(embedOne(t, b, s)); math.Abs(n-1) > 1e-5 {
			t.Errorf("norm(%q) = %v, want 1", s[:min(len(s), 20)], n)
		}
	}
	for _, s := range []string{"", "   \n\t", "\u3000", "。，、！", "--- *** ---", "\u200b"} {
		if n := norm(embedOne(t, b, s)); n != 0 {
			t.Errorf("norm(%q) = %v, want zero vector", s, n)
		}
	}
	vs, err := b.Embed(context.Background(), nil)
	if err != nil || len(vs) != 0 {
		t.Fatalf("Embed(nil) = %v, %v", vs, err)
	}
}

func TestBuiltinSimilarity(t *testing.T) {
	b := NewBuiltin(BuiltinOptions{})
	cases := []struct {
		name, query, similar, unrelated string
	}{
		{"zh", "数据库连接池配置", "连接池的数据库设置", "今天天气很好"},
		{"zh short query", "连接池", "数据库连接池的最大连接数", "今天天气很好，适合散步"},
		{"en", "configure the database connection pool", "database connection pooling settings", "the weather is nice today"},
		{"en morphology", "indexing markdown files", "the indexer watches markdown file changes", "lunch was pasta with tomatoes"},
		{"identifier", "QK-7731", "ticket qk-7731 is about the flaky watcher", "ticket QK-1024 is about fonts"},
		{"mixed", "SQLite 连接池", "sqlite 的连接池参数", "Bleve 分词器"},
		{"ja", "データベース接続", "データベースの接続設定", "今日はいい天気"},
		{"ko", "데이터베이스 연결", "데이터베이스 연결 설정", "오늘 날씨가 좋다"},
	}
	for _, c := range cases {
		q, s, u := embedOne(t, b, c.query), embedOne(t, b, c.similar), embedOne(t, b, c.unrelated)
		cs, cu := cosine(q, s), cosine(q, u)
		t.Logf("%-14s similar %.3f unrelated %.3f", c.name, cs, cu)
		if cs <= cu+0.15 {
			t.Errorf("%s: cos(similar) %.3f is not clearly above cos(unrelated) %.3f", c.name, cs, cu)
		}
		if cs < 0.2 {
			t.Errorf("%s: cos(similar) %.3f too low", c.name, cs)
		}
	}
}

func TestBuiltinWidthAndCaseFolding(t *testing.T) {
	b := NewBuiltin(BuiltinOptions{})
	pairs := [][2]string{
		{"ＡＰＩ　Ｋｅｙ：ＱＫ－７７３１", "api key:qk-7731"},
		{"Hello World", "hello world"},
		{"ｶﾀｶﾅ", "カタカナ"},
		{"Ｓｑｌｉｔｅ 数据库", "SQLite 数据库"},
		{"ÉCOLE", "école"},
	}
	for _, p := range pairs {
		if vecHash(embedOne(t, b, p[0])) != vecHash(embedOne(t, b, p[1])) {
			t.Errorf("%q and %q must embed identically", p[0], p[1])
		}
	}
}

// TestFoldMatchesWidth checks the fast path in fold: outside the ranges it
// special-cases, golang.org/x/text/width folds nothing.
func TestFoldMatchesWidth(t *testing.T) {
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r == 0x3000 || (r >= 0xFF01 && r <= 0xFFEF) {
			continue
		}
		if f := width.LookupRune(r).Folded(); f != 0 {
			t.Fatalf("width folds U+%04X to U+%04X but fold skips it", r, f)
		}
	}
}

// TestTFWeightQuantisationIsRobust checks that (1+ln tf)*4096 is never close
// to a rounding boundary (its ulp is about 1e-11 here), so any libm accurate
// to a few ulps gives the same tfWeight.
func TestTFWeightQuantisationIsRobust(t *testing.T) {
	for tf := 1; tf <= 1_000_000; tf++ {
		x := (1 + math.Log(float64(tf))) * 4096
		if frac := x - math.Floor(x); math.Abs(frac-0.5) < 1e-8 {
			t.Fatalf("tf=%d: %v is within 1e-8 of a rounding boundary", tf, x)
		}
	}
	if tfWeight(1) != 1 || tfWeight(2) != math.Round((1+math.Ln2)*4096)/4096 {
		t.Fatal("tfWeight formula changed")
	}
}

func TestBuiltinContextCancel(t *testing.T) {
	b := NewBuiltin(BuiltinOptions{})
	texts := make([]string, 5000)
	for i := range texts {
		texts[i] = "some text to embed, 一些需要嵌入的文本"
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	vs, err := b.Embed(ctx, texts)
	if !errors.Is(err, context.Canceled) || vs != nil {
		t.Fatalf("cancelled ctx: got %d vectors, err %v", len(vs), err)
	}
	// Cancellation part-way through a batch: a ctx whose Err flips after n
	// checks, so the test needs no timing.
	cc := &countdownCtx{Context: context.Background(), left: 100}
	vs, err = b.Embed(cc, texts)
	if !errors.Is(err, context.Canceled) || vs != nil {
		t.Fatalf("mid-batch cancel: got %d vectors, err %v", len(vs), err)
	}
	if !strings.Contains(err.Error(), "after 100 of 5000") {
		t.Fatalf("error should say how far it got: %v", err)
	}
}

type countdownCtx struct {
	context.Context
	left int
}

func (c *countdownCtx) Err() error {
	if c.left <= 0 {
		return context.Canceled
	}
	c.left--
	return nil
}

func TestBuiltinVectorsDoNotAlias(t *testing.T) {
	vs, err := NewBuiltin(BuiltinOptions{Dims: 8}).Embed(context.Background(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	before := vecHash(vs[1])
	_ = append(vs[0], 42)
	if vecHash(vs[1]) != before {
		t.Fatal("appending to one vector overwrote the next")
	}
}

func TestBuiltinAllocs(t *testing.T) {
	b := NewBuiltin(BuiltinOptions{})
	ctx := context.Background()
	allocs := func(texts []string) float64 {
		return testing.AllocsPerRun(5, func() { _, _ = b.Embed(ctx, texts) })
	}
	small, large := allocs(benchTexts(32)), allocs(benchTexts(256))
	// Output (2) + accumulator (1) + feature/word buffers growing to size
	// (a few dozen at most) + one stem per distinct English word of the
	// batch (the texts repeat a few dozen words): nothing per token, so
	// eight times the text costs hardly more allocations.
	if small > 200 || large > small+40 {
		t.Fatalf("%v allocations per 32-text batch, %v per 256-text batch: allocating per token?", small, large)
	}
}

// benchTexts returns n chunk-sized texts (~400 estimated tokens each: about
// 800 Latin characters and 200 CJK characters).
func benchTexts(n int) []string {
	en := "The gateway forwards memory_search calls to the index; results are filtered by read permission before ranking and cutting. "
	zh := "今天和用户讨论了数据库连接池的配置，结论是把最大连接数设为核数的两倍，并开启健康检查。"
	out := make([]string, n)
	for i := range out {
		var sb strings.Builder
		for sb.Len() < 800 {
			sb.WriteString(en)
		}
		for range 5 {
			sb.WriteString(zh)
		}
		sb.WriteString(" chunk ")
		sb.WriteString(strings.Repeat("x", i%7+1))
		out[i] = sb.String()
	}
	return out
}

func BenchmarkBuiltinEmbed(b *testing.B) {
	e := NewBuiltin(BuiltinOptions{})
	texts := benchTexts(64)
	ctx := context.Background()
	b.ReportAllocs()
	var bytes int
	for _, t := range texts {
		bytes += len(t)
	}
	b.SetBytes(int64(bytes))
	// One call first: per-process tables (the script fold's, built on
	// first use) are not per-chunk costs.
	if _, err := e.Embed(ctx, texts[:1]); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(texts))/b.Elapsed().Seconds(), "chunks/s")
}
