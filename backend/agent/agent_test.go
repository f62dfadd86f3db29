package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/model"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// fakeModel answers the i-th Stream with steps[i].
type fakeModel struct {
	mu    sync.Mutex
	steps []func(ctx context.Context, req model.Request) (model.Response, error)
	reqs  []model.Request
}

func (f *fakeModel) Name() string  { return "fake" }
func (f *fakeModel) Model() string { return "fake-1" }
func (f *fakeModel) Stream(ctx context.Context, req model.Request, on func(model.Delta)) (model.Response, error) {
	f.mu.Lock()
	i := len(f.reqs)
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if i >= len(f.steps) {
		return model.Response{}, fmt.Errorf("fake model: unexpected call %d", i)
	}
	resp, err := f.steps[i](ctx, req)
	if resp.Content != "" {
		on(model.Delta{Content: resp.Content})
	}
	return resp, err
}

func answer(text string) func(context.Context, model.Request) (model.Response, error) {
	return func(context.Context, model.Request) (model.Response, error) {
		return model.Response{Content: text, FinishReason: "stop"}, nil
	}
}

func calls(cs ...model.ToolCall) func(context.Context, model.Request) (model.Response, error) {
	return func(context.Context, model.Request) (model.Response, error) {
		return model.Response{ToolCalls: cs, FinishReason: "tool_calls"}, nil
	}
}

func tc(id, name, args string) model.ToolCall {
	return model.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

const objSchema = `{"type":"object","properties":{"text":{"type":"string","minLength":1},"n":{"type":"integer","minimum":0}},"required":["text"],"additionalProperties":false}`

// echoRegistry has echo (L0), write (L1), run (L2) and secret (L0).
func echoRegistry(t *testing.T) *Registry {
	t.Helper()
	r := NewRegistry()
	echo := func(ctx context.Context, c Call) (Output, error) {
		var a struct {
			Text string `json:"text"`
			N    int    `json:"n"`
		}
		if err := json.Unmarshal(c.Args, &a); err != nil {
			return Output{}, err
		}
		return Output{Data: map[string]string{"echo": strings.Repeat(a.Text, max(a.N, 1))}, LogSummary: "echoed"}, nil
	}
	for _, s := range []Spec{
		{Name: "echo", Description: "echo text", Schema: json.RawMessage(objSchema), Level: L0},
		{Name: "write", Description: "pretend to write", Schema: json.RawMessage(objSchema), Level: L1},
		{Name: "run", Description: "pretend to run", Schema: json.RawMessage(objSchema), Level: L2},
		{Name: "secret", Description: "not for this agent", Schema: json.RawMessage(objSchema), Level: L0},
	} {
		if err := r.Register(s, echo); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// recorder keeps transitions.
type recorder struct {
	mu  sync.Mutex
	trs []Transition
}

func (r *recorder) add(tr Transition) { r.mu.Lock(); r.trs = append(r.trs, tr); r.mu.Unlock() }
func (r *recorder) path() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for i, tr := range r.trs {
		if i == 0 {
			s = append(s, string(tr.From))
		}
		s = append(s, string(tr.To))
	}
	return strings.Join(s, ">")
}
func (r *recorder) last() Transition { r.mu.Lock(); defer r.mu.Unlock(); return r.trs[len(r.trs)-1] }

func TestTransitionTable(t *testing.T) {
	// The expected table, written out independently of the code's.
	allowed := map[[2]State]bool{
		{StateIdle, StateAnalyzing}:      true,
		{StateAnalyzing, StatePlanning}:  true,
		{StatePlanning, StateActing}:     true,
		{StatePlanning, StateReporting}:  true,
		{StateActing, StateObserving}:    true,
		{StateObserving, StatePlanning}:  true,
		{StateObserving, StateReporting}: true,
		{StateReporting, StateIdle}:      true,
		{StateFailed, StateIdle}:         true,
		{StateCancelled, StateIdle}:      true,
	}
	for _, s := range []State{StateAnalyzing, StatePlanning, StateActing, StateObserving, StateReporting} {
		allowed[[2]State{s, StateFailed}] = true
		allowed[[2]State{s, StateCancelled}] = true
	}
	for _, from := range States() {
		for _, to := range States() {
			want := allowed[[2]State{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
			// The machine agrees with the table: start it in `from` by a
			// legal path, then try the move.
			m := NewMachine(nil, nil)
			m.state = from
			_, err := m.To(to, SourceLoop, "test")
			if want != (err == nil) {
				t.Errorf("Machine %s → %s: err %v, want allowed=%v", from, to, err, want)
			}
			if err != nil && (!errors.Is(err, ErrTransition) || m.State() != from) {
				t.Errorf("refused move %s → %s: err %v, state now %s", from, to, err, m.State())
			}
		}
	}
}

func TestMachineEmitsTransitions(t *testing.T) {
	c := newClock()
	rec := &recorder{}
	m := NewMachine(c.Now, rec.add)
	if m.State() != StateIdle {
		t.Fatalf("start state %s", m.State())
	}
	if _, err := m.To(StateAnalyzing, SourceLoop, "task received"); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	if _, err := m.To(StatePlanning, SourceLoop, "context ready"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.To(StateIdle, SourceLoop, "skip"); err == nil {
		t.Fatal("planning → idle was allowed")
	}
	want := []Transition{
		{From: StateIdle, To: StateAnalyzing, At: c.Now().Add(-time.Second), Source: SourceLoop, Reason: "task received"},
		{From: StateAnalyzing, To: StatePlanning, At: c.Now(), Source: SourceLoop, Reason: "context ready"},
	}
	if len(rec.trs) != len(want) {
		t.Fatalf("transitions %+v", rec.trs)
	}
	for i := range want {
		if rec.trs[i] != want[i] {
			t.Errorf("transition %d = %+v, want %+v", i, rec.trs[i], want[i])
		}
	}
	b, _ := json.Marshal(rec.trs[0])
	if string(b) != `{"from":"idle","to":"analyzing","at":"2026-05-01T10:00:00Z","source":"loop","reason":"task received"}` {
		t.Errorf("wire form %s", b)
	}
}

func newAgent(t *testing.T, o Options) (*Agent, *recorder) {
	t.Helper()
	rec := &recorder{}
	if o.Tools == nil {
		o.Tools = echoRegistry(t)
	}
	if o.Permissions == nil {
		o.Permissions = NewPermissions(PermissionOptions{})
	}
	o.OnTransition = rec.add
	o.Logger = quiet()
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a, rec
}

func TestRunToolsThenAnswer(t *testing.T) {
	big := strings.Repeat("0123456789", 50) // echo n=40 → 20 000 chars
	fm := &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){
		calls(
			tc("a", "echo", `{"text":"`+big+`","n":40}`),
			tc("b", "nope", `{}`),
			tc("c", "secret", `{"text":"x"}`),
			tc("d", "echo", `{"text":""}`),
			tc("", "write", `{"text":"w"}`),
		),
		answer("done"),
	}}
	a, rec := newAgent(t, Options{Provider: fm, AllowedTools: []string{"echo", "write", "run"}, ResultChars: 1000})
	rep, err := a.Run(context.Background(), Task{System: "sys", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Text != "done" || rep.Rounds != 1 || a.State() != StateIdle {
		t.Fatalf("report %+v state %s", rep, a.State())
	}
	if p := rec.path(); p != "idle>analyzing>planning>acting>observing>planning>reporting>idle" {
		t.Fatalf("path %s", p)
	}
	want := []Status{StatusOK, StatusError, StatusDenied, StatusError, StatusOK}
	if len(rep.Results) != len(want) {
		t.Fatalf("results %+v", rep.Results)
	}
	for i, s := range want {
		if rep.Results[i].Status != s {
			t.Errorf("result %d (%s) = %s %s, want %s", i, rep.Results[i].Tool, rep.Results[i].Status, rep.Results[i].Error, s)
		}
	}
	if !strings.Contains(rep.Results[1].Error, "unknown tool") || !errors.Is(ErrNotAllowed, ErrDenied) ||
		!strings.Contains(rep.Results[2].Error, "not available") || !strings.Contains(rep.Results[3].Error, "minLength") {
		t.Errorf("errors: %q / %q / %q", rep.Results[1].Error, rep.Results[2].Error, rep.Results[3].Error)
	}
	if rep.Results[4].CallID != "call_0_4" {
		t.Errorf("missing call id filled as %q", rep.Results[4].CallID)
	}
	// The model was offered only the allowed tools, and saw a cut body;
	// the transcript keeps the whole output.
	var offered []string
	for _, tl := range fm.reqs[0].Tools {
		offered = append(offered, tl.Name)
	}
	if strings.Join(offered, ",") != "echo,run,write" {
		t.Errorf("offered %v", offered)
	}
	second := fm.reqs[1].Messages
	toolMsg := second[3] // system, user, assistant, tool a
	if toolMsg.Role != model.RoleTool || toolMsg.ToolCallID != "a" {
		t.Fatalf("message 3 = %+v", toolMsg)
	}
	var view struct {
		Status    Status `json:"status"`
		Data      string `json:"data"`
		Truncated bool   `json:"truncated"`
		FullChars int    `json:"fullChars"`
	}
	if err := json.Unmarshal([]byte(toolMsg.Content), &view); err != nil {
		t.Fatalf("tool message is not JSON: %v\n%s", err, toolMsg.Content)
	}
	full := string(rep.Results[0].Data)
	if !view.Truncated || view.FullChars != len(full) || len([]rune(view.Data)) > 1000 ||
		!strings.HasPrefix(view.Data, full[:300]) || !strings.HasSuffix(view.Data, full[len(full)-300:]) ||
		!strings.Contains(view.Data, "characters cut]") {
		t.Errorf("model view: truncated=%v full=%d/%d len=%d", view.Truncated, view.FullChars, len(full), len(view.Data))
	}
	var tr *Entry
	for i := range rep.Transcript {
		if rep.Transcript[i].Result != nil && rep.Transcript[i].Call.ID == "a" {
			tr = &rep.Transcript[i]
		}
	}
	if tr == nil || len(tr.Result.Data) != len(full) || len(full) < 20000 {
		t.Fatalf("transcript lost the full output")
	}
	// Every call is answered in the second request, in order.
	var ids []string
	for _, m := range second {
		if m.Role == model.RoleTool {
			ids = append(ids, m.ToolCallID)
		}
	}
	if strings.Join(ids, ",") != "a,b,c,d,call_0_4" {
		t.Errorf("tool messages %v", ids)
	}
}

func TestBadJSONRetriedTwiceThenReported(t *testing.T) {
	broken := calls(tc("x", "echo", `{"text": "unterminated`))
	t.Run("twice then valid", func(t *testing.T) {
		fm := &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){
			broken, broken, calls(tc("y", "echo", `{"text":"ok"}`)), answer("fine"),
		}}
		a, _ := newAgent(t, Options{Provider: fm})
		rep, err := a.Run(context.Background(), Task{Input: "go"})
		if err != nil || rep.Text != "fine" {
			t.Fatalf("err %v rep %+v", err, rep)
		}
		// The error went back to the model each time.
		for i := 1; i <= 2; i++ {
			last := fm.reqs[i].Messages[len(fm.reqs[i].Messages)-1]
			if !strings.Contains(last.Content, "not valid JSON") || !strings.Contains(last.Content, `"status":"error"`) {
				t.Errorf("feedback %d: %s", i, last.Content)
			}
		}
	})
	t.Run("three times", func(t *testing.T) {
		fm := &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){broken, broken, broken}}
		var reported *Report
		a, rec := newAgent(t, Options{Provider: fm, Report: func(ctx context.Context, r Report) error { reported = &r; return nil }})
		_, err := a.Run(context.Background(), Task{Input: "go"})
		if !errors.Is(err, ErrBadToolCalls) || a.State() != StateFailed {
			t.Fatalf("err %v state %s", err, a.State())
		}
		if reported == nil || !errors.Is(reported.Err, ErrBadToolCalls) {
			t.Fatalf("not reported: %+v", reported)
		}
		if !strings.HasSuffix(rec.path(), "observing>reporting>failed") || len(fm.reqs) != 3 {
			t.Fatalf("path %s, %d model calls", rec.path(), len(fm.reqs))
		}
		// A later run starts from Idle again.
		fm.steps = append(fm.steps, answer("again"))
		if rep, err := a.Run(context.Background(), Task{Input: "go"}); err != nil || rep.Text != "again" {
			t.Fatalf("second run: %v %+v", err, rep)
		}
	})
}

func TestStepTimeouts(t *testing.T) {
	const short = 40 * time.Millisecond
	block := func(ctx context.Context, _ model.Request) (model.Response, error) {
		<-ctx.Done()
		return model.Response{}, fmt.Errorf("stream: %w", ctx.Err())
	}
	slowTool := func(ctx context.Context, c Call) (Output, error) {
		select {
		case <-ctx.Done():
			return Output{}, ctx.Err()
		case <-time.After(5 * time.Second):
			return Output{Data: "late"}, nil
		}
	}
	cases := []struct {
		state State
		setup func(o *Options)
	}{
		{StateAnalyzing, func(o *Options) {
			o.Prepare = func(ctx context.Context, _ Task) ([]model.Message, error) { <-ctx.Done(); return nil, ctx.Err() }
		}},
		{StatePlanning, func(o *Options) {
			o.Provider = &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){block}}
		}},
		{StateActing, func(o *Options) {
			r := NewRegistry()
			if err := r.Register(Spec{Name: "slow", Schema: json.RawMessage(`{"type":"object"}`), Timeout: time.Minute}, slowTool); err != nil {
				panic(err)
			}
			o.Tools = r
			o.Provider = &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){calls(tc("s", "slow", `{}`))}}
		}},
		{StateObserving, func(o *Options) {
			o.Provider = &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){calls(tc("e", "echo", `{"text":"x"}`))}}
			o.OnToolResult = func(Call, Result) { time.Sleep(4 * short) }
		}},
		{StateReporting, func(o *Options) {
			o.Report = func(ctx context.Context, _ Report) error { <-ctx.Done(); return ctx.Err() }
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.state), func(t *testing.T) {
			o := Options{
				Provider: &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){answer("hi")}},
				Timeouts: Timeouts{Analyzing: short, Planning: short, Acting: short, Observing: short, Reporting: short},
			}
			tc.setup(&o)
			a, rec := newAgent(t, o)
			start := time.Now()
			_, err := a.Run(context.Background(), Task{Input: "go"})
			var te *StepTimeoutError
			if !errors.As(err, &te) || te.State != tc.state || te.Timeout != short || !errors.Is(err, ErrStepTimeout) {
				t.Fatalf("err = %v, want a %s step timeout", err, tc.state)
			}
			if time.Since(start) > 3*time.Second {
				t.Errorf("took %s", time.Since(start))
			}
			last := rec.last()
			if a.State() != StateFailed || last.From != tc.state || last.To != StateFailed || last.Source != SourceTimeout ||
				!strings.Contains(last.Reason, "timeout of 40ms") {
				t.Fatalf("state %s, last transition %+v", a.State(), last)
			}
		})
	}
}

func TestTimeoutDefaults(t *testing.T) {
	d := Timeouts{Planning: time.Second}.withDefaults()
	want := map[State]time.Duration{StateAnalyzing: 15 * time.Second, StatePlanning: time.Second, StateActing: 5 * time.Minute,
		StateObserving: 10 * time.Second, StateReporting: 30 * time.Second, StateIdle: 0}
	for s, w := range want {
		if d.Of(s) != w {
			t.Errorf("%s timeout %s, want %s", s, d.Of(s), w)
		}
	}
}

func TestCancelInEveryState(t *testing.T) {
	for _, st := range []State{StateAnalyzing, StatePlanning, StateActing, StateObserving, StateReporting} {
		t.Run(string(st), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// wait cancels the run and blocks until the context is done.
			wait := func(c context.Context) { cancel(); <-c.Done() }
			reg := echoRegistry(t)
			if err := reg.Register(Spec{Name: "hang", Schema: json.RawMessage(`{"type":"object"}`)}, func(c context.Context, _ Call) (Output, error) {
				wait(c)
				return Output{}, c.Err()
			}); err != nil {
				t.Fatal(err)
			}
			o := Options{Tools: reg}
			steps := []func(context.Context, model.Request) (model.Response, error){calls(tc("e", "echo", `{"text":"x"}`)), answer("hi")}
			switch st {
			case StateAnalyzing:
				o.Prepare = func(c context.Context, _ Task) ([]model.Message, error) { wait(c); return nil, c.Err() }
			case StatePlanning:
				steps[0] = func(c context.Context, _ model.Request) (model.Response, error) {
					wait(c)
					return model.Response{}, c.Err()
				}
			case StateActing:
				steps[0] = calls(tc("h", "hang", `{}`))
			case StateObserving:
				o.OnToolResult = func(Call, Result) { cancel() }
			case StateReporting:
				o.Report = func(c context.Context, _ Report) error { wait(c); return c.Err() }
			}
			o.Provider = &fakeModel{steps: steps}
			a, rec := newAgent(t, o)
			_, err := a.Run(ctx, Task{Input: "go"})
			if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v", err)
			}
			last := rec.last()
			if a.State() != StateCancelled || last.From != st || last.Source != SourceCancel {
				t.Fatalf("state %s, last %+v (path %s)", a.State(), last, rec.path())
			}
		})
	}
}

func TestModelFailureAndEmptyAnswer(t *testing.T) {
	fm := &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){
		func(context.Context, model.Request) (model.Response, error) {
			return model.Response{}, &model.Error{Kind: model.ErrUnavailable, Msg: "model server down"}
		},
		answer("   "),
	}}
	a, rec := newAgent(t, Options{Provider: fm})
	if _, err := a.Run(context.Background(), Task{Input: "go"}); !errors.Is(err, model.ErrUnavailable) || rec.last().Source != SourceModel {
		t.Fatalf("err %v last %+v", err, rec.last())
	}
	if _, err := a.Run(context.Background(), Task{Input: "go"}); !errors.Is(err, ErrNoAnswer) || a.State() != StateFailed {
		t.Fatalf("err %v state %s", err, a.State())
	}
}

func TestRoundLimit(t *testing.T) {
	loop := calls(tc("", "echo", `{"text":"x"}`))
	fm := &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){loop, loop, answer("enough")}}
	a, _ := newAgent(t, Options{Provider: fm, MaxRounds: 2})
	rep, err := a.Run(context.Background(), Task{Input: "go"})
	if err != nil || rep.Text != "enough" || rep.Rounds != 2 {
		t.Fatalf("err %v rep %+v", err, rep)
	}
	if len(fm.reqs[2].Tools) != 0 || len(fm.reqs[1].Tools) == 0 {
		t.Errorf("tools offered in the last call: %d", len(fm.reqs[2].Tools))
	}
}

func TestBusy(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	fm := &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){
		func(context.Context, model.Request) (model.Response, error) {
			close(started)
			<-release
			return model.Response{Content: "a"}, nil
		},
	}}
	a, _ := newAgent(t, Options{Provider: fm})
	done := make(chan error)
	go func() { _, err := a.Run(context.Background(), Task{Input: "go"}); done <- err }()
	<-started
	if _, err := a.Run(context.Background(), Task{Input: "go"}); !errors.Is(err, ErrBusy) {
		t.Errorf("second run: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCallHookOutgoingAndFailedUsage: OnToolCall sees every call of a
// round before its permission check (also a refused one), Outgoing shapes
// what each model call sends without touching the transcript, and the
// usage of a model call that failed part-way is still counted.
func TestCallHookOutgoingAndFailedUsage(t *testing.T) {
	fm := &fakeModel{steps: []func(context.Context, model.Request) (model.Response, error){
		calls(tc("a", "echo", `{"text":"hi"}`), tc("b", "run", `{"text":"x"}`)),
		func(context.Context, model.Request) (model.Response, error) {
			return model.Response{Content: "half", Usage: model.Usage{PromptTokens: 7}}, fmt.Errorf("cut: %w", model.ErrIncomplete)
		},
	}}
	var seen []string
	a, _ := newAgent(t, Options{Provider: fm,
		OnToolCall: func(c Call) { seen = append(seen, c.ID+":"+c.Tool) },
		Outgoing: func(msgs []model.Message) []model.Message {
			out := append([]model.Message(nil), msgs...)
			for i := range out {
				if out[i].Role == model.RoleTool {
					out[i].Content = "[pruned]"
				}
			}
			return out
		},
	})
	rep, err := a.Run(context.Background(), Task{Input: "go"})
	if !errors.Is(err, model.ErrIncomplete) || rep.Usage.PromptTokens != 7 {
		t.Fatalf("err %v, usage %+v", err, rep.Usage)
	}
	if strings.Join(seen, ",") != "a:echo,b:run" {
		t.Fatalf("OnToolCall saw %v", seen)
	}
	sent := fm.reqs[1].Messages
	if sent[len(sent)-1].Content != "[pruned]" || sent[len(sent)-2].Content != "[pruned]" {
		t.Fatalf("Outgoing not applied: %+v", sent)
	}
	for _, e := range rep.Transcript {
		if e.Message.Role == model.RoleTool && e.Message.Content == "[pruned]" {
			t.Fatal("Outgoing changed the transcript")
		}
	}
}
