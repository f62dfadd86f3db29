//go:build unix

package atrium

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// workerModel is an OpenAI-compatible streaming server for runs on
// instances. The last message decides the answer: "slow N TAG" streams
// "TAG1 " … "TAGN " 20 ms apart, "big N" streams N bytes in 64 KiB
// chunks, anything else is echoed in one chunk; every answer ends with a
// usage chunk (prompt 7 tokens, completion = the number of chunks). It
// records each request's system prompt.
func workerModel(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var systems []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if req.Messages[0].Role == "system" {
			mu.Lock()
			systems = append(systems, req.Messages[0].Content)
			mu.Unlock()
		}
		n := 0
		send := func(s string) bool {
			n++
			return modeltest.Stream(w, modeltest.Text(s))
		}
		last := req.Messages[len(req.Messages)-1].Content
		f := strings.Fields(last)
		switch {
		case len(f) == 3 && f[0] == "slow":
			k, _ := strconv.Atoi(f[1])
			for i := 1; i <= k; i++ {
				if !send(fmt.Sprintf("%s%d ", f[2], i)) {
					return
				}
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		case len(f) == 2 && f[0] == "big":
			k, _ := strconv.Atoi(f[1])
			for i := 0; k > 0; i++ {
				c := min(k, 64<<10)
				if !send(strings.Repeat(string(rune('a'+i%26)), c)) {
					return
				}
				k -= c
			}
		default:
			send(last)
		}
		modeltest.Stream(w, fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":%d}}`, n), modeltest.Done)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), systems...)
	}
}

// recorder drains a client's events into a list, so that a client that
// is not being looked at never stalls the gateway.
type recorder struct {
	mu     sync.Mutex
	events []gateway.EventFrame
	closed bool
	more   chan struct{} // closed and replaced on every new event
}

func record(cl *client) *recorder {
	r := &recorder{more: make(chan struct{})}
	go func() {
		for e := range cl.events {
			r.mu.Lock()
			r.events = append(r.events, e)
			close(r.more)
			r.more = make(chan struct{})
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.closed = true
		close(r.more)
		r.mu.Unlock()
	}()
	return r
}

// wait returns all events so far once done(events) is true (at most 60 s).
func (r *recorder) wait(t *testing.T, what string, done func([]gateway.EventFrame) bool) []gateway.EventFrame {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		evs, more, closed := append([]gateway.EventFrame(nil), r.events...), r.more, r.closed
		r.mu.Unlock()
		if done(evs) {
			return evs
		}
		if closed {
			t.Fatalf("connection closed while waiting for %s", what)
		}
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// runEvent is the part of a chat.* event payload the test reads.
type runEvent struct {
	runLabel
	Error *struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
	} `json:"error"`
	Message *struct {
		ID        string `json:"id"`
		ProfileID string `json:"profileId"`
		Content   string `json:"content"`
		Error     string `json:"error"`
		// Set when chat.final cut the text (chat.ForClient).
		ContentBytes     int  `json:"contentBytes"`
		ContentTruncated bool `json:"contentTruncated"`
		Usage            *struct {
			PromptTokens     int `json:"promptTokens"`
			CompletionTokens int `json:"completionTokens"`
		} `json:"usage"`
	} `json:"message"`
}

// eventsOfRun returns the chat.* events of run id (name and payload).
func eventsOfRun(t *testing.T, evs []gateway.EventFrame, runID string) (names []string, out []runEvent) {
	t.Helper()
	for _, e := range evs {
		if !strings.HasPrefix(e.Event, "chat.") {
			continue
		}
		var p runEvent
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.RunID == runID {
			names, out = append(names, e.Event), append(out, p)
		}
	}
	return names, out
}

func runEnded(t *testing.T, runID string) func([]gateway.EventFrame) bool {
	return func(evs []gateway.EventFrame) bool {
		names, _ := eventsOfRun(t, evs, runID)
		for _, n := range names {
			if n == "chat.final" || n == "chat.error" || n == "chat.cancelled" {
				return true
			}
		}
		return false
	}
}

type sendResult struct{ RunID, MessageID, SessionID, UserMessageID string }

// TestChatOnInstances: chat.send to instance ids runs in those instances'
// worker processes (this test binary re-executed, see TestMain). Two
// instances stream at once to two clients over the real gateway, every
// event labelled with its run; SIGKILL of one worker mid-stream ends its
// run with a retryable chat.error and a crashed → restarting → ready
// sequence, while the other run completes untouched; after the restart the
// killed instance answers again; a reply of several MB arrives whole; the
// answers are stored in both history domains under the instance ids.
func TestChatOnInstances(t *testing.T) {
	mdl, systems := workerModel(t)
	env := map[string]string{"OPENAI_BASE_URL": mdl.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}
	a, ws := startApp(t, func(k string) string { return env[k] })
	personas := map[string]string{"alpha": "You are Alpha, the release manager. 你负责发布。", "beta": "You are Beta, the on-call engineer."}
	for role, p := range personas {
		dir := filepath.Join(ws, "memory", "roles", role)
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "config.md"), []byte("---\ndescription: "+role+"\n---\n"+p+"\n"), 0o644))
	}
	c1, c2 := dial(t, a), dial(t, a)
	r1, r2 := record(c1), record(c2)

	// An instance id of no profile is NOT_FOUND (one of a known profile that
	// is not running is started on demand: TestChatStartsInstanceOnDemand).
	if r := c1.call("chat.send", map[string]any{"profileId": "nobody-1", "message": "hi"}); r.OK || r.Error.Code != "NOT_FOUND" {
		t.Fatalf("send to an unknown instance = %+v", r)
	}
	for _, p := range []string{"alpha", "beta"} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			r := c1.call("profiles.spawn", map[string]any{"profileId": p})
			if r.OK {
				break
			}
			if r.Error.Code != "UNAVAILABLE" || time.Now().After(deadline) { // UNAVAILABLE: App.Run is starting the pool
				t.Fatalf("spawn %s: %+v", p, r.Error)
			}
		}
	}
	type inst struct {
		InstanceID string `json:"instanceId"`
		State      string `json:"state"`
		PID        int    `json:"pid"`
	}
	pids := map[string]int{}
	for deadline := time.Now().Add(60 * time.Second); len(pids) < 2; time.Sleep(20 * time.Millisecond) {
		var list struct{ Instances []inst }
		c1.ok("profiles.list", map[string]any{}, &list)
		for _, in := range list.Instances {
			if in.State == "ready" {
				pids[in.InstanceID] = in.PID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("instances not ready: %+v", list)
		}
	}

	// Two runs at once, one per client and instance.
	var sa, sb sendResult
	c1.ok("chat.send", map[string]any{"profileId": "alpha-1", "sessionId": "s-alpha", "conversationId": "conv-alpha",
		"message": "slow 40 A", "idempotencyKey": "ka"}, &sa)
	c2.ok("chat.send", map[string]any{"profileId": "beta-1", "sessionId": "s-beta", "message": "slow 40 B", "idempotencyKey": "kb"}, &sb)
	// Kill beta's worker once its answer is streaming.
	r2.wait(t, "beta's third chunk", func(evs []gateway.EventFrame) bool {
		_, ps := eventsOfRun(t, evs, sb.RunID)
		return len(ps) > 0 && ps[len(ps)-1].Seq >= 3
	})
	must(t, syscall.Kill(pids["beta-1"], syscall.SIGKILL))

	byRun := map[string]sendResult{sa.RunID: sa, sb.RunID: sb}
	profileOf := map[string]string{sa.RunID: "alpha-1", sb.RunID: "beta-1"}
	for ci, r := range []*recorder{r1, r2} {
		evs := r.wait(t, "both runs to end", func(evs []gateway.EventFrame) bool {
			return runEnded(t, sa.RunID)(evs) && runEnded(t, sb.RunID)(evs)
		})
		for _, e := range evs { // every chat event is labelled with its run
			if !strings.HasPrefix(e.Event, "chat.") {
				continue
			}
			var l runLabel
			must(t, json.Unmarshal(e.Payload, &l))
			want, ok := byRun[l.RunID]
			if !ok || l.ProfileID != profileOf[l.RunID] || l.SessionID != want.SessionID || l.MessageID != want.MessageID {
				t.Fatalf("client %d: %s mislabelled: %s", ci, e.Event, e.Payload)
			}
		}
		names, ps := eventsOfRun(t, evs, sa.RunID)
		var text strings.Builder
		for i, p := range ps {
			if names[i] == "chat.chunk" {
				if p.Seq != i { // thinking first, then chunks 1, 2, ...
					t.Fatalf("client %d: alpha chunk %d has seq %d", ci, i, p.Seq)
				}
				text.WriteString(p.Delta)
			}
		}
		var want strings.Builder
		for i := 1; i <= 40; i++ {
			fmt.Fprintf(&want, "A%d ", i)
		}
		last := ps[len(ps)-1]
		if names[0] != "chat.thinking" || names[len(names)-1] != "chat.final" || text.String() != want.String() ||
			last.Message.Content != want.String() || last.Message.ProfileID != "alpha-1" || last.Message.Usage == nil ||
			last.Message.Usage.PromptTokens != 7 || last.Message.Usage.CompletionTokens != 40 {
			t.Fatalf("client %d: alpha run %v, text %q, final %+v", ci, names, text.String(), last.Message)
		}
		names, ps = eventsOfRun(t, evs, sb.RunID)
		last = ps[len(ps)-1]
		if names[len(names)-1] != "chat.error" || last.Error.Code != "UNAVAILABLE" || !last.Error.Retryable ||
			!strings.Contains(last.Error.Message, "crashed") {
			t.Fatalf("client %d: beta run ended %v %+v", ci, names, last.Error)
		}
	}
	// The killed instance is reported crashed, restarting, then ready again.
	evs := r2.wait(t, "beta-1 ready again", func(evs []gateway.EventFrame) bool {
		seen := ""
		for _, e := range evs {
			var st inst
			if e.Event == "profiles.instance" && json.Unmarshal(e.Payload, &st) == nil && st.InstanceID == "beta-1" {
				switch {
				case st.State == "crashed" && seen == "":
					seen = "crashed"
				case st.State == "restarting" && seen == "crashed":
					seen = "restarting"
				case st.State == "ready" && seen == "restarting":
					return true
				}
			}
		}
		return false
	})
	for _, e := range evs { // alpha's instance never left ready/busy
		var st inst
		if e.Event == "profiles.instance" && json.Unmarshal(e.Payload, &st) == nil && st.InstanceID == "alpha-1" &&
			st.State != "starting" && st.State != "ready" && st.State != "busy" {
			t.Fatalf("alpha-1 went %s when beta-1 was killed", st.State)
		}
	}
	c2.ok("health", map[string]any{}, nil) // the gateway keeps serving

	// After the restart the killed instance answers again.
	var sb2 sendResult
	c2.ok("chat.send", map[string]any{"profileId": "beta-1", "sessionId": "s-beta", "message": "are you back?", "idempotencyKey": "kb2"}, &sb2)
	evs = r2.wait(t, "beta's second run", runEnded(t, sb2.RunID))
	names, ps := eventsOfRun(t, evs, sb2.RunID)
	if names[len(names)-1] != "chat.final" || ps[len(ps)-1].Message.Content != "are you back?" {
		t.Fatalf("beta after restart: %v %+v", names, ps[len(ps)-1])
	}

	// A reply of several MB streamed through the worker arrives whole.
	const big = 5 << 20
	var sc sendResult
	c1.ok("chat.send", map[string]any{"profileId": "alpha-1", "sessionId": "s-alpha", "message": "big " + strconv.Itoa(big), "idempotencyKey": "kc"}, &sc)
	evs = r1.wait(t, "the big answer", runEnded(t, sc.RunID))
	names, ps = eventsOfRun(t, evs, sc.RunID)
	var text strings.Builder
	for i, p := range ps {
		if names[i] == "chat.chunk" {
			text.WriteString(p.Delta)
		}
	}
	// The chunks carry it whole; chat.final carries its first
	// chat.MaxClientContent bytes, with its size (a frame must fit the
	// gateway's send buffer); history keeps it whole.
	last := ps[len(ps)-1]
	if names[len(names)-1] != "chat.final" || text.Len() != big || !strings.HasPrefix(text.String(), last.Message.Content) ||
		len(last.Message.Content) != chat.MaxClientContent || !last.Message.ContentTruncated || last.Message.ContentBytes != big {
		t.Fatalf("big answer: %d events, last %s, chunks %d bytes, final %d bytes (truncated %v, of %d)", len(names), names[len(names)-1],
			text.Len(), len(last.Message.Content), last.Message.ContentTruncated, last.Message.ContentBytes)
	}
	if stored, err := a.History.Profile(context.Background(), "alpha-1", "", 500); err != nil || !slices.ContainsFunc(stored.Messages,
		func(m history.Message) bool { return m.ID == sc.MessageID && len(m.Content) == big }) {
		t.Fatalf("the big answer is not stored whole: %v", err)
	}

	// The personas were the system prompts.
	for _, s := range systems() {
		if !strings.HasPrefix(s, personas["alpha"]) && !strings.HasPrefix(s, personas["beta"]) {
			t.Fatalf("system prompt %q is not a persona", s)
		}
	}
	// History: under the instance ids, in both domains.
	type page struct {
		Messages []struct {
			ID, ProfileID, Role, Content, Error string
			ConversationID                      string `json:"conversationId"`
		} `json:"messages"`
	}
	var hb page
	c1.ok("history.profile", map[string]any{"profileId": "beta-1"}, &hb)
	if len(hb.Messages) != 4 || hb.Messages[1].ID != sb.MessageID || !strings.Contains(hb.Messages[1].Error, "crashed") ||
		hb.Messages[3].Content != "are you back?" || hb.Messages[3].ProfileID != "beta-1" {
		t.Fatalf("beta-1 history %+v", hb)
	}
	var hc page
	c1.ok("history.conversation", map[string]any{"conversationId": "conv-alpha"}, &hc)
	if len(hc.Messages) != 2 || hc.Messages[1].ID != sa.MessageID || hc.Messages[1].ProfileID != "alpha-1" {
		t.Fatalf("conv-alpha history %+v", hc)
	}
	// Cancel on an instance: the worker stops, the partial text is kept.
	var sd sendResult
	c1.ok("chat.send", map[string]any{"profileId": "alpha-1", "sessionId": "s-cancel", "message": "slow 200 C", "idempotencyKey": "kd"}, &sd)
	r1.wait(t, "the run to be cancelled to stream", func(evs []gateway.EventFrame) bool {
		_, ps := eventsOfRun(t, evs, sd.RunID)
		return len(ps) > 2
	})
	// A cancel names the run's profile and session (and run, when given):
	// another instance, main, or another session is NOT_FOUND (issue 14
	// item 4: beta-1 cancelled alpha-1's run by naming its session), and
	// the run goes on (the cancel below still finds it).
	for _, p := range []map[string]any{
		{"profileId": "beta-1", "sessionId": "s-cancel"},
		{"profileId": "main", "sessionId": "s-cancel"},
		{"profileId": "beta-1", "sessionId": "s-cancel", "runId": sd.RunID},
		{"profileId": "alpha-1", "sessionId": "s-other", "runId": sd.RunID},
	} {
		if r := c1.call("chat.cancel", p); r.OK || r.Error == nil || r.Error.Code != "NOT_FOUND" {
			t.Fatalf("chat.cancel %v = %+v, want NOT_FOUND", p, r)
		}
	}
	var cr struct{ Cancelled bool }
	c1.ok("chat.cancel", map[string]any{"profileId": "alpha-1", "sessionId": "s-cancel"}, &cr)
	evs = r1.wait(t, "the cancelled run", runEnded(t, sd.RunID))
	names, ps = eventsOfRun(t, evs, sd.RunID)
	if !cr.Cancelled || names[len(names)-1] != "chat.cancelled" || ps[len(ps)-1].Message == nil ||
		!strings.HasPrefix(ps[len(ps)-1].Message.Content, "C1 C2 ") {
		t.Fatalf("cancel on an instance: %v %+v", names, ps[len(ps)-1])
	}
	// profiles.stop mid-run: the run ends with chat.error UNAVAILABLE, not
	// retryable, "stopped" (not an internal "context canceled").
	var se sendResult
	c1.ok("chat.send", map[string]any{"profileId": "alpha-1", "sessionId": "s-stop", "message": "slow 400 D", "idempotencyKey": "ke"}, &se)
	r1.wait(t, "the run to be stopped to stream", func(evs []gateway.EventFrame) bool {
		_, ps := eventsOfRun(t, evs, se.RunID)
		return len(ps) > 2
	})
	c1.ok("profiles.stop", map[string]any{"instanceId": "alpha-1"}, nil)
	evs = r1.wait(t, "the stopped run", runEnded(t, se.RunID))
	names, ps = eventsOfRun(t, evs, se.RunID)
	if last := ps[len(ps)-1]; names[len(names)-1] != "chat.error" || last.Error.Code != "UNAVAILABLE" || last.Error.Retryable ||
		!strings.Contains(last.Error.Message, "stopped") {
		t.Fatalf("run of a stopped instance ended %v %+v", names, last.Error)
	}
}
