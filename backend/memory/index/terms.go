package index

// Terms returns the distinct analysed terms of text, in order of first
// appearance: the keyword leg's terms (words stemmed, CJK characters and
// bigrams, Chinese folded to one script), as a chunk holding text is
// indexed and a query of text is searched. nil when the index has no
// analyzer (closed). Package memory compares a search's results by the
// query terms they hold (confidence.go).
func (s *Store) Terms(text string) []string {
	return s.analyze(text)
}

// TermWeight is one analysed query term with its weight w(t) in the
// keyword score and its document frequency in the search's scope (see
// the package comment).
type TermWeight struct {
	Term   string
	Weight float64
	DF     uint64
}
