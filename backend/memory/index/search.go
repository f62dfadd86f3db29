package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Hybrid ranking constants (SPEC §4.3).
//
// For every candidate chunk the Store computes two exact, pool-independent
// leg scores in [0,1]:
//
//   - v, the vector score: cosine similarity between the query embedding and
//     the chunk embedding, clamped to [0,1];
//   - k, the keyword score: the chunk's Bleve BM25 score divided by the best
//     BM25 score of any chunk for this query (so the best keyword match has
//     k = 1 and the others keep their relative distance to it, i.e. real rank
//     information rather than a 0/1 flag).
//
// Candidates are the union of the two legs' pools (each PoolSize(maxResults)
// long). A candidate found by only one leg gets its other leg's score computed
// exactly (its stored embedding, or a BM25 query filtered to its id), so a
// chunk's score never depends on the pool size and hence on maxResults.
//
// The final score is
//
//	score = max(VectorWeight·v + KeywordWeight·k, KeywordFloorWeight·k)
//
// The first term is the SPEC's hybrid score. The second is the keyword floor:
// a keyword match on its own is worth up to KeywordFloorWeight (0.5), so the
// best keyword match for a query (k = 1) scores at least 0.5 and clears the
// default minScore 0.35 even when the vector leg finds nothing (an exact
// identifier such as "QK-7731" with an embedding that ignores it); in general
// any chunk whose BM25 score is at least 70 % of the best one clears 0.35.
// When both legs agree, the hybrid term dominates.
//
// Chunks with identical text (same hash) are collapsed to the best one; ties
// are broken by path, then start line, so the order is deterministic.
const (
	VectorWeight       = 0.7
	KeywordWeight      = 0.3
	KeywordFloorWeight = 0.5
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
// normalised keyword score k (see the package constants for the rule).
func FuseScores(v, k float64) float64 {
	return max(VectorWeight*v+KeywordWeight*k, KeywordFloorWeight*k)
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
	// scores v and k it was computed from.
	Score   float64
	Vector  float64
	Keyword float64
}

type cand struct {
	v, k       float64
	hasV, hasK bool
}

// Search runs the hybrid search described above.
func (s *Store) Search(ctx context.Context, q Query) ([]Hit, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if q.MaxResults <= 0 {
		return nil, errors.New("search: MaxResults must be > 0")
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

	terms := s.analyze(q.Text)
	var maxBM25 float64
	if len(terms) > 0 {
		res, err := s.bl.SearchInContext(ctx, bleve.NewSearchRequestOptions(keywordQuery(terms, nil), pool, 0, false))
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
			c.k, c.hasK = h.Score, true
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
			res, err := s.bl.SearchInContext(ctx, bleve.NewSearchRequestOptions(keywordQuery(terms, missing), len(missing), 0, false))
			if err != nil {
				return nil, fmt.Errorf("search keywords: %w", err)
			}
			for _, h := range res.Hits {
				id, err := strconv.ParseInt(h.ID, 10, 64)
				if err != nil {
					continue
				}
				if c := cands[id]; c != nil {
					c.k, c.hasK = h.Score, true
				}
			}
		}
	}

	hits, err := s.loadHits(ctx, cands)
	if err != nil {
		return nil, err
	}
	for i := range hits {
		c := cands[hits[i].ChunkID]
		k := 0.0
		if maxBM25 > 0 {
			k = clamp01(c.k / maxBM25)
		}
		hits[i].Vector, hits[i].Keyword = c.v, k
		hits[i].Score = FuseScores(c.v, k)
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
