//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// TestAgentsSpawnStop: `atrium agents spawn <role>` starts an instance in
// the running app (a real worker process: this test binary re-executed,
// see TestMain) that becomes ready; `agents stop` ends the process.
func TestAgentsSpawnStop(t *testing.T) {
	home, ws := agentsWorkspace(t)
	port := serveApp(t, home, ws)
	common := []string{"--home", home, "--workspace", ws}
	if code, out, errOut := runCLI(t, nil, append([]string{"agents", "create", "ops", "Keeps the staging servers running"}, common...)...); code != 0 {
		t.Fatalf("create: %d\n%s\n%s", code, out, errOut)
	}
	token, err := os.ReadFile(filepath.Join(home, "gateway.token"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := gateway.Dial(ctx, gateway.ClientOptions{URL: "ws://127.0.0.1:" + port + "/ws", Token: strings.TrimSpace(string(token)),
		Client: gateway.ClientInfo{ID: "cli-test", Version: "test", Platform: "linux", Mode: "test", InstanceID: "cli-test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	code, out, errOut := runCLI(t, nil, append([]string{"agents", "spawn", "ops"}, common...)...)
	if code != 0 || !strings.Contains(out, "Spawned instance ops-1 of ops") {
		t.Fatalf("spawn: %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, nil, append([]string{"agents", "spawn", "nobody"}, common...)...); code != 1 || !strings.Contains(errOut, "unknown profile") {
		t.Fatalf("spawn of an unknown role: %d %s", code, errOut)
	}

	type inst struct {
		InstanceID string `json:"instanceId"`
		State      string `json:"state"`
		PID        int    `json:"pid"`
	}
	// The app broadcasts the instance's states (profiles.instance).
	var states []string
	for len(states) == 0 || states[len(states)-1] != "ready" {
		var ev gateway.EventFrame
		select {
		case ev = <-cl.Events():
		case <-ctx.Done():
			t.Fatalf("no ready instance event; states so far %v", states)
		}
		if ev.Event != "profiles.instance" {
			continue
		}
		var st inst
		if err := json.Unmarshal(ev.Payload, &st); err != nil {
			t.Fatal(err)
		}
		if st.InstanceID != "ops-1" {
			t.Fatalf("event for %+v", st)
		}
		states = append(states, st.State)
	}
	if len(states) < 2 || states[0] != "starting" || states[len(states)-1] != "ready" {
		t.Fatalf("profiles.instance states %v", states)
	}
	var ready inst
	for ready.State != "ready" {
		var list struct{ Instances []inst }
		if err := cl.Call(ctx, "profiles.list", map[string]any{}, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Instances) == 1 {
			ready = list.Instances[0]
		}
		if ctx.Err() != nil {
			t.Fatalf("instance never ready: %+v", ready)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ready.InstanceID != "ops-1" || ready.PID == 0 || ready.PID == os.Getpid() {
		t.Fatalf("instance %+v", ready)
	}
	code, out, errOut = runCLI(t, nil, append([]string{"agents", "stop", "ops-1"}, common...)...)
	if code != 0 || !strings.Contains(out, "Stopped instance ops-1") {
		t.Fatalf("stop: %d\n%s\n%s", code, out, errOut)
	}
	if err := syscall.Kill(ready.PID, 0); err == nil {
		t.Fatalf("worker process %d still exists after stop", ready.PID)
	}
	if code, _, errOut := runCLI(t, nil, append([]string{"agents", "stop", "ops-1"}, common...)...); code != 1 || !strings.Contains(errOut, "unknown instance") {
		t.Fatalf("second stop: %d %s", code, errOut)
	}
}
