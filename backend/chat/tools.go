package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
)

// ToolMemorySearch is the name of the memory search tool offered to models.
const ToolMemorySearch = "memory_search"

// ToolScope names whose tools Options.Tools builds: the profile a run
// belongs to and its session (audit entries name the session).
type ToolScope struct {
	ProfileID string
	// Role is the role the tools act as (the ACL's principal): "main", or
	// for a run on an instance its profile (the template's role).
	Role      string
	SessionID string
	// Permissions are the session's (the person's grants); a tool that asks
	// the person itself (exec approval "ask") asks through them.
	Permissions *agent.Permissions
}

// defaultToolOutputBytes caps the JSON output of the built-in
// memory_search, leaving room for the envelope the model sees around it
// (agent.ForModel), so the model's view stays under MaxToolResultChars.
const defaultToolOutputBytes = MaxToolResultChars - 512

// defaultMemorySearchSchema is the built-in memory_search's (SPEC §4.3),
// with %[1]d for memory.MaxQueryChars. maxResults and minScore are clamped
// by the handler rather than refused.
const defaultMemorySearchSchema = `{"type":"object","properties":{` +
	`"query":{"type":"string","maxLength":%[1]d,"description":"what to look for: keywords, names, identifiers or a question (at most %[1]d characters)"},` +
	`"maxResults":{"type":"integer","description":"how many passages to return (1-20, default 6)"},` +
	`"minScore":{"type":"number","description":"lowest relevance score to return (0-1; default: a floor calibrated for the query's length, 0.13-0.28)"}` +
	`},"required":["query"]}`

// defaultTools is the registry used when Options.Tools is nil: only
// memory_search (L0) over Options.Memory. The app injects the full agent
// toolset instead (package agent/tools, through Options.Tools).
func defaultTools(mem Searcher) (*agent.Registry, error) {
	r := agent.NewRegistry()
	err := r.Register(agent.Spec{
		Name: ToolMemorySearch, Level: agent.L0, Timeout: ToolTimeout, Schema: json.RawMessage(fmt.Sprintf(defaultMemorySearchSchema, memory.MaxQueryChars)),
		Description: "Search the person's Markdown memory (notes, preferences, projects, decisions, daily logs) " +
			"with hybrid keyword and semantic search. Returns matching passages with path, line range, score and snippet.",
	}, func(ctx context.Context, c agent.Call) (agent.Output, error) { return searchTool(ctx, mem, c) })
	if err != nil {
		return nil, fmt.Errorf("chat tools: %w", err)
	}
	return r, nil
}

// searchTool is the built-in memory_search handler.
func searchTool(ctx context.Context, mem Searcher, c agent.Call) (agent.Output, error) {
	var args struct {
		Query      string   `json:"query"`
		MaxResults *int     `json:"maxResults"`
		MinScore   *float64 `json:"minScore"`
	}
	if err := json.Unmarshal(c.Args, &args); err != nil {
		return agent.Output{}, fmt.Errorf("invalid arguments for %s (%v): send a JSON object like {\"query\": \"text\", \"maxResults\": 6}", ToolMemorySearch, err)
	}
	args.Query = strings.TrimSpace(args.Query)
	if args.Query == "" {
		return agent.Output{}, fmt.Errorf(`%s needs a non-empty "query" string`, ToolMemorySearch)
	}
	opts := memory.SearchOptions{Query: args.Query}
	if args.MaxResults != nil {
		opts.MaxResults = min(max(*args.MaxResults, 1), 20)
	}
	if args.MinScore != nil {
		opts.MinScore = math.Min(math.Max(*args.MinScore, 0), 1)
		if opts.MinScore == 0 {
			opts.MinScore = -1 // memory: negative means "no floor"; zero would mean the default
		}
	}
	res, err := mem.Search(ctx, opts)
	if err != nil {
		return agent.Output{}, fmt.Errorf("memory search failed: %w", err)
	}
	out := encodeHits(res, defaultToolOutputBytes)
	return agent.Output{Data: json.RawMessage(out), LogSummary: fmt.Sprintf("%d results", len(res.Results))}, nil
}

type toolResult struct {
	Results   []toolHit `json:"results"`
	Truncated bool      `json:"truncated,omitempty"`
	// Confidence is the search's (memory.Confidence); Note tells the model
	// when the results are weak (memory.Confidence.Note).
	Confidence memory.Confidence `json:"confidence"`
	Note       string            `json:"note,omitempty"`
	// The chat model's rewrite that was searched too, and its time
	// (memory.ToolRewrite).
	memory.ToolRewrite
}

type toolHit struct {
	Path      string  `json:"path"`
	StartLine int     `json:"startLine"`
	EndLine   int     `json:"endLine"`
	Score     float64 `json:"score"`
	Layer     string  `json:"layer,omitempty"`
	Snippet   string  `json:"snippet"`
}

// marshal encodes v as compact JSON without HTML escaping (the model reads it).
func marshal(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":"cannot encode the tool result"}`)
	}
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// encodeHits renders a search's results and confidence as JSON of at most
// limit bytes, cutting snippets and then dropping results from the end as
// needed.
func encodeHits(res memory.SearchResponse, limit int) string {
	tr := toolResult{Results: []toolHit{}, Confidence: res.Confidence, Note: res.Confidence.Note(), ToolRewrite: res.ToolRewrite()}
	for _, r := range res.Results {
		h := toolHit{Path: r.Path, StartLine: r.StartLine, EndLine: r.EndLine,
			Score: memory.RoundScore(r.Score), Layer: r.Layer, Snippet: r.Snippet}
		tr.Results = append(tr.Results, h)
		if b := marshal(tr); len(b) > limit {
			// Try a shorter snippet before giving up on this result.
			tr.Truncated = true
			for try := 0; try < 4 && h.Snippet != ""; try++ { // escaping may need a second cut
				over := len(marshal(tr)) - limit
				if over <= 0 {
					break
				}
				h.Snippet = cutRunes(h.Snippet, len(h.Snippet)-over-8)
				tr.Results[len(tr.Results)-1] = h
			}
			if h.Snippet == "" || len(marshal(tr)) > limit {
				tr.Results = tr.Results[:len(tr.Results)-1]
				break
			}
		}
	}
	return string(marshal(tr))
}

// cutRunes cuts s to at most n bytes without splitting a character, adding
// "…" when it cut.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// sourcesOf returns the memory lines a memory_search result pointed at
// (its data's results[].path/startLine/endLine; the built-in tool and
// agent/tools' share that shape). Other tools and failed calls give none.
func sourcesOf(res agent.Result) []history.Source {
	if res.Tool != ToolMemorySearch || res.Status != agent.StatusOK || len(res.Data) == 0 {
		return nil
	}
	var d struct {
		Results []history.Source `json:"results"`
	}
	if err := json.Unmarshal(res.Data, &d); err != nil {
		return nil
	}
	var out []history.Source
	for _, s := range d.Results {
		if s.Path != "" {
			out = append(out, s)
		}
	}
	return out
}

// argsJSON is a call's arguments as they can be stored: the JSON itself
// when valid, else the raw text as a JSON string.
func argsJSON(raw json.RawMessage) json.RawMessage {
	t := strings.TrimSpace(string(raw))
	if t == "" {
		return nil
	}
	if json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(t) // a string always encodes
	return b
}
