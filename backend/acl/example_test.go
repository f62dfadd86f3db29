package acl_test

import (
	"errors"
	"fmt"

	"github.com/atrium-dev/atrium/backend/acl"
)

func Example() {
	policy, err := acl.Parse([]byte(`version: "1.0"
rules:
  roles/code-expert/*:             {read: [code-expert, admin, main], write: [code-expert, admin]}
  roles/code-expert/experience.md: {read: [code-expert, writer, admin], write: [code-expert]}
`))
	if err != nil {
		panic(err)
	}
	writer := acl.Principal{Role: "writer"}
	for _, rel := range []string{"memory/roles/code-expert/experience.md", "memory/roles/code-expert/tips.md"} {
		name, _ := acl.Name(rel) // workspace-relative (as Canonicalize returns it) → ACL name
		d := policy.Check(writer, acl.Read, name, nil)
		fmt.Println(d.Allowed, d.Reason)
	}

	_, err = acl.Parse([]byte("version: \"1.0\"\nrules:\n  global/**: {read: [\"*\"], delete: [admin]}\n"))
	var pe *acl.ParseError
	fmt.Println(errors.As(err, &pe), pe.Line, pe.Reason)
	// Output:
	// true rule "roles/code-expert/experience.md" (line 4) grants read to role writer
	// false rule "roles/code-expert/*" (line 3) does not grant read to role writer
	// true 3 unknown action "delete" (expected read, write, collaborate or ttl)
}
