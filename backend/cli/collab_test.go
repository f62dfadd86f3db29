package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCollabCommands: `atrium collab` against a real `atrium serve`
// (issue 24 item 4). code-expert asks writer twice: on experience.md the
// ACL lets writer collaborate, so writer accepts and completes with the
// token; on plan.md it does not, so writer's accept is refused and the
// person accepts (no --as), then completes; a third the person declines.
// list shows who asked whom, the state and the expiry; show the history
// and the shared view; --json is the gateway's answer.
func TestCollabCommands(t *testing.T) {
	home, ws := workspace(t)
	for rel, body := range map[string]string{
		"memory/.acl": `version: "1.0"
rules:
  global/**:                       {read: ["*"], write: [admin, main]}
  roles/code-expert/**:            {read: [code-expert, admin], write: [code-expert, admin], collaborate: [code-expert, admin]}
  roles/code-expert/experience.md: {read: [code-expert, writer, admin], write: [code-expert], collaborate: [code-expert, writer]}
  roles/code-expert/plan.md:       {read: [code-expert, writer, admin], write: [code-expert], collaborate: [code-expert]}
  roles/writer/**:                 {read: [writer, admin], write: [writer, admin]}
`,
		"memory/roles/code-expert/config.md":     "---\ndescription: code expert\n---\n# code-expert\n",
		"memory/roles/code-expert/experience.md": "# Experience\n\nLoop unrolling made it faster.\n",
		"memory/roles/code-expert/plan.md":       "# Plan\n\nShip on Friday.\n",
		"memory/roles/writer/config.md":          "---\ndescription: writer\n---\n# writer\n",
	} {
		p := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port := serveApp(t, home, ws)
	common := []string{"--home", home, "--port", port}
	cli := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, nil, append(args, common...)...)
		if code != want {
			t.Fatalf("atrium %s: exit %d, want %d\n%s\n%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	idTok := regexp.MustCompile(`Collaboration (c-[0-9a-f]{32}): .*\nToken \(shown once[^:]*: (\S+)`)
	request := func(file, task string) (string, string, string) {
		t.Helper()
		out := cli(0, "collab", "request", "--as", "code-expert", "--to", "writer", "--task", task, "--context", file, "--ttl", "600")
		m := idTok.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("collab request printed:\n%s", out)
		}
		return m[1], m[2], out
	}

	exp, expTok, out := request("memory/roles/code-expert/experience.md", "Turn the experience into a blog post")
	if !strings.Contains(out, "pending: writer accepts") {
		t.Errorf("request on experience.md:\n%s", out)
	}
	plan, planTok, out := request("memory/roles/code-expert/plan.md", "Announce the plan")
	if !strings.Contains(out, "pending: the person accepts or declines") {
		t.Errorf("request on plan.md:\n%s", out)
	}
	third, _, _ := request("memory/roles/code-expert/plan.md", "Leak the plan")

	out = cli(0, "collab", "list")
	for _, want := range []string{exp, plan, third, "code-expert", "writer", "Turn the experience into a blog post", "EXPIRES IN"} {
		if !strings.Contains(out, want) {
			t.Errorf("collab list lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^` + exp + `\s.*\s\d+m\d+s\s`).MatchString(out) {
		t.Errorf("collab list shows no time left for %s:\n%s", exp, out)
	}
	// The role accepts and completes where the ACL lets it.
	cli(0, "collab", "accept", exp, "--as", "writer", "--token", expTok)
	out = cli(0, "collab", "complete", exp, "--as", "writer", "--token", expTok, "--output", "Blog post drafted", "--importance", "0.3")
	if !strings.Contains(out, "Status: completed") || !strings.Contains(out, "Result (by writer, importance 0.30): Blog post drafted") {
		t.Errorf("complete by writer:\n%s", out)
	}
	// plan.md: writer's accept is refused; the person accepts.
	out = cli(1, "collab", "accept", plan, "--as", "writer", "--token", planTok)
	if !strings.Contains(out, "the person accepts or declines") {
		t.Errorf("writer's accept of plan.md:\n%s", out)
	}
	out = cli(0, "collab", "show", plan)
	if !strings.Contains(out, "pending: the person accepts or declines") || !strings.Contains(out, "--- memory/roles/code-expert/plan.md\n# Plan") ||
		!strings.Contains(out, "code-expert request: writer") {
		t.Errorf("collab show:\n%s", out)
	}
	cli(0, "collab", "accept", plan)
	out = cli(0, "collab", "complete", plan, "--output", "closed by hand")
	if !strings.Contains(out, "Result (by admin, importance 0.00): closed by hand") {
		t.Errorf("the person's complete:\n%s", out)
	}
	out = cli(0, "collab", "decline", third, "--reason", "not this one")
	if !strings.Contains(out, "Status: declined") || !strings.Contains(out, "admin decline: not this one") {
		t.Errorf("the person's decline:\n%s", out)
	}
	if out := cli(1, "collab", "accept", third); !strings.Contains(out, "already declined") {
		t.Errorf("accept after decline:\n%s", out)
	}
	cli(2, "collab", "accept", third, "--as", "writer") // --as without --token
	cli(2, "collab", "request", "--as", "code-expert", "--to", "writer")

	var list struct {
		Collaborations []struct {
			ID      string `json:"collabId"`
			Status  string
			History []struct{ Action string }
		}
	}
	if err := json.Unmarshal([]byte(cli(0, "collab", "list", "--json", "--status", "declined")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Collaborations) != 1 || list.Collaborations[0].ID != third || len(list.Collaborations[0].History) != 2 {
		t.Errorf("collab list --json --status declined: %+v", list)
	}
	if out := cli(0, "collab", "list", "--as", "writer", "--status", "completed"); !strings.Contains(out, exp) || !strings.Contains(out, plan) {
		t.Errorf("writer's completed list:\n%s", out)
	}
}
