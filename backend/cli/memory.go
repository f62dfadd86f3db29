package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/memory"
)

func runMemory(ctx context.Context, args []string, o Options) error {
	sub, args := takeCommand(args)
	if ok, err := group("memory", sub, args, o); !ok {
		return err
	}
	var c common
	fs := newFlagSet("memory "+sub, o)
	c.register(fs)
	c.registerJSON(fs)
	// Each subcommand has its own flags (and its usage lists only them).
	var (
		maxResults, from, lines = new(int), new(int), new(int)
		minScore                = new(float64)
		mode, as, base          = new(string), new(string), new(string)
	)
	switch sub {
	case "search":
		fs.IntVar(maxResults, "max-results", memory.DefaultMaxResults, "number of results")
		fs.Float64Var(minScore, "min-score", 0, "minimum hybrid score (0..1; 0 = the default floor for the query, negative = no floor)")
		fs.StringVar(mode, "mode", memory.ModeHybrid, "hybrid, keyword (BM25 only) or vector (embedding only)")
	case "get":
		fs.IntVar(from, "from", 0, "first line (1-based)")
		fs.IntVar(lines, "lines", 0, "number of lines (0 = to the end)")
	case "write":
		fs.StringVar(mode, "mode", "", "append or replace (required)")
		fs.StringVar(base, "base", "", "the version the new content is based on")
	case "mv":
		fs.StringVar(base, "base", "", "the version of PATH you saw (memory get --json); refused when it changed since")
	}
	if sub == "search" || sub == "get" || sub == "write" || sub == "mv" {
		fs.StringVar(as, "as", "", "act as this `role` (checked and audited exactly as that role)")
	}
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	asSet := false
	fs.Visit(func(f *flag.Flag) { asSet = asSet || f.Name == "as" })
	if asSet {
		// An explicit --as, even empty ("--as $ROLE" with ROLE unset), is a
		// role to act as: it never falls back to the person's own rights.
		if *as == "" {
			return fmt.Errorf("%w: --as needs a role name (it was empty)", errUsage)
		}
		if err := acl.ValidateRole(*as); err != nil {
			return fmt.Errorf("%w: --as %q: %v", errUsage, *as, err)
		}
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
		if sub == "search" {
			// Refused before the index is opened or the app asked.
			if err := memory.CheckQuery(strings.Join(pos, " ")); err != nil {
				return fmt.Errorf("%w: memory search: %v", errUsage, err)
			}
		}
	case "write":
		if len(pos) != 1 {
			return fmt.Errorf("%w: memory write needs one PATH (the content is read from standard input)", errUsage)
		}
		if *mode != memory.WriteAppend && *mode != memory.WriteReplace {
			return fmt.Errorf("%w: memory write needs --mode append or --mode replace", errUsage)
		}
	case "mv":
		if len(pos) != 2 {
			return fmt.Errorf("%w: memory mv needs PATH and NEWPATH", errUsage)
		}
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
	if asSet {
		if err := knownRole(ctx, m, *as); err != nil {
			return err
		}
	}

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
		av, err := m.ACL(ctx)
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, struct {
				memory.Status
				ACL *aclView `json:"acl,omitempty"`
			}{st, av})
		}
		printStatus(o.Stdout, st)
		printACL(o.Stdout, av)
		return nil
	case "search":
		// Bring a local index up to date first: incremental, cheap when nothing changed.
		if err := m.Prepare(ctx); err != nil {
			return err
		}
		res, err := m.Search(ctx, *as, memory.SearchOptions{Query: strings.Join(pos, " "), MaxResults: *maxResults, MinScore: *minScore, Mode: *mode})
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, res)
		}
		printResults(o.Stdout, res)
		return nil
	case "get":
		res, err := m.Get(ctx, *as, memory.GetOptions{Path: pos[0], From: *from, Lines: *lines})
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
	case "write":
		content, err := io.ReadAll(io.LimitReader(o.Stdin, memory.MaxImportBytes+1))
		if err != nil {
			return fmt.Errorf("memory write: read standard input: %w", err)
		}
		res, err := m.Write(ctx, *as, memory.WriteRequest{Path: pos[0], Content: string(content), Mode: *mode, BaseVersion: *base})
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, res)
		}
		switch {
		case res.Pending:
			fmt.Fprintf(o.Stdout, "Not written: %s is a decision file changed meanwhile; conflict %d waits for your choice.\n", res.Path, res.Conflict.ID)
		case res.Conflict != nil:
			fmt.Fprintf(o.Stdout, "Wrote %s (version %s); the replaced text is kept as conflict %d.\n", res.Path, res.Version, res.Conflict.ID)
		default:
			fmt.Fprintf(o.Stdout, "Wrote %s (version %s).\n", res.Path, res.Version)
		}
		return nil
	case "mv":
		res, err := m.Rename(ctx, *as, memory.RenameRequest{From: pos[0], To: pos[1], BaseVersion: *base})
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, res)
		}
		fmt.Fprintf(o.Stdout, "Renamed %s to %s (version %s).\n", res.From, res.Path, res.Version)
		return nil
	}
	return nil
}

// knownRole refuses a role that is not one of the workspace's roles (a
// folder memory/roles/<role>/, or main, the chat's own role): a mistyped
// --as would otherwise act as a role that may read nothing, and report
// "No results." as if there were none.
func knownRole(ctx context.Context, m memoryBackend, role string) error {
	roles, err := m.Roles(ctx)
	if err != nil {
		return fmt.Errorf("--as %s: list roles: %w", role, err)
	}
	if !slices.Contains(roles, acl.MainRole) {
		roles = append(roles, acl.MainRole)
		slices.Sort(roles)
	}
	if slices.Contains(roles, role) {
		return nil
	}
	return fmt.Errorf("%w: --as %q is not a role of this workspace (known roles: %s; create one with atrium agents create)",
		errUsage, role, strings.Join(roles, ", "))
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

// printResults prints search results as text: one line per result with
// its score rounded for people (formatScore: 3 decimals; --json carries
// the 4 decimals Search returns, memory.ScoreDecimals),
// then its snippet indented; a confidence line comes first, then the
// model's rewrite of the query when one was searched too.
func printResults(w io.Writer, res memory.SearchResponse) {
	if len(res.Results) == 0 {
		fmt.Fprintln(w, "No results.")
		return
	}
	fmt.Fprintf(w, "Confidence: %s (%s)\n", res.Confidence.Level, formatScore(res.Confidence.Score))
	if res.Confidence.Weak() {
		fmt.Fprintln(w, "Weak results: they may not answer the query.")
	}
	if res.RewrittenQuery != "" {
		fmt.Fprintf(w, "Also searched in the chat model's words (%d ms): %s\n", res.RewriteMs, res.RewrittenQuery)
	}
	for i, r := range res.Results {
		fmt.Fprintf(w, "%d. %s:%d-%d  score %s  [%s%s]\n", i+1, r.Path, r.StartLine, r.EndLine, formatScore(r.Score), r.Layer, roleSuffix(r.Role))
		if len(r.AlsoIn) > 0 {
			fmt.Fprintf(w, "   also in: %s\n", strings.Join(r.AlsoIn, ", "))
		}
		for _, line := range strings.Split(strings.TrimSpace(r.Snippet), "\n") {
			fmt.Fprintf(w, "   %s\n", line)
		}
	}
}

// formatScore is a 0–1 score for people: three decimals ("0.859").
func formatScore(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }

// printACL prints the ACL line of `memory status`.
func printACL(w io.Writer, v *aclView) {
	if v == nil {
		return
	}
	fmt.Fprintf(w, "ACL:        %s (%d rules) from %s\n", v.Source, v.Rules, v.Path)
	if v.Error != "" {
		fmt.Fprintf(w, "ACL error:  %s — the rules above stay in force\n", v.Error)
	}
}
