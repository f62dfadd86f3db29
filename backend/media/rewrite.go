package media

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/safefile"
)

// ErrRewrite: a RewriteFunc failed or made an empty file; the stored file
// is left as it was.
var ErrRewrite = errors.New("media rewrite failed")

// RewriteFunc writes a new version of the file at the OS path src to the
// OS path dst (a new file in the media folder's partial area, with the
// same extension as src); ctx bounds it. It must not touch src.
type RewriteFunc func(ctx context.Context, src, dst string) error

// Rewrite replaces media id's file with what fn makes of it (e.g.
// FFmpegRemux): fn writes a temporary file in media/.partial/, which is
// hashed, fsynced and renamed over the file inside the folder (one atomic
// step), then the sidecar is replaced (through safefile) with the new Size
// and SHA256, the sender's kept as SourceSize and SourceSHA256 (the first
// rewrite's; a second keeps them), so the checksum the sender computed
// stays provable. A crash between the rename and the sidecar leaves the
// rewritten file under a sidecar naming the sender's checksum; its
// temporary file is swept at the next Open. Errors: as Get; ErrRewrite
// (fn failed, its ctx included, or wrote nothing; the stored file and
// sidecar are unchanged); ErrNotFound when the media was deleted
// meanwhile; the file system's.
func (s *Store) Rewrite(ctx context.Context, id string, fn RewriteFunc) (Meta, error) {
	m, err := s.Get(id)
	if err != nil {
		return Meta{}, err
	}
	tmp := path.Join(partialDir, "rewrite-"+id+ext(m.File))
	_ = s.root.Remove(tmp) // a leftover of an earlier attempt
	placed := false
	defer func() {
		if !placed {
			_ = s.root.Remove(tmp)
		}
	}()
	if err := fn(ctx, path.Join(s.dir, m.File), path.Join(s.dir, tmp)); err != nil {
		return Meta{}, fmt.Errorf("media %s: rewrite: %w: %w", id, ErrRewrite, err)
	}
	f, err := s.root.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return Meta{}, fmt.Errorf("media %s: rewrite made no file: %w: %w", id, ErrRewrite, err)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return Meta{}, fmt.Errorf("media %s: rewritten file: %w", id, diskErr(err))
	case n == 0:
		return Meta{}, fmt.Errorf("media %s: the rewrite made an empty file: %w", id, ErrRewrite)
	}
	nm := m
	nm.Size, nm.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	if nm.SourceSHA256 == "" {
		nm.SourceSHA256, nm.SourceSize = m.SHA256, m.Size
	}
	b, err := json.MarshalIndent(nm, "", "  ")
	if err != nil {
		return Meta{}, fmt.Errorf("media %s: %w", id, err)
	}

	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if cur, err := s.Get(id); err != nil {
		return Meta{}, err // deleted while fn ran
	} else if cur.SHA256 != m.SHA256 {
		return Meta{}, fmt.Errorf("media %s: changed while it was rewritten: %w", id, ErrRewrite)
	}
	if err := s.root.Rename(tmp, m.File); err != nil {
		return Meta{}, fmt.Errorf("media %s: place rewritten file: %w", id, diskErr(err))
	}
	placed = true
	s.syncDir(".")
	t, err := safefile.NewTemp(s.root, id+".json", append(b, '\n'), safefile.Options{Perm: 0o600, Exact: true})
	if err == nil {
		err = t.Replace()
		t.Close()
	}
	if err != nil {
		return Meta{}, fmt.Errorf("media %s: sidecar of the rewritten file: %w", id, diskErr(err))
	}
	return nm, nil
}

// DefaultRemuxTimeout bounds one FFmpegRemux run when its ctx has no
// earlier deadline: a stream copy of a 60 s clip takes well under a second.
const DefaultRemuxTimeout = 60 * time.Second

// NeedsRemux reports whether a stored file of this MIME type is remuxed
// after its transfer: WebM (MediaRecorder's, in Chromium and Firefox,
// names no duration and has no cues, so players cannot show its length or
// seek). MIME parameters (codecs) are ignored.
func NeedsRemux(mime string) bool {
	base, _, _ := strings.Cut(mime, ";")
	return strings.EqualFold(strings.TrimSpace(base), "video/webm")
}

// FFmpegRemux is a RewriteFunc that remuxes src into dst with the ffmpeg
// binary at ffmpeg, copying the streams (`-map 0 -c copy`: no re-encoding,
// the pictures and sound are bit for bit the sender's), so that the
// output's container is written whole: for WebM the Duration element and
// the Cues (seek index) a live recording lacks. The run ends with ctx or
// after DefaultRemuxTimeout (the process is killed); its stderr (at most
// 4 KiB) is in the error.
func FFmpegRemux(ffmpeg string) RewriteFunc {
	return func(ctx context.Context, src, dst string) error {
		ctx, cancel := context.WithTimeout(ctx, DefaultRemuxTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error",
			"-i", src, "-map", "0", "-c", "copy", "-n", dst)
		var stderr capped
		cmd.Stderr = &stderr
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("ffmpeg remux: %w (%w)", ctx.Err(), err)
			}
			return fmt.Errorf("ffmpeg remux: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
}

// capped keeps the first 4 KiB written to it.
type capped struct{ b []byte }

func (c *capped) Write(p []byte) (int, error) {
	if room := 4096 - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capped) String() string { return string(c.b) }
