package media

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// plan cuts data into blocks of bs bytes.
func plan(t *testing.T, data []byte, bs int, device string) Plan {
	t.Helper()
	p := Plan{ID: NewID(), Device: device, Command: "camera.snap", Name: "photo.JPG", Size: int64(len(data)),
		SHA256: sha256.Sum256(data), BlockSize: bs, MIME: "image/jpeg", Width: 640, Height: 480, Transport: TransportWebRTC}
	for off := 0; off < len(data); off += bs {
		p.Blocks = append(p.Blocks, sha256.Sum256(data[off:min(off+bs, len(data))]))
	}
	return p
}

func block(p Plan, data []byte, i int) []byte {
	off := i * p.BlockSize
	return data[off : off+p.BlockLen(i)]
}

func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func open(t *testing.T, o Options) *Store {
	t.Helper()
	if o.FreeSpace == nil {
		o.FreeSpace = func(string) (int64, error) { return 1 << 40, nil }
	}
	s, err := Open(filepath.Join(t.TempDir(), "media"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// entries lists the media folder and its partial area (names only).
func entries(t *testing.T, s *Store) (top, partial []string) {
	t.Helper()
	for _, d := range []struct {
		dir string
		out *[]string
	}{{s.Dir(), &top}, {filepath.Join(s.Dir(), partialDir), &partial}} {
		es, err := os.ReadDir(d.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Name() != partialDir {
				*d.out = append(*d.out, e.Name())
			}
		}
	}
	return top, partial
}

func TestTransferCommitListGetDelete(t *testing.T) {
	now := time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)
	s := open(t, Options{Now: func() time.Time { return now }})
	data := randomData(100_000, 1)
	p := plan(t, data, 4096, "dev1")
	tr, err := s.Begin(p)
	if err != nil {
		t.Fatal(err)
	}
	// Out of order, one block twice.
	order := rand.New(rand.NewPCG(2, 2)).Perm(len(p.Blocks))
	for _, i := range append(order, order[0]) {
		if err := tr.WriteBlock(i, block(p, data, i)); err != nil {
			t.Fatal(err)
		}
	}
	if s.InFlight() != 1 {
		t.Fatalf("in flight %d, want 1", s.InFlight())
	}
	m, err := tr.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if s.InFlight() != 0 {
		t.Fatalf("in flight %d after commit, want 0", s.InFlight())
	}
	want := Meta{ID: p.ID, File: p.ID + ".jpg", Name: "photo.JPG", Device: "dev1", Command: "camera.snap", Time: now,
		Size: 100_000, SHA256: hex.EncodeToString(p.SHA256[:]), MIME: "image/jpeg", Width: 640, Height: 480, Transport: TransportWebRTC}
	if m != want {
		t.Fatalf("meta %+v\nwant %+v", m, want)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0] != want {
		t.Fatalf("list %+v %v", list, err)
	}
	f, got, err := s.Open(p.ID)
	if err != nil || got != want {
		t.Fatalf("open %+v %v", got, err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(b, data) {
		t.Fatal("stored file differs from the data sent")
	}
	top, partial := entries(t, s)
	if len(top) != 2 || len(partial) != 0 {
		t.Fatalf("media folder %v, partial %v; want the file and its sidecar only", top, partial)
	}
	st, _ := os.Stat(filepath.Join(s.Dir(), p.ID+".json"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("sidecar mode %v, want 0600", st.Mode())
	}
	if err := s.Delete(p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(p.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(p.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v, want ErrNotFound", err)
	}
	if top, _ := entries(t, s); len(top) != 0 {
		t.Fatalf("left after delete: %v", top)
	}
}

func TestBadIDs(t *testing.T) {
	s := open(t, Options{})
	for _, id := range []string{"", "../../etc/passwd", "ABCDEF0123456789ABCDEF0123456789", "0123", NewID() + "/x"} {
		if _, err := s.Get(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Get(%q): %v, want ErrInvalid", id, err)
		}
		if err := s.Delete(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Delete(%q): %v, want ErrInvalid", id, err)
		}
	}
	// A sidecar that names another file is refused.
	id := NewID()
	os.WriteFile(filepath.Join(s.Dir(), id+".json"), []byte(`{"id":"`+id+`","file":"../x"}`), 0o600)
	if _, err := s.Get(id); !errors.Is(err, ErrInvalid) {
		t.Fatalf("sidecar naming ../x: %v, want ErrInvalid", err)
	}
}

func TestCorruptBlockRefused(t *testing.T) {
	s := open(t, Options{})
	data := randomData(10_000, 3)
	p := plan(t, data, 1024, "dev1")
	tr, err := s.Begin(p)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(block(p, data, 2))
	bad[7] ^= 1
	if err := tr.WriteBlock(2, bad); !errors.Is(err, ErrBlockChecksum) {
		t.Fatalf("corrupt block: %v, want ErrBlockChecksum", err)
	}
	if tr.Has(2) || tr.MissingCount() != len(p.Blocks) {
		t.Fatal("a corrupt block was recorded as received")
	}
	if err := tr.WriteBlock(9, data[9*1024:]); err != nil { // last, short block
		t.Fatal(err)
	}
	for _, c := range []struct {
		i int
		b []byte
	}{{-1, data[:1024]}, {10, data[:1024]}, {3, data[:1000]}, {9, data[:1024]}} {
		if err := tr.WriteBlock(c.i, c.b); !errors.Is(err, ErrBlockSize) {
			t.Errorf("block %d of %d bytes: %v, want ErrBlockSize", c.i, len(c.b), err)
		}
	}
	if _, err := tr.Commit(); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("commit with blocks missing: %v, want ErrIncomplete", err)
	}
	tr.Cancel()
	if top, partial := entries(t, s); len(top)+len(partial) != 0 {
		t.Fatalf("left after cancel: %v %v", top, partial)
	}
	if err := tr.WriteBlock(0, block(p, data, 0)); !errors.Is(err, ErrDone) {
		t.Fatalf("write after cancel: %v, want ErrDone", err)
	}
}

func TestResumeKeepsCheckedBlocks(t *testing.T) {
	s := open(t, Options{})
	data := randomData(200*1024+17, 4)
	p := plan(t, data, 1024, "dev1")
	tr, err := s.Begin(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 150; i++ {
		if err := tr.WriteBlock(i, block(p, data, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Release(); err != nil {
		t.Fatal(err)
	}
	if s.InFlight() != 0 {
		t.Fatal("a released transfer still counts as in flight")
	}
	// Damage one stored block on disk: the resume must ask for it again.
	f, err := os.OpenFile(filepath.Join(s.Dir(), partialDir, p.ID, dataFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff ^ data[40*1024]}, 40*1024)
	f.Close()

	tr, err = s.Begin(p)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Resumed() != 149 {
		t.Fatalf("resumed %d blocks, want 149 (150 sent, one damaged)", tr.Resumed())
	}
	miss := tr.Missing()
	if len(miss) != len(p.Blocks)-149 || miss[0] != 40 || miss[1] != 150 {
		t.Fatalf("missing %v…", miss[:3])
	}
	for _, i := range miss {
		if err := tr.WriteBlock(i, block(p, data, i)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := tr.Commit()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(s.Dir(), m.File))
	if !bytes.Equal(b, data) {
		t.Fatal("resumed file differs")
	}
}

func TestResumeOfAnotherFileStartsOver(t *testing.T) {
	s := open(t, Options{})
	data := randomData(8192, 5)
	p := plan(t, data, 1024, "dev1")
	tr, _ := s.Begin(p)
	tr.WriteBlock(0, block(p, data, 0))
	tr.Release()
	other := randomData(8192, 6)
	q := plan(t, other, 1024, "dev1")
	q.ID = p.ID
	tr, err := s.Begin(q)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Resumed() != 0 || tr.MissingCount() != 8 {
		t.Fatalf("another file under the same id resumed %d blocks", tr.Resumed())
	}
	tr.Cancel()
	// And another device may not take over a partial either.
	tr, _ = s.Begin(p)
	tr.WriteBlock(0, block(p, data, 0))
	tr.Release()
	p.Device = "dev2"
	tr, _ = s.Begin(p)
	if tr.Resumed() != 0 {
		t.Fatal("another device resumed a partial")
	}
	tr.Cancel()
}

func TestFileChecksumMismatchLeavesNothing(t *testing.T) {
	s := open(t, Options{})
	data := randomData(4096, 7)
	p := plan(t, data, 1024, "dev1")
	p.SHA256[0] ^= 1 // blocks are right, the file's hash is not
	tr, _ := s.Begin(p)
	for i := range p.Blocks {
		tr.WriteBlock(i, block(p, data, i))
	}
	if _, err := tr.Commit(); !errors.Is(err, ErrFileChecksum) {
		t.Fatalf("commit: %v, want ErrFileChecksum", err)
	}
	if top, partial := entries(t, s); len(top)+len(partial) != 0 || s.InFlight() != 0 {
		t.Fatalf("left after a failed commit: %v %v", top, partial)
	}
}

func TestBounds(t *testing.T) {
	s := open(t, Options{MaxFileSize: 10_000, MaxInFlight: 3, MaxPerDevice: 2})
	data := randomData(10_001, 8)
	if _, err := s.Begin(plan(t, data, 1024, "d1")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("10001 bytes: %v, want ErrTooLarge", err)
	}
	data = data[:5000]
	bad := []func(p *Plan){
		func(p *Plan) { p.ID = "x" },
		func(p *Plan) { p.Device = "" },
		func(p *Plan) { p.BlockSize = 512 },
		func(p *Plan) { p.Blocks = p.Blocks[1:] },
		func(p *Plan) { p.Size = 0 },
		func(p *Plan) { p.Transport = "carrier pigeon" },
	}
	for i, f := range bad {
		p := plan(t, data, 1024, "d1")
		f(&p)
		if _, err := s.Begin(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad plan %d: %v, want ErrInvalid", i, err)
		}
	}
	a, err := s.Begin(plan(t, data, 1024, "d1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(a.Plan()); !errors.Is(err, ErrBusy) {
		t.Fatalf("same transfer twice: %v, want ErrBusy", err)
	}
	b, err := s.Begin(plan(t, data, 1024, "d1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(plan(t, data, 1024, "d1")); !errors.Is(err, ErrBusy) {
		t.Fatalf("third from one device: %v, want ErrBusy", err)
	}
	c, err := s.Begin(plan(t, data, 1024, "d2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(plan(t, data, 1024, "d3")); !errors.Is(err, ErrBusy) {
		t.Fatalf("fourth in total: %v, want ErrBusy", err)
	}
	a.Cancel()
	b.Release()
	c.Cancel()
	if _, err := s.Begin(plan(t, data, 1024, "d3")); err != nil {
		t.Fatalf("after the others ended: %v", err)
	}
}

func TestDiskFull(t *testing.T) {
	free := int64(1 << 20)
	s := open(t, Options{MinFree: 100_000, FreeSpace: func(string) (int64, error) { return free, nil }})
	data := randomData(1<<20-50_000, 9)
	if _, err := s.Begin(plan(t, data, 4096, "d1")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("file larger than free space minus the reserve: %v, want ErrDiskFull", err)
	}
	if top, partial := entries(t, s); len(top)+len(partial) != 0 || s.InFlight() != 0 {
		t.Fatalf("left after a refused transfer: %v %v", top, partial)
	}
	if _, err := s.Begin(plan(t, data[:500_000], 4096, "d1")); err != nil {
		t.Fatalf("a file that fits: %v", err)
	}
	// A write that fails with ENOSPC or a quota error is ErrDiskFull too.
	for _, e := range []error{syscall.ENOSPC, &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}} {
		if err := diskErr(e); !errors.Is(err, ErrDiskFull) || !errors.Is(err, e) {
			t.Errorf("diskErr(%v) = %v, want ErrDiskFull wrapping the cause", e, err)
		}
	}
}

func TestOpenSweeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "media")
	now := time.Now()
	free := func(string) (int64, error) { return 1 << 40, nil }
	s, err := Open(dir, Options{FreeSpace: free})
	if err != nil {
		t.Fatal(err)
	}
	data := randomData(4096, 10)
	old, fresh := plan(t, data, 1024, "d1"), plan(t, data, 1024, "d1")
	for _, p := range []Plan{old, fresh} {
		tr, _ := s.Begin(p)
		tr.WriteBlock(0, block(p, data, 0))
		tr.Release()
	}
	os.Chtimes(filepath.Join(dir, partialDir, old.ID, stateFile), now.Add(-25*time.Hour), now.Add(-25*time.Hour))
	orphan := NewID() + ".jpg" // a file whose sidecar was never written
	os.WriteFile(filepath.Join(dir, orphan), data, 0o600)
	s.Close()

	s, err = Open(dir, Options{FreeSpace: free})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	top, partial := entries(t, s)
	if len(top) != 0 || len(partial) != 1 || partial[0] != fresh.ID {
		t.Fatalf("after open: media %v, partial %v; want only the fresh partial", top, partial)
	}
	tr, err := s.Begin(fresh)
	if err != nil || tr.Resumed() != 1 {
		t.Fatalf("fresh partial: resumed %v, %v", tr, err)
	}
	tr.Cancel()
}

// The stored dimensions of a JPEG or PNG are the file's own, whatever the
// sender claimed; other data keeps the claim.
func TestImageDimensionsFromTheFile(t *testing.T) {
	s := open(t, Options{})
	img := image.NewRGBA(image.Rect(0, 0, 320, 200))
	var jp, pn bytes.Buffer
	if err := jpeg.Encode(&jp, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(&pn, img); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		w, h int
	}{{"photo.jpg", jp.Bytes(), 320, 200}, {"shot.png", pn.Bytes(), 320, 200}, {"clip.webm", randomData(5000, 11), 640, 480}} {
		p := plan(t, c.data, 1024, "d1") // claims 640×480
		p.Name = c.name
		tr, err := s.Begin(p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Blocks {
			if err := tr.WriteBlock(i, block(p, c.data, i)); err != nil {
				t.Fatal(err)
			}
		}
		m, err := tr.Commit()
		if err != nil {
			t.Fatal(err)
		}
		if m.Width != c.w || m.Height != c.h {
			t.Errorf("%s: %d×%d, want %d×%d", c.name, m.Width, m.Height, c.w, c.h)
		}
	}
}

// TestDiscard: what a suspended transfer left for a resume is removed, so
// a ticket that ended without its file leaves nothing; a transfer under
// way is left alone (ErrBusy), and no partial is not an error.
func TestDiscard(t *testing.T) {
	s := open(t, Options{})
	data := randomData(8*1024, 9)
	p := plan(t, data, 1024, "dev1")
	tr, err := s.Begin(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.WriteBlock(0, block(p, data, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(p.ID); !errors.Is(err, ErrBusy) {
		t.Fatalf("Discard of a transfer under way: %v, want ErrBusy", err)
	}
	if err := tr.Release(); err != nil {
		t.Fatal(err)
	}
	if _, partial := entries(t, s); len(partial) != 1 {
		t.Fatalf("after Release the partials are %v", partial)
	}
	if err := s.Discard(p.ID); err != nil {
		t.Fatal(err)
	}
	if top, partial := entries(t, s); len(partial) != 0 || len(top) != 0 {
		t.Fatalf("after Discard: %v %v", top, partial)
	}
	if err := s.Discard(p.ID); err != nil {
		t.Fatalf("a second Discard: %v", err)
	}
	if s.InFlight() != 0 {
		t.Fatalf("%d in flight after Discard", s.InFlight())
	}
	if tr, err = s.Begin(p); err != nil || tr.Resumed() != 0 {
		t.Fatalf("Begin after Discard: resumed %v, %v", tr, err)
	}
	tr.Cancel()
}
