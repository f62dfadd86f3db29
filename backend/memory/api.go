package memory

import (
	"math"

	"github.com/atrium-dev/atrium/backend/memory/index"
)

// This file holds the agent- and gateway-facing shapes of the memory API
// (SPEC §4.3). Field names are the wire names used by the gateway (docs/PROTOCOL.md).

// Search defaults from SPEC §4.3.
const (
	DefaultMaxResults = 6
	// DefaultMinScore is the default floor of a one-term query (a lookup
	// such as "QK-7731"); a longer query gets a lower default floor, down
	// to index.FloorMin (index.DefaultFloor: calibrated on the retrieval
	// sets, docs/BENCHMARKS.md). Until issue 15 every query had 0.35.
	DefaultMinScore = index.FloorBase
	// MaxSnippetChars caps SearchResult.Snippet (characters, not bytes).
	MaxSnippetChars = 700
	// MaxQueryChars caps SearchOptions.Query: at most this many characters
	// (Unicode code points, not bytes, so the same for Chinese and
	// English; after trimming leading and trailing spaces). A longer
	// query is ErrInvalidInput (CheckQuery), from Search itself and from
	// every way in (gateway memory.search, `atrium memory search`, the
	// agents' memory_search, collab.view). 4000 characters is ten times
	// the largest chunk (chunk.DefaultMaxTokens = 400 tokens, about
	// 1,600 English or 400 Chinese characters), twice a role description
	// (MaxDescriptionChars) and equal to route.MaxTextChars: a pasted
	// paragraph or page still searches, while the cost of one search stays
	// bounded (docs/BENCHMARKS.md, "Query length").
	MaxQueryChars = 4000
)

// ScoreDecimals is how many decimals a score keeps once it leaves the
// process (issue 25: a person reads "0.2712", not "0.27118005300000003").
// Search rounds every SearchResult.Score to it (RoundScore) after ranking,
// so the gateway, `atrium memory search --json`, the agent tools and the
// starting context all carry the same rounded figure.
const ScoreDecimals = 4

// RoundScore rounds a score in [0,1] to ScoreDecimals decimals (half away
// from zero); NaN and ±Inf are returned as they are.
func RoundScore(s float64) float64 { return math.Round(s*1e4) / 1e4 }

// Layer names (SPEC §4.1, §5.2).
const (
	LayerGlobal  = "global"
	LayerRole    = "role"
	LayerSession = "session"
)

// SearchOptions are the memory_search arguments.
//
// MaxResults: 0 (or omitted) means DefaultMaxResults (6); values above
// MaxMaxResults are capped; a negative value is ErrInvalidInput.
//
// MinScore: scores are in [0,1]. 0 (or omitted) means the query's default
// floor (index.DefaultFloor of its effective length: DefaultMinScore for a
// one-term query, down to index.FloorMin for a long question), not "no floor": JSON cannot tell an explicit 0 from a missing field here.
// A negative value means no floor (every ranked hit is returned); a value
// above 1 or NaN is ErrInvalidInput. For a floor just above zero pass a tiny
// positive value such as 1e-9.
//
// Mode picks the legs (SPEC §4.3 defines the hybrid): "" or ModeHybrid
// (default) both; ModeKeyword the BM25 leg only (the query is not
// embedded); ModeVector the vector leg only (no keyword terms). Scores keep
// the hybrid formula with the missing leg at 0, so a keyword-only score is
// 0.5·k (plus the phrase bonus) and a vector-only score 0.7·cosine; the
// floor applies to them as given. Any other value is ErrInvalidInput. The
// single-leg modes exist to measure the legs (atrium bench retrieval) and
// to debug a ranking; agents use the hybrid.
type SearchOptions struct {
	// Readable, when set, says which workspace-relative paths the caller
	// may read. It is the search's scope (SPEC §4.3, §5.1): the index
	// ranks the chunks of readable files alone, with BM25 statistics,
	// coverage weights and candidate pools computed over them, so the
	// results, their scores and their AlsoIn lists are those an index of
	// only the readable files would return.
	Readable func(path string) bool `json:"-"`

	Query      string  `json:"query"`
	MaxResults int     `json:"maxResults,omitempty"`
	MinScore   float64 `json:"minScore,omitempty"`
	Mode       string  `json:"mode,omitempty"`
	// single: search Query as one part (multipart.go), never split.
	single bool
}

// ToolMinScore maps the memory_search tool's minScore argument (SPEC
// §4.3; the agents' tool and MCP's) to SearchOptions.MinScore: absent
// (nil) is the calibrated default (0), 0 is no floor (-1, as 0 would mean
// the default), anything else is clamped to 0..1.
func ToolMinScore(v *float64) float64 {
	if v == nil {
		return 0
	}
	if s := math.Min(math.Max(*v, 0), 1); s > 0 {
		return s
	}
	return -1
}

// ToolHit is one result as the memory_search tools report it (SPEC
// §4.3): the SearchResult without source and alsoIn, its score rounded
// (RoundScore).
type ToolHit struct {
	Path      string  `json:"path"`
	StartLine int     `json:"startLine"`
	EndLine   int     `json:"endLine"`
	Score     float64 `json:"score"`
	Layer     string  `json:"layer,omitempty"`
	Role      string  `json:"role,omitempty"`
	Snippet   string  `json:"snippet"`
}

// ToolRewrite is what the memory_search tools (the agents', the chat's
// and the MCP server's) report of a search's rewrite by the chat model
// (Options.Rewrite), as the gateway's memory.search response does
// (docs/PROTOCOL.md): RewrittenQuery, the model's words that were searched
// too, and RewriteMs, how long the model took in milliseconds (also when
// it failed or timed out). Both are omitted when the model was not asked.
type ToolRewrite struct {
	RewrittenQuery string `json:"rewrittenQuery,omitempty"`
	RewriteMs      int64  `json:"rewriteMs,omitempty"`
}

// ToolRewrite is res's rewrite as the memory_search tools report it.
func (res SearchResponse) ToolRewrite() ToolRewrite {
	return ToolRewrite{RewrittenQuery: res.RewrittenQuery, RewriteMs: res.RewriteMs}
}

// ToolHits is results as the memory_search tools report them (never nil).
func ToolHits(results []SearchResult) []ToolHit {
	hits := make([]ToolHit, 0, len(results))
	for _, h := range results {
		hits = append(hits, ToolHit{Path: h.Path, StartLine: h.StartLine, EndLine: h.EndLine,
			Score: RoundScore(h.Score), Layer: h.Layer, Role: h.Role, Snippet: h.Snippet})
	}
	return hits
}

// Search modes (SearchOptions.Mode).
const (
	ModeHybrid  = "hybrid"
	ModeKeyword = "keyword"
	ModeVector  = "vector"
)

// SearchResult is one ranked chunk. Path is workspace-relative with forward
// slashes (e.g. "MEMORY.md", "memory/2024-05-01.md", "memory/global/decisions.md").
// Lines are 1-based and inclusive. Score is the hybrid score in [0,1],
// rounded to ScoreDecimals decimals.
type SearchResult struct {
	Path      string  `json:"path"`
	StartLine int     `json:"startLine"`
	EndLine   int     `json:"endLine"`
	Score     float64 `json:"score"`
	Snippet   string  `json:"snippet"`
	Source    string  `json:"source"` // "memory"
	Layer     string  `json:"layer"`  // LayerGlobal | LayerRole | LayerSession
	Role      string  `json:"role,omitempty"`
	// AlsoIn lists the other files holding this exact text (the
	// duplicates collapsed into this result), sorted; omitted when none.
	AlsoIn []string `json:"alsoIn,omitempty"`
}

// SearchResponse is the memory_search result.
type SearchResponse struct {
	// Withheld counts the candidates dropped because SearchOptions.Readable
	// refused them (for the audit log; never sent to the caller).
	Withheld int `json:"-"`
	// OutOfScope counts the indexed files the search did not see because
	// SearchOptions.Readable refused them (for the audit log; never sent).
	OutOfScope int `json:"-"`
	// Query is what the index made of the query: its terms, effective
	// length and the score floor applied (the query's default floor when
	// SearchOptions.MinScore was 0). For measuring (atrium bench
	// retrieval); not sent.
	Query index.QueryInfo `json:"-"`
	// Signals are what Confidence was computed from (confidence.go). For
	// measuring (atrium bench retrieval --dump); not sent.
	Signals ConfidenceSignals `json:"-"`
	Results []SearchResult    `json:"results"`
	// Confidence is how sure the search is that Results answer the
	// query as a whole (confidence.go): "low" with no results, or when
	// the first result holds too little of the query's terms.
	Confidence Confidence `json:"confidence"`
	Provider   string     `json:"provider"`
	Model      string     `json:"model"`
	// RewrittenQuery is the model's rewrite of the query that was searched
	// too, its results merged (Options.Rewrite, rewrite.go); "" when none
	// was searched. RewriteMs is how long the model took, in milliseconds,
	// whenever it was asked (also when it failed or timed out: then the
	// results are the plain search's); 0 when it was not asked.
	RewrittenQuery string `json:"rewrittenQuery,omitempty"`
	RewriteMs      int64  `json:"rewriteMs,omitempty"`
}

// GetOptions are the memory_get arguments. From is a 1-based line number
// (0 = start); Lines is a line count (0 = to the end).
type GetOptions struct {
	Path  string `json:"path"`
	From  int    `json:"from,omitempty"`
	Lines int    `json:"lines,omitempty"`
}

// GetResponse is the memory_get result.
type GetResponse struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// ImportRequest asks to store one note in memory. Name is a file name (no
// directories) ending in ".md", ".markdown" or ".txt" (any case); the note is
// stored as ".md". Layer is LayerRole (default: the main role's memory) or
// LayerGlobal.
type ImportRequest struct {
	Name    string `json:"name"`
	Content string `json:"content"`
	Layer   string `json:"layer,omitempty"`
	// Role is the role whose folder layer "role" imports into in an
	// Atrium-layout workspace; "" means MainRole. The gateway fills in the
	// calling role, so a role imports into its own memory.
	Role string `json:"role,omitempty"`
	// Session is the live session whose folder layer "session" imports
	// into (memory/sessions/<Session>/); required for that layer, ignored
	// by the others. A session that is not live (never created, archived)
	// is ErrNotFound: an import never creates a session folder.
	Session string `json:"session,omitempty"`
}

// ImportResult says where an imported note landed and how many chunks it made.
type ImportResult struct {
	Path   string `json:"path"`
	Bytes  int    `json:"bytes"`
	Chunks int    `json:"chunks"`
}

// FileInfo describes one indexed memory file.
type FileInfo struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	MTime  int64  `json:"mtime"` // Unix ms
	Chunks int    `json:"chunks"`
	Layer  string `json:"layer"`
	Role   string `json:"role,omitempty"`
	// Context marks an OpenClaw context file (SOUL.md, IDENTITY.md,
	// USER.md, AGENTS.md, TOOLS.md, HEARTBEAT.md at the workspace root):
	// role main's persona and standing context, readable with memory_get,
	// never searched.
	Context bool `json:"context,omitempty"`
}

// Progress counts files during a sync.
type Progress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// Index states reported by Status.
const (
	// StateIndexing: a sync is running now (Progress counts it).
	StateIndexing = "indexing"
	// StateReady: the last sync completed without errors; Dirty counts
	// files changed since then that are not indexed yet.
	StateReady = "ready"
	// StateKeywordOnly: the index answers keyword queries only, or only
	// partly by vector: it was built with another embedder and its rebuild
	// has not completed, or the embedding provider failed for some chunks
	// (stored without vectors; LastError counts them and says why, and the
	// next sync embeds them). Chunks counts every chunk all the same.
	StateKeywordOnly = "keyword-only"
	// StateError: the last sync or flush failed for some files, or the
	// workspace is unavailable (ErrUnavailable); LastError says why. The
	// index keeps answering from what it holds.
	StateError = "error"
	// StateStale: no sync is running and the index is not known to match
	// the workspace: it was never fully synced, the last sync did not
	// complete (cancelled or killed), or Check found changed files.
	// LastError says which; search answers from what is indexed.
	StateStale = "stale"
	// StateDegraded: the vector index is damaged (a table sqlite-vec keeps
	// is missing or unreadable, vectors are missing or garbage): searches
	// answer by keywords alone while the vector index is rebuilt from the
	// stored chunks in the background (and by the next sync, `atrium
	// memory index`). Degraded says why and how far the rebuild is.
	StateDegraded = "degraded"
)

// Status is what `atrium memory status` and memory.status report (SPEC §4.2).
// Files and Chunks count what searches see; during a sync they grow as
// groups of files are committed (at least every 2 s). LastSync is the end of
// the last completed full sync, kept in the index across restarts. Dirty
// counts files known to differ from the index (seen by the watcher, or
// found by Check) and not indexed yet. LastError lists, in this order, an
// degraded vector index, an unavailable workspace, the reason for a stale or
// keyword-only state, the last sync's errors, and the skipped files with
// their reasons.
type Status struct {
	State     string    `json:"state"`
	Workspace string    `json:"workspace"`
	Layout    string    `json:"layout"` // "openclaw" | "atrium" | "mixed" | "empty"
	Files     int       `json:"files"`
	Chunks    int       `json:"chunks"`
	Dirty     int       `json:"dirty"`
	Provider  string    `json:"provider"`
	Model     string    `json:"model"`
	Dims      int       `json:"dims"`
	LastSync  int64     `json:"lastSync"` // Unix ms, 0 = never
	LastError string    `json:"lastError,omitempty"`
	Progress  *Progress `json:"progress,omitempty"`
	// Degraded says why the vector leg is out of service (StateDegraded;
	// also set while a sync runs or the state is "error"); empty otherwise.
	Degraded string `json:"degraded,omitempty"`
}

// ChangeEvent is delivered to Options.OnChange after the index changed.
type ChangeEvent struct {
	Paths []string `json:"paths"`
	// Reason: "index" | "import" | "delete" | "write" (Write, Note or a
	// conflict resolution changed the file) | "conflict" (a pending
	// conflict was opened, or one was resolved keeping the file) |
	// "archive" (an expired or archived session's files left memory).
	Reason string `json:"reason"`
	// Layers holds the layer of each path, in the order of Paths:
	// LayerGlobal, LayerRole or LayerSession (SPEC §5.2).
	Layers []string `json:"layers"`
	// Global is true when any path is in global memory (L1), whose every
	// change is broadcast to all agents (SPEC §5.2).
	Global bool `json:"global"`
}
