package convo

import (
	"errors"
	"testing"
	"time"
	_ "time/tzdata" // the DST cases must not depend on the machine's zoneinfo
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestNewResetPolicyErrors(t *testing.T) {
	for _, o := range []ResetOptions{
		{Mode: "weekly"}, {Mode: ResetIdle}, {Mode: ResetDailyIdle, IdleMinutes: -1},
		{DailyAt: "4am"}, {DailyAt: "25:00"}, {DailyAt: "04:60"},
	} {
		if _, err := NewResetPolicy(o); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewResetPolicy(%+v) err = %v", o, err)
		}
	}
}

func TestResetDue(t *testing.T) {
	sh := zone(t, "Asia/Shanghai")
	ny := zone(t, "America/New_York")
	at := func(loc *time.Location, s string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	daily := ResetOptions{Location: sh}
	tests := []struct {
		name      string
		o         ResetOptions
		last, now time.Time
		due       bool
		reason    string
	}{
		{"daily: before 04:00 the same night", daily, at(sh, "2026-01-26 23:00"), at(sh, "2026-01-27 03:59"), false, ""},
		{"daily: at 04:00", daily, at(sh, "2026-01-26 23:00"), at(sh, "2026-01-27 04:00"), true, ResetDaily},
		{"daily: active after 04:00, not due until the next day", daily, at(sh, "2026-01-27 04:01"), at(sh, "2026-01-28 03:59"), false, ""},
		{"daily: days later", daily, at(sh, "2026-01-20 12:00"), at(sh, "2026-01-27 01:00"), true, ResetDaily},
		{"daily: the zone matters, not UTC", daily, at(time.UTC, "2026-01-26 19:00"), at(time.UTC, "2026-01-26 20:00"), true, ResetDaily}, // 03:00 → 04:00 in Shanghai
		{"daily: idle time alone does not reset", daily, at(sh, "2026-01-27 05:00"), at(sh, "2026-01-27 23:00"), false, ""},
		{"daily at a custom time", ResetOptions{Location: sh, DailyAt: "00:30"}, at(sh, "2026-01-26 23:00"), at(sh, "2026-01-27 00:30"), true, ResetDaily},
		{"idle: not yet", ResetOptions{Mode: ResetIdle, IdleMinutes: 30, Location: sh}, at(sh, "2026-01-27 10:00"), at(sh, "2026-01-27 10:29"), false, ""},
		{"idle: N minutes", ResetOptions{Mode: ResetIdle, IdleMinutes: 30, Location: sh}, at(sh, "2026-01-27 10:00"), at(sh, "2026-01-27 10:30"), true, ResetIdle},
		{"idle only ignores 04:00", ResetOptions{Mode: ResetIdle, IdleMinutes: 30, Location: sh}, at(sh, "2026-01-27 03:50"), at(sh, "2026-01-27 04:10"), false, ""},
		{"both: idle first", ResetOptions{Mode: ResetDailyIdle, IdleMinutes: 60, Location: sh}, at(sh, "2026-01-27 10:00"), at(sh, "2026-01-27 11:00"), true, ResetIdle},
		{"both: daily first", ResetOptions{Mode: ResetDailyIdle, IdleMinutes: 120, Location: sh}, at(sh, "2026-01-27 03:30"), at(sh, "2026-01-27 04:00"), true, ResetDaily},
		{"no activity yet", daily, time.Time{}, at(sh, "2026-01-27 05:00"), false, ""},
		{"clock skew", ResetOptions{Mode: ResetDailyIdle, IdleMinutes: 1, Location: sh}, at(sh, "2026-01-27 05:00"), at(sh, "2026-01-27 04:00"), false, ""},
		// DST: New York springs forward on 2024-03-10 (02:00 → 03:00, a
		// 23-hour day) and falls back on 2024-11-03 (02:00 → 01:00, 25 hours).
		// The reset stays at 04:00 local; "24 hours after the last reset"
		// would be an hour off on both days.
		{"DST spring: 03:59 EDT is not yet 04:00", ResetOptions{Location: ny}, at(ny, "2024-03-09 23:00"), at(ny, "2024-03-10 03:59"), false, ""},
		{"DST spring: 04:00 EDT", ResetOptions{Location: ny}, at(ny, "2024-03-09 23:00"), at(ny, "2024-03-10 04:00"), true, ResetDaily},
		{"DST fall: 03:30 EST is not yet 04:00", ResetOptions{Location: ny}, at(ny, "2024-11-02 23:00"), at(ny, "2024-11-03 03:30"), false, ""},
		{"DST fall: 04:00 EST", ResetOptions{Location: ny}, at(ny, "2024-11-02 23:00"), at(ny, "2024-11-03 04:00"), true, ResetDaily},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewResetPolicy(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			due, why := p.Due(tc.last, tc.now)
			if due != tc.due || why != tc.reason {
				t.Fatalf("Due(%v, %v) = %v %q, want %v %q", tc.last, tc.now, due, why, tc.due, tc.reason)
			}
		})
	}
}

func TestNextDailyDST(t *testing.T) {
	ny := zone(t, "America/New_York")
	tests := []struct {
		name, at string
		after    time.Time
		want     time.Time // as a UTC instant
	}{
		{"04:00 on the 23-hour day", "04:00", time.Date(2024, 3, 9, 12, 0, 0, 0, ny), time.Date(2024, 3, 10, 8, 0, 0, 0, time.UTC)},
		{"04:00 on the 25-hour day", "04:00", time.Date(2024, 11, 2, 12, 0, 0, 0, ny), time.Date(2024, 11, 3, 9, 0, 0, 0, time.UTC)},
		{"a time in the gap fires at its end (03:00 EDT)", "02:30", time.Date(2024, 3, 9, 12, 0, 0, 0, ny), time.Date(2024, 3, 10, 7, 0, 0, 0, time.UTC)},
		{"the day after the gap is normal again", "02:30", time.Date(2024, 3, 10, 12, 0, 0, 0, ny), time.Date(2024, 3, 11, 6, 30, 0, 0, time.UTC)},
		{"a repeated time fires at its first occurrence (EDT)", "01:30", time.Date(2024, 11, 2, 12, 0, 0, 0, ny), time.Date(2024, 11, 3, 5, 30, 0, 0, time.UTC)},
		{"strictly after: at the reset instant, the next day's", "04:00", time.Date(2024, 6, 1, 4, 0, 0, 0, ny), time.Date(2024, 6, 2, 8, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewResetPolicy(ResetOptions{DailyAt: tc.at, Location: ny})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.NextDaily(tc.after); !got.Equal(tc.want) {
				t.Fatalf("NextDaily(%v) = %v (%v), want %v", tc.after, got, got.UTC(), tc.want)
			}
		})
	}
}
