package acl

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse feeds any bytes to the .acl parser (SPEC §5, a file anyone with
// write access to the workspace folder can edit). Properties: a refusal is a
// *ParseError wrapping ErrInvalidACL; an accepted policy written back as
// YAML (format below) parses to the same rules in the same order; Check and
// Explain answer every rule's own pattern and a few names without panicking,
// and the reserved .acl file is never allowed to anyone but admin.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		specExample,
		"version: \"1.0\"\nrules: {}\n",
		"version: 1.0\nrules: {}\n",
		"# 访问规则\nversion: \"1.0\"\nrules:\n  global/用户画像.md:\n    read: [\"*\"]\n    write: [admin, main]\n  roles/写作/*:\n    read: [写作, admin]\n    write: [写作]\n    collaborate: [写作]\n    ttl: 0\n",
		"version: \"1.0\"\nrules:\n  a.md:\n    read:\n",
		"version: \"1.0\"\nrules:\n  .acl: {read: [\"*\"]}\n",
		"version: \"1.0\"\nrules:\n  a: &x {read: [admin]}\n  b: *x\n",
		"version: \"1.0\"\nrules: {}\n---\nversion: 2\n",
		"version: \"1.0\"\nrules:\n  \"**/x\": {read: [authenticated], ttl: 0x10}\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidACL) {
				t.Fatalf("Parse: %v is not a *ParseError wrapping ErrInvalidACL", err)
			}
			if pe.Line < 0 || pe.Column < 0 {
				t.Fatalf("Parse: error position %d:%d", pe.Line, pe.Column)
			}
			return
		}
		rules := p.Rules()
		out, err := formatRules(rules)
		if err != nil {
			t.Fatalf("format %d rules: %v", len(rules), err)
		}
		p2, err := Parse(out)
		if err != nil {
			t.Fatalf("policy written back does not parse: %v\n%s", err, out)
		}
		r2 := p2.Rules()
		if len(r2) != len(rules) {
			t.Fatalf("round trip: %d rules, want %d\n%s", len(r2), len(rules), out)
		}
		for i := range rules {
			a, b := rules[i], r2[i]
			if a.Pattern != b.Pattern || a.TTL != b.TTL || !slices.Equal(a.Read, b.Read) || !slices.Equal(a.Write, b.Write) || !slices.Equal(a.Collaborate, b.Collaborate) {
				t.Fatalf("round trip changed rule %d: %+v -> %+v", i, a, b)
			}
		}
		owners := OwnerMap{"s-1": "writer"}
		names := []string{ReservedName, "global/user-profile.md", "roles/writer/notes.md", "sessions/s-1/context.md"}
		for _, r := range rules {
			names = append(names, r.Pattern)
		}
		for _, name := range names {
			for _, who := range []Principal{{Role: "writer"}, {Authenticated: true}, {}, {Role: "*"}} {
				for _, a := range Actions() {
					d := p.Check(who, a, name, owners)
					if d.Allowed && name == ReservedName {
						t.Fatalf("%s may %s the reserved .acl under\n%s", who, a, data)
					}
				}
			}
			p.Explain(name, owners)
		}
	})
}

// formatRules writes rules as an .acl file in flow style, every string
// double quoted so YAML reads it back as the same text.
func formatRules(rules []Rule) ([]byte, error) {
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
	}
	list := func(v []string) *yaml.Node {
		n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, s := range v {
			n.Content = append(n.Content, str(s))
		}
		return n
	}
	rs := &yaml.Node{Kind: yaml.MappingNode}
	for _, r := range rules {
		body := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for _, a := range []struct {
			name string
			v    []string
		}{{"read", r.Read}, {"write", r.Write}, {"collaborate", r.Collaborate}} {
			if a.v != nil {
				body.Content = append(body.Content, str(a.name), list(a.v))
			}
		}
		if r.TTL != 0 {
			body.Content = append(body.Content, str("ttl"),
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(int64(r.TTL.Seconds()), 10)})
		}
		rs.Content = append(rs.Content, str(r.Pattern), body)
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str("version"), str("1.0"), str("rules"), rs}}
	return yaml.Marshal(doc)
}

// FuzzCanonicalize feeds any path to Canonicalize over a small workspace
// with a symlink inside it and one leading out. Properties: a refusal wraps
// ErrInvalidPath; an accepted path is local (filepath.IsLocal), slash
// separated, passes Lexical, canonicalises to itself, and, once its
// symlinks are resolved, stays inside the workspace.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		"memory/global/user-profile.md", "memory/global/项目状态.md", "memory/global/caf\u00e9.md", "memory/global/cafe\u0301.md",
		"memory/global/100%.md", "memory/global/%2e%2e/x", "../outside/secret.md", "memory/../../outside/secret.md",
		"MEMORY.md", "memory", "memory/Roles/writer/notes.md", "link-out/secret.md", "link-in/notes.md", "/etc/passwd",
		"C:/x", "memory\\x", "memory/con.md", "memory/a./b", "memory/\u202ex", "memory/x\u2215y", ".", "", "memory//x", "./memory/x",
	} {
		f.Add(s)
	}
	base := f.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, p := range []string{"ws/MEMORY.md", "ws/memory/.acl", "ws/memory/global/user-profile.md", "ws/memory/global/项目状态.md",
		"ws/memory/roles/writer/notes.md", "outside/secret.md"} {
		p = filepath.Join(base, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link-out")); err != nil {
		f.Skipf("symlinks unavailable here: %v", err)
	}
	if err := os.Symlink(filepath.Join(ws, "memory", "roles", "writer"), filepath.Join(ws, "link-in")); err != nil {
		f.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(ws)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 2*MaxPathBytes {
			return
		}
		rel, err := Canonicalize(ws, raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("Canonicalize(%q): %v does not wrap ErrInvalidPath", raw, err)
			}
			return
		}
		if !filepath.IsLocal(filepath.FromSlash(rel)) || strings.Contains(rel, "\\") || rel != filepath.ToSlash(filepath.Clean(rel)) {
			t.Fatalf("Canonicalize(%q) = %q is not a clean local path", raw, rel)
		}
		if err := Lexical(rel); err != nil {
			t.Fatalf("Canonicalize(%q) = %q fails Lexical: %v", raw, rel, err)
		}
		if again, err := Canonicalize(ws, rel); err != nil || again != rel {
			t.Fatalf("Canonicalize(%q) = %q, but that canonicalises to %q, %v", raw, rel, again, err)
		}
		// Resolve the existing part of the path: it must stay inside.
		p := filepath.Join(root, filepath.FromSlash(rel))
		for q := p; ; q = filepath.Dir(q) {
			if real, err := filepath.EvalSymlinks(q); err == nil {
				if !within(root, real) {
					t.Fatalf("Canonicalize(%q) = %q resolves outside the workspace to %s", raw, rel, real)
				}
				break
			}
			if q == root || q == filepath.Dir(q) {
				break
			}
		}
	})
}
