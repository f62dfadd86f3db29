package api

import (
	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
)

// FileEntry is one file of memory.files: the engine's FileInfo (path,
// size, mtime, chunks, layer, role) plus, when the app runs the ACL, who
// the rules in force let read, write and collaborate on it and which rule
// decided (issue 4 item 8; docs/PROTOCOL.md).
type FileEntry struct {
	memory.FileInfo
	Access *acl.Grant `json:"access,omitempty"`
}

// fileEntries decorates files (already filtered to what the caller may
// read) with their access; without a guard the entries carry none.
func fileEntries(g *guard.Guard, files []memory.FileInfo) []FileEntry {
	out := make([]FileEntry, 0, len(files))
	for _, f := range files {
		e := FileEntry{FileInfo: f}
		if g != nil {
			if gr, ok := g.Access(f.Path); ok {
				e.Access = &gr
			}
		}
		out = append(out, e)
	}
	return out
}
