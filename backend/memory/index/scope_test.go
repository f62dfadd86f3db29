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

// TestFileStatsFollowWrites checks that the file statistics, read from
// SQLite once and then updated by every committed write, equal a fresh read
// after puts, rewrites and deletions, in and out of bulk mode, and that
// Counts (which reads them) counts the chunk rows.
func TestFileStatsFollowWrites(t *testing.T) {
	ctx := context.Background()
	b := openBuiltin(t, t.TempDir())
	fresh := func() map[string][2]uint64 {
		rows, err := b.db.Query("SELECT path, chunks, tokens FROM files")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string][2]uint64{}
		for rows.Next() {
			var p string
			var c, tk uint64
			if err := rows.Scan(&p, &c, &tk); err != nil {
				t.Fatal(err)
			}
			out[p] = [2]uint64{c, tk}
		}
		return out
	}
	check := func(when string) {
		t.Helper()
		fs, err := b.fileStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][2]uint64{}
		var chunks, tokens uint64
		for _, f := range fs.files {
			got[f.path] = [2]uint64{f.chunks, f.tokens}
			chunks += f.chunks
			tokens += f.tokens
		}
		want := fresh()
		if fmt.Sprint(got) != fmt.Sprint(want) || chunks != fs.chunks || tokens != fs.tokens || len(fs.idx) != len(fs.files) {
			t.Fatalf("%s: statistics %v (sums %d/%d), SQLite %v", when, got, fs.chunks, fs.tokens, want)
		}
		var rowsN int
		if err := b.db.QueryRow("SELECT count(*) FROM chunks").Scan(&rowsN); err != nil {
			t.Fatal(err)
		}
		if files, n, err := b.Counts(ctx); err != nil || files != len(want) || n != rowsN {
			t.Fatalf("%s: Counts %d files %d chunks (%v); SQLite %d files %d chunk rows", when, files, n, err, len(want), rowsN)
		}
	}
	b.put(t, "memory/a.md", "alpha beta", "gamma")
	check("before the first read")
	b.put(t, "memory/b.md", "delta")
	b.put(t, "memory/a.md", "alpha only")
	check("after a put and a rewrite")
	if err := b.DeleteFile(ctx, "memory/a.md"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteFile(ctx, "memory/nothing.md"); err != nil {
		t.Fatal(err)
	}
	check("after deletions")
	b.BeginBulk()
	for i := 0; i < 30; i++ {
		b.put(t, fmt.Sprintf("memory/bulk/%02d.md", i), strings.Repeat("word ", i+1), "line two 第二行")
	}
	if err := b.DeleteFile(ctx, "memory/b.md"); err != nil {
		t.Fatal(err)
	}
	b.put(t, "memory/bulk/00.md", "rewritten in the group")
	if err := b.EndBulk(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a bulk group")
}
