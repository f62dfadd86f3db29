package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/atrium-dev/atrium/backend/safefile"
)

// MaxAttachmentBytes caps one attachment's file (16 MiB, the size the
// gateway sends a photo inline).
const MaxAttachmentBytes = 16 << 20

// AttachmentDir is the folder, beside the note, that a note's attachments
// go to: the note `memory/roles/main/trip.md` links
// `attachments/<file>`, stored as `memory/roles/main/attachments/<file>`,
// so that the ACL rule that lets a writer change the note usually covers
// its pictures too. Only `.md` files are indexed (paths.go), so the
// pictures are never read as memory text.
const AttachmentDir = "attachments"

// ErrDiskFull: the file system had no room for an attachment (ENOSPC);
// nothing was written.
var ErrDiskFull = errors.New("memory: disk full")

// attachmentExts are the picture types a note may link.
var attachmentExts = map[string]bool{".jpg": true, ".jpeg": true, ".png": true, ".gif": true, ".webp": true}

// AttachRequest is a picture to store beside a note and link from it.
// Note is the note (a memory Markdown path, as Write takes it); Name the
// attachment's file name (one segment, a picture extension: .jpg .jpeg
// .png .gif .webp); Data its bytes (≤ MaxAttachmentBytes); Alt the image
// link's text (one line; brackets and line breaks are replaced). Writer
// and Session as WriteRequest's.
type AttachRequest struct {
	Note    string
	Name    string
	Data    []byte
	Alt     string
	Writer  string
	Session string
}

// AttachResult is what Attach did: the attachment's workspace path and
// the append to the note (Write's result).
type AttachResult struct {
	Attachment string      `json:"attachment"`
	Note       WriteResult `json:"note"`
}

// Attach stores r.Data as <note's folder>/attachments/<Name> (a new file:
// written to a temp file, fsynced, then linked into place; an existing
// name is never replaced) and appends `![Alt](attachments/<Name>)` to the
// note through Write (versions, conflicts, the ACL). Both paths are
// authorized as r.Writer (ActionWrite; the attachment first). When the
// append fails the attachment is removed, so nothing is left half-done; a
// pending append (a decision file) keeps it for the text waiting for the
// person. Errors: ErrInvalidPath (the note, or a name that is not one
// picture file name), ErrInvalidInput (empty or over MaxAttachmentBytes),
// ErrExists (the name is taken), ErrForbidden, ErrDiskFull, and Write's.
func (m *Manager) Attach(ctx context.Context, r AttachRequest) (AttachResult, error) {
	note, err := writablePath(r.Note)
	if err != nil {
		return AttachResult{}, fmt.Errorf("attach: %w", err)
	}
	ext := strings.ToLower(path.Ext(r.Name))
	if r.Name == "" || strings.ContainsAny(r.Name, `/\`) || strings.HasPrefix(r.Name, ".") || !attachmentExts[ext] {
		return AttachResult{}, fmt.Errorf("attach %s: %w: attachment name %q (want one file name ending in .jpg, .jpeg, .png, .gif or .webp)", note, ErrInvalidPath, r.Name)
	}
	switch {
	case len(r.Data) == 0:
		return AttachResult{}, fmt.Errorf("attach %s: %w: the picture is empty", note, ErrInvalidInput)
	case len(r.Data) > MaxAttachmentBytes:
		return AttachResult{}, fmt.Errorf("attach %s: %w: the picture is %d bytes, limit %d", note, ErrInvalidInput, len(r.Data), MaxAttachmentBytes)
	}
	rel := path.Join(path.Dir(note), AttachmentDir, r.Name)
	if err := m.authorize(ctx, r.Writer, r.Session, ActionWrite, rel); err != nil {
		return AttachResult{}, fmt.Errorf("attach %s: %w", rel, err)
	}
	if err := m.writeAttachment(rel, r.Data); err != nil {
		return AttachResult{}, fmt.Errorf("attach %s: %w", rel, err)
	}
	link := "![" + altText(r.Alt) + "](" + AttachmentDir + "/" + r.Name + ")"
	res, err := m.Write(ctx, WriteRequest{Path: note, Content: link, Mode: WriteAppend, Writer: r.Writer, Session: r.Session})
	if err != nil {
		if rerr := os.Remove(filepath.Join(m.ws, filepath.FromSlash(rel))); rerr != nil {
			m.log.Error("memory attach: the note was not written and its picture could not be removed", "path", rel, "err", rerr)
		}
		return AttachResult{}, fmt.Errorf("attach to %s: %w", note, err)
	}
	return AttachResult{Attachment: rel, Note: res}, nil
}

// writeAttachment puts data at rel as a new file (folders made with no
// symlink on the way, look-alike names refused).
func (m *Manager) writeAttachment(rel string, data []byte) error {
	unlock := m.locks.lock(rel)
	defer unlock()
	if err := m.checkNewName(context.Background(), rel); err != nil {
		return err
	}
	dir, err := mkdirNoLinks(m.ws, path.Dir(rel))
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tmp, err := safefile.NewTempIn(root, ".", data, safefile.Options{})
	if err != nil {
		return diskErr(err)
	}
	defer tmp.Close()
	if err := tmp.Link(path.Base(rel)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, rel)
		}
		return diskErr(err)
	}
	return nil
}

// diskErr marks a write that failed for want of space as ErrDiskFull.
func diskErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

// altText makes s one line of image-link text: line breaks become spaces,
// brackets and backslashes that would end the link are dropped, at most
// 200 characters.
func altText(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', '\t':
			return ' '
		case '[', ']', '\\':
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	if rs := []rune(s); len(rs) > 200 {
		s = string(rs[:200])
	}
	return s
}
