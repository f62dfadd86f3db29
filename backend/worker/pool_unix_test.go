//go:build unix

package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestScanProfilesIsTheLightIndex(t *testing.T) {
	ws := t.TempDir()
	if got, err := ScanProfiles(ws); err != nil || len(got) != 0 {
		t.Fatalf("no memory/roles: %v %v", got, err)
	}
	for _, r := range []string{"writer", "coder"} {
		d := filepath.Join(ws, "memory", "roles", r)
		os.MkdirAll(d, 0o755)
		// Unreadable content: the index must not read it.
		if err := os.WriteFile(filepath.Join(d, "config.md"), []byte("---\nbroken: [\n"), 0o000); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(ws, "memory", "roles", "empty"), 0o755) // no config.md
	mt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(ws, "memory", "roles", "coder", "config.md"), mt, mt)
	got, err := ScanProfiles(ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "coder" || got[1].ID != "writer" {
		t.Fatalf("index %+v", got)
	}
	if got[0].Path != "memory/roles/coder/config.md" || got[0].Type != "role" || got[0].Mtime != mt.UnixMilli() {
		t.Fatalf("entry %+v", got[0])
	}
}

func TestPoolSpawnStopList(t *testing.T) {
	srv := scriptedModel(t)
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "memory", "roles", "coder"), 0o755)
	os.WriteFile(filepath.Join(ws, "memory", "roles", "coder", "config.md"), []byte("x"), 0o644)
	cfg, _ := json.Marshal(map[string]string{"provider": "openai", "baseUrl": srv.URL, "model": "scripted"})
	var mu sync.Mutex
	finals := map[string]string{}
	p, err := NewPool(PoolOptions{
		Workspace: ws, MaxInstances: 2,
		Supervisor: SupervisorOptions{Executable: os.Args[0], Env: []string{envHelper + "=worker"},
			HeartbeatInterval: 100 * time.Millisecond, HangTimeout: time.Second},
		EnvFor: func(profile string) ([]string, error) { return []string{EnvModel + "=" + string(cfg)}, nil },
		OnEvent: func(id string, m Msg) {
			if m.Type == TypeFinal {
				var f Final
				json.Unmarshal(m.Payload, &f)
				mu.Lock()
				finals[id] = f.Content
				mu.Unlock()
			}
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Spawn("coder"); !errors.Is(err, ErrPoolNotRunning) {
		t.Fatalf("spawn before Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var a Status
	waitFor(t, 5*time.Second, "pool running", func() bool { a, err = p.Spawn("coder"); return !errors.Is(err, ErrPoolNotRunning) })
	if err != nil || a.InstanceID != "coder-1" {
		t.Fatalf("spawn coder: %+v %v", a, err)
	}
	if _, err := p.Spawn("nobody"); !errors.Is(err, ErrUnknownProfile) {
		t.Fatalf("spawn of an unknown profile: %v", err)
	}
	// A profile created after start-up is found by the rescan Spawn does.
	os.MkdirAll(filepath.Join(ws, "memory", "roles", "writer"), 0o755)
	os.WriteFile(filepath.Join(ws, "memory", "roles", "writer", "config.md"), []byte("x"), 0o644)
	b, err := p.Spawn("writer")
	if err != nil || b.InstanceID != "writer-1" {
		t.Fatalf("spawn writer: %+v %v", b, err)
	}
	if _, err := p.Spawn("coder"); !errors.Is(err, ErrTooManyInstance) {
		t.Fatalf("third instance over the limit 2: %v", err)
	}
	waitFor(t, 15*time.Second, "both ready", func() bool {
		l := p.List()
		return len(l) == 2 && l[0].State == StateReady && l[1].State == StateReady
	})
	m, _ := NewMsg(TypeRun, "r1", RunRequest{Messages: []RunMessage{{Role: "user", Content: "from coder"}}})
	if err := p.Send("coder-1", m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "coder's answer", func() bool { mu.Lock(); defer mu.Unlock(); return finals["coder-1"] == "from coder" })

	pid := p.List()[0].PID
	if err := p.Stop(context.Background(), "coder-1"); err != nil {
		t.Fatal(err)
	}
	if l := p.List(); len(l) != 1 || l[0].InstanceID != "writer-1" {
		t.Fatalf("after stop: %+v", l)
	}
	if err := p.Stop(context.Background(), "coder-1"); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("second stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("stopped instance's process %d: %v, want ESRCH", pid, err)
	}
	// k is reused once free.
	if c, err := p.Spawn("coder"); err != nil || c.InstanceID != "coder-1" {
		t.Fatalf("respawn: %+v %v", c, err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("pool Run did not return")
	}
	if l := p.List(); len(l) != 0 {
		t.Fatalf("instances after the pool stopped: %+v", l)
	}
}

// TestPoolStartByID: Start brings an instance back under its own id (what
// a chat with an instance that vanished in a restart needs), leaves a
// running one alone, and WaitReady returns once it accepts runs; a worker
// that cannot start makes WaitReady fail with the reason instead of
// waiting for ever, and a stopped instance is reported gone.
func TestPoolStartByID(t *testing.T) {
	for _, bad := range []string{"coder", "coder-0", "coder-01", "-1", "coder-x"} {
		if _, _, ok := SplitInstanceID(bad); ok {
			t.Fatalf("SplitInstanceID(%q) accepted", bad)
		}
	}
	if p, k, ok := SplitInstanceID("code-expert-12"); !ok || p != "code-expert" || k != 12 {
		t.Fatalf("SplitInstanceID(code-expert-12) = %q %d %v", p, k, ok)
	}
	srv := scriptedModel(t)
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "memory", "roles", "coder"), 0o755)
	os.WriteFile(filepath.Join(ws, "memory", "roles", "coder", "config.md"), []byte("x"), 0o644)
	cfg, _ := json.Marshal(map[string]string{"provider": "openai", "baseUrl": srv.URL, "model": "scripted"})
	newPool := func(exe string) *Pool {
		p, err := NewPool(PoolOptions{
			Workspace: ws,
			Supervisor: SupervisorOptions{Executable: exe, Env: []string{envHelper + "=worker"},
				HeartbeatInterval: 100 * time.Millisecond, HangTimeout: 5 * time.Second, MinBackoff: 50 * time.Millisecond},
			EnvFor: func(string) ([]string, error) { return []string{EnvModel + "=" + string(cfg)}, nil },
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return p
	}
	// start is Start once the pool runs (Run has just been called).
	start := func(p *Pool, id string) (st Status, err error) {
		waitFor(t, 5*time.Second, "pool running", func() bool { st, err = p.Start(id); return !errors.Is(err, ErrPoolNotRunning) })
		return st, err
	}
	p := newPool(os.Args[0])
	if _, err := p.Start("nobody-1"); !errors.Is(err, ErrUnknownProfile) {
		t.Fatalf("start of an unknown profile's instance: %v", err)
	}
	if _, err := p.Start("coder"); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("start of a profile id: %v", err)
	}
	if _, err := p.WaitReady(context.Background(), "coder-3"); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("wait for an instance not running: %v", err)
	}
	st, err := start(p, "coder-3") // k 3 although 1 and 2 are free: the id asked for
	if err != nil || st.InstanceID != "coder-3" {
		t.Fatalf("start coder-3: %+v %v", st, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if st, err = p.WaitReady(ctx, "coder-3"); err != nil || st.State != StateReady {
		t.Fatalf("wait ready: %+v %v", st, err)
	}
	pid := st.PID
	if again, err := p.Start("coder-3"); err != nil || again.PID != pid { // running: left alone
		t.Fatalf("second start: %+v %v (pid was %d)", again, err, pid)
	}
	if s, err := p.Spawn("coder"); err != nil || s.InstanceID != "coder-1" {
		t.Fatalf("spawn after start: %+v %v", s, err)
	}
	m, _ := NewMsg(TypeRun, "r1", RunRequest{Messages: []RunMessage{{Role: "user", Content: "hi"}}})
	if err := p.Send("coder-3", m); err != nil {
		t.Fatal(err)
	}
	// A stop while someone waits: the wait ends, naming the instance gone.
	waited := make(chan error, 1)
	go func() {
		_, err := p.WaitReady(context.Background(), "coder-1")
		if err == nil { // ready already: wait again for the stop below
			for {
				if _, err = p.WaitReady(context.Background(), "coder-1"); err != nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		waited <- err
	}()
	if err := p.Stop(context.Background(), "coder-1"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, ErrUnknownInstance) {
			t.Fatalf("wait across a stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitReady did not return after the instance stopped")
	}

	// A worker that cannot start: the wait fails with the reason.
	bad := newPool(filepath.Join(ws, "no-such-binary"))
	if _, err := start(bad, "coder-1"); err != nil {
		t.Fatal(err)
	}
	// Its own deadline: the one above may be mostly spent on a loaded machine.
	badCtx, badCancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer badCancel()
	st, err = bad.WaitReady(badCtx, "coder-1")
	// Crashed, or already restarting after the crash (that state follows
	// at once and is what a loaded machine's waiter sees): either way the
	// error names the cause.
	if !errors.Is(err, ErrNotReady) || (st.State != StateCrashed && st.State != StateRestarting) || !strings.Contains(err.Error(), "no-such-binary") {
		t.Fatalf("wait for a worker that cannot start: %+v %v", st, err)
	}
	// ctx ends the wait.
	short, stop := context.WithCancel(context.Background())
	stop()
	if _, err := bad.WaitReady(short, "coder-1"); err == nil || (!errors.Is(err, context.Canceled) && !errors.Is(err, ErrNotReady)) {
		t.Fatalf("wait with a done context: %v", err)
	}
}
