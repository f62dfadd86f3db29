package index

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// A scoped search returns what the same search returns on an index holding
// only the scope's files — hits, scores, both leg scores, AlsoIn — with the
// exact vector leg and with the quantized copy (whose shortlist is then
// taken over the scope's vectors alone).
func TestScopedSearchEqualsScopeOnlyIndex(t *testing.T) {
	for _, mode := range []struct {
		name          string
		quantizeAbove int
	}{{"exact", -1}, {"quantized", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			big := openBuiltinQuant(t, t.TempDir(), mode.quantizeAbove)
			small := openBuiltinQuant(t, t.TempDir(), mode.quantizeAbove)
			rng := rand.New(rand.NewSource(11))
			words := strings.Fields("release rollback invoice cache budget kernel garden 发布 回滚 发票 缓存 预算 内核 花园 的 是")
			shared := "共享的段落 shared paragraph about the release budget"
			for f := 0; f < 90; f++ {
				var texts []string
				for c := 0; c < 1+rng.Intn(3); c++ {
					if rng.Intn(6) == 0 {
						texts = append(texts, shared)
						continue
					}
					var w []string
					for i := 0; i < 3+rng.Intn(20); i++ {
						w = append(w, words[rng.Intn(len(words))])
					}
					texts = append(texts, strings.Join(w, " "))
				}
				path := fmt.Sprintf("memory/%c/%02d.md", 'a'+rune(f%3), f)
				big.put(t, path, texts...)
				if !strings.HasPrefix(path, "memory/b/") {
					small.put(t, path, texts...)
				}
			}
			accept := func(p string) bool { return !strings.HasPrefix(p, "memory/b/") }
			for _, q := range []string{"release budget", "回滚 发票", "the kernel garden", "共享的段落", "缓存"} {
				for _, minScore := range []float64{0.35, -1} {
					qv := big.vec(t, q)
					got, err := big.Search(context.Background(), Query{Text: q, Vector: qv, MaxResults: 20, MinScore: minScore, Scope: accept})
					if err != nil {
						t.Fatal(err)
					}
					want, err := small.Search(context.Background(), Query{Text: q, Vector: qv, MaxResults: 20, MinScore: minScore})
					if err != nil {
						t.Fatal(err)
					}
					if g, w := describeScoped(got), describeScoped(want); g != w {
						t.Fatalf("%q min %v:\n scoped: %s\n alone:  %s", q, minScore, g, w)
					}
					if len(got) == 0 {
						t.Fatalf("%q: no hits (the test needs some)", q)
					}
				}
			}
		})
	}
}

func describeScoped(hs []Hit) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s:%d %.12f v=%.12f k=%.12f %v; ", h.Path, h.StartLine, h.Score, h.Vector, h.Keyword, h.AlsoIn)
	}
	return b.String()
}
