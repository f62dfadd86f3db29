package index

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/blevesearch/bleve/v2"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// The bound of splitFrequent holds: no chunk without a rare query term
// scores above it in the full keyword query; and the keyword pool found
// through the rare terms is a top of the full query whose bound covers
// every chunk outside it.
func TestFrequentTermBound(t *testing.T) {
	b := openBuiltin(t, t.TempDir())
	chunks := fillDuplicated(t, b)
	fillNotes(t, b)
	settle(t, b.Store)
	ctx := context.Background()
	split, splitPools := 0, 0
	for _, q := range []string{
		"why did the nightly build fail with a timeout?", "连续63天零回滚率", "the build and the timeout",
		"支付服务 数据库 巡检", "what is the plan for the release notes in the wiki", "第3周值班记录 告警",
	} {
		kq := b.analyzeQuery(q)
		if err := b.weighTerms(ctx, &kq); err != nil {
			t.Fatal(err)
		}
		res, err := b.bl.Search(bleveReqLoc(keywordQuery(kq.terms, nil), chunks+100))
		if err != nil {
			t.Fatal(err)
		}
		for _, div := range []uint64{1000, 100, FrequentDF} {
			rare, bound, cF := kq.splitFrequent(div)
			if rare == nil {
				continue
			}
			split++
			isRare := map[string]bool{}
			for _, r := range rare {
				isRare[r] = true
			}
			for _, h := range res.Hits {
				hasRare := false
				for term := range h.Locations[textField] {
					hasRare = hasRare || isRare[term]
				}
				if !hasRare && h.Score >= bound {
					t.Errorf("%q 1/%d: chunk %s without a rare term scores %v ≥ bound %v", q, div, h.ID, h.Score, bound)
				}
				if cov := kq.coverage(h.Locations[textField]); !hasRare && cov > cF+1e-12 {
					t.Errorf("%q 1/%d: chunk %s without a rare term has coverage %v > cF %v", q, div, h.ID, cov, cF)
				}
			}
		}
		for _, n := range []int{5, 50} {
			r := &searchRun{s: b.Store, q: Query{MaxResults: n}, kq: kq, cands: map[int64]*cand{}}
			r.kw.want = n
			if err := r.fetchKeywords(ctx); err != nil {
				t.Fatal(err)
			}
			// Which chunks the pool query could return: all, or with a
			// split those holding a rare term.
			rare, _, _ := kq.splitFrequent(FrequentDF)
			isRare := map[string]bool{}
			for _, t := range rare {
				isRare[t] = true
			}
			eligible := func(h *bsearch.DocumentMatch) bool {
				if !r.split {
					return true
				}
				for term := range h.Locations[textField] {
					if isRare[term] {
						return true
					}
				}
				return false
			}
			var top []*bsearch.DocumentMatch
			for _, h := range res.Hits {
				if eligible(h) {
					top = append(top, h)
				}
			}
			want := map[string]bool{}
			for i, h := range top {
				if i < n || h.Score == top[min(n, len(top))-1].Score {
					want[h.ID] = true
				}
			}
			for id, c := range r.cands {
				if !want[fmt.Sprint(id)] {
					t.Errorf("%q n=%d split=%v: chunk %d (bm25 %v) in the pool, not in the top %d", q, n, r.split, id, c.k, n)
				}
			}
			for _, h := range res.Hits {
				var id int64
				fmt.Sscan(h.ID, &id)
				if r.cands[id] != nil {
					continue
				}
				if eligible(h) {
					// (up to the order of Bleve's floating-point sums)
					if !r.kw.full || h.Score > r.kw.last*(1+1e-12) {
						t.Errorf("%q n=%d: chunk %s (bm25 %v) outside the pool, bound %v (full %v)", q, n, h.ID, h.Score, r.kw.last, r.kw.full)
					}
				} else if h.Score/r.maxBM25 > r.relF*(1+1e-12) || kq.coverage(h.Locations[textField]) > r.cF+1e-12 {
					t.Errorf("%q n=%d: chunk %s with frequent terms only: rel %v > %v or coverage above %v", q, n, h.ID, h.Score/r.maxBM25, r.relF, r.cF)
				}
			}
			if r.split {
				splitPools++
			}
			// Equal up to the order of Bleve's floating-point sums.
			if len(res.Hits) > 0 && math.Abs(r.maxBM25-res.Hits[0].Score) > 1e-12*res.Hits[0].Score {
				t.Errorf("%q n=%d: max bm25 %v, full query %v", q, n, r.maxBM25, res.Hits[0].Score)
			}
		}
	}
	if split == 0 || splitPools == 0 {
		t.Fatalf("no query was split into rare and frequent terms (%d splits, %d split pools)", split, splitPools)
	}
}

func bleveReqLoc(q query.Query, n int) *bleve.SearchRequest {
	req := bleve.NewSearchRequestOptions(q, n, 0, false)
	req.IncludeLocations = true
	return req
}
