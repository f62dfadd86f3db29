// Package index is the derived search index of one Atrium workspace (SPEC §4.2).
//
// A Store keeps everything under one directory:
//
//	<Dir>/index.db   SQLite (go-sqlite3 + sqlite-vec): files, chunks, meta,
//	                 embedding_cache, bleve_journal and the vec0 table vec_chunks
//	<Dir>/bleve/     Bleve full-text index (BM25) over the chunk texts
//
// The Markdown workspace is the source of truth; the index can always be thrown
// away and rebuilt from it. The SQLite file is the primary copy of the index:
// the Bleve index holds one document per chunk (document id = chunk id in
// decimal) and is reconciled with SQLite when a Store is opened (a journal of
// pending Bleve operations is replayed, and a differing document count triggers
// a full id reconciliation), so a process killed between the SQLite commit and
// the Bleve batch leaves a state that the next Open repairs. Full syncs use
// bulk mode ([Store.BeginBulk]): several files per SQLite transaction and per
// Bleve batch, with the same journal guarantees.
//
// A Store records the embedding provider, model, dimensions and chunking
// parameters it was built with (table meta). A Store whose meta differs from
// the Options it was opened with is "incompatible": it can still answer
// keyword queries, refuses writes, and the caller rebuilds a new index with
// [OpenStaging] and swaps it in with [Promote]. Vectors of two dimensions never
// mix.
//
// Callers may keep their own small records in the meta table
// ([Store.SetMetaValue], e.g. the memory engine's record of its last sync);
// they live and die with the index and do not affect compatibility.
//
// Corrupt or unreadable index files are moved aside (renamed to
// "<name>.corrupt-<unix>") with a logged message and recreated empty; the
// caller then re-indexes from the Markdown.
package index

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sqlite_vec "github.com/asg017/sqlite-vec-go-bindings/cgo"
	"github.com/blevesearch/bleve/v2"
	_ "github.com/mattn/go-sqlite3" // database/sql driver "sqlite3"
)

// SchemaVersion is the version of the SQLite schema written by this package.
// A different version in an existing index.db makes the Store incompatible
// (rebuilt by the caller). 2: files.chunks and files.tokens (the scope
// statistics of the keyword leg, scope.go).
const SchemaVersion = 2

// File and directory names inside Options.Dir.
const (
	DBName     = "index.db"
	BleveName  = "bleve"
	StagingDir = "staging"
)

// Errors returned by the Store. They are wrapped with context; test with errors.Is.
var (
	// ErrIncompatible is returned by writes to a Store whose meta (provider,
	// model, dims, chunking, schema) differs from its Options.
	ErrIncompatible = errors.New("index: incompatible with the configured embedder or chunking")
	// ErrClosed is returned by any call on a closed Store.
	ErrClosed = errors.New("index: closed")
)

// vecOnce guards the process-wide registration of the sqlite-vec extension.
// It is the only mutable package-level state.
var vecOnce sync.Once

// Options configure a Store.
type Options struct {
	// Dir is the index directory (required). It is created if missing.
	Dir string
	// Provider and Model name the embedder (e.g. "builtin", "builtin-hash-v1").
	Provider string
	Model    string
	// Dims is the embedding dimension (required, > 0).
	Dims int
	// Chunking describes the chunking parameters (opaque, e.g. "400/80");
	// a change makes the Store incompatible.
	Chunking string
	// Logger receives structured logs; default slog.Default().
	Logger *slog.Logger
	// QuantizeAbove: searches of an index holding more stored vectors use
	// the in-memory quantized copy (quant.go) instead of sqlite-vec's exact
	// scan. 0 means DefaultQuantizeAbove (10,000); negative means never.
	QuantizeAbove int
	// PostingsCacheBytes bounds the memory of the decoded posting lists the
	// keyword leg keeps between searches (postings.go). 0 means 1 KiB per
	// indexed chunk, within 64 MiB … 1 GiB (PostingsCachePerChunk);
	// negative keeps none (long lists are then walked with Bleve's
	// iterator, short ones decoded per search).
	PostingsCacheBytes int64
	// NoEmbeddingCache: the Store neither writes chunk vectors into the
	// embedding cache nor reads them from it (CachedEmbeddings and
	// CommittedEmbeddings find nothing, and rows written before are left
	// unused). It is for embedders that are cheaper to run than the cache is
	// to keep: package memory sets it for the builtin embedder
	// (embed.Builtin.Local). There the cache's inserts at random keys took a
	// tenth to a sixth of a full sync at 100k chunks, and its rows about
	// 4.6 KiB a chunk on disk, 57 % of the SQLite file (docs/BENCHMARKS.md).
	// Default false: vectors are cached by provider, model, dims and content
	// hash (SPEC §4.2).
	NoEmbeddingCache bool
	// OnVectorFault, if set, is called once each time the Store finds its
	// vector table damaged after Open returned (a search, a write, a deep
	// check; vectors.go), with the fault ([Store.VectorFault]). It runs on
	// the goroutine that found the fault, possibly with the Store's write
	// lock held: it must return quickly and call no Store method. A fault
	// found by Open itself is not reported here: check VectorFault after
	// Open. Default nil.
	OnVectorFault func(err error)
	// OnKeywordFault is OnVectorFault for the keyword index (keywords.go):
	// called once when a search finds the Bleve index unreadable, on the
	// searching goroutine. Default nil.
	OnKeywordFault func(err error)
}

// Meta is the identity of an index as stored in its meta table.
type Meta struct {
	Provider string
	Model    string
	Dims     int
	Chunking string
	Schema   int
	// Generation is a random id shared by index.db and its Bleve index; a
	// mismatch means the Bleve index belongs to another database and is rebuilt.
	Generation string
}

// Store is an open index. All methods are safe for concurrent use; writes are
// serialised internally.
type Store struct {
	opts   Options
	log    *slog.Logger
	dbPath string
	blPath string

	db      *sql.DB
	bl      bleve.Index
	textAn  *textAnalyzer // analyzeText's analyzer (analyze.go); nil: the mapping's
	meta    Meta
	compt   bool
	blFresh bool // Bleve index created by this Open; reconcile refills it

	wmu sync.Mutex // serialises writes; guards the bulk fields below

	// Bulk mode (bulk.go): the open bulk transaction, the pending Bleve
	// operations of its writes, the chunk ids of their journal rows, their
	// text size and the time of the oldest one.
	bulk      bool
	btx       *sql.Tx
	pend      *bleve.Batch
	pendIDs   []int64
	pendBytes int
	pendSince time.Time
	// applying is the committed group's batch being applied to Bleve in
	// the background (nil: none).
	applying *keywordApply
	// Limits of a pending group (defaults bulkMaxOps, bulkMaxBytes,
	// bulkMaxAge; lowered by tests).
	bulkMaxOps   int
	bulkMaxBytes int
	bulkMaxAge   time.Duration

	commits atomic.Uint64 // see [Store.Commits]
	// statsMu guards stats, the files rows with their chunk and token
	// counts (scope.go): read from SQLite once, then kept current by every
	// committed write (spend holds those of the open bulk group).
	statsMu sync.Mutex
	stats   *fileStats
	spend   []fileStat

	// quant is the quantized copy of vec_chunks (quant.go); qpend holds the
	// vector operations of the open bulk group, applied at its commit.
	quant         *quantIndex
	quantizeAbove int
	vecCount      int // stored vectors at Open
	chunkCount    int // stored chunks at Open
	// vecErr is what Open found wrong with the vector table (vectors.go).
	vecErr error
	qpend  []qop
	// postings caches decoded posting lists of the keyword index
	// (postings.go).
	postings *postingsCache
	// vec is the vector table's health (vectors.go).
	vec vectorState

	closed chan struct{}
	once   sync.Once
}

// Open opens or creates the index in opts.Dir. A leftover staging directory
// from an interrupted rebuild is removed. Corrupt files are moved aside and
// recreated (logged). The returned Store may be incompatible (see
// [Store.Compatible]).
func Open(opts Options) (*Store, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(filepath.Join(opts.Dir, StagingDir)); err != nil {
		return nil, fmt.Errorf("open index: remove staging: %w", err)
	}
	return openAt(opts, opts.Dir)
}

// OpenStaging creates a fresh, empty, compatible index in <opts.Dir>/staging
// (removing any previous staging content) for a rebuild. Fill it, then call
// [Promote] after closing both the staging Store and the current one.
func OpenStaging(opts Options) (*Store, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	dir := filepath.Join(opts.Dir, StagingDir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("open staging index: %w", err)
	}
	return openAt(opts, dir)
}

// Promote atomically replaces <dir>/index.db with <dir>/staging/index.db and
// then swaps the Bleve directories. Both Stores must be closed. If the process
// dies between the two renames, the next Open notices the generation mismatch
// and rebuilds the Bleve index from SQLite.
func Promote(dir string) error {
	st := filepath.Join(dir, StagingDir)
	if _, err := os.Stat(filepath.Join(st, DBName)); err != nil {
		return fmt.Errorf("promote index: %w", err)
	}
	for _, suf := range []string{"-wal", "-shm"} {
		_ = os.Remove(filepath.Join(dir, DBName+suf))
	}
	if err := os.Rename(filepath.Join(st, DBName), filepath.Join(dir, DBName)); err != nil {
		return fmt.Errorf("promote index: %w", err)
	}
	old := filepath.Join(dir, BleveName+".old-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	if _, err := os.Stat(filepath.Join(dir, BleveName)); err == nil {
		if err := os.Rename(filepath.Join(dir, BleveName), old); err != nil {
			return fmt.Errorf("promote index: %w", err)
		}
	}
	if err := os.Rename(filepath.Join(st, BleveName), filepath.Join(dir, BleveName)); err != nil {
		return fmt.Errorf("promote index: %w", err)
	}
	_ = os.RemoveAll(old)
	_ = os.RemoveAll(st)
	syncDir(dir)
	return nil
}

func checkOptions(o *Options) error {
	if o.Dir == "" {
		return errors.New("open index: Options.Dir is required")
	}
	if o.Dims <= 0 {
		return fmt.Errorf("open index: Options.Dims must be > 0, got %d", o.Dims)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.QuantizeAbove == 0 {
		o.QuantizeAbove = DefaultQuantizeAbove
	}
	return nil
}

func openAt(opts Options, dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	vecOnce.Do(sqlite_vec.Auto)
	s := &Store{
		opts:   opts,
		log:    opts.Logger.With("component", "memory.index", "dir", dir),
		dbPath: filepath.Join(dir, DBName),
		blPath: filepath.Join(dir, BleveName),
		closed: make(chan struct{}),

		bulkMaxOps:   bulkMaxOps,
		bulkMaxBytes: bulkMaxBytes,
		bulkMaxAge:   bulkMaxAge,
	}
	// Remove leftovers of an interrupted Promote.
	if olds, _ := filepath.Glob(filepath.Join(dir, BleveName+".old-*")); len(olds) > 0 {
		for _, o := range olds {
			_ = os.RemoveAll(o)
		}
	}
	db, meta, err := s.openDB()
	if err != nil {
		s.log.Warn("memory index database unreadable; moving it aside and rebuilding", "path", s.dbPath, "err", err)
		if db != nil {
			_ = db.Close()
		}
		if merr := moveAside(s.dbPath, true); merr != nil {
			return nil, fmt.Errorf("open index: %w (and moving it aside failed: %v)", err, merr)
		}
		db, meta, err = s.openDB()
		if err != nil {
			if db != nil {
				_ = db.Close()
			}
			return nil, fmt.Errorf("open index: %w", err)
		}
	}
	s.db, s.meta = db, meta
	// The vector table is derived data: when it is damaged the index
	// still opens, answers by keywords and reports the fault (vectors.go).
	if s.vecErr == nil {
		s.vecCount, s.vecErr = s.checkVectors(context.Background(), db)
	}
	if s.vecErr != nil {
		s.vecCount = 0
		s.vec.fault.Store(&faultBox{err: fmt.Errorf("%w: %v", ErrVectorsDamaged, s.vecErr)})
		s.log.Warn("memory vector index damaged; searching by keywords until it is rebuilt", "err", s.vecErr)
	}
	s.quant, s.quantizeAbove = newQuantIndex(meta.Dims, s.vecCount), opts.QuantizeAbove
	pcb := opts.PostingsCacheBytes
	if pcb == 0 {
		pcb = defaultPostingsBudget(uint64(s.chunkCount)) // follows the index (applyStats)
	}
	s.postings = newPostingsCache(pcb)
	s.compt = meta.Provider == opts.Provider && meta.Model == opts.Model && meta.Dims == opts.Dims &&
		meta.Chunking == opts.Chunking && meta.Schema == SchemaVersion

	if err := s.openBleve(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.reconcile(context.Background()); err != nil {
		_ = s.bl.Close()
		_ = db.Close()
		return nil, fmt.Errorf("open index: reconcile: %w", err)
	}
	return s, nil
}

const schemaSQL = `
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
  path  TEXT PRIMARY KEY,
  hash  TEXT NOT NULL,
  mtime INTEGER NOT NULL,
  size  INTEGER NOT NULL,
  layer TEXT NOT NULL,
  role  TEXT NOT NULL DEFAULT '',
  chunks INTEGER NOT NULL DEFAULT 0, -- number of chunks
  tokens INTEGER NOT NULL DEFAULT 0  -- analysed tokens of the text field, summed over the chunks
);
CREATE TABLE IF NOT EXISTS chunks(
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  path       TEXT NOT NULL,
  start_line INTEGER NOT NULL,
  end_line   INTEGER NOT NULL,
  text       TEXT NOT NULL,
  hash       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(hash);
CREATE TABLE IF NOT EXISTS embedding_cache(
  provider  TEXT NOT NULL,
  model     TEXT NOT NULL,
  dims      INTEGER NOT NULL,
  hash      TEXT NOT NULL,
  embedding BLOB NOT NULL,
  PRIMARY KEY(provider, model, dims, hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bleve_journal(chunk_id INTEGER PRIMARY KEY, op INTEGER NOT NULL);
`

// Journal operations (bleve_journal.op).
const (
	opDelete = 0
	opIndex  = 1
)

// sqliteCacheKiB is each connection's page cache (SQLite's default is 2
// MiB). A vec0 table keeps its vectors in chunk blobs of 1,024 rows (1.5 MiB
// at 384 dims), which an insert rewrites in place; with the default cache
// every insert read the blob's pages back, and inserting a vector cost four
// times inserting its chunk row. 16 MiB holds the blob and the hot B-tree
// pages: a full sync spends a third less CPU in SQLite (docs/BENCHMARKS.md).
const sqliteCacheKiB = 16 << 10

func (s *Store) openDB() (*sql.DB, Meta, error) {
	s.vecErr = nil
	dsn := "file:" + filepath.ToSlash(s.dbPath) +
		"?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=10000&_txlock=immediate&_foreign_keys=1" +
		"&_cache_size=-" + strconv.Itoa(sqliteCacheKiB)
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, Meta{}, fmt.Errorf("open sqlite: %w", err)
	}
	ctx := context.Background()
	var qc string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&qc); err != nil {
		return db, Meta{}, fmt.Errorf("check sqlite: %w", err)
	}
	if qc != "ok" {
		return db, Meta{}, fmt.Errorf("check sqlite: %s", qc)
	}
	if _, err := db.ExecContext(ctx, schemaSQL); err != nil {
		return db, Meta{}, fmt.Errorf("create schema: %w", err)
	}
	if err := addFileStats(ctx, db); err != nil {
		return db, Meta{}, err
	}
	meta, found, err := readMeta(ctx, db)
	if err != nil {
		return db, Meta{}, err
	}
	if !found {
		meta = Meta{
			Provider:   s.opts.Provider,
			Model:      s.opts.Model,
			Dims:       s.opts.Dims,
			Chunking:   s.opts.Chunking,
			Schema:     SchemaVersion,
			Generation: newGeneration(),
		}
		if err := writeMeta(ctx, db, meta); err != nil {
			return db, Meta{}, err
		}
	}
	if meta.Dims <= 0 {
		return db, Meta{}, fmt.Errorf("read meta: invalid dims %d", meta.Dims)
	}
	if _, err := db.ExecContext(ctx, vecTableSQL(meta.Dims)); err != nil {
		s.vecErr = fmt.Errorf("create vector table: %w", err)
	}
	// Touch every table so that a damaged page surfaces here, not mid-sync
	// (the vector table is checked by openAt: it can be rebuilt in place).
	for _, q := range []string{"SELECT count(*) FROM files", "SELECT count(*) FROM chunks"} {
		var n int
		if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			return db, Meta{}, fmt.Errorf("check sqlite: %w", err)
		}
		s.chunkCount = n // the last one: chunks
	}
	return db, meta, nil
}

// addFileStats adds the columns of schema 2 to the files table of an older
// index.db, which stays incompatible (Schema 1, rebuilt by the caller) but
// answers searches until its replacement is promoted; its zero token counts
// make the keyword leg skip length normalisation.
func addFileStats(ctx context.Context, db *sql.DB) error {
	have := map[string]bool{}
	rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info('files')")
	if err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return fmt.Errorf("migrate schema: %w", err)
		}
		have[name] = true
	}
	rows.Close()
	for _, col := range []string{"chunks", "tokens"} {
		if have[col] {
			continue
		}
		if _, err := db.ExecContext(ctx, "ALTER TABLE files ADD COLUMN "+col+" INTEGER NOT NULL DEFAULT 0"); err != nil {
			return fmt.Errorf("migrate schema: %w", err)
		}
	}
	return nil
}

func readMeta(ctx context.Context, db *sql.DB) (Meta, bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT key, value FROM meta")
	if err != nil {
		return Meta{}, false, fmt.Errorf("read meta: %w", err)
	}
	defer rows.Close()
	kv := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return Meta{}, false, fmt.Errorf("read meta: %w", err)
		}
		kv[k] = v
	}
	if err := rows.Err(); err != nil {
		return Meta{}, false, fmt.Errorf("read meta: %w", err)
	}
	if len(kv) == 0 {
		return Meta{}, false, nil
	}
	dims, _ := strconv.Atoi(kv["dims"])
	schema, _ := strconv.Atoi(kv["schema"])
	return Meta{
		Provider: kv["provider"], Model: kv["model"], Dims: dims,
		Chunking: kv["chunking"], Schema: schema, Generation: kv["generation"],
	}, true, nil
}

func writeMeta(ctx context.Context, db *sql.DB, m Meta) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write meta: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	for k, v := range map[string]string{
		"provider": m.Provider, "model": m.Model, "dims": strconv.Itoa(m.Dims),
		"chunking": m.Chunking, "schema": strconv.Itoa(m.Schema), "generation": m.Generation,
	} {
		if _, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", k, v); err != nil {
			return fmt.Errorf("write meta: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write meta: %w", err)
	}
	return nil
}

func newGeneration() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// moveAside renames a corrupt file or directory to "<path>.corrupt-<unix>".
// With sqliteSidecars, the -wal and -shm files follow it.
func moveAside(path string, sqliteSidecars bool) error {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	dst := path + ".corrupt-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := os.Rename(path, dst); err != nil {
		return err
	}
	if sqliteSidecars {
		for _, suf := range []string{"-wal", "-shm"} {
			if _, err := os.Lstat(path + suf); err == nil {
				_ = os.Rename(path+suf, dst+suf)
			}
		}
	}
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// Meta returns the identity stored in the index.
func (s *Store) Meta() Meta { return s.meta }

// Compatible reports whether the stored meta matches the Options (provider,
// model, dims, chunking, schema). An incompatible Store refuses writes and has
// no usable vector leg for the configured embedder.
func (s *Store) Compatible() bool { return s.compt }

// Dir returns the directory holding this Store's files.
func (s *Store) Dir() string { return filepath.Dir(s.dbPath) }

func (s *Store) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// Close applies a pending bulk batch (see [Store.BeginBulk]) and closes the
// SQLite database and the Bleve index. It is idempotent.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.wmu.Lock()
		defer s.wmu.Unlock()
		s.bulk = false // the flush applies the last batch at once
		if s.pend != nil || s.btx != nil || s.applying != nil {
			if e := s.flushPending(context.Background()); e != nil {
				// The journal keeps the operations; the next Open replays them.
				s.log.Warn("memory keyword index: pending batch not applied at close", "err", e)
			}
			// A failed commit returns before the batch in flight is waited for.
			if e := s.awaitApply(context.Background(), nil); e != nil {
				s.log.Warn("memory keyword index: pending batch not applied at close", "err", e)
			}
		}
		close(s.closed)
		if s.bl != nil {
			if e := s.bl.Close(); e != nil {
				err = fmt.Errorf("close bleve: %w", e)
			}
		}
		if s.db != nil {
			if e := s.db.Close(); e != nil && err == nil {
				err = fmt.Errorf("close sqlite: %w", e)
			}
		}
	})
	return err
}

// Counts returns the number of indexed files and chunks (committed
// writes), from the file statistics the searches use (scope.go): counting
// a million chunk rows costs more than the edit that changed them.
func (s *Store) Counts(ctx context.Context) (files, chunks int, err error) {
	if s.isClosed() {
		return 0, 0, ErrClosed
	}
	fs, err := s.fileStats(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("count index: %w", err)
	}
	return len(fs.files), int(fs.chunks), nil
}
