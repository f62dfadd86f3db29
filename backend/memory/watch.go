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
// or the Manager is closed (ErrClosed): an initial Sync, then an fsnotify
// watcher on the workspace root and every folder under memory/ (debounced by
// Options.Debounce; changed paths count as Status.Dirty until indexed), plus
// a full rescan every Options.RescanInterval because watchers die silently
// (SPEC §4.2). A failed sync or a dead watcher is logged and Run carries on.
func (m *Manager) Run(ctx context.Context) error {
	if m.closed.Load() {
		return ErrClosed
	}
	if err := m.Sync(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		m.log.Error("memory initial sync failed", "err", err)
	}

	var events chan fsnotify.Event
	var errs chan error
	var w *fsnotify.Watcher
	if !m.opts.DisableWatcher {
		var err error
		w, err = fsnotify.NewWatcher()
		if err != nil {
			m.log.Error("memory watcher unavailable; relying on periodic rescan", "err", err)
		} else {
			defer w.Close()
			m.watchTree(w, m.ws, false)
			m.watchTree(w, filepath.Join(m.ws, "memory"), true)
			events, errs = w.Events, w.Errors
		}
	}

	rescan := time.NewTicker(m.opts.RescanInterval)
	defer rescan.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	// soon schedules an early full rescan after a watcher error (events may
	// have been lost); repeated errors collapse into one rescan.
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	defer soon.Stop()

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
			if m.onEvent(w, ev) {
				debounce.Reset(m.opts.Debounce)
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
		case <-soon.C:
			if err := m.Sync(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
				m.log.Error("memory rescan failed", "err", err)
			}
		case <-rescan.C:
			if err := m.Sync(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
				m.log.Error("memory rescan failed", "err", err)
			}
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
		if rel, rerr := filepath.Rel(m.ws, p); rerr == nil && filepath.ToSlash(rel) == "memory/templates" {
			return fs.SkipDir
		}
		if err := w.Add(p); err != nil {
			m.log.Warn("memory watcher cannot watch folder", "path", p, "err", err)
		}
		return nil
	})
}

// onEvent records a watcher event; it reports whether something became dirty.
func (m *Manager) onEvent(w *fsnotify.Watcher, ev fsnotify.Event) bool {
	rel, err := filepath.Rel(m.ws, ev.Name)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	rel = filepath.ToSlash(rel)
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
				return n > 0
			}
			return false
		}
	}
	if !classify(rel).indexed {
		return false
	}
	if ev.Op == fsnotify.Chmod {
		return false
	}
	m.markDirty(rel)
	return true
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
	m.mu.Lock()
	paths := make([]string, 0, len(m.dirty))
	for p := range m.dirty {
		paths = append(paths, p)
	}
	m.mu.Unlock()
	sort.Strings(paths)
	var changed, deleted, errs []string
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
		if err != nil {
			errs = append(errs, p+": "+err.Error())
			m.log.Error("memory file index failed", "path", p, "err", err)
			continue // stays dirty; the next flush or rescan retries
		}
		m.mu.Lock()
		delete(m.dirty, p)
		m.mu.Unlock()
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
		m.mu.Lock()
		for _, p := range paths {
			m.dirty[p] = struct{}{}
		}
		m.mu.Unlock()
	}
	files, chunks, cerr := m.store.Counts(ctx)
	m.mu.Lock()
	if cerr == nil {
		m.files, m.chunks = files, chunks
	}
	m.layout = detectLayout(m.ws)
	switch {
	case len(errs) > 0:
		m.state = StateError
		m.syncErr = summarize(errs)
	case m.files > 0 && m.chunks == 0:
		m.state = StateError
		m.syncErr = "no chunks indexed although memory files exist"
	case m.state != StateIndexing:
		m.state = StateReady
		m.syncErr = ""
	}
	m.mu.Unlock()
	m.fire(changed, "index")
	m.fire(deleted, "delete")
}
