package memory

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// InspectLimit is how many folder entries Inspect looks at before it stops
// counting (a folder chosen by mistake may be a whole disk).
const InspectLimit = 50_000

// WorkspaceSummary is what a folder holds as a workspace (Inspect): what
// the first-start screen shows before the person picks it.
type WorkspaceSummary struct {
	// Notes is the number of Markdown files the index would hold
	// (MEMORY.md, memory/**/*.md; SPEC §4.1), Daily how many of them are
	// dated daily logs (memory/YYYY-MM-DD*.md).
	Notes int `json:"notes"`
	Daily int `json:"daily"`
	// MemoryFile: MEMORY.md (or memory.md) is at the root.
	MemoryFile bool `json:"memoryFile"`
	// Context lists the OpenClaw context files at the root (SOUL.md,
	// USER.md …), read as the main profile's standing context.
	Context []string `json:"context,omitempty"`
	// Sample holds up to 5 of the notes (workspace-relative paths: the
	// undated ones by name, then the newest daily logs).
	Sample []string `json:"sample,omitempty"`
	// Bytes is the size of the notes.
	Bytes int64 `json:"bytes"`
	// Partial: the folder has more than InspectLimit entries; the counts
	// cover the first ones only.
	Partial bool `json:"partial,omitempty"`
}

// Inspect counts what dir holds as an Atrium or OpenClaw workspace,
// without reading any file: the notes it would index, its daily logs,
// MEMORY.md and the OpenClaw context files. Folders whose names start with
// "." are skipped, as the index skips them. A dir that does not exist or is
// not a folder is an error wrapping fs.ErrNotExist or ErrInvalidPath.
func Inspect(dir string) (WorkspaceSummary, error) {
	var s WorkspaceSummary
	st, err := os.Stat(dir)
	if err != nil {
		return s, fmt.Errorf("inspect %s: %w", dir, err)
	}
	if !st.IsDir() {
		return s, fmt.Errorf("inspect %s: %w: not a folder", dir, ErrInvalidPath)
	}
	var daily, other []string
	seen := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // an unreadable subfolder: counted as empty
		}
		if seen++; seen > InspectLimit {
			s.Partial = true
			return fs.SkipAll
		}
		rel, rerr := filepath.Rel(dir, p)
		if rerr != nil || rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir
			}
			// Only the root and memory/ can hold memory (classify).
			if !strings.Contains(rel, "/") && rel != "memory" {
				return fs.SkipDir
			}
			return nil
		}
		k := classify(rel)
		switch {
		case k.context:
			s.Context = append(s.Context, rel)
		case k.indexed:
			s.Notes++
			if info, err := d.Info(); err == nil {
				s.Bytes += info.Size()
			}
			if rel == "MEMORY.md" || rel == "memory.md" {
				s.MemoryFile = true
			}
			if _, ok := logDate(rel); ok {
				s.Daily++
				daily = append(daily, rel)
			} else {
				other = append(other, rel)
			}
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("inspect %s: %w", dir, err)
	}
	slices.SortFunc(daily, func(a, b string) int { return strings.Compare(filepath.Base(b), filepath.Base(a)) })
	slices.Sort(other)
	for _, p := range append(other[:len(other):len(other)], daily...) {
		if len(s.Sample) == 5 {
			break
		}
		s.Sample = append(s.Sample, p)
	}
	slices.Sort(s.Context)
	return s, nil
}
