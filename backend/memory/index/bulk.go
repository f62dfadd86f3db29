package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
)

// Bulk writes.
//
// Outside bulk mode every PutFile and DeleteFile applies its own Bleve batch
// before it returns, so a single edit is searchable at once. Scorch turns
// every batch into one segment and persists it (segment file plus a bolt
// commit with fsync), and its merger then has to merge all those small
// segments: for a full sync of many small files this dominated the CPU.
//
// Between [Store.BeginBulk] and [Store.EndBulk] the writes of several files
// share one SQLite transaction (the bulk transaction), each file inside its
// own savepoint, so that each file's write (chunks, vectors, embedding
// cache, journal rows, files row) is still all or nothing; and their Bleve
// operations are collected in one pending batch. The pending batch holds
// exactly the keyword operations of the open bulk transaction. Both are
// flushed together when the batch reaches bulkMaxOps operations or
// bulkMaxBytes of chunk text, when its oldest operation is older than
// bulkMaxAge (checked at each write), and at EndBulk and Close: first the
// bulk transaction commits (journal rows included), then the Bleve batch is
// applied, and only then are its journal rows cleared.
//
// In bulk mode the Bleve batch of a group is applied on a goroutine of its
// own while the writer goes on with the next group's SQLite writes (a
// segment build is a quarter of a full sync's CPU, and the writer would wait
// for it). Batches still reach Bleve one at a time and in commit order: the
// next flush waits for the previous batch before it applies its own, and
// only then, with no transaction open, clears the previous batch's journal
// rows. It keeps the rows the newer group has journaled again (a chunk it
// deleted), which are that group's operations now. EndBulk, Close and any
// write outside bulk mode wait for the batch in flight; its error is
// returned by the flush that waited.
//
// Crash safety follows from that order. A process killed before the commit
// loses the whole group on both sides (the files rows are missing, so the
// next sync indexes those files again); killed between the commit and the
// Bleve apply, it leaves journal rows for every operation of the batch,
// which the next Open (or the next write) replays; killed after the apply,
// the replay repeats operations Bleve already has, which is harmless. If the
// commit fails, the group is rolled back and the batch dropped, with the
// same outcome as a kill before the commit (the error is returned by the
// write or EndBulk that flushed).
//
// The limits are copied into each Store (fields bulkMaxOps ...), where tests
// can lower them.
//
// Until a group is flushed, other readers (Search, Files, Counts) see the
// index as it was before the group; File and CachedEmbeddings, used by the
// writer, see the group's writes.
const (
	// bulkMaxOps bounds the Bleve operations (index or delete) in the
	// pending batch, i.e. the documents of one new segment. Building a
	// segment holds every token's positions in memory, and in bulk mode a
	// batch is built while the next one fills, so this trades peak RSS for
	// indexing speed (fewer, larger segments leave Bleve's merger less to
	// do). With the background apply, 500 was as fast as 1,000 (10k → 100k
	// chunks: 945 and 905 chunks/s) at half the peak RSS (10k chunks: 429
	// and 788 MiB, the corpus generator's included; docs/BENCHMARKS.md).
	bulkMaxOps = 500
	// bulkMaxBytes bounds the chunk text held by the pending batch.
	bulkMaxBytes = 8 << 20
	// bulkMaxAge bounds how long the keyword leg lags behind SQLite during a
	// long bulk write (slow embedders).
	bulkMaxAge = 2 * time.Second
)

// BeginBulk switches the Store into bulk mode: PutFile and DeleteFile group
// the writes of several files into one SQLite transaction (each file still
// atomic) and one Bleve batch, flushed together when the group is large or
// old enough (see the notes above the bulk constants). Writes in a group
// that is not flushed yet are not visible to Search. Use it for full syncs
// and multi-file change sets, and call EndBulk when done; single edits that
// must be searchable at once are written outside bulk mode. A BeginBulk
// while already in bulk mode has no further effect.
func (s *Store) BeginBulk() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.bulk = true
}

// fileTx returns the transaction for one file's write and end, which
// commits it (end(true)) or undoes it (end(false); a no-op after a
// successful end(true)). Callers hold wmu. Outside bulk mode the transaction
// is the file's own. In bulk mode it is the bulk transaction (begun on
// demand) and the file's write is a savepoint inside it.
func (s *Store) fileTx(ctx context.Context) (*sql.Tx, func(commit bool) error, error) {
	if !s.bulk {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		done := false
		return tx, func(commit bool) error {
			if done {
				return nil
			}
			done = true
			if commit {
				if err := tx.Commit(); err != nil {
					return err
				}
				s.commits.Add(1)
				return nil
			}
			return tx.Rollback()
		}, nil
	}
	if s.btx == nil {
		// Background: the bulk transaction outlives the ctx of the write
		// that began it; each statement still runs under its caller's ctx.
		tx, err := s.db.BeginTx(context.Background(), nil)
		if err != nil {
			return nil, nil, err
		}
		s.btx = tx
	}
	tx := s.btx
	if _, err := tx.ExecContext(ctx, "SAVEPOINT file_write"); err != nil {
		return nil, nil, fmt.Errorf("savepoint: %w", err)
	}
	done := false
	return tx, func(commit bool) error {
		if done {
			return nil
		}
		done = true
		bg := context.Background() // must run even when ctx is cancelled
		if commit {
			if _, err := tx.ExecContext(bg, "RELEASE file_write"); err != nil {
				s.abortBulk()
				return fmt.Errorf("release savepoint: %w", err)
			}
			return nil
		}
		if _, err := tx.ExecContext(bg, "ROLLBACK TO file_write"); err != nil {
			s.abortBulk()
			return fmt.Errorf("roll back savepoint: %w", err)
		}
		if _, err := tx.ExecContext(bg, "RELEASE file_write"); err != nil {
			s.abortBulk()
			return fmt.Errorf("release savepoint: %w", err)
		}
		return nil
	}, nil
}

// abortBulk rolls back the bulk transaction and drops the pending batch that
// belongs to it. Callers hold wmu.
func (s *Store) abortBulk() {
	if s.btx != nil {
		if err := s.btx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			s.log.Warn("memory index bulk rollback failed", "err", err)
		}
		s.btx = nil
	}
	s.qpend, s.spend = nil, nil
	s.dropPending()
}

// queryer is what reads need from *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// reader returns where the writer's reads go: the bulk transaction while
// one is open (held under wmu until release is called), else the database.
func (s *Store) reader() (q queryer, release func()) {
	s.wmu.Lock()
	if s.btx != nil {
		return s.btx, s.wmu.Unlock
	}
	s.wmu.Unlock()
	return s.db, func() {}
}

// EndBulk flushes the open group (commits its SQLite transaction, then
// applies its Bleve batch) and leaves bulk mode, also when the flush fails:
// a failed commit rolls the group back (its files are not indexed and must
// be written again), a failed Bleve apply leaves the operations in the
// journal for the next write or Open.
func (s *Store) EndBulk(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.bulk = false // the flush below applies the last batch at once
	if s.isClosed() {
		return ErrClosed
	}
	return s.flushPending(ctx)
}

// beforeWrite brings Bleve up to date before a write. Callers hold wmu.
// Outside bulk mode a pending group is flushed first (and a batch still in
// flight waited for). When no group is open and no batch is in flight,
// journal rows left by an interrupted or failed earlier write are replayed
// (while a group is open, the journal is read through the database, which
// does not see the group, and the group's own rows must not be applied
// before its commit; a batch in flight has rows of its own).
func (s *Store) beforeWrite(ctx context.Context) error {
	if (s.pend != nil || s.btx != nil || s.applying != nil) && !s.bulk {
		if err := s.flushPending(ctx); err != nil {
			return err
		}
	}
	if s.pend != nil || s.btx != nil || s.applying != nil {
		return nil
	}
	return s.replayJournal(ctx)
}

// keywordOps applies, or in bulk mode queues, the Bleve operations of one
// committed SQLite write: delete the documents dels, index texts[i] as
// document adds[i] of file path, with its token stream streams[i].
// Callers hold wmu.
func (s *Store) keywordOps(ctx context.Context, dels, adds []int64, texts []string, streams []analysis.TokenStream, path string) error {
	if !s.bulk {
		b := s.bl.NewBatch()
		if err := s.addOps(b, dels, adds, texts, streams, path); err != nil {
			return err
		}
		ids := make([]int64, 0, len(dels)+len(adds))
		ids = append(append(ids, dels...), adds...)
		return s.applyBatch(ctx, b, ids)
	}
	if s.pend == nil {
		s.pend = s.bl.NewBatch()
		s.pendSince = time.Now()
	}
	if err := s.addOps(s.pend, dels, adds, texts, streams, path); err != nil {
		// The batch may hold part of this write, which is already released
		// into the bulk transaction: give up the whole group.
		s.abortBulk()
		return err
	}
	s.pendIDs = append(s.pendIDs, dels...)
	s.pendIDs = append(s.pendIDs, adds...)
	for _, t := range texts {
		s.pendBytes += len(t)
	}
	if s.pend.Size() >= s.bulkMaxOps || s.pendBytes >= s.bulkMaxBytes || time.Since(s.pendSince) >= s.bulkMaxAge {
		return s.flushPending(ctx)
	}
	return nil
}

// addOps adds the operations to b: texts[i] is indexed as adds[i] with the
// token stream streams[i] (analyzed once, by PutFile).
func (s *Store) addOps(b *bleve.Batch, dels, adds []int64, texts []string, streams []analysis.TokenStream, path string) error {
	for _, id := range dels {
		b.Delete(docID(id))
	}
	for i, id := range adds {
		doc, err := s.analyzedDoc(id, texts[i], path, streams[i])
		if err != nil {
			return err
		}
		if err := b.IndexAdvanced(doc); err != nil {
			return fmt.Errorf("bleve: %w", err)
		}
	}
	return nil
}

// flushPending commits the bulk transaction, waits for the batch in
// flight, and applies the pending batch: in bulk mode on a goroutine (the
// next flush waits for it and clears its journal rows), else at once,
// clearing its journal rows. Callers hold wmu. On a failed commit the group
// is rolled back and the batch dropped; on a failed apply the batch is
// dropped and its journal rows stay for the next write or Open to replay.
func (s *Store) flushPending(ctx context.Context) error {
	if err := s.commitBulk(); err != nil {
		return err
	}
	b, ids := s.pend, s.pendIDs
	s.dropPending()
	// The batch before this one first: batches reach Bleve in commit order.
	// If it failed, this one is applied all the same (a replay indexes or
	// deletes each journaled chunk as SQLite has it now, so its late
	// replay cannot undo this batch) and the failure is reported.
	prev := s.awaitApply(ctx, ids)
	if b == nil {
		return prev
	}
	if s.bulk {
		s.startApply(b, ids)
		return prev
	}
	if err := s.applyBatch(ctx, b, ids); err != nil {
		return errors.Join(prev, fmt.Errorf("apply pending keyword batch: %w", err))
	}
	return prev
}

// keywordApply is a committed group's Bleve batch being applied in the
// background: done is closed when Bleve has it (err nil) or refused it.
type keywordApply struct {
	done chan struct{}
	err  error
	ids  []int64 // the chunk ids of the batch's journal rows
}

// startApply applies b, the batch of the group just committed, on a new
// goroutine. Callers hold wmu and have waited for the previous batch.
func (s *Store) startApply(b *bleve.Batch, ids []int64) {
	a := &keywordApply{done: make(chan struct{}), ids: ids}
	s.applying = a
	go func() {
		defer close(a.done)
		if err := s.bl.Batch(b); err != nil {
			a.err = fmt.Errorf("bleve batch: %w", err)
		}
	}()
}

// awaitApply waits for the batch in flight, if any, and clears its journal
// rows except those of keep: the chunk ids a group committed after it has
// journaled again, whose rows are that group's operations now. Callers hold
// wmu, with no bulk transaction open. A failed batch leaves its rows for
// the replay and returns its error.
func (s *Store) awaitApply(ctx context.Context, keep []int64) error {
	a := s.applying
	if a == nil {
		return nil
	}
	s.applying = nil
	<-a.done
	if a.err != nil {
		return fmt.Errorf("apply pending keyword batch: %w", a.err)
	}
	ids := a.ids
	if len(keep) > 0 {
		again := make(map[int64]bool, len(keep))
		for _, id := range keep {
			again[id] = true
		}
		ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return again[id] })
	}
	return s.clearJournal(ctx, ids)
}

// commitBulk commits the bulk transaction, if one is open, and leaves the
// pending batch to be applied. Callers hold wmu. On failure the group is
// rolled back and the batch dropped.
func (s *Store) commitBulk() error {
	if s.btx == nil {
		return nil
	}
	err := s.btx.Commit()
	s.btx = nil
	if err != nil {
		s.abortBulk()
		return fmt.Errorf("commit bulk write: %w", err)
	}
	s.commits.Add(1)
	s.quant.apply(s.qpend)
	s.qpend = nil
	s.applyStats(s.spend)
	s.spend = nil
	return nil
}

// committedVectors records the vector operations of one file's write once
// it is committed: into the quantized copy outside bulk mode, into the
// group's pending operations in bulk mode (applied at the group's commit).
// Callers hold wmu.
func (s *Store) committedVectors(ops []qop) {
	if s.btx != nil {
		s.qpend = append(s.qpend, ops...)
		return
	}
	s.quant.apply(ops)
}

// Commits counts the SQLite commits that made file writes visible to other
// readers (Files, Counts, Search): one per PutFile or DeleteFile outside bulk
// mode, one per flushed group in bulk mode. A caller that shows counts
// during a long bulk write polls it and recounts when it changed.
func (s *Store) Commits() uint64 { return s.commits.Load() }

func (s *Store) dropPending() {
	s.pend, s.pendIDs, s.pendBytes, s.pendSince = nil, nil, 0, time.Time{}
}
