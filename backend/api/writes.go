package api

import (
	"context"
	"fmt"
	"strings"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/guard"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
)

// This file binds memory.write, memory.note, conflicts.list and
// conflicts.resolve (SPEC §4.3, §5.3; docs/PROTOCOL.md).

// writer is the memory writer of a gateway call and ctx carrying its
// principal (access.go): an operator connection writes as admin, or as
// the role named by `as`; node connections do not write memory
// (FORBIDDEN, audited). target names the file for the audit entry of a
// refused device.
func writer(ctx context.Context, ac *access, c *gateway.Call, target string) (context.Context, string, error) {
	ctx, p, err := principal(ctx, ac, c)
	if err != nil {
		return ctx, "", err
	}
	if err := deviceWrite(ac.g, c, p, target); err != nil {
		return ctx, "", err
	}
	return ctx, writerOf(p), nil
}

// writePath checks a write before the engine sees it: the path is
// canonicalised and the write checked and audited (one entry), so that a
// path trick or a forbidden file is refused and recorded whatever the
// engine would say about the path; ctx then tells the engine's Authorize
// hook that this write was checked.
func writePath(ctx context.Context, g *guard.Guard, raw string) (context.Context, string, error) {
	if g == nil {
		return ctx, raw, nil
	}
	p, _ := guard.PrincipalFrom(ctx)
	rel, err := g.Check(p, memory.ActionWrite, acl.Write, raw)
	if err != nil {
		return ctx, "", mapErr(err)
	}
	return guard.WithChecked(ctx, rel), rel, nil
}

func registerWrites(g *gateway.Server, mem Memory, ac *access) {
	gd := ac.g
	g.Handle("memory.write", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Path        string `json:"path"`
			Content     string `json:"content"`
			Mode        string `json:"mode"`
			BaseVersion string `json:"baseVersion"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		ctx, w, err := writer(ctx, ac, c, p.Path)
		if err != nil {
			return nil, err
		}
		if ctx, p.Path, err = writePath(ctx, gd, p.Path); err != nil {
			return nil, err
		}
		res, err := mem.Write(ctx, memory.WriteRequest{Path: p.Path, Content: p.Content, Mode: p.Mode, BaseVersion: p.BaseVersion, Writer: w})
		return res, mapErr(err)
	})
	g.Handle("memory.note", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Text string `json:"text"`
			Role string `json:"role"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		ctx, w, err := writer(ctx, ac, c, "note "+p.Role)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(p.Role) == "" {
			p.Role = memory.MainRole
		}
		if gd != nil {
			// The note's file is built from the role name: a role that is
			// not one path segment (a path trick) is refused and audited.
			if err := acl.ValidateRole(p.Role); err != nil {
				who, _ := guard.PrincipalFrom(ctx)
				return nil, mapErr(gd.DenyInvalid(who, "note", p.Role, err.Error()))
			}
		}
		res, err := mem.Note(ctx, memory.NoteRequest{Role: p.Role, Text: p.Text, Writer: w})
		return res, mapErr(err)
	})
	g.Handle("conflicts.list", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p memory.ConflictFilter
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		ctx, who, err := principal(ctx, ac, c)
		if err != nil {
			return nil, err
		}
		list, err := mem.ListConflicts(ctx, p)
		if err != nil {
			return nil, mapErr(err)
		}
		if gd != nil {
			// A conflict record holds a file's text: only files the caller
			// may read (one audit entry for the listing).
			kept := list[:0]
			for _, cf := range list {
				if gd.Readable(who, cf.Path) {
					kept = append(kept, cf)
				}
			}
			reason := fmt.Sprintf("%d listed, %d hidden", len(kept), len(list)-len(kept))
			if err := gd.Record(who, "conflicts", "conflicts", true, reason); err != nil {
				return nil, mapErr(err)
			}
			list = kept
		}
		if list == nil {
			list = []memory.Conflict{}
		}
		return map[string]any{"conflicts": list}, nil
	})
	g.Handle("conflicts.resolve", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ID      int64  `json:"id"`
			Choice  string `json:"choice"`
			Content string `json:"content"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if p.ID <= 0 {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "conflicts.resolve: id is required")
		}
		ctx, _, err := writer(ctx, ac, c, fmt.Sprintf("conflict %d", p.ID))
		if err != nil {
			return nil, err
		}
		done, err := mem.ResolveConflict(ctx, p.ID, memory.Resolution{Choice: p.Choice, Content: p.Content})
		if err != nil {
			return nil, mapErr(err)
		}
		return map[string]any{"conflict": done}, nil
	})
}

// getWithVersion serves memory.get: the file's version is read before its
// text, so that a write based on that version is never applied over a text
// the caller has not seen (a change in between makes the version stale).
// The version is omitted when the app keeps no versions.
func getWithVersion(ctx context.Context, mem Memory, p memory.GetOptions) (any, error) {
	v, verr := mem.Version(ctx, p.Path)
	res, err := mem.Get(ctx, p)
	if err != nil {
		return nil, mapErr(err)
	}
	if verr != nil {
		return res, nil
	}
	return struct {
		memory.GetResponse
		Version string `json:"version"`
	}{res, v}, nil
}
