package acl

import (
	"reflect"
	"testing"
)

func TestExplain(t *testing.T) {
	p, err := Parse([]byte(`version: "1.0"
rules:
  global/**:        {read: ["*"], write: [admin, main]}
  sessions/*/*:     {read: [$session_owner, admin], write: [$session_owner]}
`))
	if err != nil {
		t.Fatal(err)
	}
	owners := OwnerMap{"s1": "writer"}
	tests := []struct {
		name string
		pol  *Policy
		in   string
		ok   bool
		want Grant
	}{
		{"file rule", p, "global/a.md", true, Grant{Rule: "global/**", Line: 3, Source: "file", Read: []string{"*"}, Write: []string{"admin", "main"}, Collaborate: []string{}}},
		{"owner known", p, "sessions/s1/c.md", true, Grant{Rule: "sessions/*/*", Line: 4, Source: "file", Read: []string{"$session_owner", "admin"}, Write: []string{"$session_owner"}, Collaborate: []string{}, SessionOwner: "writer"}},
		{"owner unknown", p, "sessions/s9/c.md", true, Grant{Rule: "sessions/*/*", Line: 4, Source: "file", Read: []string{"$session_owner", "admin"}, Write: []string{"$session_owner"}, Collaborate: []string{}}},
		{"no rule", p, "roles/x/a.md", true, Grant{Source: "file", Read: []string{}, Write: []string{}, Collaborate: []string{}}},
		{"reserved", p, ".acl", true, Grant{Rule: ".acl", Source: "file", Read: []string{"admin"}, Write: []string{"admin"}, Collaborate: []string{}}},
		{"malformed", p, "../x.md", false, Grant{}},
		{"defaults $role", Defaults(), "roles/写作/a.md", true, Grant{Rule: "roles/*/**", Source: "defaults", Read: []string{"写作", "admin"}, Write: []string{"写作", "admin"}, Collaborate: []string{"写作", "admin"}}},
		{"admin-only", AdminOnly(), "global/a.md", true, Grant{Rule: "**", Source: "admin-only", Read: []string{"admin"}, Write: []string{"admin"}, Collaborate: []string{"admin"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := tc.pol.Explain(tc.in, owners)
			if ok != tc.ok || !reflect.DeepEqual(g, tc.want) {
				t.Errorf("Explain(%q) = %+v, %v; want %+v, %v", tc.in, g, ok, tc.want, tc.ok)
			}
		})
	}
}
