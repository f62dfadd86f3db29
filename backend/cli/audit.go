package cli

import (
	"context"
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
)

// runAudit is `atrium audit tail [-n N] [--role R] [--result allowed|denied]
// [--operation OP] [--since RFC3339] [--json]`: the newest audit entries
// (SPEC §5.1 "Audit"), newest first, read from $ATRIUM_HOME/audit directly
// (the log is append-only JSON lines, so this works with or without the
// app running).
func runAudit(_ context.Context, args []string, o Options) error {
	sub, args := takeCommand(args)
	if ok, err := group("audit", sub, args, o); !ok {
		return err
	}
	var c common
	fs := newFlagSet("audit tail", o)
	c.register(fs)
	c.registerJSON(fs)
	n := fs.Int("n", audit.DefaultTail, "number of entries (newest first)")
	role := fs.String("role", "", "only this role (admin, authenticated, or a role name)")
	result := fs.String("result", "", "only allowed or denied decisions")
	operation := fs.String("operation", "", "only this operation (get, search, files, write, import, ...)")
	since := fs.String("since", "", "only entries at or after this time (RFC 3339)")
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fmt.Errorf("%w: audit tail takes no arguments", errUsage)
	case *n <= 0 || *n > audit.MaxTail:
		return fmt.Errorf("%w: -n %d out of 1..%d", errUsage, *n, audit.MaxTail)
	case *result != "" && *result != audit.Allowed && *result != audit.Denied:
		return fmt.Errorf("%w: --result %q (want %s or %s)", errUsage, *result, audit.Allowed, audit.Denied)
	}
	f := audit.Filter{Role: *role, Result: *result, Operation: *operation}
	if *since != "" {
		t, err := time.Parse(time.RFC3339Nano, *since)
		if err != nil {
			return fmt.Errorf("%w: --since %q is not RFC 3339", errUsage, *since)
		}
		f.Since = t
	}
	layout, err := c.layout(o)
	if err != nil {
		return err
	}
	log, err := audit.New(audit.Options{Dir: layout.AuditDir(), Logger: newLogger(o, slog.LevelWarn)})
	if err != nil {
		return err
	}
	rep, err := log.TailReport(*n, f)
	if err != nil {
		return err
	}
	if c.json {
		entries := rep.Entries
		if entries == nil {
			entries = []audit.Entry{}
		}
		return printJSON(o.Stdout, map[string]any{"entries": entries, "corrupt": rep.Corrupt})
	}
	if len(rep.Entries) == 0 {
		fmt.Fprintf(o.Stdout, "No audit entries in %s.\n", layout.AuditDir())
	}
	tw := tabwriter.NewWriter(o.Stdout, 0, 0, 2, ' ', 0)
	for _, e := range rep.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Timestamp.Local().Format("2006-01-02 15:04:05"), e.Result, e.Role, e.Operation, e.Target, e.Reason)
	}
	tw.Flush()
	if rep.Corrupt > 0 {
		fmt.Fprintf(o.Stdout, "(%d corrupt lines skipped)\n", rep.Corrupt)
	}
	return nil
}
