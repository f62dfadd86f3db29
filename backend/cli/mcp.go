package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/atrium"
	"github.com/atrium-dev/atrium/backend/mcpserve"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/paths"
)

// runMCP is `atrium mcp [--as ROLE]` (the MCP server over standard input
// and output) and `atrium mcp token create|list|revoke`.
func runMCP(ctx context.Context, args []string, o Options) error {
	if len(args) > 0 && args[0] == "token" {
		return runMCPToken(ctx, args[1:], o)
	}
	var c common
	fs := newFlagSet("mcp", o)
	c.register(fs)
	as := fs.String("as", "", "act as this `role` (every call checked and audited as it); default authenticated:\nonly what the ACL grants every authenticated principal")
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: mcp takes no arguments (did you mean atrium mcp token …?)", errUsage)
	}
	if err := c.validate(); err != nil {
		return err
	}
	role := *as
	if role == "" {
		role = mcpserve.Authenticated
	}
	if err := mcpserve.ValidRole(role); err != nil {
		return fmt.Errorf("%w: --as %q: %v", errUsage, role, err)
	}
	layout, err := c.layout(o)
	if err != nil {
		return err
	}
	if err := layout.Ensure(); err != nil {
		return err
	}
	log := newLogger(o, slog.LevelWarn) // standard error; standard output is the protocol's
	mm := &mcpMemory{layout: layout, port: c.port, o: o, log: log}
	defer mm.Close()
	if role != mcpserve.Authenticated {
		if err := mm.knownRole(ctx, role); err != nil {
			return err
		}
	}
	srv, err := mcpserve.New(mcpserve.Options{Memory: mm, Role: role, Version: o.Version, Logger: log})
	if err != nil {
		return err
	}
	mm.changed = func(paths []string) { srv.Refresh(ctx, paths) }
	t := &mcp.IOTransport{Reader: io.NopCloser(o.Stdin), Writer: nopWriteCloser{o.Stdout}, MaxLineLength: mcpserve.DefaultMaxBody}
	if err := srv.MCP().Run(ctx, t); err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpMemory is the stdio server's memory: the running app through its
// gateway (as the role, `as`; the app's guard checks and audits) when one
// serves this workspace, else the workspace opened here for each call
// (atrium.OpenLocalMemory, released after the call, so that an app that
// starts meanwhile gets the index: it waits for it up to 5 s).
type mcpMemory struct {
	layout paths.Layout
	port   int
	o      Options
	log    *slog.Logger
	// changed is called with the paths of a memory.changed event of the
	// app (nil: none).
	changed func(paths []string)

	mu     sync.Mutex
	remote *remoteMemory // the app's gateway while connected
	local  *mcpserve.Local
}

// backend returns the app's gateway when an app serves the workspace
// (reconnecting when the last connection ended), else the local engine.
func (m *mcpMemory) backend(ctx context.Context) (mcpserve.Memory, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.remote != nil {
		select {
		case <-m.remote.c.Done():
			m.remote.Close()
			m.remote = nil
		default:
			return mcpRemote{m.remote}, nil
		}
	}
	if _, err := atrium.ReadGatewayInfo(m.layout.GatewayFile()); err == nil || m.port != 0 {
		if r, err := dialApp(ctx, m.layout, m.port, m.o); err == nil {
			m.remote = &r
			go m.watch(r)
			return mcpRemote{m.remote}, nil
		}
	}
	if m.local == nil {
		l, err := mcpserve.NewLocal(mcpserve.LocalOptions{Sync: true, Acquire: m.acquire})
		if err != nil {
			return nil, err
		}
		m.local = l
	}
	return m.local, nil
}

// acquire opens the workspace for one call; memory.ErrLocked means an app
// took it since backend looked: the call fails and the next one asks it.
func (m *mcpMemory) acquire(context.Context) (mcpserve.Engine, error) {
	l, err := atrium.OpenLocalMemory(m.layout, m.o.Getenv, m.log)
	if err != nil {
		return mcpserve.Engine{}, err
	}
	return mcpserve.Engine{Memory: l.Manager, Guard: l.Guard, Release: l.Close}, nil
}

// watch passes the app's memory.changed events to changed until the
// connection ends.
func (m *mcpMemory) watch(r remoteMemory) {
	for ev := range r.c.Events() {
		if ev.Event != "memory.changed" || m.changed == nil {
			continue
		}
		var ch memory.ChangeEvent
		if err := json.Unmarshal(ev.Payload, &ch); err == nil {
			m.changed(ch.Paths)
		}
	}
}

func (m *mcpMemory) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.remote != nil {
		m.remote.Close()
		m.remote = nil
	}
}

// knownRole checks that role is a role of the workspace.
func (m *mcpMemory) knownRole(ctx context.Context, role string) error {
	b, err := openMemory(ctx, m.layout, m.port, m.o)
	if err != nil {
		return err
	}
	defer b.Close()
	return knownRole(ctx, b, role)
}

func (m *mcpMemory) Search(ctx context.Context, role string, o memory.SearchOptions) (memory.SearchResponse, error) {
	b, err := m.backend(ctx)
	if err != nil {
		return memory.SearchResponse{}, err
	}
	return b.Search(ctx, role, o)
}
func (m *mcpMemory) Get(ctx context.Context, role string, o memory.GetOptions) (mcpserve.GetResult, error) {
	b, err := m.backend(ctx)
	if err != nil {
		return mcpserve.GetResult{}, err
	}
	return b.Get(ctx, role, o)
}
func (m *mcpMemory) Write(ctx context.Context, role string, r memory.WriteRequest) (memory.WriteResult, error) {
	b, err := m.backend(ctx)
	if err != nil {
		return memory.WriteResult{}, err
	}
	return b.Write(ctx, role, r)
}
func (m *mcpMemory) Note(ctx context.Context, role, text string) (memory.WriteResult, error) {
	b, err := m.backend(ctx)
	if err != nil {
		return memory.WriteResult{}, err
	}
	return b.Note(ctx, role, text)
}
func (m *mcpMemory) Files(ctx context.Context, role string) ([]memory.FileInfo, error) {
	b, err := m.backend(ctx)
	if err != nil {
		return nil, err
	}
	return b.Files(ctx, role)
}

// mcpRemote is mcpserve.Memory over the app's gateway: every call `as` the
// role (api.AsAuthenticated for a client without one), so the app's guard
// checks and audits it.
type mcpRemote struct{ r *remoteMemory }

func (m mcpRemote) Search(ctx context.Context, role string, o memory.SearchOptions) (memory.SearchResponse, error) {
	return m.r.Search(ctx, role, o)
}
func (m mcpRemote) Get(ctx context.Context, role string, o memory.GetOptions) (res mcpserve.GetResult, err error) {
	return res, m.r.call(ctx, "memory.get", struct {
		memory.GetOptions
		As string `json:"as"`
	}{o, role}, &res)
}
func (m mcpRemote) Write(ctx context.Context, role string, w memory.WriteRequest) (memory.WriteResult, error) {
	return m.r.Write(ctx, role, w)
}
func (m mcpRemote) Note(ctx context.Context, role, text string) (res memory.WriteResult, err error) {
	if role == mcpserve.Authenticated {
		return res, mcpserve.ErrNoDailyLog
	}
	return res, m.r.call(ctx, "memory.note", map[string]string{"text": text, "role": role, "as": role}, &res)
}
func (m mcpRemote) Files(ctx context.Context, role string) ([]memory.FileInfo, error) {
	var out struct {
		Files []memory.FileInfo `json:"files"`
	}
	err := m.r.call(ctx, "memory.files", map[string]string{"as": role}, &out)
	return out.Files, err
}

// runMCPToken is `atrium mcp token create|list|revoke`: through the
// running app's mcp.token.* methods when one serves the workspace, else
// in state.db directly (audited the same way).
func runMCPToken(ctx context.Context, args []string, o Options) error {
	sub, args := takeCommand(args)
	if ok, err := group("mcp token", sub, args, o); !ok {
		return err
	}
	var c common
	fs := newFlagSet("mcp token "+sub, o)
	c.register(fs)
	c.registerJSON(fs)
	var as, name *string
	if sub == "create" {
		as = fs.String("as", "", "the `role` the client acts as (required; authenticated: no role)")
		name = fs.String("name", "", "the client's `name`, e.g. \"Claude Desktop\" (required)")
	}
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	switch {
	case sub == "create" && (*as == "" || strings.TrimSpace(*name) == "" || len(pos) > 0):
		return fmt.Errorf("%w: mcp token create needs --as ROLE and --name NAME", errUsage)
	case sub == "create":
		if err := mcpserve.ValidRole(*as); err != nil {
			return fmt.Errorf("%w: --as %q: %v", errUsage, *as, err)
		}
	case sub == "list" && len(pos) > 0:
		return fmt.Errorf("%w: mcp token list takes no arguments", errUsage)
	case sub == "revoke" && len(pos) != 1:
		return fmt.Errorf("%w: mcp token revoke needs one TOKEN_ID (atrium mcp token list shows them)", errUsage)
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
	if sub == "create" && *as != mcpserve.Authenticated {
		if err := knownRole(ctx, m, *as); err != nil {
			return err
		}
	}
	var tok tokenOps
	switch b := m.(type) {
	case remoteMemory:
		tok = appTokens{b}
	case localMemory:
		ts, err := b.m.MCPTokens(ctx)
		if err != nil {
			return err
		}
		tok = localTokens{ts, b.m}
	default:
		return fmt.Errorf("mcp token: no store")
	}
	switch sub {
	case "create":
		secret, info, err := tok.create(ctx, strings.TrimSpace(*name), *as)
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, map[string]any{"token": secret, "info": info})
		}
		fmt.Fprintf(o.Stdout, "Token %s for %q, acting as %s (shown once; only its hash is kept):\n%s\n", info.ID, info.Name, info.Role, secret)
		return nil
	case "list":
		ts, err := tok.list(ctx)
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, map[string]any{"tokens": ts})
		}
		tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tROLE\tCREATED\tLAST USED\tSTATE")
		for _, t := range ts {
			state := "live"
			if t.RevokedMs != 0 {
				state = "revoked " + msTime(t.RevokedMs)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, msTime(t.CreatedMs), msTime(t.LastUsed), state)
		}
		return tw.Flush()
	default: // revoke
		info, err := tok.revoke(ctx, pos[0])
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(o.Stdout, info)
		}
		fmt.Fprintf(o.Stdout, "Revoked token %s (%q, %s).\n", info.ID, info.Name, info.Role)
		return nil
	}
}

func msTime(ms int64) string {
	if ms == 0 {
		return "never"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04")
}

type tokenOps interface {
	create(ctx context.Context, name, role string) (string, mcpserve.TokenInfo, error)
	list(ctx context.Context) ([]mcpserve.TokenInfo, error)
	revoke(ctx context.Context, id string) (mcpserve.TokenInfo, error)
}

// appTokens asks the running app (admin only: the operator token).
type appTokens struct{ r remoteMemory }

func (a appTokens) create(ctx context.Context, name, role string) (string, mcpserve.TokenInfo, error) {
	var out struct {
		Token string             `json:"token"`
		Info  mcpserve.TokenInfo `json:"info"`
	}
	err := a.r.call(ctx, atrium.MethodMCPTokenCreate, map[string]string{"name": name, "role": role}, &out)
	return out.Token, out.Info, err
}
func (a appTokens) list(ctx context.Context) ([]mcpserve.TokenInfo, error) {
	var out struct {
		Tokens []mcpserve.TokenInfo `json:"tokens"`
	}
	return out.Tokens, a.r.call(ctx, atrium.MethodMCPTokenList, nil, &out)
}
func (a appTokens) revoke(ctx context.Context, id string) (info mcpserve.TokenInfo, err error) {
	return info, a.r.call(ctx, atrium.MethodMCPTokenRevoke, map[string]string{"id": id}, &info)
}

// localTokens works in state.db, audited as the person at this machine.
type localTokens struct {
	ts *mcpserve.Tokens
	m  *atrium.LocalMemory
}

func (l localTokens) create(ctx context.Context, name, role string) (string, mcpserve.TokenInfo, error) {
	secret, info, err := l.ts.Create(ctx, name, role)
	if err != nil {
		return "", info, err
	}
	return secret, info, l.m.Guard.Record(acl.Principal{Admin: true}, atrium.MethodMCPTokenCreate, "token "+info.ID+" as "+info.Role, true, "client "+info.Name)
}
func (l localTokens) list(ctx context.Context) ([]mcpserve.TokenInfo, error) { return l.ts.List(ctx) }
func (l localTokens) revoke(ctx context.Context, id string) (mcpserve.TokenInfo, error) {
	info, err := l.ts.Revoke(ctx, id)
	if err != nil {
		return info, err
	}
	return info, l.m.Guard.Record(acl.Principal{Admin: true}, atrium.MethodMCPTokenRevoke, "token "+info.ID+" as "+info.Role, true, "client "+info.Name)
}
