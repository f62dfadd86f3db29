package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// A full sync spends most of its CPU on work that writes nothing: reading
// and hashing a file, chunking it, embedding the chunks (builtin: hashed
// n-grams) and analysing them for the keyword index. The index writes are
// serial (one writer, SQLite's and Bleve's), but that work is not: prefetch
// does it for the files ahead of the writer on the other cores, in order,
// at most prefetchAhead files ahead. It is only a head start — indexPrepared
// checks everything it depends on again (a file that changed since is
// re-read, an unchanged one was never embedded), and any failure here is
// left for indexPrepared to meet and report in the usual way. Its reads
// (the file's record, the embedding cache) see the index as last committed
// and never wait for the writer, which holds its lock for the whole of a
// file's write. So that a chunk repeated in many files (a shared section,
// a template) is not embedded once per file, the first file of the sync to
// embed a chunk ahead claims it (claims); the other files leave it to the
// writer, which finds it in the open group's cache. Two workers may race
// for a chunk's claim, and then it is embedded twice at most.

// prepared is the write-free part of indexing one file, done ahead.
type prepared struct {
	stated  bool
	info    fs.FileInfo
	statErr error
	read    bool
	content []byte
	readErr error
	split   bool
	chunks  []chunk.Chunk
	vecs    map[string][]float32 // by chunk hash; nil when not embedded ahead
	cached  map[string][]float32 // by chunk hash, from the committed cache
	tokens  []*index.Tokens      // by chunk; nil when not analysed ahead
}

// The work prepared ahead of the writer is held in memory until it is
// written, and a chunk's token stream takes some 25 times its text. Two
// bounds keep it small: prefetchAhead files and prefetchBytes of file
// content (a file larger than that is prepared alone; each file counts as
// at least prefetchBytes/prefetchAhead). A hundred small files ahead keep
// the second core busy while the writer applies a keyword batch; with a
// window of 128 files and no byte bound, LongMemEval's 15 KB sessions took
// the peak RSS of a full index up by 130 MiB.
const (
	prefetchAhead = 128
	prefetchBytes = 256 << 10
)

// prefetch starts preparing files in order on Options.SyncWorkers
// goroutines and returns ahead: ahead(i) waits for files[i]'s preparation
// and returns it (nil when ctx ended first, or with one worker: then the
// writer does all the work itself). ahead must be called with i = 0, 1, 2
// … in order. The goroutines end when every file is prepared or ctx ends.
func (m *Manager) prefetch(ctx context.Context, st *index.Store, files []diskFile) (ahead func(i int) *prepared) {
	workers := m.opts.SyncWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if workers < 2 || len(files) < 2 {
		return func(int) *prepared { return nil }
	}
	out := make([]chan *prepared, len(files))
	for i := range out {
		out[i] = make(chan *prepared, 1)
	}
	// weight is a file's share of the byte budget, which also counts files
	// (prefetchBytes/prefetchAhead each at least).
	weight := func(i int) int64 {
		return min(max(files[i].size, prefetchBytes/prefetchAhead), prefetchBytes)
	}
	budget := semaphore.NewWeighted(prefetchBytes)
	jobs := make(chan int)
	go func() { // feeder: files not yet taken by ahead stay within the budget
		defer close(jobs)
		for i := range files {
			if err := budget.Acquire(ctx, weight(i)); err != nil {
				return
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var embedFailed atomic.Bool
	cl := &claims{hashes: map[uint64]struct{}{}}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				out[i] <- m.prepare(ctx, st, files[i].rel, &embedFailed, cl)
			}
		}()
	}
	return func(i int) *prepared {
		select {
		case p := <-out[i]:
			budget.Release(weight(i))
			return p
		case <-ctx.Done():
			return nil
		}
	}
}

// claims records the chunks embedded ahead in one sync, by the first 64
// bits of their hash (a collision only leaves a chunk to the writer).
type claims struct {
	mu     sync.Mutex
	hashes map[uint64]struct{}
}

// claim reports whether the chunk of hash (hex SHA-256) was not claimed
// before, and claims it.
func (c *claims) claim(hash string) bool {
	k, err := strconv.ParseUint(hash[:min(16, len(hash))], 16, 64)
	if err != nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.hashes[k]; ok {
		return false
	}
	c.hashes[k] = struct{}{}
	return true
}

// prepare does the write-free work of indexing rel: stat, read, and for a
// text file whose content differs from the indexed one (or has chunks
// without vectors), chunking, embedding (unless an embed failed before in
// this sync: indexPrepared then meets the failure itself; chunks claimed by
// another file are left to the writer) and analysis.
func (m *Manager) prepare(ctx context.Context, st *index.Store, rel string, embedFailed *atomic.Bool, cl *claims) *prepared {
	p := &prepared{stated: true}
	abs := filepath.Join(m.ws, filepath.FromSlash(rel))
	p.info, p.statErr = os.Lstat(abs)
	if p.statErr != nil || !p.info.Mode().IsRegular() || p.info.Size() > MaxFileBytes || !classify(rel).indexed {
		return p
	}
	p.read = true
	p.content, p.readErr = os.ReadFile(abs)
	if p.readErr != nil {
		return p
	}
	text, _, binary := textContent(p.content)
	if binary != "" {
		return p
	}
	sum := sha256.Sum256(p.content)
	hash := hex.EncodeToString(sum[:])
	m.mu.Lock()
	_, pending := m.pending[rel]
	m.mu.Unlock()
	if rec, ok, err := st.CommittedFile(ctx, rel); err != nil || (ok && rec.Hash == hash && !pending) {
		return p // unchanged (or unknown): nothing more to do ahead
	}
	p.split, p.chunks = true, chunk.Split(text, m.opts.Chunking)
	p.tokens = make([]*index.Tokens, len(p.chunks))
	for i, c := range p.chunks {
		p.tokens[i] = st.Analyze(c.Text)
	}
	if embedFailed.Load() || len(p.chunks) == 0 {
		return p
	}
	hashes := make([]string, len(p.chunks))
	for i, c := range p.chunks {
		hashes[i] = c.Hash
	}
	cached, err := st.CommittedEmbeddings(ctx, hashes)
	if err != nil {
		return p
	}
	p.cached = cached
	var texts, their []string
	seen := map[string]bool{}
	for _, c := range p.chunks {
		if _, ok := cached[c.Hash]; ok || seen[c.Hash] {
			continue
		}
		seen[c.Hash] = true
		if !cl.claim(c.Hash) {
			continue
		}
		texts, their = append(texts, c.Text), append(their, c.Hash)
	}
	p.vecs = map[string][]float32{}
	for len(texts) > 0 {
		n := batchLen(len(texts), func(i int) string { return texts[i] })
		vs, err := m.embedBatch(ctx, texts[:n])
		if err != nil {
			embedFailed.Store(true)
			return p // the vectors so far help; indexPrepared asks for the rest
		}
		for k, v := range vs {
			p.vecs[their[k]] = v
		}
		texts, their = texts[n:], their[n:]
	}
	return p
}
