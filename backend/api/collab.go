package api

import (
	"context"
	"errors"
	"strings"

	"github.com/atrium-dev/atrium/backend/collab"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/route"
)

// This file binds SPEC §5.4 (docs/PROTOCOL.md "Routing and
// collaboration"): collab.request, collab.accept, collab.complete,
// collab.list, collab.write, collab.view, and chat.route.
//
// Who a collab call acts as is resolved like every memory method
// (principal in access.go): an operator connection acts as the role named
// by `as` (a collaboration is between roles); without `as` it is admin,
// which may only list; a node connection is `authenticated` and is
// refused. Package collab checks, audits and persists everything.

// CollabMethods lists the methods registerCollab adds.
var CollabMethods = []string{"collab.request", "collab.accept", "collab.complete", "collab.list", "collab.write", "collab.view"}

// RouteMethods lists the methods registerRoute adds.
var RouteMethods = []string{"chat.route"}

// collabAuth are the credentials of a call on one collaboration.
type collabAuth struct {
	ID    string `json:"collabId"`
	Token string `json:"token"`
}

func (a collabAuth) check(method string) error {
	if strings.TrimSpace(a.ID) == "" {
		return gateway.Errorf(gateway.CodeInvalidRequest, "%s: collabId is required", method)
	}
	return nil
}

func registerCollab(g *gateway.Server, svc *collab.Service, gd *guard.Guard) {
	g.Handle("collab.request", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p collab.Request
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		ctx, who, err := principal(ctx, gd, c)
		if err != nil {
			return nil, err
		}
		res, err := svc.Request(ctx, who, p)
		if err != nil {
			return nil, mapErr(err)
		}
		return res, nil
	})
	g.Handle("collab.accept", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p collabAuth
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if err := p.check(c.Method); err != nil {
			return nil, err
		}
		ctx, who, err := principal(ctx, gd, c)
		if err != nil {
			return nil, err
		}
		res, err := svc.Accept(ctx, who, p.ID, p.Token)
		if err != nil {
			return nil, mapErr(err)
		}
		return res, nil
	})
	g.Handle("collab.complete", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			collabAuth
			Result *collab.Result `json:"result"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if err := p.check(c.Method); err != nil {
			return nil, err
		}
		if p.Result == nil {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "collab.complete: result {output, importance, artifacts} is required")
		}
		ctx, who, err := principal(ctx, gd, c)
		if err != nil {
			return nil, err
		}
		res, err := svc.Complete(ctx, who, p.ID, p.Token, *p.Result)
		if err != nil {
			return nil, mapErr(err)
		}
		return res, nil
	})
	g.Handle("collab.list", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p collab.ListFilter
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		ctx, who, err := principal(ctx, gd, c)
		if err != nil {
			return nil, err
		}
		list, err := svc.List(ctx, who, p)
		if err != nil {
			return nil, mapErr(err)
		}
		return map[string]any{"collaborations": list}, nil
	})
	g.Handle("collab.write", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			collabAuth
			collab.WriteRequest
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if err := p.check(c.Method); err != nil {
			return nil, err
		}
		ctx, who, err := principal(ctx, gd, c)
		if err != nil {
			return nil, err
		}
		res, err := svc.Write(ctx, who, p.ID, p.Token, p.WriteRequest)
		if err != nil {
			return nil, mapErr(err)
		}
		return res, nil
	})
	g.Handle("collab.view", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			collabAuth
			Query      string `json:"query"`
			MaxResults int    `json:"maxResults"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if err := p.check(c.Method); err != nil {
			return nil, err
		}
		ctx, who, err := principal(ctx, gd, c)
		if err != nil {
			return nil, err
		}
		v, err := svc.View(ctx, who, p.ID, p.Token, p.Query, p.MaxResults)
		if err != nil {
			return nil, mapErr(err)
		}
		return v, nil
	})
}

// registerRoute binds chat.route {text, current?} → route.Decision: the
// roles and their capabilities and descriptions come from the workspace
// (roles.list), the similarity step uses emb (nil: skipped); current
// defaults to role main.
func registerRoute(g *gateway.Server, l Layers, emb embed.Embedder, threshold float64) {
	g.Handle("chat.route", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Text    string `json:"text"`
			Current string `json:"current"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if strings.TrimSpace(p.Text) == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "chat.route: text is empty")
		}
		if p.Current == "" {
			p.Current = memory.MainRole
		}
		infos, err := l.ListRoles(ctx)
		if err != nil {
			return nil, mapErr(err)
		}
		roles := make([]route.Role, 0, len(infos))
		for _, ri := range infos {
			roles = append(roles, route.Role{Name: ri.Role, Description: ri.Description, Capabilities: ri.Capabilities})
		}
		d, err := route.Route(ctx, p.Text, p.Current, roles, route.Options{Embedder: emb, Threshold: threshold})
		if err != nil {
			return nil, mapErr(err)
		}
		if d.Candidates == nil {
			d.Candidates = []string{}
		}
		return d, nil
	})
}

// collabCode maps the errors of packages collab and route ("" when err is
// neither's).
func collabCode(err error) string {
	switch {
	case errors.Is(err, collab.ErrNotFound):
		return gateway.CodeNotFound
	case errors.Is(err, collab.ErrForbidden), errors.Is(err, collab.ErrExpired):
		return gateway.CodeForbidden
	case errors.Is(err, collab.ErrState):
		return gateway.CodeConflict
	case errors.Is(err, collab.ErrInvalidInput), errors.Is(err, route.ErrInvalidInput):
		return gateway.CodeInvalidRequest
	}
	return ""
}
