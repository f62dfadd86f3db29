package memory

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/index"
)

// Dates in questions (issue 15, item 5).
//
// A question that names a day — "what happened on 2025-11-03", "2025-11-03
// 下午讨论了什么", "11月3日", "Nov 3", "yesterday", "上周三" — is asking
// about that day's daily log (roles/<r>/YYYY-MM-DD.md, or OpenClaw's
// memory/YYYY-MM-DD.md, and the day's other dated notes
// memory/YYYY-MM-DD-<slug>.md). Words do not find it: a daily log rarely
// writes its own date, and "yesterday" is in no note. So Search reads the
// days the question names (namedDays), finds the readable dated logs of
// those days, picks the best chunk of each for the rest of the question
// (the question without the date words: "下午讨论了什么" picks the
// afternoon), and ranks these chunks first, best first (the day's plain log
// and its slug notes by their score), above the other
// results and whatever their score (the floor does not drop them: the
// question named their day). Relative days count from today in the
// person's time zone (Ranking.Now, Ranking.Location). Ranking.IgnoreDates
// turns this off (to measure it).

// civilDay is a calendar day.
type civilDay struct {
	y int
	m time.Month
	d int
}

func (c civilDay) String() string { return fmt.Sprintf("%04d-%02d-%02d", c.y, int(c.m), c.d) }

func dayOf(t time.Time) civilDay { return civilDay{t.Year(), t.Month(), t.Day()} }

// addDays returns the day n days after c (n may be negative).
func (c civilDay) addDays(n int) civilDay {
	return dayOf(time.Date(c.y, c.m, c.d+n, 12, 0, 0, 0, time.UTC))
}

func (c civilDay) weekday() time.Weekday {
	return time.Date(c.y, c.m, c.d, 12, 0, 0, 0, time.UTC).Weekday()
}

// validDay returns the day y-m-d and whether it exists (no 2025-02-30).
func validDay(y, m, d int) (civilDay, bool) {
	if m < 1 || m > 12 || d < 1 || d > 31 {
		return civilDay{}, false
	}
	c := civilDay{y, time.Month(m), d}
	return c, c.addDays(0) == c
}

// lastOccurrence returns the latest day with month m and day d that is not
// after today (a question names a past day: "11月3日" asked in February is
// last November's).
func lastOccurrence(today civilDay, m, d int) (civilDay, bool) {
	for y := today.y; y >= today.y-4; y-- { // 02-29 recurs within four years
		if c, ok := validDay(y, m, d); ok && !after(c, today) {
			return c, true
		}
	}
	return civilDay{}, false
}

func after(a, b civilDay) bool {
	return a.y > b.y || a.y == b.y && (a.m > b.m || a.m == b.m && a.d > b.d)
}

var months = map[string]int{
	"jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4,
	"may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8,
	"sep": 9, "sept": 9, "september": 9, "oct": 10, "october": 10, "nov": 11, "november": 11,
	"dec": 12, "december": 12,
}

var weekdaysEN = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

// weekdaysZH maps the character after 周/星期/礼拜 to its weekday.
var weekdaysZH = map[string]time.Weekday{
	"一": time.Monday, "二": time.Tuesday, "三": time.Wednesday, "四": time.Thursday,
	"五": time.Friday, "六": time.Saturday, "日": time.Sunday, "天": time.Sunday,
}

const monthNames = `jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?`

// The day patterns, in the order they are tried; each match is removed
// from the text before the next pattern runs, so "2025-11-03" is not read
// again as "11-03".
var (
	// 2025-11-03, 2025/11/3, 2025.11.03, 2025年11月3日.
	reISO = regexp.MustCompile(`(?:^|[^\d])((?:19|20)\d{2})\s*(?:[-/.]|年)\s*(\d{1,2})\s*(?:[-/.]|月)\s*(\d{1,2})(?:\s*[日号號])?`)
	// 11月3日, 11月3号.
	reZhMD = regexp.MustCompile(`(\d{1,2})\s*月\s*(\d{1,2})\s*[日号號]`)
	// Nov 3, November 3rd, Nov. 3, 2025.
	reEnMD = regexp.MustCompile(`(?i)\b(` + monthNames + `)\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+((?:19|20)\d{2})\b)?`)
	// 3 Nov, 3rd of November 2025.
	reEnDM = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(` + monthNames + `)\b\.?(?:,?\s+((?:19|20)\d{2})\b)?`)
	// today, yesterday, the day before yesterday, 3 days ago.
	reEnRel = regexp.MustCompile(`(?i)\b(?:(the day before yesterday)|(yesterday)|(today)|(\d{1,2}) days? ago)\b`)
	// last Wednesday, on Wednesday, this Wednesday.
	reEnWeekday = regexp.MustCompile(`(?i)\b(last|this|on)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b`)
	// 今天, 昨天, 前天, 大前天, 3天前.
	reZhRel = regexp.MustCompile(`(大前天)|(前天)|(昨天|昨日)|(今天|今日)|(\d{1,2})\s*天前`)
	// 上周三, 上週三, 上星期三, 上礼拜三, 本周三, 这周三, 周三, 星期三.
	reZhWeekday = regexp.MustCompile(`(上上|上|本|这|這)?\s*(?:周|週|星期|礼拜|禮拜)([一二三四五六日天])`)
)

// namedDays returns the days q names, counted from now (the person's
// current time in their time zone), in order of appearance without
// repeats, and q without the words that named them.
func namedDays(q string, now time.Time) ([]civilDay, string) {
	today := dayOf(now)
	var days []civilDay
	add := func(c civilDay) {
		if !slices.Contains(days, c) {
			days = append(days, c)
		}
	}
	rest := q
	// cut runs re over rest, calls f on each match's submatches, and blanks
	// the matches that named a day.
	cut := func(re *regexp.Regexp, f func(m []string) (civilDay, bool)) {
		rest = re.ReplaceAllStringFunc(rest, func(s string) string {
			c, ok := f(re.FindStringSubmatch(s))
			if !ok {
				return s
			}
			add(c)
			// Keep a leading non-digit that the pattern consumed as a
			// boundary (reISO).
			if r := []rune(s); len(r) > 0 && re == reISO && !('0' <= r[0] && r[0] <= '9') {
				return string(r[0]) + " "
			}
			return " "
		})
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	cut(reISO, func(m []string) (civilDay, bool) { return validDay(atoi(m[1]), atoi(m[2]), atoi(m[3])) })
	cut(reZhMD, func(m []string) (civilDay, bool) { return lastOccurrence(today, atoi(m[1]), atoi(m[2])) })
	monthDay := func(month, day, year string) (civilDay, bool) {
		mo := months[strings.ToLower(month)]
		if year != "" {
			return validDay(atoi(year), mo, atoi(day))
		}
		return lastOccurrence(today, mo, atoi(day))
	}
	cut(reEnMD, func(m []string) (civilDay, bool) { return monthDay(m[1], m[2], m[3]) })
	cut(reEnDM, func(m []string) (civilDay, bool) { return monthDay(m[2], m[1], m[3]) })
	cut(reEnRel, func(m []string) (civilDay, bool) {
		switch {
		case m[1] != "":
			return today.addDays(-2), true
		case m[2] != "":
			return today.addDays(-1), true
		case m[3] != "":
			return today, true
		}
		return today.addDays(-atoi(m[4])), true
	})
	cut(reEnWeekday, func(m []string) (civilDay, bool) {
		wd := weekdaysEN[strings.ToLower(m[2])]
		if strings.EqualFold(m[1], "this") {
			return weekOf(today, 0, wd), true
		}
		return lastWeekday(today, wd), true // "last Wednesday", "on Wednesday": the latest before today
	})
	cut(reZhRel, func(m []string) (civilDay, bool) {
		switch {
		case m[1] != "":
			return today.addDays(-3), true
		case m[2] != "":
			return today.addDays(-2), true
		case m[3] != "":
			return today.addDays(-1), true
		case m[4] != "":
			return today, true
		}
		return today.addDays(-atoi(m[5])), true
	})
	cut(reZhWeekday, func(m []string) (civilDay, bool) {
		wd := weekdaysZH[m[2]]
		switch m[1] {
		case "上上":
			return weekOf(today, -2, wd), true
		case "上":
			return weekOf(today, -1, wd), true
		case "本", "这", "這":
			return weekOf(today, 0, wd), true
		}
		return lastWeekday(today.addDays(1), wd), true // bare 周三: the latest, today included
	})
	return days, strings.Join(strings.Fields(rest), " ")
}

// weekOf returns weekday wd of the week `weeks` weeks from today's (weeks
// start on Monday, as Chinese calendars count them: 上周三 asked on a
// Monday is nine days back).
func weekOf(today civilDay, weeks int, wd time.Weekday) civilDay {
	monday := today.addDays(-((int(today.weekday()) + 6) % 7))
	return monday.addDays(7*weeks + (int(wd)+6)%7)
}

// lastWeekday returns the latest day before today that falls on wd.
func lastWeekday(today civilDay, wd time.Weekday) civilDay {
	back := (int(today.weekday()) - int(wd) + 7) % 7
	if back == 0 {
		back = 7
	}
	return today.addDays(-back)
}

// isDayLog reports whether p is a dated daily log of one of days
// (logDate: a file under memory/ whose name starts with YYYY-MM-DD).
func isDayLog(p string, days []civilDay) bool {
	d, ok := logDate(p)
	return ok && slices.Contains(days, dayOf(d))
}

// dayLogOrder sorts the day logs of one search, for when there are too
// many: the plain daily log (YYYY-MM-DD.md) before the day's other notes,
// then by path.
func dayLogOrder(a, b string) int {
	pa, pb := len(path.Base(a)) == len("2006-01-02.md"), len(path.Base(b)) == len("2006-01-02.md")
	if pa != pb {
		if pa {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// preferNamedDays puts the best chunk of each readable daily log of the
// days q names first in hits (see the comment at the top of this file) and
// returns at most n hits. st is the store searched, qv the query's vector
// (nil for a keyword-only search), wv the vector weight. A question that
// names no day, or whose days have no readable log, gets hits back as they
// were.
func (m *Manager) preferNamedDays(ctx context.Context, st *index.Store, o SearchOptions, q string, qv []float32, wv float64, hits []index.Hit, n int) ([]index.Hit, error) {
	rk := &m.opts.Ranking
	if rk.IgnoreDates {
		return hits, nil
	}
	days, rest := namedDays(q, rk.Now().In(rk.location()))
	if len(days) == 0 {
		return hits, nil
	}
	files, err := st.Files(ctx)
	if err != nil {
		return nil, fmt.Errorf("day logs: %w", err)
	}
	var logs []string
	for _, f := range files {
		if isDayLog(f.Path, days) && (o.Readable == nil || o.Readable(f.Path)) {
			logs = append(logs, f.Path)
		}
	}
	if len(logs) == 0 {
		return hits, nil
	}
	// All the days' logs compete, whatever n, so that the first results
	// for maxResults 1 are the first for any larger maxResults; past
	// MaxMaxResults logs (days of hundreds of notes) the plain logs win.
	slices.SortFunc(logs, dayLogOrder)
	if len(logs) > MaxMaxResults {
		logs = logs[:MaxMaxResults]
	}
	text := rest
	if text == "" || o.Mode == ModeVector {
		text = q // nothing but the date (or no keyword leg): any chunk of the log will do
	}
	if o.Mode == ModeVector {
		text = ""
	}
	inLogs := func(p string) bool { return slices.Contains(logs, p) }
	found, err := st.Search(ctx, index.Query{Text: text, Vector: qv, MaxResults: MaxMaxResults, MinScore: -1, VectorWeight: wv, Scope: inLogs})
	if err != nil {
		return nil, fmt.Errorf("day logs: %w", err)
	}
	// The best chunk of each log (found is best first); a log none of whose
	// chunks scored (a keyword search for words it lacks) is left out.
	var first []index.Hit
	seen := map[string]bool{}
	for _, h := range found {
		if !seen[h.Path] {
			seen[h.Path] = true
			first = append(first, h)
		}
	}
	out := append([]index.Hit(nil), first...)
	for _, h := range hits {
		if !slices.ContainsFunc(first, func(f index.Hit) bool { return f.ChunkID == h.ChunkID }) {
			out = append(out, h)
		}
	}
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}
