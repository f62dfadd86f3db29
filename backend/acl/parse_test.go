package acl

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	const head = "version: \"1.0\"\nrules:\n"
	for _, c := range []struct {
		name string
		src  string
		line int
		why  string
	}{
		{"empty file", "", 1, "empty file"},
		{"only a comment", "# nothing\n", 1, "empty file"},
		{"yaml syntax: unclosed flow list", head + "  a.md: {read: [x}\n", 3, "YAML syntax"},
		{"yaml syntax: bad indentation", head + "  a.md:\n    read: [x]\n   bad: 1\n", 5, "YAML syntax"},
		{"yaml syntax: list item in a mapping", head + "  a.md: {read: [x]}\n  - b\n  c.md: {}\n", 4, "YAML syntax"},
		{"yaml syntax: stray brace", head + "  a.md: {}\n  b.md: {read: [x]} }\n  c.md: {}\n", 4, "YAML syntax"},
		{"yaml syntax: unterminated quote", head + "  a.md: {}\n  \"b.md: {}\n", 4, "YAML syntax"},
		{"yaml syntax: multi-line flow then error", head + "  a.md: {read: [x],\n         write: [y]}\n  b.md: {read: [x]]\n", 5, "YAML syntax"},
		{"yaml syntax: tab indentation", head + "\ta.md: {read: [x]}\n", 3, "YAML syntax"},
		{"top level is a list", "- a\n- b\n", 1, "expected a mapping"},
		{"missing version", "rules: {}\n", 1, "missing version"},
		{"unknown version", "version: \"2.0\"\nrules: {}\n", 1, "unknown version \"2.0\""},
		{"version as a list", "version: [1]\nrules: {}\n", 1, "unknown version"},
		{"missing rules", "version: \"1.0\"\n", 1, "missing rules"},
		{"rules is a list", "version: \"1.0\"\nrules:\n  - a.md\n", 3, "rules must be a mapping"},
		{"rules is empty", "version: \"1.0\"\nrules:\n", 2, "rules must be a mapping"},
		{"seed format: patterns at the top", "version: \"1.0\"\nglobal/user-profile.md:\n  read: [\"*\"]\n", 2, "patterns go under \"rules:\""},
		{"unknown top-level key", "version: \"1.0\"\nrules: {}\nowner: me\n", 3, "unknown top-level key \"owner\""},
		{"duplicate version", "version: \"1.0\"\nversion: \"1.0\"\nrules: {}\n", 2, "duplicate key \"version\""},
		{"unknown action", head + "  a.md: {read: [x]}\n  b.md: {read: [x], delete: [x]}\n", 4, "unknown action \"delete\""},
		{"misspelt action", head + "  a.md:\n    raed: [x]\n", 4, "unknown action \"raed\""},
		{"duplicate action", head + "  a.md:\n    read: [x]\n    read: [y]\n", 5, "duplicate key \"read\""},
		{"unknown principal variable", head + "  a.md: {read: [$owner]}\n", 3, "unknown principal form \"$owner\""},
		{"principal Admin in capitals", head + "  a.md: {read: [Admin]}\n", 3, "did you mean \"admin\""},
		{"principal with a slash", head + "  a.md: {read: [roles/x]}\n", 3, "unknown principal form"},
		{"principal with a space", head + "  a.md: {read: [\"code expert\"]}\n", 3, "spaces"},
		{"internal $role is not accepted", head + "  roles/*/**: {read: [$role]}\n", 3, "unknown principal form \"$role\""},
		{"empty principal", head + "  a.md: {read: [\"\"]}\n", 3, "empty principal"},
		{"principal is a mapping", head + "  a.md:\n    read:\n      - {x: y}\n", 5, "a principal must be a string"},
		{"principal is null", head + "  a.md:\n    read: [~]\n", 4, "a principal must be a string"},
		{"read is a scalar", head + "  a.md: {read: admin}\n", 3, "read must be a list"},
		{"write is a mapping", head + "  a.md:\n    write: {a: b}\n", 4, "write must be a list"},
		{"rule is a list", head + "  a.md: [read, admin]\n", 3, "must be a mapping"},
		{"rule is null", head + "  a.md:\n  b.md: {}\n", 3, "must be a mapping"},
		{"ttl is a string", head + "  sessions/*/*: {ttl: 1h}\n", 3, "ttl must be a whole number"},
		{"ttl is negative", head + "  sessions/*/*:\n    ttl: -5\n", 4, "ttl must be a whole number"},
		{"ttl is a float", head + "  sessions/*/*:\n    ttl: 1.5\n", 4, "ttl must be a whole number"},
		{"duplicate pattern", head + "  a.md: {read: [x]}\n  b.md: {}\n  a.md: {read: [y]}\n", 5, "duplicate pattern \"a.md\" (first at line 3)"},
		{"bad pattern: dot-dot", head + "  roles/../x.md: {}\n", 3, "bad pattern"},
		{"bad pattern: leading slash", head + "  /global/x.md: {}\n", 3, "leading"},
		{"bad pattern: trailing slash", head + "  global/: {}\n", 3, "trailing"},
		{"bad pattern: question mark", head + "  a?.md: {}\n", 3, "unsupported wildcard"},
		{"bad pattern: brackets", head + "  \"[ab].md\": {}\n", 3, "unsupported wildcard"},
		{"bad pattern: ** in a segment", head + "  a/**b: {}\n", 3, "whole segment"},
		{"bad pattern: **/**", head + "  a/**/**/b: {}\n", 3, "redundant"},
		{"bad pattern: empty segment", head + "  a//b: {}\n", 3, "empty segment"},
		{"bad pattern: backslash", head + "  'a\\b': {}\n", 3, "backslash"},
		{"bad pattern: non-NFC", head + "  \"cafe\u0301.md\": {}\n", 3, "NFC"},
		{"bad pattern: null key", head + "  ~: {}\n", 3, "pattern must be a non-empty string"},
		{".acl is reserved", head + "  .acl: {read: [\"*\"]}\n", 3, "reserved"},
		{"anchor and alias", head + "  a.md: &r {read: [x]}\n  b.md: *r\n", 3, "anchors and aliases"},
		{"second document", head + "  a.md: {}\n---\nversion: \"1.0\"\n", 4, "more than one YAML document"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.src))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\nrules: %+v", c.src, p.Rules())
			}
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidACL) {
				t.Fatalf("error %T %v is not a *ParseError matching ErrInvalidACL", err, err)
			}
			if pe.Line != c.line || !strings.Contains(pe.Reason, c.why) {
				t.Fatalf("got line %d reason %q; want line %d reason containing %q", pe.Line, pe.Reason, c.line, c.why)
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Fatalf("message without a line: %q", err.Error())
			}
		})
	}
}

func TestParseOversized(t *testing.T) {
	src := "version: \"1.0\"\nrules: {}\n# " + strings.Repeat("x", MaxFileSize) + "\n"
	_, err := Parse([]byte(src))
	var pe *ParseError
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
}

func TestParseAccepts(t *testing.T) {
	for _, c := range []struct {
		name  string
		src   string
		rules int
	}{
		{"spec example", specExample, 4},
		{"empty rules deny all", "version: \"1.0\"\nrules: {}\n", 0},
		{"numeric version", "version: 1.0\nrules: {}\n", 0},
		{"block style, comments, Chinese", `# 访问规则
version: "1.0"
rules:
  # 全局
  global/用户画像.md:
    read: ["*"]     # 所有角色
    write: [admin, main]
  roles/写作/*:
    read: [写作, admin]
    write: [写作]
    collaborate: [写作]
    ttl: 0
`, 2},
		{"seed's role rule appended by cold start", "version: \"1.0\"\nrules:\n  roles/analyst/*:\n    read: [analyst, admin, main]\n    write: [analyst, admin]\n    collaborate: []\n", 1},
		{"null action is nobody", "version: \"1.0\"\nrules:\n  a.md:\n    read:\n", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustParse(t, c.src)
			if got := len(p.Rules()); got != c.rules {
				t.Fatalf("%d rules, want %d", got, c.rules)
			}
			if p.Source() != "file" {
				t.Fatalf("source %q", p.Source())
			}
		})
	}
	p := mustParse(t, `version: "1.0"
rules:
  roles/写作/*: {read: [写作], write: [写作]}
`)
	if d := p.Check(Principal{Role: "写作"}, Write, "roles/写作/草稿.md", nil); !d.Allowed {
		t.Fatalf("Chinese role denied: %+v", d)
	}
	if d := p.Check(Principal{Role: "写"}, Read, "roles/写作/草稿.md", nil); d.Allowed {
		t.Fatalf("prefix of a Chinese role allowed: %+v", d)
	}
}

func TestValidateRole(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"code-expert", true}, {"writer", true}, {"main", true}, {"写作", true}, {"analyst_2", true},
		{"", false}, {"admin", false}, {"ADMIN", false}, {"All", false}, {"authenticated", false},
		{"$session_owner", false}, {".hidden", false}, {"a/b", false}, {`a\b`, false}, {"a*", false},
		{"code expert", false}, {"tab\there", false}, {"zero\u200bwidth", false}, {"cafe\u0301", false},
		{"bad\xff", false}, {strings.Repeat("r", 256), false},
	} {
		if err := ValidateRole(c.name); (err == nil) != c.ok {
			t.Errorf("ValidateRole(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
