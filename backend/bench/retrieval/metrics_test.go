package retrieval

import (
	"math"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestScore checks every metric on hand-computed cases. l2(r) is the
// discount log2(r+1) of rank r.
func TestScore(t *testing.T) {
	l2 := func(rank int) float64 { return math.Log2(float64(rank + 1)) }
	x10 := []string{"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10"}
	tests := []struct {
		name   string
		ranked []string
		rel    Judgments
		want   Scores
	}{
		{
			name: "first relevant at rank 1", ranked: []string{"a", "b"}, rel: Judgments{"a": 1},
			want: Scores{Recall1: 1, Recall5: 1, Recall10: 1, Any10: 1, NDCG10: 1, RR: 1},
		},
		{
			name: "two relevant at ranks 2 and 4", ranked: []string{"a", "b", "c", "d"}, rel: Judgments{"b": 1, "d": 1},
			// DCG = 1/l2(2) + 1/l2(4); IDCG = 1/l2(1) + 1/l2(2)
			want: Scores{Recall1: 0, Recall5: 1, Recall10: 1, Any10: 1,
				NDCG10: (1/l2(2) + 1/l2(4)) / (1 + 1/l2(2)), RR: 0.5},
		},
		{
			name: "three relevant, two found", ranked: []string{"a", "x", "b"}, rel: Judgments{"a": 1, "b": 1, "c": 1},
			want: Scores{Recall1: 1.0 / 3, Recall5: 2.0 / 3, Recall10: 2.0 / 3, Any10: 1,
				NDCG10: (1 + 1/l2(3)) / (1 + 1/l2(2) + 1/l2(3)), RR: 1},
		},
		{
			name: "graded gains, lesser one first", ranked: []string{"b", "a"}, rel: Judgments{"a": 2, "b": 1},
			// DCG = 1 + 2/l2(2); IDCG = 2 + 1/l2(2)
			want: Scores{Recall1: 0.5, Recall5: 1, Recall10: 1, Any10: 1,
				NDCG10: (1 + 2/l2(2)) / (2 + 1/l2(2)), RR: 1},
		},
		{
			name: "relevant at rank 11 counts only in MRR", ranked: append(append([]string{}, x10...), "a"), rel: Judgments{"a": 1},
			want: Scores{RR: 1.0 / 11},
		},
		{
			name: "relevant at rank 6", ranked: []string{"x1", "x2", "x3", "x4", "x5", "a"}, rel: Judgments{"a": 1},
			want: Scores{Recall10: 1, Any10: 1, NDCG10: 1 / l2(6), RR: 1.0 / 6},
		},
		{name: "nothing relevant retrieved", ranked: []string{"x"}, rel: Judgments{"a": 1}, want: Scores{}},
		{name: "empty ranking", ranked: nil, rel: Judgments{"a": 1}, want: Scores{}},
		{name: "no judgments", ranked: []string{"a"}, rel: Judgments{}, want: Scores{}},
		{
			name: "more relevant than 10: the ideal ranking is cut at 10", ranked: []string{"r1"},
			rel:  Judgments{"r1": 1, "r2": 1, "r3": 1, "r4": 1, "r5": 1, "r6": 1, "r7": 1, "r8": 1, "r9": 1, "r10": 1, "r11": 1, "r12": 1},
			want: Scores{Recall1: 1.0 / 12, Recall5: 1.0 / 12, Recall10: 1.0 / 12, Any10: 1, NDCG10: 1 / idcg(10), RR: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Score(tc.ranked, tc.rel)
			checks := []struct {
				metric    string
				got, want float64
			}{
				{"Recall@1", got.Recall1, tc.want.Recall1},
				{"Recall@5", got.Recall5, tc.want.Recall5},
				{"Recall@10", got.Recall10, tc.want.Recall10},
				{"any@10", got.Any10, tc.want.Any10},
				{"nDCG@10", got.NDCG10, tc.want.NDCG10},
				{"RR", got.RR, tc.want.RR},
			}
			for _, c := range checks {
				if !near(c.got, c.want) {
					t.Errorf("%s = %.6f, want %.6f", c.metric, c.got, c.want)
				}
			}
		})
	}
}

// idcg is the DCG of n relevant documents of gain 1 at ranks 1..n.
func idcg(n int) float64 {
	var s float64
	for i := 1; i <= n; i++ {
		s += 1 / math.Log2(float64(i+1))
	}
	return s
}

func TestMeanScores(t *testing.T) {
	m := meanScores([]Scores{{Recall1: 1, RR: 1, NDCG10: 1}, {Recall1: 0, RR: 0.5, NDCG10: 0.5}, {RR: 0}})
	if !near(m.Recall1, 1.0/3) || !near(m.RR, 0.5) || !near(m.NDCG10, 0.5) {
		t.Errorf("mean = %+v", m)
	}
	if z := meanScores(nil); z != (Scores{}) {
		t.Errorf("mean of nothing = %+v", z)
	}
}

func TestPercentile(t *testing.T) {
	var hundred []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		name string
		ds   []time.Duration
		p    float64
		want float64
	}{
		{"p50 of 1..100 ms", hundred, 50, 50},
		{"p99 of 1..100 ms", hundred, 99, 99},
		{"p100 of 1..100 ms", hundred, 100, 100},
		{"one value", []time.Duration{1500 * time.Microsecond}, 99, 1.5},
		{"p50 of two", []time.Duration{2 * time.Millisecond, 4 * time.Millisecond}, 50, 2},
		{"empty", nil, 50, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.ds, tc.p); !near(got, tc.want) {
				t.Errorf("got %v ms, want %v ms", got, tc.want)
			}
		})
	}
	if hundred[0] != 100*time.Millisecond {
		t.Error("Percentile reordered its input")
	}
}
