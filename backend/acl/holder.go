package acl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// HolderOptions configures a Holder. Zero values take the defaults noted.
type HolderOptions struct {
	// Logger receives "acl loaded", "acl invalid; keeping last good rules"
	// and watcher messages. Default slog.Default().
	Logger *slog.Logger
	// PollInterval is the period of the stat-and-hash fallback in Run,
	// which catches changes a dead or missing watcher would miss. Default 2 s.
	PollInterval time.Duration
	// Debounce delays a reload after a watcher event, so that an editor's
	// burst of writes is read once. Default 100 ms.
	Debounce time.Duration
}

// Status describes what a Holder has in force.
type Status struct {
	Path     string    // the .acl path given to Load
	Source   string    // "file", "defaults" (no .acl) or "admin-only" (nothing good loaded yet)
	Rules    int       // rules in force
	LoadedAt time.Time // when the policy in force was installed; zero for the initial admin-only policy
	// Err is the error of the last load or reload (a *ParseError for a
	// malformed file: errors.As gives its line and reason), nil when the last
	// attempt succeeded. While Err is set the previous policy stays in force.
	Err error
}

// Holder keeps the policy in force for one .acl file and reloads it (SPEC
// §5.1; issue 4: "a malformed .acl is reported with line and reason and the
// last good rules stay in force; reloaded on change"). Rules:
//
//   - before the first successful load the policy is AdminOnly: the first
//     load failing never fails open;
//   - the file missing (not an error reading it) installs Defaults;
//   - the file present and valid installs its rules (and only them);
//   - a malformed or unreadable file keeps whatever was in force — the last
//     good file's rules, the defaults, or admin-only — and records the error
//     in Status.Err (and the log) until a later load succeeds.
//
// A Holder is safe for concurrent use; Policy and Check never block on I/O.
type Holder struct {
	opts   HolderOptions
	log    *slog.Logger
	policy atomic.Pointer[Policy]

	mu       sync.Mutex // guards the fields below and serialises loads
	path     string
	loadedAt time.Time
	lastErr  error
	lastKey  string // what the last load attempt read: "absent", or the content hash
}

// NewHolder returns a Holder with the AdminOnly policy in force; call Load.
func NewHolder(opts HolderOptions) *Holder {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 2 * time.Second
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 100 * time.Millisecond
	}
	h := &Holder{opts: opts, log: opts.Logger, lastErr: errors.New("acl: no .acl loaded yet")}
	h.policy.Store(AdminOnly())
	return h
}

// Policy returns the policy in force (never nil).
func (h *Holder) Policy() *Policy { return h.policy.Load() }

// Check is Policy().Check.
func (h *Holder) Check(who Principal, action Action, name string, owners SessionOwners) Decision {
	return h.Policy().Check(who, action, name, owners)
}

// Status reports the policy in force and the last load error.
func (h *Holder) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.Policy()
	return Status{Path: h.path, Source: p.Source(), Rules: len(p.rules), LoadedAt: h.loadedAt, Err: h.lastErr}
}

// Load sets the .acl path (normally <workspace>/memory/.acl) and loads it.
// It returns the load error (see Holder for what stays in force then).
func (h *Holder) Load(path string) error {
	if path == "" {
		return errors.New("acl: load: empty path")
	}
	h.mu.Lock()
	h.path = path
	h.mu.Unlock()
	return h.reload(true)
}

// Reload reads the file given to Load again.
func (h *Holder) Reload() error { return h.reload(true) }

// reload reads and installs the file; unless force, it does nothing when
// the file reads as it did at the last attempt.
func (h *Holder) reload(force bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.path == "" {
		return errors.New("acl: reload: no path: call Load first")
	}
	data, err := readLimited(h.path)
	key := "absent"
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		key = "error: " + err.Error()
	default:
		sum := sha256.Sum256(data)
		key = fmt.Sprintf("%x", sum)
	}
	if !force && key == h.lastKey {
		return h.lastErr
	}
	h.lastKey = key

	var p *Policy
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p, err = Defaults(), nil
	case err != nil:
		err = fmt.Errorf("acl: read %s: %w", h.path, err)
	default:
		p, err = Parse(data)
		if err != nil {
			err = fmt.Errorf("acl: %s: %w", h.path, err)
		}
	}
	if err != nil {
		h.lastErr = err
		attrs := []any{"path", h.path, "in_force", h.Policy().Source(), "err", err}
		var pe *ParseError
		if errors.As(err, &pe) {
			attrs = append(attrs, "line", pe.Line, "column", pe.Column, "reason", pe.Reason)
		}
		h.log.Warn("acl invalid; keeping last good rules", attrs...)
		return err
	}
	h.policy.Store(p)
	h.loadedAt = time.Now()
	h.lastErr = nil
	h.log.Info("acl loaded", "path", h.path, "source", p.Source(), "rules", len(p.rules))
	return nil
}

// readLimited reads at most MaxFileSize+1 bytes (Parse refuses more).
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(f, MaxFileSize+1)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Run reloads the file whenever it changes until ctx is done, then returns
// ctx.Err(). It watches the file's folder with fsnotify (editors replace
// files by rename), debounced by Options.Debounce, and also checks the file
// every Options.PollInterval (content hash) because watchers die silently
// and the folder may not exist yet. Load must have been called first.
// Reload errors are recorded in Status and logged; Run carries on.
func (h *Holder) Run(ctx context.Context) error {
	h.mu.Lock()
	path := h.path
	h.mu.Unlock()
	if path == "" {
		return errors.New("acl: run: no path: call Load first")
	}
	dir, base := filepath.Dir(path), filepath.Base(path)

	var w *fsnotify.Watcher
	var events chan fsnotify.Event
	var errs chan error
	closeWatch := func() {
		if w != nil {
			_ = w.Close()
		}
		w, events, errs = nil, nil, nil
	}
	defer func() { closeWatch() }()
	startWatch := func() {
		nw, err := fsnotify.NewWatcher()
		if err != nil {
			h.log.Warn("acl watcher unavailable; polling", "err", err)
			return
		}
		if err := nw.Add(dir); err != nil {
			_ = nw.Close()
			h.log.Debug("acl folder not watchable yet; polling", "dir", dir, "err", err)
			return
		}
		w, events, errs = nw, nw.Events, nw.Errors
	}
	startWatch()

	poll := time.NewTicker(h.opts.PollInterval)
	defer poll.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-events:
			if !ok {
				h.log.Warn("acl watcher closed; polling")
				closeWatch()
				continue
			}
			if filepath.Base(ev.Name) == base || filepath.Clean(ev.Name) == filepath.Clean(dir) {
				debounce.Reset(h.opts.Debounce)
			}
			if ev.Name == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				closeWatch() // the folder went away; re-added by the poll
			}
		case err, ok := <-errs:
			if !ok {
				closeWatch()
				continue
			}
			h.log.Warn("acl watcher error; reloading", "err", err)
			debounce.Reset(h.opts.Debounce)
		case <-debounce.C:
			_ = h.reload(false)
		case <-poll.C:
			if w == nil {
				startWatch()
			}
			_ = h.reload(false)
		}
	}
}
