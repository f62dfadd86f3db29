package memory

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// Benchmarks over shared/corpora (skipped without it). Record results in
// docs/BENCHMARKS.md. Typical runs:
//
//	go test -run '^$' -bench 'IndexLoCoMo|HybridSearch' -benchtime 3x ./backend/memory/
//	go test -run '^$' -bench LoCoMoRecall -benchtime 1x ./backend/memory/

func benchSets(b *testing.B) map[string][]string {
	root := corporaDir(b)
	openclaw, locomo := corpusWorkspaces(b, root)
	return map[string][]string{"locomo": locomo, "all": append(append([]string{}, locomo...), openclaw...)}
}

func indexAll(b *testing.B, wss []string, dir string) (managers []*Manager, chunks int) {
	ctx := context.Background()
	for i, ws := range wss {
		m, err := Open(Options{Workspace: ws, IndexDir: filepath.Join(dir, fmt.Sprintf("ix%02d", i)), Logger: quietLogger(), DisableWatcher: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		chunks += m.Status().Chunks
		managers = append(managers, m)
	}
	return managers, chunks
}

// BenchmarkIndexLoCoMo measures a full index build (chunk, embed, SQLite,
// sqlite-vec, Bleve) from scratch: chunks/s and files/s.
func BenchmarkIndexLoCoMo(b *testing.B) {
	sets := benchSets(b)
	for _, name := range []string{"locomo", "all"} {
		wss := sets[name]
		b.Run(name, func(b *testing.B) {
			var chunks, files int
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				dir := b.TempDir()
				start := time.Now()
				ms, c := indexAll(b, wss, dir)
				elapsed += time.Since(start)
				chunks += c
				for _, m := range ms {
					files += m.Status().Files
					m.Close()
				}
			}
			b.ReportMetric(float64(chunks)/elapsed.Seconds(), "chunks/s")
			b.ReportMetric(float64(files)/elapsed.Seconds(), "files/s")
			b.ReportMetric(float64(chunks)/float64(b.N), "chunks")
		})
	}
}

// benchQueries is a fixed mixed-language query list.
var benchQueries = []string{
	"What country is Caroline's grandma from?",
	"camping trip meteor shower",
	"adoption agency LGBTQ",
	"favorite childhood book",
	"pottery workshop with the kids",
	"B2B 冷邮件为什么没有收益",
	"google-places 地點查詢",
	"向量数据库",
	"记忆",
	"project dashboard health score",
	"Masjid Besi Putrajaya",
	"final verification backend",
	"QK-7731",
	"deploy failed because of a timeout",
	"用户偏好",
	"what did we decide about the architecture?",
}

func percentile(ds []time.Duration, p float64) float64 {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := int(p * float64(len(ds)-1))
	return float64(ds[i].Microseconds()) / 1000
}

// BenchmarkHybridSearch measures memory_search latency (embed the query,
// both legs, exact completion, fusion) over a fixed query list run against
// every workspace of the set: p50 and p99 in ms.
func BenchmarkHybridSearch(b *testing.B) {
	sets := benchSets(b)
	for _, name := range []string{"locomo", "all"} {
		wss := sets[name]
		b.Run(name, func(b *testing.B) {
			ms, chunks := indexAll(b, wss, b.TempDir())
			defer func() {
				for _, m := range ms {
					m.Close()
				}
			}()
			ctx := context.Background()
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, m := range ms {
					for _, q := range benchQueries {
						start := time.Now()
						if _, err := m.Search(ctx, SearchOptions{Query: q}); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(start))
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(percentile(lat, 0.50), "p50-ms")
			b.ReportMetric(percentile(lat, 0.99), "p99-ms")
			b.ReportMetric(float64(len(lat))/float64(b.N), "queries/op")
			b.ReportMetric(float64(chunks)/float64(len(ms)), "chunks/workspace")
		})
	}
}

type locomoQuery struct {
	ID       string `json:"_id"`
	Conv     string `json:"conv"`
	Text     string `json:"text"`
	Category int    `json:"category"`
}

// BenchmarkLoCoMoRecall is a quality figure, not a speed one: for LoCoMo
// questions of categories 1-4 it reports the share of questions with an
// evidence turn inside a top-5 / top-10 result's line range (turn@k), and
// with an evidence file (one session date) in the top 5 (file@5). minScore
// is disabled so that every question gets k results.
func BenchmarkLoCoMoRecall(b *testing.B) {
	root := corporaDir(b)
	_, locomo := corpusWorkspaces(b, root)
	dir := filepath.Join(root, "bench", "locomo")
	qf, err := os.Open(filepath.Join(dir, "queries.jsonl"))
	if err != nil {
		b.Skipf("no LoCoMo queries: %v", err)
	}
	defer qf.Close()
	var qs []locomoQuery
	sc := bufio.NewScanner(qf)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var q locomoQuery
		if json.Unmarshal(sc.Bytes(), &q) == nil && q.Category >= 1 && q.Category <= 4 {
			qs = append(qs, q)
		}
	}
	qrels := map[string][]string{} // query id → turn ids like "D4:3"
	rf, err := os.ReadFile(filepath.Join(dir, "qrels.tsv"))
	if err != nil {
		b.Skipf("no LoCoMo qrels: %v", err)
	}
	for _, l := range strings.Split(string(rf), "\n")[1:] {
		f := strings.Split(l, "\t")
		if len(f) == 3 {
			id := f[1][strings.Index(f[1], ":")+1:]
			qrels[f[0]] = append(qrels[f[0]], id)
		}
	}
	tagRe := regexp.MustCompile(`^- \[(D\d+:\d+)\] `)
	for i := 0; i < b.N; i++ {
		var n, turn5, turn10, file5 int
		for _, ws := range locomo {
			conv := filepath.Base(ws)
			// turn id → (file, line)
			where := map[string]struct {
				path string
				line int
			}{}
			files, _ := filepath.Glob(filepath.Join(ws, "memory", "*.md"))
			for _, f := range files {
				data, _ := os.ReadFile(f)
				for ln, l := range strings.Split(string(data), "\n") {
					if m := tagRe.FindStringSubmatch(l); m != nil {
						where[m[1]] = struct {
							path string
							line int
						}{"memory/" + filepath.Base(f), ln + 1}
					}
				}
			}
			m, err := Open(Options{Workspace: ws, IndexDir: filepath.Join(b.TempDir(), conv), Logger: quietLogger(), DisableWatcher: true})
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			for _, q := range qs {
				if q.Conv != conv || len(qrels[q.ID]) == 0 {
					continue
				}
				res, err := m.Search(context.Background(), SearchOptions{Query: q.Text, MaxResults: 10, MinScore: -1})
				if err != nil {
					b.Fatal(err)
				}
				n++
				hitTurn := func(k int) bool {
					for ri, r := range res.Results {
						if ri >= k {
							break
						}
						for _, t := range qrels[q.ID] {
							w, ok := where[t]
							if ok && w.path == r.Path && r.StartLine <= w.line && w.line <= r.EndLine {
								return true
							}
						}
					}
					return false
				}
				if hitTurn(5) {
					turn5++
				}
				if hitTurn(10) {
					turn10++
				}
				for ri, r := range res.Results {
					if ri >= 5 {
						break
					}
					found := false
					for _, t := range qrels[q.ID] {
						if where[t].path == r.Path {
							found = true
						}
					}
					if found {
						file5++
						break
					}
				}
			}
			m.Close()
		}
		b.ReportMetric(float64(n), "questions")
		b.ReportMetric(float64(turn5)/float64(n), "turn@5")
		b.ReportMetric(float64(turn10)/float64(n), "turn@10")
		b.ReportMetric(float64(file5)/float64(n), "file@5")
	}
}

// queryText returns n characters of real text: English from the LoCoMo
// workspaces' notes, Chinese from the CMRC 2018 passages, repeated when the
// source is shorter.
func queryText(b *testing.B, root, lang string, n int) string {
	b.Helper()
	var src strings.Builder
	switch lang {
	case "en":
		files, _ := filepath.Glob(filepath.Join(root, "bench", "locomo", "workspaces", "conv-26", "memory", "*.md"))
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			src.Write(data)
			if src.Len() > 4*n {
				break
			}
		}
	case "zh":
		f, err := os.Open(filepath.Join(root, "bench", "cmrc2018", "corpus.jsonl"))
		if err != nil {
			b.Skipf("no CMRC 2018 corpus: %v", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() && src.Len() < 4*n {
			var d struct{ Text string }
			if err := json.Unmarshal(sc.Bytes(), &d); err == nil {
				src.WriteString(d.Text)
			}
		}
	}
	if src.Len() == 0 {
		b.Skipf("no %s text under %s", lang, root)
	}
	text := []rune(src.String())
	out := make([]rune, 0, n)
	for len(out) < n {
		out = append(out, text[:min(len(text), n-len(out))]...)
	}
	return string(out)
}

// BenchmarkSearchQueryLength measures one hybrid memory_search by query
// length (characters of real English and Chinese text) over the OpenClaw
// and LoCoMo workspaces: ms per search and MB allocated per search. It is
// the measurement behind MaxQueryChars.
func BenchmarkSearchQueryLength(b *testing.B) {
	root := corporaDir(b)
	sets := benchSets(b)
	ms, _ := indexAll(b, sets["all"], b.TempDir())
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	ctx := context.Background()
	for _, lang := range []string{"en", "zh"} {
		for _, n := range []int{100, 1000, MaxQueryChars} {
			q := queryText(b, root, lang, n)
			b.Run(fmt.Sprintf("%s-%d", lang, n), func(b *testing.B) {
				b.ReportAllocs()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					for _, m := range ms {
						if _, err := m.Search(ctx, SearchOptions{Query: q}); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*len(ms)), "ms/search")
			})
		}
	}
}
