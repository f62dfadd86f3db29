package retrieval

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteText prints the report for people: a header line, one row per mode
// (keyword, vector, hybrid) with the quality metrics and the search
// latency, the groups (if any) with R@10 and nDCG@10 per mode, then the
// index, query and RSS lines.
func (r Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Set %s (%s, %s level, %s): %d queries", r.Set, r.Kind, r.Level, r.Qrels, r.Queries)
	if r.SkippedQueries > 0 || r.ExcludedQueries > 0 {
		fmt.Fprintf(w, " (%d skipped: no judged document; %d excluded by category/abstention)", r.SkippedQueries, r.ExcludedQueries)
	}
	fmt.Fprintf(w, "\n%d docs in %d partition(s), top %d chunks per search, %s/%s", r.Docs, r.Partitions, r.Depth, r.Provider, r.Model)
	if r.Workers > 1 {
		fmt.Fprintf(w, ", %d searches at once (latencies include their contention)", r.Workers)
	}
	fmt.Fprintln(w)
	if r.MissingJudged > 0 {
		fmt.Fprintf(w, "Warning: %d judged documents are not in their query's index (they count as misses)\n", r.MissingJudged)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tR@1\tR@5\tR@10\tany@10\tnDCG@10\tMRR\tp50 ms\tp99 ms\t")
	for _, m := range r.ModeOrder() {
		x := r.Modes[m]
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\t\n",
			m, x.Recall1, x.Recall5, x.Recall10, x.Any10, x.NDCG10, x.MRR, x.P50ms, x.P99ms)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Groups) > 0 {
		if err := r.writeGroups(w); err != nil {
			return err
		}
	}
	if r.Defaults != nil {
		if err := r.Defaults.writeText(w); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "Index: %.2f s, %d chunks, %.0f chunks/s\n", r.Index.Seconds, r.Index.Chunks, r.Index.ChunksPerSecond)
	fmt.Fprintf(w, "Query: p50 %.2f ms, p99 %.2f ms\n", r.Query.P50ms, r.Query.P99ms)
	_, err := fmt.Fprintf(w, "RSS peak: %.1f MiB; total %.1f s\n", float64(r.RSSBytes)/(1<<20), r.Seconds)
	return err
}

// writeGroups prints one row per query group: n, then R@10 and nDCG@10 of
// each mode.
func (r Report) writeGroups(w io.Writer) error {
	names := make([]string, 0, len(r.Groups))
	for g := range r.Groups {
		names = append(names, g)
	}
	sort.Strings(names)
	modes := r.ModeOrder()
	fmt.Fprintln(w, "By group (R@10 / nDCG@10):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "group\tn\t%s\t\n", strings.Join(modes, "\t"))
	for _, g := range names {
		n := 0
		cells := make([]string, len(modes))
		for i, m := range modes {
			q := r.Groups[g][m]
			n = q.N
			cells[i] = fmt.Sprintf("%.3f / %.3f", q.Recall10, q.NDCG10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t\n", g, n, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// writeText prints what the defaults give: hit@1/5/k with the default floor
// and without a floor, the empty answers, and the absent questions.
func (d *DefaultsReport) writeText(w io.Writer) error {
	fmt.Fprintf(w, "With the defaults (hybrid, maxResults %d, default floor) against no floor:\n", d.MaxResults)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "questions\tn\thit@1\thit@5\thit@k\tempty\tresults\tlow\thigh\tno floor: hit@1\thit@5\thit@k\t")
	for _, row := range []struct {
		name string
		a    Answered
	}{{"all", d.All}, {"held-out half", d.HeldOut}} {
		a := row.a
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", row.name, a.N,
			a.Hit1, a.Hit5, a.HitK, a.Empty, a.MeanResults, a.Low, a.High, a.NoFloorHit1, a.NoFloorHit5, a.NoFloorHitK)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Groups) > 0 {
		names := make([]string, 0, len(d.Groups))
		for g := range d.Groups {
			names = append(names, g)
		}
		sort.Strings(names)
		fmt.Fprintln(w, "Held-out half by group (defaults / no floor):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "group\tn\thit@1\thit@5\tempty\tno floor: hit@1\thit@5\t")
		for _, g := range names {
			a := d.Groups[g]
			fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", g, a.N, a.Hit1, a.Hit5, a.Empty, a.NoFloorHit1, a.NoFloorHit5)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if d.Absent.N == 0 {
		_, err := fmt.Fprintln(w, "Absent questions: none (a workspaces set with one partition)")
		return err
	}
	fmt.Fprintf(w, "Absent questions (%s):\n", d.AbsentSource)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "questions\tn\tempty\tresults\tlow\thigh\ttop p50\ttop p90\tno floor: top p50\ttop p90\t")
	for _, row := range []struct {
		name string
		a    Absent
	}{{"all", d.Absent}, {"held-out half", d.AbsentHeldOut}} {
		a := row.a
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", row.name, a.N,
			a.Empty, a.MeanResults, a.Low, a.High, a.TopP50, a.TopP90, a.NoFloorTopP50, a.NoFloorTopP90)
	}
	return tw.Flush()
}
