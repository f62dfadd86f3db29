package acl

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// maxSegments bounds the number of segments of a name or pattern; it keeps
// `**` matching cheap and refuses absurd inputs.
const maxSegments = 64

// segment is one compiled pattern segment.
type segment struct {
	globstar bool     // the whole segment is "**"
	parts    []string // the segment split at "*"; one part means a literal
}

// pattern is a compiled rule pattern (see the package doc).
type pattern struct {
	raw         string
	segs        []segment
	exact       bool // no wildcard at all
	specificity int  // literal code points, slashes included
}

// compilePattern checks and compiles a pattern; the error text is a reason
// meant for a ParseError.
func compilePattern(raw string) (pattern, error) {
	if err := checkNameSyntax(raw, true); err != nil {
		return pattern{}, err
	}
	p := pattern{raw: raw, exact: !strings.Contains(raw, "*")}
	prevGlobstar := false
	for s := range strings.SplitSeq(raw, "/") {
		if s == "**" {
			if prevGlobstar {
				return pattern{}, fmt.Errorf("\"**/**\" is redundant: write one \"**\"")
			}
			p.segs = append(p.segs, segment{globstar: true})
			prevGlobstar = true
			continue
		}
		prevGlobstar = false
		if strings.Contains(s, "**") {
			return pattern{}, fmt.Errorf("\"**\" must be a whole segment (in %q)", s)
		}
		p.segs = append(p.segs, segment{parts: strings.Split(s, "*")})
	}
	for _, r := range raw {
		if r != '*' {
			p.specificity++
		}
	}
	return p, nil
}

// checkNameSyntax checks the shape shared by names and patterns; wildcards
// says whether '*' is allowed.
func checkNameSyntax(s string, wildcards bool) error {
	switch {
	case s == "":
		return fmt.Errorf("empty path")
	case !utf8.ValidString(s):
		return fmt.Errorf("not valid UTF-8")
	case strings.HasPrefix(s, "/"):
		return fmt.Errorf("must be relative to memory/ (no leading \"/\")")
	case strings.HasSuffix(s, "/"):
		return fmt.Errorf("trailing \"/\": name files, or use \"dir/**\" for a folder")
	case strings.ContainsRune(s, '\\'):
		return fmt.Errorf("backslash: use forward slashes")
	case !norm.NFC.IsNormalString(s):
		return fmt.Errorf("not in Unicode NFC form")
	}
	for _, r := range s {
		if r == 0 || unicode.IsControl(r) {
			return fmt.Errorf("control character %U", r)
		}
		if strings.ContainsRune("?[]{}", r) {
			if wildcards {
				return fmt.Errorf("unsupported wildcard %q: only * and ** are supported", r)
			}
		}
		if r == '*' && !wildcards {
			return fmt.Errorf("\"*\" in a file name")
		}
	}
	n := 0
	for seg := range strings.SplitSeq(s, "/") {
		n++
		switch seg {
		case "":
			return fmt.Errorf("empty segment (\"//\")")
		case ".", "..":
			return fmt.Errorf("%q segment", seg)
		}
	}
	if n > maxSegments {
		return fmt.Errorf("more than %d segments", maxSegments)
	}
	return nil
}

// match reports whether the pattern matches a name split into segments.
func (p *pattern) match(name []string) bool {
	return matchSegs(p.segs, name)
}

func matchSegs(ps []segment, ns []string) bool {
	for len(ps) > 0 {
		if ps[0].globstar {
			if len(ps) == 1 { // trailing: one or more
				return len(ns) >= 1
			}
			for k := 0; k <= len(ns); k++ { // elsewhere: zero or more
				if matchSegs(ps[1:], ns[k:]) {
					return true
				}
			}
			return false
		}
		if len(ns) == 0 || !matchSegment(ps[0].parts, ns[0]) {
			return false
		}
		ps, ns = ps[1:], ns[1:]
	}
	return len(ns) == 0
}

// matchSegment matches one name segment against a segment split at '*'.
func matchSegment(parts []string, s string) bool {
	if len(parts) == 1 {
		return parts[0] == s
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	mid := s[len(first) : len(s)-len(last)]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(mid, part)
		if i < 0 {
			return false
		}
		mid = mid[i+len(part):]
	}
	return true
}
