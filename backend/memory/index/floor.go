package index

import (
	"context"
	"math"
)

// QueryInfo describes what a search made of its query (SearchWithInfo).
type QueryInfo struct {
	// Terms is the number of distinct analysed query terms (words, CJK
	// characters and bigrams, symbols); Content those that are not
	// function words.
	Terms, Content int
	// Length is the query's effective length in terms: W / max w(t), the
	// number of its most informative term that its weight W amounts to
	// (see the package comment); 0 without terms.
	Length float64
	// Missing is the share of W carried by the terms that no chunk of the
	// search's scope holds (0 without terms): a question about something
	// the notes never mention often names it in words found nowhere.
	Missing float64
	// Floor is the score floor the search applied to every result:
	// Query.MinScore, or the default list floor of the query when
	// Query.AutoFloor is set; negative means none. AnswerFloor is the score
	// the best result had to reach for any result to be returned (Floor
	// unless Query.AutoFloor; see DefaultFloor).
	Floor, AnswerFloor float64
}

// SearchWithInfo is Search; it also returns what the search made of the
// query (QueryInfo).
func (s *Store) SearchWithInfo(ctx context.Context, q Query) ([]Hit, QueryInfo, error) {
	var info QueryInfo
	q.info = &info
	hits, _, err := s.search(ctx, q)
	return hits, info, err
}

// queryInfo summarises the analysed (and weighed) query.
func queryInfo(q *analysedQuery) QueryInfo {
	info := QueryInfo{Terms: len(q.terms)}
	var wmax, missing float64
	for i, t := range q.terms {
		if !stopwords[t] {
			info.Content++
		}
		if i < len(q.weight) {
			wmax = max(wmax, q.weight[i])
			if i < len(q.df) && q.df[i] == 0 {
				missing += q.weight[i]
			}
		}
	}
	if wmax > 0 {
		info.Length = q.norm / wmax
	}
	if q.norm > 0 {
		info.Missing = missing / q.norm
	}
	return info
}

// The default floor (Query.AutoFloor) has two levels. A query of effective
// length L (QueryInfo.Length) is answered only when its best result
// reaches
//
//	answer(L) = clamp(FloorBase − FloorSlope·ln L, FloorMin, FloorBase)
//
// and then every result down to answer(L) − FloorListDrop is returned.
// A long natural question shares fewer of its words with the note that
// answers it than a two-word lookup does, so its answer scores lower on the
// absolute 0–1 scale (its coverage is a smaller share of more terms), and
// so does the noise it finds when the answer is absent. Whether a question
// is answered at all is decided by its best result alone (so the first
// result never depends on maxResults); below it, an answer's other relevant
// chunks often score a little lower, hence the list floor. The constants
// were calibrated with `atrium bench retrieval --dump` on the calibration
// half of the questions (LoCoMo turns and workspaces, LongMemEval, CMRC;
// docs/BENCHMARKS.md): the most absent questions answered with nothing
// while hit@5 stays within 2 points of hit@5 without a floor on every set.
// Issue 25 lowered the floor of long questions (FloorSlope 0.02 → 0.05,
// FloorMin 0.24 → 0.13), calibrated the same way on the tuning half of
// the judged OpenClaw questions, LoCoMo and CMRC: people's own questions
// in other words than their notes scored below the old floor although the
// answer ranked first. At most 2 % of answerable questions now get
// nothing and hit@5 stays within 3 points of no floor; an absent question
// more often gets weak results, which memory.Confidence marks "low".
const (
	FloorBase     = 0.28
	FloorSlope    = 0.05
	FloorMin      = 0.13
	FloorListDrop = 0.04
)

// DefaultFloor returns the default floors of a query of effective length
// length (QueryInfo.Length; below 1 counts as 1): answer, the score the
// best result must reach for the query to get any result, and list, the
// floor of every result once it does.
func DefaultFloor(length float64) (answer, list float64) {
	f := FloorBase - FloorSlope*math.Log(max(1, length))
	answer = min(FloorBase, max(FloorMin, f))
	return answer, answer - FloorListDrop
}
