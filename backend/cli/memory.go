package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/atrium-dev/atrium/backend/memory"
)

func runMemory(ctx context.Context, args []string, o Options) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%w: memory needs a subcommand: index, search, get or status", errUsage)
	}
	sub, args := args[0], args[1:]
	var c common
	fs := newFlagSet("memory "+sub, o)
	c.register(fs)
	maxResults := fs.Int("max-results", memory.DefaultMaxResults, "search: number of results")
	minScore := fs.Float64("min-score", memory.DefaultMinScore, "search: minimum hybrid score (0..1)")
	mode := fs.String("mode", memory.ModeHybrid, "search: hybrid, keyword (BM25 only) or vector (embedding only)")
	from := fs.Int("from", 0, "get: first line (1-based)")
	lines := fs.Int("lines", 0, "get: number of lines (0 = to the end)")
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	switch sub {
	case "index", "status":
		if len(pos) > 0 {
			return fmt.Errorf("%w: memory %s takes no arguments", errUsage, sub)
		}
	case "search", "get":
		if len(pos) == 0 {
			return fmt.Errorf("%w: memory %s needs an argument", errUsage, sub)
		}
	default:
		return fmt.Errorf("%w: unknown memory subcommand %q", errUsage, sub)
	}

	layout, err := c.layout(o)
	if err != nil {
		return err
	}
	if err := layout.Ensure(); err != nil {
		return err
	}
	m, err := openMemory(ctx, layout, c.port, o)
	if err != nil {
		return err
	}
	defer m.Close()

	switch sub {
	case "index":
		start := time.Now()
		st, err := m.Sync(ctx)
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, st)
		}
		fmt.Fprintf(o.Stdout, "Indexed %s in %s: %d files, %d chunks (%s/%s, %d dims).\n",
			st.Workspace, time.Since(start).Round(time.Millisecond), st.Files, st.Chunks, st.Provider, st.Model, st.Dims)
		if st.LastError != "" {
			fmt.Fprintf(o.Stdout, "Warning: %s\n", st.LastError)
		}
		return nil
	case "status":
		st, err := m.Status(ctx)
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, st)
		}
		printStatus(o.Stdout, st)
		return nil
	case "search":
		// Bring a local index up to date first: incremental, cheap when nothing changed.
		if err := m.Prepare(ctx); err != nil {
			return err
		}
		res, err := m.Search(ctx, memory.SearchOptions{Query: strings.Join(pos, " "), MaxResults: *maxResults, MinScore: *minScore, Mode: *mode})
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, res)
		}
		if len(res.Results) == 0 {
			fmt.Fprintln(o.Stdout, "No results.")
			return nil
		}
		for i, r := range res.Results {
			fmt.Fprintf(o.Stdout, "%d. %s:%d-%d  score %.3f  [%s%s]\n", i+1, r.Path, r.StartLine, r.EndLine, r.Score, r.Layer, roleSuffix(r.Role))
			for _, line := range strings.Split(strings.TrimSpace(r.Snippet), "\n") {
				fmt.Fprintf(o.Stdout, "   %s\n", line)
			}
		}
		return nil
	case "get":
		res, err := m.Get(ctx, memory.GetOptions{Path: pos[0], From: *from, Lines: *lines})
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, res)
		}
		fmt.Fprint(o.Stdout, res.Text)
		if !strings.HasSuffix(res.Text, "\n") {
			fmt.Fprintln(o.Stdout)
		}
		return nil
	}
	return nil
}

func roleSuffix(role string) string {
	if role == "" {
		return ""
	}
	return " " + role
}

func printStatus(w io.Writer, st memory.Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	last := "never"
	if st.LastSync > 0 {
		last = time.UnixMilli(st.LastSync).Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "State:\t%s\n", st.State)
	fmt.Fprintf(tw, "Workspace:\t%s (%s layout)\n", st.Workspace, st.Layout)
	fmt.Fprintf(tw, "Files:\t%d (%d dirty)\n", st.Files, st.Dirty)
	fmt.Fprintf(tw, "Chunks:\t%d\n", st.Chunks)
	fmt.Fprintf(tw, "Embeddings:\t%s / %s (%d dims)\n", st.Provider, st.Model, st.Dims)
	fmt.Fprintf(tw, "Last sync:\t%s\n", last)
	if st.LastError != "" {
		fmt.Fprintf(tw, "Last error:\t%s\n", st.LastError)
	}
	tw.Flush()
}
