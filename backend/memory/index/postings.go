package index

import (
	"container/list"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	bindex "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
)

// Decoded posting lists (issue 3, "memory search at scale").
//
// Bleve's posting iterator decodes every posting it passes, frequencies
// and norms included, so a MaxScore probe into a frequent term's list
// (bm25.go) costs a walk of the list up to the probed chunk, not a skip.
// Bleve's segments are immutable, though: a posting list of one term in
// one segment never changes (deletions are a separate bitmap per snapshot).
// So the keyword leg decodes the lists it walks into plain arrays per
// segment — local document numbers ascending, term frequencies, norms —
// and keeps the long ones in an LRU cache bounded in bytes
// (Options.PostingsCacheBytes). A cursor over those arrays moves to the
// next posting with an index increment and skips with a galloping search,
// so the probes of non-essential terms cost O(log) per probe, and a query
// whose terms were seen before reads no Bleve posting at all.
//
// Document numbers: a snapshot's internal number of a chunk is the
// segment's offset (the sum of the sizes, deleted documents included, of
// the segments before it, in the snapshot's order) plus its number in the
// segment — the numbering scorch itself uses. A deleted document is
// skipped through the snapshot's deletion bitmap of the segment, checked
// only for the postings a cursor stops at.
//
// Positions are not decoded here: the phrase check (locations) still reads
// Bleve's term vectors for its few candidates.

// idField is the field in which Bleve indexes each document's id (the
// chunk id, docID).
const idField = "_id"

// The default postings cache (Options.PostingsCacheBytes 0) grows with
// the index: PostingsCachePerChunk bytes per indexed chunk, at least
// MinPostingsCacheBytes and at most MaxPostingsCacheBytes. On the scale
// benchmark's 1M chunks (docs/BENCHMARKS.md) the third-round p50 was
// 153 ms with 256 MiB and 112 ms with 1 GiB.
const (
	PostingsCachePerChunk = 1 << 10
	MinPostingsCacheBytes = 64 << 20
	MaxPostingsCacheBytes = 1 << 30
)

// defaultPostingsBudget returns the default cache size for an index of
// chunks chunks.
func defaultPostingsBudget(chunks uint64) int64 {
	return min(MaxPostingsCacheBytes, max(MinPostingsCacheBytes, int64(chunks)*PostingsCachePerChunk))
}

// postingsCacheMin is the least length of a posting list that is kept in
// the cache: shorter lists are decoded per search (cheap), so that rare
// terms do not crowd out the frequent ones.
const postingsCacheMin = 256

// postingBytes is the memory of one decoded posting.
const postingBytes = 4 + 4 + 4

// segPostings is the decoded posting list of one term in one segment.
type segPostings struct {
	docs []uint32  // local document numbers, ascending
	tf   []uint32  // term frequency
	norm []float32 // Bleve's field-length norm 1/√|d| (as stored, float32)
	// live memoises the number of postings not deleted in a snapshot
	// whose deletion bitmap of the segment is live.del (scorch replaces
	// that bitmap, never changes it, when more documents are deleted).
	live atomic.Pointer[liveCount]
}

type liveCount struct {
	del *roaring.Bitmap
	n   uint64
}

func (p *segPostings) bytes() int64 { return int64(len(p.docs)) * postingBytes }

// decodePostings reads the whole posting list of term from dict.
func decodePostings(dict segment.TermDictionary, term string) (*segPostings, error) {
	pl, err := dict.PostingsList([]byte(term), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("postings of %q: %w", term, err)
	}
	return decodeList(pl, term)
}

// decodeList reads the whole of posting list pl (of term).
func decodeList(pl segment.PostingsList, term string) (*segPostings, error) {
	out := &segPostings{}
	if pl == nil {
		return out, nil
	}
	n := int(pl.Count())
	out.docs, out.tf, out.norm = make([]uint32, 0, n), make([]uint32, 0, n), make([]float32, 0, n)
	it := pl.Iterator(true, true, false, nil)
	for {
		p, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("postings of %q: %w", term, err)
		}
		if p == nil {
			return out, nil
		}
		out.docs = append(out.docs, uint32(p.Number()))
		out.tf = append(out.tf, uint32(p.Frequency()))
		out.norm = append(out.norm, float32(p.Norm()))
	}
}

// postingsCache is the LRU cache of decoded posting lists, keyed by
// segment and term. Entries are immutable once stored; safe for concurrent
// use.
type postingsCache struct {
	budget atomic.Int64

	mu      sync.Mutex
	used    int64
	lru     *list.List // front: most recently used; values *pcEntry
	entries map[pcKey]*list.Element
	// live is the set of segments of the last snapshot seen; entries of a
	// segment that left it (merged away, replaced by its persisted copy)
	// are dropped when the set changes.
	live map[segment.Segment]bool
}

type pcKey struct {
	seg  segment.Segment
	term string
}

type pcEntry struct {
	key pcKey
	p   *segPostings
}

// newPostingsCache returns a cache of at most budget bytes of postings
// (budget < 0: no cache).
func newPostingsCache(budget int64) *postingsCache {
	c := &postingsCache{lru: list.New(), entries: map[pcKey]*list.Element{}}
	c.budget.Store(budget)
	return c
}

// get returns the decoded list of term in seg, from the cache or decoded
// now from seg's dictionary (and cached when long enough), or nil — the
// caller walks Bleve's own iterator — for a long list larger than a
// quarter of the cache (or with no cache).
//
// A long list is decoded and cached on its first request. Decoding costs
// about one walk of Bleve's iterator, which the search would otherwise
// make anyway (its Advance decodes every posting it passes); admitting a
// list only on its second request, as an earlier version did to keep
// one-off terms out of the cache, made the first search of every query
// slower (100k chunks, each query searched once: hybrid p50 14.6 against
// 13.0 ms, keyword-only 10.8 against 8.8 ms, docs/BENCHMARKS.md), and the
// LRU order drops one-off lists first anyway.
func (c *postingsCache) get(seg segment.Segment, dict func() (segment.TermDictionary, error), term string) (*segPostings, error) {
	k := pcKey{seg, term}
	c.mu.Lock()
	if e, ok := c.entries[k]; ok {
		c.lru.MoveToFront(e)
		p := e.Value.(*pcEntry).p
		c.mu.Unlock()
		return p, nil
	}
	c.mu.Unlock()
	d, err := dict()
	if err != nil {
		return nil, fmt.Errorf("postings of %q: %w", term, err)
	}
	pl, err := d.PostingsList([]byte(term), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("postings of %q: %w", term, err)
	}
	long := pl != nil && pl.Count() >= postingsCacheMin
	if long && int64(pl.Count())*postingBytes > c.budget.Load()/4 {
		// Too large to keep (or no cache): decoding it for one search
		// costs more than walking it.
		return nil, nil
	}
	p, err := decodeList(pl, term)
	if err != nil {
		return nil, err
	}
	if !long {
		return p, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok { // decoded concurrently by another search
		c.lru.MoveToFront(e)
		return e.Value.(*pcEntry).p, nil
	}
	c.entries[k] = c.lru.PushFront(&pcEntry{key: k, p: p})
	c.used += p.bytes()
	for c.used > c.budget.Load() && c.lru.Len() > 0 {
		c.evict(c.lru.Back())
	}
	return p, nil
}

// resize sets the byte bound (evicting down to it).
func (c *postingsCache) resize(budget int64) {
	if c.budget.Swap(budget) == budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.used > budget && c.lru.Len() > 0 {
		c.evict(c.lru.Back())
	}
}

func (c *postingsCache) evict(e *list.Element) {
	en := e.Value.(*pcEntry)
	c.lru.Remove(e)
	delete(c.entries, en.key)
	c.used -= en.p.bytes()
}

// retain drops the entries of segments not in segs (the current
// snapshot's), when that set changed since the last call.
func (c *postingsCache) retain(segs []segment.Segment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	same := c.live != nil && len(segs) == len(c.live)
	for _, s := range segs {
		same = same && c.live[s]
	}
	if same {
		return
	}
	c.live = make(map[segment.Segment]bool, len(segs))
	for _, s := range segs {
		c.live[s] = true
	}
	for e := c.lru.Front(); e != nil; {
		next := e.Next()
		if !c.live[e.Value.(*pcEntry).key.seg] {
			c.evict(e)
		}
		e = next
	}
}

// stats returns the entries and bytes held (for tests and the log).
func (c *postingsCache) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.used
}

// snapSegment is one segment of a keyword snapshot.
type snapSegment struct {
	seg     segment.Segment
	offset  uint64          // internal number of its document 0
	deleted *roaring.Bitmap // nil or empty: none deleted
}

// snapshotSegments returns the segments of a scorch snapshot with their
// offsets, or ok = false for a reader of another kind (the cursors then
// read Bleve's own posting iterators).
func snapshotSegments(r bindex.IndexReader) (segs []snapSegment, ok bool) {
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return nil, false
	}
	var off uint64
	for _, ss := range snap.Segments() {
		d := ss.Deleted()
		if d != nil && d.IsEmpty() {
			d = nil
		}
		segs = append(segs, snapSegment{seg: ss.Segment(), offset: off, deleted: d})
		off += ss.Segment().Count()
	}
	return segs, true
}

// arrayList is one term's decoded lists over a snapshot's segments.
type arrayList struct {
	segs  []snapSegment
	lists []*segPostings // by segment
}

// arrayCursor walks an arrayList in internal document order, skipping
// deleted postings; the scope is checked by the caller (cursor.take).
type arrayCursor struct {
	l      *arrayList
	si, pi int // segment and posting index
}

// valid reports whether the cursor is on a posting.
func (a *arrayCursor) valid() bool { return a.si < len(a.l.lists) }

// settle moves to the first live posting at or after the current place.
func (a *arrayCursor) settle() {
	for a.si < len(a.l.lists) {
		p, s := a.l.lists[a.si], a.l.segs[a.si]
		for a.pi < len(p.docs) {
			if s.deleted == nil || !s.deleted.Contains(p.docs[a.pi]) {
				return
			}
			a.pi++
		}
		a.si, a.pi = a.si+1, 0
	}
}

// advance moves past the current posting.
func (a *arrayCursor) advance() {
	a.pi++
	a.settle()
}

// seek moves to the first live posting with internal number ≥ target
// (never backwards): segments before target's are passed whole, and the
// posting is found by galloping from the current index.
func (a *arrayCursor) seek(target uint64) {
	for a.si+1 < len(a.l.segs) && a.l.segs[a.si+1].offset <= target {
		a.si, a.pi = a.si+1, 0
	}
	if a.si >= len(a.l.lists) {
		return
	}
	off := a.l.segs[a.si].offset
	if target > off {
		local := target - off
		docs := a.l.lists[a.si].docs
		if local > uint64(^uint32(0)) {
			a.pi = len(docs)
		} else {
			a.pi = gallop(docs, a.pi, uint32(local))
		}
	}
	a.settle()
}

// gallop returns the least i ≥ from with docs[i] ≥ x (len(docs) if none):
// exponential steps from from, then a binary search in the last step.
func gallop(docs []uint32, from int, x uint32) int {
	if from >= len(docs) || docs[from] >= x {
		return from
	}
	lo, step := from, 1 // docs[lo] < x
	hi := lo + step
	for hi < len(docs) && docs[hi] < x {
		lo = hi
		step *= 2
		hi = lo + step
	}
	hi = min(hi, len(docs)) // docs[hi] ≥ x, or hi = len(docs)
	for lo+1 < hi {
		mid := int(uint(lo+hi) >> 1)
		if docs[mid] < x {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// posting returns the current posting: internal number, frequency, norm.
func (a *arrayCursor) posting() (uint64, float64, float64) {
	p := a.l.lists[a.si]
	return a.l.segs[a.si].offset + uint64(p.docs[a.pi]), float64(p.tf[a.pi]), float64(p.norm[a.pi])
}

// openArrayList decodes (or takes from the cache) term's lists in every
// segment of segs; dict(i) returns the term dictionary of segment i. It
// returns nil when some segment's list is not decoded yet (see get).
func (c *postingsCache) openArrayList(segs []snapSegment, dict func(i int) (segment.TermDictionary, error), term string) (*arrayList, error) {
	l := &arrayList{segs: segs, lists: make([]*segPostings, len(segs))}
	whole := true
	for i, s := range segs {
		p, err := c.get(s.seg, func() (segment.TermDictionary, error) { return dict(i) }, term)
		if err != nil {
			return nil, err
		}
		l.lists[i] = p
		whole = whole && p != nil
	}
	if !whole {
		return nil, nil
	}
	return l, nil
}

// len returns the number of postings of l, deleted ones included.
func (l *arrayList) len() int {
	n := 0
	for _, p := range l.lists {
		n += len(p.docs)
	}
	return n
}

// liveCount returns the number of live postings of l.
func (l *arrayList) liveCount() uint64 {
	var n uint64
	for i, p := range l.lists {
		d := l.segs[i].deleted
		if d == nil {
			n += uint64(len(p.docs))
			continue
		}
		if m := p.live.Load(); m != nil && m.del == d {
			n += m.n
			continue
		}
		var k uint64
		for _, x := range p.docs {
			if !d.Contains(x) {
				k++
			}
		}
		p.live.Store(&liveCount{del: d, n: k})
		n += k
	}
	return n
}

// segmentsOf returns the segment values of segs (for postingsCache.retain).
func segmentsOf(segs []snapSegment) []segment.Segment {
	out := make([]segment.Segment, len(segs))
	for i, s := range segs {
		out[i] = s.seg
	}
	return slices.Clip(out)
}
