package memory

import (
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Multi-part questions (issue 15): a question that joins several asks —
// "What is QK-7731? 连接池怎么配置？", "What is X? And how do we Y?" — is
// searched as a whole and part by part, and each part's best result is in
// the answer. Searched as a whole only, the words of one part dilute the
// other's: the note holding QK-7731 scored 0.116 for the two-part question
// and 0.886 for "What is QK-7731?" alone, below any useful floor.

// MaxQuestionParts is the largest number of parts a question is split into;
// the text after the last split stays in the last part.
const MaxQuestionParts = 4

// questionParts splits q after each question or exclamation mark (? ？ !
// ！) and line break: the ends of asks. A period does not split: it ends
// the context of a question ("I moved last week. Where is the key?"), an
// initial or a title ("Dr. Seuss") far more often than an ask. Parts
// without a letter or digit are joined to the part before them. It returns
// nil when q is a single part.
func questionParts(q string) []string {
	var parts []string
	var from []int // the offset in q where each part starts
	start := 0
	cut := func(end int) {
		p := strings.TrimSpace(q[start:end])
		if p == "" {
			start = end
			return
		}
		if len(parts) > 0 && (!searchable(p) || !searchable(parts[len(parts)-1])) {
			parts[len(parts)-1] = strings.TrimSpace(q[from[len(from)-1]:end])
		} else {
			parts, from = append(parts, p), append(from, start)
		}
		start = end
	}
	for i, r := range q {
		if len(parts) == MaxQuestionParts-1 {
			break
		}
		end := i + utf8.RuneLen(r)
		switch r {
		case '?', '？', '!', '！', '\n':
			cut(end)
		}
	}
	cut(len(q))
	if len(parts) < 2 {
		return nil
	}
	return parts
}

// searchable reports whether s holds a letter or a digit.
func searchable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// searchParts searches the whole question and each of its parts with o's
// options (each with its own default floor when o.MinScore is 0) and
// merges them into at most n results: the whole question's results, plus
// the best result of every part that found one, each chunk with the best
// of its scores, in score order. When there are more of those than n, the
// best-scoring of the whole question's first result and the parts' bests
// come first, so the first result is the same for every n.
func (m *Manager) searchParts(ctx context.Context, o SearchOptions, parts []string, n int) (SearchResponse, error) {
	o.single = true
	o.MaxResults = n
	whole, err := m.search(ctx, o)
	if err != nil {
		return whole, err
	}
	type key struct {
		path       string
		start, end int
	}
	keyOf := func(r SearchResult) key { return key{r.Path, r.StartLine, r.EndLine} }
	score := map[key]float64{}
	for _, r := range whole.Results {
		score[keyOf(r)] = r.Score
	}
	var bests []SearchResult
	weakest := ""
	for _, p := range parts {
		po := o
		po.Query = p
		res, err := m.search(ctx, po)
		if err != nil {
			return whole, err
		}
		for _, r := range res.Results {
			if s, ok := score[keyOf(r)]; !ok || s < r.Score {
				score[keyOf(r)] = r.Score
			}
		}
		if len(res.Results) > 0 {
			bests = append(bests, res.Results[0])
		}
		if weakest == "" || confidenceRank(res.Confidence.Level) < confidenceRank(weakest) {
			weakest = res.Confidence.Level
		}
	}
	// The answer as a whole is as sure as the whole question, or as its
	// least sure part when every part is surer than that.
	if confidenceRank(weakest) > confidenceRank(whole.Confidence.Level) {
		whole.Confidence.Level = weakest
	}
	if len(bests) == 0 {
		return whole, nil
	}
	// Required: the parts' bests and the whole question's first result.
	var must []SearchResult
	if len(whole.Results) > 0 {
		must = append(must, whole.Results[0])
	}
	must = append(must, bests...)
	var out []SearchResult
	seen := map[key]bool{}
	add := func(r SearchResult) {
		k := keyOf(r)
		if seen[k] {
			return
		}
		seen[k] = true
		r.Score = score[k]
		out = append(out, r)
	}
	byScore := func(rs []SearchResult) {
		slices.SortStableFunc(rs, func(a, b SearchResult) int {
			sa, sb := score[keyOf(a)], score[keyOf(b)]
			switch {
			case sa > sb:
				return -1
			case sa < sb:
				return 1
			case a.Path != b.Path:
				return strings.Compare(a.Path, b.Path)
			default:
				return a.StartLine - b.StartLine
			}
		})
	}
	byScore(must)
	for _, r := range must {
		if len(out) < n {
			add(r)
		}
	}
	for _, r := range whole.Results {
		if len(out) < n {
			add(r)
		}
	}
	byScore(out)
	whole.Results = out
	return whole, nil
}
