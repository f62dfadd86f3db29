package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
)

// Authenticated is the role a client acts as when it names none: what
// `authenticated` may do in the ACL (a paired device without a role). A
// token is never created for it; `atrium mcp` without --as runs as it.
const Authenticated = "authenticated"

// Writer is the memory writer name of writes made as Authenticated (the
// name the gateway gives a device scoped `authenticated`, api.DeviceWriter).
const Writer = "authenticated"

// ErrNoDailyLog: memory_note as Authenticated, which has no role and so no
// daily log (memory/roles/<role>/YYYY-MM-DD.md).
var ErrNoDailyLog = errors.New("mcpserve: a client without a role has no daily log (start it with a role)")

// GetResult is memory_get's answer: the file's workspace-relative path,
// its text (or the lines asked for) and its version, read before the text
// ("" for a file never written, or when the app keeps no versions); pass
// Version as memory_write's baseVersion.
type GetResult struct {
	Path    string `json:"path"`
	Text    string `json:"text"`
	Version string `json:"version,omitempty"`
}

// Memory is what the server needs of memory, always acting as role (a role
// of the workspace, or Authenticated). Every method checks the access with
// the ACL and writes the audit entries (SPEC §5.1) — Local through the
// guard, the CLI's gateway adapter through the running app's guard —
// and fails with an error wrapping memory.ErrForbidden for a refusal and
// memory.ErrInvalidPath for a path outside memory (absolute, "..", a
// symbolic link out) when it runs in this process; through the gateway
// the refusal's message is the app's.
type Memory interface {
	// Search is memory.search scoped to what role may read.
	Search(ctx context.Context, role string, o memory.SearchOptions) (memory.SearchResponse, error)
	// Get reads a file (or some of its lines) role may read.
	Get(ctx context.Context, role string, o memory.GetOptions) (GetResult, error)
	// Write appends to or replaces a file role may write (memory.Manager.Write:
	// base versions, merges and conflicts as in the app).
	Write(ctx context.Context, role string, r memory.WriteRequest) (memory.WriteResult, error)
	// Note appends one timestamped line to role's daily log; ErrNoDailyLog
	// for Authenticated.
	Note(ctx context.Context, role, text string) (memory.WriteResult, error)
	// Files lists the memory files role may read.
	Files(ctx context.Context, role string) ([]memory.FileInfo, error)
}

// Engine is the memory engine and guard a Local call runs on, and what
// to do when the call is done (Release: nil when the engine stays open).
type Engine struct {
	Memory  *memory.Manager
	Guard   *guard.Guard
	Release func() error
}

// LocalOptions configure Local.
type LocalOptions struct {
	// Acquire returns the engine for one call (required). The app returns
	// its own Manager and guard; `atrium mcp` beside no running app opens
	// the index for the call and releases it after, so that the index's
	// lock (memory.ErrLocked) is never held between calls and an app that
	// starts meanwhile gets it.
	Acquire func(ctx context.Context) (Engine, error)
	// Sync, when true, brings the index up to date (an incremental sync)
	// before a search or a listing: an engine opened per call has no file
	// watcher. Default false (the app's engine watches the workspace).
	Sync bool
	// Now is the clock of memory_note; default time.Now.
	Now func() time.Time
}

// Local is a Memory over the memory engine in this process, every access
// checked and audited by the guard as the role.
type Local struct{ o LocalOptions }

// NewLocal returns a Local. Errors: no Acquire.
func NewLocal(o LocalOptions) (*Local, error) {
	if o.Acquire == nil {
		return nil, errors.New("mcpserve: LocalOptions.Acquire is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Local{o: o}, nil
}

// Principal is who role acts as in the ACL: acl.Principal{Role: role}, or
// an authenticated principal without a role for Authenticated or "".
func Principal(role string) acl.Principal {
	if role == "" || role == Authenticated {
		return acl.Principal{Authenticated: true}
	}
	return acl.Principal{Role: role}
}

func writerOf(role string) string {
	if role == "" || role == Authenticated {
		return Writer
	}
	return role
}

// with runs f on an engine acquired for the call, released after.
func (l *Local) with(ctx context.Context, sync bool, f func(e Engine) error) (err error) {
	e, err := l.o.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("open memory: %w", err)
	}
	if e.Release != nil {
		defer func() {
			if rerr := e.Release(); rerr != nil && err == nil {
				err = fmt.Errorf("close memory: %w", rerr)
			}
		}()
	}
	if sync && l.o.Sync {
		if err := e.Memory.Sync(ctx); err != nil {
			return fmt.Errorf("sync memory: %w", err)
		}
	}
	return f(e)
}

// Search searches what role may read alone (the guard's Readable as the
// index's scope), then re-checks and audits the search as one entry.
func (l *Local) Search(ctx context.Context, role string, o memory.SearchOptions) (res memory.SearchResponse, err error) {
	p := Principal(role)
	err = l.with(ctx, true, func(e Engine) error {
		o.Readable = func(rel string) bool { return e.Guard.Readable(p, rel) }
		r, err := e.Memory.Search(guard.WithPrincipal(ctx, p), o)
		if err != nil {
			return err
		}
		res, err = e.Guard.FilterSearch(p, o.Query, r)
		return err
	})
	return res, err
}

// Get checks and audits the read, then reads the version and the text.
func (l *Local) Get(ctx context.Context, role string, o memory.GetOptions) (res GetResult, err error) {
	p := Principal(role)
	err = l.with(ctx, false, func(e Engine) error {
		rel, err := e.Guard.Check(p, "get", acl.Read, o.Path)
		if err != nil {
			return err
		}
		o.Path = rel
		v, verr := e.Memory.Version(ctx, rel)
		g, err := e.Memory.Get(guard.WithPrincipal(ctx, p), o)
		if err != nil {
			return err
		}
		res = GetResult{Path: g.Path, Text: g.Text}
		if verr == nil {
			res.Version = v
		}
		return nil
	})
	return res, err
}

// Write checks and audits the write as role (one entry), then writes as
// role's writer.
func (l *Local) Write(ctx context.Context, role string, r memory.WriteRequest) (res memory.WriteResult, err error) {
	p := Principal(role)
	err = l.with(ctx, false, func(e Engine) error {
		rel, err := e.Guard.Check(p, memory.ActionWrite, acl.Write, r.Path)
		if err != nil {
			return err
		}
		r.Path, r.Writer, r.Session = rel, writerOf(role), ""
		res, err = e.Memory.Write(guard.WithChecked(guard.WithPrincipal(ctx, p), rel), r)
		return err
	})
	return res, err
}

// Note appends text to role's daily log for today, checked and audited as
// a write of that file.
func (l *Local) Note(ctx context.Context, role, text string) (res memory.WriteResult, err error) {
	if role == "" || role == Authenticated {
		return res, ErrNoDailyLog
	}
	p := Principal(role)
	err = l.with(ctx, false, func(e Engine) error {
		now := l.o.Now()
		rel, err := e.Memory.NotePath(role, now)
		if err != nil {
			return err
		}
		if rel, err = e.Guard.Check(p, "note", acl.Write, rel); err != nil {
			return err
		}
		res, err = e.Memory.Note(guard.WithChecked(guard.WithPrincipal(ctx, p), rel),
			memory.NoteRequest{Role: role, Text: text, Now: now, Writer: role})
		return err
	})
	return res, err
}

// Files lists the files role may read (the guard's file filter, audited as
// one listing).
func (l *Local) Files(ctx context.Context, role string) (fs []memory.FileInfo, err error) {
	p := Principal(role)
	err = l.with(ctx, true, func(e Engine) error {
		all, err := e.Memory.Files(ctx)
		if err != nil {
			return err
		}
		fs, err = e.Guard.FilterFiles(p, all)
		return err
	})
	return fs, err
}
