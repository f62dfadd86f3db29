package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Rewriter puts a search query into other words with a language model
// (issue 25 item 5): a paraphrase in the words a note would use, or a short
// hypothetical answer (HyDE). It returns the text to search; "" means the
// model had nothing to add. It must honour ctx (Options.RewriteTimeout).
// The wiring builds one over the app's chat model when config.json's
// memory.search.rewrite is on (package backend/atrium). It returns an
// error wrapping ErrNoRewriter when it has no model to ask now (the app
// answers offline): then nothing is counted or reported.
type Rewriter func(ctx context.Context, query string) (string, error)

// ErrNoRewriter is a Rewriter's answer when there is no model to ask.
var ErrNoRewriter = errors.New("memory: no model to rewrite the query")

const (
	// DefaultRewriteTimeout bounds a query's rewrite (Options.RewriteTimeout).
	DefaultRewriteTimeout = 4 * time.Second
	// MaxRewriteChars is the most of a rewrite that is searched: the
	// first line, cut to this many characters.
	MaxRewriteChars = 500
	// rewriteSamples is how many recent rewrite latencies RewriteStats
	// keeps for its median.
	rewriteSamples = 64
)

// RewriteStats is what the rewrites of this Manager have cost
// (Options.Rewrite): Calls made to the model, Failures among them (errors
// and timeouts), the last call's and the median of the last 64 calls'
// latencies in milliseconds (0 before the first call). Settings shows it
// beside the setting.
type RewriteStats struct {
	On       bool  `json:"on"`
	Calls    int   `json:"calls"`
	Failures int   `json:"failures"`
	LastMs   int64 `json:"lastMs"`
	MedianMs int64 `json:"medianMs"`
}

// rewriteLog records rewrite latencies for RewriteStats.
type rewriteLog struct {
	mu       sync.Mutex
	calls    int
	failures int
	ms       []int64 // ring of the last rewriteSamples latencies
	last     int64
}

func (l *rewriteLog) add(ms int64, failed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if failed {
		l.failures++
	}
	l.last = ms
	if len(l.ms) == rewriteSamples {
		l.ms = l.ms[1:]
	}
	l.ms = append(l.ms, ms)
}

// RewriteStats reports the rewrites made so far (see RewriteStats).
func (m *Manager) RewriteStats() RewriteStats {
	l := &m.rewrites
	l.mu.Lock()
	defer l.mu.Unlock()
	s := RewriteStats{On: m.opts.Rewrite != nil, Calls: l.calls, Failures: l.failures, LastMs: l.last}
	if len(l.ms) > 0 {
		ms := slices.Clone(l.ms)
		slices.Sort(ms)
		s.MedianMs = ms[(len(ms)-1)/2]
	}
	return s
}

// rewriteSearch is the second search of a query the index answers weakly
// (plain's confidence low or medium) when Options.Rewrite is set: the
// query rewritten by the model within Options.RewriteTimeout, searched
// with the same options, and merged with plain: every chunk of either
// search once with the better of its scores, in score order (plain's
// order among equal scores), at most n; the confidence is the better of
// the two searches'. The response says what was searched
// (RewrittenQuery) and how long the model took (RewriteMs). When the model
// fails, times out or returns nothing new, plain is returned with
// RewriteMs set (a failure is logged, without the query).
func (m *Manager) rewriteSearch(ctx context.Context, o SearchOptions, plain SearchResponse, n int) (SearchResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, m.opts.RewriteTimeout)
	start := time.Now()
	text, err := m.opts.Rewrite(rctx, strings.TrimSpace(o.Query))
	cancel()
	if errors.Is(err, ErrNoRewriter) {
		return plain, nil
	}
	took := time.Since(start).Milliseconds()
	plain.RewriteMs = max(took, 1)
	m.rewrites.add(took, err != nil)
	if err != nil {
		if ctx.Err() != nil {
			return plain, fmt.Errorf("search: %w", ctx.Err())
		}
		reason := "error"
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "timeout"
		}
		m.log.Warn("memory query rewrite failed; plain results", "reason", reason, "ms", took, "err", err)
		return plain, nil
	}
	text = rewriteLine(text)
	if text == "" || strings.EqualFold(text, strings.TrimSpace(o.Query)) {
		return plain, nil
	}
	ro := o
	ro.Query = text
	again, err := m.search(ctx, ro)
	if err != nil {
		if ctx.Err() != nil {
			return plain, fmt.Errorf("search: %w", ctx.Err())
		}
		m.log.Warn("memory rewritten query search failed; plain results", "err", err)
		return plain, nil
	}
	out := plain
	out.RewrittenQuery = text
	out.Results = mergeResults(plain.Results, again.Results, n)
	if confidenceRank(again.Confidence.Level) > confidenceRank(plain.Confidence.Level) {
		out.Confidence = again.Confidence
	}
	out.Withheld += again.Withheld
	return out, nil
}

// rewriteLine is the searchable part of a model's rewrite: its first
// non-empty line without surrounding quotes, at most MaxRewriteChars
// characters, valid UTF-8.
func rewriteLine(s string) string {
	s = strings.ToValidUTF8(s, "")
	for _, line := range strings.Split(s, "\n") {
		line = strings.Trim(strings.TrimSpace(line), "\"'“”「」")
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) > MaxRewriteChars {
			line = string([]rune(line)[:MaxRewriteChars])
		}
		return strings.TrimSpace(line)
	}
	return ""
}

// mergeResults merges two result lists: each chunk once (by path and
// lines) with the better score, in score order, a's order first among
// equal scores, at most n.
func mergeResults(a, b []SearchResult, n int) []SearchResult {
	type key struct {
		path       string
		start, end int
	}
	at := map[key]int{}
	out := make([]SearchResult, 0, len(a)+len(b))
	for _, list := range [][]SearchResult{a, b} {
		for _, r := range list {
			k := key{r.Path, r.StartLine, r.EndLine}
			if i, ok := at[k]; ok {
				if r.Score > out[i].Score {
					out[i].Score = r.Score
				}
				continue
			}
			at[k] = len(out)
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(x, y SearchResult) int {
		switch {
		case x.Score > y.Score:
			return -1
		case x.Score < y.Score:
			return 1
		}
		return 0
	})
	return out[:min(n, len(out))]
}
