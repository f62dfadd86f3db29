package convo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/model"
)

func mustEconomy(t *testing.T, o EconomyOptions) *Economy {
	t.Helper()
	e, err := NewEconomy(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNewEconomy(t *testing.T) {
	tests := []struct {
		name                     string
		o                        EconomyOptions
		threshold, flushAt, keep int
		err                      bool
	}{
		{"defaults on 200k", EconomyOptions{ContextWindow: 200000}, 180000, 176000, 45000, false},
		{"128k", EconomyOptions{ContextWindow: 128000}, 108000, 104000, 27000, false},
		{"small window caps the reserve at half", EconomyOptions{ContextWindow: 8192}, 4096, 3072, 1024, false},
		{"explicit", EconomyOptions{ContextWindow: 100000, ReserveTokens: 10000, FlushSoftTokens: 2000, KeepRecentTokens: 500}, 90000, 88000, 500, false},
		{"flush disabled", EconomyOptions{ContextWindow: 100000, FlushSoftTokens: -1}, 80000, 0, 20000, false},
		{"no window", EconomyOptions{}, 0, 0, 0, true},
		{"negative reserve", EconomyOptions{ContextWindow: 1000, ReserveTokens: -1}, 0, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEconomy(tc.o)
			if tc.err {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Threshold() != tc.threshold || e.FlushAt() != tc.flushAt || e.keep != tc.keep {
				t.Fatalf("threshold %d flushAt %d keep %d, want %d %d %d", e.Threshold(), e.FlushAt(), e.keep, tc.threshold, tc.flushAt, tc.keep)
			}
		})
	}
}

// filler is a message of about n tokens (4 ASCII characters a token).
func filler(role string, n int) Message {
	return Message{Message: model.Message{Role: role, Content: strings.Repeat("word", n-MessageOverheadTokens)}}
}

func TestAssessFlushAndCompact(t *testing.T) {
	e := mustEconomy(t, EconomyOptions{ContextWindow: 100000})          // threshold 80000, flush at 76000
	big := []Message{filler("user", 50000), filler("assistant", 27000)} // 77000 tokens
	tests := []struct {
		name           string
		t              Transcript
		extra          int
		tokens         int
		flush, compact bool
	}{
		{"low", Transcript{Messages: []Message{u("", "hi")}}, 0, 5, false, false},
		{"flush zone, fresh count", Transcript{Messages: big}, 0, 77000, true, false},
		// The recorded count is from before the big reply arrived: stale and
		// low. The flush still fires because the count is taken afresh.
		{"stale recorded count does not hide the flush", Transcript{Messages: big, RecordedTokens: 1200}, 0, 77000, true, false},
		// A recorded count above the estimate (the server's tokenizer counts
		// more) is believed.
		{"recorded count above the estimate", Transcript{Messages: []Message{u("", "hi")}, RecordedTokens: 79000}, 0, 79000, true, false},
		{"once per compaction", Transcript{Messages: big, Flushed: true}, 0, 77000, false, false},
		{"extra tokens count", Transcript{Messages: big}, 3000, 80000, true, true},
		{"summary counts", Transcript{Summary: strings.Repeat("摘", 3000-MessageOverheadTokens), Messages: big}, 0, 80000, true, true},
		{"over the threshold after the flush ran", Transcript{Messages: big, Flushed: true}, 5000, 82000, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.Assess(tc.t, tc.extra)
			if got.Tokens != tc.tokens || got.Flush != tc.flush || got.Compact != tc.compact {
				t.Fatalf("Assess = %+v, want tokens %d flush %v compact %v", got, tc.tokens, tc.flush, tc.compact)
			}
		})
	}
	disabled := mustEconomy(t, EconomyOptions{ContextWindow: 100000, FlushSoftTokens: -1})
	if got := disabled.Assess(Transcript{Messages: big}, 0); got.Flush {
		t.Fatal("flush fired while disabled")
	}
}

// recorder is a Summarizer that records its calls and answers from a list.
type recorder struct {
	calls   []string // show(older) of each call
	prev    []string
	answers []string
	err     error
}

func (r *recorder) sum(_ context.Context, previous string, older []Message) (string, error) {
	r.calls = append(r.calls, show(older))
	r.prev = append(r.prev, previous)
	if r.err != nil {
		return "", r.err
	}
	if len(r.answers) == 0 {
		return fmt.Sprintf("summary %d", len(r.calls)), nil
	}
	s := r.answers[0]
	r.answers = r.answers[1:]
	return s, nil
}

func TestPlan(t *testing.T) {
	// A plain message below costs 5 tokens (4 overhead + up to 4 ASCII
	// characters); a call 12 (overhead, name, arguments); a result 9.
	tests := []struct {
		name   string
		in     []Message
		sum    string
		keep   string
		budget int // KeepRecentTokens; 0 means 20
	}{
		{"empty", nil, "", "", 0},
		{"everything fits", []Message{u("1", "q"), a("2", "r")}, "", "u:1(q) a:2(r)", 0},
		{"everything fits though it starts with a reply", []Message{a("0", "r0"), u("1", "q")}, "", "a:0(r0) u:1(q)", 0},
		{"older turns summarised, recent turns whole",
			[]Message{u("1", "q1"), a("2", "r1"), u("3", "q2"), a("4", "r2"), u("5", "q3"), a("6", "r3")},
			"u:1(q1) a:2(r1)", "u:3(q2) a:4(r2) u:5(q3) a:6(r3)", 0},
		{"the kept part starts at a user message",
			[]Message{u("1", "q1"), a("2", "r1"), a("2b", "more"), u("3", "q2"), a("4", "r2"), u("5", "q3")},
			"u:1(q1) a:2(r1) a:2b(more)", "u:3(q2) a:4(r2) u:5(q3)", 0},
		{"tool call and result stay on one side",
			[]Message{u("1", "q1"), call("2", "", "c1"), res("c1", "hit1"), u("3", "q2"), call("4", "", "c2"), res("c2", "hit2"), a("5", "ok")},
			"u:1(q1) a:2+c1() t=c1(hit1)", "u:3(q2) a:4+c2() t=c2(hit2) a:5(ok)", 40},
		{"one long turn: cut between units, never inside one",
			[]Message{u("1", "q"), call("2", "", "c1"), res("c1", "r1"), call("3", "", "c2"), res("c2", "r2"), call("4", "", "c3"), res("c3", "r3"), a("5", "done")},
			"u:1(q) a:2+c1() t=c1(r1) a:3+c2() t=c2(r2)", "a:4+c3() t=c3(r3) a:5(done)", 30},
		{"aborted run: the dangling call is not kept",
			[]Message{u("1", "q1"), a("2", "r1"), u("3", "q2"), a("4", "r2"), u("5", "q3"), call("6", "", "c9")},
			"u:1(q1) a:2(r1)", "u:3(q2) a:4(r2) u:5(q3)", 0},
		{"aborted run in the older part is summarised without the dangling call",
			[]Message{u("1", "q1"), call("2", "", "c9"), u("3", "q2"), a("4", "r2"), u("5", "q3"), a("6", "r3")},
			"u:1(q1)", "u:3(q2) a:4(r2) u:5(q3) a:6(r3)", 0},
		{"orphan result is never kept",
			[]Message{u("1", "q1"), a("2", "r1"), u("3", "q2"), res("c7", "stray"), a("4", "r2"), u("5", "q3"), a("6", "r3")},
			"u:1(q1) a:2(r1)", "u:3(q2) a:4(r2) u:5(q3) a:6(r3)", 0},
		{"newest unit is kept even when it alone is over the budget",
			[]Message{u("1", "q1"), u("2", strings.Repeat("y", 400))}, "u:1(q1)", "u:2(yyyyyyyyyyyy…400)", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEconomy(t, EconomyOptions{ContextWindow: 1000, KeepRecentTokens: cmp.Or(tc.budget, 20)})
			before := deepCopy(tc.in)
			p := e.Plan(Transcript{Messages: tc.in})
			if s := show(p.Summarize); s != tc.sum {
				t.Errorf("Summarize = %s, want %s", s, tc.sum)
			}
			if s := show(p.Keep); s != tc.keep {
				t.Errorf("Keep = %s, want %s", s, tc.keep)
			}
			if p.KeepTokens != TokensOf(p.Keep) {
				t.Errorf("KeepTokens %d != %d", p.KeepTokens, TokensOf(p.Keep))
			}
			if !sameMessages(t, before, tc.in) {
				t.Error("Plan changed its input")
			}
			if err := orphans(p.Keep); err != nil {
				t.Error(err)
			}
		})
	}
}

// orphans reports a tool result without its call just before it, or a call
// without its result.
func orphans(msgs []Message) error {
	for i, m := range msgs {
		if m.Role == model.RoleTool {
			j := i - 1
			for j >= 0 && msgs[j].Role == model.RoleTool {
				j--
			}
			found := false
			if j >= 0 {
				for _, c := range msgs[j].ToolCalls {
					found = found || c.ID == m.ToolCallID
				}
			}
			if !found {
				return fmt.Errorf("orphaned tool result %s at %d", m.ToolCallID, i)
			}
		}
		for _, c := range m.ToolCalls {
			found := false
			for k := i + 1; k < len(msgs) && msgs[k].Role == model.RoleTool; k++ {
				found = found || msgs[k].ToolCallID == c.ID
			}
			if !found {
				return fmt.Errorf("tool call %s at %d has no result", c.ID, i)
			}
		}
	}
	return nil
}

func TestCompact(t *testing.T) {
	ctx := context.Background()
	e := mustEconomy(t, EconomyOptions{ContextWindow: 1000, KeepRecentTokens: 20})
	msgs := []Message{u("1", "我们来构建一个 API 吧"), a("2", "ok"), u("3", "q2"), a("4", "r2"), u("5", "q3"), a("6", "r3")}
	start := Transcript{Summary: "earlier", Messages: msgs, Compactions: 2, Flushed: true, RecordedTokens: 900}

	t.Run("summarises and keeps", func(t *testing.T) {
		r := &recorder{answers: []string{"  构建了 REST API。 \n"}}
		got, ok, err := e.Compact(ctx, start, r.sum)
		if err != nil || !ok {
			t.Fatalf("Compact = %v, %v", ok, err)
		}
		if got.Summary != "构建了 REST API。" || got.Compactions != 3 || got.Flushed || got.RecordedTokens != 0 {
			t.Fatalf("transcript = %+v", got)
		}
		if show(got.Messages) != "u:3(q2) a:4(r2) u:5(q3) a:6(r3)" || r.prev[0] != "earlier" || len(r.calls) != 1 {
			t.Fatalf("messages %s, calls %v prev %q", show(got.Messages), r.calls, r.prev)
		}
		// Compacting again with nothing new keeps the earlier summary and
		// does not call the model.
		again, ok, err := e.Compact(ctx, got, r.sum)
		if err != nil || ok || again.Summary != got.Summary || len(r.calls) != 1 || again.Compactions != 3 {
			t.Fatalf("second Compact = %+v, %v, %v (calls %d)", again, ok, err, len(r.calls))
		}
	})
	t.Run("an empty summary never replaces the old one", func(t *testing.T) {
		for _, empty := range []string{"", "  \n\t"} {
			r := &recorder{answers: []string{empty}}
			got, ok, err := e.Compact(ctx, start, r.sum)
			if !errors.Is(err, ErrEmptySummary) || ok {
				t.Fatalf("err = %v, ok %v", err, ok)
			}
			if got.Summary != "earlier" || show(got.Messages) != show(msgs) || got.Compactions != 2 || !got.Flushed {
				t.Fatalf("transcript changed: %+v", got)
			}
		}
	})
	t.Run("summarizer error", func(t *testing.T) {
		boom := errors.New("model down")
		got, ok, err := e.Compact(ctx, start, (&recorder{err: boom}).sum)
		if !errors.Is(err, boom) || ok || got.Summary != "earlier" || len(got.Messages) != len(msgs) {
			t.Fatalf("Compact = %+v, %v, %v", got, ok, err)
		}
	})
	t.Run("nil summarizer", func(t *testing.T) {
		if _, _, err := e.Compact(ctx, start, nil); !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("after an aborted run no orphan survives", func(t *testing.T) {
		in := Transcript{Messages: []Message{u("1", "q1"), call("2", "", "c1"), res("c1", "hit"), u("3", "q2"), a("4", "r2"),
			u("5", "q3"), call("6", "searching", "c2", "c3"), res("c3", "r3")}}
		r := &recorder{}
		e := mustEconomy(t, EconomyOptions{ContextWindow: 1000, KeepRecentTokens: 40})
		got, ok, err := e.Compact(ctx, in, r.sum)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := orphans(got.Messages); err != nil {
			t.Fatalf("%v in %s", err, show(got.Messages))
		}
		if r.calls[0] != "u:1(q1) a:2+c1() t=c1(hit)" {
			t.Fatalf("summarised %s", r.calls[0])
		}
		if show(got.Messages) != "u:3(q2) a:4(r2) u:5(q3) a:6+c3(searching) t=c3(r3)" {
			t.Fatalf("kept %s", show(got.Messages))
		}
	})
}

func TestFlushPrompt(t *testing.T) {
	day := time.Date(2026, 1, 26, 23, 30, 0, 0, time.FixedZone("CST", 8*3600))
	p := FlushPrompt("writer", day)
	if !strings.Contains(p, "memory/roles/writer/2026-01-26.md") || !strings.Contains(p, NoReply) {
		t.Fatalf("prompt = %q", p)
	}
	for s, want := range map[string]bool{"NO_REPLY": true, " no_reply\n": true, "NO_REPLY, but": false, "": false} {
		if IsNoReply(s) != want {
			t.Errorf("IsNoReply(%q) = %v", s, !want)
		}
	}
}
