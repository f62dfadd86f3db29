package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// gated streams first, one flushed SSE event per delta, then waits for gate
// to close (or the client to leave) and streams rest.
func gated(gate <-chan struct{}, first, rest []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for _, s := range first {
			modeltest.Stream(w, modeltest.Text(s))
		}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		for _, s := range rest {
			modeltest.Stream(w, modeltest.Text(s))
		}
		modeltest.Stream(w, modeltest.Chunk(`{}`, "stop"), "[DONE]")
	}
}

func deltas(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d ", prefix, i)
	}
	return out
}

// prefixes returns, for each seq 0..n, the concatenation of the run's chunks
// 1..seq as recorded by the recorder.
func (r *recorder) prefixes(t *testing.T, runID string) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []string{""}
	for _, e := range r.events {
		c, ok := e.payload.(ChunkEvent)
		if !ok || c.RunID != runID {
			continue
		}
		if c.Seq != len(out) {
			t.Fatalf("chunk seq %d, want %d", c.Seq, len(out))
		}
		out = append(out, out[len(out)-1]+c.Delta)
	}
	return out
}

// TestHistoryReattachesToActiveRun: history.profile lists a run in progress
// with the text streamed so far, consistent with the chunk numbering, so a
// client that reconnects can show it and append only later chunks.
func TestHistoryReattachesToActiveRun(t *testing.T) {
	gate := make(chan struct{})
	first, rest := deltas("a", 40), deltas("b", 300)
	ms := newModelServer(t)
	ms.handlers = []http.HandlerFunc{gated(gate, first, rest)}
	e := newEnv(t, ms.provider(), nil)
	res := e.send(t, "mine", "stream a long answer")

	// Mid-run, with the stream held: the snapshot is exactly chunks 1..40.
	e.rec.until(t, res.RunID, func(ev event) bool {
		c, ok := ev.payload.(ChunkEvent)
		return ok && c.Seq == len(first)
	})
	page, err := e.svc.History(context.Background(), "main", "", 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].ID != res.UserMessageID {
		t.Fatalf("messages = %+v, want only the user message", page.Messages)
	}
	if len(page.Active) != 1 {
		t.Fatalf("active = %+v, want one run", page.Active)
	}
	a := page.Active[0]
	want := RunRef{RunID: res.RunID, ProfileID: "main", SessionID: "mine", MessageID: res.MessageID}
	if a.RunRef != want || a.Seq != len(first) || a.Content != strings.Join(first, "") || a.StartedAt != page.Messages[0].TS {
		t.Fatalf("active = %+v, want %+v seq %d startedAt %d", a, want, len(first), page.Messages[0].TS)
	}
	// Older pages do not list runs in progress.
	if older, err := e.svc.History(context.Background(), "main", res.UserMessageID, 50); err != nil || len(older.Active) != 0 {
		t.Fatalf("older page active = %+v, %v", older.Active, err)
	}

	// While the rest streams, every snapshot agrees with the chunks 1..seq.
	stop := make(chan struct{})
	var (
		wg    sync.WaitGroup
		snaps []ActiveRun
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, a := range e.svc.Active("main") {
				snaps = append(snaps, a)
			}
		}
	}()
	close(gate)
	evs := e.rec.runEvents(t, res.RunID)
	close(stop)
	wg.Wait()
	if _, ok := evs[len(evs)-1].payload.(FinalEvent); !ok {
		t.Fatalf("terminal = %+v", evs[len(evs)-1])
	}
	pre := e.rec.prefixes(t, res.RunID)
	if len(pre) != len(first)+len(rest)+1 {
		t.Fatalf("%d chunks, want %d", len(pre)-1, len(first)+len(rest))
	}
	for _, s := range snaps {
		if s.Seq < len(first) || s.Seq >= len(pre) || s.Content != pre[s.Seq] {
			t.Fatalf("snapshot seq %d has %q, want %q", s.Seq, s.Content, pre[min(s.Seq, len(pre)-1)])
		}
	}
	t.Logf("%d snapshots while streaming", len(snaps))

	// Once ended, the run is only its stored message.
	page, err = e.svc.History(context.Background(), "main", "", 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Active) != 0 || len(page.Messages) != 2 || page.Messages[1].Content != pre[len(pre)-1] {
		t.Fatalf("after the run: active %+v, messages %+v", page.Active, page.Messages)
	}
}

// TestHistoryPageJSON: history.profile always carries "active", in the
// shape docs/PROTOCOL.md gives.
func TestHistoryPageJSON(t *testing.T) {
	e := newEnv(t, nil, nil)
	page, err := e.svc.History(context.Background(), "main", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(page)
	if err != nil || string(b) != `{"messages":[],"active":[]}` {
		t.Fatalf("JSON = %s, %v", b, err)
	}
	page.Active = []ActiveRun{{RunRef: RunRef{RunID: "r", ProfileID: "main", SessionID: "s", MessageID: "m"}, Content: "ab", Seq: 2, StartedAt: 5}}
	b, _ = json.Marshal(page)
	want := `{"messages":[],"active":[{"runId":"r","profileId":"main","sessionId":"s","messageId":"m","content":"ab","seq":2,"startedAt":5}]}`
	if string(b) != want {
		t.Fatalf("JSON = %s\nwant %s", b, want)
	}
}
