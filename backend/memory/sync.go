package memory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// Embedding batches are sized by the chunk token estimate (SPEC §4.2).
const (
	maxBatchTokens = 8192
	maxBatchTexts  = 64
	embedAttempts  = 3
	embedBackoff   = 250 * time.Millisecond
)

type indexResult int

const (
	resUnchanged indexResult = iota
	resChanged
	resDeleted
	resSkipped
)

// Sync runs one full scan: files whose size or mtime differ from the index
// are read and hashed, changed ones are re-chunked and re-embedded (unchanged
// chunks come from the embedding cache), deleted ones are dropped. If the
// index was built with another embedder or chunking, Sync rebuilds it into a
// new index and swaps it in. Unreadable, binary or non-UTF-8 files are
// skipped with a warning and reported in Status.LastError; they do not fail
// the sync. The error is non-nil only when the scan itself failed.
func (m *Manager) Sync(ctx context.Context) error {
	if m.closed.Load() {
		return ErrClosed
	}
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if m.closed.Load() {
		return ErrClosed
	}
	if !m.store.Compatible() {
		return m.rebuildLocked(ctx)
	}
	return m.scanLocked(ctx, m.store)
}

// rebuildLocked builds a fresh index in the staging directory and swaps it in.
func (m *Manager) rebuildLocked(ctx context.Context) error {
	m.log.Info("memory index rebuild started")
	staging, err := index.OpenStaging(m.ixOpts)
	if err != nil {
		m.finishWithError(fmt.Sprintf("rebuild index: %v", err))
		return fmt.Errorf("rebuild index: %w", err)
	}
	serr := m.scanLocked(ctx, staging)
	if err := staging.Close(); err != nil && serr == nil {
		serr = err
	}
	if serr != nil {
		m.mu.Lock()
		m.state = StateKeywordOnly // the old index still answers keyword queries
		m.mu.Unlock()
		return fmt.Errorf("rebuild index: %w", serr)
	}
	m.storeMu.Lock()
	defer m.storeMu.Unlock()
	if err := m.store.Close(); err != nil {
		m.log.Warn("memory index close before swap failed", "err", err)
	}
	perr := index.Promote(m.ixOpts.Dir)
	ns, oerr := index.Open(m.ixOpts)
	if oerr != nil {
		m.finishWithError(fmt.Sprintf("reopen index after rebuild: %v", oerr))
		return fmt.Errorf("rebuild index: %w", oerr)
	}
	m.store = ns
	if perr != nil {
		m.finishWithError(fmt.Sprintf("swap rebuilt index: %v", perr))
		return fmt.Errorf("rebuild index: %w", perr)
	}
	files, chunks, _ := ns.Counts(ctx)
	m.mu.Lock()
	m.files, m.chunks = files, chunks
	m.mu.Unlock()
	m.log.Info("memory index rebuild finished", "files", files, "chunks", chunks)
	return nil
}

func (m *Manager) finishWithError(msg string) {
	m.mu.Lock()
	m.state = StateError
	m.syncErr = msg
	m.progress = nil
	m.mu.Unlock()
}

// scanLocked is one full scan into st. Callers hold writeMu.
func (m *Manager) scanLocked(ctx context.Context, st *index.Store) error {
	start := time.Now()
	m.mu.Lock()
	m.state = StateIndexing
	dirtyAtStart := make([]string, 0, len(m.dirty))
	for p := range m.dirty {
		dirtyAtStart = append(dirtyAtStart, p)
	}
	m.mu.Unlock()

	disk, err := m.listFiles()
	if err != nil {
		m.finishWithError(err.Error())
		return err
	}
	known, err := st.Files(ctx)
	if err != nil {
		m.finishWithError(err.Error())
		return err
	}
	knownBy := make(map[string]index.FileRecord, len(known))
	for _, r := range known {
		knownBy[r.Path] = r
	}
	onDisk := make(map[string]bool, len(disk))
	var todo []diskFile
	m.mu.Lock()
	for _, f := range disk {
		onDisk[f.rel] = true
		if r, ok := knownBy[f.rel]; ok && r.Size == f.size && r.MTime == f.mtime {
			continue
		}
		if sk, ok := m.skipped[f.rel]; ok && sk.size == f.size && sk.mtime == f.mtime {
			continue
		}
		todo = append(todo, f)
	}
	for p := range m.skipped {
		if !onDisk[p] {
			delete(m.skipped, p)
		}
	}
	m.mu.Unlock()

	prog := &Progress{Total: len(todo)}
	m.setProgress(prog)
	var changed, deleted, errs []string
	var stop error
	// A full sync writes in groups of files: one SQLite transaction and one
	// Bleve batch (one keyword segment) per group instead of per file.
	// EndBulk below flushes the last group before the sync reports anything.
	st.BeginBulk()
	for i, f := range todo {
		if err := ctx.Err(); err != nil {
			stop = err
			break
		}
		if m.closed.Load() {
			stop = ErrClosed
			break
		}
		res, err := m.indexOne(ctx, st, f.rel)
		switch res {
		case resChanged:
			changed = append(changed, f.rel)
		case resDeleted:
			deleted = append(deleted, f.rel)
		}
		if err != nil {
			if ctx.Err() != nil {
				stop = ctx.Err()
				break
			}
			errs = append(errs, f.rel+": "+err.Error())
			m.log.Error("memory file index failed", "path", f.rel, "err", err)
		}
		m.setProgress(&Progress{Done: i + 1, Total: len(todo)})
	}
	if stop == nil {
		for _, r := range known {
			if onDisk[r.Path] {
				continue
			}
			if err := st.DeleteFile(ctx, r.Path); err != nil {
				errs = append(errs, r.Path+": "+err.Error())
				m.log.Error("memory file delete failed", "path", r.Path, "err", err)
				continue
			}
			deleted = append(deleted, r.Path)
		}
	}
	// Not cancelled with ctx: a cancelled sync still keeps the files it has
	// written so far (commit and apply the open group).
	if err := st.EndBulk(context.WithoutCancel(ctx)); err != nil {
		errs = append(errs, err.Error())
		m.log.Error("memory keyword index batch failed", "err", err)
	}

	files, chunks, cerr := st.Counts(ctx)
	m.mu.Lock()
	m.progress = nil
	if cerr == nil {
		m.files, m.chunks = files, chunks
	}
	m.layout = detectLayout(m.ws)
	switch {
	case stop != nil:
		if m.chunks > 0 {
			m.state = StateReady
		} else {
			m.state = StateIndexing
		}
	case len(errs) > 0:
		m.state = StateError
		m.syncErr = summarize(errs)
	case cerr != nil:
		m.state = StateError
		m.syncErr = cerr.Error()
	case m.files > 0 && m.chunks == 0:
		m.state = StateError
		m.syncErr = fmt.Sprintf("no chunks indexed although %d memory files exist", m.files)
	default:
		m.state = StateReady
		m.syncErr = ""
	}
	if stop == nil {
		m.lastSync = time.Now().UnixMilli()
		for _, p := range dirtyAtStart {
			delete(m.dirty, p)
		}
	}
	m.mu.Unlock()
	m.log.Info("memory sync finished", "files", files, "chunks", chunks, "changed", len(changed),
		"deleted", len(deleted), "errors", len(errs), "duration_ms", time.Since(start).Milliseconds())
	m.fire(changed, "index")
	m.fire(deleted, "delete")
	if stop != nil {
		return fmt.Errorf("sync: %w", stop)
	}
	return nil
}

func summarize(errs []string) string {
	if len(errs) <= 3 {
		return strings.Join(errs, "; ")
	}
	return strings.Join(errs[:3], "; ") + fmt.Sprintf("; and %d more", len(errs)-3)
}

// indexOne brings one path's index entry in line with the disk: re-index if
// its content hash changed, drop it if it is gone, skip (with a recorded
// reason) if it is not valid UTF-8 text. Callers hold writeMu.
func (m *Manager) indexOne(ctx context.Context, st *index.Store, rel string) (indexResult, error) {
	abs := filepath.Join(m.ws, filepath.FromSlash(rel))
	dropIfKnown := func() (indexResult, error) {
		m.mu.Lock()
		delete(m.skipped, rel)
		m.mu.Unlock()
		if _, ok, err := st.File(ctx, rel); err != nil {
			return resUnchanged, err
		} else if !ok {
			return resUnchanged, nil
		}
		if err := st.DeleteFile(ctx, rel); err != nil {
			return resUnchanged, err
		}
		return resDeleted, nil
	}
	if !classify(rel).indexed {
		return dropIfKnown()
	}
	li, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return dropIfKnown()
	}
	if err != nil {
		return m.skip(ctx, st, rel, 0, 0, fmt.Sprintf("unreadable: %v", err))
	}
	readPath := abs
	info := li
	if li.Mode()&fs.ModeSymlink != 0 {
		real, ri, err := m.resolveInside(abs)
		if err != nil {
			m.log.Debug("memory file symlink skipped", "path", rel, "err", err)
			return dropIfKnown()
		}
		readPath, info = real, ri
	}
	if !info.Mode().IsRegular() {
		return dropIfKnown()
	}
	size, mtime := info.Size(), info.ModTime().UnixMilli()
	if size > MaxFileBytes {
		return m.skip(ctx, st, rel, size, mtime, fmt.Sprintf("file too large (%d bytes, limit %d)", size, MaxFileBytes))
	}
	content, err := os.ReadFile(readPath)
	if errors.Is(err, fs.ErrNotExist) {
		return dropIfKnown() // deleted while we were looking at it
	}
	if err != nil {
		return m.skip(ctx, st, rel, size, mtime, fmt.Sprintf("unreadable: %v", err))
	}
	if i := bytes.IndexByte(content, 0); i >= 0 {
		return m.skip(ctx, st, rel, size, mtime, fmt.Sprintf("binary content (NUL byte at offset %d)", i))
	}
	if !utf8.Valid(content) {
		return m.skip(ctx, st, rel, size, mtime, "not valid UTF-8")
	}
	sum := sha256.Sum256(content)
	hash := hex.EncodeToString(sum[:])
	m.mu.Lock()
	delete(m.skipped, rel)
	m.mu.Unlock()

	rec, ok, err := st.File(ctx, rel)
	if err != nil {
		return resUnchanged, err
	}
	if ok && rec.Hash == hash {
		if rec.MTime != mtime || rec.Size != int64(len(content)) {
			if err := st.TouchFile(ctx, rel, mtime, int64(len(content))); err != nil {
				return resUnchanged, err
			}
		}
		return resUnchanged, nil
	}
	chunks := chunk.Split(string(content), m.opts.Chunking)
	vecs, err := m.embedChunks(ctx, st, chunks)
	if err != nil {
		return resUnchanged, err
	}
	k := classify(rel)
	recs := make([]index.ChunkRecord, len(chunks))
	for i, c := range chunks {
		recs[i] = index.ChunkRecord{StartLine: c.StartLine, EndLine: c.EndLine, Text: c.Text, Hash: c.Hash, Vector: vecs[i]}
	}
	fr := index.FileRecord{Path: rel, Hash: hash, MTime: mtime, Size: int64(len(content)), Layer: k.layer, Role: k.role}
	if err := st.PutFile(ctx, fr, recs); err != nil {
		return resUnchanged, err
	}
	return resChanged, nil
}

// skip records a file that cannot be indexed (logged once per size/mtime)
// and drops any stale index entry for it.
func (m *Manager) skip(ctx context.Context, st *index.Store, rel string, size, mtime int64, reason string) (indexResult, error) {
	m.mu.Lock()
	prev, had := m.skipped[rel]
	m.skipped[rel] = skipEntry{size: size, mtime: mtime, reason: reason}
	m.mu.Unlock()
	if !had || prev.size != size || prev.mtime != mtime {
		m.log.Warn("memory file skipped", "path", rel, "reason", reason)
	}
	if _, ok, err := st.File(ctx, rel); err == nil && ok {
		if err := st.DeleteFile(ctx, rel); err != nil {
			return resSkipped, err
		}
	}
	return resSkipped, nil
}

// embedChunks returns one vector per chunk, from the cache where possible;
// the rest are embedded in batches sized by the token estimate, with retries.
func (m *Manager) embedChunks(ctx context.Context, st *index.Store, chunks []chunk.Chunk) ([][]float32, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	hashes := make([]string, len(chunks))
	for i, c := range chunks {
		hashes[i] = c.Hash
	}
	cached, err := st.CachedEmbeddings(ctx, hashes)
	if err != nil {
		return nil, err
	}
	var missing []chunk.Chunk
	queued := map[string]bool{}
	for _, c := range chunks {
		if _, ok := cached[c.Hash]; ok || queued[c.Hash] {
			continue
		}
		queued[c.Hash] = true
		missing = append(missing, c)
	}
	for len(missing) > 0 {
		n, tokens := 0, 0
		for n < len(missing) && n < maxBatchTexts {
			t := chunk.EstimateTokens(missing[n].Text)
			if n > 0 && tokens+t > maxBatchTokens {
				break
			}
			tokens += t
			n++
		}
		batch := missing[:n]
		missing = missing[n:]
		texts := make([]string, len(batch))
		for i, c := range batch {
			texts[i] = c.Text
		}
		vecs, err := m.embedRetry(ctx, texts)
		if err != nil {
			return nil, err
		}
		for i, c := range batch {
			cached[c.Hash] = vecs[i]
		}
	}
	out := make([][]float32, len(chunks))
	for i, c := range chunks {
		out[i] = cached[c.Hash]
	}
	return out, nil
}

// embedRetry calls the embedder with exponential backoff and validates the
// shape of its answer.
func (m *Manager) embedRetry(ctx context.Context, texts []string) ([][]float32, error) {
	var last error
	wait := embedBackoff
	for attempt := 1; attempt <= embedAttempts; attempt++ {
		vecs, err := m.emb.Embed(ctx, texts)
		if err == nil {
			if len(vecs) != len(texts) {
				err = fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(texts))
			} else {
				for _, v := range vecs {
					if len(v) != m.ixOpts.Dims {
						err = fmt.Errorf("embedder returned %d dims, want %d", len(v), m.ixOpts.Dims)
						break
					}
				}
			}
			if err == nil {
				return vecs, nil
			}
		}
		last = err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt < embedAttempts {
			m.log.Warn("memory embedding failed; retrying", "attempt", attempt, "err", err)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-m.done:
				return nil, ErrClosed
			}
			wait *= 4
		}
	}
	return nil, fmt.Errorf("embed: %w", last)
}
