package convo

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestFiveMegabyteMessage pushes a 5 MB model reply (mixed Chinese and
// English) and a 5 MB tool result through merge, pruning and compaction.
func TestFiveMegabyteMessage(t *testing.T) {
	const unit = "模型输出 model output "
	huge := strings.Repeat(unit, 5<<20/len(unit)+1)
	if len(huge) < 5<<20 {
		t.Fatalf("only %d bytes", len(huge))
	}
	start := time.Now()
	server := []Message{u("1", "写一份长报告"), a("2", huge)}
	client := []Message{a("2", huge), u("3", "总结一下"), call("4", "", "c1"), res("c1", huge), a("5", "done")}

	merged := Merge(server, client)
	if Overlap(server, client) != 1 || len(merged) != 6 || merged[5].ID != "5" {
		t.Fatalf("merged %d messages", len(merged))
	}
	fit := Fit(merged, Budget{})
	total := 0
	for _, m := range fit {
		if utf8.RuneCountInString(m.Content) > DefaultMessageChars || !utf8.ValidString(m.Content) {
			t.Fatalf("message not cut: %d runes", utf8.RuneCountInString(m.Content))
		}
		total += utf8.RuneCountInString(m.Content) + callChars(m)
	}
	if total > DefaultTotalChars || len(fit) != 6 {
		t.Fatalf("fit: %d messages, %d characters", len(fit), total)
	}

	p := mustPruner(t, PruneOptions{KeepLastAssistants: 1})
	pruned, st := p.Prune(merged)
	if st.Trimmed != 1 || len(pruned[4].Content) > 4*DefaultSoftTrimChars || merged[4].Content != huge {
		t.Fatalf("prune: %+v, %d bytes left, transcript intact %v", st, len(pruned[4].Content), merged[4].Content == huge)
	}

	e := mustEconomy(t, EconomyOptions{ContextWindow: 200000})
	tr := Transcript{Messages: merged}
	as := e.Assess(tr, 0)
	if !as.Compact || !as.Flush || as.Tokens < 2*1000000 {
		t.Fatalf("assess: %+v", as)
	}
	plan := e.Plan(tr)
	// The newest unit is kept even though the turn is huge; the cut is at
	// a unit boundary and nothing is orphaned.
	if err := orphans(plan.Keep); err != nil || len(plan.Summarize)+len(plan.Keep) != 6 || len(plan.Keep) == 0 {
		t.Fatalf("plan: %d + %d, %v", len(plan.Summarize), len(plan.Keep), err)
	}
	out, ok, err := e.Compact(context.Background(), tr, func(_ context.Context, _ string, older []Message) (string, error) {
		return "长报告已写完。", nil
	})
	if err != nil || !ok || out.Summary != "长报告已写完。" {
		t.Fatalf("compact: %v %v %q", ok, err, out.Summary)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("took %v", d)
	}
	t.Logf("5 MB through merge, fit, prune, assess, plan, compact in %v; plan keeps %s", time.Since(start), show(plan.Keep))
}
