package memory

import (
	"fmt"
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
