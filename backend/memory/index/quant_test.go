package index

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// Tests of the quantized vector leg (quant.go): the in-memory copy follows
// every committed write and is rebuilt at Open, its shortlist recalls the
// exact nearest neighbours, and searches through it keep the ranking rules.

// checkCopy asserts that the loaded quantized copy holds exactly the
// vectors of vec_chunks, each quantized from its stored float32 value.
func checkCopy(t *testing.T, s *Store) {
	t.Helper()
	if err := s.ensureQuant(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.Query("SELECT rowid, embedding FROM vec_chunks")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	q := s.quant
	q.mu.RLock()
	defer q.mu.RUnlock()
	n := 0
	for rows.Next() {
		var id int64
		var blob []byte
		if err := rows.Scan(&id, &blob); err != nil {
			t.Fatal(err)
		}
		n++
		sl, ok := q.slot[id]
		if !ok {
			t.Errorf("chunk %d is in vec_chunks but not in the quantized copy", id)
			continue
		}
		if q.ids[sl] != id {
			t.Errorf("slot %d holds chunk %d, the map says %d", sl, q.ids[sl], id)
		}
		b := make([]uint64, q.words)
		c := make([]int8, q.dims)
		sc := quantize(decodeVector(blob), b, c)
		if sc != q.scale[sl] || !slices.Equal(b, q.bits[int(sl)*q.words:int(sl+1)*q.words]) || !slices.Equal(c, q.codes[int(sl)*q.dims:int(sl+1)*q.dims]) {
			t.Errorf("chunk %d: quantized copy differs from its stored vector", id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(q.ids) != n || len(q.slot) != n || q.n != n {
		t.Errorf("copy holds %d ids (%d in the map, count %d), vec_chunks %d", len(q.ids), len(q.slot), q.n, n)
	}
}

func TestQuantCopyFollowsWrites(t *testing.T) {
	ctx := context.Background()
	steps := []struct {
		name string
		run  func(t *testing.T, s *Store)
	}{
		{"put", func(t *testing.T, s *Store) {
			for i := 0; i < 20; i++ {
				put(t, s, fmt.Sprintf("memory/a%02d.md", i), fmt.Sprintf("note %d about deploys", i), fmt.Sprintf("second line %d of staging", i))
			}
		}},
		{"replace", func(t *testing.T, s *Store) {
			put(t, s, "memory/a03.md", "rewritten note about invoices", "and one more", "and a third")
			put(t, s, "memory/a04.md", "short")
		}},
		{"delete", func(t *testing.T, s *Store) {
			for _, p := range []string{"memory/a05.md", "memory/a06.md", "memory/a19.md", "memory/missing.md"} {
				if err := s.DeleteFile(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"bulk group", func(t *testing.T, s *Store) {
			s.BeginBulk()
			for i := 0; i < 30; i++ {
				put(t, s, fmt.Sprintf("memory/b%02d.md", i), fmt.Sprintf("bulk note %d 部署", i))
			}
			if err := s.DeleteFile(ctx, "memory/a07.md"); err != nil {
				t.Fatal(err)
			}
			put(t, s, "memory/a08.md", "bulk rewrite of a08")
			if err := s.EndBulk(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"aborted bulk group", func(t *testing.T, s *Store) {
			s.BeginBulk()
			put(t, s, "memory/c00.md", "never committed")
			if err := s.DeleteFile(ctx, "memory/a09.md"); err != nil {
				t.Fatal(err)
			}
			s.wmu.Lock()
			s.abortBulk()
			s.bulk = false
			s.wmu.Unlock()
		}},
		{"zero vector", func(t *testing.T, s *Store) {
			f := FileRecord{Path: "memory/zero.md", Hash: sha("zero"), MTime: 1, Size: 1, Layer: "role", Role: "main"}
			if err := s.PutFile(ctx, f, []ChunkRecord{{StartLine: 1, EndLine: 1, Text: "···", Hash: sha("···"), Vector: make([]float32, testDims)}}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, loadFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("loaded before writes=%v", loadFirst), func(t *testing.T) {
			dir := t.TempDir()
			o := testOpts(dir)
			o.QuantizeAbove = 1
			s := mustOpen(t, o)
			if loadFirst {
				checkCopy(t, s)
			}
			for _, st := range steps {
				st.run(t, s)
				if loadFirst {
					checkCopy(t, s)
					if t.Failed() {
						t.Fatalf("after step %q", st.name)
					}
				}
			}
			if got := s.quant.count(); !loadFirst && got == 0 {
				t.Fatalf("count not tracked while unloaded: %d", got)
			}
			checkCopy(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Rebuilt at Open from SQLite.
			s2 := mustOpen(t, o)
			if s2.quant.isLoaded() {
				t.Fatal("copy loaded before the first quantized search")
			}
			if !s2.useQuant() {
				t.Fatalf("reopened store with %d vectors does not use the quantized leg", s2.quant.count())
			}
			if hs := search(t, s2, "bulk note 部署", 3); len(hs) == 0 {
				t.Fatal("no hits after reopen")
			}
			checkCopy(t, s2)
		})
	}
}

// clustered returns n unit vectors of dims around k random centres, the
// shape of real embeddings (topics), deterministic for seed.
func clustered(seed int64, n, k, dims int, spread float64) [][]float32 {
	rng := rand.New(rand.NewSource(seed))
	centres := make([][]float64, k)
	for i := range centres {
		centres[i] = make([]float64, dims)
		for j := range centres[i] {
			centres[i][j] = rng.NormFloat64()
		}
	}
	out := make([][]float32, n)
	for i := range out {
		c := centres[rng.Intn(k)]
		v := make([]float32, dims)
		var norm float64
		for j := range v {
			x := c[j] + spread*rng.NormFloat64()
			v[j] = float32(x)
			norm += x * x
		}
		for j := range v {
			v[j] /= float32(math.Sqrt(norm))
		}
		out[i] = v
	}
	return out
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func loadedQuant(dims int, vs [][]float32) *quantIndex {
	q := newQuantIndex(dims, 0)
	q.loaded, q.slot = true, map[int64]int32{}
	ops := make([]qop, len(vs))
	for i, v := range vs {
		ops[i] = qop{id: int64(i + 1), vec: v}
	}
	q.apply(ops)
	return q
}

// The shortlist's top 10 (by the int8 estimate) against the exact float32
// top 10, and the estimate's error.
func TestQuantShortlistRecall(t *testing.T) {
	const dims, n, queries = 384, 20000, 50
	cases := []struct {
		name      string
		spread    float64
		shortlist int
		minRecall float64
	}{
		{"tight clusters, shortlist 2%", 1.5, 400, 0.9},
		// Nearly unstructured data: neighbours are barely closer than the
		// rest, and sign bits say little; a bigger shortlist makes up.
		{"loose clusters, shortlist 2%", 3, 400, 0.85},
		{"loose clusters, shortlist 20%", 3, 4096, 0.97},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vs := clustered(1, n+queries, 200, dims, tc.spread)
			q := loadedQuant(dims, vs[:n])
			hit, total := 0, 0
			maxErr := 0.0
			for _, qv := range vs[n:] {
				exact := make([]qscore, n)
				for i, v := range vs[:n] {
					exact[i] = qscore{id: int64(i + 1), v: dot(qv, v)}
				}
				slices.SortFunc(exact, func(a, b qscore) int {
					if a.v > b.v {
						return -1
					}
					if a.v < b.v {
						return 1
					}
					return int(a.id - b.id)
				})
				sl := q.shortlist(qv, tc.shortlist, nil)
				if len(sl) < tc.shortlist {
					t.Fatalf("shortlist of %d, want at least %d", len(sl), tc.shortlist)
				}
				top := map[int64]bool{}
				for _, e := range sl[:10] {
					top[e.id] = true
					maxErr = max(maxErr, math.Abs(e.v-clamp01(dot(qv, vs[e.id-1]))))
				}
				for _, e := range exact[:10] {
					total++
					if top[e.id] {
						hit++
					}
				}
			}
			recall := float64(hit) / float64(total)
			t.Logf("recall@10 %.3f, max |estimate − cosine| %.4f", recall, maxErr)
			if recall < tc.minRecall {
				t.Errorf("recall@10 %.3f, want ≥ %.2f", recall, tc.minRecall)
			}
			if maxErr > 0.01 {
				t.Errorf("int8 estimate off by %.4f", maxErr)
			}
		})
	}
}

// With the shortlist covering the whole index, the quantized search returns
// what the exact search returns (scores within the int8 error).
func TestQuantSearchMatchesExact(t *testing.T) {
	exact := openBuiltinQuant(t, t.TempDir(), -1)
	quant := openBuiltinQuant(t, t.TempDir(), 1)
	for _, b := range []builtinStore{exact, quant} {
		fillDuplicated(t, b)
		fillNotes(t, b)
		settle(t, b.Store)
	}
	for _, q := range []string{"连续63天零回滚率", "why did the nightly build fail with a timeout?", "QK-7731", "deploy billing staging", "发布", "监控面板 误报"} {
		for _, n := range []int{1, 6, 20} {
			he, hq := exact.search(t, q, n, -1), quant.search(t, q, n, -1)
			if len(he) != len(hq) {
				t.Errorf("%q n=%d: %d exact hits, %d quantized", q, n, len(he), len(hq))
				continue
			}
			for i := range he {
				if he[i].Path != hq[i].Path || he[i].StartLine != hq[i].StartLine || math.Abs(he[i].Score-hq[i].Score) > 0.005 {
					t.Errorf("%q n=%d hit %d: exact %s, quantized %s", q, n, i+1, describeHits(he[i:i+1]), describeHits(hq[i:i+1]))
				}
			}
		}
	}
}

// When the index is bigger than the shortlist, the first result still does
// not depend on MaxResults (failure class 7), and the top k for small k is
// a prefix of the top k for larger k.
func TestQuantTopResultIndependentOfMaxResults(t *testing.T) {
	words := strings.Fields(`deploy billing staging invoice timeout build nightly release review design index search
		vector keyword memory agent budget meeting travel paris berlin tokyo garden pottery camping book music
		部署 账单 发布 监控 告警 数据库 证书 巡检 复盘 需求 会议 旅行 花园 读书 音乐`)
	rng := rand.New(rand.NewSource(3))
	o := testOpts(t.TempDir())
	o.QuantizeAbove = 1
	s := mustOpen(t, o)
	s.BeginBulk()
	const files, perFile = 120, 50
	for f := 0; f < files; f++ {
		var texts []string
		for c := 0; c < perFile; c++ {
			var sb strings.Builder
			for w := 0; w < 6+rng.Intn(10); w++ {
				sb.WriteString(words[rng.Intn(len(words))])
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "#%d-%d", f, c)
			texts = append(texts, sb.String())
		}
		put(t, s, fmt.Sprintf("memory/f%03d.md", f), texts...)
	}
	if err := s.EndBulk(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, s)
	if n := s.quant.count(); n <= QuantShortlist {
		t.Fatalf("test index has %d vectors, not more than the shortlist %d", n, QuantShortlist)
	}
	for _, q := range []string{"deploy billing", "nightly build timeout", "部署 监控 告警", "paris travel book", "garden"} {
		for _, minScore := range []float64{0.35, -1} {
			var prev []Hit
			for _, n := range []int{1, 5, 12, 40} {
				hs, err := s.Search(context.Background(), Query{Text: q, Vector: toyVec(q, testDims), MaxResults: n, MinScore: minScore})
				if err != nil {
					t.Fatal(err)
				}
				if minScore < 0 && len(hs) != n {
					t.Fatalf("%q n=%d: %d hits", q, n, len(hs))
				}
				for i := range prev {
					if i >= len(hs) || hs[i].ChunkID != prev[i].ChunkID || hs[i].Score != prev[i].Score {
						t.Errorf("%q min %v: top %d of maxResults %d is not a prefix of maxResults %d: %v vs %v", q, minScore, len(prev), n, n, paths(prev), paths(hs))
						break
					}
				}
				prev = hs
			}
		}
	}
}
