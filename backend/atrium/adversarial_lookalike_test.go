package atrium

// Look-alike file names against the real app over TLS (issue 21 item 5):
// a phone paired as operator, on another LAN address, writes and imports
// names that look like existing files through UTS #39 confusables (a
// Cyrillic о, a Greek Ν, rn for m) as well as case and width. A write is
// refused naming the existing file; an import takes the next free name.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
)

// lookalikeRules let every authenticated principal read and write
// memory/global/, so that the phone may write there whatever memory scope
// it is paired with (admin, or what the rules grant `authenticated`), and
// be told the existing name it may read (a refusal names a file only to a
// caller that may read it: TestAdversarialScope).
const lookalikeRules = `version: "1.0"
rules:
  global/**: {read: ["*", authenticated], write: [admin, authenticated]}
`

func TestAdversarialLookalikes(t *testing.T) {
	k := startAttack(t)
	files := map[string]string{
		"memory/.acl":                      lookalikeRules,
		"memory/global/notes.md":           "# Notes\n",
		"memory/global/memo.md":            "# Memo\n",
		"memory/global/会议记录.md":            "# 会议记录\n",
		"memory/global/plans/2026.md":      "# 2026\n",
		"memory/global/paypal-receipts.md": "# Receipts\n",
		"memory/global/paypal receipts.md": "# Receipts\n",
	}
	for rel, text := range files {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(k.ws, rel)), 0o755))
		must(t, os.WriteFile(filepath.Join(k.ws, rel), []byte(text), 0o644))
	}
	must(t, k.a.ACL.Reload())
	key, toks := k.pair("127.0.0.10", []string{gateway.RoleOperator}, nil, nil)
	phone := k.mustDev("127.0.0.10", key, gateway.ClientOptions{Role: gateway.RoleOperator, DeviceToken: toks[gateway.RoleOperator],
		Client: gateway.ClientInfo{ID: "atrium-ui", Mode: "ui", Platform: "android", Version: "test"}})
	exists := func(rel string) bool {
		_, err := os.Lstat(filepath.Join(k.ws, filepath.FromSlash(rel)))
		return err == nil
	}
	write := func(c *gateway.Client, rel string) error {
		return c.Call(k.ctx, "memory.write", map[string]any{"path": rel, "content": "pwned\n", "mode": "replace"}, nil)
	}

	t.Run("writes_are_refused_naming_the_existing_file", func(t *testing.T) {
		for _, tc := range []struct{ path, code, msg string }{
			{"memory/global/n\u043etes.md", gateway.CodeConflict, "memory/global/n\u043etes.md looks like the existing memory/global/notes.md"}, // Cyrillic о
			{"memory/global/\u039dOTES.md", gateway.CodeConflict, "memory/global/\u039dOTES.md looks like the existing memory/global/notes.md"}, // Greek Ν, then case
			{"memory/global/ｎ\u043eｔｅｓ.md", gateway.CodeConflict, "memory/global/ｎ\u043eｔｅｓ.md looks like the existing memory/global/notes.md"}, // fullwidth with a Cyrillic о
			{"memory/global/rnemo.md", gateway.CodeConflict, "memory/global/rnemo.md looks like the existing memory/global/memo.md"},            // rn and m
			{"memory/global/\u0440\u0430\u0443\u0440\u0430l-receipts.md", gateway.CodeConflict, "looks like the existing memory/global/paypal-receipts.md"},
			{"memory/global/\u0440lans/x.md", gateway.CodeConflict, "memory/global/\u0440lans looks like the existing memory/global/plans"}, // a folder
			// Blanks that show as a space, or at a name's start.
			{"memory/global/paypal\u2800receipts.md", gateway.CodeConflict, "looks like the existing memory/global/paypal receipts.md"},
			{"memory/global/paypal\u3164receipts.md", gateway.CodeConflict, "looks like the existing memory/global/paypal receipts.md"},
			{"memory/global/\u2800memo.md", gateway.CodeConflict, "memory/global/\u2800memo.md looks like the existing memory/global/memo.md"},
			// Case alone: the guard's path check refuses it first, naming it too.
			{"memory/global/NOTES.md", gateway.CodeInvalidRequest, `"NOTES.md" differs only in letter case from the existing "notes.md"`},
		} {
			err := write(phone, tc.path)
			refused(t, "write "+tc.path, err, tc.code, "", tc.msg)
			if exists(tc.path) {
				t.Errorf("%s was created", tc.path)
			}
		}
		if b, err := os.ReadFile(filepath.Join(k.ws, "memory", "global", "notes.md")); err != nil || string(b) != "# Notes\n" {
			t.Errorf("notes.md is now %q, %v", b, err)
		}
		// Traditional and Simplified Chinese are different names.
		if err := write(phone, "memory/global/會議記錄.md"); err != nil || !exists("memory/global/會議記錄.md") {
			t.Errorf("write 會議記錄.md beside 会议记录.md: %v", err)
		}
	})

	t.Run("imports_take_the_next_free_name", func(t *testing.T) {
		for _, tc := range []struct{ name, want string }{
			{"NOTES.md", "memory/global/NOTES-1.md"}, // INVALID_REQUEST before issue 21
			{"n\u043etes.md", "memory/global/n\u043etes-2.md"},
			{"\u039dOTES.markdown", "memory/global/\u039dOTES-3.md"},
			{"RNEMO.txt", "memory/global/RNEMO-1.md"},
			{"会议记录.md", "memory/global/会议记录-1.md"},
			{"記憶.md", "memory/global/記憶.md"},
		} {
			var res memory.ImportResult
			err := phone.Call(k.ctx, "memory.import", map[string]any{"name": tc.name, "content": "# imported " + tc.name + "\n", "layer": "global"}, &res)
			if err != nil || res.Path != tc.want {
				t.Errorf("import %s = %+v, %v; want %s", tc.name, res, err, tc.want)
				continue
			}
			if b, err := os.ReadFile(filepath.Join(k.ws, filepath.FromSlash(tc.want))); err != nil || !strings.Contains(string(b), tc.name) {
				t.Errorf("%s holds %q, %v", tc.want, b, err)
			}
			es, err := k.a.Audit.Tail(1, audit.Filter{Operation: "import", Result: audit.Allowed})
			if err != nil || len(es) != 1 || es[0].Target != strings.TrimPrefix(tc.want, "memory/") || es[0].IP != "127.0.0.10" {
				t.Errorf("import %s: audit %+v %v, want an allowed entry for %s from 127.0.0.10", tc.name, es, err, tc.want)
			}
		}
		for _, f := range []string{"notes.md", "memo.md"} {
			if b, err := os.ReadFile(filepath.Join(k.ws, "memory", "global", f)); err != nil || strings.Contains(string(b), "imported") {
				t.Errorf("%s changed: %q %v", f, b, err)
			}
		}
	})

	t.Run("racing_look-alike_creations", func(t *testing.T) {
		// The phone and the person create two look-alike names at once:
		// exactly one is created, the other refused naming it.
		for i := range 10 {
			names := []string{fmt.Sprintf("memory/global/plan%d.md", i), fmt.Sprintf("memory/global/\u0440lan%d.md", i)}
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for j, c := range []*gateway.Client{phone, k.admin} {
				wg.Go(func() { errs[j] = write(c, names[j]) })
			}
			wg.Wait()
			created := 0
			for j, n := range names {
				if exists(n) {
					created++
					if errs[j] != nil {
						t.Errorf("%s exists but its write failed: %v", n, errs[j])
					}
				} else {
					refused(t, "write "+n, errs[j], gateway.CodeConflict, "", "looks like the existing "+names[1-j])
				}
			}
			if created != 1 {
				t.Fatalf("round %d: %d of %q created", i, created, names)
			}
		}
	})
}
