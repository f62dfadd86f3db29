//go:build unix

package nodehost

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestHostBurstEveryRequestAnswered (issue 21 item 2): 1,000 invoke
// requests sent at once, with a token rotation in their middle. Every
// request gets exactly one node.invoke.result — the command's result, or,
// past MaxConcurrent, UNAVAILABLE marked retryable — and the rotated
// token reaches node.json. The host's client used to queue 256 events and
// drop the rest silently: their callers waited for a timeout, and a
// rotation in a burst could be lost.
func TestHostBurstEveryRequestAnswered(t *testing.T) {
	g, st, old := pairedFullHost(t, Options{})
	waitToken(t, st.Dir, "")
	ci := g.nodeConn(st.DeviceID(), "")

	sleep, _ := json.Marshal(RunParams{Command: []string{"sleep", "1"}})
	const n = 1000
	rotated := newToken()
	for i := range n {
		if i == n/2 {
			g.mu.Lock()
			g.tokens[st.DeviceID()] = rotated
			g.mu.Unlock()
			if err := g.server().Send(ci.ConnID, EventTokenRotated, tokenRotated{Role: "node", DeviceToken: rotated}); err != nil {
				t.Fatal(err)
			}
		}
		id := fmt.Sprintf("burst-%04d", i)
		if err := g.server().Send(ci.ConnID, EventInvokeRequest, invokeRequest{ID: id, Command: CmdRun, Params: sleep, TimeoutMs: 60_000}); err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
	}
	got := map[string]invokeResult{}
	deadline := time.After(120 * time.Second) // a bound for a hang, far above the run's few seconds
	for len(got) < n {
		select {
		case r := <-g.results:
			if _, dup := got[r.ID]; dup {
				t.Fatalf("two results for %s", r.ID)
			}
			got[r.ID] = r
		case <-deadline:
			t.Fatalf("%d of %d requests answered; the rest were lost", len(got), n)
		}
	}
	ran, busy := 0, 0
	for id, r := range got {
		switch {
		case r.OK:
			ran++
		case r.Error != nil && r.Error.Code == CodeUnavailable && r.Error.Retryable:
			busy++
		default:
			t.Fatalf("%s: %+v (error %+v), want a result or a retryable UNAVAILABLE", id, r, r.Error)
		}
	}
	if ran == 0 || busy == 0 {
		t.Fatalf("%d ran, %d answered busy: want both with MaxConcurrent 8", ran, busy)
	}
	if tok := waitToken(t, st.Dir, old); tok != rotated {
		t.Fatal("node.json holds another token than the rotated one")
	}
}

// TestHostWaitsWhenRateLimited (issue 21 item 7): a setup-code connect
// refused rate_limited does not stop the host: it waits at least the
// gateway's retryAfterMs (not its own, shorter backoff), tries again with
// the same code and pairs.
func TestHostWaitsWhenRateLimited(t *testing.T) {
	g := newTestGW(t)
	g.mu.Lock()
	g.limited, g.retryAfter = 2, 400*time.Millisecond
	g.mu.Unlock()
	st := openState(t)
	var mu sync.Mutex
	var waits []time.Duration
	_, wait := runHost(t, Options{State: st, Target: mustTarget(t, g.pairingURL()), OnStatus: func(s Status) {
		if s.State == "disconnected" {
			mu.Lock()
			waits = append(waits, s.Retry)
			mu.Unlock()
		}
	}})
	stopped := make(chan error, 1)
	go func() { stopped <- wait() }()
	select {
	case req := <-g.requests:
		if req.DeviceID != st.DeviceID() || req.Repair {
			t.Fatalf("request %+v", req)
		}
	case err := <-stopped:
		t.Fatalf("the host stopped on rate_limited: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("no pairing request after the rate limit")
	}
	g.mu.Lock()
	tries := slices.Clone(g.codeTries)
	g.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(tries) != 3 || len(waits) != 2 {
		t.Fatalf("%d tries with the code, %d waits (%v); want 3 and 2", len(tries), len(waits), waits)
	}
	for i, w := range waits {
		if w < g.retryAfter {
			t.Errorf("wait %d is %v, shorter than the gateway's retryAfter %v", i, w, g.retryAfter)
		}
		if gap := tries[i+1].Sub(tries[i]); gap < g.retryAfter {
			t.Errorf("try %d came %v after the refusal, before the gateway's %v", i+2, gap, g.retryAfter)
		}
	}
}
