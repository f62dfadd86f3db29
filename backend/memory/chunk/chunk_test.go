package chunk

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// refLines is an independent re-implementation of the input rules in the
// package doc: the lines that Chunk line numbers refer to.
func refLines(text string) []string {
	text = strings.TrimPrefix(text, "\uFEFF")
	text = strings.ToValidUTF8(text, "\uFFFD")
	ls := strings.Split(text, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimSuffix(l, "\r")
	}
	return ls
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

type span struct{ from, to int }

// splitChecked runs Split (with the piece hook) and checks every documented
// invariant. It returns the chunks for case-specific assertions.
func splitChecked(t testing.TB, text string, opts Options) []Chunk {
	t.Helper()
	pieces := map[int][]span{}
	got := split(text, opts, func(li, from, to int) { pieces[li] = append(pieces[li], span{from, to}) })
	if pub := Split(text, opts); !reflect.DeepEqual(pub, got) {
		t.Fatalf("Split is not deterministic / differs from split")
	}
	maxTok := opts.MaxTokens
	if maxTok <= 0 {
		maxTok = DefaultMaxTokens
	}
	lines := refLines(text)
	covered := make([]bool, len(lines))
	prevStart, prevEnd := 0, 0
	pieceIdx := map[int]int{}
	for i, c := range got {
		where := fmt.Sprintf("chunk %d [%d-%d] %q", i, c.StartLine, c.EndLine, trunc(c.Text))
		if c.StartLine < 1 || c.EndLine < c.StartLine || c.EndLine > len(lines) {
			t.Fatalf("%s: bad line range (file has %d lines)", where, len(lines))
		}
		if c.StartLine < prevStart || c.EndLine < prevEnd {
			t.Fatalf("%s: out of order after [%d-%d]", where, prevStart, prevEnd)
		}
		prevStart, prevEnd = c.StartLine, c.EndLine
		if tok := EstimateTokens(c.Text); tok > maxTok {
			t.Fatalf("%s: %d tokens > max %d", where, tok, maxTok)
		}
		if !utf8.ValidString(c.Text) {
			t.Fatalf("%s: invalid UTF-8", where)
		}
		sum := sha256.Sum256([]byte(c.Text))
		if c.Hash != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: wrong hash", where)
		}
		if isBlank(c.Text) {
			t.Fatalf("%s: blank chunk", where)
		}
		joined := strings.Join(lines[c.StartLine-1:c.EndLine], "\n")
		if c.Text == joined {
			if isBlank(lines[c.StartLine-1]) || isBlank(lines[c.EndLine-1]) {
				t.Fatalf("%s: starts or ends with a blank line", where)
			}
			for l := c.StartLine; l <= c.EndLine; l++ {
				covered[l-1] = true
			}
			continue
		}
		// Otherwise it must be a piece of one long line.
		li := c.StartLine - 1
		if c.StartLine != c.EndLine || EstimateTokens(lines[li]) <= maxTok {
			t.Fatalf("%s: text is not the joined lines %q", where, trunc(joined))
		}
		k := pieceIdx[li]
		pieceIdx[li]++
		if k >= len(pieces[li]) {
			t.Fatalf("%s: piece without span", where)
		}
		sp := pieces[li][k]
		if lines[li][sp.from:sp.to] != c.Text {
			t.Fatalf("%s: piece span [%d,%d) does not match text", where, sp.from, sp.to)
		}
	}
	// Pieces of a long line: strictly advancing, and together they cover
	// every non-space rune of the line.
	for li, sps := range pieces {
		line := lines[li]
		cov := make([]bool, len(line)+1)
		for k, sp := range sps {
			if k > 0 && (sp.from <= sps[k-1].from || sp.to <= sps[k-1].to) {
				t.Fatalf("line %d: piece %d %v does not advance past %v", li+1, k, sp, sps[k-1])
			}
			for b := sp.from; b < sp.to; b++ {
				cov[b] = true
			}
		}
		for b, r := range line {
			if !cov[b] && !isBlank(string(r)) {
				t.Fatalf("line %d: rune %q at byte %d not in any piece %v", li+1, r, b, sps)
			}
		}
		covered[li] = true
	}
	for i, l := range lines {
		if !covered[i] && !isBlank(l) {
			t.Fatalf("non-blank line %d %q is in no chunk", i+1, trunc(l))
		}
	}
	return got
}

func trunc(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

func TestEstimateTokens(t *testing.T) {
	cases := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"a b", 1},
		{"hello world", 3}, // 11 runes
		{"中文", 2},
		{"中文ab", 3},
		{"ＡＢＣ", 3},  // full-width forms count one each
		{"。，、", 3},  // CJK punctuation
		{"한국어", 3},  // hangul
		{"カタカナ", 4}, // katakana
		{"ｶﾀｶﾅ", 4}, // half-width katakana
		{"𠀀𠀁", 2},   // CJK Extension B (outside the BMP)
		{"\xff\xfe", 1},
		{"数据库 connection pool 配置", 5 + 5}, // 5 CJK + ceil(17 other runes / 4)
	}
	for _, c := range cases {
		if got := EstimateTokens(c.in); got != c.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestIsCJK(t *testing.T) {
	yes := []rune{'中', '国', '㐀', '𠀀', '。', '、', '「', '\u3000', 'あ', 'ア', 'ー', 'ｱ', '한', 'ㄱ', 'ㄅ', 'Ａ', '１', '！', '﹐', '㊀'}
	no := []rune{'a', 'Z', '0', ' ', '\n', '.', ',', 'é', 'ß', 'Ω', 'Ж', '—', '€', '😀', utf8.RuneError}
	for _, r := range yes {
		if !IsCJK(r) {
			t.Errorf("IsCJK(%q U+%04X) = false, want true", r, r)
		}
	}
	for _, r := range no {
		if IsCJK(r) {
			t.Errorf("IsCJK(%q U+%04X) = true, want false", r, r)
		}
	}
}

func TestSplitEdgeInputs(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []Chunk // Hash filled in by the test
	}{
		{"empty", "", nil},
		{"whitespace only", "  \n\t\n \u3000 \n", nil},
		{"bom only", "\uFEFF", nil},
		{"crlf blank", "\r\n\r\n", nil},
		{"one line", "hello", []Chunk{{StartLine: 1, EndLine: 1, Text: "hello"}}},
		{"two lines", "hello\nworld\n", []Chunk{{StartLine: 1, EndLine: 2, Text: "hello\nworld"}}},
		{"crlf", "a\r\nb\r\n", []Chunk{{StartLine: 1, EndLine: 2, Text: "a\nb"}}},
		{"inner cr kept", "a\rb\r\nc", []Chunk{{StartLine: 1, EndLine: 2, Text: "a\rb\nc"}}},
		{"bom", "\uFEFF# 标题\nbody", []Chunk{{StartLine: 1, EndLine: 2, Text: "# 标题\nbody"}}},
		{"trim blank lines", "\n\n# T\n\nbody\n\n\n", []Chunk{{StartLine: 3, EndLine: 5, Text: "# T\n\nbody"}}},
		{"invalid utf8", "ab\xffcd\n\xc3", []Chunk{{StartLine: 1, EndLine: 2, Text: "ab\uFFFDcd\n\uFFFD"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.want {
				sum := sha256.Sum256([]byte(c.want[i].Text))
				c.want[i].Hash = hex.EncodeToString(sum[:])
			}
			got := splitChecked(t, c.in, Options{})
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Split(%q) =\n%#v\nwant\n%#v", c.in, got, c.want)
			}
		})
	}
}

// ranges returns [StartLine, EndLine] pairs.
func ranges(cs []Chunk) [][2]int {
	out := make([][2]int, len(cs))
	for i, c := range cs {
		out[i] = [2]int{c.StartLine, c.EndLine}
	}
	return out
}

func TestSplitChineseLinesOverlap(t *testing.T) {
	// 30 lines of 30 ideographs: a line costs 30, k lines cost 30k+ceil((k-1)/4).
	// MaxTokens 100 fits 3 lines (91); overlap 40 repeats 1 line (2 lines = 61).
	var sb strings.Builder
	for i := range 30 {
		sb.WriteString(strings.Repeat(string(rune('一'+i)), 30))
		sb.WriteByte('\n')
	}
	got := splitChecked(t, sb.String(), Options{MaxTokens: 100, OverlapTokens: 40})
	var want [][2]int
	for s := 1; s < 29; s += 2 {
		want = append(want, [2]int{s, s + 2})
	}
	want = append(want, [2]int{29, 30})
	if !reflect.DeepEqual(ranges(got), want) {
		t.Fatalf("ranges = %v\nwant %v", ranges(got), want)
	}
	if tok := EstimateTokens(got[0].Text); tok != 91 {
		t.Fatalf("first chunk tokens = %d, want 91", tok)
	}
}

func TestSplitEnglishOverlapAndNoOverlap(t *testing.T) {
	// 40 lines of exactly 80 runes (20 tokens); k lines cost 20k+ceil((k-1)/4).
	var sb strings.Builder
	for i := range 40 {
		l := fmt.Sprintf("line %02d: the quick brown fox jumps over the lazy dog again and again", i+1)
		l += strings.Repeat(".", 80-len(l))
		sb.WriteString(l + "\n")
	}
	text := sb.String()
	lines := refLines(text)

	// Max 100: 4 lines = 81, 5 lines = 101. Overlap 45: 2 lines (41) fit, 3 (61) do not.
	got := splitChecked(t, text, Options{MaxTokens: 100, OverlapTokens: 45})
	for i := 1; i < len(got); i++ {
		prev, cur := got[i-1], got[i]
		if cur.StartLine != prev.EndLine-1 {
			t.Fatalf("chunk %d starts at %d, want 2 lines of overlap with [%d-%d]", i, cur.StartLine, prev.StartLine, prev.EndLine)
		}
		ov := strings.Join(lines[cur.StartLine-1:prev.EndLine], "\n")
		if EstimateTokens(ov) > 45 {
			t.Fatalf("overlap of chunk %d is %d tokens > 45", i, EstimateTokens(ov))
		}
	}
	if r := ranges(got); r[0] != [2]int{1, 4} || r[1] != [2]int{3, 6} || r[len(r)-1][1] != 40 {
		t.Fatalf("ranges = %v", r)
	}

	// Overlap disabled: chunks tile the file exactly.
	got = splitChecked(t, text, Options{MaxTokens: 100, OverlapTokens: -1})
	if len(got) != 10 {
		t.Fatalf("got %d chunks, want 10", len(got))
	}
	for i, c := range got {
		if c.StartLine != 4*i+1 || c.EndLine != 4*i+4 {
			t.Fatalf("chunk %d = [%d-%d], want [%d-%d]", i, c.StartLine, c.EndLine, 4*i+1, 4*i+4)
		}
	}
}

func TestSplitDefaultsAndClamp(t *testing.T) {
	text := strings.Repeat("word ", 20) + "\n"
	text = strings.Repeat(text, 200) // 200 lines of 25 tokens
	got := splitChecked(t, text, Options{})
	// 400 budget: 15 lines = 375+4 = 379, 16 lines = 400+4 > 400.
	if got[0].EndLine != 15 {
		t.Fatalf("first chunk ends at %d, want 15 with default MaxTokens", got[0].EndLine)
	}
	// 80 overlap: 3 lines = 75+1 = 76 fit, 4 lines = 101 do not.
	if got[1].StartLine != 13 {
		t.Fatalf("second chunk starts at %d, want 13 with default overlap", got[1].StartLine)
	}
	// Overlap larger than the chunk is capped at MaxTokens/2 and still progresses.
	for _, o := range []Options{{MaxTokens: 10}, {MaxTokens: 1}, {MaxTokens: 2, OverlapTokens: 1000}, {MaxTokens: 30, OverlapTokens: 30}} {
		got := splitChecked(t, text, o)
		// Each chunk adds at least (MaxTokens - overlap) new tokens, give or
		// take rounding and word-boundary snapping: output stays linear.
		ovEff := min(max(o.OverlapTokens, 0), o.MaxTokens/2)
		if o.OverlapTokens == 0 {
			ovEff = min(DefaultOverlapTokens, o.MaxTokens/2)
		}
		if bound := 2*200*25/max(o.MaxTokens-ovEff, 1) + 2*200; len(got) > bound {
			t.Fatalf("%+v: %d chunks > %d: overlap is not bounded", o, len(got), bound)
		}
	}
}

func TestSplitLongChineseLine(t *testing.T) {
	// 2,000 ideographs on one line, no punctuation: greedy pieces of exactly
	// 400, advancing by 320 (80 overlap).
	var sb strings.Builder
	for i := range 2000 {
		sb.WriteRune(rune(0x4E00 + (i*7919)%20000))
	}
	line := sb.String()
	text := "# 标题\n" + line + "\n结尾"
	got := splitChecked(t, text, Options{})
	if got[0].Text != "# 标题" || got[len(got)-1].Text != "结尾" || got[len(got)-1].StartLine != 3 {
		t.Fatalf("line 1 and 3 must be separate chunks around the long line: %v", ranges(got))
	}
	pieces := got[1 : len(got)-1]
	if len(pieces) != 6 { // starts 0,320,640,960,1280,1600
		t.Fatalf("got %d pieces, want 6", len(pieces))
	}
	r := []rune(line)
	for k, p := range pieces {
		if p.StartLine != 2 || p.EndLine != 2 {
			t.Fatalf("piece %d lines [%d-%d], want [2-2]", k, p.StartLine, p.EndLine)
		}
		wantLen := min(400, 2000-320*k)
		if want := string(r[320*k : 320*k+wantLen]); p.Text != want {
			t.Fatalf("piece %d = %d runes at wrong place, want %d runes from %d", k, utf8.RuneCountInString(p.Text), wantLen, 320*k)
		}
	}
}

func TestSplitLongChineseLinePrefersPunctuation(t *testing.T) {
	sentence := "数据库连接池的配置需要根据实际负载进行调整，否则高峰期会出现大量超时错误。"
	line := strings.Repeat(sentence, 80)
	got := splitChecked(t, line, Options{MaxTokens: 100, OverlapTokens: 20})
	for k, p := range got[:len(got)-1] {
		last, _ := utf8.DecodeLastRuneInString(p.Text)
		if last != '，' && last != '。' {
			t.Fatalf("piece %d ends with %q, want a CJK punctuation break", k, last)
		}
	}
}

func TestSplitLongEnglishLine(t *testing.T) {
	words := strings.Fields("the memory index keeps path start line end line text and a sha256 hash for every chunk, so that search results can point back into Markdown files; a single long line is split.")
	var sb strings.Builder
	for i := 0; sb.Len() < 10000; i++ {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(words[i%len(words)])
	}
	line := sb.String()
	got := splitChecked(t, line, Options{MaxTokens: 64, OverlapTokens: 16})
	if len(got) < 10000/256 {
		t.Fatalf("only %d pieces", len(got))
	}
	for k, p := range got {
		if k < len(got)-1 {
			last, _ := utf8.DecodeLastRuneInString(p.Text)
			if !isBreakAfter(last) {
				t.Fatalf("piece %d ends mid-word: %q", k, p.Text)
			}
		}
		if k > 0 {
			// Pieces start at a word start: the text before them ends with a break.
			i := strings.Index(line, p.Text)
			if i > 0 && !isBreakAfter(rune(line[i-1])) {
				t.Fatalf("piece %d starts mid-word: %q", k, trunc(p.Text))
			}
		}
	}
	// Unbreakable Latin text is hard-cut but never inside a rune or before a combining mark.
	nasty := strings.Repeat("e\u0301x", 2000) // e + combining acute, no spaces
	for _, p := range splitChecked(t, nasty, Options{MaxTokens: 50, OverlapTokens: -1}) {
		if strings.HasPrefix(p.Text, "\u0301") {
			t.Fatalf("piece starts with a combining mark: %q", trunc(p.Text))
		}
	}
}

func TestSplitMixedLineNumbers(t *testing.T) {
	var sb strings.Builder
	for i := 1; i <= 300; i++ {
		switch i % 5 {
		case 0:
			sb.WriteString("\r\n") // blank CRLF line
		case 1:
			fmt.Fprintf(&sb, "## L%d 会议记录 Meeting notes\r\n", i)
		case 2:
			fmt.Fprintf(&sb, "L%d - 决定使用 SQLite 作为 state store，因为它是 local-first 的。\n", i)
		default:
			fmt.Fprintf(&sb, "L%d The agents share Markdown memory indexed for hybrid search (BM25 + vectors).\n", i)
		}
	}
	got := splitChecked(t, sb.String(), Options{MaxTokens: 120, OverlapTokens: 30})
	for _, c := range got {
		first := strings.SplitN(c.Text, "\n", 2)[0]
		if !strings.Contains(first, fmt.Sprintf("L%d ", c.StartLine)) {
			t.Fatalf("chunk [%d-%d] starts with %q", c.StartLine, c.EndLine, first)
		}
		ls := strings.Split(c.Text, "\n")
		if last := ls[len(ls)-1]; !strings.Contains(last, fmt.Sprintf("L%d ", c.EndLine)) {
			t.Fatalf("chunk [%d-%d] ends with %q", c.StartLine, c.EndLine, last)
		}
		if strings.Contains(c.Text, "\r") {
			t.Fatalf("chunk keeps a CR: %q", c.Text)
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("hello\nworld", uint16(400), int16(0))
	f.Add("\uFEFF数据库连接池配置\r\n\r\n连接池的数据库设置", uint16(3), int16(1))
	f.Add(strings.Repeat("今天天气很好，", 100), uint16(50), int16(10))
	f.Add(strings.Repeat("word ", 500)+"\n\n"+strings.Repeat("x", 300), uint16(20), int16(-1))
	f.Add("a\xff\xfe\xc3\n\xed\xa0\x80 e\u0301\u200d😀", uint16(1), int16(7))
	f.Add("  \n\t\n", uint16(0), int16(0))
	f.Fuzz(func(t *testing.T, text string, maxTok uint16, ov int16) {
		opts := Options{MaxTokens: int(maxTok % 300), OverlapTokens: int(ov % 200)}
		splitChecked(t, text, opts)
	})
}

// mixedText builds about n bytes of Markdown mixing English, Chinese, code
// and blank lines, with an occasional very long line.
func mixedText(n int) string {
	paras := []string{
		"## 项目状态 Project status",
		"The gateway forwards memory_search calls to the index; results are filtered by read permission before ranking.",
		"- 决定：默认使用内置的哈希 n-gram 嵌入，不需要下载模型。向量和关键词两路召回，再按 0.7/0.3 融合。",
		"```go",
		"func (ix *Index) Search(ctx context.Context, q string) ([]Result, error) { return ix.search(ctx, q) }",
		"```",
		"",
		"今天和用户讨论了数据库连接池的配置，结论是把最大连接数设为 CPU 核数的两倍，并开启健康检查。",
		"QK-7731 is the ticket for the flaky watcher; rescans run every five minutes because fsnotify can die silently.",
		"",
	}
	long := strings.Repeat("长行没有换行符，需要被拆成多个片段。Long lines must be split too. ", 120)
	var sb strings.Builder
	sb.Grow(n + len(long))
	for i := 0; sb.Len() < n; i++ {
		if i%997 == 996 {
			sb.WriteString(long)
		} else {
			sb.WriteString(paras[i%len(paras)])
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func BenchmarkSplit(b *testing.B) {
	text := mixedText(1 << 20)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(Split(text, Options{}))
	}
	b.ReportMetric(float64(n), "chunks/op")
}
