package acl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// workspace builds a small workspace in a temp dir and returns its root and
// a folder beside it (outside the workspace).
func workspace(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, f := range []string{
		"MEMORY.md",
		"memory/.acl",
		"memory/2026-01-02.md",
		"memory/global/user-profile.md",
		"memory/global/项目状态.md",
		"memory/roles/writer/notes.md",
		"memory/roles/writer/key.md",
		"memory/roles/code-expert/secret.md",
		"memory/sessions/s-1/context.md",
		"../outside/secret.md",
	} {
		p := filepath.Join(ws, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws, outside
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable here: %v", err)
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	ws, _ := workspace(t)
	for _, c := range []struct {
		raw, why string
	}{
		{"", "empty path"},
		{".", "only \".\""},
		{"./.", "only \".\""},
		{"..", "\"..\""},
		{"../outside/secret.md", "\"..\""},
		{"memory/../../outside/secret.md", "\"..\""},
		{"memory/roles/writer/../code-expert/secret.md", "\"..\""},
		{"memory/roles/writer/..", "\"..\""},
		{"./memory/global/user-profile.md", "\".\" segment"},
		{"memory/./global/user-profile.md", "\".\" segment"},
		{"/etc/passwd", "absolute path"},
		{"/" + strings.TrimPrefix(filepath.ToSlash(ws), "/") + "/MEMORY.md", "absolute path"},
		{`\\server\share\x.md`, "absolute path"},
		{"//server/share/x.md", "absolute path"},
		{`C:\Windows\win.ini`, "Windows drive"},
		{"c:/x.md", "Windows drive"},
		{"C:x.md", "Windows drive"},
		{`memory\roles\code-expert\secret.md`, "backslash"},
		{`memory/roles/writer\..\code-expert/secret.md`, "backslash"},
		{"memory/%2e%2e/%2e%2e/outside/secret.md", "percent-encoding"},
		{"%2e%2e/outside/secret.md", "percent-encoding"},
		{"memory%2Froles%2Fcode-expert%2Fsecret.md", "percent-encoding"},
		{"memory/roles/code-expert/secret%2emd", "percent-encoding"},
		{"memory/global/a\x00.md", "NUL"},
		{"memory/global/a\nb.md", "control character"},
		{"memory/global/\x1b[31m.md", "control character"},
		{"memory/global/\u202Edm.txt", "invisible format character"},
		{"memory/global/\u200Buser-profile.md", "invisible format character"},
		{"\uFEFFmemory/global/user-profile.md", "invisible format character"},
		{"memory/global/cafe\u0301.md", "NFC"},
		{"memory/global/\u1100\u1161.md", "NFC"}, // decomposed Hangul 가
		{"memory\u2215roles\u2215code-expert\u2215secret.md", "look-alike"},
		{"memory/roles\uFF0Fcode-expert/secret.md", "look-alike"},
		{"memory/\uFF0E\uFF0E/outside.md", "look-alike"},
		{"memory/roles/code-expert/secret.md\xff", "UTF-8"},
		{"memory//global/user-profile.md", "empty segment"},
		{"memory/global/", "empty segment"},
		{"~/secret.md", "home-directory"},
		{"~root/x.md", "home-directory"},
		{"memory/global/user-profile.md:secret", "colon"},
		{"memory/global/user-profile.md::$DATA", "colon"},
		{"memory/roles/code-expert/secret.md.", "ends with a dot or space"},
		{"memory/roles/code-expert/secret.md ", "ends with a dot or space"},
		{"memory/roles/code-expert./secret.md", "ends with a dot or space"},
		{"memory/global/CON", "Windows device"},
		{"memory/global/nul.md", "Windows device"},
		{"memory/global/com1.txt", "Windows device"},
		{"memory/" + strings.Repeat("a", 256) + ".md", "segment longer"},
		{strings.Repeat("a/", 2100) + "x.md", "longer than"},
		// case tricks against existing entries
		{"MEMORY/global/user-profile.md", "letter case"},
		{"Memory/roles/writer/notes.md", "letter case"},
		{"memory/ROLES/code-expert/secret.md", "letter case"},
		{"memory/roles/Code-Expert/secret.md", "letter case"},
		{"memory/roles/writer/NOTES.md", "letter case"},
		{"memory/roles/writer/Notes.md", "letter case"},
		{"memory/roles/writer/\u212Aey.md", "NFC"},           // KELVIN SIGN: NFC maps it to K
		{"memory/roles/writer/note\u017F.md", "letter case"}, // LONG S folds to s: notes.md
		{"memory/GLOBAL/new-file.md", "letter case"},
	} {
		t.Run(c.raw, func(t *testing.T) {
			got, err := Canonicalize(ws, c.raw)
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %q, want an error (%s)", c.raw, got, c.why)
			}
			var pe *PathError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("error %T %v is not a *PathError matching ErrInvalidPath", err, err)
			}
			if !strings.Contains(pe.Reason, c.why) {
				t.Fatalf("reason %q, want it to contain %q", pe.Reason, c.why)
			}
		})
	}
}

func TestCanonicalizeAccepts(t *testing.T) {
	ws, _ := workspace(t)
	for _, c := range []struct{ raw, want string }{
		{"memory/global/user-profile.md", ""},
		{"memory/global/项目状态.md", ""},
		{"memory/global/新的笔记（一）.md", ""}, // not there yet; full-width parentheses are ordinary
		{"memory/roles/writer/笔记 2026.md", ""},
		{"memory/roles/new-role/config.md", ""}, // folders that do not exist yet
		{"memory/global/caf\u00e9.md", ""},      // NFC é
		{"memory/global/\uAC00.md", ""},         // composed Hangul 가
		{"memory/global/100%.md", ""},           // a lone % is not an escape
		{"memory/global/50%off.md", ""},         // "%of" is not %XX
		{"memory/2026-01-02.md", ""},
		{"memory/.acl", ""},
		{"memory/sessions/s-1/context.md", ""},
		{"MEMORY.md", ""},
		{"memory", ""},
		{"memory/roles/writer/notes.md/sub.md", ""}, // below a file: names nothing, not refused here
	} {
		want := c.want
		if want == "" {
			want = c.raw
		}
		got, err := Canonicalize(ws, c.raw)
		if err != nil || got != want {
			t.Errorf("Canonicalize(%q) = %q, %v; want %q", c.raw, got, err, want)
		}
	}
}

func TestCanonicalizeSymlinks(t *testing.T) {
	ws, outside := workspace(t)
	mem := filepath.Join(ws, "memory")
	symlink(t, filepath.Join(outside, "secret.md"), filepath.Join(mem, "roles/writer/escape-abs.md"))
	symlink(t, "../../../../outside/secret.md", filepath.Join(mem, "roles/writer/escape-rel.md"))
	symlink(t, outside, filepath.Join(mem, "roles/evil"))
	symlink(t, "/", filepath.Join(mem, "global/rootfs"))
	symlink(t, "../nowhere/x.md", filepath.Join(mem, "roles/writer/dangling.md"))
	symlink(t, "loop.md", filepath.Join(mem, "roles/writer/loop.md"))
	symlink(t, "../code-expert/secret.md", filepath.Join(mem, "roles/writer/peek.md"))
	symlink(t, "global", filepath.Join(mem, "shared"))
	symlink(t, "../../..", filepath.Join(mem, "roles/writer/top"))
	symlink(t, "escape-rel.md", filepath.Join(mem, "roles/writer/chain.md"))

	refused := []struct{ raw, why string }{
		{"memory/roles/writer/escape-abs.md", "outside the workspace"},
		{"memory/roles/writer/escape-rel.md", "outside the workspace"},
		{"memory/roles/writer/chain.md", "outside the workspace"},
		{"memory/roles/evil/secret.md", "outside the workspace"},
		{"memory/roles/evil/new.md", "outside the workspace"},
		{"memory/global/rootfs/etc/passwd", "outside the workspace"},
		{"memory/roles/writer/dangling.md", "cannot be resolved"},
		{"memory/roles/writer/loop.md", "cannot be resolved"},
		{"memory/roles/writer/top", "workspace root"},
		{"memory/roles/writer/top/memory/roles/writer/escape-abs.md", "outside the workspace"},
	}
	for _, c := range refused {
		got, err := Canonicalize(ws, c.raw)
		var pe *PathError
		if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidPath) || !strings.Contains(pe.Reason, c.why) {
			t.Errorf("Canonicalize(%q) = %q, %v; want a PathError about %q", c.raw, got, err, c.why)
		}
	}
	// Links that stay inside resolve to the real file, so the real file's
	// rules apply (writer's peek.md is code-expert's secret).
	accepted := []struct{ raw, want string }{
		{"memory/roles/writer/peek.md", "memory/roles/code-expert/secret.md"},
		{"memory/shared/user-profile.md", "memory/global/user-profile.md"},
		{"memory/shared/new.md", "memory/global/new.md"},
		{"memory/roles/writer/top/MEMORY.md", "MEMORY.md"},
	}
	for _, c := range accepted {
		got, err := Canonicalize(ws, c.raw)
		if err != nil || got != c.want {
			t.Errorf("Canonicalize(%q) = %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
	name, _ := Name("memory/roles/code-expert/secret.md")
	if d := Defaults().Check(writer, Read, name, nil); d.Allowed {
		t.Fatalf("writer reads code-expert's file through a link: %+v", d)
	}

	// The workspace itself may be reached through a symlink.
	wsLink := filepath.Join(filepath.Dir(ws), "ws-link")
	symlink(t, ws, wsLink)
	if got, err := Canonicalize(wsLink, "memory/global/user-profile.md"); err != nil || got != "memory/global/user-profile.md" {
		t.Fatalf("workspace via symlink: %q, %v", got, err)
	}
	if _, err := Canonicalize(wsLink, "memory/roles/writer/escape-abs.md"); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("escape through a linked workspace: %v", err)
	}
}

func TestCanonicalizeWorkspaceErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	_, err := Canonicalize(missing, "memory/global/a.md")
	if err == nil || errors.Is(err, ErrInvalidPath) {
		t.Fatalf("missing workspace: %v (want an error that is not ErrInvalidPath)", err)
	}
	// The lexical checks come first: a hostile path is refused as such even
	// when the workspace is missing.
	if _, err := Canonicalize(missing, "../x"); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("hostile path with missing workspace: %v", err)
	}
}

func TestCanonicalizeNormalisationOnDisk(t *testing.T) {
	ws, _ := workspace(t)
	nfd := filepath.Join(ws, "memory", "global", "cafe\u0301.md") // stored decomposed
	if err := os.WriteFile(nfd, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const raw = "memory/global/caf\u00e9.md" // asked for composed
	got, err := Canonicalize(ws, raw)
	a, _ := os.Lstat(nfd)
	b, errB := os.Lstat(filepath.Join(ws, filepath.FromSlash(raw)))
	if errB == nil && os.SameFile(a, b) {
		// The file system ignores normalisation (macOS): the NFC name opens it.
		if err != nil || got != raw {
			t.Fatalf("Canonicalize(%q) = %q, %v on a normalisation-insensitive file system", raw, got, err)
		}
		return
	}
	var pe *PathError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "Unicode normalisation") {
		t.Fatalf("Canonicalize(%q) = %q, %v; want a refusal (it would create a look-alike of %q)", raw, got, err, "cafe\u0301.md")
	}
}
