package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/model"
)

// Loop defaults.
const (
	// DefaultMaxRounds caps the model calls offered tools in one run;
	// after that the model is asked once more without tools.
	DefaultMaxRounds = 8
	// MaxBadJSONRetries is how many rounds in a row of invalid tool-call
	// JSON are fed back and retried before the run is reported as failed
	// (SPEC §6: "retried at most twice, then reported").
	MaxBadJSONRetries = 2
	// MaxArgsSummaryChars cuts a call's arguments in a PermissionRequest.
	MaxArgsSummaryChars = 300
)

// Step timeout defaults (Timeouts).
const (
	DefaultAnalyzingTimeout = 15 * time.Second
	DefaultPlanningTimeout  = 2 * time.Minute
	DefaultActingTimeout    = 5 * time.Minute
	DefaultObservingTimeout = 10 * time.Second
	DefaultReportingTimeout = 30 * time.Second
)

// Timeouts bound each step of a run; zero fields take the defaults.
type Timeouts struct {
	// Analyzing bounds Options.Prepare. Default DefaultAnalyzingTimeout (15 s).
	Analyzing time.Duration
	// Planning bounds one model call (the whole stream). Default
	// DefaultPlanningTimeout (2 min).
	Planning time.Duration
	// Acting bounds one round of tool calls, questions to the person
	// included. Default DefaultActingTimeout (5 min). A single call is
	// bounded by its Spec.Timeout; a call that exceeds that is an error
	// result, not a step timeout.
	Acting time.Duration
	// Observing bounds feeding the results back (OnToolResult callbacks
	// included). Default DefaultObservingTimeout (10 s).
	Observing time.Duration
	// Reporting bounds Options.Report. Default DefaultReportingTimeout (30 s).
	Reporting time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Analyzing, DefaultAnalyzingTimeout)
	def(&t.Planning, DefaultPlanningTimeout)
	def(&t.Acting, DefaultActingTimeout)
	def(&t.Observing, DefaultObservingTimeout)
	def(&t.Reporting, DefaultReportingTimeout)
	return t
}

// Of returns the timeout of state s (0 for states that are not steps).
func (t Timeouts) Of(s State) time.Duration {
	switch s {
	case StateAnalyzing:
		return t.Analyzing
	case StatePlanning:
		return t.Planning
	case StateActing:
		return t.Acting
	case StateObserving:
		return t.Observing
	case StateReporting:
		return t.Reporting
	}
	return 0
}

// Task is one run's input: the person's message (Input), the system prompt
// and earlier turns (History, oldest first) for the default Prepare.
type Task struct {
	Input   string
	System  string
	History []model.Message
}

// Entry is one transcript line: a message as sent to or received from the
// model, and for tool messages the call and its whole Result (the model
// saw ForModel's truncated form in Message.Content).
type Entry struct {
	At      time.Time     `json:"at"`
	Message model.Message `json:"message"`
	Call    *Call         `json:"call,omitempty"`
	Result  *Result       `json:"result,omitempty"`
}

// Report is a run's outcome: the answer Text, the Rounds of tool calls,
// the whole Transcript, every tool Result in order, the summed Usage, and
// Err (the error Run returns, nil on success).
type Report struct {
	Text       string      `json:"text"`
	Rounds     int         `json:"rounds"`
	Transcript []Entry     `json:"transcript"`
	Results    []Result    `json:"results"`
	Usage      model.Usage `json:"usage"`
	Err        error       `json:"-"`
}

// Options configure an Agent.
type Options struct {
	// Provider is the model. Required.
	Provider model.Provider
	// Tools is the registry of tools. Required (may be empty).
	Tools *Registry
	// Permissions are the session's levels. Required.
	Permissions *Permissions
	// AllowedTools names the registered tools this agent is offered; a
	// call of another registered tool is denied. Nil: all.
	AllowedTools []string
	// Prepare builds the model context in the Analyzing step. Default:
	// Task.System (when not empty) + Task.History + Task.Input as the user
	// message.
	Prepare func(ctx context.Context, t Task) ([]model.Message, error)
	// Report receives the outcome in the Reporting step (e.g. to store
	// it); an error fails the run. Optional.
	Report func(ctx context.Context, r Report) error
	// OnTransition receives every state move, in order. Optional; it
	// should not block.
	OnTransition func(Transition)
	// OnDelta receives the model's streamed text. Optional.
	OnDelta func(model.Delta)
	// OnToolCall receives every call of a round as the Acting step takes
	// it up, before its permission check (Args as the model sent them).
	// Optional; it should not block.
	OnToolCall func(Call)
	// OnToolResult receives every call and its whole result as the
	// Observing step feeds it back. Optional.
	OnToolResult func(Call, Result)
	// Outgoing shapes the messages of each model call (Planning) from the
	// run's messages, e.g. to prune old tool results in what is sent
	// (SPEC §6 context economy); the run's messages and the transcript are
	// not changed. It must return a new slice when it changes anything.
	// Optional: nil sends the run's messages as they are.
	Outgoing func([]model.Message) []model.Message
	// Timeouts of the steps (defaults on Timeouts).
	Timeouts Timeouts
	// MaxRounds caps the model calls offered tools. Default DefaultMaxRounds.
	MaxRounds int
	// ResultChars caps one tool result as the model sees it. Default
	// DefaultResultChars.
	ResultChars int
	// Logger receives "agent transition" (debug), "agent tool call"
	// (info) and "agent run finished" (info). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of transitions and transcripts. Default time.Now.
	Now func() time.Time
}

// Agent runs tasks through its Machine, one at a time.
type Agent struct {
	o   Options
	m   *Machine
	log *slog.Logger

	mu      sync.Mutex
	running bool
}

// New returns an Agent in StateIdle. Errors: a missing Provider, Tools or
// Permissions, or an AllowedTools name that is not registered.
func New(o Options) (*Agent, error) {
	switch {
	case o.Provider == nil:
		return nil, errors.New("agent: Options.Provider is required")
	case o.Tools == nil:
		return nil, errors.New("agent: Options.Tools is required")
	case o.Permissions == nil:
		return nil, errors.New("agent: Options.Permissions is required")
	}
	for _, n := range o.AllowedTools {
		if _, ok := o.Tools.Spec(n); !ok {
			return nil, fmt.Errorf("agent: allowed tool %q: %w", n, ErrUnknownTool)
		}
	}
	o.Timeouts = o.Timeouts.withDefaults()
	if o.MaxRounds <= 0 {
		o.MaxRounds = DefaultMaxRounds
	}
	if o.ResultChars <= 0 {
		o.ResultChars = DefaultResultChars
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Agent{o: o, log: o.Logger.With("component", "agent")}
	a.m = NewMachine(o.Now, func(tr Transition) {
		a.log.Debug("agent transition", "from", tr.From, "to", tr.To, "source", tr.Source, "reason", tr.Reason)
		if o.OnTransition != nil {
			o.OnTransition(tr)
		}
	})
	return a, nil
}

// State returns the machine's current state.
func (a *Agent) State() State { return a.m.State() }

// run is one Run's working state.
type run struct {
	a      *Agent
	msgs   []model.Message
	rep    Report
	badRun int // rounds in a row with invalid tool-call JSON
}

// Run drives task through the machine until it reports, fails or is
// cancelled, and returns the Report (also on failure: what was gathered).
// Errors: ErrBusy (a run is in progress), *StepTimeoutError
// (ErrStepTimeout), ErrCancelled (wrapping ctx's cause), ErrBadToolCalls,
// ErrNoAnswer, the model's errors (package model sentinels), an error of
// Prepare or Report.
func (a *Agent) Run(ctx context.Context, task Task) (Report, error) {
	a.mu.Lock()
	if a.running {
		a.mu.Unlock()
		return Report{}, ErrBusy
	}
	a.running = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.running = false
		a.mu.Unlock()
	}()
	start := a.o.Now()
	r := &run{a: a}
	err := r.drive(ctx, task)
	r.rep.Err = err
	a.log.Info("agent run finished", "state", a.m.State(), "rounds", r.rep.Rounds, "tool_calls", len(r.rep.Results),
		"duration_ms", a.o.Now().Sub(start).Milliseconds(), "error", errString(err))
	return r.rep, err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// to moves the machine; a refused move is a bug in the loop.
func (r *run) to(s State, source, reason string) error {
	_, err := r.a.m.To(s, source, reason)
	return err
}

// fail moves the machine to Failed or Cancelled for err and returns err.
func (r *run) fail(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil || errors.Is(err, ErrCancelled):
		if !errors.Is(err, ErrCancelled) {
			err = fmt.Errorf("%w: %w", ErrCancelled, context.Cause(ctx))
		}
		if terr := r.to(StateCancelled, SourceCancel, err.Error()); terr != nil {
			return errors.Join(err, terr)
		}
	case errors.Is(err, ErrStepTimeout):
		if terr := r.to(StateFailed, SourceTimeout, err.Error()); terr != nil {
			return errors.Join(err, terr)
		}
	default:
		src := SourceLoop
		var me *model.Error
		if errors.As(err, &me) {
			src = SourceModel
		}
		if terr := r.to(StateFailed, src, err.Error()); terr != nil {
			return errors.Join(err, terr)
		}
	}
	return err
}

// step runs fn under state s's timeout. The step's context ending by its
// own deadline is a *StepTimeoutError; the caller's ending is
// ErrCancelled.
func (r *run) step(ctx context.Context, s State, fn func(ctx context.Context) error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrCancelled, context.Cause(ctx))
	}
	d := r.a.o.Timeouts.Of(s)
	te := &StepTimeoutError{State: s, Timeout: d}
	sctx, cancel := context.WithTimeoutCause(ctx, d, te)
	defer cancel()
	err := fn(sctx)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ErrCancelled, context.Cause(ctx))
	case err != nil && context.Cause(sctx) == te:
		return te
	}
	return err
}

func (r *run) drive(ctx context.Context, task Task) error {
	a := r.a
	if st := a.m.State(); st == StateFailed || st == StateCancelled {
		if err := r.to(StateIdle, SourceLoop, "a new run starts"); err != nil {
			return err
		}
	}
	if err := r.to(StateAnalyzing, SourceLoop, "task received"); err != nil {
		return err
	}
	if err := r.step(ctx, StateAnalyzing, func(sctx context.Context) error {
		var err error
		r.msgs, err = a.prepare(sctx, task)
		return err
	}); err != nil {
		return r.fail(ctx, fmt.Errorf("analyzing: %w", err))
	}
	for _, m := range r.msgs {
		r.record(m, nil, nil)
	}
	if err := r.to(StatePlanning, SourceLoop, "context ready"); err != nil {
		return err
	}
	for {
		offer := r.rep.Rounds < a.o.MaxRounds
		var resp model.Response
		err := r.step(ctx, StatePlanning, func(sctx context.Context) error {
			req := model.Request{Messages: r.msgs}
			if a.o.Outgoing != nil {
				req.Messages = a.o.Outgoing(r.msgs)
			}
			// Older images give way to newer ones past the request's cap.
			req.Messages = model.FitImages(req.Messages)
			if offer {
				req.Tools = a.o.Tools.ModelTools(a.allowed)
			}
			var err error
			resp, err = a.o.Provider.Stream(sctx, req, func(d model.Delta) {
				if a.o.OnDelta != nil {
					a.o.OnDelta(d)
				}
			})
			return err
		})
		// Counted also for a call that failed part-way: the server may
		// have reported the prompt's tokens.
		r.rep.Usage.PromptTokens += resp.Usage.PromptTokens
		r.rep.Usage.CompletionTokens += resp.Usage.CompletionTokens
		if err != nil {
			return r.fail(ctx, fmt.Errorf("planning: %w", err))
		}
		if len(resp.ToolCalls) == 0 || !offer {
			r.record(model.Message{Role: model.RoleAssistant, Content: resp.Content}, nil, nil)
			r.rep.Text = resp.Content
			if strings.TrimSpace(resp.Content) == "" {
				return r.fail(ctx, ErrNoAnswer)
			}
			reason := "the model answered"
			if len(resp.ToolCalls) > 0 {
				reason = fmt.Sprintf("the model answered; %d tool calls past the round limit were ignored", len(resp.ToolCalls))
			}
			if err := r.to(StateReporting, SourceModel, reason); err != nil {
				return err
			}
			return r.report(ctx, nil)
		}
		calls := make([]model.ToolCall, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			if c.ID == "" {
				c.ID = fmt.Sprintf("call_%d_%d", r.rep.Rounds, i)
			}
			calls[i] = c
		}
		asst := model.Message{Role: model.RoleAssistant, Content: resp.Content, ToolCalls: calls}
		r.msgs = append(r.msgs, asst)
		r.record(asst, nil, nil)
		r.rep.Rounds++
		if err := r.to(StateActing, SourceModel, fmt.Sprintf("the model asked for %d tool calls (round %d)", len(calls), r.rep.Rounds)); err != nil {
			return err
		}
		var results []Result
		var bad bool
		if err := r.step(ctx, StateActing, func(sctx context.Context) error {
			var err error
			results, bad, err = r.act(sctx, calls)
			return err
		}); err != nil {
			return r.fail(ctx, fmt.Errorf("acting: %w", err))
		}
		if err := r.to(StateObserving, SourceTools, tally(results)); err != nil {
			return err
		}
		if err := r.step(ctx, StateObserving, func(sctx context.Context) error {
			return r.observe(sctx, calls, results)
		}); err != nil {
			return r.fail(ctx, fmt.Errorf("observing: %w", err))
		}
		if bad {
			r.badRun++
		} else {
			r.badRun = 0
		}
		if r.badRun > MaxBadJSONRetries {
			err := fmt.Errorf("%w: invalid tool-call JSON in %d rounds in a row", ErrBadToolCalls, r.badRun)
			if terr := r.to(StateReporting, SourceTools, err.Error()); terr != nil {
				return terr
			}
			return r.report(ctx, err)
		}
		reason := "results fed back"
		if bad {
			reason = fmt.Sprintf("invalid tool-call JSON fed back (retry %d of %d)", r.badRun, MaxBadJSONRetries)
		}
		if err := r.to(StatePlanning, SourceTools, reason); err != nil {
			return err
		}
	}
}

// report runs the Reporting step; failure (non-nil) is the run's error,
// reported first and then moved to Failed.
func (r *run) report(ctx context.Context, failure error) error {
	r.rep.Err = failure
	if err := r.step(ctx, StateReporting, func(sctx context.Context) error {
		if r.a.o.Report == nil {
			return nil
		}
		return r.a.o.Report(sctx, r.rep)
	}); err != nil {
		return r.fail(ctx, fmt.Errorf("reporting: %w", err))
	}
	if failure != nil {
		return r.fail(ctx, failure)
	}
	return r.to(StateIdle, SourceLoop, "reported")
}

func tally(rs []Result) string {
	n := map[Status]int{}
	for _, r := range rs {
		n[r.Status]++
	}
	var parts []string
	for _, s := range []Status{StatusOK, StatusAccepted, StatusError, StatusDenied} {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
		}
	}
	return fmt.Sprintf("%d results: %s", len(rs), strings.Join(parts, ", "))
}

func (a *Agent) allowed(s Spec) bool {
	return a.o.AllowedTools == nil || slices.Contains(a.o.AllowedTools, s.Name)
}

func (a *Agent) prepare(ctx context.Context, t Task) ([]model.Message, error) {
	if a.o.Prepare != nil {
		return a.o.Prepare(ctx, t)
	}
	var msgs []model.Message
	if t.System != "" {
		msgs = append(msgs, model.Message{Role: model.RoleSystem, Content: t.System})
	}
	msgs = append(msgs, t.History...)
	if strings.TrimSpace(t.Input) == "" {
		return nil, errors.New("the task has no input")
	}
	return append(msgs, model.Message{Role: model.RoleUser, Content: t.Input}), nil
}

func (r *run) record(m model.Message, c *Call, res *Result) {
	r.rep.Transcript = append(r.rep.Transcript, Entry{At: r.a.o.Now(), Message: m, Call: c, Result: res})
}

// act runs one round's calls in order. bad reports whether any call's
// arguments were not valid JSON (or named no tool). The error is non-nil
// only when ctx ended.
func (r *run) act(ctx context.Context, calls []model.ToolCall) ([]Result, bool, error) {
	var out []Result
	bad := false
	for _, mc := range calls {
		c := Call{ID: mc.ID, Tool: mc.Name, Args: mc.Arguments}
		if r.a.o.OnToolCall != nil {
			r.a.o.OnToolCall(c)
		}
		res, malformed, err := r.one(ctx, c)
		if err != nil {
			return out, bad, err
		}
		if ctx.Err() != nil {
			return out, bad, context.Cause(ctx)
		}
		bad = bad || malformed
		out = append(out, res)
		r.a.log.Info("agent tool call", "call", c.ID, "tool", c.Tool, "status", res.Status,
			"attempts", res.Attempts, "duration_ms", res.Duration.Milliseconds(), "summary", res.LogSummary)
	}
	return out, bad, nil
}

// one decides and runs one call.
func (r *run) one(ctx context.Context, c Call) (Result, bool, error) {
	a := r.a
	res := Result{CallID: c.ID, Tool: c.Tool}
	if strings.TrimSpace(c.Tool) == "" {
		return failed(res, StatusError, fmt.Errorf("%w: the tool call names no tool", ErrBadJSON)), true, nil
	}
	spec, ok := a.o.Tools.Spec(c.Tool)
	if !ok || !a.allowed(spec) {
		var names []string
		for _, s := range a.o.Tools.Specs() {
			if a.allowed(s) {
				names = append(names, s.Name)
			}
		}
		if !ok {
			return failed(res, StatusError, fmt.Errorf("%w %q; the tools are: %s", ErrUnknownTool, c.Tool, strings.Join(names, ", "))), false, nil
		}
		return failed(res, StatusDenied, fmt.Errorf("%w: %s (the tools are: %s)", ErrNotAllowed, c.Tool, strings.Join(names, ", "))), false, nil
	}
	args, err := ParseArgs(c.Args)
	if err != nil {
		return failed(res, StatusError, fmt.Errorf("%w; call %s again with one JSON object that matches its schema", err, c.Tool)), true, nil
	}
	if err := a.o.Tools.Validate(c.Tool, args); err != nil {
		return failed(res, StatusError, err), false, nil
	}
	c.Args = args
	summary, _ := Truncate(string(args), MaxArgsSummaryChars)
	d, err := a.o.Permissions.Allow(ctx, spec.Level, PermissionRequest{Tool: c.Tool, CallID: c.ID, ArgsSummary: summary})
	if err != nil {
		return res, false, err
	}
	if !d.Allowed {
		return failed(res, StatusDenied, fmt.Errorf("%w: %s needs %s: %s", ErrDenied, c.Tool, spec.Level, d.Reason)), false, nil
	}
	return a.o.Tools.Invoke(ctx, c, a.o.Now), false, nil
}

// observe appends each result for the model and the transcript.
func (r *run) observe(ctx context.Context, calls []model.ToolCall, results []Result) error {
	for i, res := range results {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		mc := calls[i]
		c := Call{ID: mc.ID, Tool: mc.Name, Args: mc.Arguments}
		msg := ToolMessage(mc.ID, mc.Name, res, r.a.o.ResultChars, model.TakesImages(r.a.o.Provider))
		r.msgs = append(r.msgs, msg)
		res := res
		r.record(msg, &c, &res)
		r.rep.Results = append(r.rep.Results, res)
		if r.a.o.OnToolResult != nil {
			r.a.o.OnToolResult(c, res)
		}
	}
	return context.Cause(ctx) // nil unless the step's time ran out meanwhile
}
