package chat

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/convo"
)

// notes records what SaveNote was given.
type notes struct {
	mu    sync.Mutex
	saved []convo.Note
	roles []string
}

func (n *notes) save(_ context.Context, role string, note convo.Note) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.saved, n.roles = append(n.saved, note), append(n.roles, role)
	return nil
}

func (n *notes) all() []convo.Note {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]convo.Note(nil), n.saved...)
}

func (e *env) resetEvents() []ResetEvent {
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	var out []ResetEvent
	for _, ev := range e.rec.events {
		if ev.name == EventReset {
			out = append(out, ev.payload.(ResetEvent))
		}
	}
	return out
}

// TestResetCommand: `/new` (and `/reset`) close the session with its dated
// note and never reach the model; the next send naming the closed session
// goes to a new one without the old context; the old messages stay in
// history (issue 24 item 3).
func TestResetCommand(t *testing.T) {
	m := newModelServer(t, answer("Use the blue-green plan."), answer("Fresh start."))
	var n notes
	clk := &testClock{t: time.Date(2026, 5, 4, 10, 30, 0, 0, time.UTC)}
	e := newEnv(t, m.provider(), nil, func(o *Options) { o.SaveNote = n.save; o.Now = clk.Now })

	first, err := e.svc.Send(context.Background(), SendRequest{ProfileID: "main", SessionID: "s-1", ConversationID: "c-1", Message: "How do we deploy Heron?"})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, first, e.rec.runEvents(t, first.RunID))

	res := e.send(t, "s-1", "  /NEW ")
	if res.Reset == nil || res.RunID != "" || res.UserMessageID != "" {
		t.Fatalf("/new = %+v", res)
	}
	r := *res.Reset
	if r.ClosedSessionID != "s-1" || r.SessionID == "" || r.SessionID == "s-1" || res.SessionID != r.SessionID ||
		r.Reason != ResetCommand || r.Note != "memory/roles/main/2026-05-04-how-do-we-deploy-heron.md" || r.Messages != 2 {
		t.Fatalf("reset = %+v", r)
	}
	if m.count() != 1 {
		t.Fatalf("the model got %d requests; /new must not reach it", m.count())
	}
	saved := n.all()
	if len(saved) != 1 || !strings.Contains(saved[0].Markdown, "How do we deploy Heron?") ||
		!strings.Contains(saved[0].Markdown, "Use the blue-green plan.") || !strings.Contains(saved[0].Markdown, "- Session: s-1") {
		t.Fatalf("notes %+v", saved)
	}
	if evs := e.resetEvents(); len(evs) != 1 || evs[0] != r {
		t.Fatalf("reset events %+v, want %+v", evs, r)
	}

	// A client still naming s-1 (with its old history, in the same
	// conversation) lands in the new session, and the model sees none of
	// the closed one.
	next, err := e.svc.Send(context.Background(), SendRequest{ProfileID: "main", SessionID: "s-1", ConversationID: "c-1", Message: "Start over: what is new?",
		History: []ClientMessage{{ID: first.UserMessageID, Role: "user", Content: "How do we deploy Heron?"},
			{ID: first.MessageID, Role: "assistant", Content: "Use the blue-green plan."}}})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, next, e.rec.runEvents(t, next.RunID))
	if next.SessionID != r.SessionID {
		t.Fatalf("send after /new went to session %s, want %s", next.SessionID, r.SessionID)
	}
	for _, msg := range wireMessages(m.body(1)) {
		if c, _ := msg["content"].(string); strings.Contains(c, "Heron") || strings.Contains(c, "blue-green") {
			t.Fatalf("the closed session's text reached the model: %v", msg)
		}
	}
	// The client, now in the new session, still sends the old messages
	// (with their ids) as its recent history: they stay out.
	again, err := e.svc.Send(context.Background(), SendRequest{ProfileID: "main", SessionID: r.SessionID, Message: "And then?",
		History: []ClientMessage{{ID: first.UserMessageID, Role: "user", Content: "How do we deploy Heron?"},
			{ID: first.MessageID, Role: "assistant", Content: "Use the blue-green plan."}}})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, again, e.rec.runEvents(t, again.RunID))
	for _, msg := range wireMessages(m.body(2)) {
		if c, _ := msg["content"].(string); strings.Contains(c, "Heron") || strings.Contains(c, "blue-green") {
			t.Fatalf("the closed session's text came back through the client's history: %v", msg)
		}
	}
	// History stays browsable: the profile's timeline has all six.
	page, err := e.svc.History(context.Background(), "main", "", 50)
	if err != nil || len(page.Messages) != 6 {
		t.Fatalf("history after /new: %d messages, %v", len(page.Messages), err)
	}

	// `/reset` of a session with nothing in it closes it without a note.
	empty := e.send(t, "", "/reset")
	if empty.Reset == nil || empty.Reset.Note != "" || empty.Reset.ClosedSessionID != "" || empty.SessionID == "" {
		t.Fatalf("/reset without a session = %+v", empty.Reset)
	}
	if len(n.all()) != 1 {
		t.Fatal("a note was written for nothing")
	}
}

// TestResetBusy: a session that is answering is not closed under its run.
func TestResetBusy(t *testing.T) {
	m := newModelServer(t)
	m.handlers = []http.HandlerFunc{m.slow("part")}
	e := newEnv(t, m.provider(), nil)
	run := e.send(t, "s-busy", "long question")
	e.rec.until(t, run.RunID, func(ev event) bool { return ev.name == EventChunk })
	if _, err := e.svc.Send(context.Background(), SendRequest{ProfileID: "main", SessionID: "s-busy", Message: "/new"}); !errors.Is(err, ErrBusy) {
		t.Fatalf("/new during a run: %v, want ErrBusy", err)
	}
	e.svc.Cancel(CancelRequest{ProfileID: "main", SessionID: "s-busy"})
	e.rec.runEvents(t, run.RunID)
}

// TestAutomaticResets: the idle reset runs on its own (CheckResets, the
// loop RunLifecycle drives), the daily one also at the next send, each
// with its note and reason; SetResetPolicy(nil) turns them off.
func TestAutomaticResets(t *testing.T) {
	m := newModelServer(t, answer("Noted."))
	var n notes
	clk := &testClock{t: time.Date(2026, 5, 4, 2, 0, 0, 0, time.UTC)}
	idle, err := convo.NewResetPolicy(convo.ResetOptions{Mode: convo.ResetDailyIdle, IdleMinutes: 30, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	// atFinal, when set, runs as a run's final event goes out, before a
	// client can see it: a client that sends its next message the moment
	// it sees the answer end. (Run after the event was handed on, it
	// raced the test's next send, which then still read the old time.)
	var atFinal atomic.Pointer[func()]
	e := newEnv(t, m.provider(), nil, func(o *Options) {
		o.SaveNote = n.save
		o.Now = clk.Now
		o.ResetPolicy = idle
		emit := o.Emit
		o.Emit = func(name string, payload any) {
			if f := atFinal.Load(); name == EventFinal && f != nil {
				(*f)()
			}
			emit(name, payload)
		}
	})
	ctx := context.Background()

	a := e.send(t, "s-idle", "Remember the release checklist")
	e.rec.runEvents(t, a.RunID)
	if got := e.svc.CheckResets(ctx); got != 0 {
		t.Fatalf("closed %d sessions at once", got)
	}
	clk.Set(clk.Now().Add(31 * time.Minute))
	if got := e.svc.CheckResets(ctx); got != 1 {
		t.Fatalf("idle check closed %d sessions, want 1", got)
	}
	evs := e.resetEvents()
	if len(evs) != 1 || evs[0].Reason != ResetIdle || evs[0].ClosedSessionID != "s-idle" || evs[0].Note == "" {
		t.Fatalf("idle reset events %+v", evs)
	}

	// Daily at 04:00: a session whose answer ended at 03:50 is closed by the
	// send at 04:05, which goes to a new session — even when 04:05 comes
	// the moment the answer's final event goes out (the run's own clean-up
	// after it must not count as activity at 04:05).
	clk.Set(time.Date(2026, 5, 4, 3, 50, 0, 0, time.UTC))
	at0405 := func() { clk.Set(time.Date(2026, 5, 4, 4, 5, 0, 0, time.UTC)) }
	atFinal.Store(&at0405)
	b := e.send(t, "s-day", "Plan for today")
	e.rec.runEvents(t, b.RunID)
	atFinal.Store(nil)
	// Whatever the run's goroutine does after its final event is done
	// too: nothing of it may count as activity at 04:05.
	ended := make(chan struct{})
	go func() { e.svc.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the run's goroutine did not end")
	}
	c := e.send(t, "s-day", "And tomorrow?")
	e.rec.runEvents(t, c.RunID)
	if c.SessionID == "s-day" {
		t.Fatal("the send after 04:00 stayed in the old session")
	}
	evs = e.resetEvents()
	if len(evs) != 2 || evs[1].Reason != ResetDaily || evs[1].ClosedSessionID != "s-day" || evs[1].SessionID != c.SessionID {
		t.Fatalf("daily reset events %+v", evs)
	}
	if len(n.all()) != 2 {
		t.Fatalf("notes %d, want 2", len(n.all()))
	}

	// Off: nothing closes on its own.
	e.svc.SetResetPolicy(nil)
	clk.Set(clk.Now().Add(48 * time.Hour))
	if got := e.svc.CheckResets(ctx); got != 0 {
		t.Fatalf("closed %d sessions with resets off", got)
	}
}

// TestClosedSessionAfterRestart: a session closed by `/new` stays closed
// for a new service on the same state.db (the app restarted): a client
// still naming it moves on to the session that followed, and the model
// sees nothing of the closed one.
func TestClosedSessionAfterRestart(t *testing.T) {
	m := newModelServer(t, answer("Use the blue-green plan."), answer("Fresh start."))
	e := newEnv(t, m.provider(), nil, func(o *Options) { o.SaveNote = (&notes{}).save })
	first := e.send(t, "s-1", "How do we deploy Heron?")
	checkRun(t, first, e.rec.runEvents(t, first.RunID))
	res := e.send(t, "s-1", "/new")
	if res.Reset == nil {
		t.Fatalf("/new = %+v", res)
	}
	e.svc.Close()

	rec := newRecorder()
	svc, err := New(Options{History: e.store, Provider: m.provider(), Memory: e.mem, Emit: rec.emit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	next, err := svc.Send(context.Background(), SendRequest{ProfileID: "main", SessionID: "s-1", Message: "Start over: what is new?"})
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, next, rec.runEvents(t, next.RunID))
	if next.SessionID != res.Reset.SessionID {
		t.Fatalf("after a restart a send naming the closed session went to %s, want %s", next.SessionID, res.Reset.SessionID)
	}
	for _, msg := range wireMessages(m.body(1)) {
		if c, _ := msg["content"].(string); strings.Contains(c, "Heron") || strings.Contains(c, "blue-green") {
			t.Fatalf("the closed session's text reached the model after a restart: %v", msg)
		}
	}
}
