package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/index"
)

// This file holds what keeps Status true across restarts and outages: the
// record of the last full sync kept in the index meta, the workspace
// availability checks ("cannot read" is never "deleted"), and Check, the
// stat-only comparison of the workspace with the index.

// unavailableError says why the workspace cannot be read as a whole: its
// root, or its memory/ folder while the index holds notes from it, is
// missing, not a folder, or unreadable. Its message is the reason alone
// ("workspace /x is missing"); errors.Is(err, ErrUnavailable) holds.
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string { return e.reason }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// checkRoots checks that the workspace root is a readable folder and, when
// memIndexed (the index holds notes under memory/), that memory/ is a
// folder too. It returns an *unavailableError otherwise. Its purpose is the
// rule that a workspace that disappears (unmounted, moved, renamed) must not
// look like a workspace whose notes were all deleted.
func (m *Manager) checkRoots(memIndexed bool) error {
	st, err := os.Stat(m.ws)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &unavailableError{reason: fmt.Sprintf("workspace %s is missing", m.ws)}
	case err != nil:
		return &unavailableError{reason: fmt.Sprintf("workspace %s is unreadable: %v", m.ws, err)}
	case !st.IsDir():
		return &unavailableError{reason: fmt.Sprintf("workspace %s is not a folder", m.ws)}
	}
	if !memIndexed {
		return nil
	}
	mem := filepath.Join(m.ws, "memory")
	mst, err := os.Lstat(mem)
	if err != nil {
		return memoryFolderError(mem, err)
	}
	if !mst.IsDir() {
		return &unavailableError{reason: fmt.Sprintf("memory folder %s is not a folder", mem)}
	}
	return nil
}

// memoryFolderError describes a memory/ folder that cannot be listed.
func memoryFolderError(dir string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &unavailableError{reason: fmt.Sprintf("memory folder %s is missing; the index keeps its notes until it is back (create an empty folder to drop them)", dir)}
	}
	return &unavailableError{reason: fmt.Sprintf("memory folder %s is unreadable: %v", dir, err)}
}

// checkGone is asked before a path that no longer exists is dropped from
// the index: the file counts as deleted only if the workspace root (and,
// for a path under memory/, the memory/ folder) can still be read.
func (m *Manager) checkGone(rel string) error {
	return m.checkRoots(strings.HasPrefix(rel, "memory/"))
}

// markUnavailable puts the Manager in the error state for an unreadable
// workspace (logged once per outage). The index is kept as it is.
func (m *Manager) markUnavailable(err error) {
	reason := err.Error()
	var ue *unavailableError
	if errors.As(err, &ue) {
		reason = ue.reason
	}
	m.mu.Lock()
	was := m.unavailable
	m.unavailable = reason
	m.state = StateError
	m.progress = nil
	m.mu.Unlock()
	if was == "" {
		m.log.Warn("memory workspace unavailable; index kept", "reason", reason)
	}
}

// markAvailable ends an outage recorded by markUnavailable (logged).
func (m *Manager) markAvailable() {
	m.mu.Lock()
	was := m.unavailable
	m.unavailable = ""
	m.mu.Unlock()
	if was != "" {
		m.log.Info("memory workspace available again", "was", was)
	}
}

// isUnavailable reports whether the last look at the workspace found it
// unreadable (see markUnavailable).
func (m *Manager) isUnavailable() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unavailable != ""
}

// syncRecordKey is the index meta key (index.Store.SetMetaValue) holding the
// JSON syncRecord.
const syncRecordKey = "memory.sync"

// skipRecordVersion versions the rules that decide which files are skipped.
// Skip entries recorded under another version are not trusted (the files
// are looked at again).
const skipRecordVersion = 1

// maxSkipRecords caps the skipped files kept in the sync record.
const maxSkipRecords = 1000

// syncRecord is kept in the index meta so that a fresh process reports a
// true state without scanning: when the last full sync completed, whether
// the latest one was interrupted, and what it found wrong.
type syncRecord struct {
	// LastSync is the end of the last completed full sync (Unix ms).
	LastSync int64 `json:"lastSync"`
	// Incomplete is set when a full sync starts writing and cleared when it
	// completes: still set on Open means it was cancelled or killed.
	Incomplete bool `json:"incomplete,omitempty"`
	// LastError is the error summary of the last completed sync.
	LastError   string       `json:"lastError,omitempty"`
	SkipVersion int          `json:"skipVersion,omitempty"`
	Skipped     []skipRecord `json:"skipped,omitempty"`
	// Pending counts, per path, the chunks stored without a vector (the
	// embedder failed); EmbedError is its last error.
	Pending    map[string]int `json:"pending,omitempty"`
	EmbedError string         `json:"embedError,omitempty"`
}

// skipRecord is a skipEntry as persisted in a syncRecord.
type skipRecord struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	MTime  int64  `json:"mtime"`
	Reason string `json:"reason"`
	Retry  bool   `json:"retry,omitempty"`
}

// loadSyncRecord reads the sync record of st; ok is false when none was
// ever written (an index never fully synced, or built by an older version).
// A damaged record is logged and treated as absent.
func (m *Manager) loadSyncRecord(ctx context.Context, st *index.Store) (rec syncRecord, ok bool) {
	v, found, err := st.MetaValue(ctx, syncRecordKey)
	if err != nil || !found {
		if err != nil {
			m.log.Warn("memory sync record unreadable", "err", err)
		}
		return syncRecord{}, false
	}
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		m.log.Warn("memory sync record unreadable", "err", err)
		return syncRecord{}, false
	}
	return rec, true
}

// saveSyncRecord writes the sync record of st. A failure is logged, not
// returned: the record only makes a later Status more precise.
func (m *Manager) saveSyncRecord(ctx context.Context, st *index.Store, rec syncRecord) {
	b, err := json.Marshal(rec)
	if err == nil {
		err = st.SetMetaValue(context.WithoutCancel(ctx), syncRecordKey, string(b))
	}
	if err != nil {
		m.log.Warn("memory sync record not saved", "err", err)
	}
}

// currentRecordLocked builds the sync record of the Manager's status fields.
// Callers hold mu.
func (m *Manager) currentRecordLocked(incomplete bool) syncRecord {
	rec := syncRecord{LastSync: m.lastSync, Incomplete: incomplete, LastError: m.syncErr, SkipVersion: skipRecordVersion}
	if len(m.pending) > 0 {
		rec.Pending = maps.Clone(m.pending)
		rec.EmbedError = m.embedErr
	}
	paths := make([]string, 0, len(m.skipped))
	for p := range m.skipped {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths[:min(len(paths), maxSkipRecords)] {
		e := m.skipped[p]
		rec.Skipped = append(rec.Skipped, skipRecord{Path: p, Size: e.size, MTime: e.mtime, Reason: e.reason, Retry: e.retry})
	}
	return rec
}

// restoreStatus sets the status fields of a freshly opened Manager from the
// index: counts, the sync record, and a state that is true although no sync
// has run in this process. Callers own m exclusively.
func (m *Manager) restoreStatus(ctx context.Context) error {
	s := m.store
	files, chunks, err := s.Counts(ctx)
	if err != nil {
		return err
	}
	m.files, m.chunks = files, chunks
	rec, found := m.loadSyncRecord(ctx, s)
	m.lastSync = rec.LastSync
	if rec.SkipVersion == skipRecordVersion {
		for _, r := range rec.Skipped {
			m.skipped[r.Path] = skipEntry{size: r.Size, mtime: r.MTime, reason: r.Reason, retry: r.Retry}
		}
	}
	if s.Compatible() && s.Meta().Dims == m.ixOpts.Dims {
		maps.Copy(m.pending, rec.Pending)
		if len(m.pending) > 0 && m.embedErr == "" {
			m.embedErr = rec.EmbedError
		}
	}
	switch {
	case !s.Compatible():
		meta := s.Meta()
		m.state = StateStale
		if chunks > 0 {
			m.state = StateKeywordOnly // the old index still answers keyword queries
		}
		m.notice = fmt.Sprintf("index built with %s/%s (%d dims, chunking %s); the next sync rebuilds it",
			meta.Provider, meta.Model, meta.Dims, meta.Chunking)
	case !found && files == 0:
		m.state = StateStale
		m.notice = "not indexed yet"
	case !found:
		m.state = StateStale
		m.notice = "no completed sync recorded; the next sync verifies the index"
	case rec.Incomplete:
		m.state = StateStale
		m.notice = "the last sync did not complete (interrupted); the next sync resumes it"
	case rec.LastError != "":
		m.state = StateError
		m.syncErr = rec.LastError
	default:
		m.settleLocked()
	}
	return nil
}

// settleLocked sets the state of an index that is up to date: StateReady,
// or StateKeywordOnly while chunks are stored without vectors (the
// embedder failed; SPEC §4.2: never "ready" when the vector leg is missing
// chunks). Callers hold mu (or own m).
func (m *Manager) settleLocked() {
	m.syncErr = ""
	if len(m.pending) == 0 {
		m.state = StateReady
		return
	}
	m.state = StateKeywordOnly
}

// pendingNoticeLocked describes the chunks stored without vectors ("" when
// there are none). Callers hold mu.
func (m *Manager) pendingNoticeLocked() string {
	if len(m.pending) == 0 {
		return ""
	}
	n := 0
	for _, c := range m.pending {
		n += c
	}
	msg := fmt.Sprintf("%d chunk(s) in %d file(s) have no vector yet (embedding provider %s/%s", n, len(m.pending), m.emb.Provider(), m.emb.Model())
	if m.embedErr != "" {
		msg += ": " + m.embedErr
	}
	return msg + "); keyword search works, and the next sync adds the vectors when the provider answers"
}

// Check compares the workspace with the index by a stat-only scan: no file
// is read and the index is not written. Files that are new, changed (size
// or modification time) or gone since they were indexed become Dirty in
// Status, and a Manager that claimed to be ready becomes StateStale. An
// unreadable workspace puts it in StateError and returns an error wrapping
// ErrUnavailable. It is meant for one-shot callers (`atrium memory status`)
// that report a status without syncing; Run keeps Dirty current by itself.
// Check waits for a running sync or flush.
func (m *Manager) Check(ctx context.Context) error {
	if m.closed.Load() {
		return ErrClosed
	}
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	if m.closed.Load() {
		return ErrClosed
	}
	start := time.Now()
	l, err := m.listFiles(ctx, m.store)
	if errors.Is(err, ErrUnavailable) {
		m.markUnavailable(err)
		return fmt.Errorf("check: %w", err)
	}
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	m.markAvailable()
	known, err := m.store.Files(ctx)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	m.mu.Lock()
	changed, gone := m.compareLocked(l, known)
	dirty := gone
	for _, f := range changed {
		dirty = append(dirty, f.rel)
	}
	for _, p := range dirty {
		m.dirty[p] = struct{}{}
	}
	if len(m.dirty) > 0 && m.state == StateReady {
		m.state = StateStale
		m.notice = fmt.Sprintf("%d file(s) changed since the last sync", len(m.dirty))
	}
	m.mu.Unlock()
	m.log.Debug("memory check finished", "files", len(l.files), "dirty", len(dirty), "duration_ms", time.Since(start).Milliseconds())
	return nil
}
