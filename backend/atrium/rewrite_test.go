package atrium

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// rewriteMemory opens a memory engine over three notes with the rewrite
// that config s and the model m give (memoryRewrite), indexed.
func rewriteMemory(t *testing.T, s config.Search, m model.Config) *memory.Manager {
	t.Helper()
	ws := t.TempDir()
	notes := map[string]string{
		"memory/2026-04-01.md": "# Disk\n\nAdded logrotate for /var/log/nginx on the web server; the root volume was full.\n",
		"memory/2026-04-02.md": "# Backups\n\nThe nightly backup copies the database dump to the NAS at 02:00.\n",
		"memory/2026-04-03.md": "# Lunch\n\nNoodles at the corner shop; the soup was too salty for the team.\n",
	}
	for rel, text := range notes {
		p := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rw, timeout := memoryRewrite(s, func() model.Config { return m }, model.OpenAIOptions{Logger: log})
	mm, err := memory.Open(memory.Options{Workspace: ws, IndexDir: filepath.Join(t.TempDir(), "index"), DisableWatcher: true,
		Logger: log, Rewrite: rw, RewriteTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mm.Close() })
	if err := mm.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return mm
}

// TestMemoryRewriteAsksChatModel: with memory.search.rewrite on, a weakly
// answered question reaches the chat model (an OpenAI-compatible server)
// with the rewrite prompt; the model's words are searched too and their
// note merged into the results, which say what was searched.
func TestMemoryRewriteAsksChatModel(t *testing.T) {
	const q = "how did we free up space on the machine"
	srv := modeltest.New(t, modeltest.Options{}, func(w http.ResponseWriter, _ *http.Request) {
		modeltest.Stream(w, modeltest.Text("logrotate /var/log nginx root volume full"), modeltest.Chunk("{}", "stop"))
	})
	m := rewriteMemory(t, config.Search{Rewrite: true}, model.Config{Provider: model.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "rewriter", APIKey: "sk-test"})
	res, err := m.Search(context.Background(), memory.SearchOptions{Query: q})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Count() != 1 {
		t.Fatalf("the model got %d requests; want 1", srv.Count())
	}
	msgs := srv.Request(0).Messages()
	if len(msgs) != 2 || msgs[0]["role"] != "system" || !strings.Contains(msgs[0]["content"].(string), "search words") || msgs[1]["content"] != q {
		t.Errorf("the model was sent %v; want the rewrite prompt and the question", msgs)
	}
	if res.RewrittenQuery != "logrotate /var/log nginx root volume full" || res.RewriteMs < 1 {
		t.Errorf("rewrittenQuery %q, rewriteMs %d", res.RewrittenQuery, res.RewriteMs)
	}
	if len(res.Results) == 0 || res.Results[0].Path != "memory/2026-04-01.md" {
		t.Errorf("results %+v; want the logrotate note first", res.Results)
	}
	if st := m.RewriteStats(); !st.On || st.Calls != 1 || st.Failures != 0 {
		t.Errorf("RewriteStats %+v", st)
	}
}

// TestMemoryRewriteTimeoutAndOff: a model that does not answer within
// memory.search.rewriteTimeoutMs leaves the plain results; with the
// setting off, or the offline provider, no model is asked.
func TestMemoryRewriteTimeoutAndOff(t *testing.T) {
	const q = "how did we free up space on the machine"
	srv := modeltest.New(t, modeltest.Options{RepeatLast: true}, func(w http.ResponseWriter, r *http.Request) {
		select { // a model that never answers in time
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	})
	cfg := model.Config{Provider: model.ProviderOpenAI, BaseURL: srv.BaseURL(), Model: "slow", APIKey: "sk-test"}
	slow := rewriteMemory(t, config.Search{Rewrite: true, RewriteTimeoutMs: 100}, cfg)
	res, err := slow.Search(context.Background(), memory.SearchOptions{Query: q, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Count() != 1 || res.RewrittenQuery != "" || res.RewriteMs < 1 || len(res.Results) == 0 {
		t.Errorf("slow model: %d requests, response %+v; want the plain results after the deadline", srv.Count(), res)
	}
	if st := slow.RewriteStats(); st.Calls != 1 || st.Failures != 1 {
		t.Errorf("RewriteStats %+v; want one failure", st)
	}

	off := rewriteMemory(t, config.Search{}, cfg)
	offline := rewriteMemory(t, config.Search{Rewrite: true}, model.Config{Provider: model.ProviderOffline})
	before := srv.Count()
	for _, m := range []*memory.Manager{off, offline} {
		res, err := m.Search(context.Background(), memory.SearchOptions{Query: q})
		if err != nil {
			t.Fatal(err)
		}
		if res.RewriteMs != 0 || res.RewrittenQuery != "" || m.RewriteStats().Calls != 0 {
			t.Errorf("no rewrite expected: %+v, %+v", res, m.RewriteStats())
		}
	}
	if srv.Count() != before {
		t.Errorf("the model got %d requests with the setting off or offline; want none", srv.Count()-before)
	}
	if rw, _ := memoryRewrite(config.Search{Rewrite: true}, func() model.Config { return model.Config{Provider: model.ProviderOffline} }, model.OpenAIOptions{}); rw == nil {
		t.Error("rewrite on: want a rewriter")
	} else if _, err := rw(context.Background(), q); !errors.Is(err, memory.ErrNoRewriter) {
		t.Errorf("offline: err %v, want memory.ErrNoRewriter", err)
	}
}
