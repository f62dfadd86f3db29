package chat

import (
	"context"
	"testing"

	"github.com/atrium-dev/atrium/backend/history"
)

// TestRecoverInterrupted: a question whose process died before its run
// stored an answer gets an "interrupted" answer at start-up, under the id
// the clients were told (ReplyID), right after the question; runs that did
// end are left alone, and a second recovery finds nothing.
func TestRecoverInterrupted(t *testing.T) {
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	orphan := history.Message{ID: "u-orphan", ProfileID: "main", SessionID: "s1", RunID: "run-killed",
		Role: history.RoleUser, Content: "asked just before kill -9", TS: 1000}
	answered := history.Message{ID: "u-done", ProfileID: "main", SessionID: "s1", RunID: "run-done",
		Role: history.RoleUser, Content: "asked earlier", TS: 900}
	reply := history.Message{ID: ReplyID("run-done"), ProfileID: "main", SessionID: "s1", RunID: "run-done",
		Role: history.RoleAssistant, Content: "answered", TS: 901}
	for _, m := range []history.Message{answered, reply, orphan} {
		if err := e.store.Append(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.svc.RecoverInterrupted(ctx)
	if err != nil || n != 1 {
		t.Fatalf("RecoverInterrupted = %d, %v; want 1", n, err)
	}
	got, err := e.store.Get(ctx, ReplyID("run-killed"))
	if err != nil {
		t.Fatalf("no recovered answer under ReplyID: %v", err)
	}
	if got.Role != history.RoleAssistant || got.Error != history.ErrorInterrupted || got.TS != orphan.TS+1 || got.RunID != "run-killed" {
		t.Errorf("recovered answer: %+v", got)
	}
	page, err := e.store.Profile(ctx, "main", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Messages {
		ids = append(ids, m.ID)
	}
	want := []string{"u-done", ReplyID("run-done"), "u-orphan", ReplyID("run-killed")}
	if len(ids) != len(want) {
		t.Fatalf("history %v, want %v", ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("history %v, want %v", ids, want)
		}
	}
	if n, err := e.svc.RecoverInterrupted(ctx); err != nil || n != 0 {
		t.Fatalf("second RecoverInterrupted = %d, %v; want 0", n, err)
	}
	// A live run's reply id is ReplyID of its run id.
	res := e.send(t, "s2", "hello")
	if res.MessageID != ReplyID(res.RunID) {
		t.Errorf("Send returned messageId %s, want ReplyID(runId) %s", res.MessageID, ReplyID(res.RunID))
	}
}
