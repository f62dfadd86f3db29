package pairing

import (
	"errors"
	"strings"
	"testing"
)

// FuzzTyped feeds any text to the two parsers of pairing input: as a setup
// code a person types (or a phone sends as connect.auth.setupCode) and as a
// device scope (devices.setScope params, the stored device row); see
// checkCode and checkScope for the properties. One target for both keeps
// `make fuzz` short; the fuzzer mutates toward either's branches.
func FuzzTyped(f *testing.F) {
	for _, s := range []string{"ABCD-EFGH", "abcd efgh", "0O1I-L234", "ABCD-EFG", "ABCD-EFGHJ", "ÅBCD-EFGH", "\u212aBCD-EFGH", "ab\tcd-ef gh", "", "--------",
		"authenticated", "admin", "role:writer", "role:", "role:..", "role:a/b", "role:a\\b", "role: a", "role:作家", "Role:x", "role:\u0085x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, typed string) {
		if len(typed) > 1024 {
			return
		}
		checkCode(t, typed)
		checkScope(t, typed)
	})
}

// checkCode: an accepted code is CodeLen characters of codeAlphabet;
// normalising is idempotent and blind to case, dashes and spaces (what
// NewCode shows, "XXXX-XXXX", normalises to the same code as what was
// typed).
func checkCode(t *testing.T, typed string) {
	norm, ok := NormalizeCode(typed)
	if !ok {
		if norm != "" {
			t.Fatalf("refused %q but returned %q", typed, norm)
		}
		return
	}
	if len(norm) != CodeLen {
		t.Fatalf("NormalizeCode(%q) = %q, %d characters", typed, norm, len(norm))
	}
	for _, r := range norm {
		if !strings.ContainsRune(codeAlphabet, r) {
			t.Fatalf("NormalizeCode(%q) = %q has %q outside the alphabet", typed, norm, r)
		}
	}
	for _, v := range []string{norm, norm[:4] + "-" + norm[4:], strings.ToLower(norm), " " + norm[:2] + " " + norm[2:] + "\t"} {
		if again, ok := NormalizeCode(v); !ok || again != norm {
			t.Fatalf("NormalizeCode(%q) = %q, %v; want %q", v, again, ok, norm)
		}
	}
}

// checkScope: a refusal is ErrBadScope; an accepted scope parses to itself
// and, when it is a role scope, names exactly one path segment that cannot
// climb (no "/", "\\", "." or "..", no spaces or control characters, at
// most MaxScopeRoleBytes bytes).
func checkScope(t *testing.T, s string) {
	sc, err := ParseScope(s)
	if err != nil {
		if !errors.Is(err, ErrBadScope) {
			t.Fatalf("ParseScope(%q): %v is not ErrBadScope", s, err)
		}
		return
	}
	again, err := ParseScope(string(sc))
	if err != nil || again != sc {
		t.Fatalf("ParseScope(%q) = %q; again %q, %v", s, sc, again, err)
	}
	if sc != ScopeAuthenticated && sc != ScopeAdmin {
		r := sc.Role()
		if r == "" || r == "." || r == ".." || strings.ContainsAny(r, "/\\") || len(r) > MaxScopeRoleBytes {
			t.Fatalf("ParseScope(%q) accepted role %q", s, r)
		}
		for _, c := range r {
			if c < 0x20 || c == 0x7f || c == ' ' {
				t.Fatalf("ParseScope(%q) accepted role %q with %q", s, r, c)
			}
		}
	}
}
