package memory

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttach: a picture lands beside its note and the note links it; a
// note that cannot take the link (it would pass MaxFileBytes) leaves no
// picture behind; a taken name, a name that is no picture, an empty or
// oversized picture and a path that is no note are refused with nothing
// written; the picture is not indexed.
func TestAttach(t *testing.T) {
	ctx := context.Background()
	files := teamFiles()
	files["memory/global/trip.md"] = "# Trip\n"
	files["memory/global/full.md"] = "# Full\n" + strings.Repeat("x", MaxFileBytes-10) + "\n"
	f, _ := newSessionFixture(t, files, nil)
	exists := func(rel string) bool {
		_, err := os.Lstat(filepath.Join(f.ws, filepath.FromSlash(rel)))
		return err == nil
	}
	pic := []byte("\x89PNG\r\n\x1a\n pixels")
	res, err := f.m.Attach(ctx, AttachRequest{Note: "memory/global/trip.md", Name: "2026-12-03-abc.png", Data: pic, Alt: "the [lake]\nat dusk", Writer: AdminWriter})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attachment != "memory/global/attachments/2026-12-03-abc.png" || res.Note.Path != "memory/global/trip.md" || res.Note.Version == "" {
		t.Fatalf("attach: %+v", res)
	}
	if got, err := os.ReadFile(filepath.Join(f.ws, "memory", "global", "attachments", "2026-12-03-abc.png")); err != nil || !bytes.Equal(got, pic) {
		t.Errorf("attachment: %q %v", got, err)
	}
	note, _ := os.ReadFile(filepath.Join(f.ws, "memory", "global", "trip.md"))
	if !strings.HasSuffix(string(note), "\n![the lake at dusk](attachments/2026-12-03-abc.png)\n") {
		t.Errorf("note: %q", note)
	}
	if err := f.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	fis, err := f.m.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, fi := range fis {
		if strings.Contains(fi.Path, "attachments") {
			t.Errorf("indexed %s", fi.Path)
		}
	}

	for _, tc := range []struct {
		what string
		r    AttachRequest
		want error
		left string
	}{
		{"taken name", AttachRequest{Note: "memory/global/trip.md", Name: "2026-12-03-abc.png", Data: []byte("other")}, ErrExists, ""},
		{"note too full", AttachRequest{Note: "memory/global/full.md", Name: "a.png", Data: pic}, ErrInvalidInput, "memory/global/attachments/a.png"},
		{"not a picture", AttachRequest{Note: "memory/global/trip.md", Name: "x.sh", Data: pic}, ErrInvalidPath, "memory/global/attachments/x.sh"},
		{"a path in the name", AttachRequest{Note: "memory/global/trip.md", Name: "../x.png", Data: pic}, ErrInvalidPath, "memory/global/x.png"},
		{"hidden name", AttachRequest{Note: "memory/global/trip.md", Name: ".x.png", Data: pic}, ErrInvalidPath, "memory/global/attachments/.x.png"},
		{"empty", AttachRequest{Note: "memory/global/trip.md", Name: "e.png"}, ErrInvalidInput, "memory/global/attachments/e.png"},
		{"too large", AttachRequest{Note: "memory/global/trip.md", Name: "big.png", Data: make([]byte, MaxAttachmentBytes+1)}, ErrInvalidInput, "memory/global/attachments/big.png"},
		{"no note", AttachRequest{Note: "memory/global/photo.png", Name: "n.png", Data: pic}, ErrInvalidPath, "memory/global/attachments/n.png"},
	} {
		tc.r.Writer = AdminWriter
		if _, err := f.m.Attach(ctx, tc.r); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.what, err, tc.want)
		}
		if tc.left != "" && exists(tc.left) {
			t.Errorf("%s: %s was left", tc.what, tc.left)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(f.ws, "memory", "global", "attachments", "2026-12-03-abc.png")); !bytes.Equal(got, pic) {
		t.Errorf("the taken name was overwritten: %q", got)
	}
	ents, _ := os.ReadDir(filepath.Join(f.ws, "memory", "global", "attachments"))
	if len(ents) != 1 {
		t.Errorf("attachments folder: %v, want the one picture (no temp files)", ents)
	}
}
