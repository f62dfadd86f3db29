package index

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// keywordLeg opens the keyword leg of text over accept (nil: every file),
// weighed as a search would; the test closes it.
func keywordLeg(t *testing.T, s *Store, text string, accept func(string) bool) *kwLeg {
	t.Helper()
	ctx := context.Background()
	kl, err := s.openKeywordLeg(ctx, accept)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kl.close() })
	q := s.analyzeQuery(text)
	if err := s.weighTerms(ctx, kl, &q); err != nil {
		t.Fatal(err)
	}
	kl.prepare(&q)
	return kl
}

// exhaustiveBM25 scores every chunk in the leg's scope that holds a query
// term, the slow way: each term's whole posting list, no skipping.
func exhaustiveBM25(t *testing.T, kl *kwLeg) []kwHit {
	t.Helper()
	ctx := context.Background()
	nums, ok, err := kl.union(ctx, kl.allTerms(), math.MaxInt)
	if err != nil || !ok {
		t.Fatalf("union: %v %v", ok, err)
	}
	hits, err := kl.score(ctx, nums)
	if err != nil {
		t.Fatal(err)
	}
	sortKwHits(hits)
	return hits
}

// fillZipf stores files of random sentences whose words follow a Zipf law
// (a few words in most chunks, most words rare), in English and Chinese,
// under memory/a/ and memory/b/.
func fillZipf(t *testing.T, b builtinStore, files int) {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	en := strings.Fields("the a of to and in is it that was for on with as build timeout release invoice payment cache sailing river apple budget review deploy rollback latency database index query token memory agent writer analyst kernel patch wiki meeting garden recipe bread sourdough")
	zh := strings.Fields("的 了 是 在 我们 发布 回滚 数据库 索引 查询 缓存 支付 发票 记忆 代理 会议 花园 面包 预算 延迟 内核 补丁 周报 巡检")
	zipf := rand.NewZipf(rng, 1.3, 1, uint64(len(en)-1))
	zipfZh := rand.NewZipf(rng, 1.3, 1, uint64(len(zh)-1))
	for f := 0; f < files; f++ {
		var texts []string
		for c := 0; c < 1+rng.Intn(4); c++ {
			var w []string
			for i := 0; i < 3+rng.Intn(40); i++ {
				if rng.Intn(3) == 0 {
					w = append(w, zh[zipfZh.Uint64()])
				} else {
					w = append(w, en[zipf.Uint64()])
				}
			}
			texts = append(texts, strings.Join(w, " "))
		}
		dir := "memory/a/"
		if f%3 == 0 {
			dir = "memory/b/"
		}
		b.put(t, fmt.Sprintf("%s%03d.md", dir, f), texts...)
	}
}

// MaxScore's top k is the exhaustive ranking's first k (same scores; the
// same chunks wherever scores differ), in every scope.
func TestKeywordTopKMatchesExhaustive(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	fillZipf(t, b, 300)
	// Copies of one text score alike: ties that must be ordered by
	// document number however the walk is split.
	for i := 0; i < 40; i++ {
		b.put(t, fmt.Sprintf("memory/%c/tie%02d.md", "ab"[i%2], i), "kernel patch tie", fmt.Sprintf("unrelated line %d", i))
	}
	scopes := map[string]func(string) bool{
		"all":    nil,
		"a only": func(p string) bool { return strings.HasPrefix(p, "memory/a/") },
		"b only": func(p string) bool { return strings.HasPrefix(p, "memory/b/") },
		"none":   func(string) bool { return false },
	}
	queries := []string{
		"the build timeout", "sourdough bread recipe", "the of and to", "回滚 数据库", "发布 的 索引 缓存",
		"latency of the database index query", "kernel", "kernel patch tie", "wiki meeting 周报 巡检 the", "nonexistentword",
	}
	ctx := context.Background()
	for name, accept := range scopes {
		for _, q := range queries {
			kl := keywordLeg(t, b.Store, q, accept)
			all := exhaustiveBM25(t, kl)
			for _, n := range []int{1, 3, 10, 50, 1000} {
				top, full, err := kl.top(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				want := all[:min(n, len(all))]
				if len(top) != len(want) {
					t.Fatalf("%s %q n=%d: %d hits, exhaustive %d", name, q, n, len(top), len(want))
				}
				if full != (len(top) >= n) {
					t.Errorf("%s %q n=%d: full=%v with %d hits", name, q, n, full, len(top))
				}
				for i := range top {
					if top[i].score != want[i].score {
						t.Fatalf("%s %q n=%d rank %d: score %v, exhaustive %v", name, q, n, i, top[i].score, want[i].score)
					}
					if top[i].cov != scoreOf(all, top[i].num).cov {
						t.Errorf("%s %q: coverage of %d differs", name, q, top[i].num)
					}
				}
				// Ties are ordered by document number, whatever order the
				// walk met them in (the seeded candidates come first).
				for i := 1; i < len(top); i++ {
					if top[i].score == top[i-1].score && top[i].num < top[i-1].num {
						t.Fatalf("%s %q n=%d: ties out of document order at rank %d", name, q, n, i)
					}
				}
				for i := range top {
					top[i].key = 0 // the walk's ranking key (the score here)
				}
				if fmt.Sprint(top) != fmt.Sprint(want) {
					t.Fatalf("%s %q n=%d: top\n%v\nexhaustive\n%v", name, q, n, top, want)
				}
				// A chunk outside the top scores at most the last score.
				if len(top) > 0 {
					for _, h := range all[len(top):] {
						if h.score > top[len(top)-1].score {
							t.Fatalf("%s %q n=%d: chunk %d (%v) above the last hit (%v) left out", name, q, n, h.num, h.score, top[len(top)-1].score)
						}
					}
				}
			}
			// The keyword pool: the chunks ranked by keyword score k
			// (coverage and relative BM25), above a floor.
			if len(all) > 0 {
				maxBM25 := all[0].score
				byKey := slices.Clone(all)
				for i := range byKey {
					byKey[i].key = KeywordScore(byKey[i].cov, byKey[i].score/maxBM25)
				}
				sortByKey(byKey)
				for _, floor := range []float64{0, 0.3, 0.7, 0.85} {
					var above []kwHit
					for _, h := range byKey {
						if h.key > floor {
							above = append(above, h)
						}
					}
					for _, n := range []int{1, 3, 10, 50, 1000} {
						got, full, err := kl.topKeyword(ctx, n, maxBM25, floor)
						if err != nil {
							t.Fatal(err)
						}
						want := above[:min(n, len(above))]
						if fmt.Sprint(got) != fmt.Sprint(want) || full != (len(got) >= n) {
							t.Fatalf("%s %q n=%d floor %v: topKeyword (full %v)\n%v\nexhaustive\n%v", name, q, n, floor, full, got, want)
						}
					}
				}
			}
			for _, h := range all {
				if !kl.sc.has(h.num) {
					t.Fatalf("%s: chunk %d out of scope scored", name, h.num)
				}
			}
		}
	}
}

func scoreOf(hs []kwHit, num uint64) kwHit {
	for _, h := range hs {
		if h.num == num {
			return h
		}
	}
	return kwHit{}
}

// The scope's statistics are those of its files alone: a scope's BM25
// scores equal the scores of an index holding only its files.
func TestKeywordScopeStatistics(t *testing.T) {
	big := openBuiltin(t, t.TempDir())
	small := openBuiltin(t, t.TempDir())
	rng := rand.New(rand.NewSource(3))
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta 甲 乙 丙 丁 的 数据 索引")
	for f := 0; f < 80; f++ {
		var w []string
		for i := 0; i < 2+rng.Intn(30); i++ {
			w = append(w, words[rng.Intn(len(words))])
		}
		path := fmt.Sprintf("memory/%c/%02d.md", 'a'+rune(f%3), f)
		big.put(t, path, strings.Join(w, " "))
		if !strings.HasPrefix(path, "memory/b/") {
			small.put(t, path, strings.Join(w, " "))
		}
	}
	accept := func(p string) bool { return !strings.HasPrefix(p, "memory/b/") }
	for _, q := range []string{"alpha", "beta gamma 数据", "的 索引 theta", "zeta zeta eta"} {
		scoped := exhaustiveBM25(t, keywordLeg(t, big.Store, q, accept))
		alone := exhaustiveBM25(t, keywordLeg(t, small.Store, q, nil))
		if len(scoped) != len(alone) {
			t.Fatalf("%q: %d scoped hits, %d in the small index", q, len(scoped), len(alone))
		}
		ss, as := scores(scoped), scores(alone)
		for i := range ss {
			if math.Abs(ss[i]-as[i]) > 1e-12 {
				t.Fatalf("%q: scores differ at %d: %v vs %v", q, i, ss[i], as[i])
			}
		}
	}
}

func scores(hs []kwHit) []float64 {
	out := make([]float64, len(hs))
	for i, h := range hs {
		out[i] = h.score
	}
	sort.Float64s(out)
	return out
}

// A chunk indexed by PutFile (its token stream analysed once and handed to
// Bleve in a chunkTextField) scores exactly as when Bleve analyses its text
// itself into a document.TextField: same norms, frequencies and phrase
// positions.
func TestReplayedAnalysisEqualsBleveAnalysis(t *testing.T) {
	dir := t.TempDir()
	b := openBuiltin(t, dir)
	fillZipf(t, b, 60)
	b.put(t, "memory/a/zh.md", "连续63天零回滚率，发布 v1.2 的 Caroline's painting ✅", "__init__ 的 detect_project_name() 函数")
	queries := []string{"the build timeout", "回滚 数据库 发布", "caroline painting", "detect_project_name init", "✅ 连续63天零回滚率"}
	// By chunk id: internal document numbers (the tie order) differ.
	collect := func(s *Store) map[string]map[int64][3]float64 {
		out := map[string]map[int64][3]float64{}
		for _, q := range queries {
			kl := keywordLeg(t, s, q, nil)
			for _, h := range exhaustiveBM25(t, kl) {
				id, _ := kl.chunkID(h.num)
				locs, err := kl.locations(context.Background(), []uint64{h.num})
				if err != nil {
					t.Fatal(err)
				}
				if out[q] == nil {
					out[q] = map[int64][3]float64{}
				}
				out[q][id] = [3]float64{h.score, h.cov, float64(len(locs[h.num]))}
			}
		}
		return out
	}
	replayed := collect(b.Store)
	b.Close()
	if err := os.RemoveAll(filepath.Join(dir, BleveName)); err != nil {
		t.Fatal(err)
	}
	rebuilt := openBuiltin(t, dir)
	// Index every chunk again the way Bleve would by itself: its own
	// analysis and document.TextField (the refill uses chunkTextField too).
	reindexChunks(t, rebuilt.Store, true, nil, 1000)
	if got := collect(rebuilt.Store); !reflect.DeepEqual(got, replayed) {
		t.Fatalf("scores differ between replayed and Bleve's own analysis:\n%v\n%v", replayed, got)
	}
}

// sortKwHits orders hits (the exhaustive reference) by score descending, then document number.
func sortKwHits(hs []kwHit) {
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].score != hs[j].score {
			return hs[i].score > hs[j].score
		}
		return hs[i].num < hs[j].num
	})
}
