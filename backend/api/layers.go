package api

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
)

// This file binds the memory layers (SPEC §5.2; docs/PROTOCOL.md):
// profiles.create (cold start), roles.list, sessions.create, sessions.list,
// sessions.archive and memory.promote.

// Layers is what the layer methods need (implemented by *memory.Manager).
type Layers interface {
	CreateRole(ctx context.Context, r memory.CreateRoleRequest) (memory.CreateRoleResult, error)
	ListRoles(ctx context.Context) ([]memory.RoleInfo, error)
	CreateSession(ctx context.Context, r memory.CreateSessionRequest) (memory.Session, error)
	ListSessions(ctx context.Context, archived bool) ([]memory.Session, error)
	ArchiveSession(ctx context.Context, id string) (memory.Session, error)
	Promote(ctx context.Context, r memory.PromoteRequest) (memory.PromoteResult, error)
}

// LayerMethods lists the methods registerLayers adds.
var LayerMethods = []string{"profiles.create", "roles.list", "sessions.create", "sessions.list", "sessions.archive", "memory.promote"}

// rescanner is an Instances that can rebuild its profile index at once
// (worker.Pool): a role just created is then listed by profiles.list and
// may be spawned without waiting for the index's next scan.
type rescanner interface{ Rescan() error }

func registerLayers(g *gateway.Server, l Layers, mem Memory, ac *access, inst Instances) {
	gd := ac.g
	g.Handle("profiles.create", gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Role         string   `json:"role"`
			Description  string   `json:"description"`
			Capabilities []string `json:"capabilities"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		_, w, err := writer(ctx, ac, c, "profiles.create "+p.Role)
		if err != nil {
			return nil, err
		}
		if w != memory.AdminWriter {
			return nil, gateway.Errorf(gateway.CodeForbidden, "profiles.create: only admin creates roles")
		}
		if strings.TrimSpace(p.Role) == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "profiles.create: role is required")
		}
		res, err := l.CreateRole(ctx, memory.CreateRoleRequest{Role: p.Role, Description: p.Description, Capabilities: p.Capabilities, Writer: w})
		if err != nil {
			return nil, mapErr(err)
		}
		if r, ok := inst.(rescanner); ok {
			if err := r.Rescan(); err != nil {
				slog.Warn("profile index rescan failed", "role", res.Role, "error", err.Error())
			}
		}
		return res, nil
	})
	g.Handle("roles.list", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		ctx, who, err := principal(ctx, ac, c)
		if err != nil {
			return nil, err
		}
		roles, err := l.ListRoles(ctx)
		if err != nil {
			return nil, mapErr(err)
		}
		if !who.Admin {
			// Another scope counts only the files it may read.
			files, err := readableFiles(ctx, mem, gd, who)
			if err != nil {
				return nil, mapErr(err)
			}
			n := map[string]int{}
			for _, f := range files {
				if f.Layer == memory.LayerRole {
					n[f.Role]++
				}
			}
			for i := range roles {
				roles[i].Files = n[roles[i].Role]
			}
		}
		return map[string]any{"roles": roles}, nil
	})
	g.Handle("sessions.create", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p memory.CreateSessionRequest
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		ctx, w, err := writer(ctx, ac, c, "sessions.create")
		if err != nil {
			return nil, err
		}
		who, _ := guard.PrincipalFrom(ctx)
		target := "sessions.create owner " + p.Owner
		if err := sessionOwner(gd, who, c, p.Owner, target); err != nil {
			return nil, err
		}
		p.Writer = w
		s, err := l.CreateSession(ctx, p)
		if err != nil {
			return nil, mapErr(err)
		}
		if gd != nil {
			if err := gd.Record(who, "sessions.create", s.Path+"/"+memory.SessionRecordName, true, "owner "+p.Owner); err != nil {
				return nil, mapErr(err)
			}
		}
		return s, nil
	})
	g.Handle("sessions.list", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Archived bool `json:"archived"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		_, who, err := principal(ctx, ac, c)
		if err != nil {
			return nil, err
		}
		list, err := l.ListSessions(ctx, p.Archived)
		if err != nil {
			return nil, mapErr(err)
		}
		if gd != nil {
			if list, err = readableSessions(gd, who, list); err != nil {
				return nil, mapErr(err)
			}
		}
		return map[string]any{"sessions": list}, nil
	})
	g.Handle("sessions.archive", gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ID string `json:"id"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if _, w, err := writer(ctx, ac, c, "sessions.archive "+p.ID); err != nil {
			return nil, err
		} else if w != memory.AdminWriter {
			return nil, gateway.Errorf(gateway.CodeForbidden, "sessions.archive: only admin archives sessions")
		}
		if p.ID == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "sessions.archive: id is required")
		}
		s, err := l.ArchiveSession(ctx, p.ID)
		return s, mapErr(err)
	})
	g.Handle("memory.promote", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p memory.PromoteRequest
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		ctx, w, err := writer(ctx, ac, c, "promote "+p.Path)
		if err != nil {
			return nil, err
		}
		if gd != nil {
			// The source is read by the writer: checked and audited here
			// (the target's write by the engine's Authorize hook).
			who, _ := guard.PrincipalFrom(ctx)
			src := memory.SessionsDir + "/" + p.Session + "/" + strings.TrimPrefix(p.Path, memory.SessionsDir+"/"+p.Session+"/")
			if _, err := gd.Check(who, "promote", acl.Read, src); err != nil {
				return nil, mapErr(err)
			}
		}
		p.Writer = w
		res, err := l.Promote(ctx, p)
		return res, mapErr(err)
	})
}

// readableSessions keeps the sessions whose record (session.md) who may
// read, each with only its readable files, and audits the listing as one
// entry (SPEC §5.1: a session's id and files are its owner's).
func readableSessions(gd *guard.Guard, who acl.Principal, list []memory.Session) ([]memory.Session, error) {
	out := make([]memory.Session, 0, len(list))
	for _, s := range list {
		if !gd.Readable(who, s.Path+"/session.md") {
			continue
		}
		files := make([]string, 0, len(s.Files))
		for _, f := range s.Files {
			if gd.Readable(who, s.Path+"/"+f) {
				files = append(files, f)
			}
		}
		s.Files = files
		out = append(out, s)
	}
	reason := fmt.Sprintf("%d listed, %d hidden", len(out), len(list)-len(out))
	if err := gd.Record(who, "sessions.list", "sessions", true, reason); err != nil {
		return nil, err
	}
	return out, nil
}

// sessionOwner checks that who may create a session owned by owner: admin
// (the person, or a device scoped admin) for any role, a role (`as`, a
// device scoped to it, an agent) only for itself, `authenticated` (a
// device scoped so, a node connection) for none — the session record's
// write rule (SPEC §5.1: `sessions/*/*` is written by `$session_owner`)
// is the owner's, so creating a session for another role would write
// where who may not. A refusal is FORBIDDEN and audited (target) when the
// guard runs.
func sessionOwner(gd *guard.Guard, who acl.Principal, c *gateway.Call, owner, target string) error {
	var reason string
	switch {
	case who.Admin:
		return nil
	case who.Role == "":
		reason = "a device scoped authenticated creates no sessions"
	case who.Role != owner:
		reason = fmt.Sprintf("role %s creates sessions only for itself", who.Role)
	default:
		return nil
	}
	if gd != nil {
		return mapErr(gd.Deny(who, c.Method, target, reason))
	}
	return gateway.Errorf(gateway.CodeForbidden, "%s: %s", c.Method, reason)
}
