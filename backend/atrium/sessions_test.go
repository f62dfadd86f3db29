package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/convo"
	"github.com/atrium-dev/atrium/backend/memory"
)

// waitClientEvent reads cl's events until one named name satisfies ok (nil: any).
func waitClientEvent(t *testing.T, cl *client, name string, ok func(json.RawMessage) bool) json.RawMessage {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e, open := <-cl.events:
			if !open {
				t.Fatalf("connection closed waiting for %s", name)
			}
			if e.Event == name && (ok == nil || ok(e.Payload)) {
				return e.Payload
			}
		case <-deadline:
			t.Fatalf("no %s event", name)
		}
	}
}

// TestSessionCommandWritesNote: `/new` over the gateway closes the session
// and writes its dated note into the role's memory (issue 24 item 3); the
// "sessions" settings change the reset policy without a restart.
func TestSessionCommandWritesNote(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" }) // offline: no model
	cl := dial(t, a)
	var sent chat.SendResult
	cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": "s-note", "message": "Remember the pelican migration plan",
		"idempotencyKey": "n1"}, &sent)
	waitClientEvent(t, cl, chat.EventFinal, func(p json.RawMessage) bool { return strings.Contains(string(p), sent.RunID) })

	// A role created now writes memory/.acl from the defaults, with no rule
	// for main's (absent) folder: the note is written all the same.
	cl.ok("profiles.create", map[string]any{"role": "helper", "description": "Helps with chores", "idempotencyKey": "pc"}, nil)
	var res chat.SendResult
	cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": "s-note", "message": "/new", "idempotencyKey": "n2"}, &res)
	if res.Reset == nil || res.RunID != "" || res.Reset.ClosedSessionID != "s-note" || res.SessionID == "s-note" ||
		!strings.HasPrefix(res.Reset.Note, "memory/roles/main/") || !strings.HasSuffix(res.Reset.Note, "-remember-the-pelican-migration-plan.md") {
		t.Fatalf("/new = %+v (%+v)", res, res.Reset)
	}
	waitClientEvent(t, cl, chat.EventReset, func(p json.RawMessage) bool { return strings.Contains(string(p), `"closedSessionId":"s-note"`) })
	note, err := os.ReadFile(filepath.Join(ws, filepath.FromSlash(res.Reset.Note)))
	if res.Reset.NoteError != "" || err != nil || !strings.Contains(string(note), "Remember the pelican migration plan") || !strings.Contains(string(note), "- Session: s-note") {
		t.Fatalf("note %s: %v\n%s", res.Reset.Note, err, note)
	}

	// Settings: an invalid policy is refused, a valid one applies at once.
	if r := cl.call("config.patch", map[string]any{"patch": map[string]any{"sessions": map[string]any{"reset": "idle"}}}); r.OK {
		t.Fatal("idle without minutes was accepted")
	}
	cl.ok("config.patch", map[string]any{"patch": map[string]any{"sessions": map[string]any{"reset": "off"}}}, nil)
	if got := a.Settings().Sessions; got != (config.Sessions{Reset: config.ResetOff}) {
		t.Fatalf("sessions settings %+v", got)
	}
	if p, err := ResetPolicy(a.Settings().Sessions); p != nil || err != nil {
		t.Fatalf("off policy = %v, %v", p, err)
	}
}

// TestSessionNoteOfADeletedRole: a session of a role deleted while it was
// open is closed later (/new, the daily or idle reset): its note must not
// make the deleted role's folder again (roles.list would show the role,
// devices scoped to it would read it), nor a folder named after an
// instance id; main's note is written before main has a folder.
func TestSessionNoteOfADeletedRole(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	cl := dial(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl.ok("profiles.create", map[string]any{"role": "helper", "description": "Helps with chores", "idempotencyKey": "pc"}, nil)
	note := func(role string) convo.Note {
		return convo.Note{Path: "memory/roles/" + role + "/2026-12-03-chores.md", Markdown: "# Chores\n\nSweep the porch.\n"}
	}
	if err := a.saveSessionNote(ctx, "helper", note("helper")); err != nil {
		t.Fatalf("a live role's note: %v", err)
	}
	cl.ok("profiles.delete", map[string]any{"role": "helper", "deleteMemory": true, "idempotencyKey": "pd"}, nil)
	for _, role := range []string{"helper", "helper-1"} {
		if err := a.saveSessionNote(ctx, role, note(role)); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("the note of %s after the role was deleted: %v, want memory.ErrNotFound", role, err)
		}
		if _, err := os.Stat(filepath.Join(ws, "memory", "roles", role)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("memory/roles/%s after its note: %v, want no folder", role, err)
		}
	}
	if err := a.saveSessionNote(ctx, "main", note("main")); err != nil {
		t.Fatalf("main's note: %v", err)
	}
}
