package index

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	segment "github.com/blevesearch/scorch_segment_api/v2"

	"github.com/atrium-dev/atrium/backend/memory/embed"
)

// posting is one posting as a cursor reports it.
type posting struct {
	num      uint64
	tf, norm float64
}

// walkBleve lists term's postings in scope through Bleve's own iterator.
func walkBleve(t *testing.T, kl *kwLeg, term int) []posting {
	t.Helper()
	segs := kl.segs
	kl.segs = nil // cursorFor falls back to Bleve's TermFieldReader
	defer func() { kl.segs = segs }()
	c, err := kl.cursorFor(context.Background(), term, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if c.tfr == nil {
		t.Fatal("cursor without segments did not use Bleve's iterator")
	}
	return drain(t, c)
}

// drain lists the postings of a fresh cursor.
func drain(t *testing.T, c *cursor) []posting {
	t.Helper()
	var out []posting
	var err error
	for err = c.next(); err == nil && !c.done; err = c.next() {
		out = append(out, posting{c.doc, c.tf, c.norm})
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestArrayCursorsEqualBleveIterators checks the decoded posting arrays
// (postings.go) against Bleve's posting iterator on an index of many
// segments with deleted documents (files rewritten and removed), in and
// out of a scope, with and without the cache: every term's postings
// (document number, frequency, norm) are equal, seeking to any target
// lands on the first posting at or after it, and the chunk ids map to the
// same document numbers as Bleve's InternalID.
func TestArrayCursorsEqualBleveIterators(t *testing.T) {
	ctx := context.Background()
	for _, cacheBytes := range []int64{0, 64 << 10} { // the default, and a small cache that evicts
		t.Run(fmt.Sprintf("cache=%d", cacheBytes), func(t *testing.T) {
			emb := embed.NewBuiltin(embed.BuiltinOptions{})
			s := mustOpen(t, Options{Dir: t.TempDir(), Provider: emb.Provider(), Model: emb.Model(), Dims: emb.Dims(), Chunking: "test", PostingsCacheBytes: cacheBytes})
			b := builtinStore{s, emb}
			fillZipf(t, b, 400) // one Bleve batch per file: many segments
			rng := rand.New(rand.NewSource(3))
			for i := 0; i < 60; i++ { // deletions inside existing segments
				f := rng.Intn(400)
				dir := "memory/a/"
				if f%3 == 0 {
					dir = "memory/b/"
				}
				path := fmt.Sprintf("%s%03d.md", dir, f)
				if i%2 == 0 {
					if err := s.DeleteFile(ctx, path); err != nil {
						t.Fatal(err)
					}
				} else {
					b.put(t, path, "the release rollback 发布 回滚 rewritten", "cache latency 缓存 延迟")
				}
			}
			scopes := map[string]func(string) bool{
				"all":      nil,
				"memory/a": func(p string) bool { return len(p) > 9 && p[:9] == "memory/a/" },
			}
			for name, accept := range scopes {
				// Bleve merges segments in the background (and drops the
				// deleted documents when it does): rewrite a file just before
				// taking the snapshot, until one has several segments and
				// deletions.
				var kl *kwLeg
				for try := 0; ; try++ {
					b.put(t, fmt.Sprintf("memory/a/%03d.md", 1+3*(try%100)), fmt.Sprintf("the release rollback 发布 回滚 take %d", try), "cache latency 缓存 延迟")
					kl = keywordLeg(t, s, "the release rollback cache latency 发布 回滚 缓存 数据库 sourdough", accept)
					if kl.segs == nil {
						t.Fatal("the snapshot is not scorch's: the array cursors were not used")
					}
					deleted := 0
					for _, sg := range kl.segs {
						if sg.deleted != nil {
							deleted += int(sg.deleted.GetCardinality())
						}
					}
					if len(kl.segs) >= 2 && deleted > 0 {
						break
					}
					if try == 200 {
						t.Fatalf("%d segments, %d deleted documents after %d rewrites: the test needs several and some", len(kl.segs), deleted, try)
					}
				}
				for term := range kl.q.terms {
					want := walkBleve(t, kl, term)
					c, err := kl.cursorFor(ctx, term, true, false)
					if err != nil {
						t.Fatal(err)
					}
					if c.arr == nil {
						t.Fatal("array cursor expected")
					}
					got := drain(t, c)
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("%s %q: array postings\n%v\nBleve's\n%v", name, kl.q.terms[term], got, want)
					}
					df, err := kl.docFreq(ctx, kl.q.terms[term])
					if err != nil || df != uint64(len(want)) {
						t.Fatalf("%s %q: docFreq %d, %v; Bleve's iterator has %d", name, kl.q.terms[term], df, err, len(want))
					}
					// Seeks to random ascending targets land where a linear
					// scan of Bleve's postings says.
					c, err = kl.cursorFor(ctx, term, true, false)
					if err != nil {
						t.Fatal(err)
					}
					if err := c.next(); err != nil {
						t.Fatal(err)
					}
					var target uint64
					for step := 0; step < 40 && !c.done; step++ {
						target += uint64(rng.Intn(40))
						if err := c.seek(target); err != nil {
							t.Fatal(err)
						}
						i := 0
						for i < len(want) && want[i].num < max(target, c.doc) {
							i++
						}
						if i == len(want) {
							if !c.done {
								t.Fatalf("%s %q: seek %d found %d, Bleve has none at or after", name, kl.q.terms[term], target, c.doc)
							}
							break
						}
						if c.done || c.doc != want[i].num || c.tf != want[i].tf || c.norm != want[i].norm {
							t.Fatalf("%s %q: seek %d gave %d (done %v), want %+v", name, kl.q.terms[term], target, c.doc, c.done, want[i])
						}
					}
				}
				var ids []int64
				rows, err := s.db.Query("SELECT id FROM chunks ORDER BY id")
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, id)
				}
				rows.Close()
				ids = append(ids, 1<<40) // no such chunk
				got, err := kl.docNums(ids)
				if err != nil {
					t.Fatal(err)
				}
				segs := kl.segs
				kl.segs = nil
				want, err := kl.docNums(ids)
				kl.segs = segs
				if err != nil {
					t.Fatal(err)
				}
				if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: docNums %d entries, Bleve's InternalID %d (or they differ)", name, len(got), len(want))
				}
				// Scoring and presence of the scope's chunks by intersecting
				// the arrays (visitArrays) equal the cursor walk over Bleve's
				// iterators, to the last bit of each score.
				var nums []uint64
				for _, num := range got {
					nums = append(nums, num)
				}
				for _, freq := range []bool{true, false} {
					arr, ok, err := kl.visitArrays(slices.Sorted(slices.Values(nums)), freq)
					if err != nil || !ok {
						t.Fatalf("%s: visitArrays: ok %v, %v", name, ok, err)
					}
					kl.segs = nil
					walked, err := kl.visit(ctx, nums, freq)
					kl.segs = segs
					if err != nil {
						t.Fatal(err)
					}
					if len(arr) == 0 || fmt.Sprint(arr) != fmt.Sprint(walked) {
						t.Fatalf("%s freq=%v: visitArrays\n%v\nBleve's iterators\n%v", name, freq, arr, walked)
					}
				}
			}
			if _, used := s.postings.stats(); cacheBytes > 0 && used > cacheBytes {
				t.Fatalf("cache of %d bytes holds %d", cacheBytes, used)
			}
		})
	}
}

// TestPostingsCacheBudget checks the LRU's byte bound and that retain drops
// the entries of segments no longer in the snapshot.
func TestPostingsCacheBudget(t *testing.T) {
	emb := embed.NewBuiltin(embed.BuiltinOptions{})
	s := mustOpen(t, Options{Dir: t.TempDir(), Provider: emb.Provider(), Model: emb.Model(), Dims: emb.Dims(), Chunking: "test"})
	b := builtinStore{s, emb}
	var texts []string
	for i := 0; i < 600; i++ {
		texts = append(texts, fmt.Sprintf("alpha beta gamma delta epsilon line %d", i))
	}
	b.put(t, "memory/big.md", texts...)
	kl := keywordLeg(t, s, "alpha beta gamma delta", nil)
	var big segment.Segment
	for _, sg := range kl.segs {
		if sg.seg.Count() >= postingsCacheMin {
			big = sg.seg
		}
	}
	if big == nil {
		t.Skip("no segment holds enough postings to be cached")
	}
	terms := []string{"alpha", "beta", "gamma", "delta", "epsilon", "line"}
	one := int64(0)
	for _, term := range terms {
		d, err := big.Dictionary(textField)
		if err != nil {
			t.Fatal(err)
		}
		p, err := decodePostings(d, term)
		if err != nil {
			t.Fatal(err)
		}
		one = max(one, p.bytes())
	}
	budget := 4*one + one/2 // room for four lists; a list may take a quarter of it
	c := newPostingsCache(budget)
	for _, term := range terms {
		if _, err := c.get(big, func() (segment.TermDictionary, error) { return big.Dictionary(textField) }, term); err != nil {
			t.Fatal(err)
		}
	}
	n, used := c.stats()
	if n != 4 || used > budget {
		t.Fatalf("cache holds %d lists, %d bytes; want 4 within %d", n, used, budget)
	}
	if _, ok := c.entries[pcKey{big, "line"}]; !ok {
		t.Fatal("the most recent list was evicted")
	}
	if _, ok := c.entries[pcKey{big, "alpha"}]; ok {
		t.Fatal("the least recent list was kept")
	}
	// A list over a quarter of the cache is never decoded: Bleve's
	// iterator walks it.
	small := newPostingsCache(3 * one)
	if p, err := small.get(big, func() (segment.TermDictionary, error) { return big.Dictionary(textField) }, "alpha"); err != nil || p != nil {
		t.Fatalf("a list over a quarter of the cache: %v, %v", p, err)
	}
	c.retain(nil)
	if n, used := c.stats(); n != 0 || used != 0 {
		t.Fatalf("after the segment left the snapshot: %d lists, %d bytes", n, used)
	}
}

// TestPostingsAdmission: a long list is decoded and cached on its first
// request; short lists are decoded, never cached; and a search gives the
// same hits whether its lists are walked from the arrays or, with no room
// in the cache, with Bleve's iterator.
func TestPostingsAdmission(t *testing.T) {
	emb := embed.NewBuiltin(embed.BuiltinOptions{})
	s := mustOpen(t, Options{Dir: t.TempDir(), Provider: emb.Provider(), Model: emb.Model(), Dims: emb.Dims(), Chunking: "test"})
	b := builtinStore{s, emb}
	var texts []string
	for i := 0; i < 600; i++ {
		texts = append(texts, fmt.Sprintf("alpha common line %d", i))
	}
	texts = append(texts, "rare zebrafalcon")
	b.put(t, "memory/big.md", texts...)
	kl := keywordLeg(t, s, "alpha zebrafalcon", nil)
	seg := kl.segs[len(kl.segs)-1].seg
	dict := func() (segment.TermDictionary, error) { return seg.Dictionary(textField) }
	c := newPostingsCache(MinPostingsCacheBytes)
	if p, err := c.get(seg, dict, "alpha"); err != nil || p == nil || len(p.docs) < postingsCacheMin {
		t.Fatalf("first request of a long list: %v, %v", p, err)
	}
	if n, _ := c.stats(); n != 1 {
		t.Fatalf("%d lists cached after the first request, want 1", n)
	}
	if p, err := c.get(seg, dict, "zebrafalcon"); err != nil || p == nil || len(p.docs) != 1 {
		t.Fatalf("short list: %v, %v", p, err)
	}
	if n, _ := c.stats(); n != 1 {
		t.Fatalf("a short list was cached (%d lists)", n)
	}
	arrays := b.search(t, "alpha common zebrafalcon", 5, -1)
	s.postings.resize(0) // no room: every long list is walked with Bleve's iterator
	walked := b.search(t, "alpha common zebrafalcon", 5, -1)
	if len(arrays) == 0 || fmt.Sprint(arrays) != fmt.Sprint(walked) {
		t.Fatalf("array-walked and Bleve-walked searches differ:\n%v\n%v", arrays, walked)
	}
}
