package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/atrium"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/paths"
)

// memoryBackend is what the memory commands need. It is the index itself
// when no app is running, and the running app's gateway otherwise: only one
// process may hold an index (memory.ErrLocked), so the CLI asks the app.
type memoryBackend interface {
	// Prepare brings the index up to date before a read: a full incremental
	// sync for a local index; nothing for a running app, which keeps its
	// index current itself (and may be in its first index run).
	Prepare(ctx context.Context) error
	Sync(ctx context.Context) (memory.Status, error)
	Status(ctx context.Context) (memory.Status, error)
	// Search, Get and Write act as the person at the desktop (admin), or
	// as role `as` when it is set (SPEC §5.1; issue 4: "look through any
	// role's eyes"): checked and audited by the guard, locally or in the app.
	Search(ctx context.Context, as string, o memory.SearchOptions) (memory.SearchResponse, error)
	Get(ctx context.Context, as string, o memory.GetOptions) (memory.GetResponse, error)
	Write(ctx context.Context, as string, r memory.WriteRequest) (memory.WriteResult, error)
	// Rename moves a note (memory.rename): write on both paths, checked
	// and audited by the guard.
	Rename(ctx context.Context, as string, r memory.RenameRequest) (memory.RenameResult, error)
	// ACL reports the access rules in force (nil when the app reports none).
	ACL(ctx context.Context) (*aclView, error)
	// Roles lists the workspace's roles (memory.Manager.ListRoles).
	Roles(ctx context.Context) ([]string, error)
	Close() error
}

// aclView is the `acl` object of memory.status (docs/PROTOCOL.md ACLStatus).
type aclView struct {
	Path   string `json:"path"`
	Source string `json:"source"`
	Rules  int    `json:"rules"`
	Error  string `json:"error,omitempty"`
	Line   int    `json:"line,omitempty"`
}

// openMemory opens the index directly, or, when a running app holds it (or
// the workspace is gone but the app still serves its index), asks that app.
func openMemory(ctx context.Context, layout paths.Layout, port int, o Options) (memoryBackend, error) {
	if wsErr := layout.CheckWorkspace(); wsErr != nil {
		// A running app keeps its index when its workspace goes away (and
		// reports the error in its status); ask it. Otherwise the workspace
		// is mistyped or gone, and is never created here.
		if r, err := dialApp(ctx, layout, port, o); err == nil {
			return r, nil
		}
		return nil, wsErr
	}
	// The same embedder, versions and guard as the app's (config.json
	// memory.embedding: any other would make the index rebuild).
	m, err := atrium.OpenLocalMemory(layout, o.Getenv, newLogger(o, slog.LevelWarn)) // a command's output is its result, not progress logs
	if err == nil {
		return localMemory{m}, nil
	}
	if !errors.Is(err, memory.ErrLocked) {
		return nil, err
	}
	r, derr := dialApp(ctx, layout, port, o)
	if derr != nil {
		return nil, fmt.Errorf("%w, and %v", err, derr)
	}
	return r, nil
}

// dialRunningApp connects to the running app of the state dir (--home)
// for a command that only the app can serve (what names it in the error:
// "pair", "nodes approve"), whichever workspace that app serves: pairing
// and devices belong to the app, not to a workspace.
func (c common) dialRunningApp(ctx context.Context, o Options, what string) (remoteMemory, error) {
	if err := c.validate(); err != nil {
		return remoteMemory{}, err
	}
	home, err := paths.ResolveHome(c.home, o.Getenv)
	if err != nil {
		return remoteMemory{}, err
	}
	r, _, err := dialGateway(ctx, paths.Layout{Home: home}, c.port, o)
	if err != nil {
		return remoteMemory{}, fmt.Errorf("%s needs the running app of %s (start atrium or atrium serve): %w", what, home, err)
	}
	return r, nil
}

// dialApp connects to the running app's gateway (dialGateway) and checks
// that it serves this workspace.
func dialApp(ctx context.Context, layout paths.Layout, port int, o Options) (remoteMemory, error) {
	r, addr, err := dialGateway(ctx, layout, port, o)
	if err != nil {
		return remoteMemory{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := r.Status(sctx)
	if err == nil && st.Workspace != layout.Workspace {
		err = fmt.Errorf("the app at %s serves workspace %s, not %s", addr, st.Workspace, layout.Workspace)
	}
	if err != nil {
		r.Close()
		return remoteMemory{}, err
	}
	return r, nil
}

// dialGateway connects to the gateway of the app of layout.Home — --port,
// else the address the app wrote to $ATRIUM_HOME/gateway.json, else
// config.json's port, else the default — with the state dir's operator
// token, and returns the address it reached.
func dialGateway(ctx context.Context, layout paths.Layout, port int, o Options) (remoteMemory, string, error) {
	addr := ""
	switch {
	case port != 0:
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	default:
		if info, ierr := atrium.ReadGatewayInfo(layout.GatewayFile()); ierr == nil {
			addr = info.Addr
			break
		}
		cfg, cerr := config.Load(layout.ConfigFile())
		if cerr != nil {
			return remoteMemory{}, "", cerr
		}
		if cfg.Gateway.Port == 0 {
			cfg.Gateway.Port = config.DefaultPort
		}
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Gateway.Port))
	}
	tok, err := os.ReadFile(layout.TokenFile())
	if err != nil {
		return remoteMemory{}, "", fmt.Errorf("the running app's token is unreadable: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := gateway.Dial(dctx, gateway.ClientOptions{
		URL:   "ws://" + addr + "/ws",
		Token: strings.TrimSpace(string(tok)),
		Client: gateway.ClientInfo{ID: "atrium-cli", Version: o.Version, Mode: "cli",
			Platform: "cli", InstanceID: strconv.Itoa(os.Getpid())},
	})
	if err != nil {
		return remoteMemory{}, "", fmt.Errorf("its gateway at %s did not answer: %w", addr, err)
	}
	return remoteMemory{c}, addr, nil
}

type localMemory struct{ m *atrium.LocalMemory }

func (l localMemory) Sync(ctx context.Context) (memory.Status, error) {
	if err := l.m.Sync(ctx); err != nil {
		return memory.Status{}, err
	}
	return l.m.Status(), nil
}
func (l localMemory) Prepare(ctx context.Context) error { return l.m.Sync(ctx) }

// Status runs a stat-only check first, so a fresh process reports dirty
// files and a stale index truthfully.
func (l localMemory) Status(ctx context.Context) (memory.Status, error) {
	if err := l.m.Check(ctx); err != nil {
		return memory.Status{}, err
	}
	return l.m.Status(), nil
}

// principal is who a local command acts as: admin, or role as.
func (l localMemory) principal(as string) (acl.Principal, error) {
	if as == "" {
		return acl.Principal{Admin: true}, nil
	}
	if err := acl.ValidateRole(as); err != nil {
		return acl.Principal{}, fmt.Errorf("%w: --as %q: %v", errUsage, as, err)
	}
	return acl.Principal{Role: as}, nil
}

// Search searches as role as (the index ranks what the role may read alone;
// see package guard), audited.
func (l localMemory) Search(ctx context.Context, as string, o memory.SearchOptions) (memory.SearchResponse, error) {
	p, err := l.principal(as)
	if err != nil {
		return memory.SearchResponse{}, err
	}
	o.Readable = func(rel string) bool { return l.m.Guard.Readable(p, rel) }
	res, err := l.m.Search(ctx, o)
	if err != nil {
		return res, err
	}
	return l.m.Guard.FilterSearch(p, o.Query, res)
}
func (l localMemory) Get(ctx context.Context, as string, o memory.GetOptions) (memory.GetResponse, error) {
	p, err := l.principal(as)
	if err != nil {
		return memory.GetResponse{}, err
	}
	if o.Path, err = l.m.Guard.Check(p, "get", acl.Read, o.Path); err != nil {
		return memory.GetResponse{}, err
	}
	return l.m.Get(ctx, o)
}
func (l localMemory) Write(ctx context.Context, as string, r memory.WriteRequest) (memory.WriteResult, error) {
	p, err := l.principal(as)
	if err != nil {
		return memory.WriteResult{}, err
	}
	ctx = guard.WithPrincipal(ctx, p)
	if r.Path, err = l.m.Guard.Check(p, memory.ActionWrite, acl.Write, r.Path); err != nil {
		return memory.WriteResult{}, err
	}
	r.Writer = memory.AdminWriter
	if p.Role != "" {
		r.Writer = p.Role
	}
	return l.m.Write(guard.WithChecked(ctx, r.Path), r)
}
func (l localMemory) Rename(ctx context.Context, as string, r memory.RenameRequest) (memory.RenameResult, error) {
	p, err := l.principal(as)
	if err != nil {
		return memory.RenameResult{}, err
	}
	r.Writer = memory.AdminWriter
	if p.Role != "" {
		r.Writer = p.Role
	}
	// The engine asks the guard about both paths (Options.Authorize).
	return l.m.Rename(guard.WithPrincipal(ctx, p), r)
}
func (l localMemory) ACL(context.Context) (*aclView, error) {
	st := l.m.Guard.ACL().Status()
	v := &aclView{Path: st.Path, Source: st.Source, Rules: st.Rules}
	if st.Err != nil {
		v.Error = st.Err.Error()
		var pe *acl.ParseError
		if errors.As(st.Err, &pe) {
			v.Line = pe.Line
		}
	}
	return v, nil
}
func (l localMemory) Roles(ctx context.Context) ([]string, error) {
	return roleNames(l.m.ListRoles(ctx))
}
func (l localMemory) Close() error { return l.m.Close() }

// roleNames is the names of roles.
func roleNames(roles []memory.RoleInfo, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = r.Role
	}
	return names, nil
}

type remoteMemory struct{ c *gateway.Client }

func (r remoteMemory) Prepare(context.Context) error { return nil }
func (r remoteMemory) Sync(ctx context.Context) (st memory.Status, err error) {
	return st, r.call(ctx, "memory.sync", nil, &st)
}
func (r remoteMemory) Status(ctx context.Context) (st memory.Status, err error) {
	return st, r.call(ctx, "memory.status", nil, &st)
}
func (r remoteMemory) Search(ctx context.Context, as string, o memory.SearchOptions) (res memory.SearchResponse, err error) {
	return res, r.call(ctx, "memory.search", struct {
		memory.SearchOptions
		As string `json:"as,omitempty"`
	}{o, as}, &res)
}
func (r remoteMemory) Get(ctx context.Context, as string, o memory.GetOptions) (res memory.GetResponse, err error) {
	return res, r.call(ctx, "memory.get", struct {
		memory.GetOptions
		As string `json:"as,omitempty"`
	}{o, as}, &res)
}
func (r remoteMemory) ACL(ctx context.Context) (*aclView, error) {
	var st struct {
		ACL *aclView `json:"acl"`
	}
	return st.ACL, r.call(ctx, "memory.status", nil, &st)
}
func (r remoteMemory) Write(ctx context.Context, as string, w memory.WriteRequest) (res memory.WriteResult, err error) {
	return res, r.call(ctx, "memory.write", struct {
		memory.WriteRequest
		As string `json:"as,omitempty"`
	}{w, as}, &res)
}
func (r remoteMemory) Rename(ctx context.Context, as string, m memory.RenameRequest) (res memory.RenameResult, err error) {
	return res, r.call(ctx, "memory.rename", map[string]any{"path": m.From, "to": m.To, "baseVersion": m.BaseVersion, "as": as}, &res)
}

// call reports a refused request as the server's message alone; the code is
// for programs, the message for people.
func (r remoteMemory) call(ctx context.Context, method string, params, out any) error {
	err := r.c.Call(ctx, method, params, out)
	var ge *gateway.Error
	if errors.As(err, &ge) {
		return errors.New(ge.Message)
	}
	return err
}
func (r remoteMemory) Roles(ctx context.Context) ([]string, error) {
	var out struct {
		Roles []memory.RoleInfo `json:"roles"`
	}
	err := r.call(ctx, "roles.list", nil, &out)
	return roleNames(out.Roles, err)
}
func (r remoteMemory) Close() error { return r.c.Close() }
