// Package guard is Atrium's one enforcement point for memory access (SPEC
// §5.1; issue 4 items 2–4): given a principal, an action and a
// caller-supplied workspace-relative path, it canonicalises the path
// (acl.Canonicalize), checks it against the ACL in force (acl.Holder, with
// `$session_owner` resolved from the session records), records one audit
// entry for every decision, allowed or denied (audit.Log), and returns nil
// or an error wrapping memory.ErrForbidden (memory.ErrInvalidPath for a
// refused path), which the gateway maps to FORBIDDEN (INVALID_REQUEST).
//
// The app plugs Guard.Authorize into memory.Options.Authorize (memory_write,
// memory_note, conflict resolution, promotion) and calls Check, FilterFiles
// and FilterSearch from the gateway methods (package api), the CLI and the
// chat's memory_search tool (as role main; package atrium).
//
// Search is filtered before ranking (SPEC §4.3): callers pass Readable as
// memory.SearchOptions.Readable, which the index takes as the search's
// scope — it ranks the readable files alone, with BM25 statistics over
// them, so no result, count or score depends on an unreadable file — and
// FilterSearch re-checks the results (a safety net for a caller that
// passed no Readable) and audits the search.
package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/memory"
)

// ErrAudit: the audit entry of a decision could not be written; the
// operation is refused (never done unaudited). It wraps
// memory.ErrUnavailable (retryable).
var ErrAudit = errors.New("guard: audit log unavailable")

// Role names used in audit entries for principals without a role.
const (
	AuditAdmin         = "admin"
	AuditAuthenticated = "authenticated"
	AuditAnonymous     = "anonymous"
)

// OwnersFunc adapts a function to acl.SessionOwners (e.g. a Manager's
// SessionOwner method value, bound after the Manager exists).
type OwnersFunc func(sessionID string) (string, bool)

// SessionOwner implements acl.SessionOwners.
func (f OwnersFunc) SessionOwner(id string) (string, bool) {
	if f == nil {
		return "", false
	}
	return f(id)
}

// Options configures a Guard.
type Options struct {
	// Workspace is the workspace root paths are canonicalised against. Required.
	Workspace string
	// ACL holds the policy in force (loaded on <workspace>/memory/.acl). Required.
	ACL *acl.Holder
	// Audit receives one entry per decision. Required.
	Audit *audit.Log
	// Owners resolves `$session_owner`; nil: no session has an owner.
	Owners acl.SessionOwners
	// Logger receives "guard denied" (debug) and "guard audit failed"
	// (error). Default slog.Default().
	Logger *slog.Logger
}

// Guard enforces the ACL and audits. Safe for concurrent use.
type Guard struct {
	opts Options
	log  *slog.Logger
}

// New returns a Guard.
func New(o Options) (*Guard, error) {
	switch {
	case o.Workspace == "":
		return nil, errors.New("guard: Options.Workspace is required")
	case o.ACL == nil:
		return nil, errors.New("guard: Options.ACL is required")
	case o.Audit == nil:
		return nil, errors.New("guard: Options.Audit is required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Guard{opts: o, log: o.Logger.With("component", "guard")}, nil
}

// Workspace returns the workspace root paths are canonicalised against.
func (g *Guard) Workspace() string { return g.opts.Workspace }

// ACL returns the holder (for status reports).
func (g *Guard) ACL() *acl.Holder { return g.opts.ACL }

// Audit returns the audit log (for audit.tail).
func (g *Guard) Audit() *audit.Log { return g.opts.Audit }

type principalKey struct{}

// WithPrincipal returns ctx carrying p. Authorize uses it in place of the
// writer name memory passes, so that a call made `as` a role (or by a
// device) is checked as that principal all the way down.
func WithPrincipal(ctx context.Context, p acl.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

type checkedKey struct{}

// WithChecked returns ctx recording that a write of the canonical path rel
// by ctx's principal was just checked and audited (Check, action write), so
// that Authorize does not audit the same write twice. Only a caller that
// did that Check may use it.
func WithChecked(ctx context.Context, rel string) context.Context {
	return context.WithValue(ctx, checkedKey{}, rel)
}

// PrincipalFrom returns the principal WithPrincipal stored, if any.
func PrincipalFrom(ctx context.Context) (acl.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(acl.Principal)
	return p, ok
}

// AuditRole is the audit log's role field for p: its role, else "admin",
// "authenticated" or "anonymous".
func AuditRole(p acl.Principal) string {
	switch {
	case p.Role != "":
		return p.Role
	case p.Admin:
		return AuditAdmin
	case p.Authenticated:
		return AuditAuthenticated
	}
	return AuditAnonymous
}

// Record writes one audit entry for p; an error wraps ErrAudit.
func (g *Guard) Record(p acl.Principal, op, target string, allowed bool, reason string) error {
	if err := g.opts.Audit.Record(audit.Entry{Operation: op, Role: AuditRole(p), Target: target, Result: audit.Result(allowed), Reason: reason, Session: p.Session, IP: p.IP}); err != nil {
		g.log.Error("guard audit failed", "operation", op, "target", target, "err", err)
		return fmt.Errorf("%w: %w: %w", memory.ErrUnavailable, ErrAudit, err)
	}
	if !allowed {
		g.log.Debug("guard denied", "operation", op, "role", AuditRole(p), "target", target, "reason", reason)
	}
	return nil
}

// Deny records a denial that was decided before any path check (e.g. `as`
// used by a device) and returns an error wrapping memory.ErrForbidden.
func (g *Guard) Deny(p acl.Principal, op, target, reason string) error {
	if err := g.Record(p, op, target, false, reason); err != nil {
		return err
	}
	return fmt.Errorf("%s %s: %w: %s", op, target, memory.ErrForbidden, reason)
}

// DenyInvalid records a denial of malformed input (a bad role name, a
// file name with folders) and returns an error wrapping memory.ErrInvalidPath.
func (g *Guard) DenyInvalid(p acl.Principal, op, target, reason string) error {
	if err := g.Record(p, op, target, false, reason); err != nil {
		return err
	}
	return fmt.Errorf("%s %q: %w: %s", op, target, memory.ErrInvalidPath, reason)
}

// Canonical canonicalises raw (acl.Canonicalize) and maps it to its ACL
// name (acl.Name). A refused path is audited as denied (operation op) and
// returned wrapping memory.ErrInvalidPath; an error reading the workspace
// is audited and returned wrapping memory.ErrForbidden (it was not shown
// safe). Allowed paths are not audited here: the Check that follows does.
func (g *Guard) Canonical(p acl.Principal, op, raw string) (rel, name string, err error) {
	// The ACL speaks first, on the path as given: a caller with no right at
	// all on it (read, write or collaborate) is refused before the
	// file-system checks run, so their answers (a case variant of an
	// existing name, a symlink) cannot tell it which files exist in a
	// folder it may not see. A made-up name and a real one get the same
	// FORBIDDEN.
	if acl.Lexical(raw) == nil {
		if lname, ok := acl.Name(raw); ok {
			if d, ok := g.anyRight(p, lname); !ok {
				if err := g.Record(p, op, lname, false, d.Reason); err != nil {
					return "", "", err
				}
				return "", "", fmt.Errorf("%s %s: %w: %s", op, lname, memory.ErrForbidden, d.Reason)
			}
		}
	}
	rel, err = acl.Canonicalize(g.opts.Workspace, raw)
	if err != nil {
		if rerr := g.Record(p, op, raw, false, err.Error()); rerr != nil {
			return "", "", rerr
		}
		var pe *acl.PathError
		if errors.As(err, &pe) {
			reason := pe.Reason
			if pe.Existing != "" && !g.Readable(p, pe.Existing) {
				// The audit keeps the name; the caller is not told of a
				// file it may not read.
				reason = pe.Concealed
			}
			return "", "", fmt.Errorf("%s %q: %w: %s", op, raw, memory.ErrInvalidPath, reason)
		}
		return "", "", fmt.Errorf("%s: %w: %w", op, memory.ErrForbidden, err)
	}
	name, ok := acl.Name(rel)
	if !ok {
		reason := fmt.Sprintf("%q is not memory (not under memory/ and not MEMORY.md)", rel)
		if rerr := g.Record(p, op, rel, false, reason); rerr != nil {
			return "", "", rerr
		}
		return "", "", fmt.Errorf("%s %q: %w: %s", op, raw, memory.ErrInvalidPath, reason)
	}
	return rel, name, nil
}

// anyRight reports whether p holds any action on ACL name; when it holds
// none, d is the read decision (its reason names the rule).
func (g *Guard) anyRight(p acl.Principal, name string) (d acl.Decision, ok bool) {
	for _, a := range acl.Actions() {
		if x := g.opts.ACL.Check(p, a, name, g.owners()); x.Allowed {
			return x, true
		} else if a == acl.Read {
			d = x
		}
	}
	return d, false
}

// Check canonicalises raw, checks action on it for p, audits the decision
// under operation op (target: the ACL name, or raw when refused before it
// had one) and returns the canonical workspace-relative path. Errors wrap
// memory.ErrInvalidPath (a refused path), memory.ErrForbidden (the ACL
// denies) or ErrAudit.
func (g *Guard) Check(p acl.Principal, op string, action acl.Action, raw string) (string, error) {
	rel, name, err := g.Canonical(p, op, raw)
	if err != nil {
		return "", err
	}
	d := g.opts.ACL.Check(p, action, name, g.owners())
	if err := g.Record(p, op, name, d.Allowed, d.Reason); err != nil {
		return "", err
	}
	if !d.Allowed {
		return "", fmt.Errorf("%s %s: %w: %s", op, name, memory.ErrForbidden, d.Reason)
	}
	return rel, nil
}

// Authorize is memory.Options.Authorize: the principal is the one
// WithPrincipal put in ctx, else writer "admin" (memory.AdminWriter) is
// the person at the desktop and any other writer is that role. Both
// memory.ActionWrite and memory.ActionResolve are checked as acl.Write;
// the operation audited is the action.
func (g *Guard) Authorize(ctx context.Context, writer, session, action, path string) error {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		if writer == memory.AdminWriter {
			p = acl.Principal{Admin: true}
		} else {
			p = acl.Principal{Role: writer}
		}
	}
	if p.Session == "" {
		p.Session = session
	}
	if rel, ok := ctx.Value(checkedKey{}).(string); ok && action == memory.ActionWrite && rel == path {
		return nil // checked and audited by the caller (WithChecked)
	}
	act := acl.Write
	if action == memory.ActionRead {
		act = acl.Read
	}
	_, err := g.Check(p, action, act, path)
	return err
}

// Readable reports whether p may read the workspace-relative path rel
// (already canonical, as the index stores it). Not audited: callers audit
// the listing or search as one entry.
func (g *Guard) Readable(p acl.Principal, rel string) bool {
	name, ok := acl.Name(rel)
	return ok && g.opts.ACL.Check(p, acl.Read, name, g.owners()).Allowed
}

// ReadableFrom reports whether the principal ctx carries (WithPrincipal)
// may read rel (Readable); true when ctx carries none (the person at the
// desktop, the engine's own writes). It is memory.Options.Readable: a
// refusal names an existing file only to a caller that may read it.
func (g *Guard) ReadableFrom(ctx context.Context, rel string) bool {
	p, ok := PrincipalFrom(ctx)
	return !ok || g.Readable(p, rel)
}

// Decide checks action on the canonical workspace-relative path rel for p
// without auditing: for a caller that combines several checks (e.g. both
// parties of a collaboration, package collab) and records the combined
// decision as one entry with Record. A path outside memory is denied.
func (g *Guard) Decide(p acl.Principal, action acl.Action, rel string) acl.Decision {
	name, ok := acl.Name(rel)
	if !ok {
		return acl.Decision{Reason: fmt.Sprintf("%q is not memory", rel)}
	}
	return g.opts.ACL.Check(p, action, name, g.owners())
}

// FilterFiles keeps the files p may read, in order, and audits the
// listing as one entry (operation "files", reason "n listed, m hidden").
func (g *Guard) FilterFiles(p acl.Principal, files []memory.FileInfo) ([]memory.FileInfo, error) {
	out := make([]memory.FileInfo, 0, len(files))
	for _, f := range files {
		if g.Readable(p, f.Path) {
			out = append(out, f)
		}
	}
	reason := fmt.Sprintf("%d listed, %d hidden", len(out), len(files)-len(out))
	if err := g.Record(p, "files", "memory/", true, reason); err != nil {
		return nil, err
	}
	return out, nil
}

// FilterSearch drops the results naming a file p may not read (also from
// AlsoIn) and audits the search as one entry: operation "search", target
// the query's first 80 characters, reason "n results, k files out of
// scope, m filtered" (k: files the search's scope left out; m: results
// dropped here, 0 unless the caller passed no Readable).
func (g *Guard) FilterSearch(p acl.Principal, query string, res memory.SearchResponse) (memory.SearchResponse, error) {
	kept := make([]memory.SearchResult, 0, len(res.Results))
	for _, r := range res.Results {
		if !g.Readable(p, r.Path) {
			continue
		}
		if len(r.AlsoIn) > 0 {
			also := make([]string, 0, len(r.AlsoIn))
			for _, a := range r.AlsoIn {
				if g.Readable(p, a) {
					also = append(also, a)
				}
			}
			if len(also) == 0 {
				also = nil
			}
			r.AlsoIn = also
		}
		kept = append(kept, r)
	}
	reason := fmt.Sprintf("%d results, %d files out of scope, %d filtered", len(kept), res.OutOfScope, res.Withheld+len(res.Results)-len(kept))
	if err := g.Record(p, "search", firstRunes(query, 80), true, reason); err != nil {
		return memory.SearchResponse{}, err
	}
	res.Results = kept
	if len(kept) == 0 {
		res.Confidence = memory.Confidence{Level: memory.ConfidenceLow}
	}
	return res, nil
}

func (g *Guard) owners() acl.SessionOwners {
	if g.opts.Owners == nil {
		return nil
	}
	return g.opts.Owners
}

// firstRunes returns the first n characters of s (whole code points).
func firstRunes(s string, n int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k]
		}
		i++
	}
	return s
}

// Access returns who the ACL in force lets read, write and collaborate on
// the workspace-relative path rel (already canonical, as the index stores
// it), and the deciding rule. Not audited: it describes, never decides
// (the memory.files listing that shows it is audited as one entry).
func (g *Guard) Access(rel string) (acl.Grant, bool) {
	name, ok := acl.Name(rel)
	if !ok {
		return acl.Grant{}, false
	}
	return g.opts.ACL.Explain(name, g.owners())
}
