package api

import (
	"context"
	"strings"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
)

// This file binds memory.write, memory.note, conflicts.list and
// conflicts.resolve (SPEC §4.3, §5.3; docs/PROTOCOL.md).

// writer is the principal a gateway call writes as. Today every operator
// connection is the person at the desktop (SPEC §5.1 `admin`); node
// connections do not write memory (FORBIDDEN). The ACL wiring will name
// roles here (the `as` parameter of issue 4).
func writer(c *gateway.Call) (string, error) {
	if c.Role != gateway.RoleOperator {
		return "", gateway.Errorf(gateway.CodeForbidden, "%s: only operator connections may write memory", c.Method)
	}
	return memory.AdminWriter, nil
}

func registerWrites(g *gateway.Server, mem Memory) {
	g.Handle("memory.write", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Path        string `json:"path"`
			Content     string `json:"content"`
			Mode        string `json:"mode"`
			BaseVersion string `json:"baseVersion"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		w, err := writer(c)
		if err != nil {
			return nil, err
		}
		res, err := mem.Write(ctx, memory.WriteRequest{Path: p.Path, Content: p.Content, Mode: p.Mode, BaseVersion: p.BaseVersion, Writer: w})
		return res, mapErr(err)
	})
	g.Handle("memory.note", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Text string `json:"text"`
			Role string `json:"role"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		w, err := writer(c)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(p.Role) == "" {
			p.Role = memory.MainRole
		}
		res, err := mem.Note(ctx, memory.NoteRequest{Role: p.Role, Text: p.Text, Writer: w})
		return res, mapErr(err)
	})
	g.Handle("conflicts.list", func(ctx context.Context, c *gateway.Call) (any, error) {
		var p memory.ConflictFilter
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		list, err := mem.ListConflicts(ctx, p)
		if err != nil {
			return nil, mapErr(err)
		}
		if list == nil {
			list = []memory.Conflict{}
		}
		return map[string]any{"conflicts": list}, nil
	})
	g.Handle("conflicts.resolve", func(ctx context.Context, c *gateway.Call) (any, error) {
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
		if _, err := writer(c); err != nil {
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
