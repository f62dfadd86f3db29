package index

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Quantized vector leg (issue 3, "memory search at scale").
//
// sqlite-vec answers a kNN query by scanning every float32 vector: at
// 100,000 chunks of 384 dims that is ~150 MB read and ~50 ms per query on
// the 2-CPU reference machine (~500 ms at 1M), and scoring a few keyword
// candidates with "rowid IN (...)" costs as much again. sqlite-vec's own bit
// vectors (vec_quantize_binary, hamming) scan fast (7 ms at 100k for k = 50)
// but its top-k selection is slow for the shortlist sizes a re-rank needs
// (~200 ms for k = 1,000 at 100k), and reading single vectors back by rowid
// costs ~150 µs each; so the Store keeps its own in-memory copy:
//
//   - one sign bit per dimension (the binary code, dims/64 words), scanned
//     with popcounts against the query's signs weighted by its 4-bit
//     magnitudes (see shortlist; the loop is scanSigns, qkernel.go, in
//     assembly on amd64);
//   - an int8 code per dimension with one float32 scale per vector
//     (x ≈ scale·code, scale = max|x|/127), from which a candidate's cosine
//     is estimated as scale·Σ q[i]·code[i] (in integers, the query scaled
//     to 16 bits; dotInt8, qkernel.go).
//
// Memory: dims/8 + dims + 4 bytes per vector plus the id maps, ~440 B at 384
// dims: ~44 MB at 100k chunks, ~440 MB at 1M (float32 would be 1.5 GB).
//
// A quantized search computes the first-stage score of every stored vector,
// takes the shortlist — every vector whose score is at least the largest
// score s* that at least S vectors reach, S = max(QuantShortlist, n /
// QuantShortlistShare) for n stored vectors (so ties at s* are all in, and
// the shortlist is a function of the index and the query) — and orders it
// by the int8 cosine estimate (then chunk id). The vector pool of any size is a prefix of that order; since the shortlist holds at
// least MaxPool vectors whenever the index does, a bigger pool (widening,
// or a larger MaxResults) only appends to a smaller one, and the first
// result does not depend on MaxResults (SPEC §4.3, failure class 7).
//
// What it costs: the vector score v of every chunk is the int8 estimate
// (error ~10⁻³ against the float32 cosine), and a chunk outside the
// shortlist is not in the vector pool even if its cosine beats the pool's
// last: the bound v̄ of the threshold algorithm (search.go) is then an
// estimate, not a proof. That is where approximation starts; the recall of
// the quantized vector leg against the exact float32 top-10 is measured by
// `atrium bench scale` (docs/BENCHMARKS.md, "Scale (issue 3)").
//
// Up to Options.QuantizeAbove stored vectors (default DefaultQuantizeAbove)
// the exact sqlite-vec path is kept: it scans ~10,000 vectors in ~5 ms,
// and keeps every leg score exact for small workspaces.
//
// Consistency: the copy is derived from vec_chunks and never persisted. It
// is loaded on the first quantized search (under the write lock, from the
// committed rows), and every committed write applies its vector inserts
// and deletes to it after the SQLite commit: at once outside bulk mode, at
// the group's commit in bulk mode (a rolled-back file or group drops its
// operations). A crash loses nothing: the next Open reloads from SQLite.

const (
	// DefaultQuantizeAbove is the default Options.QuantizeAbove: indexes
	// with more stored vectors search the quantized copy.
	DefaultQuantizeAbove = 10000
	// QuantShortlist is the least number of vectors (by first-stage score)
	// re-ranked by the int8 estimate in a quantized search. It is at least
	// MaxPool, so every vector pool is a prefix of one shortlist order.
	QuantShortlist = 4096
	// QuantShortlistShare: with more than QuantShortlist·QuantShortlistShare
	// vectors the shortlist is one vector in QuantShortlistShare. Re-ranking
	// is cheap next to the scan, and recall@10 against exact search falls
	// with the shortlist's share of the index: on the scale benchmark's 1M
	// chunks 0.72 / 0.79 / 0.86 / 0.92 with 4,096 / 8,192 / 16,384 / 32,768
	// (31 / 35 / 40 / 40 ms per query on the busy 2-CPU machine); at 100k
	// 0.74 / 0.90 / 0.96 / 0.99 with 1,024 / 4,096 / 8,192 / 16,384.
	QuantShortlistShare = 32
)

// shortlistSize returns the shortlist size for an index of n vectors. It
// depends on n only, never on MaxResults.
func shortlistSize(n int) int {
	return max(QuantShortlist, n/QuantShortlistShare)
}

// qop is one committed change of vec_chunks: vec nil deletes id; path is
// the chunk's file (for scoped searches).
type qop struct {
	id   int64
	vec  []float32
	path string
}

// quantIndex is the in-memory quantized copy of vec_chunks.
type quantIndex struct {
	dims, words int

	mu     sync.RWMutex
	loaded bool
	// n counts the stored vectors, kept also while the copy is not loaded
	// (from the count at Open and the committed operations).
	n     int
	ids   []int64         // slot → chunk id
	slot  map[int64]int32 // chunk id → slot
	bits  []uint64        // slot·words … : sign bits
	codes []int8          // slot·dims … : int8 codes
	scale []float32       // slot → scale
	// file[slot] indexes fileName, the chunk's file: a scoped search
	// (scope.go) turns its predicate into one flag per file (scopeMask)
	// and the scan skips the slots whose file is out.
	file     []int32
	fileIdx  map[string]int32
	fileName []string
}

func newQuantIndex(dims, count int) *quantIndex {
	return &quantIndex{dims: dims, words: (dims + 63) / 64, n: count}
}

// count returns the number of stored vectors.
func (q *quantIndex) count() int {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.n
}

// isLoaded reports whether the copy has been loaded.
func (q *quantIndex) isLoaded() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.loaded
}

// apply records committed operations (loaded or not: the count follows).
func (q *quantIndex) apply(ops []qop) {
	if len(ops) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, op := range ops {
		if op.vec == nil {
			q.n--
			if q.loaded {
				q.remove(op.id)
			}
			continue
		}
		q.n++
		if q.loaded {
			q.add(op.id, op.vec, op.path)
		}
	}
}

// reset empties the copy after the vector table was emptied
// (Store.ResetVectors): nothing stored, nothing loaded.
func (q *quantIndex) reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.loaded, q.n = false, 0
	q.ids, q.slot, q.bits, q.codes, q.scale = nil, nil, nil, nil, nil
	q.file, q.fileIdx, q.fileName = nil, nil, nil
}

// fileOf returns the index of path in fileName, adding it. Callers hold mu.
func (q *quantIndex) fileOf(path string) int32 {
	if q.fileIdx == nil {
		q.fileIdx = map[string]int32{}
	}
	f, ok := q.fileIdx[path]
	if !ok {
		f = int32(len(q.fileName))
		q.fileIdx[path] = f
		q.fileName = append(q.fileName, path)
	}
	return f
}

// add stores v of a chunk of file path under id (replacing an existing
// entry). Callers hold mu.
func (q *quantIndex) add(id int64, v []float32, path string) {
	if _, ok := q.slot[id]; ok {
		q.remove(id)
	}
	s := int32(len(q.ids))
	q.ids = append(q.ids, id)
	q.slot[id] = s
	q.file = append(q.file, q.fileOf(path))
	q.bits = append(q.bits, make([]uint64, q.words)...)
	q.codes = append(q.codes, make([]int8, q.dims)...)
	q.scale = append(q.scale, 0)
	q.scale[s] = quantize(v, q.bits[int(s)*q.words:int(s+1)*q.words], q.codes[int(s)*q.dims:int(s+1)*q.dims])
}

// remove drops id, moving the last slot into its place. Callers hold mu.
func (q *quantIndex) remove(id int64) {
	s, ok := q.slot[id]
	if !ok {
		return
	}
	last := int32(len(q.ids) - 1)
	if s != last {
		q.ids[s] = q.ids[last]
		q.slot[q.ids[s]] = s
		copy(q.bits[int(s)*q.words:int(s+1)*q.words], q.bits[int(last)*q.words:])
		copy(q.codes[int(s)*q.dims:int(s+1)*q.dims], q.codes[int(last)*q.dims:])
		q.scale[s] = q.scale[last]
		q.file[s] = q.file[last]
	}
	delete(q.slot, id)
	q.ids = q.ids[:last]
	q.bits = q.bits[:int(last)*q.words]
	q.codes = q.codes[:int(last)*q.dims]
	q.scale = q.scale[:last]
	q.file = q.file[:last]
}

// scopeMask returns one flag per file: whether accept takes it (nil accept:
// nil, every slot). Files added after the mask count as out.
func (q *quantIndex) scopeMask(accept func(string) bool) []bool {
	if accept == nil {
		return nil
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	in := make([]bool, len(q.fileName))
	for i, p := range q.fileName {
		in[i] = accept(p)
	}
	return in
}

// inScope reports whether slot s is in the scope of mask. Callers hold mu.
func (q *quantIndex) inScope(mask []bool, s int) bool {
	if mask == nil {
		return true
	}
	f := q.file[s]
	return int(f) < len(mask) && mask[f]
}

// countIn returns the number of stored vectors in the scope of mask.
func (q *quantIndex) countIn(mask []bool) int {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if mask == nil {
		return len(q.ids)
	}
	n := 0
	for s := range q.ids {
		if q.inScope(mask, s) {
			n++
		}
	}
	return n
}

// quantize writes the sign bits and int8 codes of v and returns its scale.
func quantize(v []float32, b []uint64, c []int8) float32 {
	var mx float32
	for i, x := range v {
		if x > 0 {
			b[i/64] |= 1 << (i % 64)
		}
		mx = max(mx, float32(math.Abs(float64(x))))
	}
	if mx == 0 {
		return 0
	}
	sc := mx / 127
	for i, x := range v {
		c[i] = int8(math.Round(float64(x / sc)))
	}
	return sc
}

// load fills the copy from the committed rows of vec_chunks. Callers hold
// the Store's write lock, so no write commits meanwhile.
func (s *Store) loadQuant(ctx context.Context) error {
	q := s.quant
	if q.isLoaded() {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT v.rowid, v.embedding, c.path FROM vec_chunks v LEFT JOIN chunks c ON c.id = v.rowid")
	if err != nil {
		return vecErr(err, "load quantized vectors")
	}
	defer rows.Close()
	n := q.count()
	ids := make([]int64, 0, n)
	slot := make(map[int64]int32, n)
	bs := make([]uint64, 0, n*q.words)
	cs := make([]int8, 0, n*q.dims)
	sc := make([]float32, 0, n)
	files := make([]int32, 0, n)
	fresh := &quantIndex{}
	for rows.Next() {
		var id int64
		var blob []byte
		var path sql.NullString
		if err := rows.Scan(&id, &blob, &path); err != nil {
			return vecErr(err, "load quantized vectors")
		}
		if !path.Valid {
			return &vectorError{fmt.Errorf("load quantized vectors: vector %d belongs to no chunk", id)}
		}
		// The deep check of every vector (vectors.go) costs nothing
		// more here: each one is read anyway.
		v := decodeVector(blob)
		if err := checkVector(id, v, q.dims); err != nil {
			return fmt.Errorf("load quantized vectors: %w", err)
		}
		slot[id] = int32(len(ids))
		ids = append(ids, id)
		bs = append(bs, make([]uint64, q.words)...)
		cs = append(cs, make([]int8, q.dims)...)
		sc = append(sc, quantize(v, bs[len(bs)-q.words:], cs[len(cs)-q.dims:]))
		files = append(files, fresh.fileOf(path.String))
	}
	if err := rows.Err(); err != nil {
		return vecErr(err, "load quantized vectors")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids, q.slot, q.bits, q.codes, q.scale = ids, slot, bs, cs, sc
	q.file, q.fileIdx, q.fileName = files, fresh.fileIdx, fresh.fileName
	q.n, q.loaded = len(ids), true
	return nil
}

// ensureQuant loads the quantized copy if needed.
func (s *Store) ensureQuant(ctx context.Context) error {
	if s.quant.isLoaded() {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	return s.loadQuant(ctx)
}

// useQuant reports whether a search should use the quantized copy.
func (s *Store) useQuant() bool {
	return s.quantizeAbove >= 0 && s.quant.count() > s.quantizeAbove
}

// qscore is one shortlisted chunk and its estimated cosine.
type qscore struct {
	id int64
	v  float64
}

// qPlanes is the number of bit planes of the query magnitudes in the
// first-stage score (4 bits: levels 0..15).
const qPlanes = 4

// shortlist returns the quantized vector order for the query vector qv,
// over the slots in the scope of mask (nil: every slot):
// the vectors whose first-stage score is at least the largest score s*
// that at least size vectors reach (so ties at s* are all in, and the
// shortlist is a function of the index and the query), ordered by the int8
// cosine estimate (clamped to [0,1]) descending, then chunk id.
//
// The first-stage score is asymmetric: the query keeps its magnitudes,
// quantized to 4 bits (level(i) = round(15·|q_i| / max|q|)), and a stored
// vector only its sign bits, so score = Σ_i level(i)·[sign(x_i) =
// sign(q_i)], computed as Σ_b 2^b·popcount(agree ∧ plane_b) with one bit
// plane per level bit. It ranks like q·sign(x), the dot product of the
// query with the stored vector's signs. A plain hamming distance between
// the two sign vectors would weigh every dimension alike, and the builtin
// embedding of a short query is mostly exact zeros: on the scale benchmark
// that kept only ~65% of the exact top 10 in a shortlist of a third of a
// 12k-chunk index.
func (q *quantIndex) shortlist(qv []float32, size int, mask []bool) []qscore {
	w := q.words
	qp := make([]uint64, qplaneStride*w) // see qkernel.go
	var mx float32
	for _, x := range qv {
		mx = max(mx, float32(math.Abs(float64(x))))
	}
	for i, x := range qv {
		word := qp[qplaneStride*(i/64):]
		if x > 0 {
			word[0] |= 1 << (i % 64)
		}
		if mx == 0 {
			continue
		}
		lv := int(math.Round(float64(15 * float32(math.Abs(float64(x))) / mx)))
		for b := 0; b < qPlanes; b++ {
			if lv&(1<<b) != 0 {
				word[1+b] |= 1 << (i % 64)
			}
		}
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	n := len(q.ids)
	top := 15 * q.dims
	score := make([]uint16, n)
	parts := quantParts(n)
	hists := make([][]int, len(parts))
	var wg sync.WaitGroup
	for p, rg := range parts {
		hists[p] = make([]int, top+1)
		wg.Add(1)
		go func(lo, hi int, hist []int) {
			defer wg.Done()
			// Every slot is scored (a masked one too: skipping costs more
			// than scanning its few words); the histogram counts the
			// slots in scope.
			scanSigns(q.bits[lo*w:hi*w], w, qp, score[lo:hi])
			for s := lo; s < hi; s++ {
				if q.inScope(mask, s) {
					hist[score[s]]++
				}
			}
		}(rg[0], rg[1], hists[p])
	}
	wg.Wait()
	cut, acc := 0, 0
	for sc := top; sc >= 0; sc-- {
		for _, h := range hists {
			acc += h[sc]
		}
		if acc >= size {
			cut = sc
			break
		}
	}
	out := make([]qscore, 0, min(n, acc))
	for s := 0; s < n; s++ {
		if int(score[s]) >= cut && q.inScope(mask, s) {
			out = append(out, qscore{id: q.ids[s], v: float64(s)})
		}
	}
	// The int8 estimates of the shortlist (v holds the slot until here).
	iq := newQvec(qv)
	for _, rg := range quantParts(len(out)) {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			// v holds the slot: read the one prefetchAhead ahead before
			// overwriting.
			for i := lo; i < hi; i++ {
				next := -1
				if i+prefetchAhead < hi {
					next = int(out[i+prefetchAhead].v)
				}
				out[i].v = clamp01(q.estimateAhead(iq, int(out[i].v), next))
			}
		}(rg[0], rg[1])
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b qscore) int {
		if a.v != b.v {
			if a.v > b.v {
				return -1
			}
			return 1
		}
		if a.id < b.id {
			return -1
		}
		if a.id > b.id {
			return 1
		}
		return 0
	})
	return out
}

// quantParts splits n slots into ranges for parallel scanning: one per
// CPU (at most 4), none smaller than 16,384 slots.
func quantParts(n int) [][2]int {
	p := max(1, min(runtime.GOMAXPROCS(0), 4, n/16384))
	out := make([][2]int, p)
	for i := range out {
		out[i] = [2]int{i * n / p, (i + 1) * n / p}
	}
	return out
}

// qvec is a query vector in integer form for the int8 estimate: q[i] ≈
// unit·iv[i], |iv[i]| ≤ 32767 (relative error ~10⁻⁵, far below the int8
// codes' own).
type qvec struct {
	iv   []int16
	unit float64
}

func newQvec(qv []float32) qvec {
	var mx float32
	for _, x := range qv {
		mx = max(mx, float32(math.Abs(float64(x))))
	}
	out := qvec{iv: make([]int16, len(qv))}
	if mx == 0 {
		return out
	}
	out.unit = float64(mx) / 32767
	for i, x := range qv {
		out.iv[i] = int16(math.Round(float64(x) / out.unit))
	}
	return out
}

// estimate returns the estimated cosine scale·unit·Σ iv[i]·code[i] of
// slot s (dotInt8, qkernel.go). Callers hold mu.
func (q *quantIndex) estimate(qv qvec, s int) float64 {
	return q.estimateAhead(qv, s, -1)
}

// estimateAhead is estimate; it also prefetches the codes of slot next
// (unless negative), to be estimated soon.
func (q *quantIndex) estimateAhead(qv qvec, s, next int) float64 {
	var pf []int8
	if next >= 0 {
		pf = q.codes[next*q.dims : next*q.dims+q.dims]
	}
	return float64(q.scale[s]) * qv.unit * float64(dotInt8(q.codes[s*q.dims:s*q.dims+q.dims], qv.iv, pf))
}

// prefetchAhead is how many shortlisted vectors ahead estimateAhead
// fetches: enough to cover a wait on memory with the dot products between.
const prefetchAhead = 8

// scores returns the estimated cosine (clamped to [0,1]) of each id that
// has a stored vector.
func (q *quantIndex) scores(qv []float32, ids []int64) map[int64]float64 {
	iq := newQvec(qv)
	q.mu.RLock()
	defer q.mu.RUnlock()
	out := make(map[int64]float64, len(ids))
	for _, id := range ids {
		if s, ok := q.slot[id]; ok {
			out[id] = clamp01(q.estimate(iq, int(s)))
		}
	}
	return out
}

// VectorNeighbours returns the ids of the k chunks nearest to the
// L2-normalised vector vec by the vector leg alone, best first: with exact,
// sqlite-vec's float32 cosine scan; otherwise the quantized order (the
// shortlist ranked by the int8 estimate, loading the copy if needed),
// whatever the size of the index. It is how the recall of the quantized
// leg against exact search is measured (`atrium bench scale`). Errors:
// ErrClosed, ErrIncompatible (no usable vector leg), or a wrapped SQLite
// error.
func (s *Store) VectorNeighbours(ctx context.Context, vec []float32, k int, exact bool) ([]int64, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if !s.compt || len(vec) != s.meta.Dims {
		return nil, ErrIncompatible
	}
	if k <= 0 {
		return nil, nil
	}
	if !exact {
		if err := s.ensureQuant(ctx); err != nil {
			return nil, err
		}
		sl := s.quant.shortlist(vec, max(k, shortlistSize(s.quant.count())), nil)
		ids := make([]int64, 0, k)
		for _, e := range sl[:min(k, len(sl))] {
			ids = append(ids, e.id)
		}
		return ids, nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT rowid FROM vec_chunks WHERE embedding MATCH ? AND k = ? ORDER BY distance", encodeVector(vec), k)
	if err != nil {
		return nil, fmt.Errorf("vector neighbours: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("vector neighbours: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("vector neighbours: %w", err)
	}
	return ids, nil
}
