package memory

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/safefile"
)

// This file holds L2 roles and the cold start (SPEC §5.2): listing roles,
// and CreateRole, which fills the role template, adds the role's ACL rule,
// writes and indexes the role's config.md and builds its starting context.

// DefaultRoleTemplate is the role template shipped in the binary (bilingual
// zh/en). CreateRole writes it to memory/templates/role-template.md when
// that file is absent, and uses the workspace's file when it exists (so
// the person can edit it).
//
//go:embed templates/role-template.md
var DefaultRoleTemplate string

// Role template paths and limits.
const (
	// RoleTemplatePath is the workspace's role template (SPEC §4.1).
	RoleTemplatePath = "memory/templates/role-template.md"
	// ACLPath is the access rules file (SPEC §5.1).
	ACLPath = "memory/.acl"
	// MaxDescriptionChars caps CreateRoleRequest.Description (characters).
	MaxDescriptionChars = 2000
	// MaxSummaryChars is the budget of a starting-context summary
	// (characters, not bytes).
	MaxSummaryChars = 2000
	// RelatedMinScore is the hybrid-score floor for the related memories
	// of a starting context.
	RelatedMinScore = 0.1
)

// Template placeholders CreateRole fills. In the template's front matter a
// placeholder is replaced by a YAML-quoted value (CAPABILITIES: a YAML
// list), so write them unquoted there; in the body by plain text.
const (
	VarRoleName         = "ROLE_NAME"
	VarRoleDescription  = "ROLE_DESCRIPTION"
	VarCreatedAt        = "CREATED_AT"        // RFC 3339 UTC
	VarCapabilities     = "CAPABILITIES"      // "a, b" (front matter: [a, b])
	VarCoreCapabilities = "CORE_CAPABILITIES" // one "- a" line each
	VarSkills           = "SKILLS"
	VarPreferences      = "PREFERENCES"
	VarCollaborateWith  = "COLLABORATE_WITH"
	VarSharedMemory     = "SHARED_MEMORY"
)

// CreateRoleRequest creates a role (profile) at cold start. Role is its
// name (acl.ValidateRole); Description one line (required, at most
// MaxDescriptionChars; newlines become spaces); Capabilities are keywords
// (SPEC §5.4 routing). Writer writes config.md (default admin).
type CreateRoleRequest struct {
	Role         string   `json:"role"`
	Description  string   `json:"description"`
	Capabilities []string `json:"capabilities,omitempty"`
	Writer       string   `json:"-"`
}

// ContextItem is one entry of a starting context: a file (Path,
// workspace-relative), with lines when it is a search hit, a title, a
// short text and, for related memories, the search score.
type ContextItem struct {
	Path      string  `json:"path"`
	StartLine int     `json:"startLine,omitempty"`
	EndLine   int     `json:"endLine,omitempty"`
	Title     string  `json:"title,omitempty"`
	Text      string  `json:"text"`
	Score     float64 `json:"score,omitempty"`
}

// StartingContext is what a new role starts with (SPEC §5.2): the global
// files it may read, its config, the top related memories of other roles
// it may read, and recent decisions it may read.
type StartingContext struct {
	Global    []ContextItem `json:"global"`
	Config    ContextItem   `json:"config"`
	Related   []ContextItem `json:"related"`
	Decisions []ContextItem `json:"decisions"`
}

// CreateRoleResult is CreateRole's answer: the role, its config.md path,
// the starting context and its Markdown summary (at most MaxSummaryChars
// characters, in Chinese when the description has Chinese characters,
// else in English). ACL is the rule pattern added to memory/.acl ("" when
// the file already had one); ACLCreated: the file was created (from the
// defaults). Unfilled lists template placeholders CreateRole does not know
// (left as written). Warning is set when the ACL in force does not let the
// role read and write its own config.
type CreateRoleResult struct {
	Role       string          `json:"role"`
	Path       string          `json:"path"`
	Summary    string          `json:"summary"`
	Context    StartingContext `json:"context"`
	ACL        string          `json:"acl,omitempty"`
	ACLCreated bool            `json:"aclCreated,omitempty"`
	Unfilled   []string        `json:"unfilled,omitempty"`
	Warning    string          `json:"warning,omitempty"`
	// ContextPath is where the summary was saved:
	// memory/roles/<role>/MEMORY.md (RoleMemoryFile).
	ContextPath string `json:"contextPath"`
}

// RoleMemoryFile is the name of a role's curated long-term memory in its
// folder (SPEC §4.1); CreateRole writes the starting context there.
const RoleMemoryFile = "MEMORY.md"

// startingContextFile is the MEMORY.md CreateRole writes: front matter and
// the summary.
func startingContextFile(role string, now time.Time, summary string) string {
	return "---\ntype: role\nrole: " + yamlQuote(role) + "\ncreated: " + now.UTC().Format(time.RFC3339) +
		"\n---\n" + strings.TrimRight(summary, "\n") + "\n"
}

// RoleInfo describes one role found in the workspace: memory/roles/<r>/
// (Path: its config.md, "" when it has none) or, in OpenClaw's layout,
// role main (Path "MEMORY.md" or ""). Description, Capabilities and
// Created come from config.md's front matter; Error says why it could not
// be read (the role is listed all the same).
type RoleInfo struct {
	Role         string   `json:"role"`
	Path         string   `json:"path,omitempty"`
	Description  string   `json:"description,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	Created      int64    `json:"created,omitempty"` // Unix ms
	Files        int      `json:"files"`
	Error        string   `json:"error,omitempty"`
}

// ListRoles lists the roles of the workspace, sorted by name: each folder
// of memory/roles, and always main, the app's own role (the chat's first
// profile; profiles.delete refuses it), even before it has a folder (a new
// Atrium workspace) — so that mcp.token.create, collab.request, a device's
// scope and the window's "Edit as" and drop targets offer it from the
// first start.
func (m *Manager) ListRoles(ctx context.Context) ([]RoleInfo, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	out := []RoleInfo{}
	root := filepath.Join(m.ws, "memory", "roles")
	es, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list roles: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range es {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		ri := RoleInfo{Role: e.Name()}
		dir := filepath.Join(root, e.Name())
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if r, rerr := filepath.Rel(m.ws, p); rerr == nil && classify(filepath.ToSlash(r)).indexed {
					ri.Files++
				}
			}
			return nil
		})
		cfgRel := "memory/roles/" + e.Name() + "/config.md"
		if data, err := os.ReadFile(filepath.Join(m.ws, filepath.FromSlash(cfgRel))); err == nil {
			ri.Path = cfgRel
			fm, _, _, _, ferr := ParseFrontMatter(string(data))
			if ferr != nil {
				ri.Error = cfgRel + ": " + ferr.Error()
			}
			ri.Description, ri.Capabilities = fm.Description, fm.Capabilities
			if !fm.Created.IsZero() {
				ri.Created = fm.Created.UnixMilli()
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			ri.Error = err.Error()
		}
		seen[ri.Role] = true
		out = append(out, ri)
	}
	// main also owns the OpenClaw-layout files outside memory/roles
	// (MEMORY.md, memory/YYYY-MM-DD.md ...).
	outside := m.countMainOutsideRoles()
	for i := range out {
		if out[i].Role == MainRole {
			out[i].Files += outside
		}
	}
	if !seen[MainRole] {
		ri := RoleInfo{Role: MainRole, Files: outside}
		if l := detectLayout(m.ws); l == "openclaw" || l == "mixed" {
			ri.Description = "OpenClaw-layout memory (MEMORY.md, memory/YYYY-MM-DD.md)"
			for _, n := range []string{"MEMORY.md", "memory.md"} {
				if st, err := os.Stat(filepath.Join(m.ws, n)); err == nil && st.Mode().IsRegular() {
					ri.Path = n
					break
				}
			}
		}
		out = append(out, ri)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Role < out[j].Role })
	return out, nil
}

// countMainOutsideRoles counts the memory files of role main that are not
// under memory/roles (MEMORY.md and the OpenClaw layout's memory/*.md).
func (m *Manager) countMainOutsideRoles() int {
	n := 0
	count := func(rel string) {
		if k := classify(rel); k.indexed && k.layer == LayerRole && k.role == MainRole {
			n++
		}
	}
	for _, name := range []string{"MEMORY.md", "memory.md"} {
		if st, err := os.Stat(filepath.Join(m.ws, name)); err == nil && st.Mode().IsRegular() {
			count(name)
		}
	}
	roles := filepath.Join(m.ws, "memory", "roles")
	_ = filepath.WalkDir(filepath.Join(m.ws, "memory"), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && p == roles:
			return filepath.SkipDir
		case d.Type().IsRegular():
			if r, rerr := filepath.Rel(m.ws, p); rerr == nil {
				count(filepath.ToSlash(r))
			}
		}
		return nil
	})
	return n
}

// CreateRole is the cold start of a new role (SPEC §5.2; seed S000 §4):
//
//  1. the role name is checked (acl.ValidateRole) and must be new: no
//     memory/roles/<role>/ folder (and not main in an OpenClaw workspace);
//  2. the template memory/templates/role-template.md is read, written
//     from DefaultRoleTemplate first when absent, and filled (see the
//     Var* placeholders); its front matter gets `type: role`;
//  3. the role's rule `roles/<role>/**: {read: [<role>, admin], write:
//     [<role>, admin], collaborate: [<role>, admin]}` (the defaults' rule
//     for role folders) is appended to memory/.acl, keeping the file's
//     comments and order; when the file does not exist it is created
//     from the defaults (see aclFromDefaults). The result must parse with
//     acl.Parse, else nothing is changed;
//  4. memory/roles/<role>/config.md is written through Write (replace,
//     by Writer) and so indexed;
//  5. the starting context is built (see StartingContext), every item
//     filtered by what the new role may read under the ACL in force;
//  6. its summary is written through Write (replace, by Writer) as the
//     role's curated long-term memory memory/roles/<role>/MEMORY.md
//     (SPEC §4.1 layout, §5.2 cold start; front matter `type: role`,
//     `role`, `created`), so it is indexed and the role's runs read it
//     with config.md (the wiring's persona: the first turns carry it).
//
// Errors: ErrInvalidInput (role, description, capabilities, a template
// whose filled front matter does not parse, a malformed memory/.acl),
// ErrExists, ErrInvalidPath (a symlink on the way), Write's.
func (m *Manager) CreateRole(ctx context.Context, r CreateRoleRequest) (CreateRoleResult, error) {
	if m.closed.Load() {
		return CreateRoleResult{}, ErrClosed
	}
	if err := acl.ValidateRole(r.Role); err != nil {
		return CreateRoleResult{}, fmt.Errorf("create role: %w: %v", ErrInvalidInput, err)
	}
	desc := strings.Join(strings.Fields(r.Description), " ")
	switch {
	case desc == "":
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w: a description is required", r.Role, ErrInvalidInput)
	case !utf8.ValidString(desc):
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w: description is not valid UTF-8", r.Role, ErrInvalidInput)
	case utf8.RuneCountInString(desc) > MaxDescriptionChars:
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w: description longer than %d characters", r.Role, ErrInvalidInput, MaxDescriptionChars)
	}
	for _, c := range desc {
		if unicode.IsControl(c) {
			return CreateRoleResult{}, fmt.Errorf("create role %s: %w: control character in description", r.Role, ErrInvalidInput)
		}
	}
	var caps []string
	for _, c := range r.Capabilities {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !utf8.ValidString(c) || strings.ContainsFunc(c, unicode.IsControl) || utf8.RuneCountInString(c) > 100 {
			return CreateRoleResult{}, fmt.Errorf("create role %s: %w: capability %q", r.Role, ErrInvalidInput, c)
		}
		caps = append(caps, c)
	}
	writer := r.Writer
	if writer == "" {
		writer = AdminWriter
	}

	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	dirRel := "memory/roles/" + r.Role
	if _, err := os.Lstat(filepath.Join(m.ws, filepath.FromSlash(dirRel))); err == nil {
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w: %s exists", r.Role, ErrExists, dirRel)
	}
	// memory/roles/Writer beside memory/roles/writer: refused before the
	// .acl gets a rule for it.
	if err := m.checkNewName(ctx, dirRel+"/config.md"); err != nil {
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w", r.Role, err)
	}
	if r.Role == MainRole {
		if l := detectLayout(m.ws); l == "openclaw" || l == "mixed" {
			return CreateRoleResult{}, fmt.Errorf("create role %s: %w: this workspace's OpenClaw-layout memory is role main", r.Role, ErrExists)
		}
	}
	if err := m.importRoots(ctx); err != nil {
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w", r.Role, err)
	}
	tmpl, err := m.roleTemplate()
	if err != nil {
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w", r.Role, err)
	}
	now := m.now()
	text, unfilled, err := fillTemplate(tmpl, r.Role, desc, caps, now)
	if err != nil {
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w", r.Role, err)
	}
	res := CreateRoleResult{Role: r.Role, Path: dirRel + "/config.md", Unfilled: unfilled}
	if res.ACL, res.ACLCreated, err = m.addRoleRule(r.Role); err != nil {
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w", r.Role, err)
	}
	if _, err := m.Write(ctx, WriteRequest{Path: res.Path, Content: text, Mode: WriteReplace, Writer: writer}); err != nil {
		return CreateRoleResult{}, fmt.Errorf("create role %s: %w", r.Role, err)
	}
	m.log.Info("memory role created", "role", r.Role, "path", res.Path, "acl_rule", res.ACL, "acl_created", res.ACLCreated)

	pol, perr := m.policy()
	if perr != nil {
		res.Warning = "the ACL in force could not be read (" + perr.Error() + "); the starting context holds only what admin-only rules allow"
	}
	who := acl.Principal{Role: r.Role}
	name, _ := acl.Name(res.Path)
	if !pol.Check(who, acl.Read, name, m).Allowed || !pol.Check(who, acl.Write, name, m).Allowed {
		res.Warning = strings.TrimPrefix(res.Warning+"; ", "; ") + "the ACL in force does not let " + r.Role + " read and write " + res.Path + " (a more specific rule in memory/.acl decides)"
	}
	res.Context = m.startingContext(ctx, pol, r.Role, res.Path, desc, caps)
	res.Summary = contextSummary(res.Role, desc, caps, res.Context, hasHan(desc))
	res.ContextPath = dirRel + "/" + RoleMemoryFile
	if _, err := m.Write(ctx, WriteRequest{Path: res.ContextPath, Content: startingContextFile(res.Role, now, res.Summary),
		Mode: WriteReplace, Writer: writer}); err != nil {
		return CreateRoleResult{}, fmt.Errorf("create role %s: write starting context: %w", r.Role, err)
	}
	return res, nil
}

// roleTemplate returns the workspace's role template, writing the default
// first when it is absent (never replacing a file).
func (m *Manager) roleTemplate() (string, error) {
	dir, err := mkdirNoLinks(m.ws, path.Dir(RoleTemplatePath))
	if err != nil {
		return "", err
	}
	abs := filepath.Join(dir, path.Base(RoleTemplatePath))
	info, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createFile(dir, path.Base(RoleTemplatePath), []byte(DefaultRoleTemplate)); err != nil {
			return "", fmt.Errorf("write %s: %w", RoleTemplatePath, err)
		}
		m.log.Info("memory role template written", "path", RoleTemplatePath)
		info, err = os.Lstat(abs)
	}
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() || info.Size() > MaxImportBytes {
		return "", fmt.Errorf("%w: %s is not a regular file of at most %d bytes", ErrInvalidPath, RoleTemplatePath, MaxImportBytes)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return "", err
	}
	if err := checkText(RoleTemplatePath, string(data)); err != nil {
		return "", err
	}
	return string(data), nil
}

// createFile writes data to dir/name atomically (package safefile: temp
// file, fsync, hard link) without replacing an existing file: an existing
// one is kept and is not an error.
func createFile(dir, name string, data []byte) error {
	err := safefile.CreateFile(filepath.Join(dir, name), data, safefile.Options{})
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// fillTemplate fills tmpl for a role (see CreateRoleRequest and the Var*
// constants) and returns the text and the unknown placeholders. The front
// matter's `type` becomes `role`.
func fillTemplate(tmpl, role, desc string, caps []string, now time.Time) (string, []string, error) {
	created := now.UTC().Format(time.RFC3339)
	capText := "(待补充 / to be filled in)"
	coreText := "- (待补充 / to be filled in)"
	if len(caps) > 0 {
		capText = strings.Join(caps, ", ")
		coreText = "- " + strings.Join(caps, "\n- ")
	}
	body := map[string]string{
		VarRoleName:         role,
		VarRoleDescription:  desc,
		VarCreatedAt:        created,
		VarCapabilities:     capText,
		VarCoreCapabilities: coreText,
		VarSkills:           "- (待补充 / to be filled in)",
		VarPreferences:      "- (待补充 / to be filled in)",
		VarCollaborateWith:  "(暂无 / none yet)",
		VarSharedMemory:     "global/（只读 / read-only）",
	}
	quote := yamlQuote
	fmVals := map[string]string{}
	for k, v := range body {
		fmVals[k] = quote(v)
	}
	if caps == nil {
		caps = []string{}
	}
	capJSON, _ := json.Marshal(caps)
	fmVals[VarCapabilities] = string(capJSON)
	fmVals[VarCoreCapabilities] = string(capJSON)

	unknown := map[string]bool{}
	fill := func(s string, vals map[string]string) string {
		return placeholder.ReplaceAllStringFunc(s, func(ph string) string {
			name := placeholder.FindStringSubmatch(ph)[1]
			if v, ok := vals[name]; ok {
				return v
			}
			unknown[name] = true
			return ph
		})
	}
	text := strings.ReplaceAll(tmpl, "\r\n", "\n")
	fmText, hasFM := frontMatter(text)
	if !hasFM {
		text = fill(text, body)
		head := fmt.Sprintf("---\ntype: role\nrole: %s\ndescription: %s\ncapabilities: %s\ncreated: %s\n---\n",
			quote(role), quote(desc), capJSON, created)
		return head + text, sortedKeys(unknown), nil
	}
	_, rest, _ := strings.Cut(strings.TrimPrefix(text, "\uFEFF"), "\n") // after the first "---"
	rest = rest[len(fmText):]                                           // the closing line and the body
	filledFM := fill(fmText, fmVals)
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(filledFM), &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return "", nil, fmt.Errorf("%w: %s: its front matter does not parse once filled (write placeholders unquoted there): %v", ErrInvalidInput, RoleTemplatePath, err)
	}
	root := doc.Content[0]
	typed := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "type" {
			root.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Value: "role"}
			typed = true
		}
	}
	if !typed {
		root.Content = append([]*yaml.Node{{Kind: yaml.ScalarNode, Value: "type"}, {Kind: yaml.ScalarNode, Value: "role"}}, root.Content...)
	}
	y, err := yaml.Marshal(&doc)
	if err != nil {
		return "", nil, err
	}
	out := "---\n" + string(y) + fill(rest, body)
	if _, _, _, _, err := ParseFrontMatter(out); err != nil {
		return "", nil, fmt.Errorf("%w: %s: %v", ErrInvalidInput, RoleTemplatePath, err)
	}
	return out, sortedKeys(unknown), nil
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// yamlQuote renders s as a YAML double-quoted scalar (a JSON string is one).
func yamlQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// roleRuleLine is the rule granting a role its folder (the defaults' rule
// for role folders, written for one role).
func roleRuleLine(role string) (pattern, line string) {
	pattern = "roles/" + role + "/**"
	r, a := yamlQuote(role), yamlQuote("admin")
	line = fmt.Sprintf("%s: {read: [%s, %s], write: [%s, %s], collaborate: [%s, %s]}", yamlQuote(pattern), r, a, r, a, r, a)
	return pattern, line
}

// aclFromDefaults renders acl.Defaults as a .acl file, for the roles in
// roles (each gets its folder rule). A .acl cannot say "the folder's own
// role" as the built-in defaults do, so role folders without a rule of
// their own fall to `roles/*/**`, admin only (never opened wider than the
// defaults); the other rules are the defaults', plus the SPEC example's
// session ttl (86400 s).
func aclFromDefaults(roles []string) string {
	var b strings.Builder
	b.WriteString(`# Access rules for memory (SPEC §5.1). Written by Atrium from its built-in
# defaults when the first role was created; edit freely. Names are relative to
# memory/. An exact path beats a pattern; the most specific pattern wins.
version: "1.0"
rules:
  "global/**": {read: ["*"], write: [admin, main], collaborate: [admin, main]}
  "sessions/*/**": {read: ["$session_owner", admin], write: ["$session_owner"], collaborate: ["$session_owner"], ttl: 86400}
  "templates/**": {read: ["*"], write: [admin], collaborate: []}
  # Role folders without a rule of their own: admin only.
  "roles/*/**": {read: [admin], write: [admin], collaborate: [admin]}
  # Everything else (OpenClaw layout: MEMORY.md, YYYY-MM-DD.md) is role main's.
  "**": {read: [main, admin], write: [main, admin], collaborate: [main, admin]}
  # One rule per role.
`)
	for _, r := range roles {
		_, line := roleRuleLine(r)
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

// addRoleRule adds role's folder rule to memory/.acl (see CreateRole) and
// returns its pattern ("" when the file already had a rule with it) and
// whether the file was created.
func (m *Manager) addRoleRule(role string) (string, bool, error) {
	unlock := m.locks.lock(ACLPath)
	defer unlock()
	dir, err := mkdirNoLinks(m.ws, "memory")
	if err != nil {
		return "", false, err
	}
	abs := filepath.Join(dir, ".acl")
	pattern, line := roleRuleLine(role)
	info, err := os.Lstat(abs)
	created := false
	var next []byte
	switch {
	case errors.Is(err, fs.ErrNotExist):
		roles := []string{role}
		if es, err := os.ReadDir(filepath.Join(dir, "roles")); err == nil {
			for _, e := range es {
				if !e.IsDir() || e.Name() == role {
					continue
				}
				if verr := acl.ValidateRole(e.Name()); verr != nil {
					m.log.Warn("memory role folder cannot be named in .acl; admin only", "role", e.Name(), "err", verr)
					continue
				}
				roles = append(roles, e.Name())
			}
		}
		sort.Strings(roles)
		next, created = []byte(aclFromDefaults(roles)), true
	case err != nil:
		return "", false, err
	case !info.Mode().IsRegular():
		return "", false, fmt.Errorf("%w: %s is not a regular file", ErrInvalidPath, ACLPath)
	default:
		data, err := os.ReadFile(abs)
		if err != nil {
			return "", false, err
		}
		pol, err := acl.Parse(data)
		if err != nil {
			return "", false, fmt.Errorf("%w: %s is malformed, fix it first: %w", ErrInvalidInput, ACLPath, err)
		}
		for _, r := range pol.Rules() {
			if r.Pattern == pattern {
				return "", false, nil // already there
			}
		}
		if next, err = appendRule(data, line); err != nil {
			return "", false, fmt.Errorf("%s: %w", ACLPath, err)
		}
	}
	pol, err := acl.Parse(next)
	if err != nil {
		return "", false, fmt.Errorf("%s: the rule for %s would not parse: %w", ACLPath, role, err)
	}
	if r, ok := pol.Match("roles/" + role + "/config.md"); !ok || (r.Pattern != pattern && created) {
		return "", false, fmt.Errorf("%s: the new rule for %s does not match its folder", ACLPath, role)
	}
	// Atomic, keeping the file's mode and owner.
	if err := safefile.WriteFile(abs, next, safefile.Options{}); err != nil {
		return "", false, err
	}
	return pattern, created, nil
}

// appendRule adds one rule line to the `rules:` mapping of a valid .acl
// file, keeping its text (comments, order) as it is. When rules is the
// last top-level key and a block mapping, the line is appended at the end
// with the indentation of the other rules; otherwise the document is
// re-encoded with the rule added (yaml keeps comments and order).
func appendRule(data []byte, line string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%w: cannot read the rules: %v", ErrInvalidInput, err)
	}
	root := doc.Content[0]
	var rules *yaml.Node
	last := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "rules" {
			rules = root.Content[i+1]
			last = i+2 == len(root.Content)
		}
	}
	if rules == nil || rules.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: no rules mapping", ErrInvalidInput)
	}
	if last && rules.Style&yaml.FlowStyle == 0 && len(rules.Content) > 0 {
		indent := strings.Repeat(" ", rules.Content[0].Column-1)
		out := append([]byte(nil), data...)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		return append(out, []byte(indent+line+"\n")...), nil
	}
	var add yaml.Node
	if err := yaml.Unmarshal([]byte(line), &add); err != nil || len(add.Content) == 0 {
		return nil, fmt.Errorf("rule %q: %v", line, err)
	}
	rules.Style = 0
	rules.Content = append(rules.Content, add.Content[0].Content...)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readable reports whether role may read rel under pol.
func (m *Manager) readable(pol *acl.Policy, role, rel string) bool {
	name, ok := acl.Name(rel)
	return ok && pol.Check(acl.Principal{Role: role}, acl.Read, name, m).Allowed
}

// globalPriority orders the global files of SPEC §4.1 first.
var globalPriority = []string{"user-profile.md", "preferences.md", "project-status.md", "shared-knowledge.md", "decisions.md"}

// startingContext gathers the new role's starting context (see
// CreateRole); every item is one the role may read under pol.
func (m *Manager) startingContext(ctx context.Context, pol *acl.Policy, role, cfgPath, desc string, caps []string) StartingContext {
	sc := StartingContext{Global: []ContextItem{}, Related: []ContextItem{}, Decisions: []ContextItem{}}
	sc.Config = ContextItem{Path: cfgPath, Title: role, Text: desc}
	if len(caps) > 0 {
		sc.Config.Text += " [" + strings.Join(caps, ", ") + "]"
	}

	type cand struct {
		rel   string
		text  string
		mtime time.Time
	}
	var decisions []cand
	seenDecision := map[string]bool{}

	// Global files, in the SPEC's order first.
	var globals []cand
	gdir := filepath.Join(m.ws, "memory", "global")
	_ = filepath.WalkDir(gdir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		r, rerr := filepath.Rel(m.ws, p)
		if rerr != nil {
			return nil
		}
		rel := filepath.ToSlash(r)
		if !classify(rel).indexed || !m.readable(pol, role, rel) {
			return nil
		}
		info, ierr := d.Info()
		if ierr != nil || info.Size() > MaxFileBytes {
			return nil
		}
		data, rerr := os.ReadFile(p)
		if rerr != nil || bytes.IndexByte(data, 0) >= 0 {
			return nil
		}
		globals = append(globals, cand{rel: rel, text: string(data), mtime: info.ModTime()})
		return nil
	})
	rank := func(rel string) int {
		for i, n := range globalPriority {
			if rel == "memory/global/"+n {
				return i
			}
		}
		return len(globalPriority)
	}
	sort.SliceStable(globals, func(i, j int) bool {
		ri, rj := rank(globals[i].rel), rank(globals[j].rel)
		if ri != rj {
			return ri < rj
		}
		return globals[i].rel < globals[j].rel
	})
	for _, g := range globals {
		if isDecision(g.rel, g.text) {
			decisions = append(decisions, g)
			seenDecision[g.rel] = true
		}
		if len(sc.Global) < 6 {
			title, first := headline(g.text, path.Base(g.rel))
			sc.Global = append(sc.Global, ContextItem{Path: g.rel, Title: title, Text: first})
		}
	}

	// Related memories of other roles (filtered here; the index-level
	// filter is the ACL wiring's).
	// The description and the capabilities are the query, cut to the
	// first MaxQueryChars characters (a description is at most
	// MaxDescriptionChars, but capabilities are not counted).
	related := []rune(desc + " " + strings.Join(caps, " "))
	related = related[:min(len(related), MaxQueryChars)]
	if res, err := m.Search(ctx, SearchOptions{Query: string(related), MaxResults: 40, MinScore: RelatedMinScore}); err == nil {
		seen := map[string]bool{}
		for _, h := range res.Results {
			if len(sc.Related) == 3 {
				break
			}
			if h.Layer != LayerRole || h.Role == role || seen[h.Path] || !m.readable(pol, role, h.Path) {
				continue
			}
			seen[h.Path] = true
			sc.Related = append(sc.Related, ContextItem{Path: h.Path, StartLine: h.StartLine, EndLine: h.EndLine,
				Score: h.Score, Text: clip(oneLine(h.Snippet), 160)})
		}
	} else {
		m.log.Warn("memory starting context: related search failed", "role", role, "err", err)
	}

	// Decisions outside global/: files tagged decision found by keyword.
	if res, err := m.Search(ctx, SearchOptions{Query: "decision decided 决策 决定", MaxResults: 20, MinScore: -1, Mode: ModeKeyword}); err == nil {
		for _, h := range res.Results {
			if seenDecision[h.Path] || h.Layer == LayerGlobal || !m.readable(pol, role, h.Path) {
				continue
			}
			seenDecision[h.Path] = true
			abs := filepath.Join(m.ws, filepath.FromSlash(h.Path))
			info, err := os.Stat(abs)
			if err != nil || info.Size() > MaxFileBytes {
				continue
			}
			data, err := os.ReadFile(abs)
			if err != nil || !isDecision(h.Path, string(data)) {
				continue
			}
			decisions = append(decisions, cand{rel: h.Path, text: string(data), mtime: info.ModTime()})
		}
	}
	sort.SliceStable(decisions, func(i, j int) bool { return decisions[i].mtime.After(decisions[j].mtime) })
	for _, d := range decisions {
		if len(sc.Decisions) == 3 {
			break
		}
		title, _ := headline(d.text, path.Base(d.rel))
		sc.Decisions = append(sc.Decisions, ContextItem{Path: d.rel, Title: title, Text: lastLines(d.text, 3, 200)})
	}
	return sc
}

// headline returns a file's title (its first heading, else its front
// matter description, else name) and its first line of text.
func headline(text, name string) (string, string) {
	fm, body, _, _, err := ParseFrontMatter(text)
	if err != nil {
		body = text
	}
	title, first := "", ""
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
		case strings.HasPrefix(l, "#"):
			if title == "" {
				title = strings.TrimSpace(strings.TrimLeft(l, "#"))
			}
		case first == "":
			first = l
		}
		if title != "" && first != "" {
			break
		}
	}
	if title == "" {
		title = fm.Description
	}
	if title == "" {
		title = name
	}
	return clip(title, 60), clip(first, 120)
}

// lastLines returns the last n non-empty, non-heading lines of text's
// body, joined by " / " and clipped to max characters.
func lastLines(text string, n, max int) string {
	_, body, _, _, err := ParseFrontMatter(text)
	if err != nil {
		body = text
	}
	var keep []string
	ls := strings.Split(body, "\n")
	for i := len(ls) - 1; i >= 0 && len(keep) < n; i-- {
		l := strings.TrimSpace(ls[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		keep = append([]string{l}, keep...)
	}
	return clip(strings.Join(keep, " / "), max)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip cuts s to max characters, marking the cut with "…".
func clip(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// hasHan reports whether s contains Chinese characters.
func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

// contextSummary renders a starting context as short Markdown (at most
// MaxSummaryChars characters), in Chinese or English.
func contextSummary(role, desc string, caps []string, sc StartingContext, zh bool) string {
	t := func(en, cn string) string {
		if zh {
			return cn
		}
		return en
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s%s\n\n", t("Starting context for ", "初始上下文："), role)
	fmt.Fprintf(&b, "## %s\n- %s (%s)", t("Role", "角色配置"), clip(desc, 300), sc.Config.Path)
	if len(caps) > 0 {
		fmt.Fprintf(&b, " — %s%s", t("capabilities: ", "能力："), strings.Join(caps, ", "))
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "## %s\n", t("Global memory", "公共记忆"))
	if len(sc.Global) == 0 {
		fmt.Fprintf(&b, "- %s\n", t("(none yet)", "（暂无）"))
	}
	for _, g := range sc.Global {
		fmt.Fprintf(&b, "- %s — %s", g.Path, g.Title)
		if g.Text != "" {
			b.WriteString(": " + g.Text)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n## %s\n", t("Related memories you may read", "可读取的相关记忆"))
	if len(sc.Related) == 0 {
		fmt.Fprintf(&b, "- %s\n", t("(none found)", "（未找到）"))
	}
	for _, r := range sc.Related {
		fmt.Fprintf(&b, "- %s:%d-%d (%.2f): %s\n", r.Path, r.StartLine, r.EndLine, r.Score, r.Text)
	}
	fmt.Fprintf(&b, "\n## %s\n", t("Recent decisions", "近期决策"))
	if len(sc.Decisions) == 0 {
		fmt.Fprintf(&b, "- %s\n", t("(none yet)", "（暂无）"))
	}
	for _, d := range sc.Decisions {
		fmt.Fprintf(&b, "- %s — %s: %s\n", d.Path, d.Title, d.Text)
	}
	s := b.String()
	if utf8.RuneCountInString(s) <= MaxSummaryChars {
		return s
	}
	// Cut at the last whole line that fits.
	r := []rune(s)[:MaxSummaryChars-1]
	cut := string(r)
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i+1]
	}
	return cut + "…\n"
}
