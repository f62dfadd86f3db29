package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory"
)

// TestSearchTextRoundsScores: text output shows scores rounded for people
// (0.8594198700000001 → 0.859), JSON keeps them exact.
func TestSearchTextRoundsScores(t *testing.T) {
	res := memory.SearchResponse{Results: []memory.SearchResult{
		{Path: "memory/global/plan.md", StartLine: 1, EndLine: 4, Score: 0.8594198700000001, Snippet: "ship it", Layer: "global"},
		{Path: "memory/roles/main/a.md", StartLine: 2, EndLine: 2, Score: 0.1 + 0.2, Snippet: "x", Layer: "role", Role: "main"},
	}}
	var b bytes.Buffer
	printResults(&b, res)
	out := b.String()
	for _, want := range []string{"1. memory/global/plan.md:1-4  score 0.859  [global]", "2. memory/roles/main/a.md:2-2  score 0.300  [role"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0.8594") || strings.Contains(out, "0.30000000000000004") {
		t.Errorf("unrounded score in text output:\n%s", out)
	}
	var j bytes.Buffer
	if err := printJSON(&j, res); err != nil {
		t.Fatal(err)
	}
	var back memory.SearchResponse
	if err := json.Unmarshal(j.Bytes(), &back); err != nil || back.Results[0].Score != 0.8594198700000001 {
		t.Fatalf("JSON score %v (%v), want full precision", back.Results, err)
	}
	b.Reset()
	printResults(&b, memory.SearchResponse{})
	if b.String() != "No results.\n" {
		t.Fatalf("empty: %q", b.String())
	}
}

// TestSearchTextSaysRewrite: a search the chat model's rewrite helped
// says what it searched and how long the model took, in text and JSON.
func TestSearchTextSaysRewrite(t *testing.T) {
	res := memory.SearchResponse{Results: []memory.SearchResult{{Path: "memory/a.md", StartLine: 1, EndLine: 2, Score: 0.4, Snippet: "logrotate"}},
		Confidence: memory.Confidence{Level: memory.ConfidenceMedium, Score: 0.6}, RewrittenQuery: "logrotate disk full", RewriteMs: 734}
	var b bytes.Buffer
	printResults(&b, res)
	if !strings.Contains(b.String(), "Also searched in the chat model's words (734 ms): logrotate disk full\n") {
		t.Errorf("text output:\n%s", b.String())
	}
	var j bytes.Buffer
	if err := printJSON(&j, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.String(), `"rewrittenQuery": "logrotate disk full"`) || !strings.Contains(j.String(), `"rewriteMs": 734`) {
		t.Errorf("JSON:\n%s", j.String())
	}
}

// TestModelLineHasNoNestedParentheses: serve's banner names the model and,
// on a line of its own, why it was chosen — a reason with parentheses of
// its own is never wrapped in more.
func TestModelLineHasNoNestedParentheses(t *testing.T) {
	got := modelLines("openai/qwen2.5", "OPENAI_API_KEY/OPENAI_BASE_URL are set (http://127.0.0.1:8080/v1, model qwen2.5)")
	want := "  Model:     openai/qwen2.5\n  Chosen:    OPENAI_API_KEY/OPENAI_BASE_URL are set (http://127.0.0.1:8080/v1, model qwen2.5)\n"
	if got != want {
		t.Fatalf("model lines:\n%q\nwant\n%q", got, want)
	}
	for _, line := range strings.Split(got, "\n") {
		depth := 0
		for _, r := range line {
			switch r {
			case '(':
				if depth++; depth > 1 {
					t.Fatalf("nested parentheses in %q", line)
				}
			case ')':
				depth--
			}
		}
	}
	if got := modelLines("offline", ""); got != "  Model:     offline\n" {
		t.Fatalf("without a reason: %q", got)
	}
}
