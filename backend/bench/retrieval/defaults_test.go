package retrieval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory"
)

// TestDefaults: every question is also searched with the product's
// defaults; absent questions come from the held-out documents of a
// one-partition set and from the other partition of a partitioned one; the
// dump holds one line per question searched.
func TestDefaults(t *testing.T) {
	var dump bytes.Buffer
	rep := run(t, Options{Set: "testdata/mini", Modes: []string{"hybrid"}, Dump: &dump})
	d := rep.Defaults
	if d == nil {
		t.Fatal("no defaults report")
	}
	a := d.All
	if d.MaxResults != memory.DefaultMaxResults || a.N != rep.Queries {
		t.Fatalf("maxResults %d, n %d (queries %d)", d.MaxResults, a.N, rep.Queries)
	}
	if !(a.Hit1 <= a.Hit5 && a.Hit5 <= a.HitK && a.NoFloorHit1 <= a.NoFloorHit5 && a.NoFloorHit5 <= a.NoFloorHitK) {
		t.Errorf("hit@k not monotone: %+v", a)
	}
	if a.Hit5 > a.NoFloorHit5 || a.HitK > a.NoFloorHitK {
		t.Errorf("a floor found more than no floor: %+v", a)
	}
	// Every question but "poolside" (no shared word, q6) and q9's English
	// "d1" judged 0 has its words in its document: found at the defaults.
	if a.HitK < 5.0/7 || a.NoFloorHitK != 1 || a.MeanResults <= 0 || a.MeanResults > float64(d.MaxResults) {
		t.Errorf("defaults on an easy set: %+v", a)
	}
	// q1 (the first question, every 10th held out) loses its only
	// document, the sourdough note; nothing else mentions sourdough.
	if d.Absent.N != 1 || d.Absent.Empty != 1 || d.Absent.MeanResults != 0 || !strings.Contains(d.AbsentSource, "deleted") {
		t.Errorf("absent %+v (%s)", d.Absent, d.AbsentSource)
	}
	if d.Absent.NoFloorTopP50 <= 0 {
		t.Errorf("absent question without a floor found nothing at all: %+v", d.Absent)
	}
	if d.HeldOut.N+d.AbsentHeldOut.N == 0 || d.HeldOut.N >= a.N {
		t.Errorf("held-out half: %d of %d questions", d.HeldOut.N, a.N)
	}
	var lines []dumpLine
	sc := bufio.NewScanner(&dump)
	for sc.Scan() {
		var l dumpLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("dump line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != a.N+d.Absent.N {
		t.Fatalf("%d dump lines, want %d", len(lines), a.N+d.Absent.N)
	}
	for _, l := range lines {
		if l.Set != "mini" || l.Length <= 0 || l.AnswerFloor <= 0 || l.Floor > l.AnswerFloor || len(l.Scores) != len(l.Rel) {
			t.Errorf("dump line %+v", l)
		}
		if l.Absent && (l.ID != "q1" || l.Results != 0 || slicesAny(l.Rel)) {
			t.Errorf("absent dump line %+v", l)
		}
	}

	// Two partitions: each is asked the other's questions.
	rep = run(t, Options{Set: "testdata/locomo-mini", Modes: []string{"hybrid"}})
	if d := rep.Defaults; d == nil || d.Absent.N != rep.Queries || !strings.Contains(d.AbsentSource, "next partition") {
		t.Errorf("locomo-mini absent: %+v, %d queries", rep.Defaults, rep.Queries)
	}
	if rep := run(t, Options{Set: "testdata/mini", Modes: []string{"keyword"}, SkipDefaults: true}); rep.Defaults != nil {
		t.Errorf("SkipDefaults: %+v", rep.Defaults)
	}
}

func slicesAny(b []bool) bool {
	for _, x := range b {
		if x {
			return true
		}
	}
	return false
}
