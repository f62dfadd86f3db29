package index

import (
	"context"
	"fmt"
	"slices"

	segment "github.com/blevesearch/scorch_segment_api/v2"
)

// Warm readies the Store for its first searches after Open: it loads the
// quantized copy of the vectors when searches use it (quant.go; otherwise
// the first quantized search loads it, ~2 s at 100,000 chunks), and
// decodes into the postings cache (postings.go) the posting lists of the
// terms held by the most chunks, most frequent first, until half the
// cache is used. Those are the lists whose decoding costs most and that
// the most queries share (function words, common characters), so a
// query's first search then decodes only its rarer terms.
//
// Searches are correct without it; it moves work from the first searches
// to here. It is safe to call concurrently with searches and writes (the
// copy is loaded under the write lock, as a search would). Errors: ctx's
// error when cancelled, ErrClosed after Close, or a wrapped Bleve error.
func (s *Store) Warm(ctx context.Context) error {
	if s.isClosed() {
		return ErrClosed
	}
	if s.useQuant() && s.compt && s.VectorFault() == nil {
		if err := s.ensureQuant(ctx); err != nil {
			if !isVectorError(ctx, err) {
				return err
			}
			s.markVectorFault(err) // searches go on by keywords
		}
	}
	return s.warmPostings(ctx)
}

// warmPostings decodes the longest posting lists of the text field of the
// current snapshot's segments into the cache, up to half its budget.
func (s *Store) warmPostings(ctx context.Context) error {
	ix, err := s.bl.Advanced()
	if err != nil {
		return fmt.Errorf("warm postings: %w", err)
	}
	r, err := ix.Reader()
	if err != nil {
		return fmt.Errorf("warm postings: %w", err)
	}
	defer r.Close()
	segs, ok := snapshotSegments(r)
	if !ok {
		return nil
	}
	s.postings.retain(segmentsOf(segs))
	budget := s.postings.budget.Load() / 2
	type long struct {
		seg  int
		term string
		n    uint64
	}
	var lists []long
	dicts := make([]segment.TermDictionary, len(segs))
	for i, sg := range segs {
		d, err := sg.seg.Dictionary(textField)
		if err != nil {
			return fmt.Errorf("warm postings: %w", err)
		}
		dicts[i] = d
		it := d.AutomatonIterator(nil, nil, nil)
		for k := 0; ; k++ {
			if k%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			e, err := it.Next()
			if err != nil {
				return fmt.Errorf("warm postings: %w", err)
			}
			if e == nil {
				break
			}
			if e.Count >= postingsCacheMin {
				lists = append(lists, long{i, e.Term, e.Count})
			}
		}
	}
	slices.SortFunc(lists, func(a, b long) int {
		if a.n != b.n {
			if a.n > b.n {
				return -1
			}
			return 1
		}
		return a.seg - b.seg
	})
	var used int64
	var kept []long
	for _, l := range lists {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.isClosed() {
			return ErrClosed
		}
		size := int64(l.n) * postingBytes
		if used+size > budget {
			continue // a shorter list may still fit
		}
		p, err := s.postings.get(segs[l.seg].seg, func() (segment.TermDictionary, error) { return dicts[l.seg], nil }, l.term)
		if err != nil {
			return fmt.Errorf("warm postings: %w", err)
		}
		if p != nil {
			used += size
			kept = append(kept, l)
		}
	}
	// Touch them again, least frequent first, so that the most frequent
	// lists end at the LRU's front and are the last evicted.
	for i := len(kept) - 1; i >= 0; i-- {
		l := kept[i]
		if _, err := s.postings.get(segs[l.seg].seg, func() (segment.TermDictionary, error) { return dicts[l.seg], nil }, l.term); err != nil {
			return fmt.Errorf("warm postings: %w", err)
		}
	}
	s.log.Debug("memory index warmed", "lists", len(lists), "bytes", used)
	return nil
}
