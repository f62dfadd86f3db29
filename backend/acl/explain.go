package acl

// Grant says who the policy in force lets read, write and collaborate on one
// name, and which rule decided (for the UI's ACL view; issue 4 item 8). It
// describes the rule; Check stays the only decision.
type Grant struct {
	// Rule is the deciding rule's pattern (".acl" for the reserved file),
	// "" when no rule matches (everything is denied).
	Rule string `json:"rule"`
	// Line is the rule's line in the .acl file; 0 for built-in rules.
	Line int `json:"line,omitempty"`
	// Source is the policy's origin: "file", "defaults" or "admin-only".
	Source string `json:"source"`
	// Read, Write and Collaborate list the principals as the rule writes
	// them, except that the built-in `$role` of the defaults is replaced by
	// the role whose folder holds the file. Never nil.
	Read        []string `json:"read"`
	Write       []string `json:"write"`
	Collaborate []string `json:"collaborate"`
	// SessionOwner is the role `$session_owner` stands for on this file
	// (a live session's recorded owner), when the rule names
	// `$session_owner` and the owner is known.
	SessionOwner string `json:"sessionOwner,omitempty"`
}

// Explain returns the Grant for name (a name relative to memory/, as for
// Check). ok is false for a malformed name. owners may be nil.
func (p *Policy) Explain(name string, owners SessionOwners) (g Grant, ok bool) {
	r, segs, err := p.match(name)
	if err != nil {
		return Grant{}, false
	}
	g = Grant{Source: p.Source(), Read: []string{}, Write: []string{}, Collaborate: []string{}}
	if name == ReservedName {
		g.Rule, g.Read, g.Write = ReservedName, []string{"admin"}, []string{"admin"}
		return g, true
	}
	if r == nil {
		return g, true
	}
	g.Rule, g.Line = r.Pattern, r.Line
	folderRole := ""
	if len(segs) >= 3 && segs[0] == "roles" {
		folderRole = segs[1]
	}
	usesOwner := false
	expand := func(in []string) []string {
		out := make([]string, 0, len(in))
		seen := map[string]bool{}
		for _, s := range in {
			if s == "$role" {
				if folderRole == "" {
					continue // matches nobody on this name
				}
				s = folderRole
			}
			if s == "$session_owner" {
				usesOwner = true
			}
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
		return out
	}
	g.Read, g.Write, g.Collaborate = expand(r.Read), expand(r.Write), expand(r.Collaborate)
	if usesOwner && owners != nil && len(segs) >= 3 && segs[0] == "sessions" {
		if owner, ok := owners.SessionOwner(segs[1]); ok && owner != "" {
			g.SessionOwner = owner
		}
	}
	return g, true
}

// Explain is Policy().Explain.
func (h *Holder) Explain(name string, owners SessionOwners) (Grant, bool) {
	return h.Policy().Explain(name, owners)
}
