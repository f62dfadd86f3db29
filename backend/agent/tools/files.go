package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/safefile"
)

// File tool defaults.
const (
	// DefaultMaxReadBytes caps what read_file returns of one file.
	DefaultMaxReadBytes = 256 << 10
	// DefaultMaxWriteBytes caps write_file's content.
	DefaultMaxWriteBytes = 1 << 20
)

// FilesOptions configure read_file and write_file.
type FilesOptions struct {
	// MaxReadBytes caps what read_file returns (the rest is cut and said
	// so). Default DefaultMaxReadBytes (256 KiB).
	MaxReadBytes int
	// MaxWriteBytes caps write_file's content. Default DefaultMaxWriteBytes (1 MiB).
	MaxWriteBytes int
	// Deny lists extra workspace-relative globs (path.Match syntax, matched
	// against the canonical path and each of its parent folders) that the
	// file tools refuse outside memory, e.g. "build/*" or "secrets".
	// Paths with a segment starting with "." are always refused.
	Deny []string
}

const (
	readFileSchema = `{"type":"object","properties":{` +
		`"path":{"type":"string","minLength":1,"description":"workspace-relative path, e.g. notes/todo.txt or memory/global/decisions.md"},` +
		`"from":{"type":"integer","minimum":1,"description":"first line (1-based; default 1)"},` +
		`"lines":{"type":"integer","minimum":1,"description":"how many lines (default: to the end)"}` +
		`},"required":["path"],"additionalProperties":false}`
	writeFileSchema = `{"type":"object","properties":{` +
		`"path":{"type":"string","minLength":1,"description":"workspace-relative path"},` +
		`"content":{"type":"string","description":"the text to write"},` +
		`"mode":{"enum":["replace","append"],"description":"replace the file (default) or append to it"}` +
		`},"required":["path","content"],"additionalProperties":false}`
)

func (e *env) registerFiles(r *agent.Registry) error {
	if e.o.Files.MaxReadBytes <= 0 {
		e.o.Files.MaxReadBytes = DefaultMaxReadBytes
	}
	if e.o.Files.MaxWriteBytes <= 0 {
		e.o.Files.MaxWriteBytes = DefaultMaxWriteBytes
	}
	for _, g := range e.o.Files.Deny {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("files: deny glob %q: %w", g, err)
		}
	}
	if err := r.Register(agent.Spec{Name: ReadFile, Level: agent.L0, Timeout: 10 * time.Second, Schema: json.RawMessage(readFileSchema),
		Description: "Read a text file inside the workspace (memory files only if this agent may read them)."}, e.readFile); err != nil {
		return err
	}
	return r.Register(agent.Spec{Name: WriteFile, Level: agent.L1, Timeout: 30 * time.Second, Schema: json.RawMessage(writeFileSchema),
		Description: "Write a text file inside the workspace (memory files only if this agent may write them; daily logs append-only)."}, e.writeFile)
}

// mayKnow reports whether the agent may learn that the workspace-relative
// path rel exists: a memory file it may read, or a workspace file it may
// reach. A refusal names an existing file only then.
func (e *env) mayKnow(rel string) bool {
	if _, ok := acl.Name(rel); ok {
		return e.o.Guard.Readable(e.p, rel)
	}
	return e.refusedWorkspaceFile(rel) == ""
}

// resolve canonicalises raw for op and decides whether the agent may do
// action on it; it records one audit entry for the decision. isMem tells
// whether rel is memory (then ACL-checked; else the workspace-file rules).
func (e *env) resolve(op string, action acl.Action, raw string) (rel string, isMem bool, err error) {
	ws := e.o.Guard.Workspace()
	rel, err = acl.Canonicalize(ws, raw)
	if err != nil {
		var pe *acl.PathError
		if errors.As(err, &pe) {
			if pe.Existing != "" && !e.mayKnow(pe.Existing) {
				return "", false, e.deny(op, raw, pe.Concealed)
			}
			return "", false, e.deny(op, raw, pe.Reason)
		}
		// The workspace could not be read: not shown safe, so refused.
		return "", false, e.deny(op, raw, err.Error())
	}
	if _, ok := acl.Name(rel); ok {
		if _, err := e.o.Guard.Check(e.p, op, action, rel); err != nil {
			return "", true, mapErr(err)
		}
		return rel, true, nil
	}
	if reason := e.refusedWorkspaceFile(rel); reason != "" {
		return "", false, e.deny(op, rel, reason)
	}
	if err := e.allow(op, rel, "workspace file outside memory"); err != nil {
		return "", false, err
	}
	return rel, false, nil
}

// refusedWorkspaceFile says why a non-memory workspace path is refused, or "".
func (e *env) refusedWorkspaceFile(rel string) string {
	segs := strings.Split(rel, "/")
	for _, s := range segs {
		if strings.HasPrefix(s, ".") {
			return "hidden files and folders are not available to agents"
		}
	}
	for i := range segs {
		prefix := strings.Join(segs[:i+1], "/")
		for _, g := range e.o.Files.Deny {
			if ok, _ := path.Match(g, prefix); ok {
				return fmt.Sprintf("denied by the file tools' rule %q", g)
			}
		}
	}
	return ""
}

func (e *env) root() (*os.Root, error) {
	r, err := os.OpenRoot(e.o.Guard.Workspace())
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	return r, nil
}

type readResult struct {
	Path      string `json:"path"`
	Text      string `json:"text"`
	Bytes     int64  `json:"bytes"`
	Truncated bool   `json:"truncated,omitempty"`
}

func (e *env) readFile(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a struct {
		Path  string `json:"path"`
		From  int    `json:"from"`
		Lines int    `json:"lines"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("read_file: %w", err)
	}
	rel, _, err := e.resolve(ReadFile, acl.Read, a.Path)
	if err != nil {
		return agent.Output{}, err
	}
	root, err := e.root()
	if err != nil {
		return agent.Output{}, fmt.Errorf("read_file: %w", err)
	}
	defer root.Close()
	f, err := root.Open(rel) // os.Root: no escape even through a symlink planted since the check
	if errors.Is(err, fs.ErrNotExist) {
		return agent.Output{}, fmt.Errorf("read_file %s: no such file", rel)
	}
	if err != nil {
		return agent.Output{}, fmt.Errorf("read_file %s: %w: %w", rel, agent.ErrDenied, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return agent.Output{}, fmt.Errorf("read_file %s: %w", rel, err)
	}
	if !st.Mode().IsRegular() {
		return agent.Output{}, fmt.Errorf("read_file %s: not a regular file", rel)
	}
	max := e.o.Files.MaxReadBytes
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return agent.Output{}, fmt.Errorf("read_file %s: %w", rel, err)
	}
	res := readResult{Path: rel, Bytes: st.Size()}
	if len(data) > max {
		data, res.Truncated = data[:max], true
		// Do not end inside a character.
		i := len(data) - 1
		for i > 0 && i > len(data)-utf8.UTFMax && !utf8.RuneStart(data[i]) {
			i--
		}
		if i >= 0 && !utf8.FullRune(data[i:]) {
			data = data[:i]
		}
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return agent.Output{}, fmt.Errorf("read_file %s: binary file (%d bytes)", rel, st.Size())
	}
	text := strings.ToValidUTF8(string(data), "\uFFFD")
	if a.From > 0 || a.Lines > 0 {
		text = sliceLines(text, a.From, a.Lines)
	}
	res.Text = text
	return agent.Output{Data: res, LogSummary: fmt.Sprintf("read %s (%d bytes)", rel, len(data))}, nil
}

// sliceLines returns lines from..from+n-1 (1-based; 0 = start / to the end).
func sliceLines(text string, from, n int) string {
	lines := strings.SplitAfter(text, "\n")
	if from < 1 {
		from = 1
	}
	if from > len(lines) {
		return ""
	}
	end := len(lines)
	if n > 0 && from-1+n < end {
		end = from - 1 + n
	}
	return strings.Join(lines[from-1:end], "")
}

func (e *env) writeFile(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Mode    string `json:"mode"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("write_file: %w", err)
	}
	if a.Mode == "" {
		a.Mode = memory.WriteReplace
	}
	switch {
	case len(a.Content) > e.o.Files.MaxWriteBytes:
		return agent.Output{}, fmt.Errorf("write_file: content is %d bytes, limit %d", len(a.Content), e.o.Files.MaxWriteBytes)
	case strings.IndexByte(a.Content, 0) >= 0:
		return agent.Output{}, errors.New("write_file: content is binary (NUL byte)")
	}
	ws := e.o.Guard.Workspace()
	if rel, err := acl.Canonicalize(ws, a.Path); err == nil {
		if _, ok := acl.Name(rel); ok {
			// Memory: the engine writes it (versioned, atomic, indexed),
			// checked and audited once as write_file.
			res, err := e.writeMemory(ctx, WriteFile, rel, a.Content, a.Mode, "")
			if err != nil {
				return agent.Output{}, fmt.Errorf("write_file: %w", err)
			}
			return agent.Output{Data: res, LogSummary: writeSummary(res, a.Mode)}, nil
		}
	}
	rel, _, err := e.resolve(WriteFile, acl.Write, a.Path)
	if err != nil {
		return agent.Output{}, err
	}
	root, err := e.root()
	if err != nil {
		return agent.Output{}, fmt.Errorf("write_file: %w", err)
	}
	defer root.Close()
	n, err := writeAtomic(root, rel, a.Content, a.Mode == memory.WriteAppend)
	if le := (*safefile.LookalikeError)(nil); errors.As(err, &le) && !e.mayKnow(le.Existing) {
		err = &safefile.LookalikeError{Name: le.Name} // names no file
	}
	if err != nil {
		return agent.Output{}, fmt.Errorf("write_file %s: %w", rel, err)
	}
	return agent.Output{Data: map[string]any{"path": rel, "bytes": n, "mode": a.Mode},
		LogSummary: fmt.Sprintf("wrote %s (%d bytes, %s)", rel, n, a.Mode)}, nil
}

// writeAtomic writes (or appends to) rel under root atomically (package
// safefile: a temp file in the same folder, fsync, rename), keeping the
// mode and owner of the file it replaces; a new file gets
// safefile.DefaultPerm minus the umask. A new file or folder whose name
// looks like an existing one (safefile.CheckNew: NFKC, case folding and the
// UTS #39 confusable skeleton, so `ＮＯＴＥＳ.txt` or `nоtes.txt` with a
// Cyrillic о beside `notes.txt`) is refused, naming it. It returns the
// file's new size.
func writeAtomic(root *os.Root, rel, content string, appendTo bool) (int, error) {
	data := []byte(content)
	if st, err := root.Stat(rel); err == nil {
		if !st.Mode().IsRegular() {
			return 0, errors.New("not a regular file")
		}
		if appendTo {
			old, err := root.ReadFile(rel)
			if err != nil {
				return 0, err
			}
			data = append(old, data...)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	} else if err := safefile.CheckNew(root, rel); err != nil {
		return 0, err
	}
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return 0, err
		}
	}
	tmp, err := safefile.NewTemp(root, rel, data, safefile.Options{})
	if err != nil {
		return 0, err
	}
	defer tmp.Close()
	if err := tmp.Replace(); err != nil {
		return 0, err
	}
	return len(data), nil
}
