package chat

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
)

// Offline defaults.
const (
	// OfflineModel is what the offline provider reports as its model.
	OfflineModel = "memory-search"
	// DefaultOfflineResults is how many passages an offline answer quotes.
	DefaultOfflineResults = 4
	// OfflineSnippetChars cuts each quoted snippet (characters).
	OfflineSnippetChars = 400
	// offlineQueryChars cuts the user message used as the search query.
	offlineQueryChars = 500
)

// OfflineOptions configure the offline provider.
type OfflineOptions struct {
	// Memory is searched for every answer. Required.
	Memory Searcher
	// MaxResults is how many passages to quote. Default DefaultOfflineResults.
	MaxResults int
	// MinScore is the search floor; 0 means the memory engine's default
	// (memory.DefaultMinScore), negative means no floor.
	MinScore float64
}

// Offline is the built-in "offline" provider (SPEC §6): with no model
// configured it answers from memory search. Its answer says plainly that no
// model is configured and how to configure one, then quotes the best
// matching memory passages, each with its source as path:startLine-endLine.
// It streams the answer in several chunks like a real model. It never calls
// tools and is safe for concurrent use.
type Offline struct {
	opts OfflineOptions
}

// NewOffline returns the offline provider.
func NewOffline(opts OfflineOptions) *Offline {
	if opts.MaxResults <= 0 {
		opts.MaxResults = DefaultOfflineResults
	}
	return &Offline{opts: opts}
}

// Name reports "offline".
func (o *Offline) Name() string { return model.ProviderOffline }

// Model reports OfflineModel.
func (o *Offline) Model() string { return OfflineModel }

// Stream implements model.Provider: it answers the last user message of req.
func (o *Offline) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	query := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			query = req.Messages[i].Content
			break
		}
	}
	resp, _, err := o.Answer(ctx, query, onDelta)
	return resp, err
}

// Answer searches memory for query and streams the offline answer through
// onDelta (paragraph by paragraph). It returns the whole answer and the
// sources it quoted. A failed search is reported inside the answer, not as
// an error; the only error is ctx's (the partial answer is returned with it).
func (o *Offline) Answer(ctx context.Context, query string, onDelta func(model.Delta)) (model.Response, []history.Source, error) {
	if onDelta == nil {
		onDelta = func(model.Delta) {}
	}
	q := strings.TrimSpace(query)
	if utf8.RuneCountInString(q) > offlineQueryChars {
		q = string([]rune(q)[:offlineQueryChars])
	}
	var (
		results   []memory.SearchResult
		searchErr error
	)
	if q != "" && o.opts.Memory != nil {
		res, err := o.opts.Memory.Search(ctx, memory.SearchOptions{Query: q, MaxResults: o.opts.MaxResults, MinScore: o.opts.MinScore})
		if err != nil && ctx.Err() != nil {
			return model.Response{}, nil, fmt.Errorf("offline answer: %w", ctx.Err())
		}
		results, searchErr = res.Results, err
		if len(results) > o.opts.MaxResults {
			results = results[:o.opts.MaxResults]
		}
	}

	var parts []string
	parts = append(parts, "**No model is configured**, so I cannot think about your message; "+
		"this answer comes straight from a search of your memory (offline mode).\n\n")
	var sources []history.Source
	switch {
	case searchErr != nil:
		parts = append(parts, fmt.Sprintf("Memory search failed: %v.\n\n", searchErr))
	case len(results) == 0:
		parts = append(parts, fmt.Sprintf("I found nothing in memory that matches “%s”.\n\n", oneLine(q, 120)))
	default:
		noun := "passages"
		if len(results) == 1 {
			noun = "passage"
		}
		parts = append(parts, fmt.Sprintf("Here is what I found in memory for “%s” (%d %s):\n\n", oneLine(q, 120), len(results), noun))
		for i, r := range results {
			src := history.Source{Path: r.Path, StartLine: r.StartLine, EndLine: r.EndLine}
			sources = append(sources, src)
			parts = append(parts, fmt.Sprintf("%d. `%s:%d-%d` (score %.2f)\n%s\n\n", i+1, r.Path, r.StartLine, r.EndLine, r.Score, quote(r.Snippet)))
		}
	}
	parts = append(parts, "To get real answers, configure a model in one of these ways:\n"+
		"- add a `model` block to config.json, e.g. `\"model\": {\"provider\": \"openai\", \"baseUrl\": \"https://api.openai.com/v1\", \"apiKey\": \"sk-...\", \"model\": \"gpt-4o-mini\"}`;\n"+
		"- or set OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible server such as llama.cpp, vLLM, LM Studio or DeepSeek);\n"+
		"- or run a local Ollama at 127.0.0.1:11434 with a model pulled (`ollama pull llama3.2`).\n"+
		"Then restart Atrium.")

	var text strings.Builder
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return model.Response{Content: text.String()}, sources, fmt.Errorf("offline answer: %w", err)
		}
		text.WriteString(p)
		onDelta(model.Delta{Content: p})
	}
	return model.Response{Content: text.String(), FinishReason: "stop"}, sources, nil
}

// quote renders a snippet as a Markdown block quote, cut at OfflineSnippetChars.
func quote(snippet string) string {
	s := strings.TrimSpace(snippet)
	if utf8.RuneCountInString(s) > OfflineSnippetChars {
		s = string([]rune(s)[:OfflineSnippetChars]) + "…"
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			lines[i] = ">"
		} else {
			lines[i] = "> " + l
		}
	}
	return strings.Join(lines, "\n")
}

// oneLine flattens s to one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}
