package memory

import (
	"fmt"
	"github.com/atrium-dev/atrium/backend/memory/index"
	"math"
)

// Confidence levels (Confidence.Level).
const (
	ConfidenceHigh   = "high"
	ConfidenceMedium = "medium"
	ConfidenceLow    = "low"
)

// How sure a search is that its results answer the query (issue 25). A
// query of effective length L (index.QueryInfo.Length; below 1 counts as
// 1) whose best result scores s is
//
//	low     when s < ConfidenceLowBase − ConfidenceLowSlope·ln L (or no result),
//	high    when s ≥ that bound + ConfidenceHighMargin,
//	medium  otherwise.
//
// A longer question shares a smaller part of its words with the note that
// answers it, so its best score is lower whether the answer is there or
// not; hence the bound falls with ln L, as the default floor does
// (index.DefaultFloor). The constants were calibrated with `atrium bench
// retrieval --dump` on the tuning half (FNV-1a of the id even) of the
// judged OpenClaw questions and of LoCoMo's turns: the most absent
// questions low while at most 10 % of the answerable ones are
// (docs/BENCHMARKS.md, "Search that answers people's own questions").
const (
	ConfidenceLowBase    = 0.38
	ConfidenceLowSlope   = 0.075
	ConfidenceHighMargin = 0.15
)

// Confidence is a search's confidence in its answer as a whole: Level is
// ConfidenceHigh, ConfidenceMedium or ConfidenceLow, Score the number it
// comes from (the best result's score, ScoreDecimals decimals; 0 without
// results).
type Confidence struct {
	Level string  `json:"level"`
	Score float64 `json:"score"`
}

// confidenceOf grades a best score s of a query of effective length
// length (see the constants above).
func confidenceOf(s, length float64, any bool) Confidence {
	if !any {
		return Confidence{Level: ConfidenceLow}
	}
	low := ConfidenceLowBase - ConfidenceLowSlope*math.Log(max(1, length))
	c := Confidence{Level: ConfidenceMedium, Score: RoundScore(s)}
	switch {
	case s < low:
		c.Level = ConfidenceLow
	case s >= low+ConfidenceHighMargin:
		c.Level = ConfidenceHigh
	}
	return c
}

// confidenceRank orders the levels: low 0, medium 1, high 2.
func confidenceRank(level string) int {
	switch level {
	case ConfidenceHigh:
		return 2
	case ConfidenceMedium:
		return 1
	}
	return 0
}

// Weak reports whether the confidence is low: the results, if any, may
// not answer the query, and a caller (an agent, a person) should look
// further or say so rather than rely on them.
func (c Confidence) Weak() bool { return c.Level == ConfidenceLow }

// Note is what a model is told with the results of a search (the agent
// tools' memory_search): "" unless the confidence is low, else a sentence
// saying the results are weak, with the score they come from.
func (c Confidence) Note() string {
	if !c.Weak() {
		return ""
	}
	if c.Score == 0 {
		return "Nothing in memory matches this query well (confidence low). Try other words, or say that the notes do not hold it."
	}
	return fmt.Sprintf("Weak results (confidence low, best score %.4g): they may not answer the query. Check them before relying on them, search again in other words, or say that the notes do not hold the answer.", c.Score)
}

// ConfidenceSignals are the measurements of one search that its confidence
// is computed from (confidenceFrom): all scores in [0,1] on the fused
// scale of package index, 0 when there is no such result.
type ConfidenceSignals struct {
	// Results is the number of results.
	Results int `json:"results"`
	// Best and Second are the first and second results' scores.
	Best   float64 `json:"best"`
	Second float64 `json:"second"`
	// Vector, Keyword and Coverage are the first result's leg scores and
	// the IDF-weighted share of the query's terms it holds (index.Hit).
	Vector   float64 `json:"vector"`
	Keyword  float64 `json:"keyword"`
	Coverage float64 `json:"coverage"`
	// MaxCoverage is the largest Coverage among the results.
	MaxCoverage float64 `json:"maxCoverage"`
	// Agree says that the result with the best vector score is also the
	// one with the best keyword score (the two legs agree on the answer).
	Agree bool `json:"agree"`
	// Length, Terms and Content are the query's effective length, terms
	// and content terms (index.QueryInfo).
	Length  float64 `json:"length"`
	Terms   int     `json:"terms"`
	Content int     `json:"content"`
	// Missing is the share of the query's weight in terms no indexed
	// chunk holds (index.QueryInfo.Missing).
	Missing float64 `json:"missing"`
	// Focus, Unique, PoolCover and TopOfPresent weigh the query's terms
	// that some chunk holds (weight w(t), total P): TopOfPresent is the
	// first result's share of P; Focus the same with each term weighed
	// down by the share of the candidates that hold it too (at least
	// confidencePoolMin places), so that a subject every candidate
	// shares counts little; Unique the share of P in terms the first
	// result holds and at most one candidate does; PoolCover the share of
	// P that the candidates hold between them.
	Focus        float64 `json:"focus"`
	Unique       float64 `json:"unique"`
	PoolCover    float64 `json:"poolCover"`
	TopOfPresent float64 `json:"topOfPresent"`
}

// confidencePoolMin is the fewest results the shares of Focus are
// taken over: a pool cut short by the floor counts the missing places as
// results without the term.
const confidencePoolMin = 5

// signalsOf measures a search: hits are its results (in result order),
// pool the index's candidates they were chosen from (in index order),
// info what the index made of the query; terms analyses a chunk's text
// as the index does (index.Store.Terms).
func signalsOf(hits, pool []index.Hit, info index.QueryInfo, terms func(string) []string) ConfidenceSignals {
	s := ConfidenceSignals{Results: len(hits), Length: info.Length, Terms: info.Terms, Content: info.Content, Missing: info.Missing}
	if len(hits) == 0 {
		return s
	}
	s.Best, s.Vector, s.Keyword, s.Coverage = hits[0].Score, hits[0].Vector, hits[0].Keyword, hits[0].Coverage
	if len(hits) > 1 {
		s.Second = hits[1].Score
	}
	bv, bk := 0, 0
	for i, h := range hits {
		s.MaxCoverage = max(s.MaxCoverage, h.Coverage)
		if h.Vector > hits[bv].Vector {
			bv = i
		}
		if h.Keyword > hits[bk].Keyword {
			bk = i
		}
	}
	s.Agree = bv == bk
	// Which query terms each candidate holds.
	idx := make(map[string]int, len(info.Weighted))
	var present, total float64
	for i, tw := range info.Weighted {
		idx[tw.Term] = i
		total += tw.Weight
		if tw.DF > 0 {
			present += tw.Weight
		}
	}
	if present <= 0 || terms == nil {
		return s
	}
	holds := func(text string) []bool {
		in := make([]bool, len(info.Weighted))
		for _, t := range terms(text) {
			if i, ok := idx[t]; ok {
				in[i] = true
			}
		}
		return in
	}
	count := make([]int, len(info.Weighted))
	for _, h := range pool {
		for i, ok := range holds(h.Text) {
			if ok {
				count[i]++
			}
		}
	}
	k := float64(max(len(pool), confidencePoolMin))
	var focus, unique, union, top float64
	for i, ok := range holds(hits[0].Text) {
		w := info.Weighted[i].Weight
		if count[i] > 0 {
			union += w
		}
		if !ok {
			continue
		}
		top += w
		focus += w * (1 - min(1, float64(count[i])/k))
		if count[i] <= 1 {
			unique += w
		}
	}
	s.Focus, s.Unique, s.PoolCover, s.TopOfPresent = focus/present, unique/present, union/present, top/present
	return s
}
