// Package agent is Atrium's agent loop (SPEC §6 "Agent loop as an explicit
// state machine", tools, permission levels; issue 5 item 7).
//
// Machine is the explicit state machine: Idle → Analyzing → Planning →
// Acting → Observing → (Planning again, or) Reporting → Idle, with Failed
// and Cancelled reachable from every active state (the table is
// CanTransition's). Every move is emitted as a Transition {from, to, at,
// source, reason}.
//
// Agent.Run drives one task through the machine: Analyzing assembles the
// model context (Options.Prepare), Planning is one streamed model call
// (model.Provider) offered the tools, Acting runs the tool calls of that
// round, Observing feeds the results back (ForModel: summary plus a
// head-and-tail truncated body; the transcript keeps the whole output),
// Reporting hands over the answer (Options.Report). Each step runs under
// its own timeout (Timeouts; a step that exceeds it ends the run in
// StateFailed with a *StepTimeoutError), and the caller's context cancels
// the run in any state (StateCancelled, ErrCancelled).
//
// Registry holds the tools: a Spec {name, description, JSON schema of the
// args, permission level L0–L3, timeout, max retries} and a Handler. A
// Call is {callId, tool, args}; a Result {status: ok|error|denied|accepted,
// data, logSummary}. Arguments are validated against the schema with
// github.com/santhosh-tekuri/jsonschema/v6 (full JSON Schema; remote
// references are never loaded). Arguments that are not valid JSON are fed
// back to the model and the round retried; the third such round in a row
// (two retries) ends the run with a report and ErrBadToolCalls. Any other
// failed call is fed back with its error so that the model can re-plan.
//
// Permissions are one session's levels: L0–L1 without asking (L0 only
// when read-only), L2 (run programs) and L3 (network) ask the person
// through an Asker and, once granted, hold for GrantTTL (10 minutes). A
// denial is fed back to the model as status "denied". Pending is an Asker
// for the gateway: open questions are records with an id, the tool, an
// argument summary and the level, answered with Answer(id, yes).
//
// The concrete tools (memory, workspace files, exec, web_fetch) are in
// package agent/tools.
package agent

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrTransition: a state move the machine does not allow.
	ErrTransition = errors.New("agent: transition not allowed")
	// ErrInvalidSpec: Registry.Register was given a bad tool spec.
	ErrInvalidSpec = errors.New("agent: invalid tool spec")
	// ErrUnknownTool: a call names a tool that is not registered.
	ErrUnknownTool = errors.New("agent: unknown tool")
	// ErrBadJSON: a call's arguments are not one valid JSON object.
	ErrBadJSON = errors.New("agent: tool arguments are not valid JSON")
	// ErrInvalidArgs: a call's arguments do not satisfy the tool's schema.
	ErrInvalidArgs = errors.New("agent: invalid tool arguments")
	// ErrDenied: a handler refused the call (the ACL, an exec approval, a
	// path outside the workspace); the result's status is "denied".
	ErrDenied = errors.New("agent: denied")
	// ErrNotAllowed: the tool is registered but not among the agent's
	// Options.AllowedTools (wraps ErrDenied).
	ErrNotAllowed = fmt.Errorf("%w: tool not available to this agent", ErrDenied)
	// ErrRetryable: a handler failure worth another attempt (Spec.MaxRetries).
	ErrRetryable = errors.New("agent: retryable failure")
	// ErrToolTimeout: one attempt of a tool exceeded Spec.Timeout (wraps
	// ErrRetryable).
	ErrToolTimeout = errors.New("agent: tool timed out")
	// ErrStepTimeout: a step exceeded its timeout (the error is a
	// *StepTimeoutError).
	ErrStepTimeout = errors.New("agent: step timed out")
	// ErrCancelled: the caller's context ended the run; the error also
	// wraps the context's cause.
	ErrCancelled = errors.New("agent: run cancelled")
	// ErrBadToolCalls: the model's tool-call JSON was invalid in
	// 1 + MaxBadJSONRetries rounds in a row.
	ErrBadToolCalls = errors.New("agent: the model kept sending invalid tool calls")
	// ErrNoAnswer: the model finished without any text.
	ErrNoAnswer = errors.New("agent: the model returned an empty answer")
	// ErrBusy: Run was called while a run of the same Agent is in progress.
	ErrBusy = errors.New("agent: a run is in progress")
	// ErrNoSuchRequest: Pending.Answer got an id that is not open.
	ErrNoSuchRequest = errors.New("agent: no such permission request")
)

// StepTimeoutError is the error of a step that exceeded its timeout.
type StepTimeoutError struct {
	State   State
	Timeout time.Duration
}

// Error implements error.
func (e *StepTimeoutError) Error() string {
	return fmt.Sprintf("agent: the %s step took longer than its timeout of %s", e.State, e.Timeout)
}

// Unwrap makes errors.Is(err, ErrStepTimeout) true.
func (e *StepTimeoutError) Unwrap() error { return ErrStepTimeout }
