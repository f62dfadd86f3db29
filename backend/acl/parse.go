package acl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"golang.org/x/text/unicode/norm"
)

// MaxFileSize is the largest .acl file Parse accepts (1 MiB).
const MaxFileSize = 1 << 20

// ParseError says where and why a .acl file is malformed. Line and Column
// are 1-based; 0 when the position is unknown (for example an oversized
// file). It matches ErrInvalidACL with errors.Is.
type ParseError struct {
	Line, Column int
	Reason       string
}

// Error implements error: "acl: line 3, column 5: unknown action \"delete\"".
func (e *ParseError) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("acl: line %d, column %d: %s", e.Line, e.Column, e.Reason)
	case e.Line > 0:
		return fmt.Sprintf("acl: line %d: %s", e.Line, e.Reason)
	}
	return "acl: " + e.Reason
}

// Unwrap makes errors.Is(err, ErrInvalidACL) true.
func (e *ParseError) Unwrap() error { return ErrInvalidACL }

func errAt(n *yaml.Node, format string, args ...any) *ParseError {
	return &ParseError{Line: n.Line, Column: n.Column, Reason: fmt.Sprintf(format, args...)}
}

// yamlLine pulls the line out of a yaml syntax error ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Parse parses a .acl file (SPEC §5.1):
//
//	version: "1.0"
//	rules:
//	  <pattern>: {read: [principals], write: [...], collaborate: [...], ttl: <seconds>}
//
// Rules keep their order in the file. version must be "1.0" (or 1.0, 1);
// rules is a mapping (it may be empty: then everything is denied); each rule
// is a mapping whose keys are read, write, collaborate (lists of principals,
// absent means nobody) and ttl (a whole number of seconds ≥ 0). Anything
// else — a YAML syntax error, an unknown key, action or principal form, a bad
// or duplicate pattern, a rule for the reserved .acl, a wrong type, anchors
// and aliases, a second YAML document, a file over MaxFileSize — is a
// *ParseError with the line and column of the offending node.
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxFileSize {
		return nil, &ParseError{Reason: fmt.Sprintf("file is larger than %d bytes", MaxFileSize)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ParseError{Line: 1, Reason: "empty file: expected version and rules"}
		}
		return nil, yamlError(data, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, &ParseError{Line: extra.Line, Reason: "more than one YAML document (\"---\")"}
	case !errors.Is(err, io.EOF):
		return nil, yamlError(data, err)
	}
	if len(doc.Content) != 1 {
		return nil, &ParseError{Line: 1, Reason: "empty file: expected version and rules"}
	}
	if err := noAliases(&doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, errAt(root, "expected a mapping with version and rules, found %s", kindName(root))
	}
	var version, rules *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, errAt(k, "expected a key, found %s", kindName(k))
		}
		switch k.Value {
		case "version":
			if version != nil {
				return nil, errAt(k, "duplicate key \"version\"")
			}
			version = v
		case "rules":
			if rules != nil {
				return nil, errAt(k, "duplicate key \"rules\"")
			}
			rules = v
		default:
			hint := ""
			if strings.ContainsAny(k.Value, "/*.") {
				hint = " (patterns go under \"rules:\")"
			}
			return nil, errAt(k, "unknown top-level key %q%s: expected version and rules", k.Value, hint)
		}
	}
	if version == nil {
		return nil, errAt(root, "missing version (expected version: \"1.0\")")
	}
	if version.Kind != yaml.ScalarNode || (version.Value != "1.0" && version.Value != "1") {
		return nil, errAt(version, "unknown version %q: this Atrium reads version \"1.0\"", version.Value)
	}
	if rules == nil {
		return nil, errAt(root, "missing rules (use \"rules: {}\" to deny everything)")
	}
	if rules.Kind != yaml.MappingNode {
		return nil, errAt(rules, "rules must be a mapping of pattern to rule, found %s", kindName(rules))
	}
	p := &Policy{source: "file", exact: map[string]int{}}
	seen := map[string]int{}
	for i := 0; i+1 < len(rules.Content); i += 2 {
		k, v := rules.Content[i], rules.Content[i+1]
		r, err := parseRule(k, v)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[r.Pattern]; dup {
			return nil, errAt(k, "duplicate pattern %q (first at line %d)", r.Pattern, first)
		}
		seen[r.Pattern] = k.Line
		if r.pat.exact {
			p.exact[r.Pattern] = len(p.rules)
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

// parseRule parses one "pattern: {...}" entry.
func parseRule(k, v *yaml.Node) (rule, error) {
	if k.Kind != yaml.ScalarNode || k.Tag == "!!null" || k.Value == "" {
		return rule{}, errAt(k, "a pattern must be a non-empty string, found %s", kindName(k))
	}
	if k.Value == ReservedName {
		return rule{}, errAt(k, "the .acl file is reserved: only admin may read or write it and no rule can change that")
	}
	pat, err := compilePattern(k.Value)
	if err != nil {
		return rule{}, errAt(k, "bad pattern %q: %v", k.Value, err)
	}
	if v.Kind != yaml.MappingNode {
		return rule{}, errAt(v, "the rule for %q must be a mapping like {read: [...], write: [...]}, found %s", k.Value, kindName(v))
	}
	r := rule{Rule: Rule{Pattern: k.Value, Line: k.Line}, pat: pat}
	done := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		ak, av := v.Content[i], v.Content[i+1]
		if ak.Kind != yaml.ScalarNode {
			return rule{}, errAt(ak, "expected an action, found %s", kindName(ak))
		}
		if done[ak.Value] {
			return rule{}, errAt(ak, "duplicate key %q in the rule for %q", ak.Value, k.Value)
		}
		done[ak.Value] = true
		if ak.Value == "ttl" {
			if av.Kind != yaml.ScalarNode || av.Tag != "!!int" {
				return rule{}, errAt(av, "ttl must be a whole number of seconds, found %s", kindName(av))
			}
			n, err := strconv.ParseInt(av.Value, 0, 64)
			if err != nil || n < 0 || n > int64(100*365*24*3600) {
				return rule{}, errAt(av, "ttl must be a whole number of seconds between 0 and 100 years, found %q", av.Value)
			}
			r.TTL = time.Duration(n) * time.Second
			continue
		}
		a := Action(ak.Value)
		idx := actionIndex(a)
		if idx < 0 {
			return rule{}, errAt(ak, "unknown action %q (expected read, write, collaborate or ttl)", ak.Value)
		}
		if av.Kind == yaml.ScalarNode && av.Tag == "!!null" {
			continue // "read:" with nothing: nobody
		}
		if av.Kind != yaml.SequenceNode {
			return rule{}, errAt(av, "%s must be a list of principals like [admin], found %s", a, kindName(av))
		}
		var names []string
		var grant []principal
		for _, e := range av.Content {
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				return rule{}, errAt(e, "a principal must be a string, found %s", kindName(e))
			}
			pr, err := parsePrincipal(e.Value)
			if err != nil {
				return rule{}, errAt(e, "%v", err)
			}
			names = append(names, e.Value)
			grant = append(grant, pr)
		}
		switch a {
		case Read:
			r.Read = names
		case Write:
			r.Write = names
		case Collaborate:
			r.Collaborate = names
		}
		r.grant[idx] = grant
	}
	return r, nil
}

// parsePrincipal parses one principal as written in a rule.
func parsePrincipal(s string) (principal, error) {
	switch s {
	case "*", "all":
		return principal{kind: pAll, role: s}, nil
	case "authenticated":
		return principal{kind: pAuthenticated}, nil
	case "admin":
		return principal{kind: pAdmin}, nil
	case "$session_owner":
		return principal{kind: pSessionOwner}, nil
	}
	if strings.HasPrefix(s, "$") {
		return principal{}, fmt.Errorf("unknown principal form %q (the only variable is $session_owner)", s)
	}
	if s == "" {
		return principal{}, fmt.Errorf("empty principal")
	}
	if err := ValidateRole(s); err != nil {
		return principal{}, fmt.Errorf("unknown principal form %q: %w", s, err)
	}
	return principal{kind: pRole, role: s}, nil
}

// ValidateRole checks that s can be a role name in a rule (see the package
// doc: one path segment, no *, /, \, spaces or control characters, not
// starting with "." or "$", not a reserved word in any case). Whoever
// creates roles should call it, so that every role can be named in .acl.
func ValidateRole(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty role name")
	case !utf8.ValidString(s):
		return fmt.Errorf("a role name must be valid UTF-8")
	case !norm.NFC.IsNormalString(s):
		return fmt.Errorf("a role name must be in Unicode NFC form")
	case strings.HasPrefix(s, "$"):
		return fmt.Errorf("a role name may not start with \"$\"")
	case strings.HasPrefix(s, "."):
		return fmt.Errorf("a role name may not start with \".\"")
	case strings.ContainsAny(s, "*/\\"):
		return fmt.Errorf("a role name may not contain *, / or \\")
	case len(s) > MaxSegmentBytes:
		return fmt.Errorf("a role name may not be longer than %d bytes", MaxSegmentBytes)
	}
	for _, w := range []string{"admin", "all", "authenticated"} {
		switch {
		case s == w:
			return fmt.Errorf("%q is a reserved principal, not a role name", s)
		case strings.EqualFold(s, w):
			return fmt.Errorf("%q is reserved: did you mean %q?", s, w)
		}
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("a role name may not contain spaces, control or format characters")
		}
	}
	return nil
}

// noAliases refuses anchors and aliases anywhere in the document: they
// would make what a rule grants depend on text far from it.
func noAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return errAt(n, "YAML anchors and aliases are not supported in .acl")
	}
	for _, c := range n.Content {
		if err := noAliases(c); err != nil {
			return err
		}
	}
	return nil
}

// refineLimit bounds the file size (in lines) for which yamlError looks for
// the exact line of a syntax error by re-parsing prefixes.
const refineLimit = 2000

// yamlError converts a yaml syntax error into a ParseError with a 1-based
// line. The YAML library often reports the line where the enclosing
// construct starts (a block mapping, a flow list), so for files up to
// refineLimit lines the line is refined: it is the line after the longest
// prefix of the file that still parses, i.e. the first line the file cannot
// be completed past. Larger files keep the library's line.
func yamlError(data []byte, err error) *ParseError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) <= refineLimit {
		for k := len(lines) - 1; k >= 0; k-- {
			var n yaml.Node
			if yaml.Unmarshal(bytes.Join(lines[:k], nil), &n) == nil {
				line = k + 1
				break
			}
		}
	}
	return &ParseError{Line: line, Reason: "YAML syntax: " + msg}
}

// kindName names a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}
