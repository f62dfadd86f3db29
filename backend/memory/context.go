package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/acl"
)

// OpenClaw workspaces, whole (issue 15, item 6).
//
// Besides MEMORY.md and memory/, an OpenClaw workspace holds the main
// agent's persona and standing context at its root: AGENTS.md, SOUL.md,
// TOOLS.md, IDENTITY.md, USER.md, HEARTBEAT.md (acl.ContextFiles).
// OpenClaw puts them in the main agent's system prompt on every run; so
// does Atrium (MainContext, through chat.Options.MainContext). They are
// role main's files: readable with memory_get (by the rule that governs
// MEMORY.md, main and admin by default), listed by Files (Context set) for
// the memory panel, and not indexed. Not indexing them is measured, not
// assumed: indexed, they entered the top 5 of the corpora's questions
// about notes and daily logs as noise (docs/BENCHMARKS.md), and what they
// say is in every one of main's runs anyway.

// MaxContextFileChars caps each context file in MainContext (characters);
// a longer file is cut, with a note saying so. 20,000 is OpenClaw's
// default per-file cap for the same files.
const MaxContextFileChars = 20000

// contextFiles lists the context files present at the workspace root, in
// acl.ContextFiles order. A file that is not a regular file, or a symlink
// leaving the workspace, is left out.
func (m *Manager) contextFiles() []FileInfo {
	var out []FileInfo
	for _, name := range acl.ContextFiles() {
		_, info, err := m.resolveInside(filepath.Join(m.ws, name))
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		out = append(out, FileInfo{Path: name, Size: info.Size(), MTime: info.ModTime().UnixMilli(), Layer: LayerRole, Role: MainRole, Context: true})
	}
	return out
}

// MainContext returns role main's standing context for its system prompt:
// each context file present at the workspace root (acl.ContextFiles
// order) under a "## <name>" heading, each cut at MaxContextFileChars. ""
// when there is none (an Atrium-layout workspace). A file that cannot be
// read is left out and named in the error, which comes with the rest.
func (m *Manager) MainContext(ctx context.Context) (string, error) {
	var b strings.Builder
	var errs []error
	for _, f := range m.contextFiles() {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("main context: %w", err)
		}
		g, err := m.Get(ctx, GetOptions{Path: f.Path})
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrNotFound) {
				errs = append(errs, err)
			}
			continue
		}
		text := strings.TrimSpace(g.Text)
		if text == "" {
			continue
		}
		if utf8.RuneCountInString(text) > MaxContextFileChars {
			text = string([]rune(text)[:MaxContextFileChars]) + fmt.Sprintf("\n\n[… %s is longer; cut at %d characters. Read the rest with memory_get.]", f.Path, MaxContextFileChars)
		}
		if b.Len() == 0 {
			b.WriteString("# Workspace context\n\nThese files at the root of the workspace are your persona and standing context " +
				"(OpenClaw's workspace files). Follow them as your own instructions.\n")
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", f.Path, text)
	}
	if len(errs) > 0 {
		return b.String(), fmt.Errorf("main context: %w", errors.Join(errs...))
	}
	return b.String(), nil
}
