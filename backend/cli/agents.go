package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/atrium-dev/atrium/backend/atrium"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/paths"
)

// agentsBackend is what `atrium agents` needs: the memory engine itself
// when no app runs, else the running app's gateway (profiles.create,
// roles.list).
type agentsBackend interface {
	Prepare(ctx context.Context) error
	CreateRole(ctx context.Context, r memory.CreateRoleRequest) (memory.CreateRoleResult, error)
	ListRoles(ctx context.Context) ([]memory.RoleInfo, error)
	Close() error
}

type localAgents struct{ m *atrium.LocalMemory }

func (l localAgents) Prepare(ctx context.Context) error { return l.m.Sync(ctx) }
func (l localAgents) CreateRole(ctx context.Context, r memory.CreateRoleRequest) (memory.CreateRoleResult, error) {
	return l.m.CreateRole(ctx, r)
}
func (l localAgents) ListRoles(ctx context.Context) ([]memory.RoleInfo, error) {
	return l.m.ListRoles(ctx)
}
func (l localAgents) Close() error { return l.m.Close() }

type remoteAgents struct{ remoteMemory }

func (r remoteAgents) CreateRole(ctx context.Context, q memory.CreateRoleRequest) (res memory.CreateRoleResult, err error) {
	return res, r.call(ctx, "profiles.create", map[string]any{"role": q.Role, "description": q.Description, "capabilities": q.Capabilities}, &res)
}
func (r remoteAgents) ListRoles(ctx context.Context) ([]memory.RoleInfo, error) {
	var out struct {
		Roles []memory.RoleInfo `json:"roles"`
	}
	return out.Roles, r.call(ctx, "roles.list", nil, &out)
}

// openAgents opens the memory engine with its file versions (writes go
// through memory_write), or asks the running app that holds the index.
func openAgents(ctx context.Context, layout paths.Layout, port int, o Options) (agentsBackend, error) {
	if wsErr := layout.CheckWorkspace(); wsErr != nil {
		if r, err := dialApp(ctx, layout, port, o); err == nil {
			return remoteAgents{r}, nil
		}
		return nil, wsErr
	}
	m, err := atrium.OpenLocalMemory(layout, o.Getenv, newLogger(o, slog.LevelWarn))
	if err == nil {
		return localAgents{m}, nil
	}
	if !errors.Is(err, memory.ErrLocked) {
		return nil, err
	}
	r, derr := dialApp(ctx, layout, port, o)
	if derr != nil {
		return nil, fmt.Errorf("%w, and %v", err, derr)
	}
	return remoteAgents{r}, nil
}

// runAgents runs `atrium agents list|create` (SPEC §1, §5.2).
func runAgents(ctx context.Context, args []string, o Options) error {
	sub, args := takeCommand(args)
	if ok, err := group("agents", sub, args, o); !ok {
		return err
	}
	var c common
	fs := newFlagSet("agents "+sub, o)
	c.register(fs)
	c.registerJSON(fs)
	caps := new(string)
	if sub == "create" {
		fs.StringVar(caps, "capabilities", "", "comma-separated capability keywords (routing, SPEC §5.4)")
	}
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	switch sub {
	case "list":
		if len(pos) > 0 {
			return fmt.Errorf("%w: agents list takes no arguments", errUsage)
		}
	case "create":
		if len(pos) != 2 {
			return fmt.Errorf("%w: agents create needs a role name and a quoted description: atrium agents create <role> \"<description>\"", errUsage)
		}
	case "spawn", "stop":
		if len(pos) != 1 {
			return fmt.Errorf("%w: agents %s needs one argument: atrium agents spawn <role> | atrium agents stop <instance>", errUsage, sub)
		}
	}
	layout, err := c.layout(o)
	if err != nil {
		return err
	}
	if sub == "spawn" || sub == "stop" {
		return runInstance(ctx, sub, pos[0], c, layout, o)
	}
	if err := layout.Ensure(); err != nil {
		return err
	}
	b, err := openAgents(ctx, layout, c.port, o)
	if err != nil {
		return err
	}
	defer b.Close()

	if sub == "list" {
		roles, err := b.ListRoles(ctx)
		if err != nil {
			return err
		}
		if c.json {
			if roles == nil {
				roles = []memory.RoleInfo{}
			}
			return printJSON(o.Stdout, map[string]any{"roles": roles})
		}
		printRoles(o.Stdout, roles)
		return nil
	}
	// The starting context searches memory: bring a local index up to date.
	if err := b.Prepare(ctx); err != nil {
		return err
	}
	var capList []string
	for _, x := range strings.Split(*caps, ",") {
		if x = strings.TrimSpace(x); x != "" {
			capList = append(capList, x)
		}
	}
	res, err := b.CreateRole(ctx, memory.CreateRoleRequest{Role: pos[0], Description: pos[1], Capabilities: capList})
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(o.Stdout, res)
	}
	fmt.Fprintf(o.Stdout, "Created role %s: %s\n", res.Role, res.Path)
	switch {
	case res.ACLCreated:
		fmt.Fprintf(o.Stdout, "Access rule %s written to %s (created from the defaults).\n", res.ACL, memory.ACLPath)
	case res.ACL != "":
		fmt.Fprintf(o.Stdout, "Access rule %s added to %s.\n", res.ACL, memory.ACLPath)
	default:
		fmt.Fprintf(o.Stdout, "%s already had a rule for this role; kept as it is.\n", memory.ACLPath)
	}
	if len(res.Unfilled) > 0 {
		fmt.Fprintf(o.Stdout, "Template placeholders left as written: %s\n", strings.Join(res.Unfilled, ", "))
	}
	if res.Warning != "" {
		fmt.Fprintf(o.Stdout, "Warning: %s\n", res.Warning)
	}
	fmt.Fprintf(o.Stdout, "Starting context saved to %s (its runs read it with the persona).\n", res.ContextPath)
	fmt.Fprintf(o.Stdout, "Edit %s to refine the persona.\n\n%s", res.Path, res.Summary)
	return nil
}

func printRoles(w io.Writer, roles []memory.RoleInfo) {
	if len(roles) == 0 {
		fmt.Fprintln(w, "No roles yet. Create one with: atrium agents create <role> \"<description>\"")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tFILES\tCONFIG\tDESCRIPTION")
	for _, r := range roles {
		desc := r.Description
		if len(r.Capabilities) > 0 {
			desc += " [" + strings.Join(r.Capabilities, ", ") + "]"
		}
		if r.Error != "" {
			desc += " (error: " + r.Error + ")"
		}
		cfg := r.Path
		if cfg == "" {
			cfg = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.Role, r.Files, cfg, desc)
	}
	tw.Flush()
}

// runInstance runs `atrium agents spawn <role>` and `atrium agents stop
// <instance>` through the running app's gateway (profiles.spawn,
// profiles.stop): instances are processes of the app (SPEC §3, §6).
func runInstance(ctx context.Context, sub, arg string, c common, layout paths.Layout, o Options) error {
	r, err := dialApp(ctx, layout, c.port, o)
	if err != nil {
		return fmt.Errorf("agents %s needs the running app (start atrium or atrium serve): %w", sub, err)
	}
	defer r.Close()
	if sub == "stop" {
		var res map[string]any
		if err := r.call(ctx, "profiles.stop", map[string]any{"instanceId": arg}, &res); err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, res)
		}
		fmt.Fprintf(o.Stdout, "Stopped instance %s.\n", arg)
		return nil
	}
	var res struct {
		Instance map[string]any `json:"instance"`
	}
	if err := r.call(ctx, "profiles.spawn", map[string]any{"profileId": arg}, &res); err != nil {
		return err
	}
	if c.json {
		return printJSON(o.Stdout, res)
	}
	fmt.Fprintf(o.Stdout, "Spawned instance %v of %s (state %v).\n", res.Instance["instanceId"], arg, res.Instance["state"])
	return nil
}
