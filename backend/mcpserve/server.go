package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atrium-dev/atrium/backend/memory"
)

// URIPrefix starts the URI of every memory file resource: the resource of
// memory/global/decisions.md is "atrium:///memory/global/decisions.md".
const URIPrefix = "atrium:///"

// PromptLayers is the name of the prompt that explains the memory layers.
const PromptLayers = "memory_layers"

// Tool names (the agents' memory tools, SPEC §4.3).
const (
	ToolSearch = "memory_search"
	ToolGet    = "memory_get"
	ToolWrite  = "memory_write"
	ToolNote   = "memory_note"
)

// Options configure a Server.
type Options struct {
	// Memory is where every call goes, as the server's role (required).
	Memory Memory
	// Role is who the server acts as: a role of the workspace, or
	// Authenticated ("" means Authenticated).
	Role string
	// Version is reported as the server's version in initialize.
	Version string
	// Logger receives the server's and the SDK's logs (never token
	// secrets; paths and roles only); default slog.Default().
	Logger *slog.Logger
}

// Server is one MCP server acting as one role: the SDK's server with the
// memory tools, the role's readable files as resources, and the layers
// prompt. Use MCP() with a transport (stdio, or the SDK's streamable HTTP
// handler).
type Server struct {
	o   Options
	srv *mcp.Server

	mu    sync.Mutex
	files map[string]memory.FileInfo // the resources offered: URI → file
	known bool                       // files was listed at least once
}

// New builds a Server. Errors: no Memory.
func New(o Options) (*Server, error) {
	if o.Memory == nil {
		return nil, errors.New("mcpserve: Options.Memory is required")
	}
	if o.Role == "" {
		o.Role = Authenticated
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Server{o: o, files: map[string]memory.FileInfo{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "atrium", Title: "Atrium memory", Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions(o.Role),
		Logger:       o.Logger,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{},
			Prompts:   &mcp.PromptCapabilities{},
			Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
		},
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.addTools()
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "memory-file", Title: "A memory file", URITemplate: URIPrefix + "{+path}", MIMEType: "text/markdown",
		Description: "A Markdown memory file by its workspace-relative path, e.g. " + URIPrefix + "memory/global/decisions.md; only files this client's role may read.",
	}, s.readResource)
	s.srv.AddPrompt(&mcp.Prompt{Name: PromptLayers, Title: "Atrium's memory layers",
		Description: "How Atrium's memory is organised (global, role and session layers, daily logs, decisions) and how to use the memory tools well."},
		s.layersPrompt)
	return s, nil
}

// MCP is the SDK server, to Run on a transport or hand to
// mcp.NewStreamableHTTPHandler.
func (s *Server) MCP() *mcp.Server { return s.srv }

// Role is who the server acts as.
func (s *Server) Role() string { return s.o.Role }

func instructions(role string) string {
	who := "the role " + role
	if role == Authenticated {
		who = "an authenticated client without a role (only what the ACL grants `authenticated`)"
	}
	return "Atrium's Markdown memory, as " + who + ". Search with memory_search before answering " +
		"questions about people, projects, decisions or past events; read a whole file with memory_get; " +
		"record durable facts with memory_write (pass the version memory_get returned as baseVersion) or " +
		"a line in today's log with memory_note. Files this client may not read do not exist for it. " +
		"The prompt memory_layers explains the layers."
}

// Arguments and answers of the tools. The jsonschema tags are the
// descriptions a model reads; the input schemas are written out below
// (inputSchema*) for their bounds.
type searchIn struct {
	Query      string   `json:"query"`
	MaxResults int      `json:"maxResults,omitempty"`
	MinScore   *float64 `json:"minScore,omitempty"`
}

// SearchOut is memory_search's structured answer.
type SearchOut struct {
	Results    []memory.ToolHit  `json:"results"`
	Provider   string            `json:"provider"`
	Model      string            `json:"model"`
	Confidence memory.Confidence `json:"confidence"`
	// Note tells the model when the results are weak (the agents' tool's
	// note, memory.Confidence.Note); "" otherwise.
	Note string `json:"note,omitempty"`
	// RewrittenQuery and RewriteMs say what the chat model's rewrite of
	// the query searched too, and how long the model took in
	// milliseconds (memory.ToolRewrite); omitted when it was not asked.
	RewrittenQuery string `json:"rewrittenQuery,omitempty"`
	RewriteMs      int64  `json:"rewriteMs,omitempty"`
}

type getIn struct {
	Path  string `json:"path"`
	From  int    `json:"from,omitempty"`
	Lines int    `json:"lines,omitempty"`
}

type writeIn struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Mode        string `json:"mode"`
	BaseVersion string `json:"baseVersion,omitempty"`
}

type noteIn struct {
	Text string `json:"text"`
}

var (
	inputSearch = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
		`"query":{"type":"string","minLength":1,"maxLength":%[1]d,"description":"What to look for: keywords, names, identifiers (e.g. QK-7731) or a whole question, in any language (at most %[1]d characters)."},`+
		`"maxResults":{"type":"integer","minimum":1,"maximum":20,"description":"How many passages to return (default 6)."},`+
		`"minScore":{"type":"number","minimum":0,"maximum":1,"description":"Lowest relevance score to return, 0-1. Leave it out: the default floor is calibrated for the query's length (0.24-0.28). 0 returns everything ranked."}`+
		`},"required":["query"],"additionalProperties":false}`, memory.MaxQueryChars))
	inputGet = json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","minLength":1,"description":"Workspace-relative path of a memory Markdown file, as memory_search or the resources name it, e.g. memory/global/decisions.md or MEMORY.md."},` +
		`"from":{"type":"integer","minimum":1,"description":"First line to return, 1-based (default 1). Use a search result's startLine."},` +
		`"lines":{"type":"integer","minimum":1,"description":"How many lines to return (default: to the end of the file)."}` +
		`},"required":["path"],"additionalProperties":false}`)
	inputWrite = json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","minLength":1,"description":"Workspace-relative path of a memory Markdown file ending in .md, e.g. memory/roles/writer/style.md. A new file is created; its folder must be one this client may write."},` +
		`"content":{"type":"string","description":"Markdown to append (mode append) or the whole new text of the file (mode replace)."},` +
		`"mode":{"enum":["append","replace"],"description":"append adds content at the end (daily logs accept nothing else); replace swaps the whole text."},` +
		`"baseVersion":{"type":"string","description":"The version memory_get (or the last memory_write) returned for this file. With it a concurrent edit is detected: appends merge, a replace keeps both texts as a conflict for the person. Leave it out for a new file."}` +
		`},"required":["path","content","mode"],"additionalProperties":false}`)
	inputNote = json.RawMessage(`{"type":"object","properties":{` +
		`"text":{"type":"string","minLength":1,"description":"One fact or event to remember, in a sentence; it is appended to today's daily log with the time."}` +
		`},"required":["text"],"additionalProperties":false}`)
)

func ptr[T any](v T) *T { return &v }

func (s *Server) addTools() {
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolSearch, Title: "Search memory", InputSchema: inputSearch,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
		Description: "Search the Markdown memory this client may read (hybrid keyword + semantic, CJK aware). " +
			"Returns the best passages, each with its file path, line range, score (0-1, higher is better), layer " +
			"(global, role or session), role and a snippet of up to 700 characters, and the search's confidence " +
			"(high, medium or low) that they answer the query; with low confidence a note says so. When the app's chat " +
			"model put a weakly answered query into other words, rewrittenQuery is what was searched too and rewriteMs " +
			"how long the model took. An empty list " +
			"means nothing relevant is in memory. Read more of a file with memory_get (path, from: startLine)."}, s.search)
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolGet, Title: "Read a memory file", InputSchema: inputGet,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
		Description: "Read a memory Markdown file this client may read, whole or some of its lines. " +
			"Returns its path, text and version; pass the version as memory_write's baseVersion when you change the file."}, s.get)
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolWrite, Title: "Write a memory file", InputSchema: inputWrite,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
		Description: "Append to or replace a memory Markdown file this client may write. Returns the file's new version; " +
			"merged: true when a concurrent edit was merged; conflict when the other text was kept as a conflict " +
			"record for the person; pending: true when the file holds decisions and the person must choose (nothing written yet). " +
			"Daily logs (YYYY-MM-DD.md) are append-only."}, s.write)
	mcp.AddTool(s.srv, &mcp.Tool{Name: ToolNote, Title: "Note in today's log", InputSchema: inputNote,
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(false)},
		Description: "Append one timestamped line (- HH:MM:SS text) to this client's role's daily log " +
			"(memory/roles/<role>/YYYY-MM-DD.md). Use it for facts and events worth remembering; use memory_write for curated files."}, s.note)
}

// search maps memory_search's arguments as the agents' tool does
// (memory.ToolMinScore, memory.ToolHits).
func (s *Server) search(ctx context.Context, _ *mcp.CallToolRequest, a searchIn) (*mcp.CallToolResult, SearchOut, error) {
	o := memory.SearchOptions{Query: a.Query, MaxResults: a.MaxResults, MinScore: memory.ToolMinScore(a.MinScore)}
	res, err := s.o.Memory.Search(ctx, s.o.Role, o)
	if err != nil {
		return nil, SearchOut{}, s.refusal(ToolSearch, err)
	}
	out := SearchOut{Results: memory.ToolHits(res.Results), Provider: res.Provider, Model: res.Model,
		Confidence: res.Confidence, Note: res.Confidence.Note()}
	rw := res.ToolRewrite()
	out.RewrittenQuery, out.RewriteMs = rw.RewrittenQuery, rw.RewriteMs
	return nil, out, nil
}

func (s *Server) get(ctx context.Context, _ *mcp.CallToolRequest, a getIn) (*mcp.CallToolResult, GetResult, error) {
	res, err := s.o.Memory.Get(ctx, s.o.Role, memory.GetOptions{Path: a.Path, From: a.From, Lines: a.Lines})
	if err != nil {
		return nil, GetResult{}, s.refusal(ToolGet, err)
	}
	return nil, res, nil
}

// write and note answer memory.WriteResult as an untyped value: its
// conflict record has fields whose JSON form is not their Go type's (a
// version vector is a string), so no output schema is derived from it.
func (s *Server) write(ctx context.Context, _ *mcp.CallToolRequest, a writeIn) (*mcp.CallToolResult, any, error) {
	res, err := s.o.Memory.Write(ctx, s.o.Role, memory.WriteRequest{Path: a.Path, Content: a.Content, Mode: a.Mode, BaseVersion: a.BaseVersion})
	if err != nil {
		return nil, nil, s.refusal(ToolWrite, err)
	}
	s.Refresh(ctx, []string{res.Path})
	return nil, res, nil
}

func (s *Server) note(ctx context.Context, _ *mcp.CallToolRequest, a noteIn) (*mcp.CallToolResult, any, error) {
	res, err := s.o.Memory.Note(ctx, s.o.Role, a.Text)
	if err != nil {
		return nil, nil, s.refusal(ToolNote, err)
	}
	s.Refresh(ctx, []string{res.Path})
	return nil, res, nil
}

// refusal is a tool's error as the model sees it (a tool result with
// isError), logged with the tool's name.
func (s *Server) refusal(tool string, err error) error {
	s.o.Logger.Info("mcp tool call refused", "tool", tool, "role", s.o.Role, "err", err)
	return fmt.Errorf("%s: %w", tool, err)
}

// URIOf is the resource URI of a workspace-relative path: URIPrefix and
// the path with "%", "#", "?", ASCII control characters and DEL
// percent-encoded (RFC 3986 §2.1), every other character as it is
// (Chinese names stay readable). The result is a URI the SDK accepts
// (its AddResource panics on one that does not parse: a file named
// "100%ok.md" once took the server down) and that names exactly that
// path; PathOf reverses it.
func URIOf(rel string) string {
	var b strings.Builder
	b.Grow(len(URIPrefix) + len(rel))
	b.WriteString(URIPrefix)
	for i := 0; i < len(rel); i++ {
		c := rel[i]
		if c == '%' || c == '#' || c == '?' || c < 0x20 || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// PathOf is the workspace-relative path of a resource URI (percent
// escapes decoded, so both URIOf's form and a fully escaped one work);
// false when uri is not an Atrium memory URI or has a malformed escape.
func PathOf(uri string) (string, bool) {
	rel, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok || rel == "" {
		return "", false
	}
	rel, err := url.PathUnescape(rel)
	return rel, err == nil && rel != ""
}

func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	rel, ok := PathOf(req.Params.URI)
	if !ok {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	res, err := s.o.Memory.Get(ctx, s.o.Role, memory.GetOptions{Path: rel})
	if err != nil {
		s.o.Logger.Info("mcp resource read refused", "role", s.o.Role, "err", err)
		if errors.Is(err, memory.ErrForbidden) || errors.Is(err, memory.ErrNotFound) || errors.Is(err, memory.ErrInvalidPath) {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		return nil, fmt.Errorf("read %s: %w", req.Params.URI, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: res.Text}}}, nil
}

// subscribe accepts a subscription to a resource the role is offered.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	if !s.known {
		s.Refresh(ctx, nil)
	}
	s.mu.Lock()
	_, ok := s.files[req.Params.URI]
	s.mu.Unlock()
	if !ok {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	return nil
}

// Refresh brings the resources up to date with the files the role may
// read (one listing, audited): files that appeared are added and files
// gone removed (the SDK sends notifications/resources/list_changed), and
// subscribers of the changed files (workspace-relative paths, e.g. from a
// memory.changed event) and of files whose size or time changed get
// notifications/resources/updated. A failed listing is logged and leaves
// the resources as they were.
func (s *Server) Refresh(ctx context.Context, changed []string) {
	files, err := s.o.Memory.Files(ctx, s.o.Role)
	if err != nil {
		s.o.Logger.Warn("mcp resource listing failed", "role", s.o.Role, "err", err)
		return
	}
	now := make(map[string]memory.FileInfo, len(files))
	for _, f := range files {
		now[URIOf(f.Path)] = f
	}
	s.mu.Lock()
	var added, updated []string
	var gone []string
	for uri, f := range now {
		old, ok := s.files[uri]
		switch {
		case !ok:
			added = append(added, uri)
		case old.MTime != f.MTime || old.Size != f.Size:
			updated = append(updated, uri)
		}
	}
	for uri := range s.files {
		if _, ok := now[uri]; !ok {
			gone = append(gone, uri)
		}
	}
	first := !s.known
	s.files, s.known = now, true
	s.mu.Unlock()
	for _, p := range changed {
		uri := URIOf(p)
		if _, ok := now[uri]; ok && !contains(updated, uri) && !contains(added, uri) {
			updated = append(updated, uri)
		}
	}
	sort.Strings(added)
	for _, uri := range added {
		f := now[uri]
		desc := "memory file, layer " + f.Layer
		if f.Role != "" {
			desc += ", role " + f.Role
		}
		s.srv.AddResource(&mcp.Resource{URI: uri, Name: f.Path, MIMEType: "text/markdown", Size: f.Size, Description: desc}, s.readResource)
	}
	if len(gone) > 0 {
		s.srv.RemoveResources(gone...)
	}
	if first {
		return
	}
	sort.Strings(updated)
	for _, uri := range updated {
		if err := s.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			s.o.Logger.Warn("mcp resource update notification failed", "uri", uri, "err", err)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (s *Server) layersPrompt(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return &mcp.GetPromptResult{Description: "Atrium's memory layers",
		Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: layersText(s.o.Role)}}}}, nil
}

func layersText(role string) string {
	me := "your role `" + role + "`"
	log := "memory/roles/" + role + "/YYYY-MM-DD.md"
	if role == Authenticated {
		me, log = "an authenticated client without a role", "(none: a client without a role has no daily log)"
	}
	return "You use Atrium's memory as " + me + ". Memory is plain Markdown in a workspace, in three layers:\n\n" +
		"- L1 global (memory/global/…, MEMORY.md): context shared by every role — people, projects, decisions. " +
		"Every change is broadcast at once.\n" +
		"- L2 role (memory/roles/<role>/…): one role's private expertise and its daily logs (YYYY-MM-DD.md, append-only). " +
		"Your daily log is " + log + ".\n" +
		"- L3 session (memory/sessions/<id>/…): short-lived notes of one session; they expire and may be promoted into L2 or L1.\n\n" +
		"An ACL (memory/.acl) decides who reads and writes each file; files you may not read do not exist for you, " +
		"and every access is audited. Use memory_search first (it returns path, line range, score and snippet), " +
		"memory_get to read a file (it returns the file's version), memory_write with that version as baseVersion " +
		"to change a file (a concurrent edit is merged for appends, kept as a conflict for the person otherwise, and " +
		"files of decisions wait for the person), and memory_note for one line in today's log. Each file is also a " +
		"resource (" + URIPrefix + "<path>) you may subscribe to."
}
