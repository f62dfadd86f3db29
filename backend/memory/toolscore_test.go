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
	if got := ToolScore(0.123456); got != 0.123 {
		t.Errorf("ToolScore = %v", got)
	}
}
