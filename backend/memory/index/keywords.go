package index

import (
	"errors"
	"fmt"
	"path/filepath"
)

// The keyword index's health: the opposite of vectors.go. A Bleve index
// that opens but fails when its postings are read (a damaged segment file)
// makes a search fail; the Store then answers that search, and every later
// one, by the vector leg alone (scored by the cosine, as a vector-only
// search) and records a keyword fault ([Store.KeywordFault]). The caller
// rebuilds the keyword index from SQLite: it closes the Store, moves the
// Bleve directory aside ([DiscardKeywords]) and opens the Store again,
// which refills a fresh Bleve index from the chunks table. Damage that
// Open itself meets (a missing segment, an unreadable index) was already
// repaired that way by Open.

// ErrKeywordsDamaged is wrapped by the error [Store.KeywordFault] returns.
var ErrKeywordsDamaged = errors.New("index: keyword index damaged")

// KeywordFault returns nil while the keyword index answers, else why it
// does not (wrapping ErrKeywordsDamaged).
func (s *Store) KeywordFault() error {
	if b := s.vec.kwFault.Load(); b != nil {
		return b.err
	}
	return nil
}

// markKeywordFault records a keyword fault (the first one wins) and tells
// Options.OnKeywordFault once.
func (s *Store) markKeywordFault(err error) {
	b := &faultBox{err: fmt.Errorf("%w: %v", ErrKeywordsDamaged, err)}
	if !s.vec.kwFault.CompareAndSwap(nil, b) {
		return
	}
	s.log.Warn("memory keyword index damaged; searching by vectors until it is rebuilt", "err", err)
	if s.opts.OnKeywordFault != nil {
		s.opts.OnKeywordFault(b.err)
	}
}

// DiscardKeywords moves the Bleve index of the index directory dir aside
// ("bleve.corrupt-<unix ns>"), so that the next [Open] rebuilds it from
// SQLite. The Store of dir must be closed.
func DiscardKeywords(dir string) error {
	if err := moveAside(filepath.Join(dir, BleveName), false); err != nil {
		return fmt.Errorf("discard keyword index: %w", err)
	}
	return nil
}
