package memory

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
)

// longDecimal matches a JSON score with more than ScoreDecimals decimals.
var longDecimal = regexp.MustCompile(`"score":-?\d+\.\d{5,}`)

// TestSearchScoresRounded: every score a search returns, in every mode and
// for a multi-part question, is rounded to ScoreDecimals decimals, so the
// JSON sent by the gateway, the CLI and the tools reads "0.2712", not
// "0.27118005300000003" (issue 25).
func TestSearchScoresRounded(t *testing.T) {
	f := newFixture(t, map[string]string{
		"memory/2026-04-01.md": "# Disk\n\nAdded logrotate for /var/log on the web server; the disk was full.\n",
		"memory/2026-04-02.md": "# Backups\n\nThe nightly backup copies the database dump to the NAS at 02:00.\n",
		"MEMORY.md":            "# Notes\n\nThe web server runs nginx behind a load balancer.\n",
	}, nil)
	f.sync(t)
	n := 0
	for _, o := range []SearchOptions{
		{Query: "web server disk full", MinScore: -1},
		{Query: "web server disk full", MinScore: -1, Mode: ModeKeyword},
		{Query: "web server disk full", MinScore: -1, Mode: ModeVector},
		{Query: "What fills the disk? When does the backup run?", MinScore: -1},
	} {
		res, err := f.m.Search(context.Background(), o)
		if err != nil {
			t.Fatalf("Search %+v: %v", o, err)
		}
		for _, r := range res.Results {
			n++
			if r.Score != RoundScore(r.Score) {
				t.Errorf("%q (%s): score %v is not rounded to %d decimals", o.Query, o.Mode, r.Score, ScoreDecimals)
			}
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if m := longDecimal.Find(b); m != nil {
			t.Errorf("%q (%s): JSON carries %s", o.Query, o.Mode, m)
		}
	}
	if n == 0 {
		t.Fatal("no results at all: nothing checked")
	}
}

func TestRoundScore(t *testing.T) {
	for in, want := range map[float64]float64{0.27118005300000003: 0.2712, 0.99995: 1, 0: 0, 0.00004: 0, 0.12345: 0.1235} {
		if got := RoundScore(in); got != want {
			t.Errorf("RoundScore(%v) = %v, want %v", in, got, want)
		}
	}
}
