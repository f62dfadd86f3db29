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
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// Embedding batches are sized by the chunk token estimate (SPEC §4.2). The
// HTTP embedders split a batch further into requests by their own budget,
// and retry each request with backoff (package embed).
const (
	maxBatchTokens = 8192
	maxBatchTexts  = 64
)

// placeholderDims is the vector length of an index created while the
// embedder's dims are unknown (not configured, provider not answering): it
// holds chunks without vectors only, and is rebuilt with the real dims once
// the provider answers.
const placeholderDims = 1

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
// new index and swaps it in. Binary, oversized or unreadable files are
// skipped with a warning and reported in Status.LastError; they do not fail
// the sync (text with invalid UTF-8 is indexed with U+FFFD in place of the
// bad bytes, as Get shows it). Chunks the embedder cannot embed (provider
// unreachable, failing, or answering with other dims) are stored without
// vectors: searchable by keywords, counted in Status.Chunks, reported by
// StateKeywordOnly and Status.LastError, and embedded by the next sync (Run's
// periodic rescan) once the provider answers; a sync never fails for them.
// Embedder dims that were unknown are probed first (see Options.Embedder). A workspace that cannot be read as a whole
// is not a workspace whose notes were deleted: Sync then keeps the index,
// sets StateError and returns an error wrapping ErrUnavailable. Otherwise
// the error is non-nil only when the scan itself failed or was cancelled.
//
// The end of each completed sync (and the fact that a sync was started and
// has not completed) is recorded in the index, so that a later Open reports
// a true state.
func (m *Manager) Sync(ctx context.Context) error {
	if m.closed.Load() {
		return ErrClosed
	}
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if m.closed.Load() {
		return ErrClosed
	}
	m.embedDown = nil
	m.refreshDims(ctx)
	if !m.store.Compatible() || m.store.Meta().Dims != m.ixOpts.Dims {
		return m.rebuildLocked(ctx)
	}
	if _, err := m.scanLocked(ctx, m.store); err != nil {
		return err
	}
	// A damaged vector leg is rebuilt from the chunks just brought up to
	// date (repair.go); its failure leaves the index degraded, searchable
	// by keywords, and is not the sync's.
	if err := m.checkVectorsLocked(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("sync: %w", ctx.Err())
		}
		m.log.Warn("memory vector index not rebuilt", "err", err)
	}
	return nil
}

// openStore opens the index for m.ixOpts. When the embedder's dims are
// unknown it probes the provider once (Options.ProbeTimeout); if that
// fails too, it opens the index with the dims the index was built with
// (same provider, model and chunking), or else with placeholderDims, so
// that keyword search works while the provider is away. Callers own m.
func (m *Manager) openStore() (*index.Store, error) {
	if m.ixOpts.Dims <= 0 {
		m.probeDims(context.Background())
		m.ixOpts.Dims = m.opts.Embedder.Dims()
	}
	if m.ixOpts.Dims > 0 {
		return index.Open(m.ixOpts)
	}
	m.ixOpts.Dims = placeholderDims
	s, err := index.Open(m.ixOpts)
	if err != nil {
		return nil, err
	}
	meta := s.Meta()
	if s.Compatible() || meta.Provider != m.ixOpts.Provider || meta.Model != m.ixOpts.Model ||
		meta.Chunking != m.ixOpts.Chunking || meta.Schema != index.SchemaVersion {
		m.log.Warn("memory embedder dims unknown and the provider did not answer; keyword search only until it does",
			"provider", m.ixOpts.Provider, "model", m.ixOpts.Model)
		return s, nil
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	m.ixOpts.Dims = meta.Dims
	m.log.Info("memory embedder dims unknown; using the index's", "dims", meta.Dims)
	return index.Open(m.ixOpts)
}

// probeDims asks an embedder whose dims are unknown for them (logged when
// it fails; a failure leaves Dims 0).
func (m *Manager) probeDims(ctx context.Context) {
	p, ok := m.opts.Embedder.(embed.Prober)
	if !ok || m.opts.Embedder.Dims() > 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, m.opts.ProbeTimeout)
	defer cancel()
	if _, err := p.Probe(pctx); err != nil {
		m.log.Warn("memory embedder dims probe failed", "provider", m.opts.Embedder.Provider(), "model", m.opts.Embedder.Model(), "err", err)
		m.mu.Lock()
		m.embedErr = err.Error()
		m.mu.Unlock()
	}
}

// refreshDims learns unknown embedder dims (probe) and makes them the
// index's: when they differ from the open index's, the caller rebuilds.
// Callers hold writeMu.
func (m *Manager) refreshDims(ctx context.Context) {
	m.probeDims(ctx)
	if d := m.opts.Embedder.Dims(); d > 0 && d != m.ixOpts.Dims {
		m.log.Info("memory embedder dims known; the index is rebuilt with them", "dims", d, "index_dims", m.ixOpts.Dims)
		m.ixOpts.Dims = d
	}
}

// rebuildLocked builds a fresh index in the staging directory and swaps it in.
func (m *Manager) rebuildLocked(ctx context.Context) error {
	m.log.Info("memory index rebuild started")
	staging, err := index.OpenStaging(m.ixOpts)
	if err != nil {
		m.finishWithError(fmt.Sprintf("rebuild index: %v", err))
		return fmt.Errorf("rebuild index: %w", err)
	}
	// The pending chunks of the old index are not the new one's.
	m.mu.Lock()
	oldPending := m.pending
	m.pending = map[string]int{}
	m.mu.Unlock()
	// OnChange waits for the swap: until then searches and Status see
	// the old index, and a client acting on memory.changed at once must
	// find what it announces (a failed rebuild announces nothing).
	staged, serr := m.scanLocked(ctx, staging)
	if err := staging.Close(); err != nil && serr == nil {
		serr = err
	}
	if serr != nil {
		m.mu.Lock()
		m.pending = oldPending
		if m.unavailable == "" {
			m.state = StateKeywordOnly // the old index still answers keyword queries
		}
		m.mu.Unlock()
		return fmt.Errorf("rebuild index: %w", serr)
	}
	perr, oerr := m.swapStoreLocked("rebuild", index.Promote)
	if oerr != nil {
		return fmt.Errorf("rebuild index: %w", oerr)
	}
	ns := m.store
	if ns.VectorFault() == nil {
		m.clearDegraded() // a fresh vector table
	}
	if perr != nil {
		m.finishWithError(fmt.Sprintf("swap rebuilt index: %v", perr))
		return fmt.Errorf("rebuild index: %w", perr)
	}
	files, chunks, _ := ns.Counts(ctx)
	m.mu.Lock()
	m.files, m.chunks = files, chunks
	m.state = m.stagedState
	m.mu.Unlock()
	m.log.Info("memory index rebuild finished", "files", files, "chunks", chunks)
	m.fire(staged.changed, "index")
	m.fire(staged.deleted, "delete")
	return nil
}

// swapStoreLocked is the close–act–reopen swap of the open index, shared
// by the whole rebuild (act index.Promote moves the staged index in) and
// the keyword rebuild (act index.DiscardKeywords moves Bleve aside): it
// stops a running Warm, takes storeMu so that searches wait, closes the
// index, runs act on the index directory (Options.IndexDir) and opens the
// index again whether act succeeded or not, so that a failed act leaves
// the index as act left it (the old one, for both acts) serving searches.
// The reopened index's vector fault, if any, makes the state degraded; its
// keyword index is fresh or refilled from SQLite by Open, so a keyword
// fault is cleared. step names the swap in logs and StateError ("rebuild",
// "keyword rebuild").
//
// actErr is act's failure (the index was reopened all the same); err is
// the reopen's failure, wrapped: the manager then has no open index (its
// calls answer index.ErrClosed), Status says StateError, and the next
// Open of the directory tries again. A process killed between close and
// reopen leaves what act made of the directory, which Open recovers from
// (see index.Promote and index.DiscardKeywords). Callers hold writeMu.
func (m *Manager) swapStoreLocked(step string, act func(dir string) error) (actErr, err error) {
	m.stopWarm() // it holds storeMu's read lock
	m.storeMu.Lock()
	defer m.storeMu.Unlock()
	if err := m.store.Close(); err != nil {
		m.log.Warn("memory index close before swap failed", "step", step, "err", err)
	}
	actErr = act(m.ixOpts.Dir)
	ns, err := index.Open(m.ixOpts)
	if err != nil {
		m.finishWithError(fmt.Sprintf("reopen index after %s: %v", step, err))
		return actErr, fmt.Errorf("reopen index after %s: %w", step, err)
	}
	m.store = ns
	if err := ns.VectorFault(); err != nil {
		m.setDegraded(err, "")
	}
	m.clearKeywordDegraded()
	return actErr, nil
}

func (m *Manager) finishWithError(msg string) {
	m.mu.Lock()
	m.state = StateError
	m.syncErr = msg
	m.progress = nil
	m.mu.Unlock()
}

// wrapStop is scanLocked's error for what stopped it (nil: nothing).
func wrapStop(stop error) error {
	if stop != nil {
		return fmt.Errorf("sync: %w", stop)
	}
	return nil
}

// scanned is what a scan changed: the paths OnChange hears of.
type scanned struct {
	changed, deleted []string
}

// scanLocked is one full scan into st (the live store, or a staging store
// during a rebuild). A scan of the live store fires OnChange itself, once
// its changes are what searches and Status see; a staging scan only
// returns them, for rebuildLocked to fire after the swap. Callers hold
// writeMu.
func (m *Manager) scanLocked(ctx context.Context, st *index.Store) (scanned, error) {
	start := time.Now()
	live := st == m.store
	m.mu.Lock()
	dirtyAtStart := make([]string, 0, len(m.dirty))
	for p := range m.dirty {
		dirtyAtStart = append(dirtyAtStart, p)
	}
	m.mu.Unlock()

	// The listing is stat-only and quick; the state says "indexing" only
	// once it succeeded (a sync that finds the workspace gone changes
	// nothing but the state and the error).
	l, err := m.listFiles(ctx, st)
	if errors.Is(err, ErrUnavailable) {
		m.markUnavailable(err)
		return scanned{}, fmt.Errorf("sync: %w", err)
	}
	if err != nil {
		if ctx.Err() != nil {
			return scanned{}, fmt.Errorf("sync: %w", ctx.Err())
		}
		m.finishWithError(err.Error())
		return scanned{}, fmt.Errorf("sync: %w", err)
	}
	m.markAvailable()
	m.mu.Lock()
	m.state = StateIndexing
	m.notice = ""
	m.mu.Unlock()
	known, err := st.Files(ctx)
	if err != nil {
		m.finishWithError(err.Error())
		return scanned{}, fmt.Errorf("sync: %w", err)
	}
	m.mu.Lock()
	todo, gone := m.compareLocked(l, known)
	// Files with chunks stored without vectors are embedded again.
	inTodo := make(map[string]bool, len(todo))
	for _, f := range todo {
		inTodo[f.rel] = true
	}
	for _, f := range l.files {
		if _, ok := m.pending[f.rel]; ok && !inTodo[f.rel] {
			todo = append(todo, f)
		}
	}
	m.mu.Unlock()

	if len(todo) > 0 || len(gone) > 0 {
		// Until the end of this sync is recorded, a later Open knows that
		// the index may be half-way (the process may be killed).
		m.mu.Lock()
		rec := m.currentRecordLocked(true)
		m.mu.Unlock()
		m.saveSyncRecord(ctx, st, rec)
	}

	m.setProgress(&Progress{Total: len(todo)})
	var changed, deleted, errs []string
	errs = append(errs, l.problems...)
	var stop error
	// A full sync writes in groups of files: one SQLite transaction and one
	// Bleve batch (one keyword segment) per group instead of per file.
	// EndBulk below flushes the last group before the sync reports anything.
	st.BeginBulk()
	commits := st.Commits()
	pctx, stopPrefetch := context.WithCancel(ctx)
	defer stopPrefetch()
	ahead := m.prefetch(pctx, st, todo)
	for i, f := range todo {
		if err := ctx.Err(); err != nil {
			stop = err
			break
		}
		if m.closed.Load() {
			stop = ErrClosed
			break
		}
		res, err := m.indexPrepared(ctx, st, f.rel, ahead(i))
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
			if errors.Is(err, ErrUnavailable) {
				stop = err // the workspace went away during the sync
				break
			}
			errs = append(errs, f.rel+": "+err.Error())
			m.log.Error("memory file index failed", "path", f.rel, "err", err)
		}
		if c := st.Commits(); live && c != commits {
			// A group was committed: show what searches now see.
			commits = c
			m.refreshCounts(ctx, st)
		}
		m.setProgress(&Progress{Done: i + 1, Total: len(todo)})
	}
	if stop == nil && len(gone) > 0 {
		// Deletions only after a last look at the roots: a workspace that
		// vanished during the sync must not empty the index.
		memIndexed, err := m.memoryIndexed(ctx, st)
		if err == nil {
			err = m.checkRoots(memIndexed)
		}
		switch {
		case errors.Is(err, ErrUnavailable):
			stop = err
		case err != nil:
			errs = append(errs, "deletions postponed: "+err.Error())
			gone = nil
		}
	}
	if stop == nil {
		for _, p := range gone {
			if err := st.DeleteFile(ctx, p); err != nil {
				errs = append(errs, p+": "+err.Error())
				m.log.Error("memory file delete failed", "path", p, "err", err)
				continue
			}
			m.setPending(p, 0)
			deleted = append(deleted, p)
		}
	}
	// Not cancelled with ctx: a cancelled sync still keeps the files it has
	// written so far (commit and apply the open group).
	if err := st.EndBulk(context.WithoutCancel(ctx)); err != nil {
		errs = append(errs, err.Error())
		m.log.Error("memory keyword index batch failed", "err", err)
	}

	files, chunks, cerr := st.Counts(context.WithoutCancel(ctx))
	unavailable := errors.Is(stop, ErrUnavailable)
	m.mu.Lock()
	m.progress = nil
	prevState := m.state
	if cerr == nil && live {
		m.files, m.chunks = files, chunks
	}
	if !unavailable {
		m.layout = detectLayout(m.ws)
	}
	switch {
	case unavailable:
		// markUnavailable below sets the state.
	case stop != nil:
		m.state = StateStale
		m.notice = "the last sync did not complete (cancelled); the next sync resumes it"
	case len(errs) > 0:
		m.state = StateError
		m.syncErr = summarize(errs)
	case cerr != nil:
		m.state = StateError
		m.syncErr = cerr.Error()
	case files > 0 && chunks == 0:
		m.state = StateError
		m.syncErr = fmt.Sprintf("no chunks indexed although %d memory files exist", files)
	default:
		m.settleLocked()
	}
	if !live && stop == nil {
		// A rebuild: searches still use the old index, so the state
		// stays "indexing" until rebuildLocked has swapped the new one in.
		m.stagedState, m.state = m.state, prevState
	}
	var rec syncRecord
	if stop == nil {
		m.lastSync = time.Now().UnixMilli()
		for _, p := range dirtyAtStart {
			delete(m.dirty, p)
		}
		rec = m.currentRecordLocked(false)
	}
	m.mu.Unlock()
	if unavailable {
		m.markUnavailable(stop)
	}
	if stop == nil {
		m.saveSyncRecord(ctx, st, rec)
	}
	m.log.Info("memory sync finished", "files", files, "chunks", chunks, "changed", len(changed),
		"deleted", len(deleted), "errors", len(errs), "complete", stop == nil, "duration_ms", time.Since(start).Milliseconds())
	if !live {
		return scanned{changed: changed, deleted: deleted}, wrapStop(stop)
	}
	m.fire(changed, "index")
	m.fire(deleted, "delete")
	return scanned{}, wrapStop(stop)
}

// refreshCounts sets Status.Files and Status.Chunks from st.
func (m *Manager) refreshCounts(ctx context.Context, st *index.Store) {
	files, chunks, err := st.Counts(ctx)
	if err != nil {
		return // the end of the sync counts again
	}
	m.mu.Lock()
	m.files, m.chunks = files, chunks
	m.mu.Unlock()
}

func summarize(errs []string) string {
	if len(errs) <= 3 {
		return strings.Join(errs, "; ")
	}
	return strings.Join(errs[:3], "; ") + fmt.Sprintf("; and %d more", len(errs)-3)
}

// Binary detection (textContent): a file is binary if it holds a NUL byte or
// if more than binaryPercent percent of its bytes are invalid UTF-8 or
// control characters other than tab, line feed, vertical tab, form feed,
// carriage return and escape.
const binaryPercent = 30

// textContent decides whether a file's bytes are text. For text it returns
// the string to index, with every invalid UTF-8 sequence replaced by U+FFFD
// (exactly as Get serves it), and the number of bytes replaced; for binary
// content it returns a reason to skip the file.
func textContent(b []byte) (text string, replaced int, binaryReason string) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return "", 0, fmt.Sprintf("binary content (NUL byte at offset %d)", i)
	}
	if utf8.Valid(b) && !hasControl(b) {
		return string(b), 0, ""
	}
	nonText := 0
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			replaced++
			nonText++
		case r < 0x20 && r != '\t' && r != '\n' && r != '\v' && r != '\f' && r != '\r' && r != 0x1b, r == 0x7f:
			nonText++
		}
		i += size
	}
	if nonText*100 > len(b)*binaryPercent {
		return "", 0, fmt.Sprintf("binary content (%d%% of bytes are not text)", nonText*100/len(b))
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), replaced, ""
}

// hasControl reports whether b holds a C0 control byte other than the
// whitespace and escape that text files use, or DEL.
func hasControl(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r' && c != 0x1b) || c == 0x7f {
			return true
		}
	}
	return false
}

// indexOne brings one path's index entry in line with the disk: re-index if
// its content hash changed, drop it if it is gone (only if its folders can
// be read: see checkGone), is not memory Markdown, or is a symlink (indexed
// under its target's path, see listFiles); skip it with a recorded reason if
// it is binary, too large or unreadable (an unreadable file keeps its index
// entry). Callers hold writeMu.
func (m *Manager) indexOne(ctx context.Context, st *index.Store, rel string) (indexResult, error) {
	return m.indexPrepared(ctx, st, rel, nil)
}

// indexPrepared is indexOne with the write-free part of the work possibly
// done ahead (pre, see prefetch): the file's stat and content, its chunks,
// their vectors and token streams. pre nil: everything is done here.
func (m *Manager) indexPrepared(ctx context.Context, st *index.Store, rel string, pre *prepared) (indexResult, error) {
	if pre == nil {
		pre = &prepared{}
	}
	abs := filepath.Join(m.ws, filepath.FromSlash(rel))
	dropIfKnown := func() (indexResult, error) {
		m.mu.Lock()
		delete(m.skipped, rel)
		delete(m.pending, rel)
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
	// dropIfGone drops a path that does not exist, unless its workspace or
	// memory/ folder is what is missing.
	dropIfGone := func() (indexResult, error) {
		if err := m.checkGone(rel); err != nil {
			return resUnchanged, err
		}
		return dropIfKnown()
	}
	if !classify(rel).indexed {
		return dropIfKnown()
	}
	info, err := pre.info, pre.statErr
	if !pre.stated {
		info, err = os.Lstat(abs)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return dropIfGone()
	}
	if err != nil {
		return m.skip(ctx, st, rel, 0, 0, fmt.Sprintf("unreadable: %v", err), true)
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		m.log.Debug("memory file symlink not indexed", "path", rel)
		return dropIfKnown()
	}
	if !info.Mode().IsRegular() {
		return dropIfKnown()
	}
	size, mtime := info.Size(), info.ModTime().UnixMilli()
	if size > MaxFileBytes {
		return m.skip(ctx, st, rel, size, mtime, fmt.Sprintf("file too large (%d bytes, limit %d)", size, MaxFileBytes), false)
	}
	content, err := pre.content, pre.readErr
	if !pre.read {
		content, err = os.ReadFile(abs)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return dropIfGone() // deleted while we were looking at it
	}
	if err != nil {
		return m.skip(ctx, st, rel, size, mtime, fmt.Sprintf("unreadable: %v", err), true)
	}
	text, replaced, binary := textContent(content)
	if binary != "" {
		return m.skip(ctx, st, rel, size, mtime, binary, false)
	}
	sum := sha256.Sum256(content)
	hash := hex.EncodeToString(sum[:])
	m.observeEdit(ctx, rel, hash) // a hand edit is a write by admin (SPEC §5.3)
	m.mu.Lock()
	delete(m.skipped, rel)
	_, pending := m.pending[rel]
	m.mu.Unlock()

	rec, ok, err := st.File(ctx, rel)
	if err != nil {
		return resUnchanged, err
	}
	if ok && rec.Hash == hash && !pending {
		if rec.MTime != mtime || rec.Size != int64(len(content)) {
			if err := st.TouchFile(ctx, rel, mtime, int64(len(content))); err != nil {
				return resUnchanged, err
			}
		}
		return resUnchanged, nil
	}
	if replaced > 0 {
		m.log.Warn("memory file is not valid UTF-8; indexed with replacement characters", "path", rel, "bytes_replaced", replaced)
	}
	chunks := pre.chunks
	if !pre.split {
		chunks = chunk.Split(text, m.opts.Chunking)
	}
	vecs, missing, err := m.embedChunks(ctx, st, chunks, pre.vecs, pre.cached)
	if vecs == nil && len(chunks) > 0 {
		return resUnchanged, err // cancelled, or the cache is unreadable
	}
	if err != nil {
		m.log.Warn("memory chunks stored without vectors; keyword search only until the embedder answers",
			"path", rel, "chunks", missing, "err", err)
	}
	k := classify(rel)
	recs := make([]index.ChunkRecord, len(chunks))
	for i, c := range chunks {
		recs[i] = index.ChunkRecord{StartLine: c.StartLine, EndLine: c.EndLine, Text: c.Text, Hash: c.Hash, Vector: vecs[i]}
		if i < len(pre.tokens) {
			recs[i].Tokens = pre.tokens[i]
		}
	}
	fr := index.FileRecord{Path: rel, Hash: hash, MTime: mtime, Size: int64(len(content)), Layer: k.layer, Role: k.role}
	if err := st.PutFile(ctx, fr, recs); err != nil {
		return resUnchanged, err
	}
	m.setPending(rel, missing)
	return resChanged, nil
}

// setPending records that n chunks of rel are stored without vectors (0:
// none).
func (m *Manager) setPending(rel string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > 0 {
		m.pending[rel] = n
	} else {
		delete(m.pending, rel)
	}
}

// skip records a file that cannot be indexed (logged once per size, mtime
// and reason). A file whose content is unusable (binary, too large) is
// dropped from the index; one that cannot be read (retry) keeps its index
// entry, since "cannot read" is not "changed", and is read again by the next
// sync.
func (m *Manager) skip(ctx context.Context, st *index.Store, rel string, size, mtime int64, reason string, retry bool) (indexResult, error) {
	m.mu.Lock()
	prev, had := m.skipped[rel]
	m.skipped[rel] = skipEntry{size: size, mtime: mtime, reason: reason, retry: retry}
	m.mu.Unlock()
	if !had || prev.size != size || prev.mtime != mtime || prev.reason != reason {
		m.log.Warn("memory file skipped", "path", rel, "reason", reason)
	}
	if retry {
		return resSkipped, nil
	}
	if _, ok, err := st.File(ctx, rel); err == nil && ok {
		if err := st.DeleteFile(ctx, rel); err != nil {
			return resSkipped, err
		}
	}
	return resSkipped, nil
}

// embedChunks returns one vector per chunk, from the cache where possible;
// the rest are embedded in batches sized by the token estimate (the
// embedder retries each request). When the embedder fails, the chunks it
// did not embed get the zero vector (stored without a vector: keyword
// search only, see index.ChunkRecord) and missing counts them; err says
// why. Once the embedder is unavailable (embed.ErrUnavailable) the rest of
// the sync does not ask it again (m.embedDown). ready holds vectors by
// chunk hash embedded ahead and cachedAhead those read from the committed
// cache ahead (prefetch; either may be nil): the cache is asked only when
// they leave a chunk without a vector (a cached embedding never changes:
// it is keyed by provider, model, dims and content hash). vecs is nil only
// when ctx ended or the cache could not be read. Callers hold writeMu.
func (m *Manager) embedChunks(ctx context.Context, st *index.Store, chunks []chunk.Chunk, ready, cachedAhead map[string][]float32) (vecs [][]float32, missing int, err error) {
	if len(chunks) == 0 {
		return nil, 0, nil
	}
	var cached map[string][]float32
	var hashes []string
	for _, c := range chunks {
		if len(ready[c.Hash]) != m.ixOpts.Dims && len(cachedAhead[c.Hash]) != m.ixOpts.Dims {
			hashes = append(hashes, c.Hash)
		}
	}
	if len(hashes) == 0 {
		cached = make(map[string][]float32, len(chunks))
	} else if cached, err = st.CachedEmbeddings(ctx, hashes); err != nil {
		return nil, 0, err
	}
	for h, v := range cachedAhead {
		if len(v) == m.ixOpts.Dims {
			cached[h] = v
		}
	}
	embedded := false // the embedder answered for this file
	for h, v := range ready {
		if _, ok := cached[h]; !ok && len(v) == m.ixOpts.Dims {
			cached[h], embedded = v, true
		}
	}
	var todo []chunk.Chunk
	queued := map[string]bool{}
	for _, c := range chunks {
		if _, ok := cached[c.Hash]; ok || queued[c.Hash] {
			continue
		}
		queued[c.Hash] = true
		todo = append(todo, c)
	}
	var failed error
	for len(todo) > 0 && failed == nil {
		if m.embedDown != nil {
			failed = m.embedDown
			break
		}
		n := batchLen(len(todo), func(i int) string { return todo[i].Text })
		batch := todo[:n]
		texts := make([]string, len(batch))
		for i, c := range batch {
			texts[i] = c.Text
		}
		vs, err := m.embedBatch(ctx, texts)
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			failed = err
			if errors.Is(err, embed.ErrUnavailable) {
				m.embedDown = err
			}
			break
		}
		for i, c := range batch {
			cached[c.Hash] = vs[i]
		}
		todo = todo[n:]
	}
	vecs = make([][]float32, len(chunks))
	for i, c := range chunks {
		v, ok := cached[c.Hash]
		if !ok {
			v = make([]float32, m.ixOpts.Dims)
			missing++
		}
		vecs[i] = v
	}
	m.mu.Lock()
	if failed != nil {
		m.embedErr = failed.Error()
	} else if len(queued) > 0 || embedded {
		m.embedErr = ""
	}
	m.mu.Unlock()
	return vecs, missing, failed
}

// batchLen returns how many of the n texts (text(i)) go into the next
// embedding request: at most maxBatchTexts, and at most maxBatchTokens by
// the CJK-aware estimate (at least one text).
func batchLen(n int, text func(i int) string) int {
	k, tokens := 0, 0
	for k < n && k < maxBatchTexts {
		t := chunk.EstimateTokens(text(k))
		if k > 0 && tokens+t > maxBatchTokens {
			break
		}
		tokens += t
		k++
	}
	return k
}

// embedBatch calls the embedder once and checks the shape of its answer:
// one vector per text, each of the index's dims (SPEC §4.2: vectors of two
// dimensions never mix; a provider whose dims changed is
// embed.ErrDimsMismatch until the next Sync rebuilds the index).
func (m *Manager) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := m.opts.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, err // package embed names the provider and the URL
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("embed: %s returned %d vectors for %d texts", m.opts.Embedder.Provider(), len(vecs), len(texts))
	}
	for _, v := range vecs {
		if len(v) != m.ixOpts.Dims {
			return nil, fmt.Errorf("embed: %s/%s returned %d dims, the index has %d (the next sync rebuilds it): %w",
				m.opts.Embedder.Provider(), m.opts.Embedder.Model(), len(v), m.ixOpts.Dims, embed.ErrDimsMismatch)
		}
	}
	return vecs, nil
}

// compareLocked compares a stat-only listing with the indexed files (the
// rule shared by Sync and Check): a file is changed when it is new or its
// size or modification time differ from its index record, unless it was
// skipped (binary, too large) at that same size and time and is not marked
// for retry; an indexed file is gone when the listing lacks it and no
// unreadable folder could be hiding it. Skip records of vanished files are
// forgotten. m.mu must be held.
func (m *Manager) compareLocked(l *listing, known []index.FileRecord) (changed []diskFile, gone []string) {
	knownBy := make(map[string]index.FileRecord, len(known))
	for _, r := range known {
		knownBy[r.Path] = r
	}
	onDisk := make(map[string]bool, len(l.files))
	for _, f := range l.files {
		onDisk[f.rel] = true
		if r, ok := knownBy[f.rel]; ok && r.Size == f.size && r.MTime == f.mtime {
			continue
		}
		if sk, ok := m.skipped[f.rel]; ok && !sk.retry && sk.size == f.size && sk.mtime == f.mtime {
			continue
		}
		changed = append(changed, f)
	}
	for p := range m.skipped {
		if !onDisk[p] && !l.keeps(p) {
			delete(m.skipped, p)
		}
	}
	for _, r := range known {
		if !onDisk[r.Path] && !l.keeps(r.Path) {
			gone = append(gone, r.Path)
		}
	}
	return changed, gone
}
