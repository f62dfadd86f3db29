package memory

import "testing"

// TestToolMinScore: the memory_search tools' minScore — absent is the
// calibrated default, 0 no floor, the rest clamped to 0..1.
func TestToolMinScore(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		in   *float64
		want float64
	}{{nil, 0}, {f(0), -1}, {f(-3), -1}, {f(0.3), 0.3}, {f(7), 1}} {
		if got := ToolMinScore(c.in); got != c.want {
			t.Errorf("ToolMinScore(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := ToolHits([]SearchResult{{Path: "a.md", Score: 0.123456, Snippet: "s"}}); len(got) != 1 || got[0].Score != 0.1235 {
		t.Errorf("ToolHits = %+v", got)
	}
	if got := ToolHits(nil); got == nil {
		t.Error("ToolHits(nil) is nil, want an empty list")
	}
}
