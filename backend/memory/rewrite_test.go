package memory

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/embed"
)

// rewriteNotes: the answer to "how do we stop the server filling its
// disk" says it in other words.
var rewriteNotes = map[string]string{
	"memory/2026-04-01.md": "# Disk\n\nAdded logrotate for /var/log/nginx on the web server; the root volume was full.\n",
	"memory/2026-04-02.md": "# Backups\n\nThe nightly backup copies the database dump to the NAS at 02:00.\n",
	"memory/2026-04-03.md": "# Lunch\n\nNoodles at the corner shop; the soup was too salty for the team.\n",
}

// scriptedRewriter records the queries it is asked and answers each with
// answer (or, when block is set, waits for its context to end, at most a
// minute).
type scriptedRewriter struct {
	mu        sync.Mutex
	asked     []string
	deadlines []bool
	answer    string
	block     bool
}

func (r *scriptedRewriter) rewrite(ctx context.Context, q string) (string, error) {
	_, ok := ctx.Deadline()
	r.mu.Lock()
	r.asked, r.deadlines = append(r.asked, q), append(r.deadlines, ok)
	r.mu.Unlock()
	if r.block {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Minute):
			return "", errors.New("scripted rewriter: context never ended")
		}
	}
	return r.answer, nil
}

func (r *scriptedRewriter) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// rewriteFixture indexes rewriteNotes with a model embedder served over
// HTTP (an Ollama /api/embed server) and the rewriter r.
func rewriteFixture(t *testing.T, r Rewriter, timeout time.Duration) *fixture {
	t.Helper()
	srv := newOllamaServer(t, map[string]int{"m": 128}, 8192)
	f := newFixture(t, rewriteNotes, func(o *Options) {
		o.Embedder = srv.ollama(t, "m", embed.HTTPOptions{Dims: 128})
		o.Rewrite, o.RewriteTimeout = r, timeout
	})
	f.sync(t)
	return f
}

// TestRewriteMergesModelQuery: a question the index answers weakly is put
// to the model with a deadline, its rewrite searched too and the results
// merged (the note the rewrite finds first, the plain results kept); the
// response says what was searched and how long the model took.
func TestRewriteMergesModelQuery(t *testing.T) {
	const q = "how did we free up space on the machine"
	plain := newFixture(t, rewriteNotes, nil)
	plain.sync(t)
	before, err := plain.m.Search(context.Background(), SearchOptions{Query: q, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	if before.Confidence.Level == ConfidenceHigh || before.RewriteMs != 0 || before.RewrittenQuery != "" {
		t.Fatalf("without a rewriter: %+v; want a weak answer and no rewrite", before)
	}
	rw := &scriptedRewriter{answer: "\"logrotate /var/log root volume full\"\n(other words for the disk)"}
	f := rewriteFixture(t, rw.rewrite, time.Minute)
	res, err := f.m.Search(context.Background(), SearchOptions{Query: q, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := rw.calls(); len(got) != 1 || got[0] != q || !rw.deadlines[0] {
		t.Fatalf("the model was asked %q (deadline %v); want the query once, with a deadline", got, rw.deadlines)
	}
	if res.RewrittenQuery != "logrotate /var/log root volume full" || res.RewriteMs < 1 {
		t.Errorf("rewrittenQuery %q, rewriteMs %d; want the model's first line without quotes and its time", res.RewrittenQuery, res.RewriteMs)
	}
	if len(res.Results) == 0 || res.Results[0].Path != "memory/2026-04-01.md" || res.Confidence.Level == ConfidenceLow {
		t.Errorf("merged results %+v, confidence %+v; want the logrotate note first, not low", res.Results, res.Confidence)
	}
	seen := map[string]bool{}
	for _, r := range res.Results {
		if seen[r.Path] {
			t.Errorf("%s twice in the merged results", r.Path)
		}
		seen[r.Path] = true
	}
	for _, r := range before.Results {
		if !seen[r.Path] {
			t.Errorf("the plain result %s was lost in the merge", r.Path)
		}
	}
	if st := f.m.RewriteStats(); !st.On || st.Calls != 1 || st.Failures != 0 || st.LastMs != res.RewriteMs && st.LastMs != 0 {
		t.Errorf("RewriteStats %+v after one rewrite of %d ms", st, res.RewriteMs)
	}
}

// TestRewriteTimeoutFallsBack: a model that does not answer within
// RewriteTimeout leaves the plain results, with the time it was given
// and no rewritten query; the failure is counted.
func TestRewriteTimeoutFallsBack(t *testing.T) {
	const q = "how did we free up space on the machine"
	rw := &scriptedRewriter{block: true}
	f := rewriteFixture(t, rw.rewrite, 50*time.Millisecond)
	res, err := f.m.Search(context.Background(), SearchOptions{Query: q, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rw.calls()) != 1 || res.RewrittenQuery != "" || res.RewriteMs < 1 || len(res.Results) == 0 {
		t.Fatalf("asked %d times; response %+v; want the plain results after the deadline", len(rw.calls()), res)
	}
	if st := f.m.RewriteStats(); st.Calls != 1 || st.Failures != 1 {
		t.Errorf("RewriteStats %+v; want one failed call", st)
	}
	if !strings.Contains(f.logs.String(), "reason=timeout") {
		t.Errorf("log does not say the rewrite timed out:\n%s", f.logs.String())
	}
}

// TestRewriteOnlyWhenWeak: a question the index answers with confidence
// high never reaches the model, and neither does any search of a manager
// without a rewriter (the setting off).
func TestRewriteOnlyWhenWeak(t *testing.T) {
	rw := &scriptedRewriter{answer: "anything"}
	f := rewriteFixture(t, rw.rewrite, time.Minute)
	res, err := f.m.Search(context.Background(), SearchOptions{Query: "nightly backup database dump NAS"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Confidence.Level != ConfidenceHigh || len(rw.calls()) != 0 || res.RewriteMs != 0 {
		t.Errorf("strong answer: confidence %+v, model asked %q; want high and no call", res.Confidence, rw.calls())
	}
	off := newFixture(t, rewriteNotes, nil)
	off.sync(t)
	res, err = off.m.Search(context.Background(), SearchOptions{Query: "how did we free up space on the machine"})
	if err != nil {
		t.Fatal(err)
	}
	if res.RewriteMs != 0 || res.RewrittenQuery != "" || off.m.RewriteStats() != (RewriteStats{}) {
		t.Errorf("rewrite off: %+v, stats %+v", res, off.m.RewriteStats())
	}
}
