package index

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// Tests that the result list is the exact ranking of the whole index, so it
// does not depend on MaxResults (SPEC §4.3), even when the best chunk is in
// neither leg's first pool and when files are duplicated.

// phraseChunk is a long MEMORY.md chunk that contains "连续63天零回滚率"
// verbatim among much other text: low BM25 (length) and low cosine.
const phraseChunk = `# MEMORY.md — 长期记忆
名字：Catalyst 🧪，数字伙伴，负责代码实验室，主人偏好简洁的中文汇报。
每周日做一次记忆整理，把每日记录提炼到这里；过时的条目移到归档。
技术决策：向量检索选用 sqlite-vec，关键词检索用 Bleve BM25，网关令牌使用 ES256 签名。
里程碑：prompt-router 发布 v1.2，连续63天零回滚率，测试从 81 增加到 142。
项目：agent-dashboard 重写了健康评分，cron 任务从 12 个合并成 5 个。
习惯：先写测试再改代码；每次发布前跑一遍端到端测试；周报在周五下午发出。
联系人：Dana 负责财务导出，Lee 负责移动端，周会在周二上午十点。
Reading list: designing data-intensive applications, the pragmatic programmer, staff engineer.
Open questions: should the exporter retry on 429, and who owns the on-call rotation in December?`

// fillDuplicated stores five copies (memory/c1 … memory/c5) of a workspace in
// which 60 short notes share most characters of "连续63天零回滚率" (but not
// 63) and so beat phraseChunk on BM25 and on the vector leg, with a few
// English notes, an identifier and an emoji. Every text exists five times,
// so a pool of 50 chunks holds only 10 distinct texts.
func fillDuplicated(t *testing.T, b builtinStore) (chunks int) {
	t.Helper()
	for c := 1; c <= 5; c++ {
		dir := fmt.Sprintf("memory/c%d/", c)
		for d := 0; d < 60; d++ {
			b.put(t, fmt.Sprintf("%snotes/%02d.md", dir, d), fmt.Sprintf("第%d周值班记录：支付服务连续%d天零回滚率，告警%d次，主要来自磁盘和证书到期，已安排巡检。下周计划：升级数据库驱动，整理监控面板，复盘一次误报，和产品确认新需求的优先级。", d+1, 64+d, d%7+2))
		}
		for d := 0; d < 20; d++ {
			b.put(t, fmt.Sprintf("%slog/%02d.md", dir, d), fmt.Sprintf("构建第%d轮耗时63秒，缓存命中率%d%%。", d+1, 60+d))
		}
		b.put(t, dir+"MEMORY.md", phraseChunk)
		b.put(t, dir+"notes/build.md",
			"The nightly build failed because of a flaky timeout in the e2e suite; retried and it passed.",
			"Nightly build green again after the timeout fix.")
		b.put(t, dir+"notes/ticket.md", "Ticket QK-7731: invoices rendered twice after a refresh; idempotency key added.")
		b.put(t, dir+"notes/lab.md", "🧪 实验记录：新的分词器保留 emoji ✅")
		chunks += 60 + 20 + 1 + 2 + 1 + 1
	}
	return chunks
}

// settle merges the Bleve index into one segment. Bleve's BM25 takes the
// average field length from its term dictionary, whose size counts a term
// once per segment, so BM25 scores drift a little while background merges
// run; comparing two searches needs a settled index.
func settle(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// exhaustive returns the ranking of every chunk: with MaxResults 1024 each
// leg asks for MaxPool chunks, more than the test index holds, so every
// chunk either leg can find is a candidate.
func exhaustive(t *testing.T, b builtinStore, q string, minScore float64, chunks int) []Hit {
	t.Helper()
	if PoolSize(1024) <= chunks {
		t.Fatalf("test index too big for an exhaustive search: %d chunks", chunks)
	}
	return b.search(t, q, 1024, minScore)
}

func TestPhraseFirstWithDuplicatesAnyMaxResults(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	fillDuplicated(t, b)
	settle(t, b.Store)
	const q = "连续63天零回滚率"

	// The setting of the defect: the phrase chunk is not in the vector
	// leg's first pool (60 short notes share most of its characters), yet
	// it has the best fused score. (With Bleve's own BM25 it was outside
	// the keyword pool too; the keyword leg's true average length now
	// ranks it first there, since it alone holds "63".)
	ids, err := b.VectorNeighbours(context.Background(), b.vec(t, q), PoolSize(1), true)
	if err != nil {
		t.Fatal(err)
	}
	phraseID := firstChunkID(t, b, "memory/c1/MEMORY.md")
	for _, id := range ids {
		if id == phraseID {
			t.Fatalf("test setup: the phrase chunk is inside the first vector pool of %d", PoolSize(1))
		}
	}

	for _, n := range []int{1, 6, 12, 100} {
		for _, minScore := range []float64{0.35, -1} {
			hs := b.search(t, q, n, minScore)
			if len(hs) == 0 || hs[0].Path != "memory/c1/MEMORY.md" || !hs[0].Phrase {
				t.Errorf("maxResults %d minScore %v: want memory/c1/MEMORY.md first as a phrase match, got %s", n, minScore, describeHits(hs[:min(3, len(hs))]))
			}
			seen := map[string]bool{}
			for _, h := range hs {
				if seen[h.Hash] {
					t.Errorf("maxResults %d: text of %s:%d returned twice", n, h.Path, h.StartLine)
				}
				seen[h.Hash] = true
				// Copies collapse to the smallest path: every result is in c1.
				if !strings.HasPrefix(h.Path, "memory/c1/") {
					t.Errorf("maxResults %d: copy %s returned instead of the one in memory/c1", n, h.Path)
				}
			}
		}
	}
}

// firstChunkID returns the id of the first chunk of path.
func firstChunkID(t *testing.T, b builtinStore, path string) int64 {
	t.Helper()
	var id int64
	if err := b.db.QueryRow("SELECT id FROM chunks WHERE path = ? ORDER BY start_line LIMIT 1", path).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// For a table of queries, the top k for any MaxResults is a prefix of the
// exhaustive ranking (hence the top k for small k is a prefix of the top k
// for larger k), with the same scores, and the search proves it exact. The
// quantized vector leg (quant.go) must keep that: here its shortlist covers
// the whole index.
func TestTopKIsPrefixOfExhaustiveRanking(t *testing.T) {
	for _, mode := range []struct {
		name          string
		quantizeAbove int
	}{{"exact", -1}, {"quantized", 1}} {
		t.Run(mode.name, func(t *testing.T) { testTopKIsPrefix(t, mode.quantizeAbove) })
	}
}

func testTopKIsPrefix(t *testing.T, quantizeAbove int) {
	b := openBuiltinQuant(t, t.TempDir(), quantizeAbove)
	chunks := fillDuplicated(t, b)
	fillNotes(t, b)
	chunks += 3*14 + 3 + 2
	settle(t, b.Store)
	queries := []struct{ name, q string }{
		{"Chinese phrase", "连续63天零回滚率"},
		{"Chinese phrase with a space", "连续63天 零回滚率"},
		{"English question", "why did the nightly build fail with a timeout?"},
		{"identifier", "QK-7731"},
		{"emoji", "🧪"},
		{"common word", "the"},
		{"Chinese characters only", "发布"},
		{"keyword-style parts", "timeout 巡检 QK-7731"},
		{"keyword-style parts, one rare", "invoices 证书 缓存命中率"},
	}
	for _, tc := range queries {
		for _, minScore := range []float64{0.35, -1} {
			t.Run(fmt.Sprintf("%s/min%v", tc.name, minScore), func(t *testing.T) {
				ref := exhaustive(t, b, tc.q, minScore, chunks)
				for _, n := range []int{1, 6, 12, 100} {
					hs, exact, err := b.Store.search(context.Background(), Query{Text: tc.q, Vector: b.vec(t, tc.q), MaxResults: n, MinScore: minScore})
					if err != nil {
						t.Fatal(err)
					}
					if !exact {
						t.Errorf("maxResults %d: ranking not proven exact", n)
					}
					if want := min(n, len(ref)); len(hs) != want {
						t.Fatalf("maxResults %d: %d hits, want %d: %s", n, len(hs), want, describeHits(hs))
					}
					for i, h := range hs {
						if h.ChunkID != ref[i].ChunkID || h.Score != ref[i].Score {
							t.Errorf("maxResults %d: hit %d is %s, exhaustive ranking has %s", n, i+1, describeHits(hs[i:i+1]), describeHits(ref[i:i+1]))
							break
						}
					}
				}
			})
		}
	}
}

// A chunk with coverage ≥ c contains an essential term: the weights of the
// other terms add up to less than c·W.
func TestEssentialTerms(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := 0; trial < 500; trial++ {
		n := 1 + rng.Intn(8)
		q := analysedQuery{}
		for i := 0; i < n; i++ {
			q.terms = append(q.terms, fmt.Sprintf("t%d", i))
			q.df = append(q.df, uint64(rng.Intn(1000)))
			q.weight = append(q.weight, 0.1+5*rng.Float64())
			q.norm += q.weight[i]
		}
		if rng.Intn(4) == 0 {
			q.norm *= 1.5 // stopword-only queries have W above Σw
		}
		c := rng.Float64()
		ess, largest := q.essential(c)
		isEss := map[int]bool{}
		maxDF := 0
		for _, e := range ess {
			isEss[e] = true
		}
		var rest float64
		for i := range q.terms {
			if isEss[i] {
				maxDF = max(maxDF, int(q.df[i]))
			} else {
				rest += q.weight[i]
			}
		}
		if rest >= c*q.norm {
			t.Fatalf("trial %d: non-essential weight %v ≥ c·W = %v", trial, rest, c*q.norm)
		}
		if largest != maxDF {
			t.Fatalf("trial %d: largest df %d, want %d", trial, largest, maxDF)
		}
	}
}

// The bound U(c) used for chunks outside the candidates is an upper bound of
// the score of any chunk with coverage c (and keyword score at most the
// keyword pool's bound k̄), increasing in c, strictly while k̄ does not cap
// it.
func TestBoundCoversScore(t *testing.T) {
	for _, kbar := range []float64{1, 0.5} {
		r := &searchRun{useVec: true, maxBM25: 10, covFloor: 2, kq: analysedQuery{seq: []string{"a", "b"}}}
		r.vec = legPool{asked: 50, full: true, last: 0.3}
		r.kw = legPool{asked: 50, full: true, last: kbar}
		prev := -1.0
		for c := 0.0; c <= 1; c += 0.01 {
			u := r.bound(c)
			if u < prev || (u == prev && KeywordScore(c, 1) < kbar && u < 1) {
				t.Fatalf("k̄ %v: U not increasing at c=%v: %v after %v", kbar, c, u, prev)
			}
			prev = u
			for _, v := range []float64{0, 0.1, 0.3} {
				for _, rel := range []float64{0, 0.2, 0.4, 0.7, 1} {
					if KeywordScore(c, rel) > kbar {
						continue // in the keyword pool
					}
					for _, phrase := range []bool{false, true} {
						cd := &cand{hasK: true, k: rel * r.maxBM25, cov: c, phrase: phrase}
						if s := r.scoreWith(cd, v); s > u+scoreGrid {
							t.Fatalf("k̄ %v: score %v above bound %v (c=%v v=%v rel=%v)", kbar, s, u, c, v, rel)
						}
					}
				}
			}
		}
		// The keyword floor: a pool down to it proves U(1) < τ; a floor a
		// little higher does not.
		for _, tau := range []float64{0.3, 0.45, 0.6} {
			kb := r.keywordFloor(tau)
			low := *r
			low.kw.last = kb
			if low.bound(1) >= tau {
				t.Errorf("k̄ %v: keywordFloor(%v) = %v, U(1) = %v", kbar, tau, kb, low.bound(1))
			}
			low.kw.last = kb + 1e-6
			if kb+1e-6 < kbar && low.bound(1) < tau {
				t.Errorf("k̄ %v: keywordFloor(%v) = %v is not the largest", kbar, tau, kb)
			}
		}
	}
	r := &searchRun{useVec: true, maxBM25: 10, covFloor: 2, kq: analysedQuery{seq: []string{"a", "b"}}}
	r.vec = legPool{asked: 50, full: true, last: 0.3}
	r.kw = legPool{asked: 50, full: true, last: 1}
	// A bisection result is never above τ.
	for _, tau := range []float64{0.25, 0.35, 0.45, 0.6} {
		if c := r.coverageFloor(tau); r.bound(c) > tau || (c < 1 && r.bound(math.Min(1, c+1e-6)) <= tau) {
			t.Errorf("coverageFloor(%v) = %v, U = %v", tau, c, r.bound(c))
		}
	}
}
