package api

import (
	"context"
	"errors"
	"strings"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/collab"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/route"
)

// This file binds SPEC §5.4 (docs/PROTOCOL.md "Routing and
// collaboration"): collab.request, collab.accept, collab.complete,
// collab.list, collab.write, collab.view, collab.decline, the person's
// collab.decide and collab.show (issue 24 item 4), and chat.route.
//
// Who a collab call acts as is resolved like every memory method
// (principal in access.go): an operator connection acts as the role named
// by `as` (a collaboration is between roles); without `as` it is admin
// (the person), which may list, show and decide but not act for a party;
// a paired operator device acts as its scope (admin scope: the person); a
// node connection is `authenticated` and is refused. Package collab
// checks, audits and persists everything.

// CollabMethods lists the methods registerCollab adds.
var CollabMethods = []string{"collab.request", "collab.accept", "collab.complete", "collab.list", "collab.write", "collab.view",
	"collab.decline", "collab.decide", "collab.show"}

// CollabEvent is the event broadcast after every change of a
// collaboration (payload: the Collaboration with its history, never a
// token); the wiring sends it from collab.Options.OnChange. Paired devices
// below admin scope do not get it (deviceEvent).
const CollabEvent = "collab.changed"

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

// asCaller registers method of kind: decode its params P, check them (when P has a
// check method, e.g. through collabAuth), resolve who the call acts as, call
// fn and map its error to a gateway code.
func asCaller[P any](g *gateway.Server, ac *access, method string, kind gateway.Kind, fn func(ctx context.Context, who acl.Principal, p *P) (any, error)) {
	g.Handle(method, kind, func(ctx context.Context, c *gateway.Call) (any, error) {
		var p P
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if v, ok := any(&p).(interface{ check(string) error }); ok {
			if err := v.check(c.Method); err != nil {
				return nil, err
			}
		}
		ctx, who, err := principal(ctx, ac, c)
		if err != nil {
			return nil, err
		}
		res, err := fn(ctx, who, &p)
		if err != nil {
			return nil, mapErr(err)
		}
		return res, nil
	})
}

func registerCollab(g *gateway.Server, svc *collab.Service, ac *access) {
	asCaller(g, ac, "collab.request", gateway.Write(gateway.Operators), func(ctx context.Context, who acl.Principal, p *collab.Request) (any, error) {
		return svc.Request(ctx, who, *p)
	})
	asCaller(g, ac, "collab.accept", gateway.Write(gateway.Operators), func(ctx context.Context, who acl.Principal, p *collabAuth) (any, error) {
		return svc.Accept(ctx, who, p.ID, p.Token)
	})
	type completeParams struct {
		collabAuth
		Result *collab.Result `json:"result"`
	}
	asCaller(g, ac, "collab.complete", gateway.Write(gateway.Operators), func(ctx context.Context, who acl.Principal, p *completeParams) (any, error) {
		if p.Result == nil {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "collab.complete: result {output, importance, artifacts} is required")
		}
		return svc.Complete(ctx, who, p.ID, p.Token, *p.Result)
	})
	asCaller(g, ac, "collab.list", gateway.Read(gateway.Operators), func(ctx context.Context, who acl.Principal, p *collab.ListFilter) (any, error) {
		list, err := svc.List(ctx, who, *p)
		if err != nil {
			return nil, err
		}
		return map[string]any{"collaborations": list}, nil
	})
	type writeParams struct {
		collabAuth
		collab.WriteRequest
	}
	asCaller(g, ac, "collab.write", gateway.Write(gateway.Operators), func(ctx context.Context, who acl.Principal, p *writeParams) (any, error) {
		return svc.Write(ctx, who, p.ID, p.Token, p.WriteRequest)
	})
	type viewParams struct {
		collabAuth
		Query      string `json:"query"`
		MaxResults int    `json:"maxResults"`
	}
	asCaller(g, ac, "collab.view", gateway.Read(gateway.Operators), func(ctx context.Context, who acl.Principal, p *viewParams) (any, error) {
		return svc.View(ctx, who, p.ID, p.Token, p.Query, p.MaxResults)
	})
	type declineParams struct {
		collabAuth
		Reason string `json:"reason"`
	}
	asCaller(g, ac, "collab.decline", gateway.Write(gateway.Operators), func(ctx context.Context, who acl.Principal, p *declineParams) (any, error) {
		c, err := svc.Decline(ctx, who, p.ID, p.Token, p.Reason)
		if err != nil {
			return nil, err
		}
		return map[string]any{"collaboration": c}, nil
	})
	type decideParams struct {
		ID       string `json:"collabId"`
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
	asCaller(g, ac, "collab.decide", gateway.Write(gateway.Operators), func(ctx context.Context, who acl.Principal, p *decideParams) (any, error) {
		if p.ID == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "collab.decide: collabId is required")
		}
		c, err := svc.Decide(ctx, who, p.ID, p.Decision, p.Reason)
		if err != nil {
			return nil, err
		}
		return map[string]any{"collaboration": c}, nil
	})
	type showParams struct {
		ID string `json:"collabId"`
	}
	asCaller(g, ac, "collab.show", gateway.Read(gateway.Operators), func(ctx context.Context, who acl.Principal, p *showParams) (any, error) {
		if p.ID == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "collab.show: collabId is required")
		}
		return svc.Show(ctx, who, p.ID)
	})
}

// registerRoute binds chat.route {text, current?} → route.Decision: the
// roles and their capabilities and descriptions come from the workspace
// (roles.list), the similarity step uses emb (nil: skipped); current
// defaults to role main.
func registerRoute(g *gateway.Server, l Layers, emb embed.Embedder, threshold float64) {
	g.Handle("chat.route", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
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
		known := p.Current == memory.MainRole // main always exists (the OpenClaw layout's role)
		for _, ri := range infos {
			roles = append(roles, route.Role{Name: ri.Role, Description: ri.Description, Capabilities: ri.Capabilities})
			known = known || ri.Role == p.Current
		}
		if !known {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "chat.route: current %q is not a role of this workspace", p.Current)
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
