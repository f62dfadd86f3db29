package convo

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func mustPruner(t *testing.T, o PruneOptions) *Pruner {
	t.Helper()
	p, err := NewPruner(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewPrunerErrors(t *testing.T) {
	for _, o := range []PruneOptions{
		{KeepLastAssistants: -1}, {SoftTrimChars: -5}, {HeadChars: 2000, TailChars: 2000},
		{SoftTrimChars: 100}, // default head+tail 3000 ≥ 100
	} {
		if _, err := NewPruner(o); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewPruner(%+v) err = %v", o, err)
		}
	}
}

// session is a transcript with a tool round per turn: result i has text
// sizes[i] of repeated marker letters.
func session(sizes ...int) []Message {
	var out []Message
	for i, n := range sizes {
		id := fmt.Sprintf("c%d", i)
		letter := string(rune('A' + i))
		if i%2 == 1 {
			letter = "中" // multi-byte content too
		}
		out = append(out, u("", fmt.Sprintf("q%d", i)), call("", "", id), res(id, strings.Repeat(letter, n)), a("", fmt.Sprintf("r%d", i)))
	}
	return out
}

func TestPrune(t *testing.T) {
	tests := []struct {
		name    string
		o       PruneOptions
		in      []Message
		want    []int // characters of each tool result after pruning; -1 = placeholder
		trimmed int
		cleared int
	}{
		{"fewer assistants than protected: nothing", PruneOptions{}, session(9000), []int{9000}, 0, 0},
		// Each round has two assistant messages (call and reply), so the
		// third-newest assistant is the reply of the round before the last:
		// only the last round's result is protected.
		{"recent results protected, older trimmed", PruneOptions{}, session(9000, 100, 9000, 9000),
			[]int{3000 + markerLen(9000), 100, 3000 + markerLen(9000), 9000}, 2, 0},
		{"protection counts assistant messages", PruneOptions{KeepLastAssistants: 4}, session(9000, 100, 9000, 9000),
			[]int{3000 + markerLen(9000), 100, 9000, 9000}, 1, 0},
		{"exactly at the soft limit is not trimmed", PruneOptions{}, session(4000, 4001, 1, 1),
			[]int{4000, 3000 + markerLen(4001), 1, 1}, 1, 0},
		{"oldest hard-cleared beyond the budget", PruneOptions{HardClearChars: 7000},
			session(50000, 10000, 30000, 10, 10), []int{-1, 3000 + markerLen(10000), 3000 + markerLen(30000), 10, 10}, 2, 1},
		{"everything older cleared once the budget is spent", PruneOptions{HardClearChars: 10},
			session(5, 5, 5, 5, 1, 1), []int{-1, -1, -1, 5, 1, 1}, 0, 3},
		{"never clear", PruneOptions{HardClearChars: -1}, session(50000, 50000, 50000, 1, 1),
			[]int{3000 + markerLen(50000), 3000 + markerLen(50000), 3000 + markerLen(50000), 1, 1}, 3, 0},
		{"custom trim", PruneOptions{SoftTrimChars: 100, HeadChars: 10, TailChars: 20, KeepLastAssistants: 1},
			session(101, 99), []int{30 + markerLenFor(101, 30), 99}, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPruner(t, tc.o)
			before := deepCopy(tc.in)
			got, st := p.Prune(tc.in)
			if !sameMessages(t, before, tc.in) {
				t.Fatal("Prune changed its input")
			}
			if len(got) != len(tc.in) {
				t.Fatalf("len %d, want %d", len(got), len(tc.in))
			}
			var sizes []int
			for i, m := range got {
				if m.Role != "tool" {
					if m.Content != tc.in[i].Content {
						t.Errorf("message %d (%s) changed", i, m.Role)
					}
					continue
				}
				if !utf8.ValidString(m.Content) {
					t.Errorf("result %d is not valid UTF-8", i)
				}
				if m.Content == DefaultPlaceholder || m.Content == p.o.Placeholder {
					sizes = append(sizes, -1)
				} else {
					sizes = append(sizes, utf8.RuneCountInString(m.Content))
				}
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tc.want) || st.Trimmed != tc.trimmed || st.Cleared != tc.cleared {
				t.Fatalf("sizes %v stats %+v, want %v trimmed %d cleared %d", sizes, st, tc.want, tc.trimmed, tc.cleared)
			}
		})
	}
}

// markerLen is the characters of the default trim marker for a result of n.
func markerLen(n int) int { return markerLenFor(n, 3000) }

func markerLenFor(n, kept int) int {
	return utf8.RuneCountInString(fmt.Sprintf("\n…[tool result trimmed: %d of %d characters left out]…\n", n-kept, n))
}

func TestPruneKeepsHeadAndTail(t *testing.T) {
	p := mustPruner(t, PruneOptions{KeepLastAssistants: 1})
	body := "BEGIN" + strings.Repeat("日志行。", 2000) + "END"
	in := []Message{u("", "q"), call("", "", "c"), res("c", body), a("", "done")}
	got, _ := p.Prune(in)
	c := got[2].Content
	r := []rune(body)
	if !strings.HasPrefix(c, string(r[:1500])) || !strings.HasSuffix(c, string(r[len(r)-1500:])) {
		t.Fatal("head or tail not kept")
	}
	if !strings.Contains(c, fmt.Sprintf("[tool result trimmed: %d of %d characters left out]", len(r)-3000, len(r))) {
		t.Fatalf("no marker in %q", c[4000:4200])
	}
	if in[2].Content != body {
		t.Fatal("transcript lost the full text")
	}
}
