package index

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
)

// FileRecord describes one indexed Markdown file.
type FileRecord struct {
	Path  string // workspace-relative, forward slashes
	Hash  string // hex SHA-256 of the file content
	MTime int64  // modification time, Unix ms
	Size  int64  // bytes
	Layer string // "global" | "role" | "session"
	Role  string // role name for layer "role", else ""
	// Chunks is the number of stored chunks (filled by Files/File; ignored by PutFile).
	Chunks int
}

// ChunkRecord is one chunk to store. Lines are 1-based and inclusive; Hash is
// the hex SHA-256 of Text; Vector must have Meta().Dims elements and should be
// L2-normalised; an all-zero Vector is allowed and makes the chunk
// keyword-only (it is neither searchable by vector nor cached).
type ChunkRecord struct {
	StartLine int
	EndLine   int
	Text      string
	Hash      string
	Vector    []float32
	// Tokens is Text analysed beforehand by Store.Analyze (optional): a
	// caller that prepares files on other goroutines moves the analysis out
	// of PutFile, which holds the write lock.
	Tokens *Tokens
}

// Tokens is a chunk's text analysed by the keyword index's analyzer
// (Store.Analyze).
type Tokens struct {
	ts   analysis.TokenStream
	text string
}

// Analyze analyses text as PutFile would, for ChunkRecord.Tokens. It
// takes no lock and is safe for concurrent use.
func (s *Store) Analyze(text string) *Tokens {
	return &Tokens{ts: s.analyzeText(text), text: text}
}

// Files lists every indexed file with its chunk count, ordered by path.
func (s *Store) Files(ctx context.Context) ([]FileRecord, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	rows, err := s.db.QueryContext(ctx, `SELECT f.path, f.hash, f.mtime, f.size, f.layer, f.role,
		(SELECT count(*) FROM chunks c WHERE c.path = f.path) FROM files f ORDER BY f.path`)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	defer rows.Close()
	var out []FileRecord
	for rows.Next() {
		var f FileRecord
		if err := rows.Scan(&f.Path, &f.Hash, &f.MTime, &f.Size, &f.Layer, &f.Role, &f.Chunks); err != nil {
			return nil, fmt.Errorf("list files: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	return out, nil
}

// File returns the record of one path; ok is false when it is not indexed.
// During a bulk write it sees the writes not yet committed (and waits for
// the writer's current file write to end).
func (s *Store) File(ctx context.Context, path string) (f FileRecord, ok bool, err error) {
	if s.isClosed() {
		return f, false, ErrClosed
	}
	q, release := s.reader()
	defer release()
	return fileRecord(ctx, q, path)
}

// CommittedFile is [Store.File] as of the last commit: it does not see the
// open bulk group and never waits for the writer. It is for work prepared
// ahead of the writer (the writer checks again with File).
func (s *Store) CommittedFile(ctx context.Context, path string) (f FileRecord, ok bool, err error) {
	if s.isClosed() {
		return f, false, ErrClosed
	}
	return fileRecord(ctx, s.db, path)
}

func fileRecord(ctx context.Context, q queryer, path string) (f FileRecord, ok bool, err error) {
	err = q.QueryRowContext(ctx, `SELECT f.path, f.hash, f.mtime, f.size, f.layer, f.role,
		(SELECT count(*) FROM chunks c WHERE c.path = f.path) FROM files f WHERE f.path = ?`, path).
		Scan(&f.Path, &f.Hash, &f.MTime, &f.Size, &f.Layer, &f.Role, &f.Chunks)
	if errors.Is(err, sql.ErrNoRows) {
		return FileRecord{}, false, nil
	}
	if err != nil {
		return FileRecord{}, false, fmt.Errorf("read file record: %w", err)
	}
	return f, true, nil
}

// CachedEmbeddings returns the cached embeddings of the given chunk hashes for
// this Store's provider, model and dims (SPEC §4.2 embedding cache). Missing
// hashes are absent from the map; with Options.NoEmbeddingCache all are.
// During a bulk write it sees the writes not yet committed (and waits for
// the writer's current file write to end).
func (s *Store) CachedEmbeddings(ctx context.Context, hashes []string) (map[string][]float32, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	q, release := s.reader()
	defer release()
	return s.cachedEmbeddings(ctx, q, hashes)
}

// CommittedEmbeddings is [Store.CachedEmbeddings] as of the last commit: it
// does not see the open bulk group and never waits for the writer. It is
// for work prepared ahead of the writer.
func (s *Store) CommittedEmbeddings(ctx context.Context, hashes []string) (map[string][]float32, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return s.cachedEmbeddings(ctx, s.db, hashes)
}

func (s *Store) cachedEmbeddings(ctx context.Context, q queryer, hashes []string) (map[string][]float32, error) {
	if s.opts.NoEmbeddingCache {
		return map[string][]float32{}, nil
	}
	out := make(map[string][]float32, len(hashes))
	const step = 500
	for i := 0; i < len(hashes); i += step {
		part := hashes[i:min(i+step, len(hashes))]
		args := []any{s.opts.Provider, s.opts.Model, s.opts.Dims}
		for _, h := range part {
			args = append(args, h)
		}
		rows, err := q.QueryContext(ctx, "SELECT hash, embedding FROM embedding_cache WHERE provider = ? AND model = ? AND dims = ? AND hash IN ("+placeholders(len(part))+")", args...)
		if err != nil {
			return nil, fmt.Errorf("read embedding cache: %w", err)
		}
		for rows.Next() {
			var h string
			var blob []byte
			if err := rows.Scan(&h, &blob); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read embedding cache: %w", err)
			}
			if v := decodeVector(blob); len(v) == s.opts.Dims {
				out[h] = v
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read embedding cache: %w", err)
		}
	}
	return out, nil
}

// PutFile replaces the chunks of f.Path with chunks in one SQLite transaction
// (chunks, vectors, embedding cache, journal, and the files row last) followed
// by one Bleve batch (in bulk mode: queued into the pending batch, see
// [Store.BeginBulk]). On a crash between the two, the journal makes the next
// Open (or the next write) bring Bleve up to date.
func (s *Store) PutFile(ctx context.Context, f FileRecord, chunks []ChunkRecord) error {
	if !s.compt {
		return ErrIncompatible
	}
	for i, c := range chunks {
		if len(c.Vector) != s.meta.Dims {
			return fmt.Errorf("put file %s: chunk %d has %d dims, index has %d", f.Path, i, len(c.Vector), s.meta.Dims)
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	if err := s.beforeWrite(ctx); err != nil {
		return fmt.Errorf("put file %s: %w", f.Path, err)
	}
	err := s.putFileLocked(ctx, f, chunks)
	if isVectorError(ctx, err) {
		// The file's write was undone; write it again without vectors.
		s.markVectorFault(err)
		err = s.putFileLocked(ctx, f, chunks)
	}
	return err
}

// putFileLocked is PutFile's write; while a vector fault is recorded it
// leaves the vector table alone (the rebuild fills it from the chunks).
// Callers hold wmu.
func (s *Store) putFileLocked(ctx context.Context, f FileRecord, chunks []ChunkRecord) error {
	withVec := s.vec.fault.Load() == nil
	tx, end, err := s.fileTx(ctx)
	if err != nil {
		return fmt.Errorf("put file %s: %w", f.Path, err)
	}
	defer end(false) //nolint:errcheck // undoes this file's write unless committed below
	oldIDs, ops, err := deleteChunksTx(ctx, tx, f.Path, withVec)
	if err != nil {
		return fmt.Errorf("put file %s: %w", f.Path, err)
	}
	stmts, err := prepareAll(ctx, tx,
		"INSERT INTO chunks(path, start_line, end_line, text, hash) VALUES(?, ?, ?, ?, ?)",
		"INSERT OR IGNORE INTO embedding_cache(provider, model, dims, hash, embedding) VALUES(?, ?, ?, ?, ?)",
		"INSERT OR REPLACE INTO bleve_journal(chunk_id, op) VALUES(?, ?)")
	if err != nil {
		return fmt.Errorf("put file %s: %w", f.Path, err)
	}
	defer closeAll(stmts)
	insChunk, insCache, insJournal := stmts[0], stmts[1], stmts[2]
	var insVec *sql.Stmt
	if withVec {
		if insVec, err = tx.PrepareContext(ctx, "INSERT INTO vec_chunks(rowid, embedding) VALUES(?, ?)"); err != nil {
			return fmt.Errorf("put file %s: %w", f.Path, vecErr(err, "insert vector"))
		}
		defer insVec.Close()
	}
	// vectorless counts the chunks without a stored vector (vectors.go):
	// the new zero vectors, less the old chunks that had none.
	vectorless := len(ops) - len(oldIDs)

	newIDs := make([]int64, len(chunks))
	for i, c := range chunks {
		res, err := insChunk.ExecContext(ctx, f.Path, c.StartLine, c.EndLine, c.Text, c.Hash)
		if err != nil {
			return fmt.Errorf("put file %s: insert chunk: %w", f.Path, err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("put file %s: %w", f.Path, err)
		}
		newIDs[i] = id
		blob := encodeVector(c.Vector)
		// A zero vector (text without features, or a chunk stored without
		// a vector because the provider did not answer) has no direction:
		// it is not stored in vec0, so the chunk is found by keywords
		// only, and not cached, so that it is embedded when it can be.
		if isZero(c.Vector) {
			vectorless++
		}
		if !isZero(c.Vector) {
			if withVec {
				if _, err := insVec.ExecContext(ctx, id, blob); err != nil {
					return fmt.Errorf("put file %s: %w", f.Path, vecErr(err, "insert vector"))
				}
				ops = append(ops, qop{id: id, vec: slices.Clone(c.Vector), path: f.Path})
			}
			if !s.opts.NoEmbeddingCache {
				if _, err := insCache.ExecContext(ctx, s.opts.Provider, s.opts.Model, s.opts.Dims, c.Hash, blob); err != nil {
					return fmt.Errorf("put file %s: cache embedding: %w", f.Path, err)
				}
			}
		}
		if _, err := insJournal.ExecContext(ctx, id, opIndex); err != nil {
			return fmt.Errorf("put file %s: journal: %w", f.Path, err)
		}
	}
	for _, id := range oldIDs {
		if _, err := insJournal.ExecContext(ctx, id, opDelete); err != nil {
			return fmt.Errorf("put file %s: journal: %w", f.Path, err)
		}
	}
	tokens := 0
	streams := make([]analysis.TokenStream, len(chunks))
	for i, c := range chunks {
		if c.Tokens != nil && c.Tokens.text == c.Text {
			streams[i] = c.Tokens.ts
		} else {
			streams[i] = s.analyzeText(c.Text)
		}
		tokens += len(streams[i])
	}
	if withVec {
		if err := addVectorless(ctx, tx, vectorless); err != nil {
			return fmt.Errorf("put file %s: %w", f.Path, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO files(path, hash, mtime, size, layer, role, chunks, tokens) VALUES(?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(path) DO UPDATE SET hash = excluded.hash, mtime = excluded.mtime, size = excluded.size,
		layer = excluded.layer, role = excluded.role, chunks = excluded.chunks, tokens = excluded.tokens`,
		f.Path, f.Hash, f.MTime, f.Size, f.Layer, f.Role, len(chunks), tokens); err != nil {
		return fmt.Errorf("put file %s: files row: %w", f.Path, err)
	}
	if err := end(true); err != nil {
		return fmt.Errorf("put file %s: commit: %w", f.Path, err)
	}
	s.committedVectors(ops)
	s.committedStat(fileStat{path: f.Path, chunks: uint64(len(chunks)), tokens: uint64(tokens)})

	texts := make([]string, len(chunks))
	for i, c := range chunks {
		texts[i] = c.Text
	}
	if err := s.keywordOps(ctx, oldIDs, newIDs, texts, streams, f.Path); err != nil {
		return fmt.Errorf("put file %s: %w", f.Path, err)
	}
	return nil
}

// execer runs a statement on the database or inside a transaction.
type execer interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}

// writer returns where a single write statement runs: the open bulk
// transaction, which holds SQLite's write lock, else the database. The
// caller holds wmu.
func (s *Store) writer() execer {
	if s.btx != nil {
		return s.btx
	}
	return s.db
}

// TouchFile records a new mtime and size for an unchanged (same hash) file.
func (s *Store) TouchFile(ctx context.Context, path string, mtime, size int64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	ex := s.writer()
	if _, err := ex.ExecContext(ctx, "UPDATE files SET mtime = ?, size = ? WHERE path = ?", mtime, size, path); err != nil {
		return fmt.Errorf("touch file %s: %w", path, err)
	}
	return nil
}

// DeleteFile removes a file and its chunks (keyword index: as for PutFile).
// Deleting an unknown path is not an error.
func (s *Store) DeleteFile(ctx context.Context, path string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	if err := s.beforeWrite(ctx); err != nil {
		return fmt.Errorf("delete file %s: %w", path, err)
	}
	err := s.deleteFileLocked(ctx, path)
	if isVectorError(ctx, err) {
		s.markVectorFault(err)
		err = s.deleteFileLocked(ctx, path)
	}
	return err
}

// deleteFileLocked is DeleteFile's write (see putFileLocked). Callers hold
// wmu.
func (s *Store) deleteFileLocked(ctx context.Context, path string) error {
	withVec := s.vec.fault.Load() == nil
	tx, end, err := s.fileTx(ctx)
	if err != nil {
		return fmt.Errorf("delete file %s: %w", path, err)
	}
	defer end(false) //nolint:errcheck // undoes this file's write unless committed below
	ids, ops, err := deleteChunksTx(ctx, tx, path, withVec)
	if err != nil {
		return fmt.Errorf("delete file %s: %w", path, err)
	}
	if withVec {
		if err := addVectorless(ctx, tx, len(ops)-len(ids)); err != nil {
			return fmt.Errorf("delete file %s: %w", path, err)
		}
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO bleve_journal(chunk_id, op) VALUES(?, ?)", id, opDelete); err != nil {
			return fmt.Errorf("delete file %s: journal: %w", path, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM files WHERE path = ?", path); err != nil {
		return fmt.Errorf("delete file %s: %w", path, err)
	}
	if err := end(true); err != nil {
		return fmt.Errorf("delete file %s: commit: %w", path, err)
	}
	s.committedVectors(ops)
	s.committedStat(fileStat{path: path, gone: true})
	if err := s.keywordOps(ctx, ids, nil, nil, nil, ""); err != nil {
		return fmt.Errorf("delete file %s: %w", path, err)
	}
	return nil
}

// deleteChunksTx removes the chunks and (withVec) vectors of path and
// returns their ids and the deletions of the vectors that were stored (for
// the quantized copy).
func deleteChunksTx(ctx context.Context, tx *sql.Tx, path string, withVec bool) ([]int64, []qop, error) {
	rows, err := tx.QueryContext(ctx, "SELECT id FROM chunks WHERE path = ?", path)
	if err != nil {
		return nil, nil, fmt.Errorf("select chunks: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("select chunks: %w", err)
		}
		ids = append(ids, id)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("select chunks: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil, nil
	}
	var ops []qop
	if withVec {
		del, err := tx.PrepareContext(ctx, "DELETE FROM vec_chunks WHERE rowid = ?")
		if err != nil {
			return nil, nil, vecErr(err, "delete vectors")
		}
		defer del.Close()
		for _, id := range ids {
			res, err := del.ExecContext(ctx, id)
			if err != nil {
				return nil, nil, vecErr(err, "delete vectors")
			}
			if n, err := res.RowsAffected(); err == nil && n > 0 {
				ops = append(ops, qop{id: id})
			}
		}
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM chunks WHERE path = ?", path); err != nil {
		return nil, nil, fmt.Errorf("delete chunks: %w", err)
	}
	return ids, ops, nil
}

// applyBatch runs a Bleve batch and then clears the journal rows it covered.
func (s *Store) applyBatch(ctx context.Context, b *bleve.Batch, ids []int64) error {
	if b.Size() > 0 {
		if err := s.bl.Batch(b); err != nil {
			return fmt.Errorf("bleve batch: %w", err)
		}
	}
	return s.clearJournal(ctx, ids)
}

func (s *Store) clearJournal(ctx context.Context, ids []int64) error {
	const step = 500
	for i := 0; i < len(ids); i += step {
		part := ids[i:min(i+step, len(ids))]
		args := make([]any, len(part))
		for j, id := range part {
			args[j] = id
		}
		if _, err := s.db.ExecContext(ctx, "DELETE FROM bleve_journal WHERE chunk_id IN ("+placeholders(len(part))+")", args...); err != nil {
			return fmt.Errorf("clear journal: %w", err)
		}
	}
	return nil
}

// replayJournal applies pending Bleve operations left by an interrupted write.
// Callers hold wmu (or are Open).
func (s *Store) replayJournal(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT j.chunk_id, j.op, c.text, c.path FROM bleve_journal j
		LEFT JOIN chunks c ON c.id = j.chunk_id`)
	if err != nil {
		return fmt.Errorf("replay journal: %w", err)
	}
	b := s.bl.NewBatch()
	var ids []int64
	for rows.Next() {
		var id int64
		var op int
		var text, path sql.NullString
		if err := rows.Scan(&id, &op, &text, &path); err != nil {
			rows.Close()
			return fmt.Errorf("replay journal: %w", err)
		}
		ids = append(ids, id)
		if op == opIndex && text.Valid {
			if err := s.indexChunk(b, id, text.String, path.String); err != nil {
				rows.Close()
				return fmt.Errorf("replay journal: %w", err)
			}
		} else {
			b.Delete(docID(id))
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("replay journal: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	s.log.Info("memory keyword index: replaying interrupted writes", "ops", len(ids))
	return s.applyBatch(ctx, b, ids)
}

// reconcile brings Bleve in line with SQLite after Open.
func (s *Store) reconcile(ctx context.Context) error {
	if s.blFresh {
		return s.refillBleve(ctx)
	}
	if err := s.replayJournal(ctx); err != nil {
		return err
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM chunks").Scan(&n); err != nil {
		return fmt.Errorf("count chunks: %w", err)
	}
	dc, err := s.bl.DocCount()
	if err != nil {
		return fmt.Errorf("count bleve docs: %w", err)
	}
	if int(dc) == n {
		return nil
	}
	s.log.Warn("memory keyword index out of step with SQLite; reconciling", "chunks", n, "docs", dc)
	// All Bleve ids.
	req := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), int(dc), 0, false)
	res, err := s.bl.SearchInContext(ctx, req)
	if err != nil {
		return fmt.Errorf("list bleve docs: %w", err)
	}
	inBleve := make(map[int64]bool, len(res.Hits))
	b := s.bl.NewBatch()
	for _, h := range res.Hits {
		id, err := strconv.ParseInt(h.ID, 10, 64)
		if err != nil {
			b.Delete(h.ID)
			continue
		}
		inBleve[id] = true
	}
	rows, err := s.db.QueryContext(ctx, "SELECT id, text, path FROM chunks")
	if err != nil {
		return fmt.Errorf("list chunks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var text, path string
		if err := rows.Scan(&id, &text, &path); err != nil {
			return fmt.Errorf("list chunks: %w", err)
		}
		if inBleve[id] {
			delete(inBleve, id)
			continue
		}
		if err := s.indexChunk(b, id, text, path); err != nil {
			return fmt.Errorf("reindex chunk: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list chunks: %w", err)
	}
	for id := range inBleve {
		b.Delete(docID(id))
	}
	if b.Size() > 0 {
		if err := s.bl.Batch(b); err != nil {
			return fmt.Errorf("bleve batch: %w", err)
		}
	}
	return nil
}

func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// encodeVector serialises a float32 vector as sqlite-vec's little-endian BLOB.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func isZero(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

func decodeVector(b []byte) []float32 {
	if len(b)%4 != 0 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// HasFilesUnder reports whether any indexed path lies below the folder dir
// (workspace-relative, forward slashes, e.g. "memory"). During a bulk write
// it sees the writes not yet committed.
func (s *Store) HasFilesUnder(ctx context.Context, dir string) (bool, error) {
	if s.isClosed() {
		return false, ErrClosed
	}
	q, release := s.reader()
	defer release()
	// '0' is the byte after '/': the range holds exactly the paths "dir/...".
	var n int
	if err := q.QueryRowContext(ctx, "SELECT EXISTS(SELECT 1 FROM files WHERE path >= ? AND path < ?)", dir+"/", dir+"0").Scan(&n); err != nil {
		return false, fmt.Errorf("look up files under %s: %w", dir, err)
	}
	return n == 1, nil
}

// isIdentityKey reports whether key is one of the meta keys that define the
// index's identity (written by Open, compared by [Store.Compatible]).
func isIdentityKey(key string) bool {
	switch key {
	case "provider", "model", "dims", "chunking", "schema", "generation":
		return true
	}
	return false
}

// MetaValue returns a value stored with [Store.SetMetaValue]; ok is false
// when key was never set. During a bulk write it sees the writes not yet
// committed.
func (s *Store) MetaValue(ctx context.Context, key string) (value string, ok bool, err error) {
	if s.isClosed() {
		return "", false, ErrClosed
	}
	q, release := s.reader()
	defer release()
	err = q.QueryRowContext(ctx, "SELECT value FROM meta WHERE key = ?", key).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read meta %s: %w", key, err)
	}
	return value, true, nil
}

// SetMetaValue stores a caller-defined value in the meta table (for example
// the memory engine's record of its last sync), next to the index's identity
// and in the same file, so that it survives restarts and is replaced with
// the index by a rebuild. The identity keys (provider, model, dims,
// chunking, schema, generation) are refused. In bulk mode the value is
// written in the open group and becomes durable with it.
func (s *Store) SetMetaValue(ctx context.Context, key, value string) error {
	if key == "" || isIdentityKey(key) || key == vectorlessKey {
		return fmt.Errorf("write meta %q: reserved or empty key", key)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.isClosed() {
		return ErrClosed
	}
	ex := s.writer()
	if _, err := ex.ExecContext(ctx, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", key, value); err != nil {
		return fmt.Errorf("write meta %s: %w", key, err)
	}
	return nil
}

// prepareAll prepares each query on tx; on error it closes those prepared.
func prepareAll(ctx context.Context, tx *sql.Tx, queries ...string) ([]*sql.Stmt, error) {
	stmts := make([]*sql.Stmt, 0, len(queries))
	for _, q := range queries {
		st, err := tx.PrepareContext(ctx, q)
		if err != nil {
			closeAll(stmts)
			return nil, err
		}
		stmts = append(stmts, st)
	}
	return stmts, nil
}

// closeAll closes prepared statements.
func closeAll(stmts []*sql.Stmt) {
	for _, st := range stmts {
		st.Close()
	}
}
