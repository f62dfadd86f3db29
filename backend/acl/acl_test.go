package acl

import (
	"strings"
	"testing"
)

// Principals used throughout the tests.
var (
	writer = Principal{Role: "writer", Authenticated: true}
	coder  = Principal{Role: "code-expert", Authenticated: true}
	mainP  = Principal{Role: "main", Authenticated: true}
	alpha  = Principal{Role: "alpha"}
	beta   = Principal{Role: "beta"}
	gamma  = Principal{Role: "gamma"}
	admin  = Principal{Admin: true, Authenticated: true}
	device = Principal{Authenticated: true}
	anon   = Principal{}
)

type checkCase struct {
	name   string
	who    Principal
	action Action
	path   string
	allow  bool
	rule   string // expected deciding rule ("" = none)
}

func runChecks(t *testing.T, p *Policy, owners SessionOwners, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := p.Check(c.who, c.action, c.path, owners)
			if d.Allowed != c.allow {
				t.Fatalf("Check(%s, %s, %q) = %+v, want allowed=%v", c.who, c.action, c.path, d, c.allow)
			}
			if d.Rule != c.rule {
				t.Fatalf("Check(%s, %s, %q) decided by rule %q, want %q (reason %q)", c.who, c.action, c.path, d.Rule, c.rule, d.Reason)
			}
			if d.Reason == "" {
				t.Fatalf("decision without a reason: %+v", d)
			}
		})
	}
}

func mustParse(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return p
}

// The SPEC §5.1 example, verbatim.
const specExample = `version: "1.0"
rules:
  global/user-profile.md: {read: ["*"], write: [admin, main], collaborate: []}
  roles/code-expert/*:    {read: [code-expert, admin, main], write: [code-expert, admin]}
  roles/code-expert/experience.md: {read: [code-expert, writer, admin], write: [code-expert], collaborate: [code-expert, writer]}
  sessions/*/*:           {read: [$session_owner, admin], write: [$session_owner], ttl: 86400}
`

func TestSpecExample(t *testing.T) {
	p := mustParse(t, specExample)
	rules := p.Rules()
	if len(rules) != 4 {
		t.Fatalf("%d rules, want 4", len(rules))
	}
	wantOrder := []string{"global/user-profile.md", "roles/code-expert/*", "roles/code-expert/experience.md", "sessions/*/*"}
	for i, r := range rules {
		if r.Pattern != wantOrder[i] || r.Line != i+3 {
			t.Fatalf("rule %d = %q at line %d, want %q at line %d", i, r.Pattern, r.Line, wantOrder[i], i+3)
		}
	}
	if rules[3].TTL.Seconds() != 86400 {
		t.Fatalf("ttl = %v, want 86400 s", rules[3].TTL)
	}
	owners := OwnerMap{"s-writer": "writer", "s-coder": "code-expert"}
	const up, ce, exp = "global/user-profile.md", "roles/code-expert/tips.md", "roles/code-expert/experience.md"
	runChecks(t, p, owners, []checkCase{
		{"profile read by writer", writer, Read, up, true, up},
		{"profile read by device: * is every role, not devices", device, Read, up, false, up},
		{"profile read by admin", admin, Read, up, true, up},
		{"profile write by main", mainP, Write, up, true, up},
		{"profile write by admin", admin, Write, up, true, up},
		{"profile write by writer", writer, Write, up, false, up},
		{"profile collaborate: empty list", admin, Collaborate, up, false, up},
		{"other global file: no rule", writer, Read, "global/preferences.md", false, ""},
		{"coder reads own tips", coder, Read, ce, true, "roles/code-expert/*"},
		{"main reads coder tips", mainP, Read, ce, true, "roles/code-expert/*"},
		{"writer cannot read coder tips", writer, Read, ce, false, "roles/code-expert/*"},
		{"main cannot write coder tips", mainP, Write, ce, false, "roles/code-expert/*"},
		{"collaborate absent means nobody", coder, Collaborate, ce, false, "roles/code-expert/*"},
		{"* stays in one segment", coder, Read, "roles/code-expert/sub/deep.md", false, ""},
		{"exact beats pattern: writer reads experience", writer, Read, exp, true, exp},
		{"exact beats pattern: main no longer reads experience", mainP, Read, exp, false, exp},
		{"exact: admin may not write experience", admin, Write, exp, false, exp},
		{"exact: writer collaborates on experience", writer, Collaborate, exp, true, exp},
		{"session owner reads", writer, Read, "sessions/s-writer/context.md", true, "sessions/*/*"},
		{"session owner writes", writer, Write, "sessions/s-writer/context.md", true, "sessions/*/*"},
		{"other role cannot read session", coder, Read, "sessions/s-writer/context.md", false, "sessions/*/*"},
		{"admin reads session", admin, Read, "sessions/s-writer/context.md", true, "sessions/*/*"},
		{"admin cannot write session", admin, Write, "sessions/s-writer/context.md", false, "sessions/*/*"},
		{"unknown session has no owner", writer, Read, "sessions/s-ghost/context.md", false, "sessions/*/*"},
		{"session file one level deeper: no rule", writer, Read, "sessions/s-writer/a/b.md", false, ""},
	})
	// Without a session record nobody is the owner, not even a role named
	// like the session.
	if d := p.Check(Principal{Role: "s-writer"}, Read, "sessions/s-writer/context.md", nil); d.Allowed {
		t.Fatalf("$session_owner assumed without records: %+v", d)
	}
}

func TestMatchingRules(t *testing.T) {
	p := mustParse(t, `version: "1.0"
rules:
  notes/**:           {read: [alpha]}
  notes/*.md:         {read: [beta]}
  notes/a*.md:        {read: [gamma]}
  notes/exact.md:     {read: [admin]}
  tie/a*:             {read: [alpha]}
  tie/*b:             {read: [beta]}
  deep/*:             {read: [alpha]}
  deeper/**:          {read: [alpha]}
  mid/**/end.md:      {read: [alpha]}
  ex/a.md*:           {read: [beta]}
  ex/a.md:            {read: [alpha]}
  "中文/*.md":         {read: [writer]}
  star/*x*y*:         {read: [alpha]}
`)
	runChecks(t, p, nil, []checkCase{
		// specificity: notes/** (6) < notes/*.md (9) < notes/a*.md (10) < exact
		{"** only", alpha, Read, "notes/sub/x.txt", true, "notes/**"},
		{"** loses to *.md", alpha, Read, "notes/x.md", false, "notes/*.md"},
		{"*.md wins", beta, Read, "notes/x.md", true, "notes/*.md"},
		{"a*.md more specific", gamma, Read, "notes/apple.md", true, "notes/a*.md"},
		{"a*.md beats *.md for beta", beta, Read, "notes/apple.md", false, "notes/a*.md"},
		{"exact beats all", admin, Read, "notes/exact.md", true, "notes/exact.md"},
		{"exact: pattern readers lose", beta, Read, "notes/exact.md", false, "notes/exact.md"},
		{"non-md under notes", alpha, Read, "notes/x.txt", true, "notes/**"},
		// ties go to the earlier rule
		{"tie: earlier wins", alpha, Read, "tie/ab", true, "tie/a*"},
		{"tie: later loses", beta, Read, "tie/ab", false, "tie/a*"},
		{"no tie when only one matches", beta, Read, "tie/xb", true, "tie/*b"},
		// * vs **
		{"* matches one segment", alpha, Read, "deep/x.md", true, "deep/*"},
		{"* does not cross /", alpha, Read, "deep/x/y.md", false, ""},
		{"trailing ** crosses /", alpha, Read, "deeper/x/y/z.md", true, "deeper/**"},
		{"trailing ** needs a segment", alpha, Read, "deeper", false, ""},
		{"middle ** zero segments", alpha, Read, "mid/end.md", true, "mid/**/end.md"},
		{"middle ** many segments", alpha, Read, "mid/a/b/c/end.md", true, "mid/**/end.md"},
		{"middle ** wrong tail", alpha, Read, "mid/a/other.md", false, ""},
		// exact beats a pattern of equal specificity written earlier
		{"exact beats equal-specificity earlier pattern", alpha, Read, "ex/a.md", true, "ex/a.md"},
		{"pattern still applies elsewhere", beta, Read, "ex/a.md.bak", true, "ex/a.md*"},
		{"Chinese pattern", writer, Read, "中文/笔记.md", true, "中文/*.md"},
		{"several stars", alpha, Read, "star/1x2y3", true, "star/*x*y*"},
		{"several stars, order matters", alpha, Read, "star/y-x", false, ""},
		// no match denies
		{"no match", admin, Read, "elsewhere/x.md", false, ""},
		{"case-sensitive", beta, Read, "NOTES/x.md", false, ""},
	})
}

func TestPrincipalsAndActions(t *testing.T) {
	p := mustParse(t, `version: "1.0"
rules:
  p/star.md:   {read: ["*"]}
  p/all.md:    {read: [all]}
  p/auth.md:   {read: [authenticated]}
  p/admin.md:  {read: [admin]}
  p/role.md:   {read: [writer]}
  p/none.md:   {}
  p/empty.md:  {read: [], write: null}
  act/x.md:    {read: [alpha], write: [beta], collaborate: [gamma]}
  sessions/*/*: {read: [$session_owner], write: [$session_owner], collaborate: [$session_owner]}
  notsession/*/*: {read: [$session_owner]}
`)
	owners := OwnerMap{"s1": "writer", "blank": ""}
	type row struct {
		path string
		who  Principal
		ok   bool
	}
	var cases []checkCase
	add := func(action Action, rows ...row) {
		for _, r := range rows {
			rule := r.path
			if strings.HasPrefix(r.path, "sessions/") {
				rule = "sessions/*/*"
			}
			if strings.HasPrefix(r.path, "notsession/") {
				rule = "notsession/*/*"
			}
			cases = append(cases, checkCase{string(action) + " " + r.path + " by " + r.who.String(), r.who, action, r.path, r.ok, rule})
		}
	}
	add(Read,
		row{"p/star.md", writer, true}, row{"p/star.md", admin, true}, row{"p/star.md", device, false}, row{"p/star.md", anon, false},
		row{"p/all.md", coder, true}, row{"p/all.md", admin, true}, row{"p/all.md", device, false}, row{"p/all.md", anon, false},
		row{"p/auth.md", coder, true}, row{"p/auth.md", admin, true}, row{"p/auth.md", device, true}, row{"p/auth.md", anon, false},
		row{"p/auth.md", Principal{Role: "bare"}, true},
		row{"p/admin.md", admin, true}, row{"p/admin.md", writer, false}, row{"p/admin.md", device, false},
		row{"p/admin.md", Principal{Role: "admin"}, false}, // a role called admin is not the person
		row{"p/role.md", writer, true}, row{"p/role.md", coder, false}, row{"p/role.md", admin, false},
		row{"p/role.md", Principal{Role: "Writer"}, false},
		row{"p/none.md", admin, false}, row{"p/empty.md", admin, false},
		row{"act/x.md", alpha, true}, row{"act/x.md", beta, false}, row{"act/x.md", gamma, false},
		row{"sessions/s1/ctx.md", writer, true}, row{"sessions/s1/ctx.md", coder, false},
		row{"sessions/s1/ctx.md", admin, false}, row{"sessions/s1/ctx.md", device, false},
		row{"sessions/ghost/ctx.md", writer, false}, row{"sessions/blank/ctx.md", writer, false},
		row{"sessions/blank/ctx.md", anon, false},
		row{"notsession/s1/ctx.md", writer, false}, // $session_owner only resolves under sessions/<id>/
	)
	add(Write,
		row{"p/empty.md", admin, false},
		row{"act/x.md", alpha, false}, row{"act/x.md", beta, true}, row{"act/x.md", gamma, false},
		row{"sessions/s1/ctx.md", writer, true}, row{"sessions/s1/ctx.md", coder, false},
	)
	add(Collaborate,
		row{"act/x.md", alpha, false}, row{"act/x.md", beta, false}, row{"act/x.md", gamma, true},
		row{"sessions/s1/ctx.md", writer, true}, row{"sessions/s1/ctx.md", coder, false},
	)
	runChecks(t, p, owners, cases)
}

func TestCheckRefusesMalformedRequests(t *testing.T) {
	open := mustParse(t, `version: "1.0"
rules:
  "**": {read: ["*", authenticated], write: ["*", authenticated], collaborate: ["*"]}
`)
	for _, c := range []struct {
		name   string
		who    Principal
		action Action
		path   string
		allow  bool
		why    string
	}{
		{"unknown action", admin, Action("delete"), "a.md", false, "unknown action"},
		{"empty action", admin, "", "a.md", false, "unknown action"},
		{"dot-dot", admin, Read, "../a.md", false, "invalid name"},
		{"absolute", admin, Read, "/etc/passwd", false, "invalid name"},
		{"empty", admin, Read, "", false, "invalid name"},
		{"double slash", admin, Read, "a//b.md", false, "invalid name"},
		{"backslash", admin, Read, `a\b.md`, false, "invalid name"},
		{"star in a name", admin, Read, "a/*.md", false, "invalid name"},
		{"non-NFC", admin, Read, "cafe\u0301.md", false, "invalid name"},
		{".acl read by role under an open rule", writer, Read, ".acl", false, "reserved"},
		{".acl write by role under an open rule", mainP, Write, ".acl", false, "reserved"},
		{".acl write by device", device, Write, ".acl", false, "reserved"},
		{".acl read by admin", admin, Read, ".acl", true, "only admin"},
		{".acl write by admin", admin, Write, ".acl", true, "only admin"},
		{".acl collaborate by admin", admin, Collaborate, ".acl", false, "reserved"},
		{"open rule works elsewhere", device, Write, "x/.hidden.md", true, "grants"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := open.Check(c.who, c.action, c.path, nil)
			if d.Allowed != c.allow || !strings.Contains(d.Reason, c.why) {
				t.Fatalf("Check = %+v, want allowed=%v with reason containing %q", d, c.allow, c.why)
			}
		})
	}
	var nilPolicy *Policy
	if d := nilPolicy.Check(admin, Read, "global/a.md", nil); d.Allowed {
		t.Fatalf("nil policy allowed: %+v", d)
	}
}

func TestDefaults(t *testing.T) {
	p := Defaults()
	if p.Source() != "defaults" {
		t.Fatalf("source %q", p.Source())
	}
	owners := OwnerMap{"s1": "writer"}
	const g, r, s, tm, all = "global/**", "roles/*/**", "sessions/*/**", "templates/**", "**"
	runChecks(t, p, owners, []checkCase{
		{"global read by any role", coder, Read, "global/user-profile.md", true, g},
		{"global read deep", writer, Read, "global/a/b/c.md", true, g},
		{"global read by admin", admin, Read, "global/decisions.md", true, g},
		{"global read by device", device, Read, "global/decisions.md", false, g},
		{"global write by main", mainP, Write, "global/project-status.md", true, g},
		{"global write by admin", admin, Write, "global/project-status.md", true, g},
		{"global write by writer", writer, Write, "global/project-status.md", false, g},
		{"global collaborate by main", mainP, Collaborate, "global/x.md", true, g},
		{"global collaborate by writer", writer, Collaborate, "global/x.md", false, g},
		{"own role read", writer, Read, "roles/writer/style-guide.md", true, r},
		{"own role write deep", writer, Write, "roles/writer/drafts/one.md", true, r},
		{"own role collaborate", writer, Collaborate, "roles/writer/style-guide.md", true, r},
		{"other role read", coder, Read, "roles/writer/style-guide.md", false, r},
		{"other role write", coder, Write, "roles/writer/style-guide.md", false, r},
		{"main is not special in roles", mainP, Read, "roles/writer/style-guide.md", false, r},
		{"admin reads a role", admin, Read, "roles/writer/MEMORY.md", true, r},
		{"admin writes a role", admin, Write, "roles/writer/MEMORY.md", true, r},
		{"device reads a role", device, Read, "roles/writer/MEMORY.md", false, r},
		{"prefix role name is not the role", Principal{Role: "write"}, Read, "roles/writer/x.md", false, r},
		{"file directly in roles/ is main's", mainP, Read, "roles/x.md", true, all},
		{"file directly in roles/ not writer's", writer, Read, "roles/x.md", false, all},
		{"session owner read", writer, Read, "sessions/s1/context.md", true, s},
		{"session owner write", writer, Write, "sessions/s1/task-queue.md", true, s},
		{"session owner deep", writer, Write, "sessions/s1/a/b.md", true, s},
		{"session other role", coder, Read, "sessions/s1/context.md", false, s},
		{"session admin read", admin, Read, "sessions/s1/context.md", true, s},
		{"session admin write", admin, Write, "sessions/s1/context.md", false, s},
		{"unknown session", writer, Read, "sessions/s2/context.md", false, s},
		{"templates read", coder, Read, "templates/role-template.md", true, tm},
		{"templates write by role", mainP, Write, "templates/role-template.md", false, tm},
		{"templates write by admin", admin, Write, "templates/role-template.md", true, tm},
		{"OpenClaw daily log main", mainP, Write, "2026-03-01.md", true, all},
		{"OpenClaw daily log other role", writer, Read, "2026-03-01.md", false, all},
		{"OpenClaw MEMORY.md main", mainP, Read, "MEMORY.md", true, all},
		{"OpenClaw MEMORY.md admin", admin, Write, "MEMORY.md", true, all},
		{"other folder is main's", mainP, Read, "projects/x.md", true, all},
		{".acl stays reserved", mainP, Read, ".acl", false, ".acl"},
	})
	// Without session records no owner is ever assumed.
	if d := p.Check(writer, Read, "sessions/s1/context.md", nil); d.Allowed {
		t.Fatalf("session readable without records: %+v", d)
	}
}

func TestAdminOnly(t *testing.T) {
	p := AdminOnly()
	for _, name := range []string{"global/a.md", "roles/main/MEMORY.md", "sessions/s/x.md", "MEMORY.md"} {
		for _, a := range Actions() {
			if d := p.Check(admin, a, name, nil); !d.Allowed {
				t.Fatalf("admin %s %s denied: %+v", a, name, d)
			}
			for _, who := range []Principal{mainP, writer, device, anon} {
				if d := p.Check(who, a, name, OwnerMap{"s": "writer"}); d.Allowed {
					t.Fatalf("%s %s %s allowed under admin-only: %+v", who, a, name, d)
				}
			}
		}
	}
}

func TestName(t *testing.T) {
	for _, c := range []struct {
		rel, name string
		ok        bool
	}{
		{"memory/global/a.md", "global/a.md", true},
		{"memory/roles/writer/x.md", "roles/writer/x.md", true},
		{"memory/2026-01-02.md", "2026-01-02.md", true},
		{"memory/.acl", ".acl", true},
		{"MEMORY.md", "MEMORY.md", true},
		{"memory.md", "memory.md", true},
		{"SOUL.md", "SOUL.md", true}, // OpenClaw context files at the root
		{"HEARTBEAT.md", "HEARTBEAT.md", true},
		{"soul.md", "", false},
		{"docs/SOUL.md", "", false},
		{"memory", "", false},
		{"memory/", "", false},
		{"notes/a.md", "", false},
		{"README.md", "", false},
	} {
		name, ok := Name(c.rel)
		if name != c.name || ok != c.ok {
			t.Errorf("Name(%q) = %q, %v; want %q, %v", c.rel, name, ok, c.name, c.ok)
		}
	}
}

func TestMatchReportsRule(t *testing.T) {
	p := mustParse(t, specExample)
	r, ok := p.Match("roles/code-expert/experience.md")
	if !ok || r.Pattern != "roles/code-expert/experience.md" || strings.Join(r.Collaborate, ",") != "code-expert,writer" {
		t.Fatalf("Match = %+v, %v", r, ok)
	}
	if _, ok := p.Match("nowhere.md"); ok {
		t.Fatal("Match found a rule for an unmatched name")
	}
	if _, ok := p.Match(".acl"); ok {
		t.Fatal("Match returned a rule for .acl")
	}
	// Rules returns copies.
	rules := p.Rules()
	rules[0].Read[0] = "mutated"
	if p.Rules()[0].Read[0] != "*" {
		t.Fatal("Rules exposes the policy's slices")
	}
}
