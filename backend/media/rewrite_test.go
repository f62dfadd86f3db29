package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// store puts data in s as a finished transfer of command with mime and
// name, and returns its Meta.
func store(t *testing.T, s *Store, data []byte, command, name, mime string) Meta {
	t.Helper()
	p := plan(t, data, 4096, "phone-1")
	p.Command, p.Name, p.MIME, p.Width, p.Height = command, name, mime, 0, 0
	part, err := s.Begin(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Blocks {
		if err := part.WriteBlock(i, block(p, data, i)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := part.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestRewrite: the rewritten file replaces the stored one, the sidecar
// names its size and SHA-256 and keeps the sender's as sourceSize and
// sourceSha256 (a second rewrite keeps the first source); a failing or
// empty rewrite, or one whose media is deleted meanwhile, leaves the file,
// the sidecar (or the deletion) as they were and no temporary file.
func TestRewrite(t *testing.T) {
	s := open(t, Options{})
	orig := randomData(10_000, 7)
	m := store(t, s, orig, "camera.clip", "clip.webm", "video/webm")
	appendTo := func(extra string) RewriteFunc {
		return func(_ context.Context, src, dst string) error {
			b, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(filepath.Base(dst), "rewrite-") || filepath.Ext(dst) != ".webm" {
				t.Errorf("rewrite into %s", dst)
			}
			return os.WriteFile(dst, append(b, extra...), 0o600)
		}
	}
	nm, err := s.Rewrite(context.Background(), m.ID, appendTo("one"))
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{}, orig...), "one"...)
	got, err := os.ReadFile(filepath.Join(s.Dir(), m.File))
	if err != nil || string(got) != string(want) {
		t.Fatalf("the file after the rewrite: %d bytes (%v), want %d", len(got), err, len(want))
	}
	if nm.SHA256 != sum(want) || nm.Size != int64(len(want)) || nm.SourceSHA256 != m.SHA256 || nm.SourceSize != m.Size || nm.File != m.File {
		t.Fatalf("the rewritten sidecar %+v (the original %+v)", nm, m)
	}
	if g, err := s.Get(m.ID); err != nil || g != nm {
		t.Fatalf("Get after the rewrite: %+v, %v; want %+v", g, err, nm)
	}
	nm2, err := s.Rewrite(context.Background(), m.ID, appendTo("two"))
	if err != nil || nm2.SourceSHA256 != m.SHA256 || nm2.SourceSize != m.Size || nm2.Size != nm.Size+3 {
		t.Fatalf("a second rewrite: %+v, %v", nm2, err)
	}

	for name, fn := range map[string]RewriteFunc{
		"fails": func(context.Context, string, string) error { return errors.New("boom") },
		"empty": func(_ context.Context, _, dst string) error { return os.WriteFile(dst, nil, 0o600) },
		"none":  func(context.Context, string, string) error { return nil },
	} {
		if _, err := s.Rewrite(context.Background(), m.ID, fn); !errors.Is(err, ErrRewrite) {
			t.Errorf("a rewrite that %s: %v, want ErrRewrite", name, err)
		}
		if g, _ := s.Get(m.ID); g != nm2 {
			t.Errorf("after a rewrite that %s the sidecar is %+v", name, g)
		}
	}
	_, partial := entries(t, s)
	if len(partial) != 0 {
		t.Errorf("the partial area holds %v", partial)
	}

	// Deleted while the rewrite runs: the file does not come back.
	_, err = s.Rewrite(context.Background(), m.ID, func(ctx context.Context, src, dst string) error {
		if err := s.Delete(m.ID); err != nil {
			return err
		}
		return os.WriteFile(dst, []byte("late"), 0o600)
	})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("a rewrite of a media deleted meanwhile: %v, want ErrNotFound", err)
	}
	top, partial := entries(t, s)
	if len(top) != 0 || len(partial) != 0 {
		t.Fatalf("after the delete the folder holds %v and %v", top, partial)
	}
	if _, err := s.Rewrite(context.Background(), "nope", appendTo("x")); !errors.Is(err, ErrInvalid) {
		t.Errorf("a rewrite of a malformed id: %v", err)
	}
}

// cuesID is the EBML id of Matroska's Cues element (the seek index).
var cuesID = []byte{0x1c, 0x53, 0xbb, 0x6b}

// TestFFmpegRemuxNamesTheDuration: a WebM written live, as MediaRecorder
// writes it (ffmpeg -live 1: no Duration, no Cues; ffprobe says N/A), is
// remuxed by FFmpegRemux into one whose format duration ffprobe reads and
// which has Cues, with the same packets (stream copy); the sidecar keeps
// the live file's checksum as its source. NeedsRemux picks WebM only.
func TestFFmpegRemuxNamesTheDuration(t *testing.T) {
	ffmpeg, err1 := exec.LookPath("ffmpeg")
	ffprobe, err2 := exec.LookPath("ffprobe")
	if err1 != nil || err2 != nil {
		t.Skip("ffmpeg and ffprobe are needed (make deps installs them)")
	}
	dir := t.TempDir()
	live := filepath.Join(dir, "live.webm")
	out, err := exec.Command(ffmpeg, "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10",
		"-f", "lavfi", "-i", "sine=frequency=440", "-t", "2", "-c:v", "libvpx", "-c:a", "libopus", "-live", "1", "-f", "webm", live).CombinedOutput()
	if err != nil {
		t.Fatalf("make a live WebM: %v\n%s", err, out)
	}
	probe := func(path, entries string) string {
		t.Helper()
		out, err := exec.Command(ffprobe, "-v", "error", "-show_entries", entries, "-of", "default=nw=1:nk=1", path).Output()
		if err != nil {
			t.Fatalf("ffprobe %s: %v", path, err)
		}
		return strings.TrimSpace(string(out))
	}
	if d := probe(live, "format=duration"); d != "N/A" {
		t.Fatalf("the live WebM names a duration %q: it does not stand for MediaRecorder's", d)
	}
	data, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, cuesID) {
		t.Fatal("the live WebM has Cues: it does not stand for MediaRecorder's")
	}
	s := open(t, Options{})
	m := store(t, s, data, "camera.clip", "clip.webm", "video/webm;codecs=vp8,opus")
	if !NeedsRemux(m.MIME) || NeedsRemux("video/mp4") || NeedsRemux("image/jpeg") {
		t.Fatal("NeedsRemux picks the wrong types")
	}
	nm, err := s.Rewrite(context.Background(), m.ID, FFmpegRemux(ffmpeg))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir(), nm.File)
	if d := probe(path, "format=duration"); d == "N/A" || d == "" || !strings.HasPrefix(d, "2.") && !strings.HasPrefix(d, "1.9") {
		t.Errorf("the remuxed clip's duration %q, want about 2 s", d)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Contains(got, cuesID) {
		t.Error("the remuxed clip has no Cues element (no seek index)")
	}
	if nm.SHA256 != sum(got) || nm.SourceSHA256 != sum(data) || nm.SourceSize != int64(len(data)) {
		t.Errorf("sidecar %+v: the file's sha256 %s, the source's %s", nm, sum(got), sum(data))
	}
	packets := func(p string) []string {
		return strings.Split(probe(p, "packet=stream_index,size"), "\n")
	}
	if a, b := packets(live), packets(path); !slices.Equal(a, b) {
		t.Errorf("the remux changed the packets: %d before, %d after", len(a), len(b))
	}

	// A file ffmpeg cannot read: ErrRewrite naming ffmpeg's words, the file kept.
	bad := store(t, s, []byte(strings.Repeat("not a webm ", 200)), "camera.clip", "clip.webm", "video/webm")
	if _, err := s.Rewrite(context.Background(), bad.ID, FFmpegRemux(ffmpeg)); !errors.Is(err, ErrRewrite) || !strings.Contains(err.Error(), "ffmpeg") {
		t.Errorf("remux of a damaged file: %v", err)
	}
	if g, err := s.Get(bad.ID); err != nil || g != bad {
		t.Errorf("the damaged file's sidecar after the failed remux: %+v, %v", g, err)
	}
}
