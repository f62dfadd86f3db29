package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/worker"
)

// fakeInstances is an Instances over a map, with one known profile "coder".
type fakeInstances struct {
	mu      sync.Mutex
	running map[string]worker.Status
}

func (f *fakeInstances) Profiles() []worker.ProfileEntry {
	return []worker.ProfileEntry{{ID: "coder", Name: "coder", Path: "memory/roles/coder/config.md", Type: "role", Mtime: 7}}
}
func (f *fakeInstances) List() []worker.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []worker.Status
	for _, s := range f.running {
		out = append(out, s)
	}
	return out
}
func (f *fakeInstances) Spawn(p string) (worker.Status, error) {
	if p != "coder" {
		return worker.Status{}, fmt.Errorf("%w: %q", worker.ErrUnknownProfile, p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.running) > 0 {
		return worker.Status{}, worker.ErrTooManyInstance
	}
	st := worker.Status{InstanceID: "coder-1", ProfileID: "coder", State: worker.StateStarting}
	f.running[st.InstanceID] = st
	return st, nil
}
func (f *fakeInstances) Stop(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.running[id]; !ok {
		return fmt.Errorf("%w: %q", worker.ErrUnknownInstance, id)
	}
	delete(f.running, id)
	return nil
}

func TestProfilesSpawnStopList(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Token: "tok", Version: "test", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	Register(Options{Gateway: srv, Memory: fakeFiles{}, Instances: &fakeInstances{running: map[string]worker.Status{}}, Version: "test", Started: time.Now()})
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	cl, err := gateway.Dial(ctx, gateway.ClientOptions{URL: "ws://" + srv.Addr() + "/ws", Token: "tok",
		Client: gateway.ClientInfo{ID: "inst-test", Version: "test", Platform: "linux", Mode: "test", InstanceID: "inst-test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	code := func(err error) string {
		var ge *gateway.Error
		if errors.As(err, &ge) {
			return ge.Code
		}
		return fmt.Sprint(err)
	}
	var sp struct{ Instance worker.Status }
	if err := cl.Call(ctx, "profiles.spawn", map[string]any{"profileId": "coder"}, &sp); err != nil || sp.Instance.InstanceID != "coder-1" {
		t.Fatalf("spawn: %+v %v", sp, err)
	}
	if err := cl.Call(ctx, "profiles.spawn", map[string]any{"profileId": "coder"}, nil); code(err) != gateway.CodeConflict {
		t.Fatalf("spawn over the limit: %v", err)
	}
	if err := cl.Call(ctx, "profiles.spawn", map[string]any{"profileId": "ghost"}, nil); code(err) != gateway.CodeNotFound {
		t.Fatalf("spawn unknown: %v", err)
	}
	if err := cl.Call(ctx, "profiles.spawn", map[string]any{}, nil); code(err) != gateway.CodeInvalidRequest {
		t.Fatalf("spawn without profileId: %v", err)
	}
	for _, bad := range []string{"../etc", "a/b", ".hidden"} {
		if err := cl.Call(ctx, "profiles.spawn", map[string]any{"profileId": bad}, nil); code(err) != gateway.CodeInvalidRequest {
			t.Fatalf("spawn %q: %v", bad, err)
		}
	}
	// Without a guard `as` cannot be resolved at all (with one, adminOnly
	// refuses a role with FORBIDDEN); either way nothing is spawned.
	if err := cl.Call(ctx, "profiles.spawn", map[string]any{"profileId": "coder", "as": "coder"}, nil); code(err) != gateway.CodeUnavailable {
		t.Fatalf("spawn as a role must be refused: %v", err)
	}
	var list struct {
		Index     []worker.ProfileEntry
		Instances []worker.Status
	}
	if err := cl.Call(ctx, "profiles.list", map[string]any{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Index) != 1 || list.Index[0].Path != "memory/roles/coder/config.md" || len(list.Instances) != 1 || list.Instances[0].State != worker.StateStarting {
		t.Fatalf("profiles.list %+v", list)
	}
	if err := cl.Call(ctx, "profiles.stop", map[string]any{"instanceId": "coder-1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := cl.Call(ctx, "profiles.stop", map[string]any{"instanceId": "coder-1"}, nil); code(err) != gateway.CodeNotFound {
		t.Fatalf("stop twice: %v", err)
	}
	if !contains(cl.Hello().Features.Events, InstanceEvent) {
		t.Fatalf("%s not advertised: %v", InstanceEvent, cl.Hello().Features.Events)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
