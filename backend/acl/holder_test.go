package acl

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// logFile is where a test Holder logs: a file is safe for the Run goroutine.
type logFile string

func (f logFile) String() string {
	b, _ := os.ReadFile(string(f))
	return string(b)
}

func newTestHolder(t *testing.T) (*Holder, logFile) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "holder.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	h := NewHolder(HolderOptions{
		Logger:       slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})),
		PollInterval: 20 * time.Millisecond,
		Debounce:     5 * time.Millisecond,
	})
	return h, logFile(path)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // as editors and memory writes do
		t.Fatal(err)
	}
}

const goodACL = `version: "1.0"
rules:
  global/**: {read: [writer], write: [admin]}
`

const otherACL = `version: "1.0"
rules:
  global/**: {read: [code-expert], write: [admin]}
`

const badACL = `version: "1.0"
rules:
  global/**: {read: [writer], wirte: [admin]}
`

func TestHolderNothingLoadedIsAdminOnly(t *testing.T) {
	h, _ := newTestHolder(t)
	st := h.Status()
	if st.Source != "admin-only" || st.Err == nil {
		t.Fatalf("status before Load: %+v", st)
	}
	if d := h.Check(mainP, Read, "global/a.md", nil); d.Allowed {
		t.Fatalf("a role was allowed before any load: %+v", d)
	}
	if d := h.Check(admin, Write, "global/a.md", nil); !d.Allowed {
		t.Fatalf("admin denied before any load: %+v", d)
	}
	if err := h.Reload(); err == nil {
		t.Fatal("Reload without Load succeeded")
	}
	if err := h.Run(context.Background()); err == nil {
		t.Fatal("Run without Load succeeded")
	}
}

func TestHolderWithAndWithoutFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "memory", ".acl")
	h, _ := newTestHolder(t)

	// Absent: the defaults (writer owns roles/writer, not global writes).
	if err := h.Load(path); err != nil {
		t.Fatalf("Load of an absent file: %v", err)
	}
	if st := h.Status(); st.Source != "defaults" || st.Err != nil || st.Rules != 5 {
		t.Fatalf("status: %+v", st)
	}
	if d := h.Check(writer, Write, "roles/writer/x.md", nil); !d.Allowed {
		t.Fatalf("defaults: %+v", d)
	}

	// Present: its rules alone, no defaults behind them.
	writeFile(t, path, goodACL)
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := h.Status(); st.Source != "file" || st.Rules != 1 || st.Err != nil || st.LoadedAt.IsZero() {
		t.Fatalf("status: %+v", st)
	}
	if d := h.Check(writer, Write, "roles/writer/x.md", nil); d.Allowed || d.Rule != "" {
		t.Fatalf("a default leaked into a file policy: %+v", d)
	}
	if d := h.Check(writer, Read, "global/x.md", nil); !d.Allowed {
		t.Fatalf("file rule: %+v", d)
	}

	// Removed again: back to the defaults.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(); err != nil || h.Status().Source != "defaults" {
		t.Fatalf("after removal: %v %+v", err, h.Status())
	}
}

func TestHolderKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".acl")
	h, logs := newTestHolder(t)
	writeFile(t, path, goodACL)
	if err := h.Load(path); err != nil {
		t.Fatal(err)
	}
	good := h.Policy()

	writeFile(t, path, badACL)
	err := h.Reload()
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 3 || !strings.Contains(pe.Reason, "wirte") {
		t.Fatalf("Reload of a bad file: %v", err)
	}
	if h.Policy() != good {
		t.Fatal("a bad reload replaced the policy")
	}
	if d := h.Check(writer, Read, "global/x.md", nil); !d.Allowed {
		t.Fatalf("last good rules not in force: %+v", d)
	}
	st := h.Status()
	if st.Source != "file" || !errors.As(st.Err, &pe) || pe.Line != 3 {
		t.Fatalf("status after a bad reload: %+v", st)
	}
	if l := logs.String(); !strings.Contains(l, "acl invalid; keeping last good rules") || !strings.Contains(l, "line=3") {
		t.Fatalf("log does not report the line: %s", l)
	}

	// Fixed: the new rules and no error.
	writeFile(t, path, otherACL)
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if d := h.Check(coder, Read, "global/x.md", nil); !d.Allowed || h.Status().Err != nil {
		t.Fatalf("fixed file not in force: %+v %+v", d, h.Status())
	}
}

func TestHolderDefaultsSurviveABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".acl")
	h, _ := newTestHolder(t)
	if err := h.Load(path); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, badACL)
	if err := h.Reload(); !errors.Is(err, ErrInvalidACL) {
		t.Fatalf("Reload: %v", err)
	}
	if st := h.Status(); st.Source != "defaults" || st.Err == nil {
		t.Fatalf("status: %+v", st)
	}
}

func TestHolderFirstLoadFailureDenies(t *testing.T) {
	for _, c := range []struct {
		name    string
		content string
	}{
		{"malformed", badACL},
		{"wrong version", "version: \"9\"\nrules: {}\n"},
		{"not yaml", "\x00\x01\x02"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".acl")
			writeFile(t, path, c.content)
			h, _ := newTestHolder(t)
			if err := h.Load(path); !errors.Is(err, ErrInvalidACL) {
				t.Fatalf("Load: %v", err)
			}
			if st := h.Status(); st.Source != "admin-only" || st.Err == nil {
				t.Fatalf("status: %+v", st)
			}
			for _, name := range []string{"global/x.md", "roles/writer/x.md", "sessions/s/x.md", "2026-01-01.md"} {
				for _, a := range Actions() {
					if d := h.Check(writer, a, name, OwnerMap{"s": "writer"}); d.Allowed {
						t.Fatalf("fail-open: %+v", d)
					}
					if d := h.Check(mainP, a, name, nil); d.Allowed {
						t.Fatalf("fail-open for main: %+v", d)
					}
				}
				if d := h.Check(admin, Read, name, nil); !d.Allowed {
					t.Fatalf("admin locked out: %+v", d)
				}
			}
		})
	}
	// A path that is a folder cannot be read: an error, not the defaults.
	dir := t.TempDir()
	h, _ := newTestHolder(t)
	if err := h.Load(dir); err == nil || h.Status().Source != "admin-only" {
		t.Fatalf("Load of a folder: %v %+v", err, h.Status())
	}
}

// waitFor polls cond until it holds or a generous deadline passes; the
// deadline only bounds a hung test, it is not a timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHolderRunReloadsOnChange(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(ws, "memory", ".acl") // memory/ does not exist yet: polling must notice it
	h, _ := newTestHolder(t)
	if err := h.Load(path); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()

	writeFile(t, path, goodACL)
	waitFor(t, "the new file", func() bool { return h.Status().Source == "file" })
	if d := h.Check(writer, Read, "global/x.md", nil); !d.Allowed {
		t.Fatalf("%+v", d)
	}

	writeFile(t, path, badACL)
	waitFor(t, "the error of the bad file", func() bool { return h.Status().Err != nil })
	if d := h.Check(writer, Read, "global/x.md", nil); !d.Allowed {
		t.Fatalf("last good rules dropped by Run: %+v", d)
	}

	// In-place edit (no rename).
	if err := os.WriteFile(path, []byte(otherACL), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fixed file", func() bool {
		return h.Status().Err == nil && h.Check(coder, Read, "global/x.md", nil).Allowed
	})

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the defaults after removal", func() bool { return h.Status().Source == "defaults" })

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
}
