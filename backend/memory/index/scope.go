package index

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"path"
	"slices"

	bindex "github.com/blevesearch/bleve_index_api"
)

// Search scope (SPEC §4.3, §5.1): results are filtered by the caller's read
// permission before ranking and cutting. A Query with a Scope sees only the
// chunks of the files Scope accepts, and everything the ranking uses is
// computed over those chunks alone: the BM25 statistics (number of chunks,
// document frequencies, average length), the coverage weights, both
// candidate pools and the copies listed in AlsoIn. A search of a scope
// therefore returns what the same search of an index holding only the
// scope's files would return (the property TestScopeEqualsReadableIndex
// checks), and no result, count or score depends on a file outside it.
// (Its running time still does: the keyword leg walks posting lists that
// include out-of-scope chunks.)

// fileStat is one files row as the scope needs it. As a committed write
// (Store.committedStat), gone marks a deleted file.
type fileStat struct {
	path   string
	chunks uint64
	tokens uint64
	gone   bool
}

// fileStats is an immutable snapshot of the files rows: every file with
// its chunk and token counts, and their sums.
type fileStats struct {
	files          []fileStat
	idx            map[string]int // path → index in files
	chunks, tokens uint64
}

// with returns a copy of fs with the committed writes ws applied (each
// sets a file's counts, or removes it). Applying a write twice changes
// nothing, so a write that the SQLite read already saw may be applied
// again (see Store.fileStats).
func (fs *fileStats) with(ws []fileStat) *fileStats {
	out := &fileStats{files: slices.Clone(fs.files), idx: maps.Clone(fs.idx), chunks: fs.chunks, tokens: fs.tokens}
	for _, w := range ws {
		if i, ok := out.idx[w.path]; ok {
			old := out.files[i]
			out.chunks -= old.chunks
			out.tokens -= old.tokens
			if w.gone {
				last := len(out.files) - 1
				out.files[i] = out.files[last]
				out.idx[out.files[i].path] = i
				out.files = out.files[:last]
				delete(out.idx, w.path)
				continue
			}
			out.files[i] = fileStat{path: w.path, chunks: w.chunks, tokens: w.tokens}
		} else if !w.gone {
			out.idx[w.path] = len(out.files)
			out.files = append(out.files, fileStat{path: w.path, chunks: w.chunks, tokens: w.tokens})
		} else {
			continue
		}
		out.chunks += w.chunks
		out.tokens += w.tokens
	}
	return out
}

// scope is the set of chunks one search may see, with their BM25
// statistics. all means every chunk of the index; otherwise bits is a set
// of Bleve internal document numbers of one index snapshot: the chunks in
// scope, or (invert) the chunks out of scope, whichever side has fewer.
type scope struct {
	all    bool
	bits   []uint64
	invert bool
	// n and tokens: chunks in scope and their analysed tokens (files.chunks
	// and files.tokens summed over the files in scope).
	n, tokens uint64
	// paths lists the files in scope (nil when all); accept is the Query's
	// predicate (nil when all).
	paths  []string
	accept func(string) bool
}

// has reports whether internal document number num is in scope.
func (sc *scope) has(num uint64) bool {
	if sc.all {
		return true
	}
	w := num / 64
	in := w < uint64(len(sc.bits)) && sc.bits[w]&(1<<(num%64)) != 0
	return in != sc.invert
}

// hasPath reports whether file path is in scope.
func (sc *scope) hasPath(path string) bool {
	return sc.all || sc.accept(path)
}

func (sc *scope) set(num uint64) {
	w := num / 64
	for uint64(len(sc.bits)) <= w {
		sc.bits = append(sc.bits, 0)
	}
	sc.bits[w] |= 1 << (num % 64)
}

// avgLen returns the mean analysed length of a chunk in scope, 0 when
// unknown (an index written before schema 2).
func (sc *scope) avgLen() float64 {
	if sc.n == 0 {
		return 0
	}
	return float64(sc.tokens) / float64(sc.n)
}

// fileStats returns the files rows with their chunk and token counts,
// cached until the next commit.
func (s *Store) fileStats(ctx context.Context) (*fileStats, error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if s.stats != nil {
		return s.stats, nil
	}
	// Read once; from then on every committed write updates the snapshot
	// (committedStat). A write that commits during this read waits for
	// statsMu to apply itself, after the read, which may or may not have
	// seen it: applying is idempotent.
	rows, err := s.db.QueryContext(ctx, "SELECT path, chunks, tokens FROM files")
	if err != nil {
		return nil, fmt.Errorf("file stats: %w", err)
	}
	defer rows.Close()
	out := &fileStats{idx: map[string]int{}}
	for rows.Next() {
		var f fileStat
		if err := rows.Scan(&f.path, &f.chunks, &f.tokens); err != nil {
			return nil, fmt.Errorf("file stats: %w", err)
		}
		out.idx[f.path] = len(out.files)
		out.files = append(out.files, f)
		out.chunks += f.chunks
		out.tokens += f.tokens
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("file stats: %w", err)
	}
	s.stats = out
	s.sizePostings(out)
	return out, nil
}

// sizePostings follows the default postings cache size to the index size.
// Callers hold statsMu.
func (s *Store) sizePostings(fs *fileStats) {
	if s.opts.PostingsCacheBytes == 0 {
		s.postings.resize(defaultPostingsBudget(fs.chunks))
	}
}

// committedStat records a file's counts once its write is committed (gone
// for a deletion): into the statistics at once outside bulk mode, into the
// group's pending writes in bulk mode (applied at the group's commit,
// dropped by its rollback). Callers hold wmu.
func (s *Store) committedStat(w fileStat) {
	if s.btx != nil {
		s.spend = append(s.spend, w)
		return
	}
	s.applyStats([]fileStat{w})
}

// applyStats applies committed writes to the loaded statistics (nothing
// to do before the first load: it reads them from SQLite).
func (s *Store) applyStats(ws []fileStat) {
	if len(ws) == 0 {
		return
	}
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if s.stats != nil {
		s.stats = s.stats.with(ws)
		s.sizePostings(s.stats)
	}
}

// newScope returns the scope of a search over reader r: every chunk when
// accept is nil or accepts every file, else the chunks of the files accept
// takes, marked in a bitset from posting lists (or the other files', when
// those hold fewer chunks): one list per folder whose files are all on the
// marked side (the dir term; a role's folder is usually all in or all
// out), else one per file (the path term).
func (s *Store) newScope(ctx context.Context, r bindex.IndexReader, accept func(string) bool) (*scope, error) {
	stats, err := s.fileStats(ctx)
	if err != nil {
		return nil, err
	}
	sc := &scope{accept: accept}
	if accept == nil {
		sc.all, sc.accept, sc.n, sc.tokens = true, nil, stats.chunks, stats.tokens
		return sc, nil
	}
	var in, out []string
	var nIn, nOut uint64
	for _, f := range stats.files {
		if accept == nil || accept(f.path) {
			in = append(in, f.path)
			nIn += f.chunks
			sc.n += f.chunks
			sc.tokens += f.tokens
		} else {
			out = append(out, f.path)
			nOut += f.chunks
		}
	}
	if len(out) == 0 {
		sc.all, sc.accept = true, nil
		return sc, nil
	}
	sc.paths = in
	mark := in
	if nOut < nIn {
		mark, sc.invert = out, true
	}
	// Folders wholly on the marked side are marked by their dir term.
	marked := make(map[string]bool, len(mark))
	for _, p := range mark {
		marked[p] = true
	}
	whole := map[string]bool{}
	for _, f := range stats.files {
		d := path.Dir(f.path)
		if v, seen := whole[d]; !seen || v {
			whole[d] = marked[f.path]
		}
	}
	type list struct{ term, field string }
	var lists []list
	for d, all := range whole {
		if all {
			lists = append(lists, list{d, dirField})
		}
	}
	for _, p := range mark {
		if !whole[path.Dir(p)] {
			lists = append(lists, list{p, pathField})
		}
	}
	var buf bindex.TermFieldDoc
	for _, l := range lists {
		tfr, err := r.TermFieldReader(ctx, []byte(l.term), l.field, false, false, false)
		if err != nil {
			return nil, fmt.Errorf("search scope: %w", err)
		}
		for {
			d, err := tfr.Next(&buf)
			if err != nil {
				_ = tfr.Close()
				return nil, fmt.Errorf("search scope: %w", err)
			}
			if d == nil {
				break
			}
			sc.set(binary.BigEndian.Uint64(d.ID))
		}
		if err := tfr.Close(); err != nil {
			return nil, fmt.Errorf("search scope: %w", err)
		}
	}
	return sc, nil
}

// FilesOutside returns how many indexed files accept refuses (the files a
// scoped search leaves out), for the audit log.
func (s *Store) FilesOutside(ctx context.Context, accept func(string) bool) (int, error) {
	if accept == nil {
		return 0, nil
	}
	stats, err := s.fileStats(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range stats.files {
		if !accept(f.path) {
			n++
		}
	}
	return n, nil
}
