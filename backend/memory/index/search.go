package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/english"
)

// Hybrid ranking (SPEC §4.3). This file is the reference implementation of
// the memory_search score; the rule is:
//
// For every chunk d the Store defines two exact, pool-independent leg
// scores in [0,1]:
//
//   - v(d), the vector score: cosine similarity between the query embedding
//     and the chunk embedding, clamped to [0,1];
//   - k(d), the keyword score, defined below.
//
// and fuses them into
//
//	score(d) = max(wv·v + (1 − wv)·k, KeywordFloorWeight·k)
//
// The first term is the SPEC's hybrid score 0.7·v + 0.3·k for the default
// wv = VectorWeight; a query may set another weight (Query.VectorWeight:
// package memory weighs a lexical embedder's vector leg at 0.3, see its
// Search). The second is the
// keyword floor: a keyword match on its own is worth up to 0.5, so a chunk
// with k ≥ 0.7 clears the default minScore 0.35 even when the vector leg
// finds nothing (an exact identifier such as "QK-7731" that the embedding
// ignores). When both legs agree, the hybrid term dominates.
//
// # Keyword score
//
// Let Q be the distinct analysed terms of the query (OR-ed in the BM25
// query), N the number of chunks and df(t) the number of chunks containing t
// — chunks of the search's scope (Query.Scope, scope.go), so that every
// quantity below is what an index of the scope's files alone would give.
//
//	idf(t)  = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))   (BM25's idf)
//	idf₁    = idf at df = 1, the information of a term unique to one chunk
//	idfᵣ    = idf at df = max(1, ⌈N / InformativeDF⌉)
//	w(t)    = p(t) · min(idf(t), idf₁)                      weight of t
//	W       = Σ_{t∈Q} w(t), or max(Σ w(t), idfᵣ) when every t is a stopword
//	cov(d)  = Σ_{t∈Q, t∈d} w(t) / W                         coverage
//	rel(d)  = bm25(d) / max_{d'} bm25(d')                   relative BM25
//	k(d)    = cov(d) · (KeywordRelBase + (1 − KeywordRelBase) · rel(d))
//
// p(t) is StopwordPrior for a short list of function words ("the", "how",
// "的", "了" ...), 1 otherwise; terms missing from the index weigh idf₁
// (they are as informative as the rarest term, and no chunk has them).
//
// cov(d) is the absolute part: the IDF-weighted share of the query that the
// chunk actually contains. A chunk containing every informative term of the
// query has cov = 1; one matching only "to" and "how" of "how to bake
// sourdough bread", or only 谱 of "火锅 食谱", has a small cov, however its
// BM25 score compares with the other chunks'. A query of function words
// only ("the", "how to") has no content to cover: its W is at least idfᵣ,
// the information of a term found in one chunk in InformativeDF (20), so it
// scores low. A content word counts in full however common it is: a search
// for a name that occurs in most notes ("Caroline") is fully covered by the
// chunks that contain it and returns them.
//
// Partial coverage earns linear credit: a chunk holding half of the query's
// information gets half the keyword score. (Until analyzer v4 the credit
// was √cov, which ranked slightly better when the keyword leg weighed 0.3;
// with the lexical weighting of package memory, where the keyword leg
// weighs 0.7, linear credit ranks as well or better on LoCoMo, LongMemEval,
// CMRC and DRCD and keeps a chunk sharing one word of a three-word
// question ("what is the weather like on mars" → "Likes short answers")
// below minScore 0.35, see docs/BENCHMARKS.md.)
//
// rel(d) is the relative part: among chunks with the same coverage, BM25's
// term frequency and length normalisation order them. It moves k only within
// [KeywordRelBase·cov, cov], so a chunk containing a rare identifier
// (cov = 1) always has k ≥ 0.7 and clears minScore 0.35 on the keyword floor
// alone, wherever its BM25 score ranks.
//
// Phrase bonus: when the query has at least two tokens and the chunk contains
// them contiguously in the query's order (the analysed token stream without
// CJK bigrams: words, numbers, symbols and single CJK characters, so
// punctuation and spaces between them do not matter), the chunk is an exact
// phrase match and its fused score gains PhraseBonus·cov(d) (capped at 1):
// "连续63天零回滚率" found verbatim in a long MEMORY.md chunk beats short
// chunks that share most of its characters ("连续67天零回滚率") and score
// better on BM25 and on the vector leg.
//
// Every quantity is computed exactly for each chunk: df and N from the
// index, coverage and phrase from the positions of the query terms in the
// chunk (the index's term vectors, i.e. the same analyzer that BM25 used).
// A chunk's score therefore does not depend on the candidate pool.
//
// # Result set
//
// The results are the best-scoring chunks of the whole index, one per
// distinct text: chunks with identical text (same hash) are collapsed to
// the copy with the smallest path, then start line; distinct texts with
// equal scores are ordered by that same key. Results scoring below
// MinScore are dropped, and the first MaxResults are returned. Only chunks
// that one of the legs finds (a stored vector, or at least one query term)
// are results. This ranking is a function of the index and the query
// alone, so the first k results for MaxResults = k are the first k for any
// larger MaxResults, and the top result never depends on MaxResults.
// Scores are rounded to a multiple of 10⁻⁹: copies of one text stored in
// different index segments get BM25 scores that differ in the last bits,
// and rounding makes them tie; should they still differ (a value next to a
// rounding boundary), each copy gets the best score among them. (Bleve's
// BM25 also drifts slightly while background segment merges run, since its
// average field length counts a term once per segment; that is a change of
// the index, not of the candidates, and is gone once merges settle.)
//
// Scoring every chunk would be too slow, so the Store scores a candidate set
// and proves that no other chunk belongs in the results (a threshold
// algorithm). Candidates come from three sources:
//
//   - the vector pool: the chunks nearest to the query embedding
//     (sqlite-vec), so a chunk outside it has v ≤ v̄, the pool's lowest v.
//     Above Options.QuantizeAbove stored vectors (10,000) the pool is a
//     prefix of the quantized order instead (quant.go): v is then the int8
//     estimate of the cosine, and v ≤ v̄ holds for the chunks of the
//     shortlist but is an estimate for the others — the one place where
//     the ranking is approximate, measured as the vector leg's recall;
//   - the keyword pool: the chunks with the best keyword scores k (not the
//     best BM25: k also weighs coverage), so a chunk outside it has
//     k ≤ k̄, the pool's lowest k — or the floor the pool was fetched down
//     to, when it holds every chunk above it. k is computed over Bleve's
//     posting lists by bm25.go, whose MaxScore top-k skips the postings of
//     frequent terms (the words in most chunks) instead of scoring them
//     all; rel's denominator, the best BM25 score in scope, is a top-1
//     BM25 walk of its own;
//   - the coverage set, fetched on demand for a floor c: every chunk whose
//     coverage is at least c. Such a chunk contains at least one essential
//     term (the query terms left after setting aside the most frequent
//     terms whose weights add up to less than c·W), so the set is the
//     union of the essential terms' posting lists, scored. It
//     is what finds a verbatim phrase or a chunk with every query term
//     that BM25 ranks low (a long chunk) and the embedding misses.
//
// The two pools start at PoolSize(MaxResults) = max(MinPool, 4·MaxResults)
// chunks each (SPEC §4.3); they count chunks, so duplicated files fill them
// with copies, which the bound below takes care of. A candidate found by one
// side gets its other leg's score computed exactly: BM25 by the keyword
// query filtered to its id, v by the same sqlite-vec distance restricted to
// its rowid. (v is read only when the candidate could reach the results with
// v = v̄; until then it stays out of the ranking, which is safe since it
// scores below τ like a chunk outside the candidates.) A chunk that is not
// a candidate scores at most
//
//	U(c) = max(wv·v̄ + (1 − wv)·k', 0.5·k') + PhraseBonus·min(c, k'/0.7),   k' = min(c, k̄)
//
// where c bounds its coverage (1 before the coverage set is fetched; k ≤ c
// since rel ≤ 1, and cov ≤ k/0.7 bounds the phrase bonus; a pool that came
// back shorter than asked holds every chunk that leg can find, so then
// v̄ = 0, or k' = 0). Let τ be the score of the MaxResults-th
// distinct text among the candidates (MinScore, or −∞ without a floor, when
// fewer candidates clear it). The ranking is exact when U < τ − 10⁻⁸ (the
// margin makes every copy of a result, which scores τ up to rounding, a
// candidate, so the smallest path is known). Otherwise the search widens
// and tries again:
//
//  1. if U(0) ≥ τ (the vector bound alone reaches τ), it doubles the vector
//     pool (or, when it cannot grow, the keyword pool);
//  2. else, if the keyword pool can grow, it fetches it again in one walk
//     down to the largest floor k̄ with U < τ, at most MaxPool chunks
//     (searchRun.keywordFloor): once it holds every chunk above that floor,
//     the ranking is proven unless the vector bound prevents it. (Until
//     the pool was ranked by k, it was ranked by BM25, which bounds
//     nothing about coverage: at a million chunks most searches then
//     doubled their pools ten times over and ended unproven.)
//  3. else it fetches the coverage set for the largest c with U(c) ≤ τ,
//     unless more than MaxCoverageSet chunks hold an essential term;
//  4. else it doubles the vector pool, or the keyword pool once the vector
//     pool cannot grow.
//
// Pools never exceed MaxPool. When nothing is left to widen (thousands of
// chunks scoring near τ, e.g. with no floor and a query made of very common
// characters) the search returns the ranking of the candidates it has,
// which may then depend on MaxResults; it logs that at debug level. On the
// five OpenClaw workspaces copied five times (13,920 chunks) no query of
// the benchmark list needs that fallback, for any MaxResults up to 100 with
// the default floor or without one.
const (
	VectorWeight       = 0.7
	KeywordWeight      = 0.3
	KeywordFloorWeight = 0.5
	// KeywordRelBase is the share of the keyword score that coverage alone
	// grants; the rest scales with the relative BM25 score.
	KeywordRelBase = 0.7
	// StopwordPrior multiplies the weight of a function word in coverage.
	StopwordPrior = 0.2
	// InformativeDF: a query made only of stopwords needs the information of
	// a term found in at most one chunk in InformativeDF for full coverage.
	InformativeDF = 20
	// PhraseBonus·cov is added to the fused score of an exact phrase match.
	PhraseBonus = 0.1
	// MinPool is the smallest candidate pool per leg; a leg fetches
	// max(MinPool, 4·maxResults) candidates at first, at most MaxPool after
	// widening.
	MinPool = 50
	MaxPool = 4096
	// MaxCoverageSet is the largest coverage set (chunks holding an
	// essential term) a search fetches.
	MaxCoverageSet = 4096
	// scoreGrid: final scores are rounded to a multiple of it, so that the
	// last-bit differences in BM25 between copies of one text stored in
	// different index segments do not separate their scores.
	scoreGrid = 1e-9
	// scoreNoise bounds what is left of those differences after rounding
	// (a value next to a rounding boundary can still round either way).
	scoreNoise = 1e-8
)

// PoolSize returns the initial per-leg candidate pool for maxResults (SPEC §4.3).
func PoolSize(maxResults int) int {
	return min(MaxPool, max(MinPool, 4*maxResults))
}

// FuseScores returns the final score of a chunk from its vector score v and
// keyword score k with the SPEC's weights, without the phrase bonus (see the
// package constants).
func FuseScores(v, k float64) float64 {
	return Fuse(VectorWeight, v, k)
}

// Fuse returns max(wv·v + (1−wv)·k, KeywordFloorWeight·k): the fused score
// for vector weight wv (Query.VectorWeight), without the phrase bonus.
func Fuse(wv, v, k float64) float64 {
	return max(wv*v+(1-wv)*k, KeywordFloorWeight*k)
}

// KeywordScore returns k = cov·(KeywordRelBase + (1−KeywordRelBase)·rel)
// for coverage cov and relative BM25 score rel (both clamped to [0,1]).
func KeywordScore(cov, rel float64) float64 {
	return clamp01(cov) * (KeywordRelBase + (1-KeywordRelBase)*clamp01(rel))
}

// Query is one hybrid search.
type Query struct {
	// Text is the query text for the keyword leg (analysed, terms OR-ed).
	Text string
	// Vector is the L2-normalised query embedding; nil (or an incompatible
	// Store) means keyword only.
	Vector []float32
	// MaxResults caps the number of hits (> 0).
	MaxResults int
	// MinScore drops hits whose final score is lower; negative = no floor.
	// It must not be NaN or above 1.
	MinScore float64
	// AutoFloor replaces MinScore by the query's default floors (floor.go,
	// DefaultFloor), calibrated on the retrieval sets to keep the answers of
	// questions of any length and drop the matches of questions whose
	// answer is absent: no hit unless the best reaches the answer floor,
	// then every hit down to the list floor.
	AutoFloor bool
	// info, when set, receives what the search made of the query
	// (SearchWithInfo).
	info *QueryInfo
	// VectorWeight is wv in the fused score wv·v + (1−wv)·k; 0 means the
	// SPEC's VectorWeight (0.7). It must be in [0,1]. A lexical embedder
	// (package embed's builtin) repeats the keyword leg's evidence with
	// collision noise, so package memory passes a lower weight for it.
	VectorWeight float64
	// Scope, when set, says which files (workspace-relative paths) the
	// search may see: the caller's read permission (SPEC §4.3, §5.1). The
	// search then ranks only their chunks, with statistics computed over
	// them alone (scope.go); nil means every file.
	Scope func(path string) bool
}

// Hit is one ranked chunk.
type Hit struct {
	ChunkID   int64
	Path      string
	StartLine int
	EndLine   int
	Text      string
	Hash      string
	Layer     string
	Role      string
	// Score is the final score in [0,1]; Vector and Keyword are the leg
	// scores v and k it was computed from, Coverage is cov and Phrase says
	// whether the chunk contains the query as a phrase.
	Score    float64
	Vector   float64
	Keyword  float64
	Coverage float64
	Phrase   bool
	// AlsoIn lists the other files (sorted, without Path) that hold a
	// chunk with this exact text: duplicates are collapsed into one hit,
	// but no path is lost. Copies has the same files with line ranges.
	AlsoIn []string
	Copies []Copy
}

// cand is one candidate chunk of a search.
type cand struct {
	id   int64
	v, k float64 // cosine; raw BM25 score
	// vDone and kDone say that v and k are known (a chunk without a stored
	// vector or without a query term has the leg score 0); hasK that the
	// chunk contains a query term.
	hasK         bool
	vDone, kDone bool
	// num is the chunk's document number in the search's keyword snapshot
	// (set with k); seqAll says it holds every phrase-sequence term, so
	// that phrase waits for its positions until phraseDone.
	num                uint64
	seqAll, phraseDone bool
	// covKnown: cov and seqAll are known from the posting bitmaps (presence)
	// while k waits: its exact BM25 is computed only once the candidate's
	// upper bound reaches the threshold (completeKeywords).
	covKnown bool
	// From SQLite: loaded is set once path, line and hash are read; gone
	// marks a chunk missing from SQLite (never a result).
	loaded, gone bool
	path         string
	line         int
	hash         string
	// cov and phrase: the chunk's coverage and phrase match, from the
	// positions of the query terms in it (set with k); score: its final
	// score (see Hit).
	cov, score float64
	phrase     bool
}

// legPool is the state of one leg's candidate pool.
type legPool struct {
	asked int // rows requested by the last fetch; 0 before the first
	want  int // rows to request by the next fetch
	// full: the last fetch returned asked rows, so chunks outside the pool
	// may still match the leg.
	full bool
	// last bounds the leg score of every chunk outside a full pool: the
	// cosine of the vector pool's last row; for the keyword pool, the
	// keyword score k of its last row, or its floor when it holds every
	// chunk above the floor.
	last float64
	// floor (keyword pool): the pool holds the chunks with k above it
	// (fetchKeywords), at most asked of them.
	floor float64
}

// canGrow reports whether a bigger pool could hold more chunks: the pool
// is full (chunks outside it match the leg) and below MaxPool.
func (p *legPool) canGrow() bool { return p.full && p.asked < MaxPool }

// grow doubles the pool for the next fetch; false when it cannot grow.
func (p *legPool) grow() bool {
	if !p.canGrow() {
		return false
	}
	p.want = min(MaxPool, 2*p.asked)
	return true
}

// searchRun is the state of one Search: the candidates and what is known
// about the chunks that are not candidates.
type searchRun struct {
	s      *Store
	q      Query
	kq     analysedQuery
	useVec bool
	qblob  []byte
	// quant: the vector leg uses the quantized copy (quant.go); short is
	// its shortlist order. The shortlist depends on the query vector and
	// the scope only, so it is computed on its own goroutine while the
	// keyword leg runs (the two legs of the first round overlap on a
	// multi-core machine); shortDone is closed when short is set.
	quant     bool
	short     []qscore
	shortDone chan struct{}
	// qmask and qcount: a scoped search's file flags in the quantized copy
	// and the number of its vectors there (all of them when unscoped).
	qmask   []bool
	qcount  int
	cands   map[int64]*cand
	wv      float64 // the vector weight of the fused score
	maxBM25 float64
	vec, kw legPool
	// covFloor: every chunk with coverage ≥ covFloor is a candidate. Above
	// 1 until the coverage set has been fetched.
	covFloor float64
	// covTooBig is the number of essential terms of the last coverage set
	// found too big (more than any query has at first).
	covTooBig int
	// rounds counts the fetch rounds (for the debug log).
	rounds int
	// kl is the keyword leg (bm25.go): the snapshot, the scope and the
	// query's statistics in it.
	kl *kwLeg
}

// Search runs the hybrid search described above.
func (s *Store) Search(ctx context.Context, q Query) ([]Hit, error) {
	hits, _, err := s.search(ctx, q)
	return hits, err
}

// search is Search; it also reports whether the ranking was proven exact.
// A search whose vector leg fails on the vector table (vectors.go) records
// a vector fault and is answered by the keyword leg alone, as every search
// is while the fault lasts.
//
// The other way round (keywords.go): a search that fails while the vector
// leg alone answers it records a keyword fault, and it and every search
// while the fault lasts are answered by the vector leg alone, scored by
// the cosine.
func (s *Store) search(ctx context.Context, q Query) (hits []Hit, exact bool, err error) {
	vecOK := s.vec.fault.Load() == nil
	canVec := vecOK && s.compt && len(q.Vector) == s.meta.Dims && !isZero(q.Vector)
	vectorOnly := q
	vectorOnly.Text, vectorOnly.VectorWeight = "", 1
	if canVec && s.vec.kwFault.Load() != nil {
		return s.searchLegs(ctx, vectorOnly, true)
	}
	hits, exact, err = s.searchLegsSafely(ctx, q, vecOK)
	if isVectorError(ctx, err) {
		s.markVectorFault(err)
		return s.searchLegs(ctx, q, false)
	}
	if err != nil && canVec && q.Text != "" && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
		if vh, vexact, verr := s.searchLegs(ctx, vectorOnly, true); verr == nil {
			s.markKeywordFault(err)
			return vh, vexact, nil
		}
	}
	return hits, exact, err
}

// searchLegsSafely is searchLegs returning a panic as an error: decoding
// a damaged keyword index segment can panic (in Bleve's zapx or in the
// posting lists decoded here), and a damaged index must not take the
// process down.
func (s *Store) searchLegsSafely(ctx context.Context, q Query, vec bool) (hits []Hit, exact bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			hits, exact, err = nil, false, fmt.Errorf("search: damaged index: %v", p)
		}
	}()
	return s.searchLegs(ctx, q, vec)
}

// searchLegs runs one search, with the vector leg when vec is set.
func (s *Store) searchLegs(ctx context.Context, q Query, vec bool) (hits []Hit, exact bool, err error) {
	if s.isClosed() {
		return nil, false, ErrClosed
	}
	if q.MaxResults <= 0 {
		return nil, false, errors.New("search: MaxResults must be > 0")
	}
	if math.IsNaN(q.MinScore) || q.MinScore > 1 {
		return nil, false, fmt.Errorf("search: MinScore %v out of range (negative for no floor, else at most 1)", q.MinScore)
	}
	if math.IsNaN(q.VectorWeight) || q.VectorWeight < 0 || q.VectorWeight > 1 {
		return nil, false, fmt.Errorf("search: VectorWeight %v out of range [0,1]", q.VectorWeight)
	}
	r := &searchRun{s: s, q: q, cands: map[int64]*cand{}, covFloor: 2, covTooBig: math.MaxInt, wv: q.VectorWeight}
	if r.wv == 0 {
		r.wv = VectorWeight
	}
	kl, err := s.openKeywordLeg(ctx, q.Scope)
	if err != nil {
		return nil, false, err
	}
	defer kl.close()
	r.kl = kl
	r.useVec = vec && s.compt && len(q.Vector) == s.meta.Dims && !isZero(q.Vector)
	if r.useVec {
		r.qblob = encodeVector(q.Vector)
		r.vec.want = PoolSize(q.MaxResults)
		// The quantized copy serves a search whose scope holds more
		// vectors than QuantizeAbove (the same rule an index of the
		// scope's files alone would apply); a smaller scope is scanned
		// exactly (fetchVectors).
		if s.useQuant() {
			if err := s.ensureQuant(ctx); err != nil {
				return nil, false, vecErr(err, "search vectors")
			}
			if !kl.sc.all {
				r.qmask = s.quant.scopeMask(q.Scope)
			}
			r.qcount = s.quant.countIn(r.qmask)
			r.quant = kl.sc.all || r.qcount > s.quantizeAbove
		}
		if r.quant {
			r.shortDone = make(chan struct{})
			go func() {
				defer close(r.shortDone)
				r.short = s.quant.shortlist(q.Vector, shortlistSize(r.qcount), r.qmask)
			}()
			// Every return below waits for it: the goroutine reads the
			// copy under its read lock and must not outlive the search.
			defer func() { <-r.shortDone }()
		}
	}
	r.kq = s.analyzeQuery(q.Text)
	if len(r.kq.terms) > 0 {
		r.kw.want = PoolSize(q.MaxResults)
		if err := s.weighTerms(ctx, kl, &r.kq); err != nil {
			return nil, false, err
		}
		kl.prepare(&r.kq)
	}
	answer := r.q.MinScore
	if q.AutoFloor {
		answer, r.q.MinScore = DefaultFloor(queryInfo(&r.kq).Length)
	}
	if q.info != nil {
		*q.info = queryInfo(&r.kq)
		q.info.Floor, q.info.AnswerFloor = r.q.MinScore, answer
	}
	for {
		r.rounds++
		tau, err := r.fetch(ctx)
		if err != nil {
			return nil, false, err
		}
		if r.exact(tau) {
			exact = true
			break
		}
		more, err := r.widen(ctx, tau)
		if err != nil {
			return nil, false, err
		}
		if !more {
			s.log.Debug("memory search: ranking not proven exact, candidate pools at their limits", "query", q.Text, "maxResults", q.MaxResults, "candidates", len(r.cands), "rounds", r.rounds)
			break
		}
	}
	hits, err = r.results(ctx, r.rank())
	if len(hits) > 0 && hits[0].Score < answer {
		hits = hits[:0] // the best result does not answer the query (floor.go)
	}
	return hits, exact, err
}

// fetch brings the pools to their wanted sizes, completes the legs of the
// candidates that may reach the results, scores them and returns the
// threshold τ − scoreNoise that a chunk outside them must stay below.
//
// A candidate found only by the keyword side is first scored with the
// vector pool's bound v̄; its embedding is read only when that bound
// reaches the threshold of the candidates already scored exactly. Until
// then it stays out of the ranking, which is safe: it scores below the
// threshold, as a chunk outside the candidates would.
func (r *searchRun) fetch(ctx context.Context) (float64, error) {
	// The keyword pool first: the quantized shortlist is meanwhile being
	// computed (search); the two pools set different fields of a
	// candidate, so the order does not change the result.
	if len(r.kq.terms) > 0 && r.kw.want > r.kw.asked {
		if err := r.fetchKeywords(ctx); err != nil {
			return 0, err
		}
	}
	if r.useVec && r.vec.want > r.vec.asked {
		if err := r.fetchVectors(ctx); err != nil {
			return 0, err
		}
	}
	// Keyword candidates get their vector score first (the threshold they
	// set makes the keyword bound of the vector candidates bite), then the
	// vector candidates their keyword score, then whatever that made
	// reachable its vector score.
	for _, step := range []func(context.Context, float64) error{r.completeVectors, r.completeKeywords, r.completeVectors} {
		if err := r.loadRecords(ctx); err != nil {
			return 0, err
		}
		if err := step(ctx, r.threshold(r.rank())-scoreNoise); err != nil {
			return 0, err
		}
	}
	if err := r.loadRecords(ctx); err != nil {
		return 0, err
	}
	return r.threshold(r.rank()) - scoreNoise, nil
}

// get returns the candidate with id, adding it if new.
func (r *searchRun) get(id int64) *cand {
	c := r.cands[id]
	if c == nil {
		c = &cand{id: id}
		r.cands[id] = c
	}
	return c
}

// fetchVectors runs the vector leg: the vec.want nearest chunks.
func (r *searchRun) fetchVectors(ctx context.Context) error {
	n := r.vec.want
	if r.quant {
		// The pool is a prefix of the shortlist order (quant.go). Chunks
		// outside the shortlist may match the leg while the copy holds
		// more vectors than the pool.
		<-r.shortDone
		got := min(n, len(r.short))
		for _, e := range r.short[:got] {
			c := r.get(e.id)
			c.v, c.vDone = e.v, true
		}
		if got > 0 {
			r.vec.last = r.short[got-1].v
		}
		r.vec.asked, r.vec.full = n, got < r.qcount
		return nil
	}
	var rows *sql.Rows
	var err error
	if r.kl.sc.all {
		rows, err = r.s.db.QueryContext(ctx, "SELECT rowid, distance FROM vec_chunks WHERE embedding MATCH ? AND k = ?", r.qblob, n)
	} else {
		// The scope's chunks, nearest first: the cosine distance the vec0
		// KNN computes (distance_metric=cosine), over them alone.
		paths, jerr := json.Marshal(r.kl.sc.paths)
		if jerr != nil {
			return fmt.Errorf("search vectors: %w", jerr)
		}
		rows, err = r.s.db.QueryContext(ctx, `SELECT v.rowid, vec_distance_cosine(v.embedding, ?) AS d
			FROM chunks c JOIN vec_chunks v ON v.rowid = c.id
			WHERE c.path IN (SELECT value FROM json_each(?)) ORDER BY d, c.id LIMIT ?`, r.qblob, string(paths), n)
	}
	if err != nil {
		return vecErr(err, "search vectors")
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var id int64
		var dist float64
		if err := rows.Scan(&id, &dist); err != nil {
			return vecErr(err, "search vectors")
		}
		if err := checkDistance(id, dist); err != nil {
			return err
		}
		got++
		c := r.get(id)
		c.v, c.vDone = clamp01(1-dist), true
		r.vec.last = c.v
	}
	if err := rows.Err(); err != nil {
		return vecErr(err, "search vectors")
	}
	r.vec.asked, r.vec.full = n, got >= n
	return nil
}

// fetchKeywords runs the keyword leg: the kw.want chunks in scope with the
// best keyword scores k above kw.floor (bm25.go, exact top-k by MaxScore).
// The first fetch also finds maxBM25, the best BM25 score in scope, which
// k is relative to.
func (r *searchRun) fetchKeywords(ctx context.Context) error {
	n := r.kw.want
	if r.kw.asked == 0 {
		best, _, err := r.kl.top(ctx, 1)
		if err != nil {
			return err
		}
		if len(best) > 0 {
			r.maxBM25 = best[0].score
		}
	}
	hits, full, err := r.kl.topKeyword(ctx, n, r.maxBM25, r.kw.floor)
	if err != nil {
		return err
	}
	for _, h := range hits {
		if id, ok := r.kl.chunkID(h.num); ok {
			if c := r.get(id); !c.hasK {
				r.setKeyword(c, h)
			}
		}
	}
	r.kw.last = max(0, r.kw.floor)
	if full {
		r.kw.last = hits[len(hits)-1].key
	}
	r.kw.asked, r.kw.full = n, full || r.kw.floor > 0
	return nil
}

// keywordBound returns the highest keyword score of a chunk with coverage
// at most c outside the keyword pool.
func (r *searchRun) keywordBound(c float64) float64 {
	k := KeywordScore(c, 1)
	if r.kw.full {
		k = min(k, r.kw.last)
	}
	return k
}

// setKeyword records the BM25 score and coverage of a keyword hit; its
// phrase match waits for positions (resolvePhrases) when it holds every
// phrase term.
func (r *searchRun) setKeyword(c *cand, h kwHit) {
	c.k, c.hasK, c.kDone = h.score, true, true
	c.num, c.cov, c.seqAll = h.num, h.cov, h.seqAll
	c.phraseDone = !h.seqAll
}

// completeKeywords computes the keyword side of the candidates the keyword
// pool did not score (found by the vector leg or the coverage set) whose
// score could reach tau. Their coverage comes first, from the posting
// bitmaps (presence); with it a candidate's keyword score is at most
// min(KeywordScore(cov, 1), k̄) — it is outside the keyword pool, whose
// bound is k̄ — plus the phrase bonus when it holds every phrase term, and
// its vector score at most v (or v̄ while unknown). Only a
// candidate whose bound reaches tau is scored exactly (BM25 needs every
// term's frequency, which costs a walk of each posting list); the others
// wait, and stay out of the ranking, which is safe: they score below the
// threshold, and the threshold only rises. Then the phrase matches still
// open are resolved.
func (r *searchRun) completeKeywords(ctx context.Context, tau float64) error {
	var ids []int64
	for id, c := range r.cands {
		if c.kDone || c.covKnown {
			continue
		}
		if r.maxBM25 <= 0 {
			c.kDone = true // no chunk holds a query term: k = 0
			continue
		}
		ids = append(ids, id)
	}
	found, err := r.kl.docNums(ids)
	if err != nil {
		return err
	}
	var nums []uint64
	byNum := map[uint64]*cand{}
	for _, id := range ids {
		c := r.cands[id]
		num, ok := found[id]
		if !ok {
			c.kDone = true // not in the keyword snapshot's scope: k = 0
			continue
		}
		c.num = num
		nums = append(nums, num)
		byNum[num] = c
	}
	pres, err := r.kl.presence(ctx, nums)
	if err != nil {
		return err
	}
	for num, c := range byNum {
		if h, ok := pres[num]; ok {
			c.cov, c.seqAll, c.covKnown = h.cov, h.seqAll, true
		} else {
			c.kDone = true // no query term in scope: k = 0
		}
	}
	vb := r.vectorBound()
	var score []uint64
	byNum = map[uint64]*cand{}
	for _, c := range r.cands {
		if c.kDone || !c.covKnown {
			continue
		}
		v := vb
		if c.vDone {
			v = c.v
		}
		ub := Fuse(r.wv, v, r.keywordBound(c.cov))
		if c.seqAll {
			ub = min(1, ub+PhraseBonus*c.cov)
		}
		if ub >= tau {
			score = append(score, c.num)
			byNum[c.num] = c
		}
	}
	hits, err := r.kl.score(ctx, score)
	if err != nil {
		return err
	}
	for _, h := range hits {
		r.setKeyword(byNum[h.num], h)
	}
	for _, c := range byNum {
		c.kDone = true // scored (a chunk scored without a hit holds no term)
	}
	return r.resolvePhrases(ctx)
}

// resolvePhrases reads the positions of the phrase terms in the candidates
// that hold all of them and sets their phrase match.
func (r *searchRun) resolvePhrases(ctx context.Context) error {
	var nums []uint64
	for _, c := range r.cands {
		if c.hasK && !c.phraseDone {
			nums = append(nums, c.num)
		}
	}
	if len(nums) == 0 {
		return nil
	}
	locs, err := r.kl.locations(ctx, nums)
	if err != nil {
		return err
	}
	for _, c := range r.cands {
		if c.hasK && !c.phraseDone {
			c.phrase, c.phraseDone = c.cov > 0 && hasPhrase(locs[c.num], r.kq.seq), true
		}
	}
	return nil
}

// vectorBound is the highest vector score of a chunk outside the vector
// pool: v̄ when the pool is full, else 0 (the pool holds every stored vector).
func (r *searchRun) vectorBound() float64 {
	if r.useVec && r.vec.full {
		return r.vec.last
	}
	return 0
}

// completeVectors computes the vector score of each candidate found only by
// the keyword side whose score, with the bound v̄ for its vector score,
// reaches tau; the others wait (see fetch). The scores come from the same
// sqlite-vec distance as the vector pool's, restricted to those chunks
// (one scan for up to MaxPool of them, much cheaper than reading the
// embeddings one by one), so a chunk's v does not depend on the way it
// was found.
func (r *searchRun) completeVectors(ctx context.Context, tau float64) error {
	if r.quant {
		// The int8 estimate costs microseconds: score every candidate.
		var ids []int64
		for id, c := range r.cands {
			if !c.vDone && c.kDone {
				ids = append(ids, id)
			}
		}
		sc := r.s.quant.scores(r.q.Vector, ids)
		for _, id := range ids {
			c := r.cands[id]
			c.v, c.vDone = sc[id], true // 0 without a stored vector
		}
		return nil
	}
	vb := r.vectorBound()
	var ids []any
	for id, c := range r.cands {
		if c.vDone || !c.kDone {
			continue
		}
		if vb == 0 {
			c.v, c.vDone = 0, true // no stored vector outside the pool, or no vector leg
			continue
		}
		if r.scoreWith(c, vb) >= tau {
			c.v, c.vDone = 0, true // 0 unless it has a stored vector
			ids = append(ids, id)
		}
	}
	for i := 0; i < len(ids); i += MaxPool {
		part := ids[i:min(i+MaxPool, len(ids))]
		// vec_distance_cosine is the distance the vec0 table's KNN uses
		// (distance_metric=cosine). A KNN query restricted by "rowid IN"
		// is not used: sqlite-vec returned no row for a one-element list.
		args := append([]any{r.qblob}, part...)
		rows, err := r.s.db.QueryContext(ctx, "SELECT rowid, vec_distance_cosine(embedding, ?) FROM vec_chunks WHERE rowid IN ("+placeholders(len(part))+")", args...)
		if err != nil {
			return vecErr(err, "search vectors")
		}
		for rows.Next() {
			var id int64
			var dist float64
			if err := rows.Scan(&id, &dist); err != nil {
				rows.Close()
				return vecErr(err, "search vectors")
			}
			if err := checkDistance(id, dist); err != nil {
				rows.Close()
				return err
			}
			if c := r.cands[id]; c != nil {
				c.v = clamp01(1 - dist)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return vecErr(err, "search vectors")
		}
	}
	return nil
}

// loadRecords reads path, start line and hash of the candidates whose legs
// are complete (which puts them in the ranking); a chunk that SQLite does
// not hold (an index being repaired) is marked gone.
func (r *searchRun) loadRecords(ctx context.Context) error {
	var ids []any
	for id, c := range r.cands {
		if c.vDone && c.kDone && !c.loaded {
			c.loaded, c.gone = true, true
			ids = append(ids, id)
		}
	}
	const step = 500
	for i := 0; i < len(ids); i += step {
		part := ids[i:min(i+step, len(ids))]
		rows, err := r.s.db.QueryContext(ctx, "SELECT id, path, start_line, hash FROM chunks WHERE id IN ("+placeholders(len(part))+")", part...)
		if err != nil {
			return fmt.Errorf("load chunks: %w", err)
		}
		for rows.Next() {
			var id int64
			var path, hash string
			var line int
			if err := rows.Scan(&id, &path, &line, &hash); err != nil {
				rows.Close()
				return fmt.Errorf("load chunks: %w", err)
			}
			if c := r.cands[id]; c != nil {
				c.path, c.line, c.hash, c.gone = path, line, hash, false
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("load chunks: %w", err)
		}
	}
	return nil
}

// keyword returns the keyword score k of a candidate whose keyword side is
// known.
func (r *searchRun) keyword(c *cand) float64 {
	if !c.hasK || r.maxBM25 <= 0 {
		return 0
	}
	return KeywordScore(c.cov, c.k/r.maxBM25)
}

// scoreWith returns the final score of a candidate whose keyword side is
// known, for vector score v, rounded to a multiple of scoreGrid.
func (r *searchRun) scoreWith(c *cand, v float64) float64 {
	sc := Fuse(r.wv, v, r.keyword(c))
	if c.hasK && c.phrase {
		sc = min(1, sc+PhraseBonus*c.cov)
	}
	return math.Round(sc/scoreGrid) * scoreGrid
}

// rank returns the scored candidates in result order: score descending,
// then path, start line and id. Copies of one text get the best score among
// them (their scores differ only by floating-point rounding), so they sort
// by path and the first is the copy with the smallest path.
func (r *searchRun) rank() []*cand {
	out := make([]*cand, 0, len(r.cands))
	best := map[string]float64{}
	for _, c := range r.cands {
		if c.loaded && !c.gone {
			c.score = r.scoreWith(c, c.v)
			out = append(out, c)
			if b, ok := best[c.hash]; !ok || c.score > b {
				best[c.hash] = c.score
			}
		}
	}
	for _, c := range out {
		c.score = best[c.hash]
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if a.path != b.path {
			return a.path < b.path
		}
		if a.line != b.line {
			return a.line < b.line
		}
		return a.id < b.id
	})
	return out
}

// collapse walks ranked and returns the results: the first chunk of each
// distinct hash, at least MinScore, at most MaxResults of them.
func (r *searchRun) collapse(ranked []*cand) []*cand {
	seen := map[string]bool{}
	var out []*cand
	for _, c := range ranked {
		if seen[c.hash] {
			continue
		}
		seen[c.hash] = true
		if r.q.MinScore >= 0 && c.score < r.q.MinScore {
			break // ranked is sorted: no later chunk clears the floor
		}
		out = append(out, c)
		if len(out) == r.q.MaxResults {
			break
		}
	}
	return out
}

// threshold returns τ: the score a chunk must reach to enter the results,
// the MaxResults-th result's score, or MinScore (−∞ without a floor) when
// the candidates hold fewer results.
func (r *searchRun) threshold(ranked []*cand) float64 {
	res := r.collapse(ranked)
	if len(res) == r.q.MaxResults {
		return res[len(res)-1].score
	}
	if r.q.MinScore >= 0 {
		return r.q.MinScore
	}
	return math.Inf(-1)
}

// bound returns U(c), the highest score a chunk that is not a candidate can
// have when its coverage is at most c (see the package comment).
func (r *searchRun) bound(c float64) float64 {
	v := r.vectorBound()
	u := Fuse(r.wv, v, 0) // a chunk without any query term
	if r.maxBM25 <= 0 {
		return u
	}
	phrase := 0.0
	if r.kq.seq != nil {
		phrase = PhraseBonus
	}
	if r.kw.full {
		// A chunk with a query term, outside the pool: its keyword score
		// k ≥ KeywordRelBase·cov bounds its coverage, hence its phrase
		// bonus, too.
		k := r.keywordBound(c)
		u = max(u, Fuse(r.wv, v, k)+phrase*min(c, k/KeywordRelBase))
	}
	return min(1, u)
}

// exact reports whether no chunk outside the scored candidates can reach
// tau (τ − scoreNoise), i.e. whether the ranking is the exact result.
func (r *searchRun) exact(tau float64) bool {
	if !(r.useVec && r.vec.full) && !r.kw.full {
		return true // both legs returned every chunk they can find
	}
	if r.covFloor <= 1 {
		// Outside chunks have coverage below covFloor, and U is
		// non-decreasing in c, so they score at most U(covFloor) ≤ τ − 10⁻⁸.
		return r.bound(r.covFloor) <= tau
	}
	return r.bound(1) < tau
}

// widen enlarges the candidate set after a failed exactness test (see the
// package comment); false when nothing is left to widen.
func (r *searchRun) widen(ctx context.Context, tau float64) (bool, error) {
	if r.bound(0) >= tau {
		// A chunk without any query term could still make the results:
		// only more vectors help (or, with no floor and too few results,
		// more of either leg).
		if r.useVec && r.vec.grow() {
			return true, nil
		}
		return r.kw.grow(), nil
	}
	// The keyword pool, in one walk, down to the floor below which no chunk
	// outside it could reach tau.
	if r.kw.canGrow() {
		if kb := r.keywordFloor(tau); kb < r.kw.last {
			r.kw.floor, r.kw.want = kb, MaxPool
			return true, nil
		}
	}
	if r.kw.full && r.covFloor > 1 {
		c := r.coverageFloor(tau)
		terms, largest := r.kq.essential(c)
		if len(terms) < r.covTooBig && largest <= MaxCoverageSet {
			ok, err := r.fetchCoverage(ctx, c, terms)
			if err != nil || ok {
				return ok, err
			}
			// Too big now; retry once τ has risen enough to need fewer terms.
			r.covTooBig = len(terms)
		}
	}
	// The vector pool first: with the quantized copy growing it costs no
	// scan (the shortlist order is already computed).
	if r.useVec && r.vec.grow() {
		return true, nil
	}
	return r.kw.grow(), nil
}

// keywordFloor returns the largest keyword bound k̄ in [0, kw.last] (by
// bisection) with U < tau when the keyword pool holds every chunk with
// k > k̄, given U(0) < tau; 0 when none is.
func (r *searchRun) keywordFloor(tau float64) float64 {
	c := min(1, r.covFloor)
	phrase := 0.0
	if r.kq.seq != nil {
		phrase = PhraseBonus
	}
	v := r.vectorBound()
	u := func(kb float64) float64 {
		k := min(KeywordScore(c, 1), kb)
		return max(Fuse(r.wv, v, 0), Fuse(r.wv, v, k)+phrase*min(c, k/KeywordRelBase))
	}
	lo, hi := 0.0, r.kw.last
	if u(lo) >= tau {
		return 0
	}
	for i := 0; i < 50; i++ {
		mid := (lo + hi) / 2
		if u(mid) < tau {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// coverageFloor returns the largest c in (0,1] (by bisection) with
// U(c) ≤ tau, given U(0) < tau.
func (r *searchRun) coverageFloor(tau float64) float64 {
	if r.bound(1) <= tau {
		return 1
	}
	lo, hi := 0.0, 1.0 // U(lo) < tau < U(hi)
	for i := 0; i < 50; i++ {
		mid := (lo + hi) / 2
		if r.bound(mid) <= tau {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// fetchCoverage makes every chunk with coverage ≥ c a candidate: the chunks
// holding at least one essential term are scored, and those whose coverage
// reaches c are kept. It returns false, changing nothing, when more than
// MaxCoverageSet chunks hold an essential term.
func (r *searchRun) fetchCoverage(ctx context.Context, c float64, essential []int) (bool, error) {
	if len(essential) > 0 {
		nums, ok, err := r.kl.union(ctx, essential, MaxCoverageSet)
		if err != nil {
			return false, fmt.Errorf("search coverage: %w", err)
		}
		if !ok {
			return false, nil
		}
		// Coverage from the posting bitmaps; the candidates' BM25 waits
		// for completeKeywords, which scores those that can reach τ.
		pres, err := r.kl.presence(ctx, nums)
		if err != nil {
			return false, fmt.Errorf("search coverage: %w", err)
		}
		for num, h := range pres {
			if h.cov < c {
				continue
			}
			if id, ok := r.kl.chunkID(num); ok && r.cands[id] == nil {
				x := r.get(id)
				x.num, x.cov, x.seqAll, x.covKnown = num, h.cov, h.seqAll, true
			}
		}
	}
	r.covFloor = c
	return true, nil
}

// results turns the collapsed ranking into Hits with their texts.
func (r *searchRun) results(ctx context.Context, ranked []*cand) ([]Hit, error) {
	top := r.collapse(ranked)
	if len(top) == 0 {
		return nil, nil
	}
	ids := make([]any, len(top))
	for i, c := range top {
		ids[i] = c.id
	}
	type rest struct {
		end               int
		text, layer, role string
	}
	more := make(map[int64]rest, len(top))
	rows, err := r.s.db.QueryContext(ctx, `SELECT c.id, c.end_line, c.text, coalesce(f.layer, ''), coalesce(f.role, '')
		FROM chunks c LEFT JOIN files f ON f.path = c.path WHERE c.id IN (`+placeholders(len(ids))+")", ids...)
	if err != nil {
		return nil, fmt.Errorf("load chunks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var x rest
		if err := rows.Scan(&id, &x.end, &x.text, &x.layer, &x.role); err != nil {
			return nil, fmt.Errorf("load chunks: %w", err)
		}
		more[id] = x
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load chunks: %w", err)
	}
	out := make([]Hit, 0, len(top))
	for _, c := range top {
		x, ok := more[c.id]
		if !ok {
			continue // deleted since the ranking
		}
		out = append(out, Hit{
			ChunkID: c.id, Path: c.path, StartLine: c.line, EndLine: x.end, Text: x.text, Hash: c.hash,
			Layer: x.layer, Role: x.role,
			Score: c.score, Vector: c.v, Keyword: r.keyword(c), Coverage: c.cov, Phrase: c.phrase,
		})
	}
	if err := r.s.addCopies(ctx, out, r.kl.sc.hasPath); err != nil {
		return nil, err
	}
	return out, nil
}

// addCopies fills AlsoIn and Copies: for each hit, the other files that
// hold a chunk with the same text (hash), so that collapsing duplicates
// loses no path.
func (s *Store) addCopies(ctx context.Context, hits []Hit, inScope func(string) bool) error {
	if len(hits) == 0 {
		return nil
	}
	at := make(map[string]int, len(hits))
	args := make([]any, 0, len(hits))
	for i, h := range hits {
		at[h.Hash] = i
		args = append(args, h.Hash)
	}
	rows, err := s.db.QueryContext(ctx, "SELECT hash, path, min(start_line), end_line FROM chunks WHERE hash IN ("+placeholders(len(args))+") GROUP BY hash, path ORDER BY path", args...)
	if err != nil {
		return fmt.Errorf("load copies: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c Copy
		var hash string
		if err := rows.Scan(&hash, &c.Path, &c.StartLine, &c.EndLine); err != nil {
			return fmt.Errorf("load copies: %w", err)
		}
		if i, ok := at[hash]; ok && c.Path != hits[i].Path && inScope(c.Path) {
			hits[i].AlsoIn = append(hits[i].AlsoIn, c.Path)
			hits[i].Copies = append(hits[i].Copies, c)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load copies: %w", err)
	}
	return nil
}

// Copy is where another file holds a hit's exact text (its first chunk
// with that text in the file).
type Copy struct {
	Path               string
	StartLine, EndLine int
}

// keywordQuery ORs one term query per analysed term; ids (optional) restrict
// the matches without changing their scores.
func keywordQuery(terms []string, ids []string) query.Query {
	bq := bleve.NewBooleanQuery()
	bq.AddMust(termsQuery(terms))
	if ids != nil {
		bq.AddFilter(bleve.NewDocIDQuery(ids))
	}
	return bq
}

// termsQuery ORs one term query per term on the text field.
func termsQuery(terms []string) *query.DisjunctionQuery {
	disj := bleve.NewDisjunctionQuery()
	for _, t := range terms {
		tq := bleve.NewTermQuery(t)
		tq.SetField(textField)
		disj.AddQuery(tq)
	}
	return disj
}

// checkDistance says that a cosine distance read from the vector table is
// not a number in [0,2]: the stored vector is damaged (garbage bytes). It
// costs two comparisons per row.
func checkDistance(id int64, d float64) error {
	if d >= 0 && d <= 2+1e-6 {
		return nil
	}
	return &vectorError{fmt.Errorf("search vectors: chunk %d has cosine distance %v", id, d)}
}

func clamp01(x float64) float64 {
	if math.IsNaN(x) || x < 0 {
		return 0
	}
	if x > 1 {
		return 1
	}
	return x
}

// analysedQuery is a query as the keyword leg sees it.
type analysedQuery struct {
	// terms are the distinct analysed terms, in order of first appearance.
	terms []string
	// seq is the phrase sequence of the query (see phraseTokens); nil when
	// it has fewer than two tokens.
	seq []string
	// weight[i] is w(terms[i]), df[i] its document frequency and norm is W
	// (set by weighTerms).
	weight []float64
	df     []uint64
	norm   float64
	// n is the number of chunks in the keyword index.
	n uint64
	// parts are the term indices of each whitespace-separated part of a
	// keyword-style query (two parts or more, no function word): "连接池
	// 代码评审 短句", "zebrafalcon drafting". nil otherwise. partNorm[i]
	// is the weight of part i (set by weighTerms). See coverOf.
	parts    [][]int
	partNorm []float64
}

// coverOf returns the coverage of a chunk holding the query terms matched
// (indices into terms, sorted): the share of W they carry and, for a
// keyword-style query, the larger of that and the best share of one part's
// weight — its parts are alternatives, so a chunk holding every term of
// one part covers the query as far as that part goes. ("写作 青龙" finds
// the note about 写作 at the default floor, as 写作 alone does; a chunk with
// both parts still ranks above it by BM25, whose coord and sum reward
// more matched terms.) Natural questions and unspaced text have no parts.
func (q *analysedQuery) coverOf(matched []int) float64 {
	if q.norm <= 0 || len(matched) == 0 {
		return 0
	}
	var sum float64
	for _, t := range matched {
		sum += q.weight[t]
	}
	cov := sum / q.norm
	for i, part := range q.parts {
		if q.partNorm[i] <= 0 {
			continue
		}
		var ps float64
		for _, t := range part {
			if _, ok := slices.BinarySearch(matched, t); ok {
				ps += q.weight[t]
			}
		}
		cov = max(cov, ps/q.partNorm[i])
	}
	return clamp01(cov)
}

// essential returns the terms a chunk with coverage ≥ c must contain at
// least one of, and the largest of their document frequencies (a lower
// bound on the number of chunks holding one). The other terms are the most
// frequent ones whose weights add up to less than c·W: a chunk holding none
// of the essential terms has coverage below c. With no essential term no
// chunk reaches c.
func (q *analysedQuery) essential(c float64) (terms []int, largest int) {
	order := make([]int, len(q.terms))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		i, j := order[a], order[b]
		if q.df[i] != q.df[j] {
			return q.df[i] > q.df[j]
		}
		return q.weight[i] < q.weight[j]
	})
	seen := map[int]bool{}
	pick := func(set []int, norm float64) {
		var rest float64 // weight of the terms set aside
		for _, i := range set {
			if rest+q.weight[i] < c*norm {
				rest += q.weight[i]
				continue
			}
			if !seen[i] {
				seen[i] = true
				terms = append(terms, i)
				largest = max(largest, int(q.df[i]))
			}
		}
	}
	pick(order, q.norm)
	// A chunk may reach c by covering one part (coverOf): it then holds
	// one of that part's essential terms.
	for p, part := range q.parts {
		var set []int
		for _, i := range order {
			if slices.Contains(part, i) {
				set = append(set, i)
			}
		}
		pick(set, q.partNorm[p])
	}
	return terms, largest
}

// analyzeQuery analyses text with the index analyzer.
func (s *Store) analyzeQuery(text string) analysedQuery {
	an := s.analyzer()
	if an == nil {
		return analysedQuery{}
	}
	toks := an.Analyze([]byte(text))
	q := analysedQuery{terms: distinctTerms(toks)}
	if seq := phraseTokens(toks); len(seq) >= 2 {
		q.seq = seq
	}
	q.parts = keywordParts(an, text, q.terms)
	return q
}

// keywordParts returns the term indices of each whitespace-separated part
// of text when text is a keyword-style query: two parts or more with terms,
// and no function word among the terms (a question is not a list of
// alternatives). nil otherwise.
func keywordParts(an analysis.Analyzer, text string, terms []string) [][]int {
	fields := strings.Fields(text)
	if len(fields) < 2 {
		return nil
	}
	index := make(map[string]int, len(terms))
	for i, t := range terms {
		if stopwords[t] {
			return nil
		}
		index[t] = i
	}
	var parts [][]int
	for _, f := range fields {
		var part []int
		for _, t := range distinctTerms(an.Analyze([]byte(f))) {
			if i, ok := index[t]; ok {
				part = append(part, i)
			}
		}
		if len(part) > 0 {
			slices.Sort(part)
			parts = append(parts, part)
		}
	}
	if len(parts) < 2 {
		return nil
	}
	return parts
}

// weighTerms sets the term weights w(t) and the normaliser W of the
// keyword score from the document frequencies in the search's scope.
func (s *Store) weighTerms(ctx context.Context, kl *kwLeg, q *analysedQuery) error {
	n := kl.sc.n
	idf1 := bm25IDF(n, 1)
	idfRef := bm25IDF(n, max(1, uint64(math.Ceil(float64(n)/InformativeDF))))
	q.weight = make([]float64, len(q.terms))
	q.df = make([]uint64, len(q.terms))
	q.n = n
	var total float64
	content := false // the query has a term that is not a function word
	for i, t := range q.terms {
		df, err := kl.docFreq(ctx, t)
		if err != nil {
			return err
		}
		q.df[i] = df
		w := idf1
		if df > 0 {
			w = min(bm25IDF(n, df), idf1)
		}
		if stopwords[t] {
			w *= StopwordPrior
		} else {
			content = true
		}
		q.weight[i] = w
		total += w
	}
	q.norm = total
	if !content {
		q.norm = max(total, idfRef)
	}
	q.partNorm = make([]float64, len(q.parts))
	for p, part := range q.parts {
		for _, i := range part {
			q.partNorm[p] += q.weight[i]
		}
	}
	return nil
}

// bm25IDF is BM25's inverse document frequency for a term found in df of n
// documents (the formula of Bleve's BM25 scorer, used by bm25.go).
func bm25IDF(n, df uint64) float64 {
	if df > n {
		df = n
	}
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// coverage returns the coverage cov of a chunk: the sum of the weights of
// the query terms it contains (locs holds their positions in the chunk),
// divided by W.
func (q *analysedQuery) coverage(locs bsearch.TermLocationMap) float64 {
	var matched []int
	for i, t := range q.terms {
		if len(locs[t]) > 0 {
			matched = append(matched, i)
		}
	}
	return q.coverOf(matched)
}

// hasPhrase reports whether seq occurs at consecutive positions in locs.
func hasPhrase(locs bsearch.TermLocationMap, seq []string) bool {
	at := make([]map[uint64]bool, len(seq))
	for i, t := range seq {
		if len(locs[t]) == 0 {
			return false
		}
		at[i] = make(map[uint64]bool, len(locs[t]))
		for _, l := range locs[t] {
			at[i][l.Pos] = true
		}
	}
next:
	for p := range at[0] {
		for i := 1; i < len(seq); i++ {
			if !at[i][p+uint64(i)] {
				continue next
			}
		}
		return true
	}
	return false
}

// stopwords are the function words whose weight in coverage is scaled by
// StopwordPrior: frequent English words (as their stems: the analyzer
// stems), Chinese particles/pronouns in simplified and traditional forms
// (as single characters, the analyser's CJK unigrams) and the bigrams of
// question words (什么/什麼, 哪个/哪個, 如何, 是否 ...), which fill
// questions and say nothing about the answer: taking them out of coverage
// lifted CMRC and DRCD nDCG@10 by 0.002–0.003 (docs/BENCHMARKS.md). They still take part in
// BM25; the list only keeps a query made of them from looking informative in
// a small or mostly non-English index.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be been but by can could did do does for from
		had has have he her him his how i if in into is it its me my no not of on or our s she so t that the
		their them then there they this to too us was we were what when where which who whom why will with
		would you your 的 了 是 在 和 与 及 或 也 就 都 而 着 吗 呢 吧 啊 么 之 其 这 那 个 我 你 他 她 它 们
		與 著 嗎 麼 這 個 們 什 哪 誰 谁 什么 什麼 哪些 哪个 哪個 如何 怎么 怎麼 哪里 哪裡 是否 为什 為什 的是 是什`) {
		m[stemEnglish(w)] = true
	}
	return m
}()

// stemEnglish is the analyzer's English stem of a lower-cased word.
func stemEnglish(w string) string {
	env := snowballstem.NewEnv(w)
	english.Stem(env)
	return env.Current()
}
