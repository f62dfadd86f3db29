package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
)

// TestMemoryWritesOverGateway drives memory.write, memory.note,
// conflicts.list and conflicts.resolve through the real app (state.db
// versions, memory engine, gateway) over a real WebSocket with
// gateway.Client.
func TestMemoryWritesOverGateway(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token,
		Client: gateway.ClientInfo{ID: "writes-test", Version: "test", Platform: "linux", Mode: "test", InstanceID: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, m := range []string{"memory.write", "memory.note", "conflicts.list", "conflicts.resolve"} {
		found := false
		for _, x := range cl.Hello().Features.Methods {
			found = found || x == m
		}
		if !found {
			t.Errorf("hello-ok does not advertise %s", m)
		}
	}
	call := func(method string, params, out any) error {
		t.Helper()
		return cl.Call(ctx, method, params, out)
	}
	code := func(err error) string {
		var ge *gateway.Error
		if errors.As(err, &ge) {
			return ge.Code
		}
		return ""
	}

	// A fresh write, as the operator (admin); searchable at once, announced.
	path := "memory/global/project-status.md"
	var w1 memory.WriteResult
	if err := call("memory.write", map[string]any{"path": path, "content": "# 项目状态\n\n项目路径改为 /srv/atrium-v2。\n", "mode": "replace", "idempotencyKey": "w-1"}, &w1); err != nil {
		t.Fatal(err)
	}
	if w1.Path != path || w1.Version != "admin=1" || w1.Conflict != nil || w1.Pending || w1.Merged {
		t.Fatalf("memory.write = %+v", w1)
	}
	waitChanged(t, cl, path, "write")
	var sr memory.SearchResponse
	if err := call("memory.search", map[string]any{"query": "项目路径"}, &sr); err != nil || len(sr.Results) == 0 || sr.Results[0].Path != path {
		t.Fatalf("search after write: %+v %v", sr, err)
	}
	// The idempotency key replays the first result without a second write.
	var again memory.WriteResult
	if err := call("memory.write", map[string]any{"path": path, "content": "# 项目状态\n\n项目路径改为 /srv/atrium-v2。\n", "mode": "replace", "idempotencyKey": "w-1"}, &again); err != nil || again.Version != "admin=1" {
		t.Fatalf("idempotent repeat: %+v %v", again, err)
	}
	// memory.get returns the version with the text.
	var got struct {
		Path, Text, Version string
	}
	if err := call("memory.get", map[string]any{"path": path}, &got); err != nil || got.Version != "admin=1" || !strings.Contains(got.Text, "atrium-v2") {
		t.Fatalf("memory.get = %+v %v", got, err)
	}

	// Based on that version: applied. Based on it again (now stale): the
	// last write wins and the replaced text is a conflict record and file.
	var w2, w3 memory.WriteResult
	if err := call("memory.write", map[string]any{"path": path, "content": "second text\n", "mode": "replace", "baseVersion": got.Version}, &w2); err != nil || w2.Version != "admin=2" || w2.Conflict != nil {
		t.Fatalf("write on the current version: %+v %v", w2, err)
	}
	if err := call("memory.write", map[string]any{"path": path, "content": "third text\n", "mode": "replace", "baseVersion": got.Version}, &w3); err != nil || w3.Conflict == nil {
		t.Fatalf("stale write: %+v %v", w3, err)
	}
	if w3.Conflict.Other != "second text\n" || w3.Conflict.Kind != "overwrite" {
		t.Fatalf("conflict %+v", w3.Conflict)
	}
	if b, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(w3.Conflict.File))); err != nil || string(b) != "second text\n" {
		t.Fatalf("conflict file %s: %q %v", w3.Conflict.File, b, err)
	}

	// memory.note appends to main's daily log.
	var n memory.WriteResult
	if err := call("memory.note", map[string]any{"text": "部署完成 deploy done"}, &n); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(n.Path, "memory/") || !strings.HasSuffix(n.Path, time.Now().Format("2006-01-02")+".md") {
		t.Fatalf("note path %s", n.Path)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, filepath.FromSlash(n.Path))); !strings.Contains(string(b), " 部署完成 deploy done\n") {
		t.Fatalf("note not in the log: %q", b)
	}

	// conflicts.list and conflicts.resolve.
	var list struct{ Conflicts []memory.Conflict }
	if err := call("conflicts.list", map[string]any{"state": "open"}, &list); err != nil || len(list.Conflicts) != 1 || list.Conflicts[0].ID != w3.Conflict.ID {
		t.Fatalf("conflicts.list = %+v %v", list, err)
	}
	var resolved struct{ Conflict memory.Conflict }
	if err := call("conflicts.resolve", map[string]any{"id": w3.Conflict.ID, "choice": "merged", "content": "second and third, merged\n"}, &resolved); err != nil {
		t.Fatal(err)
	}
	if resolved.Conflict.State != "resolved" || resolved.Conflict.Resolution == nil || resolved.Conflict.Resolution.Choice != "merged" {
		t.Fatalf("conflicts.resolve = %+v", resolved)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, filepath.FromSlash(path))); string(b) != "second and third, merged\n" {
		t.Fatalf("file after resolve: %q", b)
	}
	if err := call("conflicts.list", map[string]any{"state": "open"}, &list); err != nil || len(list.Conflicts) != 0 {
		t.Fatalf("open conflicts after resolve: %+v %v", list, err)
	}

	// Errors map to codes; the connection keeps working.
	for _, tc := range []struct {
		method string
		params map[string]any
		code   string
	}{
		{"memory.write", map[string]any{"path": "../../etc/passwd", "content": "x", "mode": "replace"}, gateway.CodeInvalidRequest},
		{"memory.write", map[string]any{"path": "memory/a.md", "content": "x", "mode": "upsert"}, gateway.CodeInvalidRequest},
		{"memory.write", map[string]any{"path": "memory/a.md", "content": "x", "mode": "replace", "baseVersion": "nonsense"}, gateway.CodeInvalidRequest},
		{"memory.write", map[string]any{"path": "memory/a.md", "content": 5, "mode": "replace"}, gateway.CodeInvalidRequest},
		{"memory.write", map[string]any{"path": w3.Conflict.File, "content": "x", "mode": "replace"}, gateway.CodeInvalidRequest},
		{"memory.note", map[string]any{"text": "  "}, gateway.CodeInvalidRequest},
		{"conflicts.list", map[string]any{"state": "maybe"}, gateway.CodeInvalidRequest},
		{"conflicts.resolve", map[string]any{"id": w3.Conflict.ID, "choice": "current"}, gateway.CodeConflict},
		{"conflicts.resolve", map[string]any{"id": 424242, "choice": "current"}, gateway.CodeNotFound},
		{"conflicts.resolve", map[string]any{"choice": "current"}, gateway.CodeInvalidRequest},
	} {
		err := call(tc.method, tc.params, nil)
		if code(err) != tc.code {
			t.Errorf("%s %v: %v, want %s", tc.method, tc.params, err, tc.code)
		}
	}
	var h map[string]any
	if err := call("health", nil, &h); err != nil {
		t.Fatal(err)
	}

	// A node connection does not write memory.
	node, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token, Role: gateway.RoleNode,
		Client: gateway.ClientInfo{ID: "phone", Version: "test", Platform: "ios", Mode: "node", InstanceID: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	for _, m := range []string{"memory.write", "memory.note", "conflicts.resolve"} {
		err := node.Call(ctx, m, map[string]any{"path": "memory/n.md", "content": "x", "mode": "replace", "text": "x", "id": 1, "choice": "current"}, nil)
		if code(err) != gateway.CodeForbidden {
			t.Errorf("node %s: %v, want FORBIDDEN", m, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "memory", "n.md")); !os.IsNotExist(err) {
		t.Error("a node wrote memory")
	}
}

// waitChanged waits for memory.changed naming path with reason.
func waitChanged(t *testing.T, cl *gateway.Client, path, reason string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-cl.Events():
			if ev.Event != "memory.changed" {
				continue
			}
			var p memory.ChangeEvent
			if err := json.Unmarshal(ev.Payload, &p); err == nil && p.Reason == reason {
				for _, x := range p.Paths {
					if x == path {
						return
					}
				}
			}
		case <-timeout:
			t.Fatalf("no memory.changed %s for %s", reason, path)
		}
	}
}
