package memory

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/acl"
)

const teamACL = `# Team rules (kept by CreateRole)
version: "1.0"
rules:
  "global/**": {read: ["*"], write: [admin, main]}
  # writer keeps its drafts private but shares the style guide with analysts
  "roles/writer/**": {read: [writer, admin], write: [writer, admin]}
  "roles/writer/style-guide.md": {read: [writer, analyst, admin], write: [writer]}
  "roles/code-expert/**": {read: [code-expert, admin], write: [code-expert, admin]}
  "sessions/*/*": {read: [$session_owner, admin], write: [$session_owner], ttl: 86400}
`

func teamFiles() map[string]string {
	return map[string]string{
		"memory/.acl":                     teamACL,
		"memory/global/user-profile.md":   "# 用户画像 User profile\n\nThe user is a backend engineer who writes in Chinese and English.\n",
		"memory/global/project-status.md": "# Project status\n\nProject path moved to /srv/atrium-v2.\n",
		"memory/global/decisions.md":      "# Decisions\n\n- 2026-11-01 use SQLite for state\n- 2026-11-20 database performance reports go out every Monday\n",
		"memory/roles/writer/style-guide.md": "# Style guide\n\nDatabase performance report writing: lead with the numbers, " +
			"keep charts simple, explain latency percentiles in plain words.\n",
		"memory/roles/writer/drafts.md": "# Drafts\n\nDatabase performance report draft with the codeword pelicanvault.\n",
		"memory/roles/code-expert/perf.md": "# Performance tips\n\nDatabase performance tuning: the connection pool holds 32; " +
			"private codeword xylophonequark for the index rebuild.\n",
	}
}

func TestCreateRole(t *testing.T) {
	ctx := context.Background()
	f, _ := newSessionFixture(t, teamFiles(), nil)
	res, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "analyst", Description: "Analyse database performance data and write reports",
		Capabilities: []string{"data analysis", "reporting"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Role != "analyst" || res.Path != "memory/roles/analyst/config.md" || res.ACL != "roles/analyst/**" || res.ACLCreated || res.Warning != "" || len(res.Unfilled) != 0 {
		t.Fatalf("result %+v", res)
	}

	// config.md: filled template, front matter typed role, indexed.
	cfg := f.read(t, res.Path)
	fm, body, _, ok, err := ParseFrontMatter(cfg)
	if err != nil || !ok {
		t.Fatalf("config front matter: %v\n%s", err, cfg)
	}
	if fm.Type != "role" || fm.Role != "analyst" || fm.Description != "Analyse database performance data and write reports" ||
		strings.Join(fm.Capabilities, "|") != "data analysis|reporting" || fm.Created.IsZero() {
		t.Fatalf("front matter %+v", fm)
	}
	if strings.Contains(cfg, "{{") || !strings.Contains(body, "# analyst — 角色配置 / Role configuration") || !strings.Contains(body, "- data analysis\n- reporting") {
		t.Fatalf("config body:\n%s", cfg)
	}
	if !hasPath(f.search(t, "Analyse database performance data"), res.Path) {
		t.Fatal("config not indexed")
	}
	// The starting context is saved as the role's MEMORY.md (SPEC §4.1,
	// §5.2), indexed, so its first turns can carry it.
	if res.ContextPath != "memory/roles/analyst/MEMORY.md" {
		t.Fatalf("context path %q", res.ContextPath)
	}
	saved := f.read(t, res.ContextPath)
	sfm, sbody, _, ok, err := ParseFrontMatter(saved)
	if err != nil || !ok || sfm.Type != "role" || sfm.Role != "analyst" || strings.TrimSpace(sbody) != strings.TrimSpace(res.Summary) {
		t.Fatalf("saved starting context (%v):\n%s\nwant the summary:\n%s", err, saved, res.Summary)
	}
	if !strings.Contains(sbody, "memory/global/user-profile.md") {
		t.Fatalf("saved starting context names no global file:\n%s", saved)
	}
	// The default template was written into the workspace.
	if tmpl := f.read(t, RoleTemplatePath); tmpl != DefaultRoleTemplate {
		t.Fatal("template not written as shipped")
	}

	// .acl: comments and order kept, parses, grants the role its folder.
	data := f.read(t, "memory/.acl")
	if !strings.HasPrefix(data, teamACL) {
		t.Fatalf(".acl was rewritten:\n%s", data)
	}
	pol, err := acl.Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role   string
		action acl.Action
		name   string
		want   bool
	}{
		{"analyst", acl.Read, "roles/analyst/config.md", true},
		{"analyst", acl.Write, "roles/analyst/notes/x.md", true},
		{"writer", acl.Read, "roles/analyst/config.md", false},
		{"analyst", acl.Read, "roles/writer/drafts.md", false},
		{"analyst", acl.Read, "roles/writer/style-guide.md", true},
	} {
		if d := pol.Check(acl.Principal{Role: tc.role}, tc.action, tc.name, nil); d.Allowed != tc.want {
			t.Errorf("%s %s %s = %v (%s)", tc.role, tc.action, tc.name, d.Allowed, d.Reason)
		}
	}

	// The starting context: global files, config, readable related
	// memories, decisions; never another role's private text.
	sc := res.Context
	if len(sc.Global) != 3 || sc.Global[0].Path != "memory/global/user-profile.md" || sc.Global[1].Path != "memory/global/project-status.md" {
		t.Fatalf("global %+v", sc.Global)
	}
	if len(sc.Related) == 0 || sc.Related[0].Path != "memory/roles/writer/style-guide.md" {
		t.Fatalf("related %+v", sc.Related)
	}
	for _, r := range sc.Related {
		if r.Path != "memory/roles/writer/style-guide.md" {
			t.Errorf("unreadable or own file in related: %+v", r)
		}
	}
	if len(sc.Decisions) != 1 || sc.Decisions[0].Path != "memory/global/decisions.md" || !strings.Contains(sc.Decisions[0].Text, "every Monday") {
		t.Fatalf("decisions %+v", sc.Decisions)
	}
	s := res.Summary
	for _, want := range []string{"Starting context for analyst", "memory/global/user-profile.md", "/srv/atrium-v2",
		"memory/roles/writer/style-guide.md", "lead with the numbers", "every Monday", "data analysis, reporting"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	for _, secret := range []string{"xylophonequark", "pelicanvault", "code-expert/perf.md", "writer/drafts.md"} {
		if strings.Contains(s, secret) || strings.Contains(strings.Join(itemsText(sc), " "), secret) {
			t.Errorf("summary leaks %q:\n%s", secret, s)
		}
	}
	if n := utf8.RuneCountInString(s); n > MaxSummaryChars {
		t.Errorf("summary is %d characters", n)
	}
	// The private files do match the query: the filter, not the ranking,
	// kept them out.
	all, err := f.m.Search(ctx, SearchOptions{Query: "Analyse database performance data and write reports data analysis reporting", MaxResults: 40, MinScore: RelatedMinScore})
	if err != nil || !hasPath(all.Results, "memory/roles/code-expert/perf.md") || !hasPath(all.Results, "memory/roles/writer/drafts.md") {
		t.Error("the private file does not match the query; the leak check proves nothing")
	}

	// A second create is refused; nothing changes.
	if _, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "analyst", Description: "again"}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if f.read(t, "memory/.acl") != data {
		t.Fatal("a refused create changed .acl")
	}
	roles, err := f.m.ListRoles(ctx)
	// analyst, code-expert, main (the app's own role, always listed), writer.
	if err != nil || len(roles) != 4 || roles[0].Role != "analyst" || roles[0].Description == "" || len(roles[0].Capabilities) != 2 || roles[0].Path != res.Path {
		t.Fatalf("roles %+v %v", roles, err)
	}
}

func itemsText(sc StartingContext) []string {
	var out []string
	for _, l := range [][]ContextItem{sc.Global, sc.Related, sc.Decisions, {sc.Config}} {
		for _, it := range l {
			out = append(out, it.Path, it.Title, it.Text)
		}
	}
	return out
}

// TestCreateRoleChineseNoACL: a Chinese description gives a Chinese
// summary; without memory/.acl the file is created from the defaults, with
// a rule for every existing role folder, and role folders stay private.
// A description with many capabilities makes a related-memories query
// longer than MaxQueryChars: it is cut, not refused, and the starting
// context still has the related memory.
func TestCreateRoleLongQuery(t *testing.T) {
	ctx := context.Background()
	f, _ := newSessionFixture(t, teamFiles(), nil)
	caps := make([]string, 120)
	for i := range caps {
		caps[i] = "database performance report writing"
	}
	desc := "Analyse database performance data and write reports"
	if n := utf8.RuneCountInString(desc + " " + strings.Join(caps, " ")); n <= MaxQueryChars {
		t.Fatalf("the query is only %d characters", n)
	}
	res, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "analyst", Description: desc, Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Context.Related) == 0 || res.Context.Related[0].Path != "memory/roles/writer/style-guide.md" {
		t.Fatalf("related %+v", res.Context.Related)
	}
	if strings.Contains(f.logs.String(), "related search failed") {
		t.Fatalf("the related search failed:\n%s", f.logs.String())
	}
}

func TestCreateRoleChineseNoACL(t *testing.T) {
	ctx := context.Background()
	files := teamFiles()
	delete(files, "memory/.acl")
	files["MEMORY.md"] = "# Memory\n\nOpenClaw main memory.\n"
	f, _ := newSessionFixture(t, files, nil)
	res, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "数据分析师", Description: "分析数据库性能数据，撰写性能报告"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.ACLCreated || res.ACL != "roles/数据分析师/**" {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(res.Summary, "初始上下文") || !strings.Contains(res.Summary, "公共记忆") || !strings.Contains(res.Summary, "近期决策") {
		t.Fatalf("summary not Chinese:\n%s", res.Summary)
	}
	for _, secret := range []string{"xylophonequark", "pelicanvault", "style-guide"} {
		if strings.Contains(res.Summary, secret) {
			t.Errorf("summary leaks %q (role folders are private by default):\n%s", secret, res.Summary)
		}
	}
	pol, err := acl.Parse([]byte(f.read(t, "memory/.acl")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who    acl.Principal
		action acl.Action
		name   string
		want   bool
	}{
		{acl.Principal{Role: "数据分析师"}, acl.Write, "roles/数据分析师/config.md", true},
		{acl.Principal{Role: "writer"}, acl.Read, "roles/writer/drafts.md", true},
		{acl.Principal{Role: "code-expert"}, acl.Write, "roles/code-expert/perf.md", true},
		{acl.Principal{Role: "writer"}, acl.Read, "roles/code-expert/perf.md", false},
		{acl.Principal{Role: "main"}, acl.Read, "roles/writer/drafts.md", false},
		{acl.Principal{Role: "main"}, acl.Read, "roles/later-by-hand/x.md", false},
		{acl.Principal{Admin: true}, acl.Read, "roles/later-by-hand/x.md", true},
		{acl.Principal{Role: "writer"}, acl.Read, "global/user-profile.md", true},
		{acl.Principal{Role: "writer"}, acl.Write, "global/user-profile.md", false},
		{acl.Principal{Role: "main"}, acl.Read, "MEMORY.md", true},
		{acl.Principal{Role: "writer"}, acl.Read, "MEMORY.md", false},
	} {
		if d := pol.Check(tc.who, tc.action, tc.name, nil); d.Allowed != tc.want {
			t.Errorf("%v %s %s = %v (%s)", tc.who, tc.action, tc.name, d.Allowed, d.Reason)
		}
	}
	if r, ok := pol.Match("sessions/x/session.md"); !ok || r.TTL.Seconds() != 86400 {
		t.Errorf("sessions rule %+v", r)
	}
	// main is the OpenClaw layout's role here.
	if _, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "main", Description: "x"}); !errors.Is(err, ErrExists) {
		t.Fatalf("main in an OpenClaw workspace: %v", err)
	}
	roles, _ := f.m.ListRoles(ctx)
	names := []string{}
	for _, r := range roles {
		names = append(names, r.Role)
	}
	if strings.Join(names, ",") != "code-expert,main,writer,数据分析师" {
		t.Fatalf("roles %v", names)
	}
}

func TestCreateRoleRefusals(t *testing.T) {
	ctx := context.Background()
	files := teamFiles()
	files["memory/.acl"] = "version: \"1.0\"\nrules:\n  roles/x/*: {read: [nobody here]}\n"
	f, _ := newSessionFixture(t, files, nil)
	for _, r := range []CreateRoleRequest{
		{Role: "", Description: "d"}, {Role: "admin", Description: "d"}, {Role: "a b", Description: "d"}, {Role: "../x", Description: "d"},
		{Role: ".hidden", Description: "d"}, {Role: "$x", Description: "d"}, {Role: "ok", Description: "  "},
		{Role: "ok", Description: "d", Capabilities: []string{"bad\x00cap"}}, {Role: "ok", Description: strings.Repeat("长", MaxDescriptionChars+1)},
		// a malformed .acl is not appended to
		{Role: "ok", Description: "d"},
	} {
		if _, err := f.m.CreateRole(ctx, r); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("CreateRole(%q, %.20q) = %v, want ErrInvalidInput", r.Role, r.Description, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.ws, "memory", "roles", "ok")); !os.IsNotExist(err) {
		t.Fatal("a refused role left a folder")
	}
}

// TestCreateRoleCustomTemplate: the workspace's template wins; unknown
// placeholders are reported; a .acl whose rules are in flow style is
// re-encoded with the rule added.
func TestCreateRoleCustomTemplate(t *testing.T) {
	ctx := context.Background()
	f, _ := newSessionFixture(t, map[string]string{
		RoleTemplatePath: "---\ntype: role-template\nrole: {{ROLE_NAME}}\ndescription: {{ROLE_DESCRIPTION}}\n---\n# {{ROLE_NAME}}\n\n{{ROLE_DESCRIPTION}}\n\nTeam: {{TEAM}}\n",
		"memory/.acl":    "version: \"1.0\"\nrules: {\"global/**\": {read: [\"*\"]}}\nversion_note: ignored\n",
	}, nil)
	// version_note is an unknown key: the file is malformed, refused.
	if _, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "qa", Description: "tests: \"quoted\" # not a comment"}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("malformed .acl: %v", err)
	}
	writeFile(t, f.ws, "memory/.acl", "version: \"1.0\"\nrules: {\"global/**\": {read: [\"*\"]}}\n")
	res, err := f.m.CreateRole(ctx, CreateRoleRequest{Role: "qa", Description: "tests: \"quoted\" # not a comment"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Unfilled, ",") != "TEAM" {
		t.Fatalf("unfilled %v", res.Unfilled)
	}
	fm, _, _, _, err := ParseFrontMatter(f.read(t, res.Path))
	if err != nil || fm.Type != "role" || fm.Description != "tests: \"quoted\" # not a comment" {
		t.Fatalf("front matter %+v %v", fm, err)
	}
	pol, err := acl.Parse([]byte(f.read(t, "memory/.acl")))
	if err != nil {
		t.Fatal(err)
	}
	if d := pol.Check(acl.Principal{Role: "qa"}, acl.Write, "roles/qa/config.md", nil); !d.Allowed {
		t.Fatal(d.Reason)
	}
	if d := pol.Check(acl.Principal{Role: "qa"}, acl.Read, "global/x.md", nil); !d.Allowed {
		t.Fatal("the re-encoded file lost the global rule")
	}
}

// TestAppendRule: the rule lands inside `rules:` whatever the file's shape,
// and the result parses with the new rule and every old one.
func TestAppendRule(t *testing.T) {
	_, line := roleRuleLine("qa")
	for _, tc := range []struct {
		name, in string
		textual  bool // appended as text, the old file its prefix
	}{
		{"block, last", "version: \"1.0\"\nrules:\n  global/**: {read: [\"*\"]}\n", true},
		{"block, no final newline, comment", "# top\nversion: \"1.0\"\nrules:\n    global/**: {read: [\"*\"]} # four spaces\n    # trailing comment", true},
		{"rules first", "rules:\n  global/**: {read: [\"*\"]}\n# keep me\nversion: \"1.0\"\n", false},
		{"flow", "version: \"1.0\"\nrules: {\"global/**\": {read: [\"*\"]}}\n", false},
		{"empty flow", "version: \"1.0\"\nrules: {}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := appendRule([]byte(tc.in), line)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.HasPrefix(string(out), tc.in); got != tc.textual {
				t.Errorf("textual append = %v:\n%s", got, out)
			}
			if tc.name == "rules first" && !strings.Contains(string(out), "# keep me") {
				t.Errorf("comment lost:\n%s", out)
			}
			pol, err := acl.Parse(out)
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if d := pol.Check(acl.Principal{Role: "qa"}, acl.Write, "roles/qa/x.md", nil); !d.Allowed {
				t.Errorf("new rule: %s\n%s", d.Reason, out)
			}
			if strings.Contains(tc.in, "global/**") {
				if d := pol.Check(acl.Principal{Role: "qa"}, acl.Read, "global/x.md", nil); !d.Allowed {
					t.Errorf("old rule lost:\n%s", out)
				}
			}
		})
	}
}

// TestOpenClawMainRole: in OpenClaw's layout a session of main promotes
// into memory/promoted-*.md, which is main's role memory.
func TestOpenClawMainRole(t *testing.T) {
	ctx := context.Background()
	f, _ := newSessionFixture(t, map[string]string{
		"MEMORY.md":            "# Memory\n\nlong-term notes\n",
		"memory/2026-11-28.md": "# log\n",
	}, nil)
	if _, err := f.m.CreateSession(ctx, CreateSessionRequest{ID: "m1", Owner: MainRole}); err != nil {
		t.Fatal(err)
	}
	f.write(t, WriteRequest{Path: "memory/sessions/m1/context.md", Content: "remember the walrusgate fix\n", Mode: WriteReplace, Writer: MainRole})
	res, err := f.m.Promote(ctx, PromoteRequest{Session: "m1", Path: "context.md", To: PromoteToRole})
	if err != nil || res.Path != "memory/promoted-2026-11-29.md" {
		t.Fatalf("promote = %+v %v", res, err)
	}
	rs := f.search(t, "walrusgate fix")
	ok := false
	for _, r := range rs {
		ok = ok || (r.Path == res.Path && r.Layer == LayerRole && r.Role == MainRole)
	}
	if !ok {
		t.Fatalf("promoted note not main's role memory: %+v", rs)
	}
	roles, err := f.m.ListRoles(ctx)
	if err != nil || len(roles) != 1 || roles[0].Role != MainRole || roles[0].Path != "MEMORY.md" {
		t.Fatalf("roles %+v %v", roles, err)
	}
	want := 0 // main's files: MEMORY.md and memory/*.md outside roles/, global/, sessions/
	_ = filepath.WalkDir(f.ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if r, rerr := filepath.Rel(f.ws, p); rerr == nil {
				if k := classify(filepath.ToSlash(r)); k.indexed && k.role == MainRole {
					want++
				}
			}
		}
		return nil
	})
	if want == 0 || roles[0].Files != want {
		t.Fatalf("main has %d files, want %d", roles[0].Files, want)
	}
}

// TestListRolesHasMainFromTheStart: a new Atrium workspace has no
// memory/roles/main/ until main writes a note there, yet main is the app's
// own role: ListRoles names it beside a created role (else mcp.token.create
// --as main, collab.request to main and the window's "Edit as" refused or
// left it out in a new workspace), once, with its folder when it has one.
func TestListRolesHasMainFromTheStart(t *testing.T) {
	f, _ := newSessionFixture(t, map[string]string{
		"memory/global/notes.md":        "# Notes\n",
		"memory/roles/writer/config.md": "---\ndescription: Writes\n---\n# Writer\n",
	}, nil)
	ctx := context.Background()
	names := func() string {
		roles, err := f.m.ListRoles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range roles {
			out = append(out, r.Role)
		}
		return strings.Join(out, ",")
	}
	if got := names(); got != "main,writer" {
		t.Fatalf("roles of a new workspace = %s, want main,writer", got)
	}
	f.write(t, WriteRequest{Path: "memory/roles/main/todo.md", Content: "# Todo\n", Mode: "replace", Writer: AdminWriter})
	if got := names(); got != "main,writer" {
		t.Fatalf("roles once main has a folder = %s, want main,writer", got)
	}
}
