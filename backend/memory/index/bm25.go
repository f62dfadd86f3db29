package index

import (
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	bsearch "github.com/blevesearch/bleve/v2/search"
	bindex "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
)

// The keyword leg's BM25, evaluated over Bleve's posting lists.
//
// Bleve stores the inverted index (terms, postings with term frequency,
// field-length norm and positions); this file scores it, so that the
// statistics can be those of a search scope (scope.go) and so that a
// top-k query need not score every posting of every query term.
//
// The score of chunk d for the distinct query terms Q is Bleve's BM25 form
// (the one the ranking constants were tuned on):
//
//	bm25(d) = coord(d) · Σ_{t ∈ Q, t ∈ d} idf(t)² · k1·tf / (tf + k1·(1 − b + b·|d|/avgdl))
//
// with k1 = 1.2, b = 0.75, idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5)),
// coord(d) = (query terms in d)/|Q|, tf the term's frequency in d, |d| the
// chunk's analysed length (Bleve's norm is 1/√|d|) and N, df(t), avgdl
// counted over the chunks in scope. (Bleve's own query also multiplies by
// the query norm 1/√Σidf², a constant per query that the keyword score
// divides out, and takes avgdl from its term dictionaries; here avgdl is
// the true mean length, files.tokens/files.chunks.)
//
// Top-k uses MaxScore (Turtle & Flood 1995): every term t has an upper
// bound ub(t) = k1·idf(t)² on its contribution (the saturation term is
// below k1); with the terms sorted by ub, a chunk holding only terms of the
// first i scores at most coord·Σub ≤ (Σ_{j<i} ub_j)·i/|Q|. Once that bound
// is at most the current k-th score θ, those terms are non-essential: the
// chunks are enumerated from the posting lists of the other (rare) terms
// only, and the frequent terms' lists are probed by skipping (Advance) to
// each such chunk, stopping as soon as the chunk's bound falls to θ. The
// result is the exact top k: a chunk not enumerated holds only
// non-essential terms and scores at most θ.

// kwHit is one chunk scored by the keyword leg: its internal document
// number, BM25 score, coverage (see analysedQuery.coverage) and whether it
// holds every term of the query's phrase sequence (a phrase candidate).
type kwHit struct {
	num    uint64
	score  float64
	cov    float64
	seqAll bool
	key    float64 // what a walk ranked it by (ranker.key)
}

// kwLeg is the keyword leg of one search: one Bleve snapshot, the scope and
// the query's terms with their statistics in it.
type kwLeg struct {
	r     bindex.IndexReader
	sc    *scope
	q     *analysedQuery
	idf2  []float64 // idf(t)², 0 for a term no chunk in scope holds
	inSeq []bool    // term i occurs in the phrase sequence
	nSeq  int       // distinct terms of the phrase sequence
	avgdl float64
	// segs are the snapshot's segments when it is scorch's: the cursors
	// then walk decoded posting arrays from pc (postings.go).
	segs []snapSegment
	pc   *postingsCache
	// lists memoises the decoded lists of this search's terms; dicts the
	// segments' term dictionaries of the text field (opened on first use).
	lists map[string]*arrayList
	dicts []segment.TermDictionary
}

// dict returns the text field's term dictionary of segment i.
func (k *kwLeg) dict(i int) (segment.TermDictionary, error) {
	if k.dicts == nil {
		k.dicts = make([]segment.TermDictionary, len(k.segs))
	}
	if k.dicts[i] == nil {
		d, err := k.segs[i].seg.Dictionary(textField)
		if err != nil {
			return nil, err
		}
		k.dicts[i] = d
	}
	return k.dicts[i], nil
}

// arrayList returns term's decoded lists in the snapshot (segs non-nil),
// or nil when they are not decoded (yet): the term is then walked with
// Bleve's iterator (postingsCache.get).
func (k *kwLeg) arrayList(term string) (*arrayList, error) {
	if l, ok := k.lists[term]; ok {
		return l, nil
	}
	l, err := k.pc.openArrayList(k.segs, k.dict, term)
	if err != nil {
		return nil, fmt.Errorf("search keywords: %w", err)
	}
	if k.lists == nil {
		k.lists = map[string]*arrayList{}
	}
	k.lists[term] = l
	return l, nil
}

// openKeywordLeg opens a snapshot of the keyword index and the scope of
// accept (nil: every chunk) in it. The caller closes it.
func (s *Store) openKeywordLeg(ctx context.Context, accept func(string) bool) (*kwLeg, error) {
	ix, err := s.bl.Advanced()
	if err != nil {
		return nil, fmt.Errorf("search keywords: %w", err)
	}
	r, err := ix.Reader()
	if err != nil {
		return nil, fmt.Errorf("search keywords: %w", err)
	}
	sc, err := s.newScope(ctx, r, accept)
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	k := &kwLeg{r: r, sc: sc, avgdl: sc.avgLen(), pc: s.postings}
	if segs, ok := snapshotSegments(r); ok {
		k.segs = segs
		s.postings.retain(segmentsOf(segs))
	}
	return k, nil
}

func (k *kwLeg) close() error { return k.r.Close() }

// docFreq returns the number of chunks in scope holding term.
func (k *kwLeg) docFreq(ctx context.Context, term string) (uint64, error) {
	if k.segs != nil {
		l, err := k.arrayList(term)
		if err != nil {
			return 0, err
		}
		if l == nil {
			return k.docFreqBleve(ctx, term)
		}
		if k.sc.all {
			return l.liveCount(), nil
		}
		var n uint64
		a := arrayCursor{l: l}
		for a.settle(); a.valid(); a.advance() {
			if num, _, _ := a.posting(); k.sc.has(num) {
				n++
			}
		}
		return n, nil
	}
	return k.docFreqBleve(ctx, term)
}

// docFreqBleve is docFreq over Bleve's iterator.
func (k *kwLeg) docFreqBleve(ctx context.Context, term string) (uint64, error) {
	tfr, err := k.r.TermFieldReader(ctx, []byte(term), textField, false, false, false)
	if err != nil {
		return 0, fmt.Errorf("search keywords: %w", err)
	}
	defer tfr.Close()
	if k.sc.all {
		return tfr.Count(), nil
	}
	var buf bindex.TermFieldDoc
	var n uint64
	for {
		d, err := tfr.Next(&buf)
		if err != nil {
			return 0, fmt.Errorf("search keywords: %w", err)
		}
		if d == nil {
			return n, nil
		}
		if k.sc.has(binary.BigEndian.Uint64(d.ID)) {
			n++
		}
	}
}

// prepare sets the query whose terms weighTerms has weighed (df in scope).
func (k *kwLeg) prepare(q *analysedQuery) {
	k.q = q
	k.idf2 = make([]float64, len(q.terms))
	for i := range q.terms {
		if q.df[i] > 0 {
			idf := bm25IDF(q.n, q.df[i])
			k.idf2[i] = idf * idf
		}
	}
	k.inSeq = make([]bool, len(q.terms))
	seq := map[string]bool{}
	for _, t := range q.seq {
		seq[t] = true
	}
	k.nSeq = len(seq)
	for i, t := range q.terms {
		k.inSeq[i] = seq[t]
	}
}

// saturation is BM25's term-frequency part for frequency tf in a chunk of
// norm (1/√length): k1·tf/(tf + k1·(1 − b + b·|d|/avgdl)).
func (k *kwLeg) saturation(tf, norm float64) float64 {
	lnorm := 1.0
	if k.avgdl > 0 && norm > 0 {
		lnorm = 1 - bsearch.BM25_b + bsearch.BM25_b*(1/(norm*norm))/k.avgdl
	}
	return bsearch.BM25_k1 * tf / (tf + bsearch.BM25_k1*lnorm)
}

// cursor walks the in-scope postings of one query term in document order:
// over the decoded arrays of postings.go (arr), or over Bleve's posting
// iterator (tfr) when positions are wanted or the snapshot is not scorch's.
type cursor struct {
	term int
	tfr  bindex.TermFieldReader
	arr  *arrayCursor
	// started: the first next has been made (array cursors start before
	// their first posting).
	started bool
	doc     uint64 // current document number, valid unless done
	done    bool
	tf      float64
	norm    float64
	vecs    []*bindex.TermFieldVector
	buf     bindex.TermFieldDoc
	id      [8]byte
	sc      *scope
}

func (k *kwLeg) cursorFor(ctx context.Context, term int, freq, positions bool) (*cursor, error) {
	if !positions && k.segs != nil {
		l, err := k.arrayList(k.q.terms[term])
		if err != nil {
			return nil, err
		}
		if l != nil {
			return &cursor{term: term, arr: &arrayCursor{l: l}, sc: k.sc}, nil
		}
	}
	tfr, err := k.r.TermFieldReader(ctx, []byte(k.q.terms[term]), textField, freq || positions, freq || positions, positions)
	if err != nil {
		return nil, fmt.Errorf("search keywords: %w", err)
	}
	return &cursor{term: term, tfr: tfr, sc: k.sc}, nil
}

// take records d as the current posting, or moves on when it is out of scope.
func (c *cursor) take(d *bindex.TermFieldDoc) error {
	for d != nil {
		num := binary.BigEndian.Uint64(d.ID)
		if c.sc.has(num) {
			c.doc, c.tf, c.norm, c.vecs = num, float64(d.Freq), d.Norm, d.Vectors
			return nil
		}
		var err error
		if d, err = c.tfr.Next(&c.buf); err != nil {
			return fmt.Errorf("search keywords: %w", err)
		}
	}
	c.done = true
	return nil
}

// takeArray records the array cursor's posting, or moves on while it is
// out of scope.
func (c *cursor) takeArray() {
	for c.arr.valid() {
		num, tf, norm := c.arr.posting()
		if c.sc.has(num) {
			c.doc, c.tf, c.norm = num, tf, norm
			return
		}
		c.arr.advance()
	}
	c.done = true
}

// next moves to the following in-scope posting.
func (c *cursor) next() error {
	if c.done {
		return nil
	}
	if c.arr != nil {
		if c.started {
			c.arr.advance()
		} else {
			c.started = true
			c.arr.settle()
		}
		c.takeArray()
		return nil
	}
	d, err := c.tfr.Next(&c.buf)
	if err != nil {
		return fmt.Errorf("search keywords: %w", err)
	}
	return c.take(d)
}

// seek moves to the first in-scope posting at or after document target.
func (c *cursor) seek(target uint64) error {
	if c.done || c.doc >= target {
		return nil
	}
	if c.arr != nil {
		c.started = true
		c.arr.seek(target)
		c.takeArray()
		return nil
	}
	binary.BigEndian.PutUint64(c.id[:], target)
	d, err := c.tfr.Advance(c.id[:], &c.buf)
	if err != nil {
		return fmt.Errorf("search keywords: %w", err)
	}
	return c.take(d)
}

func closeCursors(cs []*cursor) {
	for _, c := range cs {
		c.close()
	}
}

func (c *cursor) close() {
	if c.tfr != nil {
		_ = c.tfr.Close()
	}
}

// openCursors opens a cursor on each term that some chunk in scope holds,
// positioned on its first posting. Membership cursors (freq false) read
// no frequencies or norms: Bleve's posting iterator then skips with the
// posting bitmap alone, where a cursor that decodes frequencies walks every
// posting it passes.
func (k *kwLeg) openCursors(ctx context.Context, terms []int, freq bool) ([]*cursor, error) {
	var cs []*cursor
	for _, t := range terms {
		if k.idf2[t] == 0 {
			continue
		}
		c, err := k.cursorFor(ctx, t, freq, false)
		if err != nil {
			closeCursors(cs)
			return nil, err
		}
		cs = append(cs, c)
		if err := c.next(); err != nil {
			closeCursors(cs)
			return nil, err
		}
	}
	return cs, nil
}

// scored accumulates one chunk's score. sum is the running sum (for the
// MaxScore bound); the final score is summed again in query-term order
// from part, so that it does not depend on the order the posting lists
// were visited in (top-k and scoring chosen chunks give equal floats).
type scored struct {
	sum     float64
	matched int
	terms   []int
	part    []float64 // by term index
}

func (k *kwLeg) add(a *scored, c *cursor) {
	x := k.idf2[c.term] * k.saturation(c.tf, c.norm)
	a.sum += x
	a.matched++
	a.terms = append(a.terms, c.term)
	a.part[c.term] = x
}

// reset readies a for the next chunk.
func (k *kwLeg) reset(a *scored) {
	if a.part == nil {
		a.part = make([]float64, len(k.q.terms))
	}
	a.sum, a.matched, a.terms = 0, 0, a.terms[:0]
}

func (k *kwLeg) hit(num uint64, a *scored) kwHit {
	slices.Sort(a.terms)
	var sum float64
	seq := 0
	for _, t := range a.terms {
		sum += a.part[t]
		if k.inSeq[t] {
			seq++
		}
	}
	return kwHit{num: num, score: sum * float64(a.matched) / float64(len(k.q.terms)), cov: k.q.coverOf(a.terms), seqAll: k.nSeq >= 2 && seq == k.nSeq}
}

// allTerms returns the indices of every query term.
func (k *kwLeg) allTerms() []int {
	ts := make([]int, len(k.q.terms))
	for i := range ts {
		ts[i] = i
	}
	return ts
}

// top returns the n best chunks in scope by BM25 (score descending, then
// document number), whether more chunks may match (the list is full), and
// nothing else: a chunk not returned scores at most the last one's score.
func (k *kwLeg) top(ctx context.Context, n int) (hits []kwHit, full bool, err error) {
	return k.walk(ctx, n, bm25Rank{k}, math.Inf(-1))
}

// topKeyword returns the chunks in scope with the n best keyword scores
// k = KeywordScore(cov, bm25/maxBM25) above floor (k descending, then
// document number; kwHit.key holds k), maxBM25 being the best BM25 score
// in scope (top(1)), and whether the list is full. A chunk not returned
// has k ≤ floor, or k ≤ the last one's when the list is full. This is the
// keyword pool of a search (search.go): ranking by k rather than BM25
// bounds the keyword score of the chunks outside it directly, coverage
// included, so no coverage set is needed to prove the ranking.
func (k *kwLeg) topKeyword(ctx context.Context, n int, maxBM25, floor float64) (hits []kwHit, full bool, err error) {
	if maxBM25 <= 0 {
		return nil, false, nil
	}
	return k.walk(ctx, n, keywordRank{k, maxBM25}, floor)
}

// ranker is what a MaxScore walk ranks chunks by.
type ranker interface {
	// key is the ranked value of a scored chunk.
	key(h kwHit) float64
	// bound bounds the key of a chunk holding only terms whose coverage
	// weights add up to w and BM25 bounds to b, count of them.
	bound(w, b float64, count int) float64
	// less orders the terms for the walk: the ones set aside first as
	// non-essential (small contributions to the key) come first.
	less(t, u int) bool
}

// bm25Rank ranks by BM25: a chunk's score is coord·Σ, at most
// (Σ ub)·count/|Q|.
type bm25Rank struct{ k *kwLeg }

func (r bm25Rank) key(h kwHit) float64 { return h.score }
func (r bm25Rank) bound(_, b float64, count int) float64 {
	return b * float64(count) / float64(len(r.k.q.terms))
}
func (r bm25Rank) less(t, u int) bool { return r.k.idf2[t] < r.k.idf2[u] }

// keywordRank ranks by the keyword score k = cov·(0.7 + 0.3·bm25/max)
// (KeywordScore). Coverage is at most the chunk's terms' share of the
// query's weight, or 1 for a query of keyword parts (coverOf takes the
// best part, which the sum does not bound).
type keywordRank struct {
	k       *kwLeg
	maxBM25 float64
}

func (r keywordRank) key(h kwHit) float64 { return KeywordScore(h.cov, h.score/r.maxBM25) }
func (r keywordRank) bound(w, b float64, count int) float64 {
	cov := 1.0
	if len(r.k.q.parts) == 0 && r.k.q.norm > 0 {
		cov = w / r.k.q.norm
	}
	return KeywordScore(cov, b*float64(count)/float64(len(r.k.q.terms))/r.maxBM25)
}
func (r keywordRank) less(t, u int) bool {
	if wt, wu := r.k.q.weight[t], r.k.q.weight[u]; wt != wu {
		return wt < wu
	}
	return r.k.idf2[t] < r.k.idf2[u]
}

// walk is MaxScore (Turtle & Flood 1995, see the file comment) for rk: the
// n chunks with the best keys above floor, best first (then by document
// number), and whether the list is full. Every term t bounds its
// contribution by its coverage weight w(t) and its BM25 bound
// ub(t) = k1·idf(t)²; with the terms in rk's order, a chunk holding only
// terms of the first i has a key of at most rk.bound(Σw, Σub, i). Once
// that is at most the threshold θ (the n-th key so far, or floor), those
// terms are non-essential: chunks are enumerated from the other terms'
// lists only, and the non-essential lists are probed by skipping to each
// of them, stopping as soon as its bound falls to θ.
func (k *kwLeg) walk(ctx context.Context, n int, rk ranker, floor float64) (hits []kwHit, full bool, err error) {
	cs, err := k.openCursors(ctx, k.allTerms(), true)
	if err != nil {
		return nil, false, err
	}
	defer closeCursors(cs)
	m := len(cs)
	if m == 0 || n <= 0 {
		return nil, false, nil
	}
	sort.SliceStable(cs, func(i, j int) bool { return rk.less(cs[i].term, cs[j].term) })
	// preW[i] and preB[i]: the coverage weights and BM25 bounds of the
	// first i terms.
	preW, preB := make([]float64, m+1), make([]float64, m+1)
	for i, c := range cs {
		preW[i+1] = preW[i] + k.q.weight[c.term]
		preB[i+1] = preB[i] + bsearch.BM25_k1*k.idf2[c.term]
	}
	h := &kwHeap{}
	theta := func() float64 {
		if h.Len() < n {
			return floor
		}
		return max(floor, (*h)[0].key)
	}
	// offer keeps hit if its key is above floor and among the n best so
	// far by (key descending, document number), whatever order hits come
	// in.
	offer := func(hit kwHit) {
		hit.key = rk.key(hit)
		if hit.key <= floor {
			return
		}
		if h.Len() < n {
			heap.Push(h, hit)
		} else if m := (*h)[0]; hit.key > m.key || (hit.key == m.key && hit.num < m.num) {
			(*h)[0] = hit
			heap.Fix(h, 0)
		}
	}
	seeded, err := k.seed(ctx, cs, n)
	if err != nil {
		return nil, false, err
	}
	for _, hit := range seeded {
		offer(hit)
	}
	si := 0 // seeded is sorted by document number: the walk skips them
	e := 0  // cs[:e] are non-essential
	var a scored
	// slack absorbs the rounding of the running sums in the bounds, so a
	// chunk is pruned only when it surely ranks at most θ.
	const slack = 1 + 1e-12
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		th := theta()
		for e < m && slack*rk.bound(preW[e+1], preB[e+1], e+1) <= th {
			e++
		}
		if e == m {
			break
		}
		cur, any := uint64(math.MaxUint64), false
		for _, c := range cs[e:] {
			if !c.done && c.doc < cur {
				cur, any = c.doc, true
			}
		}
		if !any {
			break
		}
		k.reset(&a)
		w := 0.0 // coverage weight of the terms matched so far
		for _, c := range cs[e:] {
			if !c.done && c.doc == cur {
				k.add(&a, c)
				w += k.q.weight[c.term]
				if err := c.next(); err != nil {
					return nil, false, err
				}
			}
		}
		for si < len(seeded) && seeded[si].num < cur {
			si++
		}
		if si < len(seeded) && seeded[si].num == cur {
			continue // scored already
		}
		pruned := false
		for i := e - 1; i >= 0; i-- {
			if slack*rk.bound(w+preW[i+1], a.sum+preB[i+1], a.matched+i+1) <= theta() {
				pruned = true
				break
			}
			c := cs[i]
			if err := c.seek(cur); err != nil {
				return nil, false, err
			}
			if !c.done && c.doc == cur {
				k.add(&a, c)
				w += k.q.weight[c.term]
			}
		}
		if pruned {
			continue
		}
		offer(k.hit(cur, &a))
	}
	hits = make([]kwHit, h.Len())
	copy(hits, *h)
	sortByKey(hits)
	return hits, len(hits) >= n, nil
}

// seedMax is the most chunks top scores before its walk (seed).
const seedMax = 512

// seed scores, before the MaxScore walk of top, the chunks holding the
// query's rarest terms (the highest bounds), at most seedMax of them,
// sorted by document number. They are likely among the best, so the walk
// starts with a threshold near its final one and sets the frequent terms
// aside as non-essential at once, instead of enumerating their postings
// until n good chunks have been met. (On the scale benchmark's million
// chunks, a walk started at its final threshold took 63 % of the time.)
// Seeding never changes the result: the seeded chunks are real
// candidates, and top's heap orders by score and document number whatever
// the order of arrival. Nothing is seeded when some list is not decoded.
func (k *kwLeg) seed(ctx context.Context, cs []*cursor, n int) ([]kwHit, error) {
	if k.segs == nil || n <= 0 {
		return nil, nil
	}
	rare := slices.Clone(cs)
	slices.SortStableFunc(rare, func(a, b *cursor) int { return cmpDesc(k.idf2[a.term], k.idf2[b.term]) })
	var nums []uint64
	for _, c := range rare {
		l, err := k.arrayList(k.q.terms[c.term])
		if err != nil || l == nil {
			return nil, err
		}
		if len(nums) > 0 && len(nums)+l.len() > seedMax {
			break
		}
		a := arrayCursor{l: l}
		for a.settle(); a.valid() && len(nums) < seedMax; a.advance() {
			if num, _, _ := a.posting(); k.sc.has(num) {
				nums = append(nums, num)
			}
		}
		if len(nums) >= seedMax {
			break
		}
	}
	if len(nums) == 0 {
		return nil, nil
	}
	slices.Sort(nums)
	nums = slices.Compact(nums)
	hits, ok, err := k.visitArrays(nums, true)
	if err != nil || !ok {
		return nil, err
	}
	return hits, nil // in nums' order
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// score returns the BM25 scores of the chunks nums (in scope; those that
// hold no query term are left out).
func (k *kwLeg) score(ctx context.Context, nums []uint64) ([]kwHit, error) {
	return k.visit(ctx, nums, true)
}

// presence returns, for each of the chunks nums (in scope) that holds a
// query term, its coverage and whether it holds every phrase term (a kwHit
// with score −1: not computed), from the posting bitmaps alone: much
// cheaper than score, and enough to bound a chunk's keyword score.
func (k *kwLeg) presence(ctx context.Context, nums []uint64) (map[uint64]kwHit, error) {
	hits, err := k.visit(ctx, nums, false)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]kwHit, len(hits))
	for _, h := range hits {
		out[h.num] = h
	}
	return out, nil
}

// visit walks the chunks nums in document order with one cursor per query
// term and returns a hit for each chunk holding a term: scored (freq) or
// with coverage only (score −1).
func (k *kwLeg) visit(ctx context.Context, nums []uint64, freq bool) ([]kwHit, error) {
	if len(nums) == 0 {
		return nil, nil
	}
	nums = slices.Clone(nums)
	slices.Sort(nums)
	nums = slices.Compact(nums)
	if k.segs != nil {
		hits, ok, err := k.visitArrays(nums, freq)
		if err != nil || ok {
			return hits, err
		}
	}
	cs, err := k.openCursors(ctx, k.allTerms(), freq)
	if err != nil {
		return nil, err
	}
	defer closeCursors(cs)
	var out []kwHit
	var a scored
	for _, num := range nums {
		k.reset(&a)
		for _, c := range cs {
			if err := c.seek(num); err != nil {
				return nil, err
			}
			if c.done || c.doc != num {
				continue
			}
			if freq {
				k.add(&a, c)
			} else {
				a.matched++
				a.terms = append(a.terms, c.term)
				a.part[c.term] = 0 // no frequency read: hit's sum is not a score
			}
		}
		if a.matched > 0 {
			h := k.hit(num, &a)
			if !freq {
				h.score = -1
			}
			out = append(out, h)
		}
	}
	return out, nil
}

// visitArrays is visit over the decoded posting arrays, for nums sorted
// and distinct: term by term (in query-term order, so that a chunk's
// score sums its parts in the order hit does and the floats agree), each
// segment's postings are intersected with the chunks of nums in that
// segment by galloping, one probe per chunk and term. nums are live chunks
// in scope (document numbers from the snapshot), so no deletion or scope
// check is needed. ok is false, with nothing done, when some term's lists
// are not decoded (visit then walks cursors).
func (k *kwLeg) visitArrays(nums []uint64, freq bool) (hits []kwHit, ok bool, err error) {
	lists := make([]*arrayList, len(k.q.terms))
	for t, term := range k.q.terms {
		if k.idf2[t] == 0 {
			continue
		}
		l, err := k.arrayList(term)
		if err != nil {
			return nil, false, err
		}
		if l == nil {
			return nil, false, nil
		}
		lists[t] = l
	}
	words := (len(k.q.terms) + 63) / 64
	has := make([]uint64, len(nums)*words) // chunk j holds term t: bit t of has[j·words:]
	matched := make([]int, len(nums))
	var sums []float64
	if freq {
		sums = make([]float64, len(nums))
	}
	for t, l := range lists {
		if l == nil {
			continue
		}
		j := 0
		for si, p := range l.lists {
			off := l.segs[si].offset
			end := uint64(math.MaxUint64)
			if si+1 < len(l.segs) {
				end = l.segs[si+1].offset
			}
			for j < len(nums) && nums[j] < off {
				j++
			}
			pi := 0
			for ; j < len(nums) && nums[j] < end; j++ {
				if pi = gallop(p.docs, pi, uint32(nums[j]-off)); pi == len(p.docs) {
					for j < len(nums) && nums[j] < end {
						j++
					}
					break
				}
				if uint64(p.docs[pi]) != nums[j]-off {
					continue
				}
				has[j*words+t/64] |= 1 << (t % 64)
				matched[j]++
				if freq {
					sums[j] += k.idf2[t] * k.saturation(float64(p.tf[pi]), float64(p.norm[pi]))
				}
			}
		}
	}
	var terms []int
	nq := float64(len(k.q.terms))
	for j, num := range nums {
		if matched[j] == 0 {
			continue
		}
		terms, seq := terms[:0], 0
		for t := range k.q.terms {
			if has[j*words+t/64]&(1<<(t%64)) != 0 {
				terms = append(terms, t)
				if k.inSeq[t] {
					seq++
				}
			}
		}
		h := kwHit{num: num, score: -1, cov: k.q.coverOf(terms), seqAll: k.nSeq >= 2 && seq == k.nSeq}
		if freq {
			h.score = sums[j] * float64(matched[j]) / nq
		}
		hits = append(hits, h)
	}
	return hits, true, nil
}

// union returns the chunks in scope holding at least one of terms, or
// ok = false when there are more than limit of them.
func (k *kwLeg) union(ctx context.Context, terms []int, limit int) (nums []uint64, ok bool, err error) {
	cs, err := k.openCursors(ctx, terms, false)
	if err != nil {
		return nil, false, err
	}
	defer closeCursors(cs)
	for {
		cur, any := uint64(math.MaxUint64), false
		for _, c := range cs {
			if !c.done && c.doc < cur {
				cur, any = c.doc, true
			}
		}
		if !any {
			return nums, true, nil
		}
		if len(nums) == limit {
			return nil, false, nil
		}
		nums = append(nums, cur)
		for _, c := range cs {
			if !c.done && c.doc == cur {
				if err := c.next(); err != nil {
					return nil, false, err
				}
			}
		}
	}
}

// locations returns, for each of the chunks nums, the positions of the
// query's phrase-sequence terms in it (as Bleve's term vectors record them).
func (k *kwLeg) locations(ctx context.Context, nums []uint64) (map[uint64]bsearch.TermLocationMap, error) {
	out := make(map[uint64]bsearch.TermLocationMap, len(nums))
	if len(nums) == 0 {
		return out, nil
	}
	nums = slices.Clone(nums)
	slices.Sort(nums)
	for t := range k.q.terms {
		if !k.inSeq[t] || k.idf2[t] == 0 {
			continue
		}
		c, err := k.cursorFor(ctx, t, true, true)
		if err != nil {
			return nil, err
		}
		if err := c.next(); err != nil {
			_ = c.tfr.Close()
			return nil, err
		}
		for _, num := range nums {
			if err := c.seek(num); err != nil {
				_ = c.tfr.Close()
				return nil, err
			}
			if c.done {
				break
			}
			if c.doc != num {
				continue
			}
			lm := out[num]
			if lm == nil {
				lm = bsearch.TermLocationMap{}
				out[num] = lm
			}
			for _, v := range c.vecs {
				lm[k.q.terms[t]] = append(lm[k.q.terms[t]], &bsearch.Location{Pos: v.Pos})
			}
		}
		if err := c.tfr.Close(); err != nil {
			return nil, fmt.Errorf("search keywords: %w", err)
		}
	}
	return out, nil
}

// chunkID returns the chunk id of internal document number num.
func (k *kwLeg) chunkID(num uint64) (int64, bool) {
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], num)
	ext, err := k.r.ExternalID(id[:])
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(ext, 10, 64)
	return v, err == nil
}

// docNums returns the internal document numbers of those chunks of ids
// that the snapshot holds in scope. With scorch's segments it opens each
// segment's id dictionary once for all ids (Bleve's InternalID opens a
// reader over every segment per id).
func (k *kwLeg) docNums(ids []int64) (map[int64]uint64, error) {
	out := make(map[int64]uint64, len(ids))
	if k.segs == nil {
		for _, id := range ids {
			in, err := k.r.InternalID(docID(id))
			if err != nil {
				return nil, fmt.Errorf("search keywords: %w", err)
			}
			if len(in) == 8 {
				if num := binary.BigEndian.Uint64(in); k.sc.has(num) {
					out[id] = num
				}
			}
		}
		return out, nil
	}
	left := slices.Clone(ids)
	var pl segment.PostingsList
	var it segment.PostingsIterator
	for _, sg := range k.segs {
		if len(left) == 0 {
			break
		}
		d, err := sg.seg.Dictionary(idField)
		if err != nil {
			return nil, fmt.Errorf("search keywords: %w", err)
		}
		rest := left[:0]
		for _, id := range left {
			if pl, err = d.PostingsList([]byte(docID(id)), sg.deleted, pl); err != nil {
				return nil, fmt.Errorf("search keywords: %w", err)
			}
			if pl == nil || pl.Count() == 0 {
				rest = append(rest, id)
				continue
			}
			it = pl.Iterator(false, false, false, it)
			p, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("search keywords: %w", err)
			}
			if p == nil {
				rest = append(rest, id)
				continue
			}
			if num := sg.offset + p.Number(); k.sc.has(num) {
				out[id] = num
			}
		}
		left = rest
	}
	return out, nil
}

// sortByKey sorts hits by key descending, then document number.
func sortByKey(hs []kwHit) {
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].key != hs[j].key {
			return hs[i].key > hs[j].key
		}
		return hs[i].num < hs[j].num
	})
}

// kwHeap is a min-heap of hits by key (the worst on top; among equal keys
// the larger document number).
type kwHeap []kwHit

func (h kwHeap) Len() int { return len(h) }
func (h kwHeap) Less(i, j int) bool {
	if h[i].key != h[j].key {
		return h[i].key < h[j].key
	}
	return h[i].num > h[j].num
}
func (h kwHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *kwHeap) Push(x any)   { *h = append(*h, x.(kwHit)) }
func (h *kwHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
