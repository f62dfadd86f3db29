package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/collab"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/route"
)

// seedRules are SPEC §5.1's example rules for the seed's roles
// code-expert, writer and analyst (S000 §3.2), with global/** readable by
// every role and the writer's and analyst's own folders.
const seedRules = `version: "1.0"
rules:
  global/**:                       {read: ["*"], write: [admin, main]}
  global/user-profile.md:          {read: ["*"], write: [admin, main], collaborate: []}
  roles/code-expert/*:             {read: [code-expert, admin, main], write: [code-expert, admin]}
  roles/code-expert/experience.md: {read: [code-expert, writer, admin], write: [code-expert], collaborate: [code-expert, writer]}
  roles/writer/**:                 {read: [writer, admin], write: [writer, admin]}
  roles/analyst/**:                {read: [analyst, admin], write: [analyst, admin]}
  sessions/*/*:                    {read: [$session_owner, admin], write: [$session_owner], ttl: 86400}
`

// seedWorkspace writes the rules, the three roles' config.md (front
// matter with description and capabilities, SPEC §5.4) and starting files,
// reloads the ACL and indexes.
func seedWorkspace(t *testing.T, a *App, ws string, extra map[string]string) {
	t.Helper()
	files := map[string]string{
		"memory/.acl": seedRules,
		"memory/roles/code-expert/config.md": "---\ntype: role\nrole: code-expert\ndescription: \"代码专家：审查程序，修复缺陷，调优数据库和服务器。Code expert: reviews programs, fixes bugs, tunes servers.\"\n" +
			"capabilities: [code, debug, performance, optimize, 代码, 调试, 性能, 优化]\n---\n# code-expert\n",
		"memory/roles/writer/config.md": "---\ntype: role\nrole: writer\ndescription: \"写手：撰写博客、教程和发布说明。Writer: drafts blog posts, tutorials and release notes.\"\n" +
			"capabilities: [write, edit, publish, article, 写作, 文章, 发布, 编辑]\n---\n# writer\n",
		"memory/roles/analyst/config.md": "---\ntype: role\nrole: analyst\ndescription: \"分析师：研究指标，制作仪表盘，预测趋势。Analyst: studies metrics, builds dashboards, forecasts trends.\"\n" +
			"capabilities: [analyze, data, report, statistics, 分析, 数据, 报告, 统计]\n---\n# analyst\n",
		"memory/roles/code-expert/experience.md": "# 经验 / Experience\n\n",
		"memory/global/project-status.md":        "# 项目状态 / Project status\n\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	for rel, text := range files {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(ws, rel)), 0o755))
		must(t, os.WriteFile(filepath.Join(ws, rel), []byte(text), 0o644))
	}
	must(t, a.ACL.Reload())
	if st := a.ACL.Status(); st.Source != "file" || st.Err != nil {
		t.Fatalf("acl status %+v", st)
	}
}

func gwDial(ctx context.Context, t *testing.T, a *App, role, id string) *gateway.Client {
	t.Helper()
	cl, err := gateway.Dial(ctx, gateway.ClientOptions{URL: a.WSURL(), Token: a.Token, Role: role,
		Client: gateway.ClientInfo{ID: id, Version: "test", Platform: "linux", Mode: "test", InstanceID: id}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func errCode(err error) string {
	var ge *gateway.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "ok"
}

// TestCollabOverGateway drives collab.* and chat.route over a real
// WebSocket against the real app: the happy path, and every refusal with
// its code, each the newest audit entry, as denied.
func TestCollabOverGateway(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, map[string]string{
		"memory/roles/code-expert/perf.md": "# Perf\n\nPrivate: codeword zebrafinch.\n",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	op := gwDial(ctx, t, a, gateway.RoleOperator, "collab-op")
	node := gwDial(ctx, t, a, gateway.RoleNode, "collab-phone")
	must(t, op.Call(ctx, "memory.sync", nil, nil))

	const exp = "memory/roles/code-expert/experience.md"
	var req collab.Requested
	must(t, op.Call(ctx, "collab.request", map[string]any{"as": "code-expert", "to": "writer", "task": "写成博客文章", "context": []string{exp}, "ttl": 600}, &req))
	if req.ID == "" || req.Token == "" || req.Collaboration.Status != collab.StatusPending || len(req.Shared.Context) != 1 {
		t.Fatalf("collab.request: %+v", req)
	}
	var short collab.Requested
	must(t, op.Call(ctx, "collab.request", map[string]any{"as": "code-expert", "to": "writer", "task": "short", "context": []string{exp}, "ttl": 1}, &short))

	ce := func(m map[string]any) map[string]any { m["as"] = "code-expert"; return m }
	wr := func(m map[string]any) map[string]any { m["as"] = "writer"; return m }
	auth := func(m map[string]any, id, tok string) map[string]any { m["collabId"] = id; m["token"] = tok; return m }
	result := map[string]any{"output": "文章", "importance": 0.9}
	type attempt struct {
		name    string
		conn    *gateway.Client
		method  string
		params  map[string]any
		want    string
		op      string // the audit operation ("" when refused before the service, not audited)
		auditAs string
	}
	attempts := []attempt{
		{"request without collaborate", op, "collab.request", ce(map[string]any{"to": "writer", "task": "t", "context": []string{"memory/roles/code-expert/perf.md"}}), "FORBIDDEN", collab.OpRequest, "code-expert"},
		{"request by a role without rights", op, "collab.request", map[string]any{"as": "analyst", "to": "writer", "task": "t", "context": []string{exp}}, "FORBIDDEN", collab.OpRequest, "analyst"},
		{"request for another role", op, "collab.request", map[string]any{"as": "analyst", "from": "code-expert", "to": "writer", "task": "t", "context": []string{exp}}, "FORBIDDEN", collab.OpRequest, "analyst"},
		{"request as admin", op, "collab.request", map[string]any{"from": "code-expert", "to": "writer", "task": "t", "context": []string{exp}}, "FORBIDDEN", collab.OpRequest, "admin"},
		{"request from a device", node, "collab.request", map[string]any{"from": "code-expert", "to": "writer", "task": "t", "context": []string{exp}}, "FORBIDDEN", collab.OpRequest, "authenticated"},
		{"request without context", op, "collab.request", ce(map[string]any{"to": "writer", "task": "t"}), "INVALID_REQUEST", collab.OpRequest, "code-expert"},
		{"request to an unknown role", op, "collab.request", ce(map[string]any{"to": "ghost", "task": "t", "context": []string{exp}}), "NOT_FOUND", collab.OpRequest, "code-expert"},
		{"accept by the requester", op, "collab.accept", auth(ce(map[string]any{}), req.ID, req.Token), "FORBIDDEN", collab.OpAccept, "code-expert"},
		{"accept by a third role", op, "collab.accept", auth(map[string]any{"as": "analyst"}, req.ID, req.Token), "FORBIDDEN", collab.OpAccept, "analyst"},
		{"accept with a wrong token", op, "collab.accept", auth(wr(map[string]any{}), req.ID, short.Token), "FORBIDDEN", collab.OpAccept, "writer"},
		{"accept a forged collabId", op, "collab.accept", auth(wr(map[string]any{}), "c-"+strings.Repeat("0", 32), req.Token), "NOT_FOUND", collab.OpAccept, "writer"},
		{"accept without collabId", op, "collab.accept", wr(map[string]any{"token": req.Token}), "INVALID_REQUEST", "", ""},
		{"complete before accept", op, "collab.complete", auth(wr(map[string]any{"result": result}), req.ID, req.Token), "CONFLICT", collab.OpComplete, "writer"},
		{"write before accept", op, "collab.write", auth(wr(map[string]any{"path": exp, "content": "x", "mode": "append"}), req.ID, req.Token), "CONFLICT", collab.OpWrite, "writer"},
		{"complete without result", op, "collab.complete", auth(wr(map[string]any{}), req.ID, req.Token), "INVALID_REQUEST", "", ""},
		{"list from a device", node, "collab.list", map[string]any{}, "FORBIDDEN", collab.OpList, "authenticated"},
	}
	run := func(tc attempt) {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.conn.Call(ctx, tc.method, tc.params, nil)
			if got := errCode(err); got != tc.want {
				t.Fatalf("%s: %s (%v), want %s", tc.method, got, err, tc.want)
			}
			if tc.op == "" {
				return
			}
			e, terr := a.Audit.Tail(1, audit.Filter{})
			if terr != nil || len(e) != 1 || e[0].Result != audit.Denied || e[0].Operation != tc.op || e[0].Role != tc.auditAs {
				t.Errorf("audit %+v %v, want denied %s by %s", e, terr, tc.op, tc.auditAs)
			}
		})
	}
	for _, tc := range attempts {
		run(tc)
	}

	var acc collab.Accepted
	must(t, op.Call(ctx, "collab.accept", auth(wr(map[string]any{}), req.ID, req.Token), &acc))
	if acc.Collaboration.Status != collab.StatusAccepted {
		t.Fatalf("accept: %+v", acc)
	}
	var w memory.WriteResult
	must(t, op.Call(ctx, "collab.write", auth(wr(map[string]any{"path": exp, "content": "- 写手：文章已起草", "mode": "append"}), req.ID, req.Token), &w))
	var v collab.View
	must(t, op.Call(ctx, "collab.view", auth(wr(map[string]any{"query": "zebrafinch 文章"}), req.ID, req.Token), &v))
	// A query longer than memory.MaxQueryChars is INVALID_REQUEST.
	long := strings.Repeat("文章", memory.MaxQueryChars/2) + "!"
	if err := op.Call(ctx, "collab.view", auth(wr(map[string]any{"query": long}), req.ID, req.Token), nil); errCode(err) != gateway.CodeInvalidRequest ||
		!strings.Contains(err.Error(), "the limit is") {
		t.Errorf("collab.view with a %d-character query: %v, want INVALID_REQUEST", memory.MaxQueryChars+1, err)
	}
	for _, f := range v.Files {
		if f.Path == "memory/roles/code-expert/perf.md" {
			t.Errorf("shared view lists code-expert's private file")
		}
	}
	for _, r := range v.Results {
		if strings.Contains(r.Snippet, "zebrafinch") {
			t.Errorf("shared view search shows a private snippet: %+v", r)
		}
	}
	var done collab.Completed
	must(t, op.Call(ctx, "collab.complete", auth(wr(map[string]any{"result": map[string]any{"output": "文章：循环展开优化", "importance": 0.71, "artifacts": []string{"blog-post.md"}}}), req.ID, req.Token), &done))
	if !done.Summary || done.Collaboration.SummaryPath != collab.DefaultSummaryPath {
		t.Fatalf("complete: %+v", done)
	}
	time.Sleep(1100 * time.Millisecond) // short's 1 s ttl passes
	for _, tc := range []attempt{
		{"token reused after completion", op, "collab.complete", auth(wr(map[string]any{"result": result}), req.ID, req.Token), "CONFLICT", collab.OpComplete, "writer"},
		{"write after completion", op, "collab.write", auth(wr(map[string]any{"path": exp, "content": "x", "mode": "append"}), req.ID, req.Token), "CONFLICT", collab.OpWrite, "writer"},
		{"expired token", op, "collab.accept", auth(wr(map[string]any{}), short.ID, short.Token), "FORBIDDEN", collab.OpAccept, "writer"},
	} {
		run(tc)
	}
	var list struct {
		Collaborations []collab.Collaboration `json:"collaborations"`
	}
	must(t, op.Call(ctx, "collab.list", wr(map[string]any{}), &list))
	if len(list.Collaborations) != 2 || list.Collaborations[1].ID != req.ID || list.Collaborations[1].Status != collab.StatusCompleted ||
		list.Collaborations[0].Status != collab.StatusExpired || len(list.Collaborations[1].History) != 5 {
		t.Errorf("collab.list: %+v", list.Collaborations)
	}
	raw, _ := json.Marshal(list)
	if strings.Contains(string(raw), req.Token) {
		t.Error("collab.list shows a token")
	}

	// chat.route over the gateway, with the roles' config front matter.
	for _, tc := range []struct {
		text, current, role string
		reason              route.Reason
	}{
		{"@writer 帮我看看", "", "writer", route.ReasonMention},
		{"我需要优化这段Python代码的性能", "", "code-expert", route.ReasonCapability},
		{"please draft a blog post for the release", "", "writer", route.ReasonSimilarity},
		{"今天天气怎么样", "analyst", "analyst", route.ReasonStay},
		{"分析 代码", "", "main", route.ReasonAsk},
	} {
		var d route.Decision
		must(t, op.Call(ctx, "chat.route", map[string]any{"text": tc.text, "current": tc.current}, &d))
		if d.Role != tc.role || d.Reason != tc.reason {
			t.Errorf("chat.route %q: %+v, want %s (%s)", tc.text, d, tc.role, tc.reason)
		}
	}
	for _, cur := range []string{"../x", "nosuch"} {
		if err := op.Call(ctx, "chat.route", map[string]any{"text": "hello", "current": cur}, nil); errCode(err) != gateway.CodeInvalidRequest {
			t.Errorf("chat.route with current %q: %v, want INVALID_REQUEST", cur, err)
		}
	}
	if err := op.Call(ctx, "chat.route", map[string]any{"text": " "}, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Errorf("chat.route empty: %v", err)
	}
}

// TestSeedWalkthrough is the seed's scenario (S000 §6, cases 1 and 3) over
// the real gateway with SPEC §5.1's example rules: a project-path change
// in global memory is seen by all three roles; a performance tip stays
// private to code-expert; a code-expert → writer collaboration produces an
// article (the writer writes it) and updates global/project-status.md.
func TestSeedWalkthrough(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	op := gwDial(ctx, t, a, gateway.RoleOperator, "walk-op")
	must(t, op.Call(ctx, "memory.sync", nil, nil))
	roles := []string{"code-expert", "writer", "analyst"}
	const status = "memory/global/project-status.md"
	search := func(role, q string) memory.SearchResponse {
		t.Helper()
		var res memory.SearchResponse
		must(t, op.Call(ctx, "memory.search", map[string]any{"as": role, "query": q, "maxResults": 10}, &res))
		return res
	}
	get := func(role, path string) (string, error) {
		var res memory.GetResponse
		err := op.Call(ctx, "memory.get", map[string]any{"as": role, "path": path}, &res)
		return res.Text, err
	}

	// 1. The project moved: main (the main agent) records it in global memory.
	must(t, op.Call(ctx, "memory.write", map[string]any{"as": "main", "path": status, "mode": "append",
		"content": "- 项目路径变更：项目现在位于 /home/lighthouse/twg/PyServer/ (project path changed)"}, nil))
	for _, r := range roles {
		res := search(r, "项目路径 PyServer")
		if len(res.Results) == 0 || res.Results[0].Path != status {
			t.Errorf("%s: search for the project path: %+v", r, res.Results)
		}
		if text, err := get(r, status); err != nil || !strings.Contains(text, "/home/lighthouse/twg/PyServer/") {
			t.Errorf("%s: get %s: %q %v", r, status, text, err)
		}
	}

	// 2. code-expert keeps a performance tip to itself (S000 case 3).
	const tips = "memory/roles/code-expert/debugging-tips.md"
	const tip = "循环展开优化：把内层循环展开四次，计算器提速百分之三十，暗号 QK-4471。"
	must(t, op.Call(ctx, "memory.write", map[string]any{"as": "code-expert", "path": tips, "mode": "replace", "content": "# 调试技巧\n\n" + tip + "\n"}, nil))
	if res := search("code-expert", "循环展开 QK-4471"); len(res.Results) == 0 || res.Results[0].Path != tips {
		t.Errorf("code-expert cannot find its own tip: %+v", res.Results)
	}
	for _, r := range []string{"writer", "analyst"} {
		for _, q := range []string{"循环展开 QK-4471", "QK-4471", "计算器提速"} {
			raw, _ := json.Marshal(search(r, q))
			if strings.Contains(string(raw), "debugging-tips") || strings.Contains(string(raw), "QK-4471") {
				t.Errorf("%s's search %q shows the private tip: %s", r, q, raw)
			}
		}
		if _, err := get(r, tips); errCode(err) != gateway.CodeForbidden {
			t.Errorf("%s: get the private tip: %v, want FORBIDDEN", r, err)
		}
	}

	// 3. code-expert records the shareable experience and asks the writer
	// for an article (S000 case 1 step 3).
	const exp = "memory/roles/code-expert/experience.md"
	must(t, op.Call(ctx, "memory.write", map[string]any{"as": "code-expert", "path": exp, "mode": "append",
		"content": "- 科学计算器性能优化：热点在表达式求值的内层循环，展开后提速约 30%。"}, nil))
	var req collab.Requested
	must(t, op.Call(ctx, "collab.request", map[string]any{"as": "code-expert", "to": "writer",
		"task": "将这次优化写成博客文章", "context": []string{exp}, "ttl": 3600}, &req))
	raw, _ := json.Marshal(req.Shared)
	if strings.Contains(string(raw), "QK-4471") || strings.Contains(string(raw), "debugging-tips") {
		t.Errorf("the shared view holds the private tip: %s", raw)
	}
	var acc collab.Accepted
	must(t, op.Call(ctx, "collab.accept", map[string]any{"as": "writer", "collabId": req.ID, "token": req.Token}, &acc))
	if len(acc.Shared.Context) != 1 || !strings.Contains(acc.Shared.Context[0].Text, "展开后提速约 30%") {
		t.Fatalf("the writer's shared context: %+v", acc.Shared.Context)
	}
	// The writer writes the article in its own folder ...
	const article = "memory/roles/writer/articles/calculator-performance.md"
	must(t, op.Call(ctx, "memory.write", map[string]any{"as": "writer", "path": article, "mode": "replace",
		"content": "# 科学计算器为何快了三成\n\n我们找到了表达式求值的热点，并展开了内层循环。\n"}, nil))
	// ... notes it in the shared experience file through the collaboration
	// (the writer has no write right there of its own) ...
	if err := op.Call(ctx, "memory.write", map[string]any{"as": "writer", "path": exp, "mode": "append", "content": "- x"}, nil); errCode(err) != gateway.CodeForbidden {
		t.Errorf("writer's own write of experience.md: %v, want FORBIDDEN", err)
	}
	must(t, op.Call(ctx, "collab.write", map[string]any{"as": "writer", "collabId": req.ID, "token": req.Token, "path": exp, "mode": "append",
		"content": "- 写手：已写成文章 " + article}, nil))
	// ... and completes it: important, so global/project-status.md learns it.
	var done collab.Completed
	must(t, op.Call(ctx, "collab.complete", map[string]any{"as": "writer", "collabId": req.ID, "token": req.Token,
		"result": map[string]any{"output": "文章《科学计算器为何快了三成》已发布", "importance": 0.8, "artifacts": []string{article}}}, &done))
	if !done.Summary {
		t.Fatalf("no summary: %+v", done)
	}
	for _, r := range roles {
		text, err := get(r, status)
		if err != nil || !strings.Contains(text, "code-expert → writer") || !strings.Contains(text, "科学计算器为何快了三成") || !strings.Contains(text, "/home/lighthouse/twg/PyServer/") {
			t.Errorf("%s: project-status.md after the collaboration: %q %v", r, text, err)
		}
		if res := search(r, "科学计算器 文章 发布"); len(res.Results) == 0 || res.Results[0].Path != status {
			t.Errorf("%s: search for the collaboration's summary: %+v", r, res.Results)
		}
	}
	// The article itself stays the writer's; the tip stays code-expert's.
	if text, err := get("writer", article); err != nil || !strings.Contains(text, "内层循环") {
		t.Errorf("writer reads its article: %q %v", text, err)
	}
	if _, err := get("analyst", article); errCode(err) != gateway.CodeForbidden {
		t.Errorf("analyst reads the writer's article: %v", err)
	}
	if _, err := get("writer", tips); errCode(err) != gateway.CodeForbidden {
		t.Errorf("writer reads the tip after the collaboration: %v", err)
	}
	var list struct {
		Collaborations []collab.Collaboration `json:"collaborations"`
	}
	must(t, op.Call(ctx, "collab.list", map[string]any{"as": "code-expert"}, &list))
	if len(list.Collaborations) != 1 || list.Collaborations[0].Status != collab.StatusCompleted || list.Collaborations[0].SummaryPath != status {
		t.Errorf("code-expert's collaborations: %+v", list.Collaborations)
	}
	// Every step was audited.
	for _, opName := range []string{collab.OpRequest, collab.OpAccept, collab.OpWrite, collab.OpComplete, collab.OpSummary} {
		if es, err := a.Audit.Tail(10, audit.Filter{Operation: opName, Result: audit.Allowed}); err != nil || len(es) == 0 {
			t.Errorf("no allowed %s audit entry: %v", opName, err)
		}
	}
}
