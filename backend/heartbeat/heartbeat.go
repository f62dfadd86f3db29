// Package heartbeat runs main's heartbeat turn on a schedule (issue 24
// item 7; OpenClaw's heartbeat, docs.openclaw.ai gateway/heartbeat): every
// Settings.Every, inside the active hours, one turn through Options.Turn.
// What a turn sends and how its answer is shown (HEARTBEAT_OK stays
// silent) is the caller's: the wiring hands it chat.Service.Heartbeat.
// The clock is injected (Options.Clock), so tests move time by hand.
package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultEvery is the interval when Settings.Every is zero: OpenClaw's
// default of 30 minutes.
const DefaultEvery = 30 * time.Minute

// MinEvery is the shortest interval accepted: a heartbeat is a model call.
const MinEvery = time.Minute

// ErrBadSettings wraps every refusal of Parse and Scheduler.Update.
var ErrBadSettings = errors.New("heartbeat settings")

// Settings are the schedule. The zero value is off.
type Settings struct {
	// On runs heartbeats; off, the scheduler waits for an Update.
	On bool
	// Every is the time from the end of one turn's slot to the next
	// (≥ MinEvery); 0 means DefaultEvery.
	Every time.Duration
	// Start and End are the active hours, minutes after local midnight
	// (0…1440): turns fall in [Start, End), across midnight when
	// Start > End; Start == End means all day.
	Start, End int
}

// Window reports the active hours as "HH:MM" strings.
func (s Settings) Window() (start, end string) { return clockText(s.Start), clockText(s.End) }

// ParseClock parses "HH:MM" (00:00…24:00) into minutes after midnight.
func ParseClock(s string) (int, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || len(m) != 2 || hh < 0 || mm < 0 || mm > 59 || hh > 24 || (hh == 24 && mm != 0) {
		return 0, fmt.Errorf("%w: %q is not a time of day HH:MM (00:00…24:00)", ErrBadSettings, s)
	}
	return hh*60 + mm, nil
}

func clockText(min int) string { return fmt.Sprintf("%02d:%02d", min/60, min%60) }

// check validates s.
func (s Settings) check() error {
	if s.Every != 0 && s.Every < MinEvery {
		return fmt.Errorf("%w: every %v is shorter than %v", ErrBadSettings, s.Every, MinEvery)
	}
	if s.Start < 0 || s.Start > 1440 || s.End < 0 || s.End > 1440 {
		return fmt.Errorf("%w: active hours %d…%d are not minutes of a day", ErrBadSettings, s.Start, s.End)
	}
	return nil
}

func (s Settings) every() time.Duration {
	if s.Every == 0 {
		return DefaultEvery
	}
	return s.Every
}

// active reports whether t (in its own location) is inside the active hours.
func (s Settings) active(t time.Time) bool {
	if s.Start%1440 == s.End%1440 {
		return true
	}
	m := t.Hour()*60 + t.Minute()
	if s.Start < s.End {
		return m >= s.Start && m < s.End
	}
	return m >= s.Start || m < s.End
}

// Next is when the turn due at due may run: due itself inside the active
// hours, else the start of the next active period after it (in due's
// location).
func (s Settings) Next(due time.Time) time.Time {
	if s.active(due) {
		return due
	}
	y, mo, d := due.Date()
	start := time.Date(y, mo, d, s.Start/60, s.Start%60, 0, 0, due.Location())
	if !start.After(due) {
		start = start.AddDate(0, 0, 1)
	}
	return start
}

// Clock is the scheduler's time source.
type Clock interface {
	Now() time.Time
	// After fires once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a Scheduler.
type Options struct {
	// Turn runs one heartbeat turn and returns when it ended; its error is
	// logged. Required.
	Turn func(ctx context.Context) (Outcome, error)
	// Clock; default the system clock.
	Clock Clock
	// Location of the active hours; default time.Local.
	Location *time.Location
	// TurnTimeout bounds one turn; default 10 minutes.
	TurnTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Outcome is what a turn reports for Status: "silent" (HEARTBEAT_OK),
// "shown" (an answer reached the chat), or "failed".
type Outcome string

// Outcomes of a turn.
const (
	OutcomeSilent Outcome = "silent"
	OutcomeShown  Outcome = "shown"
	OutcomeFailed Outcome = "failed"
)

// Status is the scheduler's state for Settings: the schedule in force, the
// last turn (zero LastRun: none yet) and the next (zero when off).
type Status struct {
	Settings    Settings
	LastRun     time.Time
	LastOutcome Outcome
	Next        time.Time
}

// Scheduler runs heartbeat turns. Safe for concurrent use.
type Scheduler struct {
	o    Options
	log  *slog.Logger
	wake chan struct{}

	mu     sync.Mutex
	set    Settings
	since  time.Time // the start of the current interval: the last turn, or the last change
	status Status
}

// New returns a scheduler with settings s (see Update) and o's defaults.
func New(o Options, s Settings) (*Scheduler, error) {
	if o.Turn == nil {
		return nil, errors.New("heartbeat: Options.Turn is required")
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.TurnTimeout <= 0 {
		o.TurnTimeout = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	sc := &Scheduler{o: o, log: o.Logger.With("component", "heartbeat"), wake: make(chan struct{}, 1), set: s, since: o.Clock.Now()}
	sc.status.Settings = s
	return sc, nil
}

// Update puts settings s in force at once: the next turn is Every after
// now (then moved into the active hours). Errors: ErrBadSettings.
func (sc *Scheduler) Update(s Settings) error {
	if err := s.check(); err != nil {
		return err
	}
	sc.mu.Lock()
	changed := sc.set != s
	sc.set, sc.status.Settings = s, s
	if changed {
		sc.since = sc.o.Clock.Now()
	}
	sc.mu.Unlock()
	select {
	case sc.wake <- struct{}{}:
	default:
	}
	return nil
}

// Status returns the scheduler's state.
func (sc *Scheduler) Status() Status {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := sc.status
	st.Next = time.Time{}
	if sc.set.On {
		st.Next = sc.set.Next(sc.since.Add(sc.set.every()).In(sc.o.Location))
	}
	return st
}

// Run schedules turns until ctx ends (then it returns nil). One turn runs
// at a time; a turn that fails is logged and the schedule goes on.
func (sc *Scheduler) Run(ctx context.Context) error {
	for {
		sc.mu.Lock()
		on := sc.set.On
		var next time.Time
		if on {
			next = sc.set.Next(sc.since.Add(sc.set.every()).In(sc.o.Location))
		}
		sc.mu.Unlock()
		var fire <-chan time.Time
		if on {
			wait := next.Sub(sc.o.Clock.Now())
			if wait < 0 {
				wait = 0
			}
			fire = sc.o.Clock.After(wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-sc.wake:
			continue
		case <-fire:
		}
		sc.mu.Lock()
		// Settings may have changed while the timer ran: turn only if
		// the turn is still due.
		due := sc.set.On && !sc.o.Clock.Now().Before(sc.set.Next(sc.since.Add(sc.set.every()).In(sc.o.Location)))
		sc.mu.Unlock()
		if due {
			sc.turn(ctx)
		}
	}
}

func (sc *Scheduler) turn(ctx context.Context) {
	start := sc.o.Clock.Now()
	tctx, cancel := context.WithTimeout(ctx, sc.o.TurnTimeout)
	out, err := sc.o.Turn(tctx)
	cancel()
	if err != nil {
		out = OutcomeFailed
		sc.log.Warn("heartbeat turn failed", "error", err.Error())
	} else {
		sc.log.Info("heartbeat turn", "outcome", string(out))
	}
	sc.mu.Lock()
	sc.since = start
	sc.status.LastRun, sc.status.LastOutcome = start, out
	sc.mu.Unlock()
}
