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

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// ErrLookalike: a new name equals an existing one after Fold (see
// LookalikeError).
var ErrLookalike = errors.New("name looks like an existing one")

// LookalikeError is CheckNew's refusal: Name (the new file or folder, a
// path relative to the root) would sit beside Existing (the existing
// entry's path) and both Fold to the same name. It wraps ErrLookalike.
type LookalikeError struct {
	Name, Existing string
}

func (e *LookalikeError) Error() string {
	return fmt.Sprintf("%s looks like the existing %s (the same name after Unicode NFKC normalisation and case folding); use that one, or a name that differs in more than case or width", e.Name, e.Existing)
}

// Unwrap returns ErrLookalike.
func (e *LookalikeError) Unwrap() error { return ErrLookalike }

// Fold returns the form of a file name under which two names look alike
// (Unicode's NFKC_Casefold, from golang.org/x/text): compatibility
// decomposition (fullwidth `ＮＯＴＥＳ` → `NOTES`, `①` → `1`, `ｶ` → `カ`,
// ligatures), full case folding (`NOTES` → `notes`, `ß` → `ss`, `Σ` → `σ`),
// recomposition, and no default-ignorable code points (zero-width spaces
// and joiners, soft hyphens, variation selectors, bidi marks). It does not
// map Traditional to Simplified Chinese: 筆記 and 笔记 are different names.
func Fold(name string) string {
	s := norm.NFKD.String(name)
	s = cases.Fold().String(s) // a Caser is not safe for concurrent use: one per call
	s = strings.Map(func(r rune) rune {
		if ignorable(r) {
			return -1
		}
		return r
	}, s)
	return norm.NFKC.String(s)
}

// ignorable approximates Unicode's Default_Ignorable_Code_Point: format
// characters (Cf), Other_Default_Ignorable_Code_Point and variation
// selectors.
func ignorable(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r)
}

// CheckNew checks the slash-separated path rel (relative to root) before it
// is created: the first of its components that does not exist (the file,
// or a folder on its way) must not Fold to the same name as an entry
// already in its folder. It returns nil (also when rel exists: nothing new
// is created), a *LookalikeError naming that component and the existing
// entry (the first in name order), or the file system's error. Concurrent creations of two
// look-alike names must be serialised by the caller (memory locks writes
// by the folded path).
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
		d, err := root.Open(dir)
		if err != nil {
			return err
		}
		ents, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return err
		}
		want := Fold(parts[i])
		var names []string
		for _, e := range ents {
			if Fold(e.Name()) == want {
				names = append(names, e.Name())
			}
		}
		if len(names) == 0 {
			return nil
		}
		slices.Sort(names)
		return &LookalikeError{Name: cur, Existing: path.Join(dir, names[0])}
	}
	return nil
}
