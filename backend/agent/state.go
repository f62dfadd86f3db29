package agent

import (
	"fmt"
	"sync"
	"time"
)

// State is one state of the agent loop (SPEC §6).
type State string

// The states. Idle is where a machine starts and where it returns after a
// report; Failed and Cancelled are where a run that did not report ends
// (they go back to Idle when the next run starts).
const (
	StateIdle      State = "idle"
	StateAnalyzing State = "analyzing" // assemble the model context (Options.Prepare)
	StatePlanning  State = "planning"  // one model call: tool calls or the answer
	StateActing    State = "acting"    // run the tool calls of one round
	StateObserving State = "observing" // feed the results back, decide: plan again or report
	StateReporting State = "reporting" // hand the answer over (Options.Report)
	StateFailed    State = "failed"    // an error ended the run (step timeout, model failure ...)
	StateCancelled State = "cancelled" // the caller's context ended the run
)

// Sources of transitions (Transition.Source): who or what caused it.
const (
	SourceLoop    = "loop"    // the loop's own progress
	SourceModel   = "model"   // the model's answer (tool calls, text, a failure)
	SourceTools   = "tools"   // the tool results of a round
	SourceTimeout = "timeout" // a step exceeded its timeout
	SourceCancel  = "cancel"  // the caller's context was cancelled
)

// transitions lists the allowed moves (SPEC §6: Idle → Analyzing →
// Planning → Acting → Observing → (Planning again, or) Reporting).
// Planning → Reporting is the model answering without tools; Observing →
// Reporting is a round whose results end the run (the model's tool-call
// JSON was invalid too often). Every active state may fail or be
// cancelled; Reporting → Idle completes a run; Failed and Cancelled only
// go back to Idle.
var transitions = map[State][]State{
	StateIdle:      {StateAnalyzing},
	StateAnalyzing: {StatePlanning, StateFailed, StateCancelled},
	StatePlanning:  {StateActing, StateReporting, StateFailed, StateCancelled},
	StateActing:    {StateObserving, StateFailed, StateCancelled},
	StateObserving: {StatePlanning, StateReporting, StateFailed, StateCancelled},
	StateReporting: {StateIdle, StateFailed, StateCancelled},
	StateFailed:    {StateIdle},
	StateCancelled: {StateIdle},
}

// States returns every state in loop order (a new slice).
func States() []State {
	return []State{StateIdle, StateAnalyzing, StatePlanning, StateActing, StateObserving, StateReporting, StateFailed, StateCancelled}
}

// CanTransition reports whether the machine may move from one state to another.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Transition is one state change, as emitted to Options.OnTransition:
// {from, to, at, source, reason}. At is the machine clock's time; Source is
// one of the Source* constants; Reason is a short human sentence.
type Transition struct {
	From   State     `json:"from"`
	To     State     `json:"to"`
	At     time.Time `json:"at"`
	Source string    `json:"source"`
	Reason string    `json:"reason"`
}

// Machine is the explicit state machine of one agent: it holds the current
// state, refuses moves that are not allowed (ErrTransition) and emits every
// move it makes. Safe for concurrent use; the callback is called with no
// lock held, in the order of the moves.
type Machine struct {
	now  func() time.Time
	emit func(Transition)

	mu    sync.Mutex
	state State
	emitM sync.Mutex // keeps callbacks in the order of the moves
}

// NewMachine returns a machine in StateIdle. now is its clock (nil:
// time.Now); emit receives every transition (nil: none).
func NewMachine(now func() time.Time, emit func(Transition)) *Machine {
	if now == nil {
		now = time.Now
	}
	return &Machine{now: now, emit: emit, state: StateIdle}
}

// State returns the current state.
func (m *Machine) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// To moves the machine to state to and emits the transition. A move that
// is not allowed from the current state changes nothing and returns an
// error wrapping ErrTransition.
func (m *Machine) To(to State, source, reason string) (Transition, error) {
	m.emitM.Lock()
	defer m.emitM.Unlock()
	m.mu.Lock()
	from := m.state
	if !CanTransition(from, to) {
		m.mu.Unlock()
		return Transition{}, fmt.Errorf("%w: %s → %s (%s)", ErrTransition, from, to, reason)
	}
	m.state = to
	tr := Transition{From: from, To: to, At: m.now(), Source: source, Reason: reason}
	m.mu.Unlock()
	if m.emit != nil {
		m.emit(tr)
	}
	return tr, nil
}
