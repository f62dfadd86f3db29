package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Hybrid ranking (SPEC §4.3). This file is the reference implementation of
// the memory_search score; the rule is:
//
// For every candidate chunk d the Store computes two exact, pool-independent
// leg scores in [0,1]:
//
//   - v(d), the vector score: cosine similarity between the query embedding
//     and the chunk embedding, clamped to [0,1];
//   - k(d), the keyword score, defined below.
//
// and fuses them into
//
//	score(d) = max(VectorWeight·v + KeywordWeight·k, KeywordFloorWeight·k)
//
// The first term is the SPEC's hybrid score 0.7·v + 0.3·k. The second is the
// keyword floor: a keyword match on its own is worth up to 0.5, so a chunk
// with k ≥ 0.7 clears the default minScore 0.35 even when the vector leg
// finds nothing (an exact identifier such as "QK-7731" that the embedding
// ignores). When both legs agree, the hybrid term dominates.
//
// # Keyword score
//
// Let Q be the distinct analysed terms of the query (OR-ed in the Bleve BM25
// query), N the number of chunks and df(t) the number of chunks containing t.
//
//	idf(t)  = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))   (BM25's idf)
//	idf₁    = idf at df = 1, the information of a term unique to one chunk
//	idfᵣ    = idf at df = max(1, ⌈N / InformativeDF⌉)
//	w(t)    = p(t) · min(idf(t), idf₁)                      weight of t
//	W       = Σ_{t∈Q} w(t), or max(Σ w(t), idfᵣ) when every t is a stopword
//	cov(d)  = Σ_{t∈Q, t∈d} w(t) / W                         coverage
//	rel(d)  = bm25(d) / max_{d'} bm25(d')                   relative BM25
//	k(d)    = √cov(d) · (KeywordRelBase + (1 − KeywordRelBase) · rel(d))
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
// The square root is a concave credit for partial coverage: natural-language
// questions rarely have all their words in one chunk, and a chunk holding half
// of the query's information gets 0.71 of the full keyword score, a third of it
// 0.58, a tenth 0.32 (on LoCoMo the root ranks better than cov itself: turn@5
// 0.854 against 0.846, see docs/BENCHMARKS.md).
//
// rel(d) is the relative part: among chunks with the same coverage, BM25's
// term frequency and length normalisation order them. It moves k only within
// [KeywordRelBase·√cov, √cov], so a chunk containing a rare identifier
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
// Every quantity is computed exactly for each candidate: df and N from the
// index, coverage and phrase from the positions of the query terms in the
// chunk (the index's term vectors, i.e. the same analyzer that BM25 used), so
// a chunk's score does not depend on the candidate pool and hence not on
// maxResults.
//
// Candidates are the union of the two legs' pools (each PoolSize(maxResults)
// long). A candidate found by only one leg gets its other leg's score computed
// exactly (its stored embedding, or a BM25 query filtered to its id).
// Chunks with identical text (same hash) are collapsed to the best one; ties
// are broken by path, then start line, so the order is deterministic.
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
	// max(MinPool, 4·maxResults) candidates, at most MaxPool.
	MinPool = 50
	MaxPool = 4096
)

// PoolSize returns the per-leg candidate pool for maxResults (SPEC §4.3).
func PoolSize(maxResults int) int {
	return min(MaxPool, max(MinPool, 4*maxResults))
}

// FuseScores returns the final score of a chunk from its vector score v and
// keyword score k, without the phrase bonus (see the package constants).
func FuseScores(v, k float64) float64 {
	return max(VectorWeight*v+KeywordWeight*k, KeywordFloorWeight*k)
}

// KeywordScore returns k = √cov·(KeywordRelBase + (1−KeywordRelBase)·rel)
// for coverage cov and relative BM25 score rel (both clamped to [0,1]).
func KeywordScore(cov, rel float64) float64 {
	return math.Sqrt(clamp01(cov)) * (KeywordRelBase + (1-KeywordRelBase)*clamp01(rel))
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
}

type cand struct {
	v, k       float64 // cosine; raw BM25 score
	hasV, hasK bool
	// locs are the positions of the query terms the chunk contains, from
	// the index's term vectors (Bleve term locations).
	locs bsearch.TermLocationMap
}

// Search runs the hybrid search described above.
func (s *Store) Search(ctx context.Context, q Query) ([]Hit, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if q.MaxResults <= 0 {
		return nil, errors.New("search: MaxResults must be > 0")
	}
	if math.IsNaN(q.MinScore) || q.MinScore > 1 {
		return nil, fmt.Errorf("search: MinScore %v out of range (negative for no floor, else at most 1)", q.MinScore)
	}
	pool := PoolSize(q.MaxResults)
	cands := map[int64]*cand{}
	get := func(id int64) *cand {
		c := cands[id]
		if c == nil {
			c = &cand{}
			cands[id] = c
		}
		return c
	}
	useVec := s.compt && len(q.Vector) == s.meta.Dims && !isZero(q.Vector)
	var qblob []byte
	if useVec {
		qblob = encodeVector(q.Vector)
		rows, err := s.db.QueryContext(ctx, "SELECT rowid, distance FROM vec_chunks WHERE embedding MATCH ? AND k = ?", qblob, pool)
		if err != nil {
			return nil, fmt.Errorf("search vectors: %w", err)
		}
		for rows.Next() {
			var id int64
			var dist float64
			if err := rows.Scan(&id, &dist); err != nil {
				rows.Close()
				return nil, fmt.Errorf("search vectors: %w", err)
			}
			c := get(id)
			c.v, c.hasV = clamp01(1-dist), true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("search vectors: %w", err)
		}
	}

	kq := s.analyzeQuery(q.Text)
	var maxBM25 float64
	if len(kq.terms) > 0 {
		req := bleve.NewSearchRequestOptions(keywordQuery(kq.terms, nil), pool, 0, false)
		req.IncludeLocations = true
		res, err := s.bl.SearchInContext(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("search keywords: %w", err)
		}
		for _, h := range res.Hits {
			id, err := strconv.ParseInt(h.ID, 10, 64)
			if err != nil {
				continue
			}
			if h.Score > maxBM25 {
				maxBM25 = h.Score
			}
			c := get(id)
			c.k, c.hasK, c.locs = h.Score, true, h.Locations[textField]
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}

	// Complete the missing leg of each candidate exactly.
	if useVec {
		stmt, err := s.db.PrepareContext(ctx, "SELECT embedding FROM vec_chunks WHERE rowid = ?")
		if err != nil {
			return nil, fmt.Errorf("search vectors: %w", err)
		}
		for id, c := range cands {
			if c.hasV {
				continue
			}
			var blob []byte
			err := stmt.QueryRowContext(ctx, id).Scan(&blob)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				stmt.Close()
				return nil, fmt.Errorf("search vectors: %w", err)
			}
			c.v, c.hasV = clamp01(cosine(q.Vector, decodeVector(blob))), true
		}
		stmt.Close()
	}
	if maxBM25 > 0 {
		var missing []string
		for id, c := range cands {
			if !c.hasK {
				missing = append(missing, docID(id))
			}
		}
		if len(missing) > 0 {
			req := bleve.NewSearchRequestOptions(keywordQuery(kq.terms, missing), len(missing), 0, false)
			req.IncludeLocations = true
			res, err := s.bl.SearchInContext(ctx, req)
			if err != nil {
				return nil, fmt.Errorf("search keywords: %w", err)
			}
			for _, h := range res.Hits {
				id, err := strconv.ParseInt(h.ID, 10, 64)
				if err != nil {
					continue
				}
				if c := cands[id]; c != nil {
					c.k, c.hasK, c.locs = h.Score, true, h.Locations[textField]
				}
			}
		}
		if err := s.weighTerms(ctx, &kq); err != nil {
			return nil, err
		}
	}

	hits, err := s.loadHits(ctx, cands)
	if err != nil {
		return nil, err
	}
	for i := range hits {
		h := &hits[i]
		c := cands[h.ChunkID]
		h.Vector = c.v
		h.Score = FuseScores(c.v, 0)
		if !c.hasK || maxBM25 <= 0 {
			continue
		}
		h.Coverage, h.Phrase = kq.match(c.locs)
		h.Keyword = KeywordScore(h.Coverage, c.k/maxBM25)
		h.Score = FuseScores(c.v, h.Keyword)
		if h.Phrase {
			h.Score = min(1, h.Score+PhraseBonus*h.Coverage)
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.StartLine != b.StartLine {
			return a.StartLine < b.StartLine
		}
		return a.ChunkID < b.ChunkID
	})
	seen := map[string]bool{}
	out := hits[:0]
	for _, h := range hits {
		if seen[h.Hash] {
			continue
		}
		seen[h.Hash] = true
		if q.MinScore >= 0 && h.Score < q.MinScore {
			continue
		}
		out = append(out, h)
		if len(out) == q.MaxResults {
			break
		}
	}
	return out, nil
}

// keywordQuery ORs one term query per analysed term; ids (optional) restrict
// the matches without changing their scores.
func keywordQuery(terms []string, ids []string) query.Query {
	disj := bleve.NewDisjunctionQuery()
	for _, t := range terms {
		tq := bleve.NewTermQuery(t)
		tq.SetField(textField)
		disj.AddQuery(tq)
	}
	bq := bleve.NewBooleanQuery()
	bq.AddMust(disj)
	if ids != nil {
		bq.AddFilter(bleve.NewDocIDQuery(ids))
	}
	return bq
}

func (s *Store) loadHits(ctx context.Context, cands map[int64]*cand) ([]Hit, error) {
	ids := make([]any, 0, len(cands))
	for id := range cands {
		ids = append(ids, id)
	}
	out := make([]Hit, 0, len(ids))
	const step = 500
	for i := 0; i < len(ids); i += step {
		part := ids[i:min(i+step, len(ids))]
		rows, err := s.db.QueryContext(ctx, `SELECT c.id, c.path, c.start_line, c.end_line, c.text, c.hash,
			coalesce(f.layer, ''), coalesce(f.role, '') FROM chunks c LEFT JOIN files f ON f.path = c.path
			WHERE c.id IN (`+placeholders(len(part))+")", part...)
		if err != nil {
			return nil, fmt.Errorf("load chunks: %w", err)
		}
		for rows.Next() {
			var h Hit
			if err := rows.Scan(&h.ChunkID, &h.Path, &h.StartLine, &h.EndLine, &h.Text, &h.Hash, &h.Layer, &h.Role); err != nil {
				rows.Close()
				return nil, fmt.Errorf("load chunks: %w", err)
			}
			out = append(out, h)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("load chunks: %w", err)
		}
	}
	return out, nil
}

func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
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
	// weight[i] is w(terms[i]) and norm is W (set by weighTerms).
	weight []float64
	norm   float64
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
	return q
}

// weighTerms sets the term weights w(t) and the normaliser W of the
// keyword score from the index's document frequencies.
func (s *Store) weighTerms(ctx context.Context, q *analysedQuery) error {
	ix, err := s.bl.Advanced()
	if err != nil {
		return fmt.Errorf("search keywords: %w", err)
	}
	r, err := ix.Reader()
	if err != nil {
		return fmt.Errorf("search keywords: %w", err)
	}
	defer r.Close()
	n, err := r.DocCount()
	if err != nil {
		return fmt.Errorf("search keywords: %w", err)
	}
	idf1 := bm25IDF(n, 1)
	idfRef := bm25IDF(n, max(1, uint64(math.Ceil(float64(n)/InformativeDF))))
	q.weight = make([]float64, len(q.terms))
	var total float64
	content := false // the query has a term that is not a function word
	for i, t := range q.terms {
		tfr, err := r.TermFieldReader(ctx, []byte(t), textField, false, false, false)
		if err != nil {
			return fmt.Errorf("search keywords: %w", err)
		}
		df := tfr.Count()
		if err := tfr.Close(); err != nil {
			return fmt.Errorf("search keywords: %w", err)
		}
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
	return nil
}

// bm25IDF is BM25's inverse document frequency for a term found in df of n
// documents (the formula Bleve's BM25 scorer uses).
func bm25IDF(n, df uint64) float64 {
	if df > n {
		df = n
	}
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// match returns the coverage cov of a chunk (the sum of the weights of the
// query terms it contains, divided by W) and whether it contains the query's
// phrase sequence, i.e. the tokens of seq at consecutive positions. locs
// holds the positions of the query terms in the chunk, as recorded by the
// index at analysis time.
func (q *analysedQuery) match(locs bsearch.TermLocationMap) (cov float64, phrase bool) {
	if q.norm <= 0 || len(locs) == 0 {
		return 0, false
	}
	var sum float64
	for i, t := range q.terms {
		if len(locs[t]) > 0 {
			sum += q.weight[i]
		}
	}
	return clamp01(sum / q.norm), q.seq != nil && hasPhrase(locs, q.seq)
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
// StopwordPrior: frequent English words and Chinese particles/pronouns (as
// single characters, the analyser's CJK unigrams). They still take part in
// BM25; the list only keeps a query made of them from looking informative in
// a small or mostly non-English index.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be been but by can could did do does for from
		had has have he her him his how i if in into is it its me my no not of on or our s she so t that the
		their them then there they this to too us was we were what when where which who whom why will with
		would you your 的 了 是 在 和 与 及 或 也 就 都 而 着 吗 呢 吧 啊 么 之 其 这 那 个 我 你 他 她 它 们`) {
		m[w] = true
	}
	return m
}()
