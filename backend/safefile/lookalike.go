package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"unicode"

	"go.mau.fi/util/confusable"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// ErrLookalike: a new name looks like an existing one (see Alike and
// LookalikeError).
var ErrLookalike = errors.New("name looks like an existing one")

// LookalikeError is CheckNew's refusal: Name (the new file or folder, a
// path relative to the root) would sit beside Existing (the existing
// entry's path) and the two look alike (Alike). It wraps ErrLookalike.
// A refusal for a caller that may not read Existing leaves it "": the
// message then names no file.
type LookalikeError struct {
	Name, Existing string
}

func (e *LookalikeError) Error() string {
	if e.Existing == "" {
		return fmt.Sprintf("%s: a file with a look-alike name exists (the same name after Unicode NFKC normalisation, case folding and the UTS #39 confusable skeleton); use a name that does not look like another", e.Name)
	}
	return fmt.Sprintf("%s looks like the existing %s (the same name after Unicode NFKC normalisation, case folding and the UTS #39 confusable skeleton); use that one, or a name that does not look like it", e.Name, e.Existing)
}

// Unwrap returns ErrLookalike.
func (e *LookalikeError) Unwrap() error { return ErrLookalike }

// Fold returns the form of a file name under which two names look alike
// (Unicode's NFKC_Casefold, from golang.org/x/text): compatibility
// decomposition (fullwidth `ＮＯＴＥＳ` → `NOTES`, `①` → `1`, `ｶ` → `カ`,
// ligatures), full case folding (`NOTES` → `notes`, `ß` → `ss`, `Σ` → `σ`),
// recomposition, no default-ignorable code points that show as nothing
// (zero-width spaces and joiners, soft hyphens, variation selectors, bidi
// marks, U+180E MONGOLIAN VOWEL SEPARATOR), and blanks as spaces (Blanks).
// It does not map Traditional to Simplified Chinese: 筆記 and 笔记 are
// different names.
func Fold(name string) string {
	s := norm.NFKD.String(Blanks(name))
	s = cases.Fold().String(s) // a Caser is not safe for concurrent use: one per call
	s = strings.Map(func(r rune) rune {
		if ignorable(r) {
			return -1
		}
		return r
	}, s)
	return Blanks(norm.NFKC.String(s))
}

// Blanks returns name with every character that shows as blank space
// (blank) as one U+0020 SPACE, runs of them as one space, and none at the
// start or end of a slash-separated component: `li⠀st.md` (U+2800 BRAILLE
// PATTERN BLANK), `li　st.md` (U+3000) and `li  st.md` become `li st.md`,
// `⠀list.md` and `list.md ` become `list.md`. A blank shows as much space
// as a space, so it counts as one; a character that shows as nothing is
// dropped instead (Fold's ignorable). The rule comes from what a reader
// sees, not from a Unicode property alone: Unicode puts the Hangul fillers
// (which show as blank space) among the default-ignorables and U+2800 in
// neither White_Space nor Default_Ignorable_Code_Point.
func Blanks(name string) string {
	if !strings.ContainsFunc(name, blank) {
		return name
	}
	var b strings.Builder
	space := false // a blank is pending
	start := true  // at the start of a component
	for _, r := range name {
		switch {
		case blank(r):
			space = !start
		case r == '/':
			space, start = false, true
			b.WriteRune(r)
		default:
			if space {
				b.WriteByte(' ')
			}
			space, start = false, false
			b.WriteRune(r)
		}
	}
	return b.String()
}

// blank reports whether r shows as blank space: Unicode's White_Space
// (U+0020, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F, U+205F,
// U+3000 and the controls TAB to CR and NEL), the Hangul fillers U+115F,
// U+1160, U+3164 and U+FFA0 (Default_Ignorable_Code_Point, yet drawn as a
// blank of a letter's width), and U+2800 BRAILLE PATTERN BLANK (a symbol
// in Unicode, in no confusables data, drawn as a blank).
func blank(r rune) bool {
	switch r {
	case 0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800:
		return true
	}
	return unicode.Is(unicode.White_Space, r)
}

// ignorable is Unicode's Default_Ignorable_Code_Point, approximated by
// format characters (Cf), Other_Default_Ignorable_Code_Point and variation
// selectors, less the blanks (blank), which count as spaces.
func ignorable(r rune) bool {
	return !blank(r) && (unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r))
}

// Skeleton returns the confusable skeleton of s defined by Unicode
// Technical Standard #39 (Unicode Security Mechanisms), section 4
// "Confusable Detection": s in NFD, each character replaced by its
// prototype from confusables.txt, NFD again. Strings with the same
// skeleton look alike to a reader: Cyrillic `о` and Latin `o`, `1`, `I`
// and `l`, `rn` and `m`, `0` and `O`, katakana `カ` and the ideograph
// `力`, `士` and `土`. The table is Unicode 17.0.0's confusables.txt as
// generated into go.mau.fi/util/confusable, which also drops every code
// point that is not graphic (unicode.IsGraphic: format and control
// characters, private-use and, in Go's Unicode tables, unassigned code
// points), where UTS #39 drops Default_Ignorable_Code_Point. A skeleton
// is a key to compare, never a name to show.
func Skeleton(s string) string { return confusable.Skeleton(s) }

// Keys returns the two forms under which names are compared (Alike):
//
//   - [0] Fold(Skeleton(name)): the skeleton, then NFKC and case
//     folding, so that a confusable in another case matches: Greek `Ν`
//     (Nu) has the skeleton `N`, so `ΝOTES` matches `notes`;
//   - [1] Fold(Skeleton(Fold(name))): NFKC and case folding first, so
//     that case and width variants match whatever their skeletons:
//     `MEMO` folds to `memo`, whose skeleton is `rnemo`'s, `rnerno`.
//
// Neither alone does both: Fold(Skeleton("MEMO")) is "memo" while
// Fold(Skeleton("memo")) is "rnerno", and Fold(Skeleton(Fold("ΝOTES")))
// is "votes" (lower-case ν looks like v). The keys of a slash-separated
// path keep its slashes, so paths whose folders are the same and whose
// last names look alike share a key.
func Keys(name string) [2]string {
	name = Blanks(name) // before Skeleton, which drops what is not graphic
	return [2]string{Fold(Skeleton(name)), Fold(Skeleton(Fold(name)))}
}

// Alike reports whether the names a and b look alike: they share a key
// of the same kind (Keys). That covers letter case (`NOTES.md`,
// `notes.md`, `STRASSE`, `straße`), compatibility forms (fullwidth
// `ｎｏｔｅｓ`, ligatures, circled digits), invisible characters (zero-width
// spaces and joiners, bidi marks, variation selectors), blanks (U+2800
// BRAILLE PATTERN BLANK, the Hangul fillers, U+3000 and the other
// White_Space: a space each, runs as one, none at a name's ends), composed and
// decomposed accents, and UTS #39 confusables (Cyrillic or Greek letters
// among Latin ones, `rn`/`m`, `1`/`l`/`I`, `0`/`O`), and these combined
// (`ΝOTES` with a Greek Nu beside `notes`). It is not transitive: `filei`
// and `filel` are not alike though both are like `fileI`. It does not map
// Traditional to Simplified Chinese: `筆記` and `笔记` are different names,
// as are `记录` and `纪录`. It errs on the side of alike (`modern.md` and
// `modem.md` are: their skeletons are both `rnodern`), which costs a
// rename, never a file mistaken for another.
func Alike(a, b string) bool {
	ka, kb := Keys(a), Keys(b)
	return ka[0] == kb[0] || ka[1] == kb[1]
}

// Names is what a folder's entries look like: their keys (Keys) and, for
// each, the first entry in name order that has it. The zero value is an
// empty folder.
type Names struct {
	byKey [2]map[string]string
}

// ReadNames lists the folder dir of root ("." for root itself).
func ReadNames(root *os.Root, dir string) (*Names, error) {
	d, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	n := &Names{}
	for _, e := range ents {
		n.Add(e.Name())
	}
	return n, nil
}

// Add records an entry named name.
func (n *Names) Add(name string) {
	for i, k := range Keys(name) {
		if n.byKey[i] == nil {
			n.byKey[i] = map[string]string{}
		}
		if old, ok := n.byKey[i][k]; !ok || name < old {
			n.byKey[i][k] = name
		}
	}
}

// Lookalike returns the entry that name looks like (Alike; name itself
// when it is an entry), the first in name order, and whether there is
// one.
func (n *Names) Lookalike(name string) (string, bool) {
	var found []string
	for i, k := range Keys(name) {
		if e, ok := n.byKey[i][k]; ok {
			found = append(found, e)
		}
	}
	if len(found) == 0 {
		return "", false
	}
	return slices.Min(found), true
}

// CheckNew checks the slash-separated path rel (relative to root) before it
// is created: the first of its components that does not exist (the file,
// or a folder on its way) must not look like (Alike) an entry already in
// its folder. It returns nil (also when rel exists: nothing new is
// created), a *LookalikeError naming that component and the existing
// entry (the first in name order), or the file system's error. Concurrent
// creations of two look-alike names must be serialised by the caller
// (memory locks writes by both of the path's Keys).
func CheckNew(root *os.Root, rel string) error {
	rel = path.Clean(rel)
	parts := strings.Split(rel, "/")
	for i := range parts {
		cur := path.Join(parts[:i+1]...)
		_, err := root.Lstat(cur)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		dir := path.Dir(cur)
		names, err := ReadNames(root, dir)
		if err != nil {
			return err
		}
		if existing, ok := names.Lookalike(parts[i]); ok {
			return &LookalikeError{Name: cur, Existing: path.Join(dir, existing)}
		}
		return nil
	}
	return nil
}
