package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// envHelper turns the test binary into a worker process (the re-exec
// pattern): the supervisor under test starts os.Args[0] with this variable
// set and the usual `worker --profile … --instance …` arguments, and
// TestMain runs the real Command instead of the tests. Values:
//   - "worker": `atrium worker` exactly;
//   - "garbage": first writes a line that is not JSON, then as "worker";
//   - "silent": heartbeats but never writes ready;
//   - "stubborn": ignores SIGTERM and its input and never exits (graceful
//     stop must fall back to SIGKILL).
const envHelper = "ATRIUM_WORKER_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

func helperMain(mode string) int {
	if len(os.Args) < 2 || os.Args[1] != "worker" {
		fmt.Fprintln(os.Stderr, "helper: want `worker` arguments, got", os.Args[1:])
		return 2
	}
	switch mode {
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(os.Stdout, `{"type":"ready","ts":1}`)
		for {
			time.Sleep(50 * time.Millisecond)
			fmt.Fprintln(os.Stdout, `{"type":"heartbeat","ts":1}`)
		}
	case "silent": // never ready: only heartbeats
		for {
			time.Sleep(50 * time.Millisecond)
			fmt.Fprintln(os.Stdout, `{"type":"heartbeat","ts":1}`)
		}
	case "garbage":
		fmt.Fprintln(os.Stderr, "helper: writing a line that is not JSON")
		fmt.Fprintln(os.Stdout, "{not json")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Command(ctx, CommandOptions{Args: os.Args[2:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// scriptedModel is an OpenAI-compatible server whose answer follows the
// last message: "slow N" streams N one-letter chunks 20 ms apart; "big N"
// streams N bytes in 64 KiB chunks as fast as it can; anything else is
// echoed back in one chunk.
func scriptedModel(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		send := func(s string) bool { return modeltest.Stream(w, modeltest.Text(s)) }
		f := strings.Fields(req.Messages[len(req.Messages)-1].Content)
		n := 0
		if len(f) == 2 {
			n, _ = strconv.Atoi(f[1])
		}
		switch {
		case len(f) == 2 && f[0] == "slow":
			for i := 0; i < n; i++ {
				if !send(string(rune('a' + i%26))) {
					return
				}
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		case len(f) == 2 && f[0] == "big":
			for n > 0 {
				k := min(n, 64<<10)
				if !send(strings.Repeat("x", k)) {
					return
				}
				n -= k
			}
		default:
			send(req.Messages[len(req.Messages)-1].Content)
		}
		modeltest.Stream(w, modeltest.Done)
	}))
	t.Cleanup(srv.Close)
	return srv
}
