package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFold(t *testing.T) {
	alike := [][2]string{
		{"ＮＯＴＥＳ.md", "notes.md"},     // fullwidth
		{"Notes.MD", "notes.md"},     // case
		{"STRASSE.md", "straße.md"},  // full case folding
		{"ΣΟΦΙΑ.md", "σοφια.md"},     // Greek final sigma
		{"ﬁle.md", "file.md"},        // ligature
		{"note\u200b.md", "note.md"}, // zero-width space
		{"cafe\u0301.md", "café.md"}, // decomposed vs composed
		{"笔记（一）.md", "笔记(一).md"},     // fullwidth parentheses
		{"会议２０２６.md", "会议2026.md"},   // fullwidth digits
		{"ｶﾀｶﾅ.md", "カタカナ.md"},       // halfwidth katakana
		{"第①章.md", "第1章.md"},         // circled digit
		{"ＲＯＬＥＳ", "roles"},           // a folder
		{"筆記.md", "筆記.md"},           // itself
	}
	for _, p := range alike {
		if Fold(p[0]) != Fold(p[1]) {
			t.Errorf("Fold(%q) = %q, Fold(%q) = %q: want equal", p[0], Fold(p[0]), p[1], Fold(p[1]))
		}
	}
	different := [][2]string{
		{"筆記.md", "笔记.md"}, // Traditional and Simplified are different names
		{"notes.md", "note.md"},
		{"notes.md", "notes-1.md"},
		{"notes.md", "notes.txt"},
		{"记忆.md", "记录.md"},
	}
	for _, p := range different {
		if Fold(p[0]) == Fold(p[1]) {
			t.Errorf("Fold(%q) = Fold(%q) = %q: want different", p[0], p[1], Fold(p[0]))
		}
	}
}

func TestCheckNew(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"memory/roles/writer", "memory/global"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"memory/notes.md", "memory/Notes-old.md", "memory/global/笔记(一).md", "memory/global/会议2026.md"} {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(f)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tests := []struct {
		rel, name, existing string
	}{
		{"memory/ＮＯＴＥＳ.md", "memory/ＮＯＴＥＳ.md", "memory/notes.md"},
		{"memory/NOTES.md", "memory/NOTES.md", "memory/notes.md"},
		{"memory/notes-OLD.md", "memory/notes-OLD.md", "memory/Notes-old.md"},
		{"memory/global/笔记（一）.md", "memory/global/笔记（一）.md", "memory/global/笔记(一).md"},
		{"memory/global/会议２０２６.md", "memory/global/会议２０２６.md", "memory/global/会议2026.md"},
		// A new folder on the way that looks like an existing one.
		{"memory/ＲＯＬＥＳ/writer/x.md", "memory/ＲＯＬＥＳ", "memory/roles"},
		{"memory/roles/Writer/x.md", "memory/roles/Writer", "memory/roles/writer"},
		{"MEMORY/x.md", "MEMORY", "memory"},
	}
	for _, tc := range tests {
		err := CheckNew(root, tc.rel)
		var le *LookalikeError
		if !errors.As(err, &le) || !errors.Is(err, ErrLookalike) || le.Name != tc.name || le.Existing != tc.existing ||
			!strings.Contains(err.Error(), tc.existing) {
			t.Errorf("CheckNew(%q) = %v, want %s looks like %s", tc.rel, err, tc.name, tc.existing)
		}
	}
	for _, ok := range []string{
		"memory/notes.md",           // exists: not new
		"memory/notes-2.md",         // new and different
		"memory/roles/writer/x.md",  // new file in an existing folder
		"memory/roles/editor/x.md",  // new folder, different
		"memory/global/笔记(二).md",    // different
		"memory/global/筆記(一).md",    // Traditional is another name
		"memory/sessions/s1/log.md", // several new folders
	} {
		if err := CheckNew(root, ok); err != nil {
			t.Errorf("CheckNew(%q) = %v, want nil", ok, err)
		}
	}
}
