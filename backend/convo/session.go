package convo

import (
	"fmt"
	"time"
)

// Session reset modes (SPEC §6 "Session lifecycle").
const (
	// ResetDaily resets at a fixed local time every day.
	ResetDaily = "daily"
	// ResetIdle resets after IdleMinutes without activity.
	ResetIdle = "idle"
	// ResetDailyIdle resets at whichever of the two comes first.
	ResetDailyIdle = "daily+idle"
)

// DefaultDailyAt is the local time of the daily reset.
const DefaultDailyAt = "04:00"

// ResetOptions configure a ResetPolicy.
type ResetOptions struct {
	// Mode is ResetDaily, ResetIdle or ResetDailyIdle. Default ResetDaily.
	Mode string
	// DailyAt is the daily reset's local wall-clock time, "HH:MM" (24 h).
	// Default DefaultDailyAt ("04:00").
	DailyAt string
	// IdleMinutes is N: idle modes reset a session after N minutes without
	// activity. Required (> 0) for ResetIdle and ResetDailyIdle.
	IdleMinutes int
	// Location is the time zone of DailyAt. Default time.Local.
	Location *time.Location
}

// ResetPolicy says when a session is due for a reset. It has no clock of
// its own: callers pass the times. Create it with NewResetPolicy; it is
// safe for concurrent use.
type ResetPolicy struct {
	daily        bool
	idle         time.Duration
	hour, minute int
	loc          *time.Location
}

// NewResetPolicy checks o and fills in defaults. Errors: ErrInvalid for an
// unknown Mode, a DailyAt that is not "HH:MM", or an idle mode without
// IdleMinutes > 0.
func NewResetPolicy(o ResetOptions) (*ResetPolicy, error) {
	if o.Mode == "" {
		o.Mode = ResetDaily
	}
	if o.DailyAt == "" {
		o.DailyAt = DefaultDailyAt
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	p := &ResetPolicy{loc: o.Location}
	switch o.Mode {
	case ResetDaily:
		p.daily = true
	case ResetIdle:
	case ResetDailyIdle:
		p.daily = true
	default:
		return nil, fmt.Errorf("new reset policy: %w: mode %q (want %s, %s or %s)", ErrInvalid, o.Mode, ResetDaily, ResetIdle, ResetDailyIdle)
	}
	if o.Mode != ResetDaily {
		if o.IdleMinutes <= 0 {
			return nil, fmt.Errorf("new reset policy: %w: mode %s needs IdleMinutes > 0", ErrInvalid, o.Mode)
		}
		p.idle = time.Duration(o.IdleMinutes) * time.Minute
	}
	at, err := time.Parse("15:04", o.DailyAt)
	if err != nil {
		return nil, fmt.Errorf("new reset policy: %w: DailyAt %q is not HH:MM: %v", ErrInvalid, o.DailyAt, err)
	}
	p.hour, p.minute = at.Hour(), at.Minute()
	return p, nil
}

// Due reports whether a session last active at lastActivity must be reset
// at now, and why: "daily" (a daily reset time passed since lastActivity),
// "idle" (now − lastActivity ≥ IdleMinutes) or "" (not due). Daily wins
// when both apply. A zero lastActivity (no activity yet) or a now before
// lastActivity (clock skew) is never due.
func (p *ResetPolicy) Due(lastActivity, now time.Time) (bool, string) {
	if lastActivity.IsZero() || now.Before(lastActivity) {
		return false, ""
	}
	if p.daily && !now.Before(p.NextDaily(lastActivity)) {
		return true, ResetDaily
	}
	if p.idle > 0 && now.Sub(lastActivity) >= p.idle {
		return true, ResetIdle
	}
	return false, ""
}

// NextDaily returns the first daily reset instant strictly after t, in the
// policy's location. Days are calendar days of that location, so a reset
// stays at its wall-clock time across DST changes (a 23- or 25-hour day in
// between). On a day where the reset time does not exist (a DST gap, e.g.
// 02:30 in New York on 2024-03-10) it is the end of the gap (03:00); where
// it exists twice (the hour repeated when clocks go back) it is the first.
// For a policy in idle mode only, it still computes the time.
func (p *ResetPolicy) NextDaily(t time.Time) time.Time {
	lt := t.In(p.loc)
	y, m, d := lt.Date()
	r := p.resetOn(y, m, d)
	if !r.After(t) {
		r = p.resetOn(y, m, d+1)
	}
	return r
}

// resetOn is the reset instant on the local calendar day y-m-d (d may
// overflow; time.Date normalises it).
func (p *ResetPolicy) resetOn(y int, m time.Month, d int) time.Time {
	r := time.Date(y, m, d, p.hour, p.minute, 0, 0, p.loc)
	if lr := r.In(p.loc); lr.Hour() != p.hour || lr.Minute() != p.minute {
		// A DST gap: time.Date answered in one of the two zones around it.
		start, end := r.ZoneBounds()
		if lr.Hour()*60+lr.Minute() < p.hour*60+p.minute {
			return end
		}
		return start
	}
	// A repeated hour: the same wall-clock time may also exist in the zone
	// before this one; take the earlier instant.
	if start, _ := r.ZoneBounds(); !start.IsZero() {
		_, cur := r.Zone()
		_, prev := start.Add(-time.Nanosecond).Zone()
		if c := r.Add(time.Duration(cur-prev) * time.Second); c.Before(r) && c.Before(start) {
			if lc := c.In(p.loc); lc.Hour() == p.hour && lc.Minute() == p.minute {
				return c
			}
		}
	}
	return r
}
