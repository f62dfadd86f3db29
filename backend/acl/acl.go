package acl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrInvalidACL: the .acl file is malformed (the error is a *ParseError).
	ErrInvalidACL = errors.New("acl: invalid .acl file")
	// ErrInvalidPath: Canonicalize refused a path (the error is a *PathError).
	ErrInvalidPath = errors.New("acl: invalid path")
)

// Action is what a principal wants to do with a file (SPEC §5.1).
type Action string

// The actions of SPEC §5.1.
const (
	Read  Action = "read"
	Write Action = "write"
	// Collaborate: may open a collaboration on the file (writing through it
	// is checked by the collaboration layer, not here).
	Collaborate Action = "collaborate"
)

// Actions returns the actions of SPEC §5.1 in a fixed order (a new slice).
func Actions() []Action { return []Action{Read, Write, Collaborate} }

// valid reports whether a is one of the three actions.
func (a Action) valid() bool { return a == Read || a == Write || a == Collaborate }

// MainRole owns the OpenClaw-layout memory and every name outside global/,
// roles/<r>/, sessions/<id>/ and templates/ in the defaults (SPEC §4.1).
const MainRole = "main"

// ReservedName is the ACL name of the .acl file itself: admin only, always.
const ReservedName = ".acl"

// Principal is the caller of a check. Atrium builds it after it has
// established who is calling; Check trusts it.
type Principal struct {
	Role          string // the agent role (profile) acting, "" when none
	Admin         bool   // the person at the desktop
	Authenticated bool   // authenticated without a role (a paired device); roles and admin count as authenticated anyway
	Session       string // the session the caller acts in (for the audit log); not used for $session_owner
	IP            string // the caller's IP address when it came over the network (for the audit log); never used in a decision
}

// String describes the principal for reasons and logs.
func (p Principal) String() string {
	switch {
	case p.Admin && p.Role != "":
		return fmt.Sprintf("admin (role %s)", p.Role)
	case p.Admin:
		return "admin"
	case p.Role != "":
		return "role " + p.Role
	case p.Authenticated:
		return "an authenticated device"
	default:
		return "an anonymous caller"
	}
}

// SessionOwners resolves `$session_owner`: the role recorded as the owner of
// a session. ok is false for an unknown session; an implementation that
// cannot read its records must answer false, never guess.
type SessionOwners interface {
	SessionOwner(sessionID string) (role string, ok bool)
}

// OwnerMap is a SessionOwners backed by a map from session id to role.
type OwnerMap map[string]string

// SessionOwner implements SessionOwners.
func (m OwnerMap) SessionOwner(id string) (string, bool) {
	r, ok := m[id]
	return r, ok && r != ""
}

// Decision is the answer of a check.
type Decision struct {
	Allowed bool
	Rule    string // the pattern of the deciding rule (".acl" for the reserved file); "" when no rule matched or the request was malformed
	Reason  string // a human sentence saying why
}

// principalKind is the form of one principal in a rule.
type principalKind int

const (
	pRole principalKind = iota
	pAll
	pAuthenticated
	pSessionOwner
	pAdmin
	pPathRole // internal (Defaults): the role whose roles/<r>/ folder holds the file
)

type principal struct {
	kind principalKind
	role string
}

// Rule is one rule of a policy, as written.
type Rule struct {
	Pattern     string
	Read        []string // principals as written
	Write       []string
	Collaborate []string
	TTL         time.Duration // the rule's ttl (seconds in the file); 0 when none
	Line        int           // line of the pattern in the .acl file; 0 for built-in rules
}

// Principals returns the principals the rule lists for an action.
func (r Rule) Principals(a Action) []string {
	switch a {
	case Read:
		return r.Read
	case Write:
		return r.Write
	case Collaborate:
		return r.Collaborate
	}
	return nil
}

// rule is a compiled Rule.
type rule struct {
	Rule
	pat   pattern
	grant [3][]principal // indexed like actions
}

// actionIndex is a's index into rule.grant (the order of Actions).
func actionIndex(a Action) int {
	switch a {
	case Read:
		return 0
	case Write:
		return 1
	case Collaborate:
		return 2
	}
	return -1
}

// Policy is an immutable, compiled set of rules, safe for concurrent use.
// The nil *Policy denies everything.
type Policy struct {
	source string // "file", "defaults" or "admin-only"
	rules  []rule
	exact  map[string]int // exact pattern → index into rules
}

// Source says where the policy came from: "file", "defaults" or
// "admin-only".
func (p *Policy) Source() string {
	if p == nil {
		return ""
	}
	return p.source
}

// Rules returns a copy of the rules in file order.
func (p *Policy) Rules() []Rule {
	if p == nil {
		return nil
	}
	out := make([]Rule, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.Rule
		out[i].Read = append([]string(nil), r.Read...)
		out[i].Write = append([]string(nil), r.Write...)
		out[i].Collaborate = append([]string(nil), r.Collaborate...)
	}
	return out
}

// Match returns the rule that decides for name (see the package doc), or
// false when none matches, the name is malformed or it is the reserved .acl.
func (p *Policy) Match(name string) (Rule, bool) {
	r, _, err := p.match(name)
	if err != nil || r == nil {
		return Rule{}, false
	}
	return r.Rule, true
}

func (p *Policy) match(name string) (*rule, []string, error) {
	if err := checkNameSyntax(name, false); err != nil {
		return nil, nil, err
	}
	segs := strings.Split(name, "/")
	if p == nil || name == ReservedName {
		return nil, segs, nil
	}
	if i, ok := p.exact[name]; ok {
		return &p.rules[i], segs, nil
	}
	var best *rule
	for i := range p.rules {
		r := &p.rules[i]
		if r.pat.exact || !r.pat.match(segs) {
			continue
		}
		if best == nil || r.pat.specificity > best.pat.specificity {
			best = r
		}
	}
	return best, segs, nil
}

// Check decides whether p may perform action on name, a name relative to
// memory/ (see Name and Canonicalize). owners resolves $session_owner and may
// be nil (then no session has an owner). Malformed input (an unknown action,
// a malformed name) is denied with a reason; Check never panics and never
// allows by default.
func (p *Policy) Check(who Principal, action Action, name string, owners SessionOwners) Decision {
	if !action.valid() {
		return Decision{Reason: fmt.Sprintf("unknown action %q", string(action))}
	}
	r, segs, err := p.match(name)
	if err != nil {
		return Decision{Reason: fmt.Sprintf("invalid name %q: %v", name, err)}
	}
	if name == ReservedName {
		if who.Admin && action != Collaborate {
			return Decision{Allowed: true, Rule: ReservedName, Reason: "only admin may " + string(action) + " the .acl file"}
		}
		return Decision{Rule: ReservedName, Reason: fmt.Sprintf("the .acl file is reserved: %s may not %s it", who, action)}
	}
	if p == nil {
		return Decision{Reason: "no policy loaded"}
	}
	if r == nil {
		return Decision{Reason: fmt.Sprintf("no rule matches %q", name)}
	}
	at := ""
	if r.Line > 0 {
		at = fmt.Sprintf(" (line %d)", r.Line)
	}
	for _, pr := range r.grant[actionIndex(action)] {
		if ok, how := pr.matches(who, segs, owners); ok {
			return Decision{Allowed: true, Rule: r.Pattern, Reason: fmt.Sprintf("rule %q%s grants %s to %s", r.Pattern, at, action, how)}
		}
	}
	return Decision{Rule: r.Pattern, Reason: fmt.Sprintf("rule %q%s does not grant %s to %s", r.Pattern, at, action, who)}
}

// matches reports whether principal pr covers who for the file named by
// segs, and in which words.
func (pr principal) matches(who Principal, segs []string, owners SessionOwners) (bool, string) {
	switch pr.kind {
	case pRole:
		return who.Role != "" && who.Role == pr.role, "role " + pr.role
	case pAll:
		return who.Role != "" || who.Admin, "every role (" + pr.role + ")"
	case pAuthenticated:
		return who.Role != "" || who.Admin || who.Authenticated, "authenticated principals"
	case pAdmin:
		return who.Admin, "admin"
	case pSessionOwner:
		if owners == nil || who.Role == "" || len(segs) < 3 || segs[0] != "sessions" {
			return false, ""
		}
		owner, ok := owners.SessionOwner(segs[1])
		return ok && owner != "" && owner == who.Role, "the session owner (role " + owner + ")"
	case pPathRole:
		return who.Role != "" && len(segs) >= 3 && segs[0] == "roles" && segs[1] == who.Role, "the folder's role " + who.Role
	}
	return false, ""
}

// Name maps a clean workspace-relative slash path (as Canonicalize returns)
// onto the ACL namespace: `memory/<x>` → `<x>`; the OpenClaw `MEMORY.md` or
// `memory.md` and the OpenClaw context files (ContextFiles: SOUL.md ...) at
// the workspace root keep their names. ok is false for everything else,
// which is not memory.
func Name(rel string) (string, bool) {
	if x, ok := strings.CutPrefix(rel, "memory/"); ok && x != "" {
		return x, true
	}
	if rel == "MEMORY.md" || rel == "memory.md" || IsContextFile(rel) {
		return rel, true
	}
	return "", false
}

// ContextFiles returns the names of an OpenClaw workspace's standing
// context files at the workspace root, in the order OpenClaw puts them in
// the main agent's system prompt: AGENTS.md, SOUL.md, TOOLS.md,
// IDENTITY.md, USER.md, HEARTBEAT.md. They are role main's persona and
// standing context (package memory); Name keeps their names, so the same
// rule as MEMORY.md governs them (by default `**`: main and admin).
func ContextFiles() []string {
	return []string{"AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md"}
}

// IsContextFile reports whether rel (a clean workspace-relative path) is
// one of ContextFiles at the workspace root.
func IsContextFile(rel string) bool {
	return slices.Contains(ContextFiles(), rel)
}
