package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"sync/atomic"
)

// The vector leg's health (issue 14, item 8; the openclaw#65156 class).
//
// The vec0 table vec_chunks and the tables sqlite-vec keeps beside it
// (vec_chunks_info, _chunks, _rowids, _vector_chunks00) are derived data:
// every vector can be computed again from the chunk texts in the chunks
// table. When they are unreadable or inconsistent the Store records a
// vector fault ([Store.VectorFault]) and keeps working without them:
// searches run the keyword leg alone, writes store chunks without vectors.
// The caller (package memory) then rebuilds the leg in place:
// [Store.ResetVectors] empties it, [Store.MissingVectors] lists the chunks
// without a vector, [Store.PutVectors] stores their vectors (recomputed by
// the embedder or taken from the embedding cache), and
// [Store.CheckVectors] followed by [Store.ClearVectorFault] ends the fault.
//
// Faults are found three ways, none of them on the search hot path:
//
//   - at Open, by a cheap check (checkVectors): the shadow tables exist,
//     the stored vectors can be counted, the validity bitmaps of
//     sqlite-vec's chunks count as many live rows, every vector blob has
//     the size its chunk needs, and the chunks without a vector are exactly
//     those stored without one (the meta key vectorlessKey, kept by every
//     write in the write's own transaction);
//   - on error: a search or write whose vector statements fail (a missing
//     table, a blob of the wrong size, a distance that is not a number)
//     records the fault and is answered (or written) without vectors;
//   - by the deep check [Store.VerifyVectors] (every vector read: dims,
//     finite, unit length, as every Embedder returns them), run by the
//     caller's full sync once per open Store and by loading the quantized
//     copy (which reads every vector anyway).

// ErrVectorsDamaged is wrapped by the error [Store.VectorFault] returns.
var ErrVectorsDamaged = errors.New("index: vector table damaged")

// vectorlessKey is the meta key counting the chunks stored without a
// vector (zero vectors: text without features, or the embedder failed).
// count(chunks) − count(vec_chunks) must equal it.
const vectorlessKey = "vectorless"

// vecShadow are the tables sqlite-vec keeps for vec_chunks (one vector
// column, no metadata or auxiliary columns).
var vecShadow = []string{"vec_chunks_info", "vec_chunks_chunks", "vec_chunks_rowids", "vec_chunks_vector_chunks00"}

// vectorError marks an error of a statement on the vector table: the Store
// records it as a vector fault and carries on without vectors.
type vectorError struct{ err error }

func (e *vectorError) Error() string { return e.err.Error() }
func (e *vectorError) Unwrap() error { return e.err }

// vecErr wraps err (nil stays nil) as a vector error with context.
func vecErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &vectorError{err: fmt.Errorf(format+": %w", append(args, err)...)}
}

// isVectorError reports whether err comes from the vector table (and not
// from a cancelled context or a closed Store).
func isVectorError(ctx context.Context, err error) bool {
	var ve *vectorError
	return err != nil && errors.As(err, &ve) && ctx.Err() == nil && !errors.Is(err, ErrClosed) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// faultBox holds a recorded vector fault.
type faultBox struct{ err error }

// vectorState is the Store's vector fault (nil pointer: healthy), whether
// VerifyVectors has passed since Open, and the keyword fault.
type vectorState struct {
	fault    atomic.Pointer[faultBox]
	verified atomic.Bool
	// kwFault is the keyword index's fault (keywords.go).
	kwFault atomic.Pointer[faultBox]
}

// VectorFault returns nil while the vector table is sound, else why it is
// not (wrapping ErrVectorsDamaged). While it is set, searches use the
// keyword leg alone and writes store no vectors.
func (s *Store) VectorFault() error {
	if b := s.vec.fault.Load(); b != nil {
		return b.err
	}
	return nil
}

// markVectorFault records a vector fault (the first one wins) and tells
// Options.OnVectorFault once per fault. It takes no lock.
func (s *Store) markVectorFault(err error) {
	b := &faultBox{err: fmt.Errorf("%w: %v", ErrVectorsDamaged, err)}
	if !s.vec.fault.CompareAndSwap(nil, b) {
		return
	}
	s.vec.verified.Store(false)
	s.log.Warn("memory vector index damaged; searching by keywords until it is rebuilt", "err", err)
	if s.opts.OnVectorFault != nil {
		s.opts.OnVectorFault(b.err)
	}
}

// ClearVectorFault ends a vector fault after a rebuild: it counts the
// chunks without a vector afresh, runs the cheap check of Open and clears
// the fault only if it passes (else returns why).
func (s *Store) ClearVectorFault(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	if s.btx != nil {
		return errors.New("clear vector fault: a bulk write is open")
	}
	// Writes made during the fault stored no vectors and kept no count:
	// the count of chunks without a vector is taken afresh (vectorless).
	if _, err := s.db.ExecContext(ctx, "DELETE FROM meta WHERE key = ?", vectorlessKey); err != nil {
		return fmt.Errorf("clear vector fault: %w", err)
	}
	if _, err := s.checkVectors(ctx, s.db); err != nil {
		return fmt.Errorf("clear vector fault: %w", err)
	}
	s.vec.fault.Store(nil)
	s.log.Info("memory vector index rebuilt; hybrid search resumed")
	return nil
}

// checkVectors is the cheap check (see the top of this file). It returns
// the number of stored vectors, or an error saying what is wrong.
func (s *Store) checkVectors(ctx context.Context, q queryer) (int, error) {
	have := map[string]bool{}
	rows, err := q.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE name = 'vec_chunks' OR name LIKE 'vec\\_chunks\\_%' ESCAPE '\\'")
	if err != nil {
		return 0, fmt.Errorf("list vector tables: %w", err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return 0, fmt.Errorf("list vector tables: %w", err)
		}
		have[n] = true
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return 0, fmt.Errorf("list vector tables: %w", err)
	}
	for _, t := range append([]string{"vec_chunks"}, vecShadow...) {
		if !have[t] {
			return 0, fmt.Errorf("table %s is missing", t)
		}
	}
	var n int
	if err := q.QueryRowContext(ctx, "SELECT count(*) FROM vec_chunks").Scan(&n); err != nil {
		return 0, fmt.Errorf("count vectors: %w", err)
	}
	// sqlite-vec's chunks: one validity bit per live row, one blob of
	// size·dims float32 per chunk.
	rows, err = q.QueryContext(ctx, `SELECT c.chunk_id, c.size, c.validity, length(c.rowids), length(v.vectors)
		FROM vec_chunks_chunks c LEFT JOIN vec_chunks_vector_chunks00 v ON v.rowid = c.chunk_id`)
	if err != nil {
		return 0, fmt.Errorf("read vector chunks: %w", err)
	}
	live := 0
	for rows.Next() {
		var id, size int64
		var validity []byte
		var idsLen, blobLen sql.NullInt64
		if err := rows.Scan(&id, &size, &validity, &idsLen, &blobLen); err != nil {
			rows.Close()
			return 0, fmt.Errorf("read vector chunks: %w", err)
		}
		if !idsLen.Valid || idsLen.Int64 != size*8 || int64(len(validity))*8 < size {
			rows.Close()
			return 0, fmt.Errorf("vector chunk %d: rowids or validity of the wrong size", id)
		}
		if !blobLen.Valid || blobLen.Int64 != size*int64(s.meta.Dims)*4 {
			rows.Close()
			return 0, fmt.Errorf("vector chunk %d: blob holds %d bytes, want %d", id, blobLen.Int64, size*int64(s.meta.Dims)*4)
		}
		for _, b := range validity {
			live += bits.OnesCount8(b)
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return 0, fmt.Errorf("read vector chunks: %w", err)
	}
	if live != n {
		return 0, fmt.Errorf("%d vectors are listed but %d are marked valid", n, live)
	}
	var chunks int
	if err := q.QueryRowContext(ctx, "SELECT count(*) FROM chunks").Scan(&chunks); err != nil {
		return 0, fmt.Errorf("count chunks: %w", err)
	}
	vl, err := s.vectorless(ctx, q)
	if err != nil {
		return 0, err
	}
	if chunks-n != vl {
		return 0, fmt.Errorf("%d chunks and %d vectors, but %d chunks were stored without a vector", chunks, n, vl)
	}
	return n, nil
}

// vectorless reads the vectorlessKey count; an index written before it
// existed gets it computed (chunks without a row in vec_chunks) and stored.
func (s *Store) vectorless(ctx context.Context, q queryer) (int, error) {
	var v string
	err := q.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", vectorlessKey).Scan(&v)
	if err == nil {
		n, perr := strconv.Atoi(v)
		if perr != nil {
			return 0, fmt.Errorf("meta %s: %w", vectorlessKey, perr)
		}
		return n, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("meta %s: %w", vectorlessKey, err)
	}
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM chunks c
		WHERE NOT EXISTS (SELECT 1 FROM vec_chunks_rowids r WHERE r.rowid = c.id)`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count chunks without vectors: %w", err)
	}
	if ex, ok := q.(execer); ok {
		if _, err := ex.ExecContext(ctx, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", vectorlessKey, strconv.Itoa(n)); err != nil {
			return 0, fmt.Errorf("meta %s: %w", vectorlessKey, err)
		}
	}
	return n, nil
}

// addVectorless adds delta to the vectorlessKey count inside tx.
func addVectorless(ctx context.Context, tx execer, delta int) error {
	if delta == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = ?", delta, vectorlessKey); err != nil {
		return fmt.Errorf("count chunks without vectors: %w", err)
	}
	return nil
}

// VerifyVectors is the deep check: it reads every stored vector and checks
// that it has the index's dims, is finite and has unit length (every
// Embedder returns L2-normalised vectors), and that it belongs to a stored
// chunk; then the cheap check of Open. A failure records a vector fault
// (and is returned wrapping ErrVectorsDamaged). It runs once per open
// Store: later calls return nil at once while no fault is recorded. Its
// cost is one read of the vector table (~15 MB at 10,000 chunks of 384
// dims).
func (s *Store) VerifyVectors(ctx context.Context) error {
	if s.isClosed() {
		return ErrClosed
	}
	if err := s.VectorFault(); err != nil {
		return err
	}
	if s.vec.verified.Load() || !s.compt {
		return nil
	}
	var err error
	if s.useQuant() {
		// The quantized copy's load reads and checks every vector.
		if err = s.ensureQuant(ctx); err == nil {
			_, err = s.checkVectors(ctx, s.db)
			err = vecErr(err, "check vectors")
		}
	} else {
		err = s.verifyVectors(ctx)
	}
	if err == nil {
		s.vec.verified.Store(true)
		return nil
	}
	if !isVectorError(ctx, err) {
		return err
	}
	s.markVectorFault(err)
	return s.VectorFault()
}

func (s *Store) verifyVectors(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT v.rowid, v.embedding, c.id IS NOT NULL
		FROM vec_chunks v LEFT JOIN chunks c ON c.id = v.rowid`)
	if err != nil {
		return vecErr(err, "read vectors")
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var blob []byte
		var known bool
		if err := rows.Scan(&id, &blob, &known); err != nil {
			return vecErr(err, "read vectors")
		}
		if !known {
			return &vectorError{fmt.Errorf("vector %d belongs to no chunk", id)}
		}
		if err := checkVector(id, decodeVector(blob), s.meta.Dims); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return vecErr(err, "read vectors")
	}
	rows.Close()
	_, err = s.checkVectors(ctx, s.db)
	return vecErr(err, "check vectors")
}

// checkVector says what is wrong with stored vector v of chunk id (nil:
// nothing): wrong dims, a value that is not finite, or a length other than 1.
func checkVector(id int64, v []float32, dims int) error {
	if len(v) != dims {
		return &vectorError{fmt.Errorf("vector of chunk %d has %d dims, index has %d", id, len(v), dims)}
	}
	var n float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return &vectorError{fmt.Errorf("vector of chunk %d holds a value that is not a finite number", id)}
		}
		n += float64(x) * float64(x)
	}
	if math.Abs(n-1) > 1e-3 {
		return &vectorError{fmt.Errorf("vector of chunk %d has length %.4g, want 1", id, math.Sqrt(n))}
	}
	return nil
}

// ResetVectors drops the vector table and everything sqlite-vec keeps
// beside it, however damaged, and creates it again empty: every chunk is
// then without a vector until [Store.PutVectors] stores one. The fault
// stays recorded (searches stay keyword-only) until [Store.ClearVectorFault].
// It fails during a bulk write.
func (s *Store) ResetVectors(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	if s.btx != nil {
		return errors.New("reset vectors: a bulk write is open")
	}
	if s.VectorFault() == nil {
		s.markVectorFault(errors.New("reset requested"))
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("reset vectors: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	rows, err := tx.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'vec\\_chunks\\_%' ESCAPE '\\'")
	if err != nil {
		return fmt.Errorf("reset vectors: %w", err)
	}
	var shadow []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return fmt.Errorf("reset vectors: %w", err)
		}
		shadow = append(shadow, n)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("reset vectors: %w", err)
	}
	// Dropping the vec0 table drops its shadow tables and fails when one
	// is missing: drop them all, put empty stand-ins in their place, then
	// drop the vec0 table (which takes the stand-ins with it).
	for _, n := range shadow {
		if _, err := tx.ExecContext(ctx, "DROP TABLE "+quoteIdent(n)); err != nil {
			return fmt.Errorf("reset vectors: drop %s: %w", n, err)
		}
	}
	for _, n := range vecShadow {
		if _, err := tx.ExecContext(ctx, "CREATE TABLE "+quoteIdent(n)+"(x)"); err != nil {
			return fmt.Errorf("reset vectors: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS vec_chunks"); err != nil {
		return fmt.Errorf("reset vectors: drop vec_chunks: %w", err)
	}
	for _, n := range vecShadow {
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+quoteIdent(n)); err != nil {
			return fmt.Errorf("reset vectors: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, vecTableSQL(s.meta.Dims)); err != nil {
		return fmt.Errorf("reset vectors: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO meta(key, value) SELECT ?, count(*) FROM chunks", vectorlessKey); err != nil {
		return fmt.Errorf("reset vectors: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reset vectors: %w", err)
	}
	s.quant.reset()
	s.log.Info("memory vector index emptied for a rebuild from the stored chunks")
	return nil
}

func quoteIdent(n string) string { return `"` + strings.ReplaceAll(n, `"`, `""`) + `"` }

// vecTableSQL creates the vec0 table for dims.
func vecTableSQL(dims int) string {
	return fmt.Sprintf("CREATE VIRTUAL TABLE IF NOT EXISTS vec_chunks USING vec0(embedding float[%d] distance_metric=cosine)", dims)
}

// VectorRow is one chunk of a vector rebuild: [Store.MissingVectors] fills
// ID, Hash and Text; the caller sets Vector (the index's dims, unit length;
// all zero: the chunk stays without a vector) for [Store.PutVectors].
type VectorRow struct {
	ID     int64
	Hash   string
	Text   string
	Vector []float32
}

// MissingVectors lists up to limit chunks with an id above after that have
// no stored vector, by id.
func (s *Store) MissingVectors(ctx context.Context, after int64, limit int) ([]VectorRow, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, `SELECT c.id, c.hash, c.text FROM chunks c
		WHERE c.id > ? AND NOT EXISTS (SELECT 1 FROM vec_chunks_rowids r WHERE r.rowid = c.id)
		ORDER BY c.id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list chunks without vectors: %w", err)
	}
	defer rows.Close()
	var out []VectorRow
	for rows.Next() {
		var r VectorRow
		if err := rows.Scan(&r.ID, &r.Hash, &r.Text); err != nil {
			return nil, fmt.Errorf("list chunks without vectors: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list chunks without vectors: %w", err)
	}
	return out, nil
}

// PutVectors stores the vectors of chunks listed by MissingVectors, in one
// transaction, and caches them (unless Options.NoEmbeddingCache). A chunk
// that was deleted or rewritten meanwhile (no chunk with that id and hash),
// that has a vector by now, or whose Vector is all zero is left alone. It
// returns the number of vectors stored. It fails during a bulk write.
func (s *Store) PutVectors(ctx context.Context, rows []VectorRow) (int, error) {
	for _, r := range rows {
		if len(r.Vector) != s.meta.Dims {
			return 0, fmt.Errorf("put vectors: chunk %d has %d dims, index has %d", r.ID, len(r.Vector), s.meta.Dims)
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return 0, ErrClosed
	}
	if s.btx != nil {
		return 0, errors.New("put vectors: a bulk write is open")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("put vectors: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	var ops []qop
	for _, r := range rows {
		if isZero(r.Vector) {
			continue
		}
		var path string
		var has bool
		err := tx.QueryRowContext(ctx, `SELECT c.path, EXISTS (SELECT 1 FROM vec_chunks_rowids v WHERE v.rowid = c.id)
			FROM chunks c WHERE c.id = ? AND c.hash = ?`, r.ID, r.Hash).Scan(&path, &has)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && has) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("put vectors: %w", err)
		}
		blob := encodeVector(r.Vector)
		if _, err := tx.ExecContext(ctx, "INSERT INTO vec_chunks(rowid, embedding) VALUES(?, ?)", r.ID, blob); err != nil {
			return 0, fmt.Errorf("put vectors: %w", err)
		}
		if !s.opts.NoEmbeddingCache {
			if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO embedding_cache(provider, model, dims, hash, embedding) VALUES(?, ?, ?, ?, ?)",
				s.opts.Provider, s.opts.Model, s.opts.Dims, r.Hash, blob); err != nil {
				return 0, fmt.Errorf("put vectors: cache embedding: %w", err)
			}
		}
		ops = append(ops, qop{id: r.ID, vec: r.Vector, path: path})
	}
	if err := addVectorless(ctx, tx, -len(ops)); err != nil {
		return 0, fmt.Errorf("put vectors: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("put vectors: %w", err)
	}
	s.quant.apply(ops)
	return len(ops), nil
}
