package index

import "context"

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
	// Floor is the score floor the search applied: Query.MinScore, or the
	// default floor of the query when Query.AutoFloor is set; negative
	// means none.
	Floor float64
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
	var wmax float64
	for i, t := range q.terms {
		if !stopwords[t] {
			info.Content++
		}
		if i < len(q.weight) {
			wmax = max(wmax, q.weight[i])
		}
	}
	if wmax > 0 {
		info.Length = q.norm / wmax
	}
	return info
}

// autoFloor is the default score floor of a query (Query.AutoFloor).
func autoFloor(q *analysedQuery, useVec bool) float64 {
	return 0.35
}
