package memory

import (
	"context"
	"strings"
	"testing"
)

// TestConfidenceOf: the levels by the best score against the bound for the
// query's length, which falls as the query grows.
func TestConfidenceOf(t *testing.T) {
	for _, tc := range []struct {
		score, length float64
		any           bool
		want          string
	}{
		{0, 1, false, ConfidenceLow},
		{0.30, 1, true, ConfidenceLow},    // bound 0.38 for a one-term lookup
		{0.40, 1, true, ConfidenceMedium}, // below 0.38 + 0.15
		{0.60, 1, true, ConfidenceHigh},
		{0.20, 20, true, ConfidenceMedium}, // bound 0.38 − 0.075·ln 20 ≈ 0.155
		{0.14, 20, true, ConfidenceLow},
		{0.35, 20, true, ConfidenceHigh},
	} {
		c := confidenceOf(tc.score, tc.length, tc.any)
		if c.Level != tc.want || (tc.any && c.Score != RoundScore(tc.score)) {
			t.Errorf("confidenceOf(%v, %v, %v) = %+v, want %s", tc.score, tc.length, tc.any, c, tc.want)
		}
	}
	if (Confidence{Level: ConfidenceMedium}).Note() != "" || !strings.Contains(Confidence{Level: ConfidenceLow, Score: 0.12}.Note(), "0.12") {
		t.Error("Note: only a low confidence has one, with its score")
	}
}

// TestWeakAnswerSaysLow: a search whose best result barely touches the
// query (one common word of a long question) returns what it found marked
// "low"; a search that finds its note is not low; a search that finds
// nothing is low with score 0.
func TestWeakAnswerSaysLow(t *testing.T) {
	f := newFixture(t, map[string]string{
		"memory/2026-04-01.md": "# Disk\n\nAdded logrotate for /var/log/nginx on the web server; the root volume was full.\n",
		"memory/2026-04-02.md": "# Backups\n\nThe nightly backup copies the database dump to the NAS at 02:00.\n",
		"memory/2026-04-03.md": "# Lunch\n\nNoodles at the corner shop; the soup was too salty for the team.\n",
	}, nil)
	f.sync(t)
	ctx := context.Background()
	weak, err := f.m.Search(ctx, SearchOptions{Query: "Which dentist did the team book for the kids' appointment on Saturday morning?", MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(weak.Results) == 0 || weak.Confidence.Level != ConfidenceLow || weak.Confidence.Score != weak.Results[0].Score {
		t.Errorf("weak answer: %d results, confidence %+v; want results marked low", len(weak.Results), weak.Confidence)
	}
	good, err := f.m.Search(ctx, SearchOptions{Query: "nightly backup database dump"})
	if err != nil {
		t.Fatal(err)
	}
	if len(good.Results) == 0 || good.Confidence.Level == ConfidenceLow {
		t.Errorf("found note: %d results, confidence %+v; want not low", len(good.Results), good.Confidence)
	}
	none, err := f.m.Search(ctx, SearchOptions{Query: "zyxwvut"})
	if err != nil {
		t.Fatal(err)
	}
	if len(none.Results) != 0 || none.Confidence != (Confidence{Level: ConfidenceLow}) {
		t.Errorf("no results: %+v", none)
	}
}
