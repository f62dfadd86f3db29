package api

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// TestAsUnknownRole (issue 21 item 7): `as` over the gateway must name a
// role of the workspace, as the CLI's --as must; one it does not have (a
// typo, a case variant, a file where a role folder would be) is
// INVALID_REQUEST and audited, instead of acting as a role that may read
// nothing (on the old main memory.files answered an empty list).
func TestAsUnknownRole(t *testing.T) {
	cl, alog, ws := startFiles(t, "", nil)
	if err := os.WriteFile(filepath.Join(ws, "memory", "roles", "notes.md"), []byte("# a file, not a role\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, as := range []string{"writer", "code-expert", "main"} {
		if err := cl.Call(ctx, "memory.files", map[string]any{"as": as}, nil); err != nil {
			t.Errorf("as %s (a role of the workspace): %v", as, err)
		}
	}
	for _, as := range []string{"ghost", "Writer", "notes.md", "write"} {
		err := cl.Call(ctx, "memory.files", map[string]any{"as": as}, nil)
		var ge *gateway.Error
		if !errors.As(err, &ge) || ge.Code != gateway.CodeInvalidRequest || !strings.Contains(ge.Message, "not a role of this workspace") {
			t.Errorf("as %q: %v, want INVALID_REQUEST naming no role", as, err)
			continue
		}
		es, err := alog.Tail(1, audit.Filter{})
		if err != nil || len(es) != 1 || es[0].Result != audit.Denied || es[0].Operation != "memory.files" || es[0].Target != "as "+as {
			t.Errorf("as %q: newest audit entry %+v %v, want memory.files denied for %q", as, es, err, "as "+as)
		}
	}
}
