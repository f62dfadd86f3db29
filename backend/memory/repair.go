package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// This file keeps search working when the vector table is damaged (issue
// 14, item 8): the index records a vector fault (index.Store.VectorFault)
// and answers by keywords; Status says StateDegraded with the reason; and
// the vector leg is rebuilt in place from the stored chunks — their
// vectors taken from the embedding cache or computed again by the
// embedder — in the background as soon as a search or a write meets the
// damage, and by every Sync (`atrium memory index`, the app's start and
// rescans) that finds it. If the table cannot even be emptied (damaged
// pages), the whole index is rebuilt from the Markdown instead.

// repairBatch is the number of chunks embedded and stored per step of a
// vector rebuild; a background rebuild lets writes in between steps.
const repairBatch = 256

// setDegraded records why the vector leg is out of service (Status).
func (m *Manager) setDegraded(fault error, progress string) {
	reason := fmt.Sprintf("vector index damaged (%v); searching by keywords while it is rebuilt from the stored chunks", trimFault(fault))
	if progress != "" {
		reason += " (" + progress + ")"
	}
	m.mu.Lock()
	was := m.degraded
	m.degraded = reason
	m.mu.Unlock()
	if was == "" {
		m.log.Warn("memory search degraded to keywords", "reason", reason)
	}
}

// clearDegraded ends StateDegraded.
func (m *Manager) clearDegraded() {
	m.mu.Lock()
	was := m.degraded
	m.degraded = ""
	m.mu.Unlock()
	if was != "" {
		m.log.Info("memory vector index rebuilt; hybrid search resumed")
	}
}

// trimFault drops the index's "vector table damaged" prefix.
func trimFault(err error) string { return trimPrefix(err, index.ErrVectorsDamaged) }

// trimPrefix drops the message of the sentinel err wraps from its start.
func trimPrefix(err, sentinel error) string {
	s := err.Error()
	p := sentinel.Error() + ": "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// onVectorFault is index.Options.OnVectorFault: it may run with the
// index's write lock held, so it only records and starts the rebuild.
func (m *Manager) onVectorFault(err error) {
	m.setDegraded(err, "")
	m.startRepair()
}

// startRepair rebuilds the vector leg on a goroutine of its own, unless
// one is running. Close stops it and waits for it.
func (m *Manager) startRepair() {
	m.background(&m.repairing, "memory vector index rebuild stopped; the next sync tries again",
		func(ctx context.Context) error { return m.repairVectors(ctx, false) })
}

// background runs repair on a goroutine of its own unless *running says
// one runs (guarded by repairMu); Close cancels its ctx and waits for it.
func (m *Manager) background(running *bool, failed string, repair func(ctx context.Context) error) {
	m.repairMu.Lock()
	if *running || m.closed.Load() {
		m.repairMu.Unlock()
		return
	}
	*running = true
	m.repairWG.Add(1)
	m.repairMu.Unlock()
	go func() {
		defer m.repairWG.Done()
		defer func() {
			m.repairMu.Lock()
			*running = false
			m.repairMu.Unlock()
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-m.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := repair(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
			m.log.Warn(failed, "err", err)
		}
	}()
}

// repairRunning reports whether a background rebuild is running.
func (m *Manager) repairRunning() bool {
	m.repairMu.Lock()
	defer m.repairMu.Unlock()
	return m.repairing
}

// checkVectorsLocked is the vector part of a Sync: the deep check of the
// open index (once per open index), and the rebuild of a damaged vector
// leg unless one runs in the background. Callers hold writeMu.
func (m *Manager) checkVectorsLocked(ctx context.Context) error {
	if m.store.KeywordFault() != nil {
		if err := m.repairKeywordsLocked(ctx); err != nil {
			return err
		}
	}
	st := m.store
	if err := st.VerifyVectors(ctx); err != nil && !errors.Is(err, index.ErrVectorsDamaged) {
		return fmt.Errorf("check vectors: %w", err)
	}
	fault := st.VectorFault()
	if fault == nil {
		m.clearDegraded()
		return nil
	}
	m.setDegraded(fault, "")
	if m.repairRunning() {
		return nil
	}
	return m.repairVectors(ctx, true)
}

// repairVectors rebuilds the vector leg of the current index in place:
// empty the table, then embed and store the chunks without a vector in
// batches (from the embedding cache where it has them), then clear the
// fault. held: the caller holds writeMu throughout (Sync); else each step
// takes it. An embedder failure stops it with the fault kept (the next
// Sync tries again); a table that cannot be emptied or written makes it
// rebuild the whole index from the Markdown.
func (m *Manager) repairVectors(ctx context.Context, held bool) error {
	lock, unlock := m.writeMu.Lock, m.writeMu.Unlock
	if held {
		lock, unlock = func() {}, func() {}
	}
	lock()
	if m.closed.Load() {
		unlock()
		return ErrClosed
	}
	st := m.store
	fault := st.VectorFault()
	if fault == nil {
		unlock()
		m.clearDegraded()
		return nil
	}
	m.mu.Lock()
	total := m.chunks
	m.mu.Unlock()
	m.log.Info("memory vector index rebuild started", "chunks", total, "reason", fault.Error())
	err := st.ResetVectors(ctx)
	unlock()
	if err != nil {
		return m.repairByRebuild(ctx, held, st, err)
	}
	var after int64
	done := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Listing and embedding need no lock (a Store closed by a swap
		// answers ErrClosed); writes wait only for PutVectors.
		rows, err := st.MissingVectors(ctx, after, repairBatch)
		if err == nil && len(rows) > 0 {
			if embErr := m.embedRows(ctx, st, rows); embErr != nil {
				if ctx.Err() != nil || errors.Is(embErr, index.ErrClosed) {
					return embErr
				}
				m.setDegraded(fault, fmt.Sprintf("rebuild waits for the embedder: %v", embErr))
				return fmt.Errorf("rebuild vectors: %w", embErr)
			}
			lock()
			if m.closed.Load() || m.store != st {
				unlock()
				return ErrClosed
			}
			_, err = st.PutVectors(ctx, rows)
			unlock()
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, index.ErrClosed) {
				return err
			}
			return m.repairByRebuild(ctx, held, st, err)
		}
		if len(rows) == 0 {
			break
		}
		after = rows[len(rows)-1].ID
		done += len(rows)
		m.setDegraded(fault, fmt.Sprintf("%d of %d chunks re-embedded", done, max(done, total)))
	}
	lock()
	if m.store == st {
		err = st.ClearVectorFault(ctx)
	}
	unlock()
	if err != nil {
		return m.repairByRebuild(ctx, held, st, err)
	}
	m.clearDegraded()
	return nil
}

// embedRows sets the vectors of rows: from the embedding cache, else from
// the embedder (a chunk the embedder gives no features keeps a zero
// vector, as when it was first indexed).
func (m *Manager) embedRows(ctx context.Context, st *index.Store, rows []index.VectorRow) error {
	hashes := make([]string, len(rows))
	for i, r := range rows {
		hashes[i] = r.Hash
	}
	cached, err := st.CachedEmbeddings(ctx, hashes)
	if err != nil {
		cached = map[string][]float32{} // the cache is derived data too
	}
	var todo []int
	for i := range rows {
		if v, ok := cached[rows[i].Hash]; ok {
			rows[i].Vector = v
		} else {
			todo = append(todo, i)
		}
	}
	for len(todo) > 0 {
		n := batchLen(len(todo), func(i int) string { return rows[todo[i]].Text })
		texts := make([]string, n)
		for i := range texts {
			texts[i] = rows[todo[i]].Text
		}
		vs, err := m.embedBatch(ctx, texts)
		if err != nil {
			if errors.Is(err, embed.ErrDimsMismatch) {
				return fmt.Errorf("%w (the next sync rebuilds the index)", err)
			}
			return err
		}
		for i, v := range vs {
			rows[todo[i]].Vector = v
		}
		todo = todo[n:]
	}
	return nil
}

// repairByRebuild is the last resort of a vector rebuild that failed on
// the index itself (cause): the whole index is rebuilt from the Markdown
// into a new one and swapped in (the Sync path for an incompatible index).
func (m *Manager) repairByRebuild(ctx context.Context, held bool, st *index.Store, cause error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	m.log.Warn("memory vector index cannot be rebuilt in place; rebuilding the whole index from the workspace", "err", cause)
	if !held {
		m.writeMu.Lock()
		defer m.writeMu.Unlock()
	}
	if m.closed.Load() {
		return ErrClosed
	}
	if m.store != st {
		return nil // replaced meanwhile
	}
	if err := m.rebuildLocked(ctx); err != nil {
		return fmt.Errorf("rebuild vectors: %v; rebuild index: %w", cause, err)
	}
	if err := m.store.VectorFault(); err != nil {
		return fmt.Errorf("rebuild vectors: %v; the rebuilt index: %w", cause, err)
	}
	m.clearDegraded()
	return nil
}

// onKeywordFault is index.Options.OnKeywordFault: searches answer by
// vectors alone; the keyword index is rebuilt in the background.
func (m *Manager) onKeywordFault(err error) {
	m.mu.Lock()
	m.kwDegraded = fmt.Sprintf("keyword index damaged (%v); searching by vectors while it is rebuilt from the stored chunks", trimPrefix(err, index.ErrKeywordsDamaged))
	reason := m.kwDegraded
	m.mu.Unlock()
	m.log.Warn("memory search degraded to vectors", "reason", reason)
	m.background(&m.kwRepairing, "memory keyword index rebuild failed; the next sync tries again", func(ctx context.Context) error {
		m.writeMu.Lock()
		defer m.writeMu.Unlock()
		if m.closed.Load() {
			return ErrClosed
		}
		return m.repairKeywordsLocked(ctx)
	})
}

// repairKeywordsLocked rebuilds a damaged keyword index from SQLite: the
// index is closed, its Bleve directory moved aside, and the index opened
// again, which refills Bleve from the chunks table (searches wait for the
// refill). Callers hold writeMu.
func (m *Manager) repairKeywordsLocked(ctx context.Context) error {
	if m.store.KeywordFault() == nil {
		m.clearKeywordDegraded() // the index was replaced meanwhile
		return nil
	}
	m.log.Info("memory keyword index rebuild started")
	derr, err := m.swapStoreLocked("keyword rebuild", index.DiscardKeywords)
	if err != nil {
		return fmt.Errorf("rebuild keywords: %w", err)
	}
	if derr != nil {
		m.log.Warn("memory keyword index not moved aside", "err", derr)
	}
	m.log.Info("memory keyword index rebuilt; hybrid search resumed")
	return nil
}

// clearKeywordDegraded ends the keyword leg's part of StateDegraded.
func (m *Manager) clearKeywordDegraded() {
	m.mu.Lock()
	m.kwDegraded = ""
	m.mu.Unlock()
}
