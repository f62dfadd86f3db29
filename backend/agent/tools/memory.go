package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
)

// Schemas of the memory tools (SPEC §4.3).
const (
	// memorySearchSchema has %[1]d for memory.MaxQueryChars.
	memorySearchSchema = `{"type":"object","properties":{` +
		`"query":{"type":"string","minLength":1,"maxLength":%[1]d,"description":"what to look for: keywords, names, identifiers or a question (at most %[1]d characters)"},` +
		`"maxResults":{"type":"integer","minimum":1,"maximum":20,"description":"how many passages to return (default 6)"},` +
		`"minScore":{"type":"number","minimum":0,"maximum":1,"description":"lowest relevance score to return (0-1; default: a floor calibrated for the query's length, 0.13-0.28)"}` +
		`},"required":["query"],"additionalProperties":false}`
	memoryGetSchema = `{"type":"object","properties":{` +
		`"path":{"type":"string","minLength":1,"description":"workspace-relative path of a memory Markdown file, e.g. memory/global/decisions.md"},` +
		`"from":{"type":"integer","minimum":1,"description":"first line (1-based; default 1)"},` +
		`"lines":{"type":"integer","minimum":1,"description":"how many lines (default: to the end)"}` +
		`},"required":["path"],"additionalProperties":false}`
	memoryWriteSchema = `{"type":"object","properties":{` +
		`"path":{"type":"string","minLength":1,"description":"workspace-relative path of a memory Markdown file"},` +
		`"content":{"type":"string","description":"the text to append, or the whole new text"},` +
		`"mode":{"enum":["append","replace"],"description":"append (default for daily logs) or replace"},` +
		`"baseVersion":{"type":"string","description":"the version the write is based on, from a previous write"}` +
		`},"required":["path","content","mode"],"additionalProperties":false}`
	memoryNoteSchema = `{"type":"object","properties":{` +
		`"text":{"type":"string","minLength":1,"description":"one fact or event to remember, appended to today's log"}` +
		`},"required":["text"],"additionalProperties":false}`
)

func (e *env) registerMemory(r *agent.Registry) error {
	specs := []struct {
		spec agent.Spec
		h    agent.Handler
	}{
		{agent.Spec{Name: MemorySearch, Level: agent.L0, Timeout: 30 * time.Second, MaxRetries: 1, Schema: json.RawMessage(fmt.Sprintf(memorySearchSchema, memory.MaxQueryChars)),
			Description: "Search the Markdown memory this agent may read (hybrid keyword + semantic). Returns passages with path, line range, score and snippet."}, e.memorySearch},
		{agent.Spec{Name: MemoryGet, Level: agent.L0, Timeout: 10 * time.Second, MaxRetries: 1, Schema: json.RawMessage(memoryGetSchema),
			Description: "Read a memory Markdown file (or some of its lines) this agent may read."}, e.memoryGet},
		{agent.Spec{Name: MemoryWrite, Level: agent.L1, Timeout: 30 * time.Second, MaxRetries: 1, Schema: json.RawMessage(memoryWriteSchema),
			Description: "Append to or replace a memory Markdown file this agent may write. Daily logs are append-only."}, e.memoryWrite},
		{agent.Spec{Name: MemoryNote, Level: agent.L1, Timeout: 30 * time.Second, MaxRetries: 1, Schema: json.RawMessage(memoryNoteSchema),
			Description: "Append one timestamped line to this agent's daily log (roles/<me>/YYYY-MM-DD.md)."}, e.memoryNote},
	}
	for _, s := range specs {
		if err := r.Register(s.spec, s.h); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) memorySearch(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a struct {
		Query      string   `json:"query"`
		MaxResults int      `json:"maxResults"`
		MinScore   *float64 `json:"minScore"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("memory_search: %w", err)
	}
	o := memory.SearchOptions{Query: a.Query, MaxResults: a.MaxResults, MinScore: memory.ToolMinScore(a.MinScore),
		Readable: func(rel string) bool { return e.o.Guard.Readable(e.p, rel) }}
	res, err := e.o.Memory.Search(e.ctx(ctx), o)
	if err != nil {
		return agent.Output{}, fmt.Errorf("memory_search: %w", mapErr(err))
	}
	// Readable was the scope; FilterSearch re-checks and audits the search.
	if res, err = e.o.Guard.FilterSearch(e.p, a.Query, res); err != nil {
		return agent.Output{}, fmt.Errorf("memory_search: %w", mapErr(err))
	}
	hits := memory.ToolHits(res.Results)
	data := searchData{Results: hits, Provider: res.Provider, Model: res.Model, Confidence: res.Confidence,
		Note: res.Confidence.Note(), ToolRewrite: res.ToolRewrite()}
	return agent.Output{Data: data,
		LogSummary: fmt.Sprintf("%d results", len(hits))}, nil
}

// searchData is memory_search's answer to the model: the results, the
// search's confidence, a note when it is low (memory.Confidence.Note),
// and what the chat model's rewrite searched too (memory.ToolRewrite; the
// gateway's memory.search carries the same fields).
type searchData struct {
	Results    []memory.ToolHit  `json:"results"`
	Provider   string            `json:"provider"`
	Model      string            `json:"model"`
	Confidence memory.Confidence `json:"confidence"`
	Note       string            `json:"note,omitempty"`
	memory.ToolRewrite
}

func (e *env) memoryGet(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a memory.GetOptions
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("memory_get: %w", err)
	}
	rel, err := e.o.Guard.Check(e.p, "get", acl.Read, a.Path)
	if err != nil {
		return agent.Output{}, fmt.Errorf("memory_get: %w", mapErr(err))
	}
	a.Path = rel
	res, err := e.o.Memory.Get(e.ctx(ctx), a)
	if err != nil {
		return agent.Output{}, fmt.Errorf("memory_get: %w", mapErr(err))
	}
	return agent.Output{Data: res, LogSummary: fmt.Sprintf("read %s (%d characters)", res.Path, len([]rune(res.Text)))}, nil
}

func (e *env) memoryWrite(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a struct {
		Path        string `json:"path"`
		Content     string `json:"content"`
		Mode        string `json:"mode"`
		BaseVersion string `json:"baseVersion"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("memory_write: %w", err)
	}
	res, err := e.writeMemory(ctx, "write", a.Path, a.Content, a.Mode, a.BaseVersion)
	if err != nil {
		return agent.Output{}, fmt.Errorf("memory_write: %w", err)
	}
	return agent.Output{Data: res, LogSummary: writeSummary(res, a.Mode)}, nil
}

// writeMemory checks and audits a write of raw as operation op (one entry)
// and writes through the engine as the agent's role.
func (e *env) writeMemory(ctx context.Context, op, raw, content, mode, base string) (memory.WriteResult, error) {
	rel, err := e.o.Guard.Check(e.p, op, acl.Write, raw)
	if err != nil {
		return memory.WriteResult{}, mapErr(err)
	}
	wctx := guard.WithChecked(e.ctx(ctx), rel)
	res, err := e.o.Memory.Write(wctx, memory.WriteRequest{Path: rel, Content: content, Mode: mode, BaseVersion: base,
		Writer: e.p.Role, Session: e.p.Session})
	return res, mapErr(err)
}

func writeSummary(res memory.WriteResult, mode string) string {
	switch {
	case res.Pending:
		return fmt.Sprintf("%s: waits for the person (conflict on a decision file)", res.Path)
	case res.Conflict != nil:
		return fmt.Sprintf("%s: %s, conflict recorded", res.Path, mode)
	case res.Merged:
		return fmt.Sprintf("%s: %s merged with a concurrent edit", res.Path, mode)
	}
	return fmt.Sprintf("%s: %s done, version %s", res.Path, mode, res.Version)
}

func (e *env) memoryNote(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("memory_note: %w", err)
	}
	now := e.o.Now()
	rel, err := e.o.Memory.NotePath(e.p.Role, now)
	if err != nil {
		return agent.Output{}, fmt.Errorf("memory_note: %w", mapErr(err))
	}
	if rel, err = e.o.Guard.Check(e.p, "note", acl.Write, rel); err != nil {
		return agent.Output{}, fmt.Errorf("memory_note: %w", mapErr(err))
	}
	wctx := guard.WithChecked(e.ctx(ctx), rel)
	res, err := e.o.Memory.Note(wctx, memory.NoteRequest{Role: e.p.Role, Text: a.Text, Now: now, Writer: e.p.Role, Session: e.p.Session})
	if err != nil {
		return agent.Output{}, fmt.Errorf("memory_note: %w", mapErr(err))
	}
	return agent.Output{Data: res, LogSummary: "noted in " + res.Path}, nil
}
