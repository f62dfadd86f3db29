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

// TestAlike: real look-alike pairs (case, NFKC, invisible characters and
// UTS #39 confusables, alone and combined) are alike both ways; names that
// differ to a reader, Chinese in both scripts among them, are not.
func TestAlike(t *testing.T) {
	alike := []struct{ a, b, what string }{
		// Case and NFKC (Fold alone found these).
		{"NOTES.md", "notes.md", "case"},
		{"Notes.MD", "notes.md", "case"},
		{"STRASSE.md", "straße.md", "full case folding"},
		{"ΣΟΦΙΑ.md", "σοφια.md", "Greek case"},
		{"ＮＯＴＥＳ.md", "notes.md", "fullwidth"},
		{"ﬁle.md", "file.md", "ligature"},
		{"note\u200b.md", "note.md", "zero-width space"},
		{"no\u200dtes.md", "notes.md", "zero-width joiner"},
		{"notes\u202e.md", "notes.md", "bidi override"},
		{"cafe\u0301.md", "café.md", "decomposed accent"},
		{"笔记（一）.md", "笔记(一).md", "fullwidth parentheses"},
		{"会议２０２６.md", "会议2026.md", "fullwidth digits"},
		{"ｶﾀｶﾅ.md", "カタカナ.md", "halfwidth katakana"},
		{"第①章.md", "第1章.md", "circled digit"},
		{"\U0001d427\U0001d428\U0001d42d\U0001d41e\U0001d42c.md", "notes.md", "mathematical bold"},
		// Cyrillic among Latin letters.
		{"n\u043etes.md", "notes.md", "Cyrillic о"},
		{"r\u0435\u0430dm\u0435.md", "readme.md", "Cyrillic е and а"},
		{"\u0440\u0430\u0443\u0440\u0430l.md", "paypal.md", "Cyrillic р, а, у"},
		{"\u0455\u0441\u043e\u0440\u0435.md", "scope.md", "Cyrillic ѕ, с, о, р, е"},
		{"\u0421\u041e\u0420\u0415.md", "cope.md", "Cyrillic capitals"},
		{"\u0445.md", "x.md", "Cyrillic х"},
		{"ｎ\u043eｔｅｓ.md", "notes.md", "fullwidth with a Cyrillic о"},
		// Greek, Armenian and others among Latin letters.
		{"\u039dOTES.md", "notes.md", "Greek capital Nu, then case"},
		{"\u03bfpen.md", "open.md", "Greek omicron"},
		{"\u03b1lpha.md", "alpha.md", "Greek alpha"},
		{"\u039a\u0395\u03a5.md", "key.md", "Greek Kappa, Epsilon, Upsilon"},
		{"n\u0585tes.md", "notes.md", "Armenian օ"},
		{"\u0131tem.md", "item.md", "dotless i"},
		{"\u00d7.md", "x.md", "multiplication sign"},
		{"\u017ftraße.md", "straße.md", "long s"},
		{"\u212a.md", "k.md", "Kelvin sign"},
		// Letters and digits, letter pairs.
		{"rnemo.md", "memo.md", "rn and m"},
		{"MEMO.md", "rnemo.md", "rn and m, then case"},
		{"modern.md", "modem.md", "rn and m inside a word"},
		{"lnbox.md", "Inbox.md", "l and I"},
		{"fileI.md", "filel.md", "I and l"},
		{"fileI.md", "filei.md", "I and i (case)"},
		{"final.md", "fina1.md", "1 and l"},
		{"N0TES.md", "notes.md", "0 and O, then case"},
		{"notes\u2010old.md", "notes-old.md", "hyphen"},
		{"notes\u2013old.md", "notes-old.md", "en dash"},
		{"notes\u2212old.md", "notes-old.md", "minus sign"},
		// Japanese kana and ideographs drawn alike.
		{"\u30ab.md", "\u529b.md", "katakana カ and 力"},
		{"\u30cf.md", "\u516b.md", "katakana ハ and 八"},
		{"\u30ed\u30b0.md", "\u53e3\u30b0.md", "katakana ロ and 口"},
		{"\u58eb\u5175.md", "\u571f\u5175.md", "士 and 土"},
		// Blanks: whatever shows as blank space is a space, runs of them
		// one, none at a component's ends.
		{"li\u2800st.md", "li st.md", "U+2800 BRAILLE PATTERN BLANK"},
		{"\u2800list.md", "list.md", "a leading U+2800"},
		{"list.md\u2800", "list.md", "a trailing U+2800"},
		{"li\u3164st.md", "li st.md", "U+3164 HANGUL FILLER"},
		{"li\u115fst.md", "li st.md", "U+115F HANGUL CHOSEONG FILLER"},
		{"li\u1160st.md", "li st.md", "U+1160 HANGUL JUNGSEONG FILLER"},
		{"li\uffa0st.md", "li st.md", "U+FFA0 HALFWIDTH HANGUL FILLER"},
		{"li\u2000st.md", "li st.md", "U+2000 EN QUAD"},
		{"li\u2007st.md", "li st.md", "U+2007 FIGURE SPACE"},
		{"li\u200ast.md", "li st.md", "U+200A HAIR SPACE"},
		{"li\u202fst.md", "li st.md", "U+202F NARROW NO-BREAK SPACE"},
		{"li\u205fst.md", "li st.md", "U+205F MEDIUM MATHEMATICAL SPACE"},
		{"li\u3000st.md", "li st.md", "U+3000 IDEOGRAPHIC SPACE"},
		{"li\u00a0st.md", "li st.md", "U+00A0 NO-BREAK SPACE"},
		{"li\u1680st.md", "li st.md", "U+1680 OGHAM SPACE MARK"},
		{"li\u2028st.md", "li st.md", "U+2028 LINE SEPARATOR"},
		{"li\u180est.md", "list.md", "U+180E MONGOLIAN VOWEL SEPARATOR (shows as nothing)"},
		{"li  st.md", "li st.md", "two spaces"},
		{"li \u2800\u3000st.md", "li st.md", "a run of blanks"},
		{" list.md", "list.md", "a leading space"},
		{"\u3000\u2800list.md", "list.md", "leading blanks"},
		{"\u2800Li\u2800st.md", "li st.md", "blanks and case"},
		{"l\u0456\u2800st.md", "li st.md", "a blank and a Cyrillic і"},
		{"\u2800notes/list.md", "notes/list.md", "a leading blank in a folder's name"},
		{"notes/\u2800list.md", "notes/list.md", "a leading blank after a slash"},
		// Folders.
		{"ＲＯＬＥＳ", "roles", "a folder, fullwidth"},
		{"r\u043eles", "roles", "a folder, Cyrillic о"},
	}
	for _, p := range alike {
		if !Alike(p.a, p.b) || !Alike(p.b, p.a) {
			t.Errorf("%s: Alike(%q, %q) = false; keys %q, %q", p.what, p.a, p.b, Keys(p.a), Keys(p.b))
		}
	}
	different := []struct{ a, b, what string }{
		{"筆記.md", "笔记.md", "Traditional and Simplified"},
		{"記憶.md", "记忆.md", "Traditional and Simplified"},
		{"會議.md", "会议.md", "Traditional and Simplified"},
		{"头发.md", "头發.md", "Simplified and Traditional 发"},
		{"记录.md", "纪录.md", "different characters"},
		{"记忆.md", "记录.md", "different words"},
		{"已.md", "己.md", "different characters"},
		{"日.md", "曰.md", "different characters"},
		{"末.md", "未.md", "different characters"},
		{"人.md", "入.md", "different characters"},
		{"会議メモ.md", "会議ノート.md", "Japanese"},
		{"회의록.md", "회의룩.md", "Korean"},
		{"notes.md", "note.md", "a letter more"},
		{"notes.md", "notes-1.md", "the next free name"},
		{"notes-1.md", "notes-2.md", "the next free names"},
		{"notes.md", "notes.txt", "extension"},
		{"2026-01-10.md", "2026-01-01.md", "daily logs"},
		{"café.md", "cafe.md", "an accent"},
		{"über.md", "uber.md", "an umlaut"},
		{"résumé.md", "resume.md", "accents"},
		{"ø.md", "o.md", "a stroke"},
		{"filei.md", "filel.md", "i and l (not transitive through I)"},
		{"notes_old.md", "notes-old.md", "underscore and hyphen"},
		{"notes old.md", "notes-old.md", "space and hyphen"},
		{"plan (1).md", "plan [1].md", "brackets"},
		{"li st.md", "list.md", "a space shows"},
		{"li\u2800st.md", "list.md", "a blank shows as a space"},
		{"my notes.md", "my-notes.md", "space and hyphen"},
	}
	for _, p := range different {
		if Alike(p.a, p.b) || Alike(p.b, p.a) {
			t.Errorf("%s: Alike(%q, %q) = true; keys %q, %q", p.what, p.a, p.b, Keys(p.a), Keys(p.b))
		}
	}
	// Names agrees with Alike: each name of a pair is found by a folder
	// holding the other exactly when they are alike.
	for _, p := range append(alike, different...) {
		var n Names
		n.Add(p.b)
		got, ok := n.Lookalike(p.a)
		if want := Alike(p.a, p.b); ok != want || ok && got != p.b {
			t.Errorf("%s: Names{%q}.Lookalike(%q) = %q, %v; want %v", p.what, p.b, p.a, got, ok, want)
		}
	}
}

// TestNamesFirstInOrder: of several entries a name looks like, the first
// in name order is reported, whichever key matched.
func TestNamesFirstInOrder(t *testing.T) {
	var n Names
	for _, e := range []string{"rnemo.md", "Memo.md", "memo.md", "ΜEMO.md"} {
		n.Add(e)
	}
	if got, ok := n.Lookalike("MEMO.md"); !ok || got != "Memo.md" {
		t.Errorf("Lookalike(MEMO.md) = %q, %v; want Memo.md", got, ok)
	}
	if got, ok := n.Lookalike("notes.md"); ok {
		t.Errorf("Lookalike(notes.md) = %q, want none", got)
	}
	var empty Names
	if got, ok := empty.Lookalike("notes.md"); ok {
		t.Errorf("an empty folder has %q", got)
	}
}

func TestCheckNew(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"memory/roles/writer", "memory/global"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"memory/notes.md", "memory/Notes-old.md", "memory/global/笔记(一).md", "memory/global/会议2026.md",
		"memory/memo.md", "memory/cafe.md", "memory/global/paypal.md", "memory/global/力量.md"} {
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
		// UTS #39 confusables, alone and with case or width.
		{"memory/n\u043etes.md", "memory/n\u043etes.md", "memory/notes.md"}, // Cyrillic о
		{"memory/\u039dOTES.md", "memory/\u039dOTES.md", "memory/notes.md"}, // Greek Nu
		{"memory/ｎ\u043eｔｅｓ.md", "memory/ｎ\u043eｔｅｓ.md", "memory/notes.md"}, // fullwidth and Cyrillic
		{"memory/rnemo.md", "memory/rnemo.md", "memory/memo.md"},            // rn and m
		{"memory/RNEMO.md", "memory/RNEMO.md", "memory/memo.md"},            // and case
		{"memory/global/\u0440\u0430\u0443\u0440\u0430l.md", "memory/global/\u0440\u0430\u0443\u0440\u0430l.md", "memory/global/paypal.md"},
		{"memory/global/\u30ab量.md", "memory/global/\u30ab量.md", "memory/global/力量.md"},      // katakana カ and 力
		{"memory/r\u043eles/writer/x.md", "memory/r\u043eles", "memory/roles"},               // a folder with a Cyrillic о
		{"memory/roles/wr\u0456ter/x.md", "memory/roles/wr\u0456ter", "memory/roles/writer"}, // Cyrillic і
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
		"memory/global/力学.md",       // another word
		"memory/notes-1.md",         // the next free name
		"memory/café.md",            // an accent is not a look-alike
		"memory/sessions/s1/log.md", // several new folders
	} {
		if err := CheckNew(root, ok); err != nil {
			t.Errorf("CheckNew(%q) = %v, want nil", ok, err)
		}
	}
}
