package retrieval

import (
	"math"
	"sort"
	"time"
)

// Judgments are the judged documents of one query: document id → gain
// (the qrels score; only scores > 0 are kept, so every entry is relevant).
type Judgments map[string]float64

// Scores are the per-query metrics (see the package doc for the
// definitions; they match shared/corpora/bench/BASELINES.md).
type Scores struct {
	Recall1, Recall5, Recall10 float64
	Any10                      float64
	NDCG10                     float64
	RR                         float64 // reciprocal rank of the first relevant document, 0 if none
}

// Score computes the metrics of one ranked list of distinct document ids
// (best first) against the query's judgments. With no judgments every
// metric is 0 (the harness skips such queries before scoring).
func Score(ranked []string, rel Judgments) Scores {
	if len(rel) == 0 {
		return Scores{}
	}
	return Scores{
		Recall1:  RecallAt(ranked, rel, 1),
		Recall5:  RecallAt(ranked, rel, 5),
		Recall10: RecallAt(ranked, rel, 10),
		Any10:    AnyAt(ranked, rel, 10),
		NDCG10:   NDCGAt(ranked, rel, 10),
		RR:       ReciprocalRank(ranked, rel),
	}
}

// RecallAt is |relevant ∩ top k| / |relevant|.
func RecallAt(ranked []string, rel Judgments, k int) float64 {
	if len(rel) == 0 {
		return 0
	}
	hit := 0
	for _, id := range ranked[:min(k, len(ranked))] {
		if rel[id] > 0 {
			hit++
		}
	}
	return float64(hit) / float64(len(rel))
}

// AnyAt is 1 when at least one relevant document is in the top k, else 0.
func AnyAt(ranked []string, rel Judgments, k int) float64 {
	for _, id := range ranked[:min(k, len(ranked))] {
		if rel[id] > 0 {
			return 1
		}
	}
	return 0
}

// NDCGAt is DCG@k / IDCG@k with linear gains (the qrels score) and the
// discount log2(rank+1), rank 1-based: DCG@k = Σ_{i≤k} gain(dᵢ)/log2(i+1);
// IDCG@k is the DCG of the judged documents sorted by gain (the ideal
// ranking). This is the trec_eval / BEIR definition.
func NDCGAt(ranked []string, rel Judgments, k int) float64 {
	var dcg float64
	for i, id := range ranked[:min(k, len(ranked))] {
		dcg += rel[id] / math.Log2(float64(i+2))
	}
	gains := make([]float64, 0, len(rel))
	for _, g := range rel {
		gains = append(gains, g)
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(gains)))
	var idcg float64
	for i, g := range gains[:min(k, len(gains))] {
		idcg += g / math.Log2(float64(i+2))
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

// ReciprocalRank is 1/rank of the first relevant document in the whole
// ranked list (as deep as the search went), 0 when none is in it.
func ReciprocalRank(ranked []string, rel Judgments) float64 {
	for i, id := range ranked {
		if rel[id] > 0 {
			return 1 / float64(i+1)
		}
	}
	return 0
}

// scored is the scores of one query and its group.
type scored struct {
	group string
	Scores
}

// quality averages the scores that keep accepts (all when keep is nil).
func quality(ss []scored, keep func(scored) bool) Quality {
	var sel []Scores
	for _, s := range ss {
		if keep == nil || keep(s) {
			sel = append(sel, s.Scores)
		}
	}
	m := meanScores(sel)
	return Quality{N: len(sel), Recall1: m.Recall1, Recall5: m.Recall5, Recall10: m.Recall10, NDCG10: m.NDCG10, MRR: m.RR, Any10: m.Any10}
}

// meanScores averages per-query scores (the "mean" of MRR and of every
// other metric); an empty list gives zeros.
func meanScores(ss []Scores) Scores {
	var m Scores
	if len(ss) == 0 {
		return m
	}
	for _, s := range ss {
		m.Recall1 += s.Recall1
		m.Recall5 += s.Recall5
		m.Recall10 += s.Recall10
		m.Any10 += s.Any10
		m.NDCG10 += s.NDCG10
		m.RR += s.RR
	}
	n := float64(len(ss))
	m.Recall1 /= n
	m.Recall5 /= n
	m.Recall10 /= n
	m.Any10 /= n
	m.NDCG10 /= n
	m.RR /= n
	return m
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of ds
// in milliseconds: the smallest value with at least p % of the values at or
// below it. An empty list gives 0. ds is not modified.
func Percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}
