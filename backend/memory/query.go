package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/memory/index"
)

// CheckQuery checks a search query as Search does, before anything is done
// with it: nil, or an error wrapping ErrInvalidInput that says what is
// wrong, for a query that is empty (or spaces only), not valid UTF-8, or
// longer than MaxQueryChars characters after trimming spaces. Entry points
// call it to refuse a query before doing any other work for it.
func CheckQuery(q string) error {
	q = strings.TrimSpace(q)
	switch {
	case q == "":
		return fmt.Errorf("%w: empty query", ErrInvalidInput)
	case !utf8.ValidString(q):
		return fmt.Errorf("%w: query is not valid UTF-8", ErrInvalidInput)
	}
	if n := utf8.RuneCountInString(q); n > MaxQueryChars {
		return fmt.Errorf("%w: query is %d characters, the limit is %d: search for its key words or one passage", ErrInvalidInput, n, MaxQueryChars)
	}
	return nil
}

// Search runs memory_search (SPEC §4.3): a hybrid of the vector leg
// (sqlite-vec, cosine) and the keyword leg (Bleve BM25, query terms OR-ed),
// score = max(0.7·vector + 0.3·keyword, 0.5·keyword) (+ a small bonus for an
// exact phrase match), where the keyword score weighs the IDF-weighted share
// of the query's terms that the chunk contains with BM25 relative to the best
// keyword match, so that a weak match scores low in absolute terms (see
// package index for the full rule). Each leg fetches max(50, 4·MaxResults)
// candidates at first; the index then widens the candidates (chunks holding
// the query's rare terms, bigger pools) until it has proved that no other
// chunk can enter the results, so the results are the exact top of the
// whole index and the first k for MaxResults = k are the first k for any
// larger MaxResults. Chunks with identical text are collapsed to the copy
// with the smallest path. A question that names a day ("2025-11-03",
// "yesterday", "上周三") gets the best chunks of that day's readable daily
// logs first, whatever their score (dates.go).
//
// Options: MaxResults 0 means DefaultMaxResults (6), larger values are capped
// at MaxMaxResults, negative values are ErrInvalidInput. MinScore 0 (the
// zero value, also what an omitted "minScore" decodes to) means the query's
// default floor (index.DefaultFloor: the best result must reach 0.13-0.28
// by the query's length, then every result down to 0.04 less); a negative
// MinScore means no floor; MinScore above 1 or NaN is ErrInvalidInput
// (scores are in [0,1]). For a floor just above zero pass a tiny positive
// value such as 1e-9.
// Mode: "" or ModeHybrid runs both legs, ModeKeyword only the keyword leg
// (the query is not embedded), ModeVector only the vector leg (the index
// gets no keyword terms); anything else is ErrInvalidInput. A vector-only
// search scores each chunk by its cosine alone (vector weight 1), so that
// MinScore means the same for every embedder; a keyword-only one keeps the
// fused score with v = 0. A vector-only search of an index without
// compatible vectors (StateKeywordOnly) returns no results.
// Snippets are at most MaxSnippetChars characters. If the query cannot be
// embedded the hybrid search falls back to the keyword leg (logged) and a
// vector-only search fails with the embedder's error. An empty query, or
// one longer than MaxQueryChars characters, is ErrInvalidInput (see
// CheckQuery); a query with no searchable token (punctuation only, say
// "???") is not an error and returns no results.
// When Options.Rewrite is set, a query whose confidence is low or medium
// is put into other words by the model and searched again, the results
// merged (rewrite.go; RewrittenQuery, RewriteMs); on the model's failure
// or timeout the plain results.
func (m *Manager) Search(ctx context.Context, o SearchOptions) (SearchResponse, error) {
	resp, err := m.search(ctx, o)
	if err != nil || m.opts.Rewrite == nil || resp.Confidence.Level == ConfidenceHigh {
		return resp, err
	}
	n := o.MaxResults
	if n == 0 {
		n = DefaultMaxResults
	}
	return m.rewriteSearch(ctx, o, resp, min(n, MaxMaxResults))
}

// search is Search without the rewrite.
func (m *Manager) search(ctx context.Context, o SearchOptions) (SearchResponse, error) {
	resp := SearchResponse{Results: []SearchResult{}, Provider: m.emb.Provider(), Model: m.emb.Model(), Confidence: Confidence{Level: ConfidenceLow}}
	if err := CheckQuery(o.Query); err != nil {
		return resp, fmt.Errorf("search: %w", err)
	}
	q := strings.TrimSpace(o.Query)
	if o.MaxResults < 0 {
		return resp, fmt.Errorf("search: %w: maxResults %d is negative (0 means the default %d)", ErrInvalidInput, o.MaxResults, DefaultMaxResults)
	}
	if math.IsNaN(o.MinScore) || o.MinScore > 1 {
		return resp, fmt.Errorf("search: %w: minScore %v out of range (scores are in [0,1]; 0 means the query's default floor, negative means no floor)", ErrInvalidInput, o.MinScore)
	}
	switch o.Mode {
	case "", ModeHybrid, ModeKeyword, ModeVector:
	default:
		return resp, fmt.Errorf("search: %w: unknown mode %q (hybrid, keyword or vector)", ErrInvalidInput, o.Mode)
	}
	n := o.MaxResults
	if n == 0 {
		n = DefaultMaxResults
	}
	n = min(n, MaxMaxResults)
	// MinScore 0 asks for the query's default floor (index.Query.AutoFloor).
	minScore, autoFloor := o.MinScore, o.MinScore == 0
	if m.closed.Load() {
		return resp, ErrClosed
	}
	if !o.single {
		if parts := questionParts(q); parts != nil {
			return m.searchParts(ctx, o, parts, n)
		}
	}
	var qv []float32
	if o.Mode != ModeKeyword {
		if vs, err := m.emb.Embed(ctx, []string{q}); err != nil || len(vs) != 1 {
			if ctx.Err() != nil {
				return resp, fmt.Errorf("search: %w", ctx.Err())
			}
			if o.Mode == ModeVector {
				if err == nil {
					err = fmt.Errorf("embedder returned %d vectors for 1 query", len(vs))
				}
				return resp, fmt.Errorf("search: embed query: %w", err)
			}
			m.log.Warn("memory query embedding failed; keyword leg only", "err", err)
		} else {
			qv = vs[0]
		}
	}
	text := q
	if o.Mode == ModeVector {
		text = "" // no keyword terms: the index runs the vector leg alone
	}
	st, release, err := m.currentStore()
	if err != nil {
		return resp, fmt.Errorf("search: %w", err)
	}
	defer release()
	rk := &m.opts.Ranking
	wv := rk.VectorWeight
	if o.Mode == ModeVector {
		wv = 1 // the score is the cosine itself
	}
	// The caller's read permission is the search's scope: the index ranks
	// the readable files alone (SPEC §4.3, §5.1). Near-duplicate folding
	// can leave fewer than n results from the pool; then a pool four
	// times larger is asked for (see Ranking.poolFor).
	var hits []index.Hit
	for pool := rk.poolFor(n); ; pool = min(MaxMaxResults, 4*pool) {
		found, info, err := st.SearchWithInfo(ctx, index.Query{Text: text, Vector: qv, MaxResults: pool, MinScore: minScore, AutoFloor: autoFloor, VectorWeight: wv, Scope: o.Readable})
		resp.Query = info
		if err != nil {
			return resp, fmt.Errorf("search: %w", err)
		}
		more := len(found) == pool && pool < MaxMaxResults
		resp.Withheld = 0
		if o.Readable != nil {
			// A safety net: the scope already kept unreadable files out.
			before := len(found)
			found = readableHits(found, o.Readable)
			resp.Withheld = before - len(found)
		}
		hits = rk.rerank(found, n)
		if len(hits) >= n || !more {
			break
		}
	}
	if hits, err = m.preferNamedDays(ctx, st, o, q, qv, wv, hits, n); err != nil {
		return resp, fmt.Errorf("search: %w", err)
	}
	if o.Readable != nil {
		if resp.OutOfScope, err = st.FilesOutside(ctx, o.Readable); err != nil {
			return resp, fmt.Errorf("search: %w", err)
		}
	}
	for _, h := range hits {
		resp.Results = append(resp.Results, SearchResult{
			Path:      h.Path,
			StartLine: h.StartLine,
			EndLine:   h.EndLine,
			Score:     RoundScore(h.Score),
			Snippet:   snippet(h.Text, MaxSnippetChars),
			Source:    "memory",
			Layer:     h.Layer,
			Role:      h.Role,
			AlsoIn:    h.AlsoIn,
		})
	}
	resp.Signals = signalsOf(hits, resp.Query)
	resp.Confidence = confidenceOf(resp.Signals)
	return resp, nil
}

// snippet cuts text to at most max characters (runes), preferring to end at
// a line break or space, and marks the cut with "…".
func snippet(text string, max int) string {
	if utf8.RuneCountInString(text) <= max {
		return text
	}
	r := []rune(text)[:max-1]
	cut := len(r)
	for i := len(r) - 1; i > len(r)*3/4; i-- {
		if r[i] == '\n' || r[i] == ' ' {
			cut = i
			break
		}
	}
	return strings.TrimRight(string(r[:cut]), " \n\r\t") + "…"
}

// Get runs memory_get (SPEC §4.3): the text of one memory Markdown file,
// optionally lines From (1-based) .. From+Lines-1. Only paths that would be
// indexed (MEMORY.md, memory/**.md except templates) and the OpenClaw
// context files (SOUL.md ..., context.go) inside the workspace are served: absolute paths, "..", and symlinks leaving the workspace are
// ErrInvalidPath; a missing file is ErrNotFound. Invalid UTF-8 is replaced by
// U+FFFD. A From past the end yields empty text.
func (m *Manager) Get(ctx context.Context, o GetOptions) (GetResponse, error) {
	if m.closed.Load() {
		return GetResponse{}, ErrClosed
	}
	if o.From < 0 || o.Lines < 0 {
		return GetResponse{}, fmt.Errorf("get: %w: from and lines must not be negative", ErrInvalidInput)
	}
	rel, err := cleanRel(o.Path)
	if err != nil {
		return GetResponse{}, fmt.Errorf("get: %w", err)
	}
	if !classify(rel).readable() {
		return GetResponse{}, fmt.Errorf("get: %w: %q is not memory Markdown", ErrInvalidPath, rel)
	}
	abs := filepath.Join(m.ws, filepath.FromSlash(rel))
	// Every existing parent must stay inside the workspace too.
	real, info, err := m.resolveInside(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return GetResponse{}, fmt.Errorf("get %s: %w", rel, ErrNotFound)
	}
	if err != nil {
		if errors.Is(err, ErrInvalidPath) {
			return GetResponse{}, fmt.Errorf("get %s: %w", rel, err)
		}
		return GetResponse{}, fmt.Errorf("get %s: %w", rel, err)
	}
	if info.Size() > MaxFileBytes {
		return GetResponse{}, fmt.Errorf("get %s: %w: file too large (%d bytes)", rel, ErrInvalidInput, info.Size())
	}
	data, err := os.ReadFile(real)
	if errors.Is(err, fs.ErrNotExist) {
		return GetResponse{}, fmt.Errorf("get %s: %w", rel, ErrNotFound)
	}
	if err != nil {
		return GetResponse{}, fmt.Errorf("get %s: %w", rel, err)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return GetResponse{}, fmt.Errorf("get %s: %w: binary content", rel, ErrInvalidInput)
	}
	text := strings.ToValidUTF8(string(data), "\uFFFD")
	if o.From > 0 || o.Lines > 0 {
		text = sliceLines(text, o.From, o.Lines)
	}
	return GetResponse{Path: rel, Text: text}, nil
}

// sliceLines returns lines from..from+n-1 (1-based; from 0 = 1; n 0 = to the end).
func sliceLines(text string, from, n int) string {
	if from <= 0 {
		from = 1
	}
	lines := strings.SplitAfter(text, "\n")
	if from > len(lines) {
		return ""
	}
	end := len(lines)
	if n > 0 && from-1+n < end {
		end = from - 1 + n
	}
	return strings.Join(lines[from-1:end], "")
}

// Files lists the indexed memory files (memory.files), then the OpenClaw
// context files present at the workspace root (Context set, no chunks).
func (m *Manager) Files(ctx context.Context) ([]FileInfo, error) {
	st, release, err := m.currentStore()
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	defer release()
	recs, err := st.Files(ctx)
	if err != nil {
		return nil, fmt.Errorf("files: %w", err)
	}
	out := make([]FileInfo, 0, len(recs))
	for _, r := range recs {
		out = append(out, FileInfo{Path: r.Path, Size: r.Size, MTime: r.MTime, Chunks: r.Chunks, Layer: r.Layer, Role: r.Role})
	}
	return append(out, m.contextFiles()...), nil
}

// readableHits keeps the hits the caller may read: a hit whose file is not
// readable takes the place of its first readable exact copy, or is
// dropped; AlsoIn keeps only readable paths.
func readableHits(hits []index.Hit, readable func(string) bool) []index.Hit {
	out := hits[:0]
	for _, h := range hits {
		var copies []index.Copy
		for _, c := range h.Copies {
			if readable(c.Path) {
				copies = append(copies, c)
			}
		}
		if !readable(h.Path) {
			if len(copies) == 0 {
				continue
			}
			h.Path, h.StartLine, h.EndLine = copies[0].Path, copies[0].StartLine, copies[0].EndLine
			k := classify(h.Path)
			h.Layer, h.Role = k.layer, k.role
			copies = copies[1:]
		}
		h.Copies, h.AlsoIn = copies, nil
		for _, c := range copies {
			h.AlsoIn = append(h.AlsoIn, c.Path)
		}
		out = append(out, h)
	}
	return out
}
