package memory

import (
	"fmt"
	"hash/fnv"
	"math"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// Ranking options of memory_search (SPEC §4.3). Each default below is what
// measured best on the retrieval benchmarks (docs/BENCHMARKS.md, `atrium
// bench retrieval`); options that did not help are off by default.
type Ranking struct {
	// VectorWeight is wv in the fused score wv·vector + (1−wv)·keyword
	// (package index). 0 means: LexicalVectorWeight (0.3) when the embedder
	// is lexical (the builtin hashed n-gram embedder, whose vector leg
	// repeats the keyword leg's evidence with collision noise: at the
	// SPEC's 0.7 it pulls hybrid below keyword-only search on every
	// benchmark), else the SPEC's 0.7 (index.VectorWeight) for a semantic
	// model. Must be in [0,1] otherwise.
	VectorWeight float64 `json:"vectorWeight,omitempty"`
	// MMR re-ranks the results by maximal marginal relevance (Carbonell &
	// Goldstein 1998): each next result maximises
	// λ·score − (1−λ)·max sim(result, results already chosen), where sim
	// is the Jaccard similarity of the chunks' word sets (words, CJK
	// characters and bigrams), so near-duplicate chunks give way to
	// different ones. The first result is always the best-scoring one.
	// Off by default (see docs/BENCHMARKS.md for what it measured).
	MMR bool `json:"mmr,omitempty"`
	// MMRLambda is λ; 0 means DefaultMMRLambda (0.7, SPEC §4.3). Must be
	// in [0,1].
	MMRLambda float64 `json:"mmrLambda,omitempty"`
	// TemporalDecay multiplies the score of a chunk from a dated daily log
	// (a memory file whose name starts with YYYY-MM-DD) by
	// 2^(−age/HalfLifeDays), age in days from that date to Now (0 for a
	// future date). MEMORY.md and undated files never decay. It changes
	// the order only: MinScore is applied to the undecayed score, so an
	// old note holding an exact identifier is still found. Off by default
	// (see docs/BENCHMARKS.md).
	TemporalDecay bool `json:"temporalDecay,omitempty"`
	// HalfLifeDays is the decay half-life; 0 means DefaultHalfLifeDays (30,
	// SPEC §4.3). Must not be negative.
	HalfLifeDays float64 `json:"halfLifeDays,omitempty"`
	// Now is the clock for TemporalDecay and for the days a question names
	// ("yesterday", "上周三": dates.go); nil means time.Now.
	Now func() time.Time `json:"-"`
	// Location is the person's time zone, in which "today" is counted for
	// the days a question names; nil means time.Local.
	Location *time.Location `json:"-"`
	// IgnoreDates turns off ranking the daily logs of the days a question
	// names first (dates.go; on by default). For measurement.
	IgnoreDates bool `json:"ignoreDates,omitempty"`
}

// location returns Location, or time.Local.
func (r *Ranking) location() *time.Location {
	if r.Location == nil {
		return time.Local
	}
	return r.Location
}

// Ranking defaults (SPEC §4.3).
const (
	DefaultMMRLambda    = 0.7
	DefaultHalfLifeDays = 30
	// rerankPool is the smallest number of candidates fetched from the
	// index to re-rank with MMR or temporal decay (4·maxResults when
	// larger, at most MaxMaxResults); see poolFor.
	rerankPool = 50
)

// LexicalVectorWeight is the default vector weight for a lexical embedder
// (see Ranking.VectorWeight).
const LexicalVectorWeight = 0.3

// lexical is implemented by embedders that measure shared strings rather
// than meaning (embed.Builtin).
type lexical interface{ Lexical() bool }

// resolve validates r and fills its defaults for embedder e.
func (r *Ranking) resolve(e embed.Embedder) error {
	if math.IsNaN(r.VectorWeight) || r.VectorWeight < 0 || r.VectorWeight > 1 {
		return fmt.Errorf("ranking: vectorWeight %v out of range [0,1]", r.VectorWeight)
	}
	if math.IsNaN(r.MMRLambda) || r.MMRLambda < 0 || r.MMRLambda > 1 {
		return fmt.Errorf("ranking: mmrLambda %v out of range [0,1]", r.MMRLambda)
	}
	if math.IsNaN(r.HalfLifeDays) || r.HalfLifeDays < 0 || math.IsInf(r.HalfLifeDays, 0) {
		return fmt.Errorf("ranking: halfLifeDays %v must be a positive number of days", r.HalfLifeDays)
	}
	if r.MMRLambda == 0 {
		r.MMRLambda = DefaultMMRLambda
	}
	if r.HalfLifeDays == 0 {
		r.HalfLifeDays = DefaultHalfLifeDays
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.VectorWeight == 0 {
		r.VectorWeight = index.VectorWeight
		if l, ok := e.(lexical); ok && l.Lexical() {
			r.VectorWeight = LexicalVectorWeight
		}
	}
	return nil
}

// NearDuplicateJaccard: a result whose word set (see MMR) has at least
// this Jaccard similarity with a better-ranked result is a near-duplicate
// (the same paragraph in a daily log and in a summary note, under another
// heading): it is folded into that result, whose AlsoIn gains its path.
// 0.8 is the usual near-duplicate threshold of shingle-based detection; two
// different facts in the same words ("the meeting is on Monday" /
// "... Tuesday") stay apart (0.67).
const NearDuplicateJaccard = 0.8

// poolFor returns how many candidates to fetch from the index for n
// results. MMR and temporal decay re-order the candidates, so they get a
// deep pool (max(n, rerankPool, 4n)). Without them the re-ranking only
// folds near-duplicates, in index order: the results are then the first n
// kept of any pool that keeps n, so a pool of n + max(4, n/2) is enough
// unless folding removes more than the spare — Manager.Search then asks
// again with a larger pool. (A deep pool costs: the index's top-k walk is
// the larger part of a search, and it grows with k.) Near-duplicates
// ranked below the pool are not listed in AlsoIn; identical chunks always
// are (the index's copies).
func (r *Ranking) poolFor(n int) int {
	if r.MMR || r.TemporalDecay {
		return min(MaxMaxResults, max(n, rerankPool, 4*n))
	}
	return min(MaxMaxResults, n+max(4, n/2))
}

// rerank applies temporal decay (if on), folds near-duplicates, applies
// MMR (if on) to hits (in index order) and returns the first n. The first
// result of the index is the first result here unless decay re-orders;
// the results for n are a prefix of those for any larger n.
func (r *Ranking) rerank(hits []index.Hit, n int) []index.Hit {
	if len(hits) == 0 {
		return hits
	}
	rel := make([]float64, len(hits))
	for i, h := range hits {
		rel[i] = h.Score
	}
	order := make([]int, len(hits))
	for i := range order {
		order[i] = i
	}
	if r.TemporalDecay {
		now := r.Now()
		for i, h := range hits {
			rel[i] *= r.decay(h.Path, now)
		}
		// Stable: equal decayed scores keep the index's order.
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case rel[a] > rel[b]:
				return -1
			case rel[a] < rel[b]:
				return 1
			}
			return 0
		})
	}
	sets := make([]tokenSet, len(hits))
	for i, h := range hits {
		sets[i] = wordSet(h.Text)
	}
	order = foldNearDuplicates(hits, sets, order)
	if r.MMR {
		order = mmr(sets, rel, order, r.MMRLambda, n)
	}
	out := make([]index.Hit, 0, min(n, len(order)))
	for _, i := range order[:min(n, len(order))] {
		out = append(out, hits[i])
	}
	return out
}

// foldNearDuplicates keeps, in order, each hit that is not a near-duplicate
// of a hit kept before it, and adds the paths of the folded hits to the
// AlsoIn of the hit they duplicate.
func foldNearDuplicates(hits []index.Hit, sets []tokenSet, order []int) []int {
	kept := make([]int, 0, len(order))
next:
	for _, i := range order {
		for _, k := range kept {
			if jaccardAtLeast(sets[i], sets[k], NearDuplicateJaccard) {
				h := &hits[k]
				for _, p := range append([]string{hits[i].Path}, hits[i].AlsoIn...) {
					if p != h.Path && !slices.Contains(h.AlsoIn, p) {
						h.AlsoIn = append(h.AlsoIn, p)
					}
				}
				slices.Sort(h.AlsoIn)
				continue next
			}
		}
		kept = append(kept, i)
	}
	return kept
}

// decay returns the temporal decay factor of the chunk at path p (a
// workspace-relative slash path) at time now: 1 for undated files.
func (r *Ranking) decay(p string, now time.Time) float64 {
	d, ok := logDate(p)
	if !ok {
		return 1
	}
	age := now.Sub(d).Hours() / 24
	if age <= 0 {
		return 1
	}
	return math.Exp2(-age / r.HalfLifeDays)
}

// logDate returns the date of a dated daily log: a file under memory/
// whose name starts with a valid YYYY-MM-DD ("memory/2024-05-01.md",
// "memory/roles/writer/2024-05-01-standup.md"). MEMORY.md and other files
// are undated.
func logDate(p string) (time.Time, bool) {
	if !strings.HasPrefix(p, "memory/") {
		return time.Time{}, false
	}
	base := path.Base(p)
	if len(base) < 10 {
		return time.Time{}, false
	}
	d, err := time.Parse("2006-01-02", base[:10])
	if err != nil {
		return time.Time{}, false
	}
	return d, true
}

// mmr greedily picks up to n of the candidates in order (best first by
// rel): each pick maximises λ·rel − (1−λ)·(highest Jaccard similarity to a
// pick so far). Ties keep the earlier candidate.
func mmr(sets []tokenSet, rel []float64, order []int, lambda float64, n int) []int {
	left := slices.Clone(order)
	picked := make([]int, 0, min(n, len(order)))
	maxSim := make(map[int]float64, len(order))
	for len(picked) < n && len(left) > 0 {
		best, bestVal := 0, math.Inf(-1)
		for j, i := range left {
			v := lambda*rel[i] - (1-lambda)*maxSim[i]
			if v > bestVal {
				best, bestVal = j, v
			}
		}
		p := left[best]
		picked = append(picked, p)
		left = slices.Delete(left, best, best+1)
		for _, i := range left {
			maxSim[i] = max(maxSim[i], jaccard(sets[i], sets[p]))
		}
	}
	return picked
}

// tokenSet is a set of words as sorted, distinct 64-bit FNV-1a hashes: a
// merge computes an intersection without map lookups (folding compares up
// to rerankPool² pairs per search). Two words sharing a hash (p ≈ 2⁻⁶⁴ per
// pair) would count as one.
type tokenSet []uint64

// wordSet returns the lower-cased words (runs of letters and digits) of
// text, and for CJK runs every character and adjacent pair.
func wordSet(text string) tokenSet {
	var set tokenSet
	var word []rune
	var prevCJK rune
	add := func(rs ...rune) {
		h := fnv.New64a()
		for _, r := range rs {
			var b [utf8.UTFMax]byte
			n := utf8.EncodeRune(b[:], r)
			h.Write(b[:n])
		}
		set = append(set, h.Sum64())
	}
	flush := func() {
		if len(word) > 0 {
			add(word...)
			word = word[:0]
		}
	}
	for _, r := range strings.ToLower(text) {
		if unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) {
			flush()
			add(r)
			if prevCJK != 0 {
				add(prevCJK, r)
			}
			prevCJK = r
			continue
		}
		prevCJK = 0
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			word = append(word, r)
			continue
		}
		flush()
	}
	flush()
	slices.Sort(set)
	return slices.Compact(set)
}

// has reports whether the set holds word w (lower-cased by the caller).
func (s tokenSet) has(w string) bool {
	h := fnv.New64a()
	h.Write([]byte(w))
	_, ok := slices.BinarySearch(s, h.Sum64())
	return ok
}

// intersect returns |a ∩ b|, or stops early (returning a smaller count)
// once fewer than need common elements remain possible.
func intersect(a, b tokenSet, need int) int {
	i, j, n := 0, 0, 0
	for i < len(a) && j < len(b) {
		if n+min(len(a)-i, len(b)-j) < need {
			return n
		}
		switch {
		case a[i] == b[j]:
			n++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return n
}

// jaccard returns |a ∩ b| / |a ∪ b| (0 for two empty sets).
func jaccard(a, b tokenSet) float64 {
	inter := intersect(a, b, 0)
	union := len(a) + len(b) - inter
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}

// jaccardAtLeast reports whether jaccard(a, b) ≥ t (t in (0,1]), without
// the full intersection when the sizes alone rule it out (J ≤ min/max) or
// too few elements are left to reach it: J ≥ t ⇔ |a∩b| ≥ t·(|a|+|b|)/(1+t).
func jaccardAtLeast(a, b tokenSet, t float64) bool {
	la, lb := float64(len(a)), float64(len(b))
	if la+lb == 0 || min(la, lb) < t*max(la, lb) {
		return false
	}
	need := int(math.Ceil(t*(la+lb)/(1+t) - 1e-9))
	inter := intersect(a, b, need)
	return inter >= need && float64(inter)/(la+lb-float64(inter)) >= t
}
