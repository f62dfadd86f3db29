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
