package api

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/atrium-dev/atrium/backend/memory"
)

// errUnknownRole: `as` names a role the workspace does not have.
var errUnknownRole = errors.New("not a role of this workspace")

// knownRole checks that role (already acl.ValidateRole'd) is one of the
// workspace's roles, as memory.Manager.ListRoles lists them: main (always:
// the chat's own role, and the OpenClaw layout's) or a folder
// memory/roles/<role>/ under workspace, by its exact name. The gateway's
// `as` must name one, as the CLI's --as must (issue 21 item 7): a mistyped
// role would act as a role that may read nothing and answer "no results"
// as if there were none. Errors: errUnknownRole, or reading the folder.
func knownRole(workspace, role string) error {
	if role == memory.MainRole {
		return nil
	}
	es, err := os.ReadDir(filepath.Join(workspace, "memory", "roles"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("list roles: %w", err)
	}
	for _, e := range es {
		if e.IsDir() && e.Name() == role {
			return nil
		}
	}
	return fmt.Errorf("%q is %w (a folder memory/roles/%s/, or main; create one with atrium agents create)", role, errUnknownRole, role)
}
