// Package memory is Atrium's memory engine (SPEC §4): it keeps a search index
// of a workspace's Markdown memory up to date and answers the agent-facing
// memory_search / memory_get calls, plus imports, file listings and status.
//
// The Markdown under the workspace is the source of truth and is never
// modified by indexing; the index under Options.IndexDir (package
// backend/memory/index: SQLite + sqlite-vec + Bleve) can always be rebuilt
// from it. A Manager is created with Open (cheap, no scan), brought up to date
// with Sync, and kept current by Run (fsnotify watcher, debounced, plus a
// periodic rescan). Search, Get, Import, Files and Status are safe for
// concurrent use with each other and with Run; so are Write, Note,
// Version, ListConflicts and ResolveConflict (write.go: memory_write,
// memory_note and the concurrent-write rules of SPEC §5.3, with version
// vectors and conflict records kept by package backend/memory/versions).
//
// Errors: ErrNotFound, ErrInvalidPath, ErrInvalidInput, ErrClosed,
// ErrUnavailable, ErrForbidden and ErrConflict are returned wrapped with
// context; test with errors.Is. The gateway maps them to NOT_FOUND,
// INVALID_REQUEST, UNAVAILABLE, FORBIDDEN and CONFLICT (docs/PROTOCOL.md;
// ErrUnavailable, like ErrClosed, is meant to be UNAVAILABLE: retryable).
//
// "Cannot read" is never taken for "deleted": a missing or unreadable
// workspace (or memory/ folder) is an error state that keeps the index, an
// unreadable subfolder or file keeps its index entries, and a file is
// dropped from the index only when its folder can be read and it is gone.
package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/memory/chunk"
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/index"
	"github.com/atrium-dev/atrium/backend/memory/versions"
)

// Sentinel errors (wrapped with context by every method).
var (
	// ErrNotFound: the requested memory file does not exist.
	ErrNotFound = errors.New("memory: not found")
	// ErrInvalidPath: a path is absolute, contains "..", leaves the workspace
	// through a symlink, or is not indexed memory Markdown.
	ErrInvalidPath = errors.New("memory: invalid path")
	// ErrInvalidInput: a bad argument (empty query, bad import name, binary
	// or empty import content, unknown layer).
	ErrInvalidInput = errors.New("memory: invalid input")
	// ErrClosed: the Manager was closed.
	ErrClosed = errors.New("memory: closed")
	// ErrLocked: another process (a running Atrium) holds the index. Only
	// one process may open an index directory at a time; the others must go
	// through the running app's gateway.
	ErrLocked = errors.New("memory: index in use by another process")
	// ErrUnavailable: the workspace root, or its memory/ folder while the
	// index holds notes from it, is missing or unreadable (moved, renamed,
	// unmounted). The index is kept as it is, never emptied, and Run
	// recovers by itself when the folder is back. The error's message says
	// which folder and why ("workspace /x is missing").
	ErrUnavailable = errors.New("memory: workspace unavailable")
)

// LockName is the lock file in Options.IndexDir that makes one process the
// index's only user (an advisory flock held from Open until Close).
const LockName = "LOCK"

// Defaults for Options.
const (
	DefaultDebounce       = 1500 * time.Millisecond // SPEC §4.2
	DefaultRescanInterval = 60 * time.Second
	// MaxFileBytes is the largest Markdown file that is indexed; larger files
	// are skipped with a warning (counted in Status.LastError).
	MaxFileBytes = 16 << 20
	// DefaultProbeTimeout bounds the request that learns an embedder's
	// dims when they are not configured (see Options.ProbeTimeout).
	DefaultProbeTimeout = 10 * time.Second
	// DefaultQueryTimeout bounds a search query's embedding (see
	// Options.QueryTimeout).
	DefaultQueryTimeout = 10 * time.Second
	// MaxImportBytes is the largest note Import accepts.
	MaxImportBytes = 8 << 20
	// MaxMaxResults caps SearchOptions.MaxResults.
	MaxMaxResults = 100
)

// Options configure a Manager. Only Workspace and IndexDir are required.
type Options struct {
	// Workspace is the workspace root (the Markdown is the source of truth).
	// Required; made absolute.
	Workspace string
	// IndexDir holds index.db and bleve/ (the caller passes
	// $ATRIUM_HOME/index/<id>). Required; created if missing.
	IndexDir string
	// Embedder embeds chunks and queries; default
	// embed.NewBuiltin(embed.BuiltinOptions{}) (offline, 384 dims). Its
	// provider, model and dims are the index's identity: a change rebuilds
	// the index (SPEC §4.2). An embedder whose Dims is 0 (not configured)
	// is asked once at Open and again at each Sync until it answers (see
	// embed.Prober); meanwhile the index keeps the dims it was built with.
	Embedder embed.Embedder
	// Chunking sizes chunks; zero values mean 400 tokens / 80 overlap.
	// MaxTokens is lowered to the embedder's MaxInputTokens when larger,
	// so that every chunk fits the provider's input limit.
	Chunking chunk.Options
	// ProbeTimeout bounds the dims probe of an embedder without configured
	// dims; default DefaultProbeTimeout (10 s).
	ProbeTimeout time.Duration
	// QueryTimeout bounds the embedding of a search query (retries
	// included); when it passes, the search answers from the keyword leg.
	// Default DefaultQueryTimeout (10 s), so that a provider that hangs
	// never holds a search for its whole retry schedule.
	QueryTimeout time.Duration
	// Ranking holds the search ranking options (SPEC §4.3); the zero value
	// is the measured default (see Ranking).
	Ranking Ranking
	// Rewrite, if set, puts a query the index answers weakly (confidence
	// low or medium) into other words with a model; Search searches the
	// rewrite too and merges the results (rewrite.go). nil (the default):
	// no model is asked.
	Rewrite Rewriter
	// RewriteTimeout bounds each Rewrite call; when it passes, Search
	// returns the plain results. Default DefaultRewriteTimeout (4 s).
	RewriteTimeout time.Duration
	// Debounce delays indexing after a watcher event; default 1.5 s.
	Debounce time.Duration
	// RescanInterval is the period of the full rescan in Run; default 60 s.
	RescanInterval time.Duration
	// SyncWorkers is how many goroutines prepare files ahead of the
	// writer in a full sync (read, chunk, embed, analyse; prefetch.go);
	// 0 means GOMAXPROCS, 1 means none (the writer does all the work in
	// file order).
	SyncWorkers int
	// DisableWatcher turns off the fsnotify watcher in Run (only the
	// periodic rescan keeps the index current). Used by tests and by
	// one-shot CLI commands.
	DisableWatcher bool
	// LockWait is how long Open waits for another process to release the
	// index (an app that is still shutting down); default 0: fail at once
	// with ErrLocked.
	LockWait time.Duration
	// Logger receives structured logs; default slog.Default().
	Logger *slog.Logger
	// OnChange, if set, is called (from the indexing goroutine, without
	// locks held) after the index changed; the gateway broadcasts it as
	// memory.changed.
	OnChange func(ChangeEvent)
	// OnProgress, if set, is called during a sync as files are processed.
	OnProgress func(Progress)
	// Versions keeps the files' version vectors and the conflict records
	// (SPEC §5.3), opened on state.db for this same workspace. nil: Write,
	// Note, Version and the conflict methods fail with ErrUnavailable, and
	// hand edits are not counted.
	Versions *versions.Store
	// Authorize, if set, is asked before Write, Note and ResolveConflict
	// do anything, and by Import before it creates a file or folder:
	// writer is the role (or "admin"; Import passes AdminWriter, the
	// principal being the one ctx carries), session the caller's session
	// ("" when none), action ActionWrite, ActionResolve or ActionImport,
	// path the clean workspace-relative path. A non-nil error refuses the
	// call (returned wrapping ErrForbidden). nil allows everything.
	Authorize func(ctx context.Context, writer, session, action, path string) error
	// Readable, if set, reports whether the caller of a write (the
	// principal ctx carries) may read the workspace-relative path: a
	// refusal of a look-alike name (ErrExists) names the existing file
	// only then, so that it tells no caller of a file it may not read.
	// nil: every caller may.
	Readable func(ctx context.Context, path string) bool
	// Now is the clock of the write path (conflict file names, notes) and
	// of session expiry (sessions.go); default time.Now.
	Now func() time.Time
	// ACL returns the access policy in force (SPEC §5.1), e.g. an
	// acl.Holder's Policy. nil, or a nil result: memory/.acl is read when
	// needed (absent: acl.Defaults; malformed: acl.AdminOnly and an
	// error). Used for session ttls, promotion by a role and the cold
	// start's filtering (roles.go); it does not guard Search or Get.
	ACL func() *acl.Policy
	// SessionSweep is how often Run archives expired sessions; default
	// DefaultSessionSweep (1 min).
	SessionSweep time.Duration
}

// isLocal reports whether e computes vectors in process faster than the
// index can cache them (embed.Builtin.Local).
func isLocal(e embed.Embedder) bool {
	l, ok := e.(interface{ Local() bool })
	return ok && l.Local()
}

// Manager is the memory engine of one workspace. Create it with Open.
type Manager struct {
	opts Options
	log  *slog.Logger
	// emb embeds search queries (Options.Embedder bounded by QueryTimeout);
	// indexing uses Options.Embedder itself.
	emb    embed.Embedder
	ws     string // absolute workspace path
	wsReal string // ws with symlinks resolved
	ixOpts index.Options

	lock *flock.Flock // held on IndexDir/LOCK from Open until Close

	// renameHook, when set (tests), is called at each stage of a Rename
	// (rename.go); an error stops the rename there, as a crash would.
	renameHook func(stage string) error

	storeMu sync.RWMutex // guards store (swapped on rebuild)
	// warmMu guards warmStop, which cancels a running Warm: a rebuild
	// calls it before it takes storeMu, so that the swap (and the
	// searches queued behind it) do not wait for the warm-up.
	warmMu   sync.Mutex
	warmStop context.CancelFunc
	store    *index.Store

	rewrites rewriteLog // latencies of Options.Rewrite (RewriteStats)

	writeMu sync.Mutex // one writer at a time: sync, watcher flush, import
	// embedDown is the embedder's failure (embed.ErrUnavailable) in the
	// running full sync: the sync's remaining files are stored without
	// vectors at once instead of each waiting for the provider. Reset when
	// a sync starts; guarded by writeMu.
	embedDown error

	mu       sync.Mutex // guards the status fields below
	state    string
	layout   string
	files    int
	chunks   int
	lastSync int64  // end of the last completed full sync, Unix ms (persisted)
	syncErr  string // error summary of the last sync or flush
	// unavailable is the reason the workspace cannot be read as a whole
	// ("" when it can); see markUnavailable.
	unavailable string
	// notice explains a state that no error explains (why the index is
	// stale or keyword-only); cleared when a sync starts.
	notice  string
	skipped map[string]skipEntry
	// pending counts, per path, the chunks stored without a vector because
	// the embedder failed (keyword-only until a later sync embeds them);
	// embedErr is the embedder's last error. See embedChunks.
	pending  map[string]int
	embedErr string
	// stagedState is the state a rebuild's scan ended with, applied when
	// the rebuilt index is swapped in (see scanLocked).
	stagedState string
	progress    *Progress
	dirty       map[string]struct{}

	// locks serialises writes per file (write.go).
	locks pathLocks
	// sessMu serialises session creation, promotion and archiving, and
	// role creation (sessions.go, roles.go).
	sessMu sync.Mutex

	// degraded says why the vector leg is out of service (repair.go; ""
	// when it is not). Guarded by mu.
	degraded string
	// repairMu guards repairing, set while a background vector rebuild
	// runs (repairWG waits for it).
	repairMu  sync.Mutex
	repairing bool
	repairWG  sync.WaitGroup
	// kwDegraded says why the keyword leg is out of service (guarded by
	// mu); kwRepairing is set while its rebuild runs (repairMu).
	kwDegraded  string
	kwRepairing bool

	closed atomic.Bool
	done   chan struct{}
	once   sync.Once
}

// queryEmbedder bounds each Embed call by timeout (Options.QueryTimeout).
type queryEmbedder struct {
	embed.Embedder
	timeout time.Duration
}

func (q queryEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	return q.Embedder.Embed(ctx, texts)
}

// skipEntry remembers a file that could not be indexed, by size and mtime, so
// that an unchanged bad file is not re-read or re-logged on every rescan.
// A file skipped because it could not be read (retry) is read again by every
// sync: permissions can change without changing size or mtime.
type skipEntry struct {
	size, mtime int64
	reason      string
	retry       bool
}

// Open opens (or creates) the index for a workspace. It does not scan the
// workspace (call Sync or Run; Check is a cheap stat-only comparison). The
// workspace must exist and be a folder: Open never creates it. A corrupt
// index is moved aside and recreated (logged). If the index was built with
// another embedder or chunking, it is kept for keyword search until the
// next Sync rebuilds it into a new index and swaps it in.
//
// The state reported before the first sync comes from the record the last
// sync left in the index: StateReady only if that sync completed (with
// errors: StateError), StateStale if the index was never fully synced or
// the last sync was interrupted, StateKeywordOnly (or StateStale when
// empty) for an index built with another embedder.
func Open(opts Options) (*Manager, error) {
	if opts.Workspace == "" {
		return nil, fmt.Errorf("open memory: %w: Options.Workspace is required", ErrInvalidInput)
	}
	if opts.IndexDir == "" {
		return nil, fmt.Errorf("open memory: %w: Options.IndexDir is required", ErrInvalidInput)
	}
	ws, err := filepath.Abs(opts.Workspace)
	if err != nil {
		return nil, fmt.Errorf("open memory: %w", err)
	}
	st, err := os.Stat(ws)
	if err != nil {
		return nil, fmt.Errorf("open memory: workspace: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("open memory: workspace %s is not a directory", ws)
	}
	wsReal, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return nil, fmt.Errorf("open memory: workspace: %w", err)
	}
	if opts.Embedder == nil {
		opts.Embedder = embed.NewBuiltin(embed.BuiltinOptions{})
	}
	if opts.Chunking.MaxTokens <= 0 {
		opts.Chunking.MaxTokens = chunk.DefaultMaxTokens
	}
	if lim := opts.Embedder.MaxInputTokens(); lim > 0 && opts.Chunking.MaxTokens > lim {
		opts.Chunking.MaxTokens = lim
	}
	if opts.Chunking.OverlapTokens == 0 {
		opts.Chunking.OverlapTokens = chunk.DefaultOverlapTokens
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.RewriteTimeout <= 0 {
		opts.RewriteTimeout = DefaultRewriteTimeout
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = DefaultQueryTimeout
	}
	if err := opts.Ranking.resolve(opts.Embedder); err != nil {
		return nil, fmt.Errorf("open memory: %w", err)
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.RescanInterval <= 0 {
		opts.RescanInterval = DefaultRescanInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SessionSweep <= 0 {
		opts.SessionSweep = DefaultSessionSweep
	}
	if auth := opts.Authorize; auth != nil {
		// The engine's own bookkeeping (a session record) is not a
		// principal's write: see systemWrite.
		opts.Authorize = func(ctx context.Context, writer, session, action, path string) error {
			if action == ActionWrite && isSystemWrite(ctx, path) {
				return nil
			}
			return auth(ctx, writer, session, action, path)
		}
	}
	m := &Manager{
		opts:    opts,
		log:     opts.Logger.With("component", "memory", "workspace", ws),
		emb:     queryEmbedder{Embedder: opts.Embedder, timeout: opts.QueryTimeout},
		ws:      ws,
		wsReal:  wsReal,
		skipped: map[string]skipEntry{},
		dirty:   map[string]struct{}{},
		pending: map[string]int{},
		done:    make(chan struct{}),
	}
	// Take the index directory's lock before touching anything in it: a
	// second process must never "repair" (move aside, rebuild) an index
	// that a running app is using.
	if err := os.MkdirAll(opts.IndexDir, 0o700); err != nil {
		return nil, fmt.Errorf("open memory: index dir: %w", err)
	}
	m.lock = flock.New(filepath.Join(opts.IndexDir, LockName))
	locked, err := m.lock.TryLock()
	if err == nil && !locked && opts.LockWait > 0 {
		opts.Logger.Info("memory index locked; waiting for the other process to release it", "dir", opts.IndexDir, "wait", opts.LockWait)
		ctx, cancel := context.WithTimeout(context.Background(), opts.LockWait)
		locked, err = m.lock.TryLockContext(ctx, 100*time.Millisecond)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			err = nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open memory: lock %s: %w", m.lock.Path(), err)
	}
	if !locked {
		return nil, fmt.Errorf("open memory: %w: %s is locked (is Atrium running?)", ErrLocked, opts.IndexDir)
	}
	m.ixOpts = index.Options{
		Dir:      opts.IndexDir,
		Provider: m.emb.Provider(),
		Model:    m.emb.Model(),
		Dims:     m.emb.Dims(),
		Chunking: fmt.Sprintf("lines/%d/%d", opts.Chunking.MaxTokens, opts.Chunking.OverlapTokens),
		Logger:   opts.Logger,
		// An embedder faster than the cache (builtin) is not cached.
		NoEmbeddingCache: isLocal(opts.Embedder),
		// A damaged vector table found by a search or a write is rebuilt
		// in the background (repair.go).
		OnVectorFault:  m.onVectorFault,
		OnKeywordFault: m.onKeywordFault,
	}
	s, err := m.openStore()
	if err != nil {
		_ = m.lock.Unlock()
		return nil, fmt.Errorf("open memory: %w", err)
	}
	m.store = s
	if err := s.VectorFault(); err != nil {
		m.setDegraded(err, "") // the next Sync rebuilds it (repair.go)
	}
	m.layout = detectLayout(ws)
	if err := m.restoreStatus(context.Background()); err != nil {
		_ = s.Close()
		_ = m.lock.Unlock()
		return nil, fmt.Errorf("open memory: %w", err)
	}
	if !s.Compatible() {
		meta := s.Meta()
		m.log.Info("memory index built with another embedder or chunking; it will be rebuilt",
			"old_provider", meta.Provider, "old_model", meta.Model, "old_dims", meta.Dims, "old_chunking", meta.Chunking,
			"provider", m.ixOpts.Provider, "model", m.ixOpts.Model, "dims", m.ixOpts.Dims, "chunking", m.ixOpts.Chunking)
	}
	return m, nil
}

// Close stops Run, waits for a running write to finish and closes the index.
// It is idempotent.
func (m *Manager) Close() error {
	var err error
	m.once.Do(func() {
		m.closed.Store(true)
		close(m.done)
		// A background vector rebuild stops at its next step; none starts
		// once closed is set and repairMu was passed.
		m.repairMu.Lock()
		m.repairMu.Unlock() //nolint:staticcheck // a barrier
		m.repairWG.Wait()
		m.writeMu.Lock()
		defer m.writeMu.Unlock()
		m.storeMu.Lock()
		defer m.storeMu.Unlock()
		if e := m.store.Close(); e != nil {
			err = fmt.Errorf("close memory: %w", e)
		}
		if e := m.lock.Unlock(); e != nil && err == nil {
			err = fmt.Errorf("close memory: unlock: %w", e)
		}
	})
	return err
}

// Status reports the index state (SPEC §4.2, docs/PROTOCOL.md). It never
// blocks on a running sync.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{
		State:     m.state,
		Workspace: m.ws,
		Layout:    m.layout,
		Files:     m.files,
		Chunks:    m.chunks,
		Dirty:     len(m.dirty),
		Provider:  m.emb.Provider(),
		Model:     m.emb.Model(),
		Dims:      m.emb.Dims(),
		LastSync:  m.lastSync,
		LastError: m.lastErrorLocked(),
	}
	if m.progress != nil {
		p := *m.progress
		st.Progress = &p
	}
	if d := m.degradedLocked(); d != "" {
		st.Degraded = d
		if st.State != StateIndexing && st.State != StateError {
			st.State = StateDegraded
		}
	}
	return st
}

// degradedLocked joins the reasons of a degraded vector and keyword leg.
// Callers hold mu.
func (m *Manager) degradedLocked() string {
	switch {
	case m.degraded != "" && m.kwDegraded != "":
		return m.degraded + "; " + m.kwDegraded
	case m.kwDegraded != "":
		return m.kwDegraded
	}
	return m.degraded
}

func (m *Manager) lastErrorLocked() string {
	var parts []string
	if d := m.degradedLocked(); d != "" {
		parts = append(parts, d)
	}
	if m.unavailable != "" {
		parts = append(parts, m.unavailable)
	}
	if m.notice != "" {
		parts = append(parts, m.notice)
	}
	if m.syncErr != "" {
		parts = append(parts, m.syncErr)
	}
	if p := m.pendingNoticeLocked(); p != "" {
		parts = append(parts, p)
	}
	if n := len(m.skipped); n > 0 {
		paths := make([]string, 0, n)
		for p := range m.skipped {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		var b strings.Builder
		fmt.Fprintf(&b, "%d file(s) skipped: ", n)
		for i, p := range paths {
			if i == 3 {
				fmt.Fprintf(&b, "; and %d more", n-3)
				break
			}
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(p + ": " + m.skipped[p].reason)
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "; ")
}

func (m *Manager) setProgress(p *Progress) {
	m.mu.Lock()
	m.progress = p
	m.mu.Unlock()
	if p != nil && m.opts.OnProgress != nil {
		m.opts.OnProgress(*p)
	}
}

func (m *Manager) fire(paths []string, reason string) {
	if len(paths) == 0 || m.opts.OnChange == nil {
		return
	}
	sort.Strings(paths)
	ev := ChangeEvent{Paths: paths, Reason: reason, Layers: make([]string, len(paths))}
	for i, p := range paths {
		ev.Layers[i] = classify(p).layer
		ev.Global = ev.Global || ev.Layers[i] == LayerGlobal
	}
	m.opts.OnChange(ev)
}

// Warm readies the index for the first searches (index.Store.Warm: the
// quantized vectors loaded, the most frequent terms' posting lists
// decoded). Run calls it once after the initial sync; searches are
// correct without it. It stops early, returning ErrClosed, when the
// Manager is closed, and ctx's error when ctx is cancelled or a rebuild
// swaps the index (the new one is not warmed).
func (m *Manager) Warm(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.warmMu.Lock()
	m.warmStop = cancel
	m.warmMu.Unlock()
	defer func() {
		m.warmMu.Lock()
		m.warmStop = nil
		m.warmMu.Unlock()
	}()
	go func() {
		select {
		case <-m.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	st, release, err := m.currentStore()
	if err != nil {
		return err
	}
	defer release()
	err = st.Warm(ctx)
	if err != nil && m.closed.Load() {
		return ErrClosed
	}
	return err
}

// stopWarm cancels a running Warm.
func (m *Manager) stopWarm() {
	m.warmMu.Lock()
	defer m.warmMu.Unlock()
	if m.warmStop != nil {
		m.warmStop()
	}
}

// currentStore returns the store with a read lock held; call the returned
// release func when done.
func (m *Manager) currentStore() (*index.Store, func(), error) {
	m.storeMu.RLock()
	if m.closed.Load() {
		m.storeMu.RUnlock()
		return nil, func() {}, ErrClosed
	}
	return m.store, m.storeMu.RUnlock, nil
}
