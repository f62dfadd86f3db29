// Package versions keeps the version vectors of memory files and the
// conflict records of concurrent writes (SPEC §5.3) in Atrium's state
// database ($ATRIUM_HOME/state.db, SPEC §1).
//
// # Version vectors
//
// A Vector maps a writer (a role name, or "admin" for the person) to the
// number of writes that writer made to one file. A write names the version
// it was based on; Compare tells whether that base is the current version
// (Equal), an older one (Before), one the current version has not seen
// (After) or a sibling (Concurrent). The package memory decides what a
// stale base means for each kind of file; this package only stores.
//
// The wire form (String, Parse) is canonical: writers in byte order, each
// "name=counter", joined by ","; counters are positive decimal integers
// (a zero counter is not written), and the bytes '%', ',', '=' and ASCII
// control or space characters in a name are percent-escaped ("%2C"). The
// empty vector is the empty string: "no version" (a file never written
// through the memory API).
//
// # Store
//
// Store holds, per workspace and file path, the current vector, the SHA-256
// of the content it describes (hex; "" for a file that does not exist) and
// when it changed; and the conflict records (Conflict). Every mutation runs
// in one SQLite transaction that takes the database's write lock at its
// start (BEGIN IMMEDIATE), so that concurrent increments, from goroutines
// or processes, are never lost. Tables are prefixed "versions_" and
// created (or upgraded) by Open.
//
// Errors: ErrInvalidVector (a malformed wire form or writer name),
// ErrChanged (a Commit's expected vector is no longer the stored one),
// ErrNotFound (no such conflict) and ErrResolved (the conflict is already
// resolved) are returned wrapped; test with errors.Is.
package versions

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinel errors.
var (
	// ErrInvalidVector: a version string or writer name is malformed.
	ErrInvalidVector = errors.New("versions: invalid version")
	// ErrChanged: the stored vector is not the one a Commit expected.
	ErrChanged = errors.New("versions: version changed")
	// ErrNotFound: no conflict record with that id.
	ErrNotFound = errors.New("versions: conflict not found")
	// ErrResolved: the conflict record is already resolved.
	ErrResolved = errors.New("versions: conflict already resolved")
)

// Limits of the wire form.
const (
	// MaxWriterBytes caps a writer name (bytes, before escaping).
	MaxWriterBytes = 255
	// MaxWriters caps the writers in one vector.
	MaxWriters = 1024
)

// Vector is a version vector: writes per writer. A nil or empty Vector is
// the empty version. Counters are positive; Inc and Merge keep them so.
type Vector map[string]uint64

// Order is the result of Compare.
type Order int

// Orders returned by Compare(a, b).
const (
	// Equal: a and b are the same version.
	Equal Order = iota
	// Before: a is an ancestor of b (b has seen every write a has, and more).
	Before
	// After: a descends from b (a has seen every write b has, and more).
	After
	// Concurrent: each has writes the other has not seen.
	Concurrent
)

func (o Order) String() string {
	switch o {
	case Equal:
		return "equal"
	case Before:
		return "before"
	case After:
		return "after"
	case Concurrent:
		return "concurrent"
	}
	return "order(" + strconv.Itoa(int(o)) + ")"
}

// Compare orders a against b.
func Compare(a, b Vector) Order {
	aMore, bMore := false, false
	for w, n := range a {
		if n > b[w] {
			aMore = true
		}
	}
	for w, n := range b {
		if n > a[w] {
			bMore = true
		}
	}
	switch {
	case aMore && bMore:
		return Concurrent
	case aMore:
		return After
	case bMore:
		return Before
	}
	return Equal
}

// Merge returns the pointwise maximum of a and b (a new Vector that
// descends from both, or equals the larger).
func Merge(a, b Vector) Vector {
	out := make(Vector, len(a)+len(b))
	for w, n := range a {
		if n > 0 {
			out[w] = n
		}
	}
	for w, n := range b {
		if n > out[w] {
			out[w] = n
		}
	}
	return out
}

// Inc returns a copy of v with writer's counter raised by one.
func (v Vector) Inc(writer string) Vector {
	out := maps.Clone(v)
	if out == nil {
		out = Vector{}
	}
	out[writer]++
	return out
}

// Clone returns a copy of v (never nil).
func (v Vector) Clone() Vector {
	out := make(Vector, len(v))
	for w, n := range v {
		if n > 0 {
			out[w] = n
		}
	}
	return out
}

// IsZero reports whether v is the empty version.
func (v Vector) IsZero() bool {
	for _, n := range v {
		if n > 0 {
			return false
		}
	}
	return true
}

// String is the canonical wire form (see the package doc).
func (v Vector) String() string {
	ws := make([]string, 0, len(v))
	for w, n := range v {
		if n > 0 {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(escape(w))
		b.WriteByte('=')
		b.WriteString(strconv.FormatUint(v[w], 10))
	}
	return b.String()
}

// MarshalText encodes v in the wire form (so that JSON carries a string).
func (v Vector) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText decodes the wire form.
func (v *Vector) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// Parse decodes the wire form. Writers may come in any order, but each only
// once, with a positive counter and a valid name (ValidateWriter); "" is
// the empty vector. Errors wrap ErrInvalidVector.
func Parse(s string) (Vector, error) {
	v := Vector{}
	if s == "" {
		return v, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxWriters {
		return nil, fmt.Errorf("%w: more than %d writers", ErrInvalidVector, MaxWriters)
	}
	for _, p := range parts {
		i := strings.LastIndexByte(p, '=')
		if i <= 0 {
			return nil, fmt.Errorf("%w: %q: want writer=counter", ErrInvalidVector, p)
		}
		w, err := unescape(p[:i])
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrInvalidVector, p, err)
		}
		if err := ValidateWriter(w); err != nil {
			return nil, err
		}
		digits := p[i+1:]
		if digits == "" || digits[0] == '+' || (len(digits) > 1 && digits[0] == '0') {
			return nil, fmt.Errorf("%w: %q: counter must be a positive decimal integer", ErrInvalidVector, p)
		}
		n, err := strconv.ParseUint(digits, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%w: %q: counter must be a positive decimal integer", ErrInvalidVector, p)
		}
		if _, dup := v[w]; dup {
			return nil, fmt.Errorf("%w: writer %q appears twice", ErrInvalidVector, w)
		}
		v[w] = n
	}
	return v, nil
}

// ValidateWriter checks a writer name: 1..MaxWriterBytes bytes of valid
// UTF-8. Any other character is allowed (the wire form escapes it).
// Errors wrap ErrInvalidVector.
func ValidateWriter(w string) error {
	switch {
	case w == "":
		return fmt.Errorf("%w: empty writer name", ErrInvalidVector)
	case len(w) > MaxWriterBytes:
		return fmt.Errorf("%w: writer name longer than %d bytes", ErrInvalidVector, MaxWriterBytes)
	case !utf8.ValidString(w):
		return fmt.Errorf("%w: writer name is not valid UTF-8", ErrInvalidVector)
	}
	return nil
}

func needsEscape(c byte) bool {
	return c == '%' || c == ',' || c == '=' || c <= ' ' || c == 0x7f
}

func escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

func unescape(s string) (string, error) {
	if !strings.ContainsRune(s, '%') {
		for i := 0; i < len(s); i++ {
			if needsEscape(s[i]) {
				return "", fmt.Errorf("byte %q must be escaped", s[i])
			}
		}
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if needsEscape(c) {
				return "", fmt.Errorf("byte %q must be escaped", c)
			}
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("truncated escape")
		}
		h, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape %q", s[i:i+3])
		}
		b = append(b, byte(h))
		i += 2
	}
	return string(b), nil
}
