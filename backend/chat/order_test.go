package chat

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// gated streams first, then waits for gate to close (or the client to
// leave) and finishes the answer with rest.
func (m *modelServer) gated(gate <-chan struct{}, first, rest string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		modeltest.Stream(w, modeltest.Text(first))
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		case <-m.release:
			return
		}
		modeltest.Stream(w, modeltest.Text(rest), modeltest.Chunk(`{}`, "stop"), "[DONE]")
	}
}

// TestThinkingCarriesUserMessage: chat.thinking brings the stored user
// message, so a client that did not send it can show the question.
func TestThinkingCarriesUserMessage(t *testing.T) {
	e := newEnv(t, newModelServer(t, answer("hi")).provider(), nil)
	res := e.send(t, "s", "  Who are you?  ")
	evs := e.rec.runEvents(t, res.RunID)
	checkRun(t, res, evs)
	th := evs[0].payload.(ThinkingEvent)
	stored, err := e.store.Get(context.Background(), res.UserMessageID)
	if err != nil {
		t.Fatal(err)
	}
	if th.UserMessage.ID != res.UserMessageID || th.UserMessage.Content != "Who are you?" ||
		th.UserMessage.Role != history.RoleUser || th.UserMessage.RunID != res.RunID {
		t.Fatalf("thinking.userMessage = %+v", th.UserMessage)
	}
	if th.UserMessage.TS != stored.TS || th.UserMessage.SessionID != stored.SessionID {
		t.Fatalf("thinking.userMessage %+v differs from the stored %+v", th.UserMessage, stored)
	}
}

// TestOverlappingRunsKeepAnswersAfterQuestions: two sessions answer at once,
// the later run ends first (cancelled), the earlier one ends last. History
// (profile and session reads) still shows each answer right after its
// question, as the live view did, even when the clock does not move.
func TestOverlappingRunsKeepAnswersAfterQuestions(t *testing.T) {
	gate := make(chan struct{})
	ms := newModelServer(t)
	ms.handlers = []http.HandlerFunc{ms.gated(gate, "A part ", "A end"), ms.slow("B part")}
	clock := time.UnixMilli(1_700_000_000_000)
	e := newEnv(t, ms.provider(), nil, func(o *Options) { o.Now = func() time.Time { return clock } })
	ctx := context.Background()

	a := e.send(t, "sa", "question A")
	e.rec.until(t, a.RunID, func(ev event) bool { return ev.name == EventChunk })
	b := e.send(t, "sb", "question B")
	e.rec.until(t, b.RunID, func(ev event) bool { return ev.name == EventChunk })
	if ok, err := e.svc.Cancel(CancelRequest{ProfileID: "main", SessionID: "sb"}); !ok || err != nil {
		t.Fatalf("cancel B = %v, %v", ok, err)
	}
	e.rec.runEvents(t, b.RunID)
	close(gate)
	if evs := e.rec.runEvents(t, a.RunID); evs[len(evs)-1].name != EventFinal {
		t.Fatalf("run A ended with %v", evs)
	}

	page, err := e.svc.History(ctx, "main", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{a.UserMessageID, a.MessageID, b.UserMessageID, b.MessageID}
	if got := ids(page.Messages); !equal(got, want) {
		t.Fatalf("history order = %v, want %v (u:A, a:A, u:B, a:B)", got, want)
	}
	m := page.Messages
	if m[1].Content != "A part A end" || m[1].Error != "" || m[3].Error != history.ErrorCancelled {
		t.Fatalf("answers = %+v / %+v", m[1], m[3])
	}
	// The rule: user ts strictly increase by at least 2; answer ts = question ts + 1.
	if m[2].TS < m[0].TS+2 || m[1].TS != m[0].TS+1 || m[3].TS != m[2].TS+1 {
		t.Fatalf("ts = %d %d %d %d", m[0].TS, m[1].TS, m[2].TS, m[3].TS)
	}
	if m[1].EndedAt != clock.UnixMilli() || m[3].EndedAt != clock.UnixMilli() || m[0].EndedAt != 0 {
		t.Fatalf("endedAt = %d %d %d", m[0].EndedAt, m[1].EndedAt, m[3].EndedAt)
	}
	// Paging goes by the same order: the two older messages are the A pair.
	older, err := e.svc.History(ctx, "main", b.UserMessageID, 10)
	if err != nil || !equal(ids(older.Messages), want[:2]) {
		t.Fatalf("page before u:B = %v, %v", ids(older.Messages), err)
	}
	sess, err := e.store.Session(ctx, "sa", 10)
	if err != nil || !equal(ids(sess), want[:2]) {
		t.Fatalf("session sa = %v, %v", ids(sess), err)
	}
}

// TestCloseInterruptsRunWithoutText: a run stopped by Close before any text
// is still stored (empty, error "interrupted"), so clients learn from
// history that it ended; a later run's context skips it.
func TestCloseInterruptsRunWithoutText(t *testing.T) {
	ms := newModelServer(t)
	ms.handlers = []http.HandlerFunc{ms.slow()}
	e := newEnv(t, ms.provider(), nil)
	res := e.send(t, "s", "hi")
	e.rec.until(t, res.RunID, func(ev event) bool { return ev.name == EventThinking })
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	evs := e.rec.runEvents(t, res.RunID)
	ev, ok := evs[len(evs)-1].payload.(CancelledEvent)
	if !ok || ev.Reason != ReasonInterrupted || ev.Message == nil || ev.Message.Content != "" {
		t.Fatalf("terminal = %+v", evs[len(evs)-1])
	}
	stored, err := e.store.Get(context.Background(), res.MessageID)
	if err != nil || stored.Error != history.ErrorInterrupted || stored.Content != "" {
		t.Fatalf("stored = %+v, %v", stored, err)
	}
}

func ids(ms []history.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
