package memory

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Run keeps the index current until ctx is done (then it returns ctx.Err())
// or the Manager is closed (ErrClosed): an fsnotify watcher on the workspace
// root and every folder under memory/ (debounced by Options.Debounce;
// changed paths count as Status.Dirty until indexed), an initial Sync, and a
// full rescan every Options.RescanInterval because watchers die silently
// (SPEC §4.2). A failed sync or a dead watcher is logged and Run carries on.
//
// When the workspace becomes unavailable (moved, renamed, unmounted: see
// ErrUnavailable) the index is kept and Run looks for the workspace every
// Options.Debounce; when it is back, Run watches it afresh (the old watches
// may follow the folders to where they were moved) and syncs.
func (m *Manager) Run(ctx context.Context) error {
	if m.closed.Load() {
		return ErrClosed
	}

	var w *fsnotify.Watcher
	var events chan fsnotify.Event
	var errs chan error
	stopWatch := func() {
		if w != nil {
			_ = w.Close()
		}
		w, events, errs = nil, nil, nil
	}
	defer func() { stopWatch() }()
	// startWatch (re)creates the watcher; it is started before a sync so
	// that no change made during the sync goes unnoticed.
	startWatch := func() {
		stopWatch()
		if m.opts.DisableWatcher {
			return
		}
		nw, err := fsnotify.NewWatcher()
		if err != nil {
			m.log.Error("memory watcher unavailable; relying on periodic rescan", "err", err)
			return
		}
		w = nw
		m.watchTree(w, m.ws, false)
		m.watchTree(w, filepath.Join(m.ws, "memory"), true)
		events, errs = w.Events, w.Errors
	}

	rescan := time.NewTicker(m.opts.RescanInterval)
	defer rescan.Stop()
	// sweep archives expired sessions (sessions.go).
	sweep := time.NewTicker(m.opts.SessionSweep)
	defer sweep.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	// soon schedules an early full rescan after a watcher error (events may
	// have been lost) or when the workspace or memory/ folder itself was
	// moved or removed; repeated requests collapse into one rescan.
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	defer soon.Stop()
	// probe looks for an unavailable workspace; rewatch says that the
	// watcher must be recreated once the workspace root is back.
	probe := time.NewTimer(time.Hour)
	probe.Stop()
	defer probe.Stop()
	rewatch := false
	armProbe := func() {
		if m.isUnavailable() {
			rewatch = true
			probe.Reset(m.opts.Debounce)
		}
	}
	// syncNow runs a full sync; failures are logged (an unavailable
	// workspace was logged once by the sync itself).
	syncNow := func(initial bool) error {
		err := m.Sync(ctx)
		if err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrUnavailable) {
			if initial {
				m.log.Error("memory initial sync failed", "err", err)
			} else {
				m.log.Error("memory rescan failed", "err", err)
			}
		}
		armProbe()
		return err
	}

	startWatch()
	if err := syncNow(true); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
	}
	m.sweepSessions(ctx)
	// The warm-up runs beside the event loop: it takes seconds at a
	// million chunks. (Edits wait only while it loads the quantized copy,
	// under the index's write lock, as they would for a first search.)
	warmed := make(chan struct{})
	go func() {
		defer close(warmed)
		t0 := time.Now()
		if err := m.Warm(ctx); err != nil {
			if ctx.Err() == nil && !errors.Is(err, ErrClosed) {
				m.log.Warn("memory warm-up failed", "err", err)
			}
			return
		}
		m.log.Debug("memory warm-up done", "seconds", time.Since(t0).Seconds())
	}()
	defer func() { <-warmed }()

	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return ErrClosed
		case ev, ok := <-events:
			if !ok {
				m.log.Error("memory watcher stopped; relying on periodic rescan")
				events, errs = nil, nil
				continue
			}
			dirty, rescanSoon := m.onEvent(w, ev)
			if dirty {
				debounce.Reset(m.opts.Debounce)
			}
			if rescanSoon {
				soon.Reset(m.opts.Debounce)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Overflow and similar errors lose events: rescan soon.
			m.log.Warn("memory watcher error; scheduling a rescan", "err", err)
			soon.Reset(m.opts.Debounce)
		case <-debounce.C:
			m.flushDirty(ctx)
			armProbe()
		case <-soon.C:
			_ = syncNow(false)
		case <-rescan.C:
			_ = syncNow(false)
		case <-sweep.C:
			m.sweepSessions(ctx)
		case <-probe.C:
			if !m.isUnavailable() {
				continue
			}
			if m.checkRoots(false) != nil {
				probe.Reset(m.opts.Debounce) // the workspace root is still gone
				continue
			}
			if rewatch {
				rewatch = false
				startWatch()
			}
			_ = syncNow(false)
		}
	}
}

// watchTree adds dir (and, when recursive, every folder below it except
// hidden ones and memory/templates) to the watcher.
func (m *Manager) watchTree(w *fsnotify.Watcher, dir string, recursive bool) {
	if !recursive {
		if err := w.Add(dir); err != nil {
			m.log.Warn("memory watcher cannot watch folder", "path", dir, "err", err)
		}
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			if err != nil && d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		if rel, rerr := filepath.Rel(m.ws, p); rerr == nil && (filepath.ToSlash(rel) == "memory/templates" || filepath.ToSlash(rel) == ArchivedSessionsDir || filepath.ToSlash(rel) == ArchivedRolesDir) {
			return fs.SkipDir
		}
		if err := w.Add(p); err != nil {
			m.log.Warn("memory watcher cannot watch folder", "path", p, "err", err)
		}
		return nil
	})
}

// onEvent records a watcher event. It reports whether a path became dirty,
// and whether a full rescan is due soon: the workspace root or its memory/
// folder was itself moved or removed (the rescan tells an unavailable
// workspace from deleted notes).
func (m *Manager) onEvent(w *fsnotify.Watcher, ev fsnotify.Event) (dirty, rescanSoon bool) {
	rel, err := filepath.Rel(m.ws, ev.Name)
	if err != nil || strings.HasPrefix(rel, "..") {
		return false, false
	}
	rel = filepath.ToSlash(rel)
	if rel == "." || rel == "memory" {
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			return false, true
		}
		if rel == "." {
			return false, false
		}
	}
	if ev.Has(fsnotify.Create) {
		if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
			if rel == "memory" || strings.HasPrefix(rel, "memory/") {
				m.watchTree(w, ev.Name, true)
				// Files may have landed before the watch: mark the whole subtree.
				n := 0
				_ = filepath.WalkDir(ev.Name, func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						if r, rerr := filepath.Rel(m.ws, p); rerr == nil && classify(filepath.ToSlash(r)).indexed {
							m.markDirty(filepath.ToSlash(r))
							n++
						}
					}
					return nil
				})
				return n > 0, false
			}
			return false, false
		}
	}
	if !classify(rel).indexed {
		return false, false
	}
	if ev.Op == fsnotify.Chmod {
		return false, false
	}
	m.markDirty(rel)
	return true, false
}

func (m *Manager) markDirty(rel string) {
	m.mu.Lock()
	m.dirty[rel] = struct{}{}
	m.mu.Unlock()
}

// flushDirty indexes (or drops) every dirty path.
func (m *Manager) flushDirty(ctx context.Context) {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if m.closed.Load() || ctx.Err() != nil {
		return
	}
	if !m.store.Compatible() {
		return // the next Sync rebuilds everything
	}
	if m.isUnavailable() {
		return // Run's probe syncs when the workspace is back
	}
	m.mu.Lock()
	paths := make([]string, 0, len(m.dirty))
	for p := range m.dirty {
		paths = append(paths, p)
	}
	m.mu.Unlock()
	sort.Strings(paths)
	var changed, deleted, errs []string
	var done []string // indexed or dropped; no longer dirty once committed and counted
	// A multi-file change set (a checkout, a copied folder) is written as a
	// bulk group (see index.Store.BeginBulk); a single edit is applied, and
	// searchable, immediately.
	bulk := len(paths) > 1
	if bulk {
		m.store.BeginBulk()
	}
	endBulk := func() error {
		if !bulk {
			return nil
		}
		bulk = false
		return m.store.EndBulk(context.WithoutCancel(ctx))
	}
	defer endBulk() //nolint:errcheck // only on the early returns; the normal path checks it
	for _, p := range paths {
		if ctx.Err() != nil || m.closed.Load() {
			return
		}
		res, err := m.indexOne(ctx, m.store, p)
		if errors.Is(err, ErrUnavailable) {
			// The workspace went away: nothing here is deleted, and the
			// remaining paths stay dirty until it is back.
			m.markUnavailable(err)
			break
		}
		if err != nil {
			errs = append(errs, p+": "+err.Error())
			m.log.Error("memory file index failed", "path", p, "err", err)
			continue // stays dirty; the next flush or rescan retries
		}
		done = append(done, p)
		switch res {
		case resChanged:
			changed = append(changed, p)
		case resDeleted:
			deleted = append(deleted, p)
		}
	}
	if err := endBulk(); err != nil {
		// The group was rolled back (its files must be indexed again; that
		// is idempotent by content hash) or its keyword batch failed (the
		// journal keeps it for the next write or Open): keep them dirty.
		errs = append(errs, err.Error())
		m.log.Error("memory keyword index batch failed", "err", err)
		done = nil
	}
	files, chunks, cerr := m.store.Counts(ctx)
	// Dirty paths are cleared together with the new counts, so a Status that
	// shows no dirty files also shows them counted (and searchable).
	m.mu.Lock()
	for _, p := range done {
		delete(m.dirty, p)
	}
	if cerr == nil {
		m.files, m.chunks = files, chunks
	}
	switch {
	case m.unavailable != "":
		// markUnavailable set the state; the layout cannot be seen.
	case len(errs) > 0:
		m.state = StateError
		m.syncErr = summarize(errs)
	case m.files > 0 && m.chunks == 0:
		m.state = StateError
		m.syncErr = "no chunks indexed although memory files exist"
	case m.state != StateIndexing && m.state != StateStale:
		// A stale index (never fully synced, or its last sync incomplete)
		// stays stale until a full sync completes.
		m.settleLocked()
	}
	if m.unavailable == "" {
		m.layout = detectLayout(m.ws)
	}
	m.mu.Unlock()
	m.fire(changed, "index")
	m.fire(deleted, "delete")
}
