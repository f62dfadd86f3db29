package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProfileEntry is one profile of the light index (SPEC §6): what start-up
// learns from the file system alone, without reading any file. ID is the
// role's folder name; Path the config file, workspace-relative with
// slashes; Type "role" (a folder memory/roles/<id>/ with a config.md);
// Mtime the config file's modification time in Unix ms.
type ProfileEntry struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Path  string `json:"path"`
	Type  string `json:"type"`
	Mtime int64  `json:"mtime"`
}

// RolesDir is where ScanProfiles looks, relative to the workspace (SPEC §4.1).
const RolesDir = "memory/roles"

// ScanProfiles builds the light index of the workspace's profiles: one
// entry per memory/roles/<id>/config.md, by id. It stats files and reads
// no file's content. A workspace without memory/roles has no profiles (no
// error); other file-system errors are returned wrapped.
func ScanProfiles(workspace string) ([]ProfileEntry, error) {
	dir := filepath.Join(workspace, filepath.FromSlash(RolesDir))
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("worker: scan profiles in %s: %w", dir, err)
	}
	var out []ProfileEntry
	for _, e := range ents {
		if !e.IsDir() || e.Name()[0] == '.' {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name(), "config.md"))
		if err != nil || !fi.Mode().IsRegular() {
			continue // a folder without a config is not a profile yet
		}
		out = append(out, ProfileEntry{ID: e.Name(), Name: e.Name(), Path: RolesDir + "/" + e.Name() + "/config.md",
			Type: "role", Mtime: fi.ModTime().UnixMilli()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DefaultMaxInstances caps a Pool's running instances.
const DefaultMaxInstances = 16

// Pool errors.
var (
	ErrUnknownProfile  = errors.New("worker: unknown profile")
	ErrUnknownInstance = errors.New("worker: unknown instance")
	ErrTooManyInstance = errors.New("worker: too many instances")
	ErrPoolNotRunning  = errors.New("worker: pool is not running")
)

// PoolOptions configure a Pool. Workspace is required.
type PoolOptions struct {
	// Workspace holds memory/roles (SPEC §4.1).
	Workspace string
	// Supervisor is the template of every instance's SupervisorOptions;
	// the pool sets ProfileID, InstanceID, OnStatus and OnEvent (and
	// leaves Args nil unless set, so the default worker arguments are used).
	Supervisor SupervisorOptions
	// EnvFor, when set, adds environment variables for one profile's
	// workers at Spawn (e.g. EnvModel with the profile's model settings);
	// its error fails the Spawn. Default: none.
	EnvFor func(profileID string) ([]string, error)
	// OnStatus receives every instance's status changes. Default: none.
	OnStatus func(Status)
	// OnEvent receives every instance's run events with its instance id.
	// Default: none.
	OnEvent func(instanceID string, m Msg)
	// MaxInstances caps running instances. Default DefaultMaxInstances.
	MaxInstances int
	// Logger default slog.Default().
	Logger *slog.Logger
}

// Pool holds the light profile index and the running instances (SPEC §6:
// profile = template + instances). Spawn, Stop and List are safe for
// concurrent use once Run has started.
type Pool struct {
	o PoolOptions

	mu       sync.Mutex
	ctx      context.Context // Run's; nil before Run and after it returns
	index    []ProfileEntry
	scanned  time.Time                // when index was scanned
	running  map[string]*poolInstance // by instance id
	changed  chan struct{}            // closed and replaced on every status change (WaitReady)
	instWait sync.WaitGroup
}

type poolInstance struct {
	profile string
	k       int
	sup     *Supervisor
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewPool scans the profile index (ScanProfiles) and returns the pool; no
// process starts before Spawn.
func NewPool(o PoolOptions) (*Pool, error) {
	if o.Workspace == "" {
		return nil, errors.New("worker: pool needs a workspace")
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = DefaultMaxInstances
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OnStatus == nil {
		o.OnStatus = func(Status) {}
	}
	if o.OnEvent == nil {
		o.OnEvent = func(string, Msg) {}
	}
	idx, err := ScanProfiles(o.Workspace)
	if err != nil {
		return nil, err
	}
	return &Pool{o: o, index: idx, scanned: time.Now(), running: map[string]*poolInstance{}, changed: make(chan struct{})}, nil
}

// Profiles returns the light index, by id.
//
// An index older than profilesFresh is rescanned first (stat only), so a
// role folder created or removed since is listed as it is.
func (p *Pool) Profiles() []ProfileEntry {
	p.mu.Lock()
	stale := time.Since(p.scanned) > profilesFresh
	p.mu.Unlock()
	if stale {
		if err := p.Rescan(); err != nil {
			p.o.Logger.Warn("profile index rescan failed", "err", err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ProfileEntry(nil), p.index...)
}

// profilesFresh is how long Profiles trusts the last scan.
const profilesFresh = time.Second

// Rescan rebuilds the light index (e.g. after profiles.create).
func (p *Pool) Rescan() error {
	idx, err := ScanProfiles(p.o.Workspace)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.index, p.scanned = idx, time.Now()
	p.mu.Unlock()
	return nil
}

// Run makes the pool accept Spawn until ctx is done, then stops every
// instance (gracefully, see Supervisor.Run), waits for them and returns nil.
func (p *Pool) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.ctx != nil {
		p.mu.Unlock()
		return errors.New("worker: pool is already running")
	}
	p.ctx = ctx
	p.mu.Unlock()
	<-ctx.Done()
	p.mu.Lock()
	p.ctx = nil
	p.mu.Unlock()
	p.instWait.Wait()
	return nil
}

func (p *Pool) known(profileID string) bool {
	for _, e := range p.index {
		if e.ID == profileID {
			return true
		}
	}
	return false
}

// Spawn starts a new instance "<profileID>-<k>" of a profile of the index
// (k: the smallest positive number not in use for it) with its own worker
// process, and returns its first status. Errors: ErrUnknownProfile (not in
// the index as rescanned now), ErrTooManyInstance, ErrPoolNotRunning,
// or the supervisor's configuration error.
func (p *Pool) Spawn(profileID string) (Status, error) {
	return p.spawn(profileID, 0)
}

// Start starts instance id ("<profile>-<k>", k ≥ 1, of a profile of the
// index) under that very id when it is not running, and returns its
// status; an instance already running is left as it is and its status
// returned. It is how a chat with an instance that is gone (the app
// restarted, the instance was stopped) starts it again on demand. Errors:
// ErrUnknownInstance (not of that form), those of Spawn.
func (p *Pool) Start(instanceID string) (Status, error) {
	profileID, k, ok := SplitInstanceID(instanceID)
	if !ok {
		return Status{}, fmt.Errorf("%w: %q (want <profile>-<k>, k ≥ 1)", ErrUnknownInstance, instanceID)
	}
	return p.spawn(profileID, k)
}

// SplitInstanceID splits "<profile>-<k>" into the profile and k (≥ 1,
// written without leading zeros); ok is false for any other form.
func SplitInstanceID(id string) (profileID string, k int, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return "", 0, false
	}
	k, err := strconv.Atoi(id[i+1:])
	if err != nil || k < 1 || strconv.Itoa(k) != id[i+1:] {
		return "", 0, false
	}
	return id[:i], k, true
}

// spawn starts instance k of profileID (k 0: the smallest k not in use).
// For a given k already running it returns that instance's status.
func (p *Pool) spawn(profileID string, want int) (Status, error) {
	// The index is rescanned (stat only) so that a role created or deleted
	// since start-up is seen as it is now.
	if err := p.Rescan(); err != nil {
		return Status{}, err
	}
	p.mu.Lock()
	known := p.known(profileID)
	p.mu.Unlock()
	if !known {
		return Status{}, fmt.Errorf("%w: %q (no %s/%s/config.md)", ErrUnknownProfile, profileID, RolesDir, profileID)
	}
	var extra []string
	if p.o.EnvFor != nil { // may read the profile's files: outside the lock
		var err error
		if extra, err = p.o.EnvFor(profileID); err != nil {
			return Status{}, fmt.Errorf("worker: spawn %s: %w", profileID, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil {
		return Status{}, ErrPoolNotRunning
	}
	if want > 0 {
		if in := p.running[profileID+"-"+strconv.Itoa(want)]; in != nil {
			return in.sup.Status(), nil
		}
	}
	if len(p.running) >= p.o.MaxInstances {
		return Status{}, fmt.Errorf("%w: %d running (limit %d)", ErrTooManyInstance, len(p.running), p.o.MaxInstances)
	}
	k := want
	for k == 0 || want == 0 && p.running[profileID+"-"+strconv.Itoa(k)] != nil {
		k++
	}
	id := profileID + "-" + strconv.Itoa(k)
	so := p.o.Supervisor
	so.ProfileID, so.InstanceID = profileID, id
	so.Env = append(append([]string(nil), so.Env...), extra...)
	so.OnStatus = func(st Status) {
		p.o.OnStatus(st)
		p.notify()
	}
	so.OnEvent = func(m Msg) { p.o.OnEvent(id, m) }
	if so.Logger == nil {
		so.Logger = p.o.Logger
	}
	sup, err := NewSupervisor(so)
	if err != nil {
		return Status{}, err
	}
	ctx, cancel := context.WithCancel(p.ctx)
	in := &poolInstance{profile: profileID, k: k, sup: sup, cancel: cancel, done: make(chan struct{})}
	p.running[id] = in
	p.instWait.Add(1)
	go func() {
		defer p.instWait.Done()
		defer close(in.done)
		_ = sup.Run(ctx) // Run reports its failures as statuses
		p.mu.Lock()
		if p.running[id] == in {
			delete(p.running, id)
		}
		p.mu.Unlock()
		p.notify()
	}()
	p.o.Logger.Info("instance spawned", "instance", id, "profile", profileID)
	return sup.Status(), nil
}

// Stop stops an instance and waits until its process is gone (at most
// the supervisor's StopTimeout plus a little, or ctx). Errors:
// ErrUnknownInstance, or ctx's error.
func (p *Pool) Stop(ctx context.Context, instanceID string) error {
	p.mu.Lock()
	in := p.running[instanceID]
	p.mu.Unlock()
	if in == nil {
		return fmt.Errorf("%w: %q", ErrUnknownInstance, instanceID)
	}
	in.cancel()
	select {
	case <-in.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("worker: stop %s: %w", instanceID, ctx.Err())
	}
}

// Send writes a request to an instance (see Supervisor.Send). Errors:
// ErrUnknownInstance, ErrNotReady, ErrBadRequest, a write error.
func (p *Pool) Send(instanceID string, m Msg) error {
	p.mu.Lock()
	in := p.running[instanceID]
	p.mu.Unlock()
	if in == nil {
		return fmt.Errorf("%w: %q", ErrUnknownInstance, instanceID)
	}
	return in.sup.Send(m)
}

// List returns the running instances' statuses, by profile then k.
func (p *Pool) List() []Status {
	p.mu.Lock()
	ins := make([]*poolInstance, 0, len(p.running))
	for _, in := range p.running {
		ins = append(ins, in)
	}
	p.mu.Unlock()
	sort.Slice(ins, func(i, j int) bool {
		if ins[i].profile != ins[j].profile {
			return ins[i].profile < ins[j].profile
		}
		return ins[i].k < ins[j].k
	})
	out := make([]Status, len(ins))
	for i, in := range ins {
		out[i] = in.sup.Status()
	}
	return out
}

// notify wakes every WaitReady (an instance's status changed, or it is gone).
func (p *Pool) notify() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// WaitReady waits until instance id accepts runs (state ready or busy) and
// returns its status. It gives up with an error wrapping ErrNotReady when
// the instance, after starting or restarting during the wait, crashes or
// hangs (the error gives the reason; the supervisor goes on restarting
// it), with ErrUnknownInstance when it is not running or is stopped, and
// with ctx's error (wrapped) when ctx ends first.
func (p *Pool) WaitReady(ctx context.Context, instanceID string) (Status, error) {
	// A failure counts when it is of an attempt made during the wait:
	// either a start was seen (state starting or restarting) before the
	// crash or hang, or the restart count grew since the first look. The
	// count matters because a crashed state lasts an instant: the
	// supervisor moves on to restarting (the backoff) at once, so on a
	// loaded machine a waiter may only ever see restarting, and must not
	// wait for ever behind the growing backoff.
	armed := false
	firstRestarts := -1
	for {
		p.mu.Lock()
		in, ch := p.running[instanceID], p.changed
		p.mu.Unlock()
		if in == nil {
			return Status{}, fmt.Errorf("%w: %q is not running", ErrUnknownInstance, instanceID)
		}
		st := in.sup.Status()
		if firstRestarts < 0 {
			firstRestarts = st.Restarts
		}
		failedSince := st.Restarts > firstRestarts
		switch st.State {
		case StateReady, StateBusy:
			return st, nil
		case StateStarting:
			armed = true
		case StateRestarting:
			if failedSince {
				return st, fmt.Errorf("%w: %s %s: %s", ErrNotReady, instanceID, st.State, st.Reason)
			}
			armed = true
		case StateCrashed, StateHung:
			if armed || failedSince {
				return st, fmt.Errorf("%w: %s %s: %s", ErrNotReady, instanceID, st.State, st.Reason)
			}
		case StateStopped:
			return st, fmt.Errorf("%w: %q stopped", ErrUnknownInstance, instanceID)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, fmt.Errorf("worker: wait for %s to be ready (%s): %w", instanceID, st.State, ctx.Err())
		}
	}
}
