package hanzi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/liuzl/gocc"
)

const corpora = "/work/shared/corpora/workspaces"

func TestFoldPairsOfTheIssue(t *testing.T) {
	if err := Ready(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ trad, simp string }{
		{"產業類別", "产业类别"},
		{"刪除決定權", "删除决定权"},
		{"記憶", "记忆"},
		{"資料庫連線池設定", "资料库连线池设定"},
		{"裡面", "里面"}, // a Taiwan variant form
		{"臺灣", "台湾"},
	} {
		if got := Fold(c.trad); got != c.simp {
			t.Errorf("Fold(%q) = %q, want %q", c.trad, got, c.simp)
		}
		if got := Fold(c.simp); got != c.simp {
			t.Errorf("Fold(%q) = %q, want it unchanged", c.simp, got)
		}
	}
	for _, s := range []string{"", "plain ASCII QK-7731", "ＡＰＩ café 🧪", "\xff\xfe broken"} {
		if got := Fold(s); got != s {
			t.Errorf("Fold(%q) = %q, want it unchanged", s, got)
		}
	}
}

// TestFoldIsOpenCCPerRune checks the table against OpenCC itself over every
// CJK rune: each rune that tw2s (or else hk2s) converts to one other rune
// of the same UTF-8 length folds to that rune, unless OpenCC's data shows
// it is written in Simplified too (keepSimplified), and no other rune
// changes.
func TestFoldIsOpenCCPerRune(t *testing.T) {
	if testing.Short() {
		t.Skip("converts every CJK rune through OpenCC (about a second)")
	}
	var ccs []*gocc.OpenCC
	for _, c := range []string{"tw2s", "hk2s"} {
		cc, err := gocc.New(c)
		if err != nil {
			t.Fatal(err)
		}
		ccs = append(ccs, cc)
	}
	convert := func(r rune) rune {
		for _, cc := range ccs {
			out, err := cc.Convert(string(r))
			if err != nil {
				t.Fatal(err)
			}
			o, n := utf8.DecodeRuneInString(out)
			if n == len(out) && o != r && utf8.RuneLen(o) == utf8.RuneLen(r) {
				return o
			}
		}
		return r
	}
	keep := keepSimplified(ccs[0])
	for _, r := range []rune{'著', '么', '沈', '余', '干', '后'} {
		if !keep[r] || FoldRune(r) != r {
			t.Errorf("%q is written in Simplified too and must not fold (got %q)", r, FoldRune(r))
		}
	}
	changed := 0
	for _, rg := range [][2]rune{{0x2E80, 0x9FFF}, {0xF900, 0xFAFF}, {0x20000, 0x323AF}} {
		for r := rg[0]; r <= rg[1]; r++ {
			want := r
			if !keep[r] {
				want = convert(r)
			}
			if got := FoldRune(r); got != want {
				t.Fatalf("FoldRune(%q) = %q, OpenCC gives %q", r, got, want)
			}
			if want != r {
				changed++
			}
		}
	}
	if changed < 3000 {
		t.Fatalf("only %d runes fold; OpenCC's tables have about 4,000", changed)
	}
}

// TestFoldKeepsOffsets: on the corpora's notes a folded text has the same
// length and rune boundaries, and folding twice changes nothing.
func TestFoldKeepsOffsets(t *testing.T) {
	files := corpusFiles(t, "scchin-openclaw-workspace", "sandmark78-openclaw-workspace")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		got := Fold(s)
		if len(got) != len(s) {
			t.Fatalf("%s: folded length %d, was %d", f, len(got), len(s))
		}
		for i := range s {
			if !utf8.RuneStart(got[i]) {
				t.Fatalf("%s: rune boundary %d moved", f, i)
			}
		}
		if Fold(got) != got {
			t.Fatalf("%s: folding twice changes the text", f)
		}
	}
}

func TestDetectOnRealNotes(t *testing.T) {
	for _, c := range []struct {
		ws   string
		want Script
	}{
		{"scchin-openclaw-workspace", Traditional},
		{"sandmark78-openclaw-workspace", Simplified},
		{"robertsong2019-openclaw-workspace", Simplified},
	} {
		files, right := 0, 0
		for _, f := range corpusFiles(t, c.ws) {
			b, _ := os.ReadFile(f)
			if han(string(b)) < 20 {
				continue // English notes: nothing to detect
			}
			files++
			if Detect(string(b)) == c.want {
				right++
			}
		}
		if files < 5 || right < files {
			t.Errorf("%s: %d of %d Chinese notes detected as %v", c.ws, right, files, c.want)
		}
	}
	for _, c := range []struct {
		q    string
		want Script
	}{
		{"產業類別是什麼？", Traditional},
		{"产业类别是什么？", Simplified},
		{"我們上週討論了什麼", Traditional},
		{"台灣的資料", Traditional},
		{"what is QK-7731?", Unknown},
		{"中文", Unknown},
	} {
		if got := Detect(c.q); got != c.want {
			t.Errorf("Detect(%q) = %v, want %v", c.q, got, c.want)
		}
	}
}

func TestToTraditional(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"相关的笔记：", "相關的筆記："},
		{"没有找到相关记忆。", "沒有找到相關記憶。"},
		{"plain text 42", "plain text 42"},
	} {
		got, err := ToTraditional(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("ToTraditional(%q) = %q, want %q", c.in, got, c.want)
		}
		if Detect(got) == Simplified {
			t.Errorf("ToTraditional(%q) = %q still reads as Simplified", c.in, got)
		}
	}
}

// han counts the CJK unified ideographs of s.
func han(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x4E00 && r <= 0x9FFF {
			n++
		}
	}
	return n
}

func corpusFiles(t testing.TB, workspaces ...string) []string {
	t.Helper()
	var out []string
	for _, ws := range workspaces {
		dir := filepath.Join(corpora, ws)
		if _, err := os.Stat(dir); err != nil {
			t.Skipf("corpus %s absent: %v", dir, err)
		}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") && d.Name() != "SOURCE.md" {
				out = append(out, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// BenchmarkFold folds the corpora's Chinese notes (Traditional and
// Simplified); the figure is bytes of text a second.
func BenchmarkFold(b *testing.B) {
	var texts []string
	n := 0
	for _, f := range corpusFiles(b, "scchin-openclaw-workspace", "sandmark78-openclaw-workspace") {
		t, _ := os.ReadFile(f)
		texts = append(texts, string(t))
		n += len(t)
	}
	if err := Ready(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n))
	b.ResetTimer()
	for range b.N {
		for _, s := range texts {
			Fold(s)
		}
	}
}

// BenchmarkBuild measures building the tables from OpenCC's data, which a
// process does once, on its first fold.
func BenchmarkBuild(b *testing.B) {
	for range b.N {
		if _, err := build(); err != nil {
			b.Fatal(err)
		}
	}
}
