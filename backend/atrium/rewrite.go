package atrium

import (
	"context"
	"fmt"
	"time"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
)

// rewritePrompt is the system prompt of a query rewrite (issue 25 item
// 5): one line of the words a note answering the question would hold,
// which memory searches beside the question itself.
const rewritePrompt = "You help search a person's own Markdown notes. Rewrite the question you are given as ONE line of search words " +
	"that a note answering it would contain: the likely terms, names, commands and synonyms for its key words, and a few words " +
	"of a plausible answer. Keep the question's language (Chinese stays Chinese, in the same script; add English terms only " +
	"where a note might use them). Answer with that one line only, no explanation, no quotes."

// memoryRewrite returns the memory engine's Rewriter and its timeout for
// the settings s: nil unless memory.search.rewrite is on. The rewriter asks
// the main profile's model in force at the time of the search (model
// returns it), so a model changed in Settings is used at once; with the
// offline provider it answers memory.ErrNoRewriter.
func memoryRewrite(s config.Search, current func() model.Config, opts model.OpenAIOptions) (memory.Rewriter, time.Duration) {
	if !s.Rewrite {
		return nil, 0
	}
	timeout := time.Duration(s.RewriteTimeoutMs) * time.Millisecond
	return func(ctx context.Context, q string) (string, error) {
		p, err := model.FromConfig(current(), opts)
		if err != nil {
			return "", fmt.Errorf("rewrite: %w", err)
		}
		if p == nil {
			return "", memory.ErrNoRewriter
		}
		res, err := p.Stream(ctx, model.Request{Messages: []model.Message{
			{Role: model.RoleSystem, Content: rewritePrompt},
			{Role: model.RoleUser, Content: q},
		}}, func(model.Delta) {})
		if err != nil {
			return "", fmt.Errorf("rewrite with %s: %w", p.Name(), err)
		}
		return res.Content, nil
	}, timeout
}
