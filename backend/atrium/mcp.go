package atrium

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/mcpserve"
)

// Gateway methods of the MCP clients' tokens (docs/PROTOCOL.md "MCP"):
// the person at this machine only (gateway.Admin).
const (
	MethodMCPTokenCreate = "mcp.token.create"
	MethodMCPTokenList   = "mcp.token.list"
	MethodMCPTokenRevoke = "mcp.token.revoke"
)

// newMCP builds the MCP server of /mcp (package mcpserve) over the app's
// memory engine and guard, its tokens in state.db, and the token methods.
func (a *App) newMCP(ctx context.Context, version string, log *slog.Logger) error {
	tokens, err := mcpserve.OpenTokens(ctx, a.db, mcpserve.TokensOptions{})
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	local, err := mcpserve.NewLocal(mcpserve.LocalOptions{Acquire: func(context.Context) (mcpserve.Engine, error) {
		return mcpserve.Engine{Memory: a.Memory, Guard: a.Guard}, nil
	}})
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	h, err := mcpserve.NewHTTP(mcpserve.HTTPOptions{Memory: local, Tokens: tokens, Version: version, Logger: log})
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	a.MCPTokens = tokens
	a.mcp.Store(h)
	a.registerMCPTokens(tokens)
	return nil
}

// serveMCP is the gateway's Options.MCP: the MCP handler once built (404
// before, and in an app waiting for the first start's choice).
func (a *App) serveMCP(w http.ResponseWriter, r *http.Request) {
	h := a.mcp.Load()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h.ServeHTTP(w, r)
}

// mcpAuthorized is the gateway's Options.MCPAuthorized.
func (a *App) mcpAuthorized(ctx context.Context, authorization string) bool {
	h := a.mcp.Load()
	return h != nil && h.Authorized(ctx, authorization)
}

// runMCP delivers memory changes to the MCP servers' resources.
func (a *App) runMCP(ctx context.Context) error {
	if h := a.mcp.Load(); h != nil {
		return h.Run(ctx)
	}
	<-ctx.Done()
	return nil
}

// mcpChanged is the memory engine's change hook's MCP part.
func (a *App) mcpChanged(paths []string) {
	if h := a.mcp.Load(); h != nil {
		h.Notify(paths)
	}
}

// tokenParams are mcp.token.create's and mcp.token.revoke's params.
type tokenParams struct {
	Name string `json:"name"`
	Role string `json:"role"`
	ID   string `json:"id"`
}

// registerMCPTokens registers mcp.token.create, list and revoke for the
// person at this machine; creations and revocations are audited (never
// the secret).
func (a *App) registerMCPTokens(tokens *mcpserve.Tokens) {
	admin := func(c *gateway.Call) acl.Principal { return acl.Principal{Admin: true, IP: c.RemoteIP} }
	a.Gateway.Handle(MethodMCPTokenCreate, gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p tokenParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if p.Role == "" {
			p.Role = mcpserve.Authenticated
		}
		if err := a.checkMCPRole(ctx, p.Role); err != nil {
			_ = a.Guard.Record(admin(c), MethodMCPTokenCreate, "as "+p.Role, false, err.Error())
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "%s: %v", MethodMCPTokenCreate, err)
		}
		secret, info, err := tokens.Create(ctx, p.Name, p.Role)
		if errors.Is(err, mcpserve.ErrInvalidToken) {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "%s: %v", MethodMCPTokenCreate, err)
		}
		if err != nil {
			return nil, err
		}
		if err := a.Guard.Record(admin(c), MethodMCPTokenCreate, "token "+info.ID+" as "+info.Role, true, "client "+info.Name); err != nil {
			return nil, err
		}
		return struct {
			Token string             `json:"token"`
			Info  mcpserve.TokenInfo `json:"info"`
		}{secret, info}, nil
	})
	a.Gateway.Handle(MethodMCPTokenList, gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		ts, err := tokens.List(ctx)
		if err != nil {
			return nil, err
		}
		return struct {
			Tokens []mcpserve.TokenInfo `json:"tokens"`
		}{ts}, nil
	})
	a.Gateway.Handle(MethodMCPTokenRevoke, gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p tokenParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		info, err := tokens.Revoke(ctx, p.ID)
		if errors.Is(err, mcpserve.ErrTokenNotFound) {
			return nil, gateway.Errorf(gateway.CodeNotFound, "%s: %v", MethodMCPTokenRevoke, err)
		}
		if err != nil {
			return nil, err
		}
		if err := a.Guard.Record(admin(c), MethodMCPTokenRevoke, "token "+info.ID+" as "+info.Role, true, "client "+info.Name); err != nil {
			return nil, err
		}
		return info, nil
	})
}

// checkMCPRole checks that role is Authenticated or a role of the
// workspace (memory.Manager.ListRoles): a token for a mistyped role would
// read nothing and look like an empty memory.
func (a *App) checkMCPRole(ctx context.Context, role string) error {
	if err := mcpserve.ValidRole(role); err != nil {
		return err
	}
	if role == mcpserve.Authenticated {
		return nil
	}
	roles, err := a.Memory.ListRoles(ctx)
	if err != nil {
		return fmt.Errorf("list roles: %w", err)
	}
	for _, r := range roles {
		if r.Role == role {
			return nil
		}
	}
	return fmt.Errorf("%q is not a role of this workspace (a folder memory/roles/%s/, or main)", role, role)
}
