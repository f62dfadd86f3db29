// Package tools holds the tools of Atrium's agent loop (SPEC §6 tools and
// permission levels, §4.3 memory tools, §5.1 ACL; package agent runs them).
//
// Register adds them to an agent.Registry for one agent session, acting as
// one role (Options.Principal):
//
//   - memory_search (L0), memory_get (L0), memory_write (L1), memory_note
//     (L1): the memory engine behind the guard, as the agent's role. Search
//     is scoped to the readable files and audited; get/write/note are
//     checked against the ACL and audited (package guard); a refusal is
//     status "denied".
//   - read_file (L0), write_file (L1): files inside the workspace only.
//     Every path is canonicalised (acl.Canonicalize: no "..", no absolute
//     path, no symlink out of the workspace, no case or Unicode trick) and
//     then opened through an os.Root on the workspace, so a symlink planted
//     after the check cannot lead out either. Memory paths (memory/**,
//     MEMORY.md) are checked against the ACL like memory_get/memory_write
//     (writes go through the memory engine: versioned, atomic, indexed).
//     Other workspace files are allowed to every agent role except any path
//     with a segment starting with "." (.git, .env, .atrium ...) and the
//     globs in FilesOptions.Deny. Every decision, allowed or denied, is one
//     audit entry (operation read_file / write_file).
//   - exec (L2, only with Options.Exec): runs a program under the exec
//     approval mode (deny | allowlist | ask | full; allowlist = binary path
//     globs), with a timeout and capped output, inside bubblewrap (bwrap)
//     when it is installed, limited to the directories given.
//   - web_fetch (L3, only with Options.Fetch): http(s) GET with size, time
//     and redirect limits; private and loopback addresses are refused at
//     dial time unless allowed.
//   - nodes (only with Options.Nodes): list and describe the paired nodes
//     (L0); invoke a command on one (SPEC §7), which asks the person at
//     the highest level, L3: system.run, system.notify, location.get (and
//     camera.*, screen.*) on every call, other commands through the
//     session's L3 grant. Every call is audited (operation nodes).
//   - canvas (only with Options.Canvas): A2UI surfaces and presented pages
//     on the desktop or a node (SPEC §8): push and reset at L1, present,
//     navigate, hide and snapshot at L1 on the desktop and L3 on a node,
//     eval asks the person on every call at L3. Audited (operation canvas).
//   - ask_role (only with Options.Collab, L1): ask another role for help
//     (issue 24 item 4): a collaboration as the agent's role through the
//     app's broker, the other role's answer as the result (bounded wait,
//     then "still working, collaboration id X"); view and write through it
//     under the collaboration's rules (package collab audits them).
//
// Handler errors wrap agent.ErrDenied (refused: status denied),
// agent.ErrRetryable (worth another attempt) or neither (status error).
package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
)

// Tool names.
const (
	MemorySearch = "memory_search"
	MemoryGet    = "memory_get"
	MemoryWrite  = "memory_write"
	MemoryNote   = "memory_note"
	ReadFile     = "read_file"
	WriteFile    = "write_file"
	Exec         = "exec"
	WebFetch     = "web_fetch"
)

// Memory is what the memory tools need of the memory engine
// (*memory.Manager implements it).
type Memory interface {
	Search(ctx context.Context, o memory.SearchOptions) (memory.SearchResponse, error)
	Get(ctx context.Context, o memory.GetOptions) (memory.GetResponse, error)
	Write(ctx context.Context, r memory.WriteRequest) (memory.WriteResult, error)
	Note(ctx context.Context, r memory.NoteRequest) (memory.WriteResult, error)
	NotePath(role string, day time.Time) (string, error)
}

// Options configure the tools of one agent session.
type Options struct {
	// Guard checks and audits every memory and file access; its
	// Workspace is the workspace the file tools are confined to. Required.
	Guard *guard.Guard
	// Memory is the memory engine. Required. It should be opened with
	// Guard.Authorize as its Authorize hook (the app does), so that a
	// write is checked even if a caller skipped the tools.
	Memory Memory
	// Principal is who the agent acts as: Role is required (agents act as
	// roles); Session names the session in audit entries.
	Principal acl.Principal
	// Files configures read_file and write_file.
	Files FilesOptions
	// Exec enables the exec tool when not nil.
	Exec *ExecOptions
	// Fetch enables the web_fetch tool when not nil.
	Fetch *FetchOptions
	// Nodes enables the nodes tool when not nil.
	Nodes *NodesOptions
	// Canvas enables the canvas tool when not nil.
	Canvas *CanvasOptions
	// Collab enables the ask_role tool when not nil.
	Collab *CollabOptions
	// MediaDir is the media folder ($ATRIUM_HOME/media,
	// paths.Layout.MediaDir): a tool's picture may lie there or in the
	// workspace, nowhere else (ErrImagePath). Empty: the workspace only.
	MediaDir string
	// Logger receives "agent tool denied" (info). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock (memory_note's date). Default time.Now.
	Now func() time.Time
}

// env is the shared state of one session's tools.
type env struct {
	o   Options
	p   acl.Principal
	log *slog.Logger
}

// Register adds the memory and file tools, and exec, web_fetch and nodes
// when configured, to r. Errors: missing options, bad exec or fetch options,
// or a registry refusal (a name already registered).
func Register(r *agent.Registry, o Options) error {
	switch {
	case o.Guard == nil:
		return errors.New("tools: Options.Guard is required")
	case o.Memory == nil:
		return errors.New("tools: Options.Memory is required")
	case o.Principal.Role == "":
		return errors.New("tools: Options.Principal.Role is required")
	}
	if err := acl.ValidateRole(o.Principal.Role); err != nil {
		return fmt.Errorf("tools: Options.Principal.Role: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	e := &env{o: o, p: o.Principal, log: o.Logger.With("component", "agent-tools", "role", o.Principal.Role)}
	regs := []func(*agent.Registry) error{e.registerMemory, e.registerFiles}
	if o.Exec != nil {
		x, err := newExecTool(e, *o.Exec)
		if err != nil {
			return err
		}
		regs = append(regs, x.register)
	}
	if o.Fetch != nil {
		f, err := newFetchTool(e, *o.Fetch)
		if err != nil {
			return err
		}
		regs = append(regs, f.register)
	}
	if o.Nodes != nil {
		n, err := newNodesTool(e, *o.Nodes)
		if err != nil {
			return err
		}
		regs = append(regs, n.register)
	}
	if o.Canvas != nil {
		c, err := newCanvasTool(e, *o.Canvas)
		if err != nil {
			return err
		}
		regs = append(regs, c.register)
	}
	if o.Collab != nil {
		c, err := newCollabTool(e, *o.Collab)
		if err != nil {
			return err
		}
		regs = append(regs, c.register)
	}
	for _, reg := range regs {
		if err := reg(r); err != nil {
			return fmt.Errorf("tools: %w", err)
		}
	}
	return nil
}

// deny records a denial by a tool (not an ACL decision: an exec approval,
// a hidden file, a refused URL) as one audit entry and returns the error
// for the model, wrapping agent.ErrDenied.
func (e *env) deny(op, target, reason string) error {
	if err := e.o.Guard.Record(e.p, op, target, false, reason); err != nil {
		return err
	}
	e.log.Info("agent tool denied", "operation", op, "target", target, "reason", reason)
	return fmt.Errorf("%w: %s %s: %s", agent.ErrDenied, op, target, reason)
}

// allow records an allowed decision of a tool.
func (e *env) allow(op, target, reason string) error {
	return e.o.Guard.Record(e.p, op, target, true, reason)
}

// mapErr classifies a memory or guard error for the registry: refusals
// (ACL, refused path) are denials; a stale version and an unavailable
// engine are retryable.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, memory.ErrForbidden), errors.Is(err, memory.ErrInvalidPath), errors.Is(err, acl.ErrInvalidPath):
		return fmt.Errorf("%w: %w", agent.ErrDenied, err)
	case errors.Is(err, memory.ErrConflict), errors.Is(err, memory.ErrUnavailable):
		return fmt.Errorf("%w: %w", agent.ErrRetryable, err)
	}
	return err
}

// ctx returns ctx carrying the agent's principal for the engine's
// Authorize hook.
func (e *env) ctx(ctx context.Context) context.Context { return guard.WithPrincipal(ctx, e.p) }
