package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinySet writes a three-document BEIR set (English and Chinese).
func tinySet(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"corpus.jsonl": `{"_id": "a", "title": "Staging", "text": "The staging server is called bluefin."}
{"_id": "b", "title": "数据库", "text": "把数据库连接池从 16 调到 32。"}
{"_id": "c", "title": "Garden", "text": "Water the tomatoes twice a week."}
`,
		"queries.jsonl": `{"_id": "q1", "text": "what is the staging server called"}
{"_id": "q2", "text": "数据库连接池"}
`,
		"qrels.tsv": "query-id\tcorpus-id\tscore\nq1\ta\t1\nq2\tb\t1\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBenchRetrievalCommand(t *testing.T) {
	set := tinySet(t)
	var env map[string]string

	code, out, errOut := runCLI(t, env, "bench", "retrieval", "--set", set)
	if code != 0 {
		t.Fatalf("table: exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"2 queries", "keyword", "vector", "hybrid", "R@10", "Index:", "RSS peak:"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	jsonOut := filepath.Join(t.TempDir(), "r.json")
	code, out, errOut = runCLI(t, env, "bench", "retrieval", "--set", set, "--json", "--modes", "keyword,hybrid", "--limit", "1", "--out", jsonOut)
	if code != 0 {
		t.Fatalf("json: exit %d, stderr %s", code, errOut)
	}
	var rep struct {
		Set     string                        `json:"set"`
		Queries int                           `json:"queries"`
		Modes   map[string]map[string]float64 `json:"modes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if rep.Queries != 1 || len(rep.Modes) != 2 || rep.Modes["hybrid"]["recall@10"] != 1 {
		t.Errorf("report %+v", rep)
	}
	saved, err := os.ReadFile(jsonOut)
	if err != nil || string(saved) != out {
		t.Errorf("--out file differs from stdout (err %v)", err)
	}

	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no set", []string{"bench", "retrieval"}, 2, "needs --set DIR"},
		{"unknown mode", []string{"bench", "retrieval", "--set", set, "--modes", "semantic"}, 2, `unknown mode "semantic"`},
		{"--out in a missing folder", []string{"bench", "retrieval", "--set", set, "--out", "/nonexistent-atrium/x.json"}, 2, "does not exist"},
		{"bad categories", []string{"bench", "retrieval", "--set", set, "--categories", "one"}, 2, "--categories"},
		{"no corpus", []string{"bench", "retrieval", "--set", t.TempDir()}, 1, "no corpus*.jsonl in"},
		{"stray argument", []string{"bench", "retrieval", "--set", set, "extra"}, 2, "takes no arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, env, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d stderr %q, want %d and %q", code, errOut, tc.code, tc.stderr)
			}
		})
	}
}

func TestMemorySearchMode(t *testing.T) {
	home, ws := workspace(t)
	common := []string{"--home", home, "--workspace", ws}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"keyword", []string{"memory", "search", "--mode", "keyword", "bluefin"}, 0, "1. MEMORY.md:", ""},
		{"vector", []string{"memory", "search", "--mode", "vector", "--min-score", "-1", "数据库连接池"}, 0, "1. memory/2026-11-20.md:", ""},
		{"keyword finds no sub-word", []string{"memory", "search", "--mode", "keyword", "bluefinch"}, 0, "No results.", ""},
		{"unknown mode", []string{"memory", "search", "--mode", "semantic", "bluefin"}, 1, "", `unknown mode "semantic"`},
		{"help lists it", []string{"memory", "search", "--help"}, 0, "-mode", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, append(tc.args, common...)...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
			}
		})
	}
}
