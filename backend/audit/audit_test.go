package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is an injectable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func newLog(t *testing.T, now func() time.Time) (*Log, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := New(Options{Dir: dir, Now: now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return l, dir
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestRecordLineFormat(t *testing.T) {
	ts := time.Date(2026, 2, 11, 22, 30, 22, 123456789, time.FixedZone("CST", 8*3600))
	l, dir := newLog(t, func() time.Time { return ts })
	if err := l.Record(Entry{Operation: "read", Role: "code-expert", Target: "roles/writer/style-guide.md",
		Result: Denied, Reason: "ACL rule mismatch", Session: "agent-main-main-20260211", IP: "192.168.1.42"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(Entry{Operation: "write", Role: "写作", Target: "roles/写作/草稿.md", Result: Allowed,
		Reason: "rule \"roles/写作/*\" grants write", Timestamp: ts.Add(time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	// 22:30 at UTC+8 is 14:30 UTC on the same day.
	file := filepath.Join(dir, "2026-02-11.jsonl")
	lines := readLines(t, file)
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	const want0 = `{"timestamp":"2026-02-11T14:30:22.123Z","operation":"read","role":"code-expert","target":"roles/writer/style-guide.md","result":"denied","reason":"ACL rule mismatch","session":"agent-main-main-20260211","ip":"192.168.1.42"}`
	if lines[0] != want0 {
		t.Fatalf("line 0:\n got %s\nwant %s", lines[0], want0)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["ip"]; ok {
		t.Fatalf("empty ip written: %s", lines[1])
	}
	if m["timestamp"] != "2026-02-11T14:30:22.124Z" || m["role"] != "写作" || m["session"] != "" {
		t.Fatalf("line 1: %s", lines[1])
	}
	if runtime.GOOS != "windows" {
		for p, want := range map[string]os.FileMode{dir: 0o700, file: 0o600} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != want {
				t.Errorf("%s mode %o, want %o", p, got, want)
			}
		}
	}
	got, err := l.Tail(10, Filter{})
	if err != nil || len(got) != 2 {
		t.Fatalf("Tail: %v %v", got, err)
	}
	if got[0].Role != "写作" || got[1].IP != "192.168.1.42" || !got[1].Timestamp.Equal(ts.Truncate(time.Millisecond)) {
		t.Fatalf("Tail round trip: %+v", got)
	}
}

func TestRecordRefusesAndReportsErrors(t *testing.T) {
	l, dir := newLog(t, time.Now)
	for _, e := range []Entry{
		{Result: Allowed},
		{Operation: "read", Result: "maybe"},
		{Operation: "read"},
	} {
		if err := l.Record(e); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("Record(%+v) = %v, want ErrInvalidEntry", e, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an invalid entry created the folder: %v", err)
	}
	// A write that cannot happen is an error, never a silent drop.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad, err := New(Options{Dir: filepath.Join(blocker, "audit")})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Record(Entry{Operation: "read", Result: Denied}); err == nil {
		t.Fatal("Record under a file succeeded")
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without Dir succeeded")
	}
}

func TestRecordCapsFields(t *testing.T) {
	l, dir := newLog(t, time.Now)
	long := strings.Repeat("路", 2000) // 6000 bytes
	if err := l.Record(Entry{Operation: "read", Result: Denied, Target: long}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Tail(1, Filter{})
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	tg := got[0].Target
	if len(tg) > MaxFieldBytes || !strings.HasSuffix(tg, "…[truncated]") || !strings.HasPrefix(tg, "路路") {
		t.Fatalf("target not capped: %d bytes, ends %q", len(tg), tg[len(tg)-20:])
	}
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Fatalf("files: %v", files)
	}
}

func TestRecordConcurrent(t *testing.T) {
	l, dir := newLog(t, time.Now)
	const goroutines, each = 24, 200
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				err := l.Record(Entry{Operation: "read", Role: fmt.Sprintf("role-%d", g), Result: Allowed,
					Target: fmt.Sprintf("roles/role-%d/%d.md", g, i), Reason: strings.Repeat("r", 64+i*10), Session: "s"})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files { // a run across midnight UTC writes two day files
		for _, line := range readLines(t, filepath.Join(dir, f.Name())) {
			var e Entry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("invalid line %q: %v", line, err)
			}
			if seen[e.Target] {
				t.Fatalf("duplicate line for %s", e.Target)
			}
			seen[e.Target] = true
		}
	}
	if len(seen) != goroutines*each {
		t.Fatalf("%d entries on disk, want %d", len(seen), goroutines*each)
	}
	got, err := l.Tail(MaxTail, Filter{Role: "role-7"})
	if err != nil || len(got) != each {
		t.Fatalf("Tail for one role: %d entries, %v", len(got), err)
	}
}

func TestDayRotationAndTail(t *testing.T) {
	c := &clock{}
	l, dir := newLog(t, c.now)
	day := func(d, h int) time.Time { return time.Date(2026, 3, d, h, 0, 0, 0, time.UTC) }
	// Three days, four entries each, recorded in time order.
	for d := 1; d <= 3; d++ {
		for h := range 4 {
			c.set(day(d, h*6))
			res := Allowed
			if h%2 == 1 {
				res = Denied
			}
			if err := l.Record(Entry{Operation: "read", Role: fmt.Sprintf("r%d", h), Target: fmt.Sprintf("d%d-h%d", d, h*6), Result: res}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The last second of a UTC day and the first of the next.
	c.set(time.Date(2026, 3, 3, 23, 59, 59, 999e6, time.UTC))
	if err := l.Record(Entry{Operation: "write", Target: "late", Result: Allowed}); err != nil {
		t.Fatal(err)
	}
	c.set(time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC))
	if err := l.Record(Entry{Operation: "write", Target: "early", Result: Allowed}); err != nil {
		t.Fatal(err)
	}
	var names []string
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		names = append(names, f.Name())
	}
	if strings.Join(names, " ") != "2026-03-01.jsonl 2026-03-02.jsonl 2026-03-03.jsonl 2026-03-04.jsonl" {
		t.Fatalf("day files: %v", names)
	}
	if n := len(readLines(t, filepath.Join(dir, "2026-03-03.jsonl"))); n != 5 {
		t.Fatalf("2026-03-03 has %d lines, want 5", n)
	}
	// Unrelated files in the folder are ignored.
	for _, junk := range []string{"notes.txt", "2026-13-01.jsonl", "latest.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, junk), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	targets := func(es []Entry) string {
		var s []string
		for _, e := range es {
			s = append(s, e.Target)
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		name  string
		n     int
		f     Filter
		want  string
		files int
	}{
		{"newest first across days", 6, Filter{}, "early,late,d3-h18,d3-h12,d3-h6,d3-h0", 2},
		{"stops at n within the first day", 1, Filter{}, "early", 1},
		{"denied only", 4, Filter{Result: Denied}, "d3-h18,d3-h6,d2-h18,d2-h6", 3},
		{"by role across all days", 10, Filter{Role: "r2"}, "d3-h12,d2-h12,d1-h12", 4},
		{"operation", 10, Filter{Operation: "write"}, "early,late", 4},
		{"target prefix", 10, Filter{TargetPrefix: "d1-"}, "d1-h18,d1-h12,d1-h6,d1-h0", 4},
		{"since skips older days", 100, Filter{Since: day(2, 12)}, "early,late,d3-h18,d3-h12,d3-h6,d3-h0,d2-h18,d2-h12", 3},
		{"until skips newer days", 2, Filter{Until: day(2, 7)}, "d2-h6,d2-h0", 1},
		{"since and until", 100, Filter{Since: day(1, 18), Until: day(2, 0)}, "d2-h0,d1-h18", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := l.TailReport(c.n, c.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := targets(rep.Entries); got != c.want {
				t.Fatalf("got %s\nwant %s", got, c.want)
			}
			if rep.Files != c.files || rep.Corrupt != 0 {
				t.Fatalf("files %d corrupt %d, want files %d corrupt 0", rep.Files, rep.Corrupt, c.files)
			}
		})
	}
	if got, _ := l.Tail(0, Filter{}); len(got) != 14 {
		t.Fatalf("Tail(0) returned %d, want all 14 (default %d)", len(got), DefaultTail)
	}
}

func TestTailSkipsCorruptLines(t *testing.T) {
	c := &clock{}
	l, dir := newLog(t, c.now)
	c.set(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	rec := func(target string) {
		t.Helper()
		if err := l.Record(Entry{Operation: "read", Target: target, Result: Allowed}); err != nil {
			t.Fatal(err)
		}
	}
	appendRaw := func(s string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, "2026-05-01.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	rec("a")
	appendRaw("not json at all\n")
	appendRaw("\n\n")
	rec("b")
	appendRaw(`{"timestamp":"2026-05-01T10:00:00.000Z","operation":"read","result":"perhaps"}` + "\n") // bad result
	appendRaw(`{"timestamp":"yesterday","operation":"read","result":"allowed"}` + "\n")                // bad time
	appendRaw(`{"operation":"read","result":"allowed","target":"x"` + "\n")                            // torn
	appendRaw(`{"timestamp":"` + strings.Repeat("x", 1<<20+10) + "\"}\n")                              // oversized
	rec("c")
	appendRaw(`{"timestamp":"2026-05-01T10:00:00.000Z","operation":"re`) // torn last line, no newline
	rep, err := l.TailReport(100, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rep.Entries {
		got = append(got, e.Target)
	}
	if strings.Join(got, ",") != "c,b,a" || rep.Corrupt != 6 {
		t.Fatalf("entries %v corrupt %d; want c,b,a and 6 corrupt", got, rep.Corrupt)
	}
	// A Record after a torn last line starts a line of its own: the torn
	// text stays one corrupt line and the new entry is not swallowed.
	rec("d")
	rep, err = l.TailReport(100, Filter{})
	if err != nil || len(rep.Entries) != 4 || rep.Entries[0].Target != "d" || rep.Corrupt != 6 {
		t.Fatalf("after a record behind a torn line: %d entries, %d corrupt, %v", len(rep.Entries), rep.Corrupt, err)
	}
}

func TestTailAcrossReadBlocks(t *testing.T) {
	c := &clock{}
	l, dir := newLog(t, c.now)
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	const n = 3000 // ~200 bytes a line: several 64 KiB blocks
	for i := range n {
		c.set(base.Add(time.Duration(i) * time.Second))
		if err := l.Record(Entry{Operation: "read", Target: fmt.Sprintf("t%05d", i), Result: Allowed,
			Reason: strings.Repeat("z", i%97)}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "2026-06-01.jsonl"))
	if err != nil || st.Size() < 3*readBlock {
		t.Fatalf("file too small to cross blocks: %v %v", st, err)
	}
	got, err := l.Tail(MaxTail, Filter{})
	if err != nil || len(got) != n {
		t.Fatalf("Tail: %d entries, %v", len(got), err)
	}
	for i, e := range got {
		if want := fmt.Sprintf("t%05d", n-1-i); e.Target != want || len(e.Reason) != (n-1-i)%97 {
			t.Fatalf("entry %d = %s (reason %d bytes), want %s", i, e.Target, len(e.Reason), want)
		}
	}
}

func TestTailEmpty(t *testing.T) {
	l, _ := newLog(t, time.Now)
	got, err := l.Tail(10, Filter{})
	if err != nil || len(got) != 0 {
		t.Fatalf("Tail of a missing folder: %v %v", got, err)
	}
}

// TestTailHidesRoutine: a viewer's default hides the routine entries (the
// UI's own listings, the person's reads) behind a flood of which the
// decisions that matter would vanish from the last n; every entry stays in
// the log and is listed without the filter.
func TestTailHidesRoutine(t *testing.T) {
	c := &clock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	l, _ := newLog(t, c.now)
	rec := func(e Entry) {
		t.Helper()
		c.set(c.now().Add(time.Second))
		if err := l.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	matter := []Entry{
		{Operation: "get", Role: "writer", Target: "roles/code-expert/secret.md", Result: Denied},
		{Operation: "get", Role: "writer", Target: "global/plan.md", Result: Allowed},
		{Operation: "files", Role: "authenticated", Target: "memory/", Result: Denied},
		{Operation: "write", Role: "admin", Target: "global/plan.md", Result: Allowed},
		{Operation: "search", Role: "code-expert", Target: "ferry", Result: Allowed},
	}
	for _, e := range matter {
		rec(e)
		for range 30 { // the UI's refreshes between them
			rec(Entry{Operation: "files", Role: "admin", Target: "memory/", Result: Allowed})
			rec(Entry{Operation: "conflicts", Role: "admin", Target: "conflicts", Result: Allowed})
			rec(Entry{Operation: "get", Role: "admin", Target: "global/plan.md", Result: Allowed})
			rec(Entry{Operation: "search", Role: "admin", Target: "plan", Result: Allowed})
			rec(Entry{Operation: "sessions.list", Role: "admin", Target: "sessions", Result: Allowed})
			rec(Entry{Operation: "collab.list", Role: "writer", Target: "collab", Result: Allowed})
		}
	}
	got, err := l.Tail(10, Filter{HideRoutine: true})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, e := range got {
		targets = append(targets, e.Operation+" "+e.Role+" "+e.Target+" "+e.Result)
	}
	want := []string{"search code-expert ferry allowed", "write admin global/plan.md allowed", "files authenticated memory/ denied",
		"get writer global/plan.md allowed", "get writer roles/code-expert/secret.md denied"}
	if strings.Join(targets, "|") != strings.Join(want, "|") {
		t.Fatalf("routine hidden: %q, want %q", targets, want)
	}
	all, err := l.Tail(MaxTail, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(matter)*(1+6*30) {
		t.Fatalf("the log holds %d entries, want every decision (%d)", len(all), len(matter)*(1+6*30))
	}
	if !Routine(all[0]) {
		t.Fatalf("newest entry %+v should be routine", all[0])
	}
}
