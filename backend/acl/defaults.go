package acl

// builtin builds a compiled built-in rule; the patterns are constants, so a
// compile error is a programming error.
func builtin(pat string, read, write, collab []string) rule {
	cp, err := compilePattern(pat)
	if err != nil {
		panic("acl: built-in pattern " + pat + ": " + err.Error())
	}
	r := rule{Rule: Rule{Pattern: pat, Read: read, Write: write, Collaborate: collab}, pat: cp}
	for i, names := range [][]string{read, write, collab} {
		for _, n := range names {
			var pr principal
			switch n {
			case "$role":
				pr = principal{kind: pPathRole}
			default:
				var err error
				if pr, err = parsePrincipal(n); err != nil {
					panic("acl: built-in principal " + n + ": " + err.Error())
				}
			}
			r.grant[i] = append(r.grant[i], pr)
		}
	}
	return r
}

func newPolicy(source string, rules ...rule) *Policy {
	p := &Policy{source: source, rules: rules, exact: map[string]int{}}
	for i, r := range rules {
		if r.pat.exact {
			p.exact[r.Pattern] = i
		}
	}
	return p
}

// Defaults returns the policy in force when memory/.acl does not exist
// (SPEC §5.1), in this order:
//
//	global/**      read: [*]                     write: [admin, main]      collaborate: [admin, main]
//	roles/*/**     read: [$role, admin]          write: [$role, admin]     collaborate: [$role, admin]
//	sessions/*/**  read: [$session_owner, admin] write: [$session_owner]   collaborate: [$session_owner]
//	templates/**   read: [*]                     write: [admin]            collaborate: []
//	**             read: [main, admin]           write: [main, admin]      collaborate: [main, admin]
//
// `$role` (built-in only; a .acl cannot use it) is the role whose folder
// `roles/<r>/` holds the file. The first three rows are SPEC §5.1. Decisions
// made here, beyond the SPEC: collaborate is granted to whoever may write
// (so a default workspace can collaborate at all, and opening a
// collaboration is never more than writing); templates/ (SPEC §4.1, copied
// at cold start) is readable by all and written by admin; and every other
// name — the OpenClaw layout's top-level `YYYY-MM-DD.md` and `MEMORY.md`
// (see Name), files directly in `roles/` or `sessions/`, other folders —
// belongs to role main, as the memory package classifies them. Being the
// least specific rule, `**` never overrides the others.
func Defaults() *Policy {
	return newPolicy("defaults",
		builtin("global/**", []string{"*"}, []string{"admin", MainRole}, []string{"admin", MainRole}),
		builtin("roles/*/**", []string{"$role", "admin"}, []string{"$role", "admin"}, []string{"$role", "admin"}),
		builtin("sessions/*/**", []string{"$session_owner", "admin"}, []string{"$session_owner"}, []string{"$session_owner"}),
		builtin("templates/**", []string{"*"}, []string{"admin"}, nil),
		builtin("**", []string{MainRole, "admin"}, []string{MainRole, "admin"}, []string{MainRole, "admin"}),
	)
}

// AdminOnly returns the policy a Holder uses before any .acl has been read
// successfully (never fail open): admin may read, write and collaborate on
// every name; nobody else may do anything.
func AdminOnly() *Policy {
	return newPolicy("admin-only", builtin("**", []string{"admin"}, []string{"admin"}, []string{"admin"}))
}
