package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
)

// This file puts the ACL (SPEC §5.1) in front of the memory methods:
// who a call acts as (principal, the `as` parameter), the read checks of
// memory.get / memory.files / memory.search, the import check, and
// audit.tail. Writes, notes, promotions and conflict resolutions are
// checked by the memory engine's Authorize hook (guard.Authorize), which
// sees the principal through guard.WithPrincipal.

// asParam is the optional `as` parameter of the memory methods.
// AsAuthenticated is the `as` of an operator token connection that acts
// as `authenticated` (no role: what a paired device without a role may do;
// `atrium mcp` without --as through the running app). It is no role name
// (acl.ValidateRole refuses it).
const AsAuthenticated = "authenticated"

type asParam struct {
	As string `json:"as"`
}

// access is what resolving a caller needs: the guard (nil: no ACL) and
// the paired devices' memory scopes (Options.DeviceScope).
type access struct {
	g     *guard.Guard
	scope DeviceScope
}

// principal returns who call acts as (SPEC §5.1 principals; issue 4 item
// 3, issue 21 item 4): an operator token connection is the person at the
// desktop (admin) unless it names a role with `as`, when it is exactly
// that role (no admin rights), or `as: "authenticated"` (AsAuthenticated),
// when it is an authenticated principal without a role; a paired operator device acts as its
// memory scope (authenticated, one role, or admin) and its `as` may only
// narrow that scope, never widen it (scopeAs); a node connection is
// `authenticated` and may not use `as` (FORBIDDEN, audited). A malformed
// `as`, or one that names no role of the workspace, is INVALID_REQUEST,
// audited (checkAs). The returned ctx carries the principal for the
// memory engine's Authorize hook.
func principal(ctx context.Context, ac *access, c *gateway.Call) (context.Context, acl.Principal, error) {
	var a asParam
	if err := decode(c, &a); err != nil {
		return ctx, acl.Principal{}, err
	}
	g := ac.g
	var p acl.Principal
	switch cls := c.Principal.Class(); {
	case cls == gateway.OperatorDevice:
		base, err := ac.device(ctx, c)
		if err != nil {
			return ctx, base, err
		}
		if p, err = ac.scopeAs(c, base, a.As); err != nil {
			return ctx, p, err
		}
	case cls != gateway.Admin:
		p = acl.Principal{Authenticated: true, IP: c.RemoteIP}
		if a.As != "" {
			if g == nil {
				return ctx, p, gateway.Errorf(gateway.CodeForbidden, "%s: only an operator connection may use as", c.Method)
			}
			return ctx, p, mapErr(g.Deny(p, c.Method, "as "+a.As, "only an operator (admin) connection may act as a role"))
		}
	case a.As == "":
		p = acl.Principal{Admin: true, IP: c.RemoteIP}
	case a.As == AsAuthenticated:
		if g == nil {
			return ctx, acl.Principal{Admin: true, IP: c.RemoteIP}, gateway.Errorf(gateway.CodeUnavailable, "%s: as needs the ACL, which this app does not run", c.Method)
		}
		p = acl.Principal{Authenticated: true, IP: c.RemoteIP}
	default:
		admin := acl.Principal{Admin: true, IP: c.RemoteIP}
		if err := checkAs(g, admin, c, a.As); err != nil {
			return ctx, admin, err
		}
		p = acl.Principal{Role: a.As, IP: c.RemoteIP}
	}
	return guard.WithPrincipal(ctx, p), p, nil
}

// checkAs checks the role named by `as` for who: the ACL must run
// (UNAVAILABLE) and the name must be a valid role name and a role of the
// workspace (knownRole) (INVALID_REQUEST, audited as who).
func checkAs(g *guard.Guard, who acl.Principal, c *gateway.Call, as string) error {
	if g == nil {
		return gateway.Errorf(gateway.CodeUnavailable, "%s: as needs the ACL, which this app does not run", c.Method)
	}
	err := acl.ValidateRole(as)
	if err == nil {
		err = knownRole(g.Workspace(), as)
	}
	if err != nil {
		return mapErr(g.DenyInvalid(who, c.Method, "as "+as, err.Error()))
	}
	return nil
}

// writerOf is the memory writer name of p: its role, admin, or
// DeviceWriter for a device scoped `authenticated`.
func writerOf(p acl.Principal) string {
	switch {
	case p.Role != "":
		return p.Role
	case p.Admin:
		return memory.AdminWriter
	}
	return DeviceWriter
}

// deviceWrite refuses a memory write by a device (node connection):
// devices do not write memory (audited when the guard runs).
func deviceWrite(g *guard.Guard, c *gateway.Call, p acl.Principal, target string) error {
	if c.Role == gateway.RoleOperator {
		return nil
	}
	if g != nil {
		if err := g.Deny(p, c.Method, target, "devices (node connections) do not write memory"); !errors.Is(err, memory.ErrForbidden) {
			return mapErr(err)
		}
	}
	return gateway.Errorf(gateway.CodeForbidden, "%s: only operator connections may write memory", c.Method)
}

// importTarget is the file memory.import would write for r (mirrors
// memory.Import's placement: global, else the main role's folder, or
// memory/ in the OpenClaw layout), or an error for a name with folders.
func importTarget(roles bool, r memory.ImportRequest) (string, error) {
	name := strings.TrimSpace(r.Name)
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return "", fmt.Errorf("import name %q must be a plain file name", r.Name)
	}
	stem := strings.TrimSuffix(name, path.Ext(name))
	dir := "memory"
	switch {
	case r.Layer == memory.LayerGlobal:
		dir = "memory/global"
	case r.Layer == memory.LayerSession:
		if r.Session == "" || strings.ContainsAny(r.Session, `/\`) || r.Session == "." || r.Session == ".." {
			return "", fmt.Errorf("import session %q must be a session id", r.Session)
		}
		dir = memory.SessionsDir + "/" + r.Session
	case roles && r.Role != "":
		dir = "memory/roles/" + r.Role
	case roles:
		dir = "memory/roles/" + memory.MainRole
	}
	return dir + "/" + stem + ".md", nil
}

// auditTail serves audit.tail {n?, role?, result?, operation?, since?}
// → {entries, corrupt}: admin (an operator connection without `as`) only.
func auditTail(ctx context.Context, g *guard.Guard, c *gateway.Call) (any, error) {
	var p struct {
		N         int    `json:"n"`
		Role      string `json:"role"`
		Result    string `json:"result"`
		Operation string `json:"operation"`
		Since     string `json:"since"`
		As        string `json:"as"`
		// HideRoutine leaves out routine entries (audit.Routine).
		HideRoutine bool `json:"hideRoutine"`
	}
	if err := decode(c, &p); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, gateway.Errorf(gateway.CodeUnavailable, "audit.tail: this app keeps no audit log")
	}
	if c.Principal.Class() != gateway.Admin || p.As != "" {
		who := acl.Principal{Authenticated: true, IP: c.RemoteIP}
		if c.Principal.Class() == gateway.Admin {
			who = acl.Principal{Role: p.As, IP: c.RemoteIP}
		}
		return nil, mapErr(g.Deny(who, "audit.tail", "audit", "only admin may read the audit log"))
	}
	if p.Result != "" && p.Result != audit.Allowed && p.Result != audit.Denied {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "audit.tail: result %q (want %q or %q)", p.Result, audit.Allowed, audit.Denied)
	}
	if p.N < 0 || p.N > audit.MaxTail {
		return nil, gateway.Errorf(gateway.CodeInvalidRequest, "audit.tail: n %d out of 0..%d", p.N, audit.MaxTail)
	}
	f := audit.Filter{Role: p.Role, Result: p.Result, Operation: p.Operation, HideRoutine: p.HideRoutine}
	if p.Since != "" {
		t, err := time.Parse(time.RFC3339Nano, p.Since)
		if err != nil {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "audit.tail: since %q is not RFC 3339", p.Since)
		}
		f.Since = t
	}
	rep, err := g.Audit().TailReport(p.N, f)
	if err != nil {
		return nil, gateway.Errorf(gateway.CodeInternal, "audit.tail: %v", err)
	}
	entries := rep.Entries
	if entries == nil {
		entries = []audit.Entry{}
	}
	return map[string]any{"entries": entries, "corrupt": rep.Corrupt}, nil
}

// ACLStatus is the `acl` object of memory.status and health: what the
// holder has in force and the last load error with its line.
type ACLStatus struct {
	Path   string `json:"path"`
	Source string `json:"source"` // file, defaults or admin-only
	Rules  int    `json:"rules"`
	Error  string `json:"error,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// aclStatus reports g's holder; nil without a guard.
func aclStatus(g *guard.Guard) *ACLStatus {
	if g == nil {
		return nil
	}
	st := g.ACL().Status()
	out := &ACLStatus{Path: st.Path, Source: st.Source, Rules: st.Rules}
	if st.Err != nil {
		out.Error = st.Err.Error()
		var pe *acl.ParseError
		if errors.As(st.Err, &pe) {
			out.Line, out.Column, out.Reason = pe.Line, pe.Column, pe.Reason
		}
	}
	return out
}

// checkImport is the ACL's first word on memory.import: who must be
// granted write on the file r names (importTarget) as given, decided on
// the name alone before the file system is asked, so that the answer
// cannot tell which files exist in a folder who may not write. A refusal
// is audited (operation "import"): a name with folders or a path trick
// (INVALID_REQUEST), the ACL (FORBIDDEN); other malformed names are left
// to memory.Import. The name may look like an existing file's (`NOTES.md`
// beside `notes.md`): memory.Import then picks the next free name and asks
// the guard (its Authorize hook, ActionImport) about that one, which
// canonicalises it and audits the decision.
func checkImport(g *guard.Guard, who acl.Principal, r memory.ImportRequest) error {
	st, err := os.Stat(filepath.Join(g.Workspace(), "memory", "roles"))
	target, err := importTarget(err == nil && st.IsDir(), r)
	if err != nil {
		return g.DenyInvalid(who, "import", r.Name, err.Error())
	}
	if err := acl.Lexical(target); err != nil {
		return g.DenyInvalid(who, "import", target, err.Error())
	}
	if d := g.Decide(who, acl.Write, target); !d.Allowed {
		name, _ := acl.Name(target)
		return g.Deny(who, "import", name, d.Reason)
	}
	return nil
}

// statusWithACL is memory.status: the engine's status plus the ACL's.
func statusWithACL(st memory.Status, g *guard.Guard, scoped bool) any {
	a := aclStatus(g)
	if scoped && a != nil {
		// No absolute path of this computer: the rules file relative to
		// the workspace.
		ws := g.Workspace()
		if rel, err := filepath.Rel(ws, a.Path); err == nil && filepath.IsAbs(a.Path) {
			a.Path = filepath.ToSlash(rel)
		}
		a.Error = strings.ReplaceAll(a.Error, ws+string(filepath.Separator), "")
	}
	return struct {
		memory.Status
		ACL *ACLStatus `json:"acl,omitempty"`
	}{st, a}
}

// forbiddenPrincipal is who a call or connect the gateway refused is
// audited as: admin, authenticated (paired devices and node connections),
// or anonymous (unpaired devices and refused connects).
func forbiddenPrincipal(c *gateway.Call) acl.Principal {
	cls := c.Principal.Class()
	auth := (gateway.OperatorDevice | gateway.NodeDevice | gateway.LocalNode).Has(cls)
	return acl.Principal{Admin: cls == gateway.Admin, Authenticated: auth, IP: c.RemoteIP}
}

// forbiddenTarget is the audit target of a refused call: the method, and
// the device id when the caller named one.
func forbiddenTarget(c *gateway.Call) string {
	if c.Principal.Device != "" {
		return c.Method + " device:" + c.Principal.Device
	}
	return c.Method
}

// Budgets of anonymous refusals audited one by one (anonBudget).
const (
	// AnonAuditPerAddress is how many refusals of anonymous callers from
	// one address (IPv6: its /64) are audited one by one per minute.
	AnonAuditPerAddress = 300
	// AnonAuditTotal is the same for all addresses together.
	AnonAuditTotal = 1200
)

// anonBudget bounds the audit entries of anonymous refusals (refused
// connects, unpaired devices calling what they may not), which cost the
// caller nothing, so that a loop of them cannot fill the disk: per
// address AnonAuditPerAddress a minute and AnonAuditTotal in all; the
// next entry audited for an address says how many of its refusals were
// left out meanwhile.
type anonBudget struct {
	mu     sync.Mutex
	window time.Time
	total  int
	byAddr map[string]*anonCount
}

type anonCount struct{ n, skipped int }

func newAnonBudget() *anonBudget { return &anonBudget{byAddr: map[string]*anonCount{}} }

// admit reports whether a refusal from ip at now is audited, and how many
// refusals from its address were left out before it.
func (b *anonBudget) admit(ip string, now time.Time) (skipped int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.window) >= time.Minute || now.Before(b.window) {
		b.window, b.total = now, 0
		for k, c := range b.byAddr { // keep only what is still to be reported
			if c.skipped == 0 {
				delete(b.byAddr, k)
			} else {
				c.n = 0
			}
		}
	}
	key := anonKey(ip)
	c := b.byAddr[key]
	if c == nil {
		if len(b.byAddr) >= AnonAuditTotal {
			b.total++ // over the total budget anyway: not tracked one by one
			return 0, false
		}
		c = &anonCount{}
		b.byAddr[key] = c
	}
	if c.n >= AnonAuditPerAddress || b.total >= AnonAuditTotal {
		c.skipped++
		return 0, false
	}
	c.n++
	b.total++
	skipped, c.skipped = c.skipped, 0
	return skipped, true
}

// anonKey is an address's budget key: the IP, or an IPv6 address's /64.
func anonKey(ip string) string {
	if a := net.ParseIP(ip); a != nil && a.To4() == nil {
		return a.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip
}
