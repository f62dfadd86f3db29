package acl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Limits of Canonicalize.
const (
	MaxPathBytes    = 4096 // a whole path
	MaxSegmentBytes = 255  // one segment (the common file-system limit)
)

// PathError is a refused path: Path as given, Reason in words. It matches
// ErrInvalidPath with errors.Is.
type PathError struct {
	Path   string
	Reason string
	// Existing is the workspace-relative path of the existing entry that
	// Path's name is a variant of (letter case, Unicode normalisation),
	// "" for other refusals. Reason names it; a caller that may not read
	// it must not be shown Reason (Concealed).
	Existing string
	// Concealed is Reason without the existing entry's name.
	Concealed string
}

// Error implements error.
func (e *PathError) Error() string {
	return fmt.Sprintf("acl: invalid path %q: %s", e.Path, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidPath) true.
func (e *PathError) Unwrap() error { return ErrInvalidPath }

// lookAlikes are characters that render like '/', '\' or '.' and could make a
// path read as something it is not.
const lookAlikes = "\u2215\u2044\uFF0F\u29F8\uFF3C\u29F5\uFE68\u2216\u2024\u2025\uFF0E\uFE52"

// Canonicalize checks a caller-supplied path relative to the workspace root
// (e.g. "memory/roles/writer/notes.md") and returns its canonical form: a
// clean, slash-separated path relative to the workspace naming the real file
// (SPEC §5.1: "paths are canonicalised before any check"). It refuses, with a
// *PathError (errors.Is ErrInvalidPath) whose Reason says why:
//
//   - an empty path, a path of only "." segments, empty ("//"), "." or ".."
//     segments — nothing is cleaned silently: a canonical path is the only
//     accepted spelling;
//   - absolute paths: a leading "/" or "\" (Unix, UNC), a Windows drive
//     ("C:", "c:/..."), a leading "~"; and any ":" (drive or NTFS stream);
//   - backslashes anywhere;
//   - percent-encoding: any "%XX" escape is refused, never decoded (a lone
//     "%" is an ordinary character);
//   - NUL and control characters, invisible format characters (Unicode Cf:
//     bidi overrides, zero-width spaces, BOM), and look-alikes of '/', '\' and
//     '.' (division slash, fullwidth solidus, one-dot leader ...);
//   - invalid UTF-8, and text not in Unicode NFC. Decision: a non-NFC path is
//     refused, not normalised, because normalising would let two different
//     byte strings reach one file; NFC input is accepted as is (Chinese names
//     like "memory/global/项目状态.md" are ordinary);
//   - segments that Windows would alter or treat specially: a trailing dot or
//     space, device names (CON, NUL, COM1 ...); over MaxPathBytes or
//     MaxSegmentBytes;
//   - case tricks: a segment whose letter case differs from an existing
//     entry of its folder ("ROLES/x" when "roles/" exists, "Notes.md" when
//     "notes.md" exists), on any file system, so case-insensitive ones
//     (macOS, Windows) cannot be used to reach a file under another name;
//     likewise a segment equal to an existing entry only after Unicode
//     normalisation, unless the file system itself opens that entry under
//     the NFC name (macOS);
//   - symlinks anywhere in the existing part of the path that resolve outside
//     the workspace, or cannot be resolved (dangling or looping); a path that
//     resolves to the workspace root itself.
//
// A symlink that stays inside the workspace is followed, and the result
// names the real file, so a link cannot lend one folder's rules to another
// folder's file. Segments that do not exist yet (a new file) are checked
// lexically only. An error reading the workspace (it is missing, or a folder
// cannot be listed) is returned wrapped, without ErrInvalidPath: the path was
// not shown to be safe, so the caller must refuse it too.
//
// The check and the later use of the path are separate steps: a symlink
// planted in between is not seen here (callers that open files should not
// follow symlinks where the platform allows it).
func Canonicalize(workspace, raw string) (string, error) {
	refuse := func(format string, args ...any) error {
		return &PathError{Path: raw, Reason: fmt.Sprintf(format, args...)}
	}
	if reason := lexical(raw); reason != "" {
		return "", refuse("%s", reason)
	}
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return "", fmt.Errorf("acl: workspace %s: %w", workspace, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("acl: workspace %s: %w", workspace, err)
	}
	rel, followed, err := walk(root, raw)
	if err != nil {
		return "", err
	}
	if !followed {
		return rel, nil
	}
	// A symlink was followed: check the real path as if it had been given.
	if rel == "." || rel == "" {
		return "", refuse("resolves to the workspace root itself")
	}
	rel = norm.NFC.String(rel)
	if reason := lexical(rel); reason != "" {
		return "", refuse("resolves to %q: %s", rel, reason)
	}
	again, followed, err := walk(root, rel)
	if err != nil {
		return "", err
	}
	if followed || again != rel {
		return "", refuse("the path changed while it was checked")
	}
	return rel, nil
}

// Lexical reports whether raw passes the checks of Canonicalize that look at
// its text alone (no file-system access): nil, or a *PathError (wrapping
// ErrInvalidPath) saying why not. The guard uses it to let the ACL decide
// on a path before anything on disk is looked at.
func Lexical(raw string) error {
	if reason := lexical(raw); reason != "" {
		return &PathError{Path: raw, Reason: reason}
	}
	return nil
}

// lexical returns why raw is refused on its text alone, or "".
func lexical(raw string) string {
	switch {
	case raw == "":
		return "empty path"
	case len(raw) > MaxPathBytes:
		return fmt.Sprintf("longer than %d bytes", MaxPathBytes)
	case !utf8.ValidString(raw):
		return "not valid UTF-8"
	}
	for _, r := range raw {
		switch {
		case r == 0:
			return "NUL character"
		case unicode.IsControl(r):
			return fmt.Sprintf("control character %U", r)
		case unicode.Is(unicode.Cf, r):
			return fmt.Sprintf("invisible format character %U (bidi override, zero-width or BOM)", r)
		}
	}
	switch {
	case raw[0] == '/' || raw[0] == '\\':
		return "absolute path: give a path relative to the workspace"
	case len(raw) >= 2 && raw[1] == ':' && raw[0] < utf8.RuneSelf && unicode.IsLetter(rune(raw[0])):
		return "absolute path: Windows drive letter"
	case strings.ContainsRune(raw, '\\'):
		return "backslash: use forward slashes"
	case hasPercentEscape(raw):
		return "percent-encoding (%XX) is not decoded: give the plain characters"
	case strings.ContainsRune(raw, ':'):
		return "colon: Windows drive or alternate data stream"
	case raw[0] == '~':
		return "home-directory shorthand \"~\" is not expanded: give a path relative to the workspace"
	}
	if i := strings.IndexAny(raw, lookAlikes); i >= 0 {
		r, _ := utf8.DecodeRuneInString(raw[i:])
		return fmt.Sprintf("look-alike of '/', '\\' or '.' (%U)", r)
	}
	if !norm.NFC.IsNormalString(raw) {
		return "not in Unicode NFC form: normalise the name to NFC"
	}
	allDots := true
	for seg := range strings.SplitSeq(raw, "/") {
		switch {
		case seg == "":
			return "empty segment (\"//\" or a trailing \"/\")"
		case seg == "..":
			return "\"..\" segment: parent directories are not allowed"
		case seg == ".":
			continue
		}
		allDots = false
		switch {
		case len(seg) > MaxSegmentBytes:
			return fmt.Sprintf("segment longer than %d bytes", MaxSegmentBytes)
		case strings.HasSuffix(seg, ".") || strings.HasSuffix(seg, " "):
			return fmt.Sprintf("segment %q ends with a dot or space (Windows would strip it)", seg)
		case windowsDevice(seg):
			return fmt.Sprintf("segment %q is a reserved Windows device name", seg)
		}
	}
	if allDots {
		return "empty path (only \".\")"
	}
	if strings.Contains("/"+raw+"/", "/./") {
		return "\".\" segment: give the canonical path"
	}
	return ""
}

// hasPercentEscape reports whether s contains "%" followed by two hex digits.
func hasPercentEscape(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '%' && isHex(s[i+1]) && isHex(s[i+2]) {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// windowsDevice reports whether seg names a Windows device (CON, PRN, AUX,
// NUL, COM0-9, LPT0-9), with or without an extension, in any case.
func windowsDevice(seg string) bool {
	base, _, _ := strings.Cut(seg, ".")
	base = strings.ToUpper(strings.TrimRight(base, " "))
	switch base {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	if len(base) == 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) {
		return base[3] >= '0' && base[3] <= '9'
	}
	return false
}

// walk follows the lexically valid path rel from root (a symlink-free
// absolute path) through the entries that exist, refusing case variants and
// symlinks that leave root. It returns the real path relative to root (slash
// form; "" for root itself) and whether a symlink was followed.
func walk(root, rel string) (string, bool, error) {
	refuse := func(format string, args ...any) error {
		return &PathError{Path: rel, Reason: fmt.Sprintf(format, args...)}
	}
	cur := root
	followed := false
	segs := strings.Split(rel, "/")
	var out, rest []string // the real path so far; the segments that do not exist
	for i, seg := range segs {
		entries, err := os.ReadDir(cur)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || isFile(cur) {
				rest = segs[i:]
				break
			}
			return "", false, fmt.Errorf("acl: check %q: list %s: %w", rel, cur, err)
		}
		var exact, normed, folded fs.DirEntry
		for _, e := range entries {
			if e.Name() == seg {
				exact = e
				break
			}
			name := norm.NFC.String(e.Name())
			switch {
			case name == seg:
				normed = e
			case folded == nil && strings.EqualFold(name, seg):
				folded = e
			}
		}
		if exact == nil && normed != nil {
			// The entry is stored in another Unicode form. A file system
			// that ignores normalisation (macOS) opens it under seg too;
			// one that compares bytes (Linux) would make seg a second,
			// look-alike file.
			a, errA := os.Lstat(filepath.Join(cur, normed.Name()))
			b, errB := os.Lstat(filepath.Join(cur, seg))
			if errA != nil || errB != nil || !os.SameFile(a, b) {
				e := refuse("%q differs only in Unicode normalisation from the existing %q", seg, normed.Name()).(*PathError)
				e.Existing, e.Concealed = path.Join(append(slices.Clone(out), normed.Name())...), fmt.Sprintf("%q: a file with a look-alike name exists", seg)
				return "", false, e
			}
			exact = normed
		}
		if exact == nil {
			if folded != nil {
				e := refuse("%q differs only in letter case from the existing %q", seg, folded.Name()).(*PathError)
				e.Existing, e.Concealed = path.Join(append(slices.Clone(out), folded.Name())...), fmt.Sprintf("%q: a file with a look-alike name exists", seg)
				return "", false, e
			}
			rest = segs[i:]
			break
		}
		next := filepath.Join(cur, exact.Name())
		if exact.Type()&fs.ModeSymlink == 0 {
			out = append(out, seg) // seg as asked: NFC even where the disk stores NFD
			cur = next
			continue
		}
		target, err := filepath.EvalSymlinks(next)
		if err != nil {
			return "", false, refuse("symlink %q cannot be resolved (dangling or looping)", strings.Join(segs[:i+1], "/"))
		}
		if !within(root, target) {
			return "", false, refuse("symlink %q leads outside the workspace", strings.Join(segs[:i+1], "/"))
		}
		r, err := filepath.Rel(root, target)
		if err != nil {
			return "", false, fmt.Errorf("acl: check %q: %w", rel, err)
		}
		out = out[:0]
		if r = filepath.ToSlash(r); r != "." {
			out = strings.Split(r, "/")
		}
		followed = true
		cur = target
	}
	return strings.Join(append(out, rest...), "/"), followed, nil
}

// isFile reports whether p exists and is not a directory (a path that goes
// on below a file names nothing; the caller's file operation will fail).
func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// within reports whether target (absolute, symlink-free) is root or below it.
func within(root, target string) bool {
	r, err := filepath.Rel(root, target)
	if err != nil || filepath.IsAbs(r) {
		return false
	}
	return r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
}
