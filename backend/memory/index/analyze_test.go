package index

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// sameTokens fails t unless analyzeText gives, token for token (term,
// offsets, position, type), what the mapping's analyzer gives.
func sameTokens(t *testing.T, s *Store, text string) {
	t.Helper()
	got, want := s.analyzeText(text), s.analyzer().Analyze([]byte(text))
	if len(got) != len(want) {
		t.Fatalf("%.80q: %d tokens, mapping %d\nanalyzeText %v\nmapping     %v", text, len(got), len(want), got, want)
	}
	for i := range got {
		if got[i].String() != want[i].String() || got[i].KeyWord != want[i].KeyWord {
			t.Fatalf("%.80q: token %d is %v, mapping %v", text, i, got[i], want[i])
		}
	}
}

func TestTextAnalyzerEqualsMapping(t *testing.T) {
	s := openBuiltin(t, t.TempDir())
	if s.textAn == nil {
		t.Fatal("the Store's analyzer was not recognised; analyzeText would not use its shortcuts")
	}
	texts := []string{
		"The release rollback of v1.2 — Caroline's painting ✅ QK-7731",
		"running runs runner's happily generalizations", // stems
		"连续63天零回滚率，发布 数据库 索引；ＡＢＣ全角 123",
		"detect_project_name() and __init__ stay intact", // underscores: the char filter
		"_lead and trail_ __both__ a_b",
		"", "   ", "emoji 🎉🎉 and #tags @people https://example.com/a-b?c=d",
		"❤️ 👩‍💻 © ™ ✓ only symbols",            // So runes, modifiers, ZWJ
		"bad \xff\xfe bytes \xe4\xb8 cut rune", // invalid UTF-8 (U+FFFD is So)
		"日本語のテキスト 한국어 텍스트 mixed with English",
		"ｶﾞｷﾞｸﾞ ﾊﾟﾋﾟ ｱｲｳｴｵ ﾞ ｶﾞ Ｑｕｉｃｋ（全角）ｆｏｘ ＡＢＣ１２３ ﾟ", // the width filter: halfwidth kana (voiced marks combine), fullwidth ASCII
		"half\xef\xbc cut ｶ\xef", // invalid UTF-8 next to width forms
		"naïveté résumés 'twas rock'n'roll it’s ÉCOLES Москва 2023-12-01 v1.2.3 ①② 'y yy ys", // the stemmer's edges
		strings.Repeat("memory search 记忆检索 ", 200),
	}
	for _, text := range texts {
		sameTokens(t, s.Store, text)
		sameTokens(t, s.Store, text) // the second time from the stemmer's memo
	}
}

// TestTextAnalyzerEqualsMappingOnCorpora compares the two analyzers on every
// paragraph of the corpora's workspaces and on CMRC 2018 and DRCD passages,
// from two goroutines (the stemmer memo is shared).
func TestTextAnalyzerEqualsMappingOnCorpora(t *testing.T) {
	texts := corpusTexts(t)
	s := openBuiltin(t, t.TempDir())
	var wg sync.WaitGroup
	errs := make(chan string, 2)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(texts); i += 2 {
				got, want := s.analyzeText(texts[i]), s.analyzer().Analyze([]byte(texts[i]))
				if fmt.Sprint(got) != fmt.Sprint(want) {
					errs <- fmt.Sprintf("%.80q: analyzeText and the mapping differ", texts[i])
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, f := range s.textAn.filters {
		if m, ok := f.(*memoStemmer); ok {
			t.Logf("%d texts, %d stems memoised", len(texts), len(m.terms))
		}
	}
}

// corpusTexts returns every paragraph of the corpora's workspaces and the
// first 3,000 CMRC 2018 and DRCD passages, or skips t without the corpora.
func corpusTexts(t testing.TB) []string {
	t.Helper()
	root := os.Getenv("ATRIUM_CORPORA")
	if root == "" {
		root = filepath.Join("..", "..", "..", "..", "shared", "corpora")
	}
	if _, err := os.Stat(root); err != nil {
		t.Skipf("corpora not found at %s (set ATRIUM_CORPORA); skipping", root)
	}
	var texts []string
	err := filepath.WalkDir(filepath.Join(root, "workspaces"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		texts = append(texts, strings.Split(string(b), "\n\n")...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"cmrc2018", "drcd"} {
		f, err := os.Open(filepath.Join(root, "bench", set, "corpus.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for n := 0; sc.Scan() && n < 3000; n++ {
			var doc struct{ Title, Text string }
			if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			texts = append(texts, doc.Title+"\n"+doc.Text)
		}
		f.Close()
	}
	if len(texts) < 1000 {
		t.Fatalf("only %d texts read from %s", len(texts), root)
	}
	return texts
}
