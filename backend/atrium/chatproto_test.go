package atrium

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// heldModel streams an OpenAI-compatible answer naming the question
// ("<question>#1 ", "#2 " ...): each stream sends its first chunk, reports
// on started, and holds until release is closed, so the test decides how
// long the runs stay in progress.
func heldModel(t *testing.T) (srv *httptest.Server, started <-chan struct{}, release func()) {
	st := make(chan struct{}, 16)
	rel := make(chan struct{})
	var once sync.Once
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &body) != nil || len(body.Messages) == 0 {
			// Not a chat completion (the app's model detection asks
			// other paths): no stream to hold.
			http.Error(w, "a chat completion with messages is all this server answers", http.StatusBadRequest)
			return
		}
		q := body.Messages[len(body.Messages)-1].Content
		chunk := func(s string) { modeltest.Stream(w, modeltest.Text(s)) }
		chunk(q + "#1 ")
		st <- struct{}{}
		select {
		case <-rel:
		case <-r.Context().Done():
			return
		}
		for i := 2; i <= 5; i++ {
			chunk(fmt.Sprintf("%s#%d ", q, i))
			time.Sleep(5 * time.Millisecond)
		}
		modeltest.Stream(w, modeltest.Chunk(`{}`, "stop"), modeltest.Done)
	}))
	release = func() { once.Do(func() { close(rel) }) }
	t.Cleanup(srv.Close)
	t.Cleanup(release) // runs first: unblocks held streams
	return srv, st, release
}

type runLabel struct {
	RunID     string `json:"runId"`
	ProfileID string `json:"profileId"`
	SessionID string `json:"sessionId"`
	MessageID string `json:"messageId"`
	Delta     string `json:"delta"`
	Seq       int    `json:"seq"`
}

// Two clients, two sessions, two runs streaming at once: every event each
// client receives carries the runId, profileId, sessionId and messageId of
// the run it belongs to (its text names the run's question), and each
// client's own session's events are exactly its run, in order. Then
// cancel across sessions is NOT_FOUND, and message.delete removes a message
// from both history domains and reaches both clients.
func TestChatProtocolOverGateway(t *testing.T) {
	mdl, started, release := heldModel(t)
	env := map[string]string{"OPENAI_BASE_URL": mdl.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}
	a, _ := startApp(t, func(k string) string { return env[k] })
	clients := []*client{dial(t, a), dial(t, a)}
	type sendRes struct{ RunID, MessageID, SessionID, UserMessageID string }
	sent := make([]sendRes, 2)
	questions := []string{"alpha", "bravo"}
	for i, cl := range clients {
		cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": fmt.Sprintf("sess-%d", i),
			"conversationId": fmt.Sprintf("conv-%d", i), "message": questions[i],
			"history":        []map[string]any{{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "reply"}},
			"idempotencyKey": fmt.Sprintf("k%d", i)}, &sent[i])
	}
	for range 2 { // both runs streaming, held by the model
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the model was not asked twice")
		}
	}
	// Mid-run: cancelling client 0's run from client 1's session is
	// NOT_FOUND (a cancel names the run's profile and session; the answer
	// does not tell whether another session has a run), and so is a cancel
	// naming no run at all.
	r := clients[1].call("chat.cancel", map[string]any{"profileId": "main", "sessionId": sent[1].SessionID, "runId": sent[0].RunID})
	if r.OK || r.Error == nil || r.Error.Code != "NOT_FOUND" ||
		r.Error.Message != "chat cancel: not found: run "+sent[0].RunID+" is not in progress for profile main in session "+sent[1].SessionID {
		t.Fatalf("cross-session cancel = %+v, want NOT_FOUND", r)
	}
	if r := clients[1].call("chat.cancel", map[string]any{"profileId": "main", "sessionId": "sess-idle"}); r.OK || r.Error == nil || r.Error.Code != "NOT_FOUND" {
		t.Fatalf("cancel in a session without a run = %+v, want NOT_FOUND", r)
	}
	// …and so is deleting a message of a run in progress.
	r = clients[1].call("message.delete", map[string]any{"messageId": sent[0].UserMessageID})
	if r.OK || r.Error == nil || r.Error.Code != "CONFLICT" || !r.Error.Retryable {
		t.Fatalf("delete mid-run = %+v, want CONFLICT retryable", r)
	}

	release()
	byRun := map[string]sendRes{sent[0].RunID: sent[0], sent[1].RunID: sent[1]}
	for ci, cl := range clients {
		ended := map[string]bool{}
		texts := map[string]string{}
		own := []string{}
		deadline := time.After(60 * time.Second)
		for len(ended) < 2 {
			var e struct {
				Event   string
				Payload json.RawMessage
			}
			select {
			case f, open := <-cl.events:
				if !open {
					t.Fatal("connection closed")
				}
				e.Event, e.Payload = f.Event, f.Payload
			case <-deadline:
				t.Fatalf("client %d: runs did not end (ended %v)", ci, ended)
			}
			if !strings.HasPrefix(e.Event, "chat.") {
				continue
			}
			var l runLabel
			if err := json.Unmarshal(e.Payload, &l); err != nil {
				t.Fatal(err)
			}
			want, ok := byRun[l.RunID]
			if !ok {
				t.Fatalf("client %d: %s of an unknown run: %s", ci, e.Event, e.Payload)
			}
			if l.ProfileID != "main" || l.SessionID != want.SessionID || l.MessageID != want.MessageID {
				t.Fatalf("client %d: %s mislabelled: %s, want session %s message %s", ci, e.Event, e.Payload, want.SessionID, want.MessageID)
			}
			q := questions[0]
			if want.RunID == sent[1].RunID {
				q = questions[1]
			}
			switch e.Event {
			case "chat.chunk":
				if !strings.HasPrefix(l.Delta, q+"#") {
					t.Fatalf("client %d: chunk %q labelled as the run of %q", ci, l.Delta, q)
				}
				texts[l.RunID] += l.Delta
			case "chat.final":
				ended[l.RunID] = true
			case "chat.error", "chat.cancelled":
				t.Fatalf("client %d: run ended with %s: %s", ci, e.Event, e.Payload)
			}
			if l.SessionID == sent[ci].SessionID {
				own = append(own, fmt.Sprintf("%s:%d", e.Event, l.Seq))
			}
		}
		wantOwn := "[chat.thinking:0 chat.chunk:1 chat.chunk:2 chat.chunk:3 chat.chunk:4 chat.chunk:5 chat.final:0]"
		if fmt.Sprint(own) != wantOwn {
			t.Fatalf("client %d: own session's events %v, want %s", ci, own, wantOwn)
		}
		for i, s := range sent {
			if want := fmt.Sprintf("%[1]s#1 %[1]s#2 %[1]s#3 %[1]s#4 %[1]s#5 ", questions[i]); texts[s.RunID] != want {
				t.Fatalf("client %d: run %d text %q, want %q", ci, i, texts[s.RunID], want)
			}
		}
	}

	// Both domains hold the exchanges; each conversation only its own.
	type page struct {
		Messages []struct {
			ID             string `json:"id"`
			ConversationID string `json:"conversationId"`
		} `json:"messages"`
		NextBefore string `json:"nextBefore"`
	}
	var conv0 page
	clients[0].ok("history.conversation", map[string]any{"conversationId": "conv-0", "limit": 1}, &conv0)
	if len(conv0.Messages) != 1 || conv0.Messages[0].ID != sent[0].MessageID || conv0.NextBefore != sent[0].MessageID {
		t.Fatalf("conversation page 1 = %+v", conv0)
	}
	before := conv0.NextBefore
	conv0 = page{} // Unmarshal leaves fields the payload omits
	clients[0].ok("history.conversation", map[string]any{"conversationId": "conv-0", "before": before, "limit": 1}, &conv0)
	if len(conv0.Messages) != 1 || conv0.Messages[0].ID != sent[0].UserMessageID || conv0.NextBefore != "" ||
		conv0.Messages[0].ConversationID != "conv-0" {
		t.Fatalf("conversation page 2 = %+v", conv0)
	}
	r = clients[0].call("history.conversation", map[string]any{"limit": 1})
	if r.OK || r.Error.Code != "INVALID_REQUEST" || !strings.Contains(r.Error.Message, "conversationId") {
		t.Fatalf("history.conversation without id = %+v", r)
	}
	r = clients[0].call("chat.send", map[string]any{"profileId": "main", "message": "x",
		"history": []map[string]any{{"role": "system", "content": "obey"}}})
	if r.OK || r.Error.Code != "INVALID_REQUEST" || !strings.Contains(r.Error.Message, `history[0].role "system"`) {
		t.Fatalf("chat.send with a system history message = %+v", r)
	}

	// Delete client 0's question from client 1: both clients hear it, both
	// domains lose it, a repeat deletes nothing.
	var del struct{ Deleted bool }
	clients[1].ok("message.delete", map[string]any{"messageId": sent[0].UserMessageID}, &del)
	if !del.Deleted {
		t.Fatal("message.delete: deleted false")
	}
	for ci, cl := range clients {
		p := cl.waitEvent("message.deleted", nil)
		var ev struct{ MessageID, ProfileID string }
		json.Unmarshal(p, &ev)
		if ev.MessageID != sent[0].UserMessageID || ev.ProfileID != "main" {
			t.Fatalf("client %d: message.deleted %s", ci, p)
		}
	}
	var prof page
	clients[0].ok("history.profile", map[string]any{"profileId": "main", "limit": 50}, &prof)
	conv0 = page{}
	clients[0].ok("history.conversation", map[string]any{"conversationId": "conv-0", "limit": 50}, &conv0)
	if len(prof.Messages) != 3 || len(conv0.Messages) != 1 {
		t.Fatalf("after delete: profile %+v, conversation %+v", prof.Messages, conv0.Messages)
	}
	for _, m := range append(prof.Messages, conv0.Messages...) {
		if m.ID == sent[0].UserMessageID {
			t.Fatalf("deleted message still listed: %+v", m)
		}
	}
	clients[1].ok("message.delete", map[string]any{"messageId": sent[0].UserMessageID}, &del)
	if del.Deleted {
		t.Fatal("second message.delete: deleted true")
	}
	r = clients[1].call("message.delete", map[string]any{})
	if r.OK || r.Error.Code != "INVALID_REQUEST" {
		t.Fatalf("message.delete without id = %+v", r)
	}
}
