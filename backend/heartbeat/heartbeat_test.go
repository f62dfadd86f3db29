package heartbeat

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// wait returns the deadline of the scheduler's next After (bounded).
func wait(t *testing.T, c *ManualClock) time.Time {
	t.Helper()
	select {
	case at := <-c.Waits:
		return at
	case <-time.After(time.Minute):
		t.Fatal("the scheduler set no timer within a minute")
		return time.Time{}
	}
}

func at(day, h, m int) time.Time { return time.Date(2026, 12, day, h, m, 0, 0, time.UTC) }

func TestSchedulerActiveHoursAndOutcomes(t *testing.T) {
	clk := NewManualClock(at(3, 21, 50))
	turns := make(chan time.Time, 4)
	outcome := OutcomeSilent
	sc, err := New(Options{Clock: clk, Location: time.UTC, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Turn: func(ctx context.Context) (Outcome, error) {
			turns <- clk.Now()
			if outcome == OutcomeFailed {
				return "", errors.New("model down")
			}
			return outcome, nil
		}}, Settings{On: true, Every: 30 * time.Minute, Start: 8 * 60, End: 22 * 60})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// Due at 22:20, outside 08:00–22:00: the first turn is at 08:00 the next day.
	if got := wait(t, clk); !got.Equal(at(4, 8, 0)) {
		t.Fatalf("first turn set for %v, want %v", got, at(4, 8, 0))
	}
	if st := sc.Status(); !st.Next.Equal(at(4, 8, 0)) || !st.LastRun.IsZero() {
		t.Fatalf("status before any turn: %+v", st)
	}
	clk.Set(at(4, 7, 59)) // not yet
	select {
	case tt := <-turns:
		t.Fatalf("a turn ran at %v, before its time", tt)
	default:
	}
	clk.Set(at(4, 8, 0))
	if tt := <-turns; !tt.Equal(at(4, 8, 0)) {
		t.Fatalf("turn at %v", tt)
	}
	if got := wait(t, clk); !got.Equal(at(4, 8, 30)) {
		t.Fatalf("second turn set for %v, want 08:30", got)
	}
	if st := sc.Status(); st.LastOutcome != OutcomeSilent || !st.LastRun.Equal(at(4, 8, 0)) {
		t.Fatalf("status after a silent turn: %+v", st)
	}

	// Turned off: no timer, no turn; turned on again: Every after now.
	if err := sc.Update(Settings{On: false, Every: 30 * time.Minute, Start: 8 * 60, End: 22 * 60}); err != nil {
		t.Fatal(err)
	}
	clk.Set(at(4, 9, 0))
	select {
	case tt := <-turns:
		t.Fatalf("a turn ran at %v while off", tt)
	case w := <-clk.Waits:
		t.Fatalf("a timer for %v while off", w)
	case <-time.After(50 * time.Millisecond): // nothing may come: a bounded look, not a timing assertion
	}
	if st := sc.Status(); !st.Next.IsZero() {
		t.Fatalf("status while off: next %v", st.Next)
	}
	outcome = OutcomeFailed
	if err := sc.Update(Settings{On: true, Every: 45 * time.Minute}); err != nil { // all day
		t.Fatal(err)
	}
	if got := wait(t, clk); !got.Equal(at(4, 9, 45)) {
		t.Fatalf("after turning on at 09:00 every 45m: timer for %v", got)
	}
	clk.Set(at(4, 9, 45))
	<-turns
	wait(t, clk)
	if st := sc.Status(); st.LastOutcome != OutcomeFailed {
		t.Fatalf("status after a failed turn: %+v", st)
	}
}

func TestSettingsWindow(t *testing.T) {
	night := Settings{On: true, Start: 22 * 60, End: 6 * 60} // across midnight
	for _, c := range []struct{ due, want time.Time }{
		{at(3, 23, 0), at(3, 23, 0)},
		{at(3, 5, 59), at(3, 5, 59)},
		{at(3, 6, 0), at(3, 22, 0)},
		{at(3, 12, 0), at(3, 22, 0)},
	} {
		if got := night.Next(c.due); !got.Equal(c.want) {
			t.Errorf("Next(%v) = %v, want %v", c.due, got, c.want)
		}
	}
	if all := (Settings{Start: 0, End: 1440}); !all.Next(at(3, 3, 3)).Equal(at(3, 3, 3)) {
		t.Error("00:00–24:00 is not all day")
	}
	for in, want := range map[string]int{"08:00": 480, "24:00": 1440, "00:00": 0, "7:05": 425} {
		if got, err := ParseClock(in); err != nil || got != want {
			t.Errorf("ParseClock(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"8", "25:00", "24:01", "08:60", "08:5", "x:00"} {
		if _, err := ParseClock(bad); !errors.Is(err, ErrBadSettings) {
			t.Errorf("ParseClock(%q) = %v, want ErrBadSettings", bad, err)
		}
	}
	if _, err := New(Options{Turn: func(context.Context) (Outcome, error) { return "", nil }}, Settings{On: true, Every: time.Second}); !errors.Is(err, ErrBadSettings) {
		t.Errorf("every 1s accepted: %v", err)
	}
}
