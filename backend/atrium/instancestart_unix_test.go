//go:build unix

package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/paths"
)

// runApp runs an app on layout until stop is called (or the test ends):
// two runs on one layout are the app restarted.
func runApp(t *testing.T, layout paths.Layout, getenv func(string) string) (a *App, stop func()) {
	t.Helper()
	return runOpts(t, Options{Layout: layout, Port: -1, Version: "test", Getenv: getenv,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// sendUntilPool is chat.send, retried while App.Run is still starting the
// worker pool (the send is then UNAVAILABLE: "pool is not running").
func sendUntilPool(t *testing.T, cl *client, r *recorder, params map[string]any) (sendResult, string, runEvent) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var res sendResult
		resp := cl.call("chat.send", params)
		if !resp.OK {
			if resp.Error.Code == "UNAVAILABLE" && strings.Contains(resp.Error.Message, "pool is not running") && time.Now().Before(deadline) {
				continue
			}
			t.Fatalf("chat.send %v: %+v", params, resp.Error)
		}
		must(t, json.Unmarshal(resp.Payload, &res))
		evs := r.wait(t, "the run to end", runEnded(t, res.RunID))
		names, ps := eventsOfRun(t, evs, res.RunID)
		return res, names[len(names)-1], ps[len(ps)-1]
	}
}

// TestChatStartsInstanceOnDemand (issue 14 item 11): instances are
// processes and vanish when the app restarts, but a chat with one goes on:
// a send from the person to an instance that is not running starts it
// under its own id and answers once it is ready; after a restart of the
// app the same id answers again, continuing its timeline. A device (node
// connection) never starts a process: its send is UNAVAILABLE, and
// nothing starts.
func TestChatStartsInstanceOnDemand(t *testing.T) {
	mdl, _ := workerModel(t)
	env := map[string]string{"OPENAI_BASE_URL": mdl.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}
	getenv := func(k string) string { return env[k] }
	dir := t.TempDir()
	layout := paths.Layout{Home: filepath.Join(dir, "home"), Workspace: filepath.Join(dir, "ws")}
	writeFiles(t, layout.Workspace, map[string]string{
		"memory/roles/code-expert/config.md": "---\ndescription: code\n---\nYou are the code expert.\n",
	})

	a, stop := runApp(t, layout, getenv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token, Role: gateway.RoleNode,
		Client: gateway.ClientInfo{ID: "phone", Version: "test", Platform: "ios", Mode: "node", InstanceID: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	// A node does not chat at all (issue 16: node methods only).
	err = node.Call(ctx, "chat.send", map[string]any{"profileId": "code-expert-1", "message": "hi", "idempotencyKey": "n1"}, nil)
	if code := errCode(err); code != gateway.CodeForbidden {
		t.Fatalf("a node's send to an instance that is not running: %v", err)
	}
	// A paired operator device scoped to the role chats, but does not
	// start processes.
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "start-admin")
	key, toks := pairDevice(ctx, t, a, admin, []string{gateway.RoleOperator}, nil)
	must(t, admin.Call(ctx, "device.scope.set", map[string]any{"deviceId": key.Public().ID(), "scope": "role:code-expert"}, nil))
	phone, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleOperator], Role: gateway.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}
	err = phone.Call(ctx, "chat.send", map[string]any{"profileId": "code-expert-1", "message": "hi", "idempotencyKey": "p1"}, nil)
	var ge *gateway.Error
	if code := errCode(err); code != gateway.CodeUnavailable || !errors.As(err, &ge) || !ge.Retryable || !strings.Contains(ge.Message, "not running") {
		t.Fatalf("a device's send to an instance that is not running: %v", err)
	}
	if l := a.Pool.List(); len(l) != 0 {
		t.Fatalf("a device's send started %+v", l)
	}

	cl := dial(t, a)
	r := record(cl)
	first, end, last := sendUntilPool(t, cl, r, map[string]any{"profileId": "code-expert-1", "sessionId": "s1",
		"message": "hello from before the restart", "idempotencyKey": "k1"})
	if end != "chat.final" || last.Message == nil || last.Message.Content != "hello from before the restart" || last.Message.ProfileID != "code-expert-1" {
		t.Fatalf("first answer: %s %+v %+v", end, last.Message, last.Error)
	}
	if l := a.Pool.List(); len(l) != 1 || l[0].InstanceID != "code-expert-1" || l[0].State != "ready" {
		t.Fatalf("instances after the send: %+v", l)
	}
	// The instance's start was announced like a spawn's.
	r.wait(t, "profiles.instance of code-expert-1", func(evs []gateway.EventFrame) bool {
		for _, e := range evs {
			if e.Event == "profiles.instance" && strings.Contains(string(e.Payload), `"instanceId":"code-expert-1"`) {
				return true
			}
		}
		return false
	})
	stop()

	// The app restarts: no instance runs; the same id answers again.
	a, _ = runApp(t, layout, getenv)
	if l := a.Pool.List(); len(l) != 0 {
		t.Fatalf("instances right after the restart: %+v", l)
	}
	cl = dial(t, a)
	r = record(cl)
	_, end, last = sendUntilPool(t, cl, r, map[string]any{"profileId": "code-expert-1", "sessionId": "s1",
		"message": "hello after the restart", "idempotencyKey": "k2"})
	if end != "chat.final" || last.Message == nil || last.Message.Content != "hello after the restart" {
		t.Fatalf("answer after the restart: %s %+v %+v", end, last.Message, last.Error)
	}
	var page struct {
		Messages []struct{ ID, Role, Content string }
	}
	cl.ok("history.profile", map[string]any{"profileId": "code-expert-1", "limit": 10}, &page)
	var texts []string
	for _, m := range page.Messages {
		texts = append(texts, m.Role+":"+m.Content)
	}
	want := "user:hello from before the restart|assistant:hello from before the restart|user:hello after the restart|assistant:hello after the restart"
	if strings.Join(texts, "|") != want {
		t.Fatalf("timeline of code-expert-1 = %q (first run %s)", texts, first.RunID)
	}
}
