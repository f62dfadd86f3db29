package media

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/atrium-dev/atrium/backend/safefile"
)

// Plan is what a sender announces before the first block: the file's size
// and SHA-256, how it is cut into blocks and each block's SHA-256, and what
// the sidecar will say about it. Block i covers bytes [i*BlockSize,
// min((i+1)*BlockSize, Size)).
type Plan struct {
	ID         string     `json:"id"`        // the transfer id (NewID), also the media id
	Device     string     `json:"device"`    // the sending device's id (bounds per device)
	Command    string     `json:"command"`   // the node command, e.g. "camera.snap"
	Name       string     `json:"name"`      // the sender's file name (its extension is kept)
	Size       int64      `json:"size"`      // bytes, 1 … Options.MaxFileSize
	SHA256     [32]byte   `json:"sha256"`    // of the whole file
	BlockSize  int        `json:"blockSize"` // MinBlockSize … MaxBlockSize
	Blocks     [][32]byte `json:"blocks"`    // SHA-256 of each block, ceil(Size/BlockSize) of them
	MIME       string     `json:"mime,omitempty"`
	Width      int        `json:"width,omitempty"`
	Height     int        `json:"height,omitempty"`
	DurationMs int64      `json:"durationMs,omitempty"`
	Transport  string     `json:"transport"` // TransportWebRTC or TransportHTTPS
}

// NumBlocks is ceil(size/blockSize), the block count of a file (0 when
// blockSize is not positive).
func NumBlocks(size int64, blockSize int) int {
	if blockSize <= 0 || size <= 0 {
		return 0
	}
	return int((size + int64(blockSize) - 1) / int64(blockSize))
}

// BlockLen is the length of block i of the plan (the last may be short).
func (p Plan) BlockLen(i int) int {
	off := int64(i) * int64(p.BlockSize)
	return int(min(int64(p.BlockSize), p.Size-off))
}

// check validates the plan's shape against the store's bounds.
func (p Plan) check(o Options) error {
	switch {
	case !ValidID(p.ID):
		return fmt.Errorf("transfer id %q: %w", p.ID, ErrInvalid)
	case p.Device == "" || p.Command == "":
		return fmt.Errorf("transfer %s: no device or command: %w", p.ID, ErrInvalid)
	case p.Size <= 0:
		return fmt.Errorf("transfer %s: size %d: %w", p.ID, p.Size, ErrInvalid)
	case p.Size > o.MaxFileSize:
		return fmt.Errorf("transfer %s: %d bytes, the limit is %d: %w", p.ID, p.Size, o.MaxFileSize, ErrTooLarge)
	case p.BlockSize < MinBlockSize || p.BlockSize > MaxBlockSize:
		return fmt.Errorf("transfer %s: block size %d outside %d…%d: %w", p.ID, p.BlockSize, MinBlockSize, MaxBlockSize, ErrInvalid)
	case NumBlocks(p.Size, p.BlockSize) > MaxBlocks:
		return fmt.Errorf("transfer %s: more than %d blocks: %w", p.ID, MaxBlocks, ErrInvalid)
	case len(p.Blocks) != NumBlocks(p.Size, p.BlockSize):
		return fmt.Errorf("transfer %s: %d block hashes for %d blocks: %w", p.ID, len(p.Blocks), NumBlocks(p.Size, p.BlockSize), ErrInvalid)
	case p.Transport != TransportWebRTC && p.Transport != TransportHTTPS && p.Transport != TransportGateway:
		return fmt.Errorf("transfer %s: transport %q: %w", p.ID, p.Transport, ErrInvalid)
	}
	return nil
}

// same reports whether q describes the same file cut the same way (a
// resume may change nothing of that).
func (p Plan) same(q Plan) bool {
	if p.ID != q.ID || p.Device != q.Device || p.Size != q.Size || p.SHA256 != q.SHA256 ||
		p.BlockSize != q.BlockSize || len(p.Blocks) != len(q.Blocks) {
		return false
	}
	for i := range p.Blocks {
		if p.Blocks[i] != q.Blocks[i] {
			return false
		}
	}
	return true
}

const (
	stateFile = "state.json"
	dataFile  = "data"
	// saveEvery: the received map is saved after this many new blocks.
	saveEvery = 64
)

// state is a partial's state.json.
type state struct {
	Plan     Plan   `json:"plan"`
	Received []byte `json:"received"` // bitmap, bit i = block i stored and checked
}

// Partial is one transfer between Begin and Commit, Release or Cancel. Not
// safe for concurrent use.
type Partial struct {
	s        *Store
	plan     Plan
	dir      string // .partial/<id>, relative to the store's root
	f        *os.File
	have     []byte // bitmap
	missing  int
	unsaved  int
	resumed  int // blocks already there when Begin resumed
	finished bool
}

// Begin starts or resumes the transfer p. A partial left by a transfer
// with the same id and the same file (Plan: size, SHA-256, block size and
// hashes, device) is resumed: the blocks its map records are re-hashed from
// the data and kept when they match; a partial for another file under that
// id is discarded. Errors: ErrInvalid, ErrTooLarge, ErrBusy (bounds in
// flight, or the id is already under way), ErrDiskFull (free space minus
// Options.MinFree is less than the missing bytes), or the file system's.
func (s *Store) Begin(p Plan) (*Partial, error) {
	if err := p.check(s.o); err != nil {
		return nil, fmt.Errorf("media: %w", err)
	}
	if err := s.reserve(p.ID, p.Device); err != nil {
		return nil, err
	}
	t, err := s.open(p)
	if err != nil {
		s.release(p.ID)
		return nil, err
	}
	return t, nil
}

func (s *Store) reserve(id, device string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.inflight[id]; ok {
		return fmt.Errorf("media: transfer %s is already under way: %w", id, ErrBusy)
	}
	if len(s.inflight) >= s.o.MaxInFlight {
		return fmt.Errorf("media: %d transfers in flight, the limit: %w", len(s.inflight), ErrBusy)
	}
	n := 0
	for _, d := range s.inflight {
		if d == device {
			n++
		}
	}
	if n >= s.o.MaxPerDevice {
		return fmt.Errorf("media: %d transfers in flight from this device, the limit: %w", n, ErrBusy)
	}
	s.inflight[id] = device
	return nil
}

func (s *Store) release(id string) {
	s.mu.Lock()
	delete(s.inflight, id)
	s.mu.Unlock()
}

// Discard removes what a suspended transfer id left for a resume
// (Release): its ticket ended without the file, so nothing of it may stay.
// A transfer under way (between Begin and its end) is left alone: ErrBusy.
// No partial for id is not an error.
func (s *Store) Discard(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("media: transfer id %q: %w", id, ErrInvalid)
	}
	s.mu.Lock()
	if _, ok := s.inflight[id]; ok {
		s.mu.Unlock()
		return fmt.Errorf("media: transfer %s is under way: %w", id, ErrBusy)
	}
	s.inflight[id] = "" // no Begin of id while it is removed
	s.mu.Unlock()
	defer s.release(id)
	if err := s.root.RemoveAll(path.Join(partialDir, id)); err != nil {
		return fmt.Errorf("media: discard partial %s: %w", id, err)
	}
	return nil
}

// InFlight is the number of transfers between Begin and their end.
func (s *Store) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

func (s *Store) open(p Plan) (*Partial, error) {
	dir := path.Join(partialDir, p.ID)
	t := &Partial{s: s, plan: p, dir: dir, have: make([]byte, (len(p.Blocks)+7)/8), missing: len(p.Blocks)}
	var old state
	if b, err := s.root.ReadFile(path.Join(dir, stateFile)); err == nil && json.Unmarshal(b, &old) == nil && old.Plan.same(p) &&
		len(old.Received) == len(t.have) {
		f, err := s.root.OpenFile(path.Join(dir, dataFile), os.O_RDWR, 0)
		if err == nil {
			t.f = f
			t.recheck(old.Received)
		}
	}
	if t.f == nil {
		if err := s.root.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("media: clear partial %s: %w", p.ID, err)
		}
		if err := s.root.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("media: partial %s: %w", p.ID, diskErr(err))
		}
		f, err := s.root.OpenFile(path.Join(dir, dataFile), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("media: partial %s: %w", p.ID, diskErr(err))
		}
		t.f = f
	}
	need := int64(0)
	for i := range p.Blocks {
		if !t.Has(i) {
			need += int64(p.BlockLen(i))
		}
	}
	if free, err := s.o.FreeSpace(s.dir); err == nil && free >= 0 && free-s.o.MinFree < need {
		t.f.Close()
		if t.resumed == 0 {
			_ = s.root.RemoveAll(dir)
		}
		return nil, fmt.Errorf("media: transfer %s needs %d bytes, %d free (keeping %d): %w", p.ID, need, free, s.o.MinFree, ErrDiskFull)
	}
	if err := t.save(); err != nil {
		t.f.Close()
		return nil, err
	}
	return t, nil
}

// recheck keeps the blocks of the saved map whose data still hashes right.
func (t *Partial) recheck(saved []byte) {
	buf := make([]byte, t.plan.BlockSize)
	for i := range t.plan.Blocks {
		if saved[i/8]&(1<<(i%8)) == 0 {
			continue
		}
		b := buf[:t.plan.BlockLen(i)]
		if _, err := t.f.ReadAt(b, int64(i)*int64(t.plan.BlockSize)); err != nil && !errors.Is(err, io.EOF) {
			continue
		}
		if sha256.Sum256(b) == t.plan.Blocks[i] {
			t.mark(i)
			t.resumed++
		}
	}
}

func (t *Partial) mark(i int) {
	t.have[i/8] |= 1 << (i % 8)
	t.missing--
}

// Plan is the transfer's plan.
func (t *Partial) Plan() Plan { return t.plan }

// Has reports whether block i is stored and checked.
func (t *Partial) Has(i int) bool {
	return i >= 0 && i < len(t.plan.Blocks) && t.have[i/8]&(1<<(i%8)) != 0
}

// Missing returns the indexes of the blocks not yet stored, ascending.
func (t *Partial) Missing() []int {
	out := make([]int, 0, t.missing)
	for i := range t.plan.Blocks {
		if !t.Has(i) {
			out = append(out, i)
		}
	}
	return out
}

// MissingCount is len(Missing()).
func (t *Partial) MissingCount() int { return t.missing }

// Resumed is the number of blocks a resumed partial already held.
func (t *Partial) Resumed() int { return t.resumed }

// WriteBlock checks block i against its SHA-256 and writes it at its
// offset. A block already stored is checked and otherwise ignored. Errors:
// ErrBlockSize (index out of range or wrong length), ErrBlockChecksum (the
// block is not written; the sender must send it again), ErrDiskFull, ErrDone,
// or the file system's.
func (t *Partial) WriteBlock(i int, data []byte) error {
	if t.finished {
		return fmt.Errorf("media: transfer %s: %w", t.plan.ID, ErrDone)
	}
	if i < 0 || i >= len(t.plan.Blocks) || len(data) != t.plan.BlockLen(i) {
		return fmt.Errorf("media: transfer %s: block %d of %d bytes: %w", t.plan.ID, i, len(data), ErrBlockSize)
	}
	if sha256.Sum256(data) != t.plan.Blocks[i] {
		return fmt.Errorf("media: transfer %s: block %d: %w", t.plan.ID, i, ErrBlockChecksum)
	}
	if t.Has(i) {
		return nil
	}
	if _, err := t.f.WriteAt(data, int64(i)*int64(t.plan.BlockSize)); err != nil {
		return fmt.Errorf("media: transfer %s: write block %d: %w", t.plan.ID, i, diskErr(err))
	}
	t.mark(i)
	if t.unsaved++; t.unsaved >= saveEvery && t.missing > 0 {
		return t.save()
	}
	return nil
}

// save writes state.json through safefile.
func (t *Partial) save() error {
	b, err := json.Marshal(state{Plan: t.plan, Received: t.have})
	if err != nil {
		return fmt.Errorf("media: transfer %s: %w", t.plan.ID, err)
	}
	tmp, err := safefile.NewTemp(t.s.root, path.Join(t.dir, stateFile), b, safefile.Options{Perm: 0o600, Exact: true})
	if err == nil {
		err = tmp.Replace()
		tmp.Close()
	}
	if err != nil {
		return fmt.Errorf("media: transfer %s: save state: %w", t.plan.ID, diskErr(err))
	}
	t.unsaved = 0
	return nil
}

// Commit puts a complete transfer in place: the data is fsynced and its
// SHA-256 checked against the plan's, the dimensions of a JPEG, PNG or GIF
// read from its header (they replace what the plan claimed), renamed to <id><ext> in the media
// folder, then the sidecar is written and the partial removed. Errors:
// ErrIncomplete (blocks missing; the transfer stays open), ErrFileChecksum
// (the transfer is discarded), ErrDiskFull, ErrDone, or the file system's
// (the transfer is discarded and nothing is left among the media).
func (t *Partial) Commit() (Meta, error) {
	if t.finished {
		return Meta{}, fmt.Errorf("media: transfer %s: %w", t.plan.ID, ErrDone)
	}
	if t.missing > 0 {
		return Meta{}, fmt.Errorf("media: transfer %s: %d blocks missing: %w", t.plan.ID, t.missing, ErrIncomplete)
	}
	m, err := t.commit()
	if err != nil {
		t.Cancel()
		return Meta{}, err
	}
	t.finish()
	return m, nil
}

func (t *Partial) commit() (Meta, error) {
	p, s := t.plan, t.s
	if err := t.f.Sync(); err != nil {
		return Meta{}, fmt.Errorf("media: transfer %s: sync: %w", p.ID, diskErr(err))
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(t.f, 0, p.Size)); err != nil {
		return Meta{}, fmt.Errorf("media: transfer %s: hash: %w", p.ID, err)
	}
	if sum := h.Sum(nil); !bytes.Equal(sum, p.SHA256[:]) {
		return Meta{}, fmt.Errorf("media: transfer %s: %w", p.ID, ErrFileChecksum)
	}
	width, height := p.Width, p.Height
	if w, h, ok := imageSize(io.NewSectionReader(t.f, 0, p.Size)); ok {
		width, height = w, h
	}
	if err := t.f.Close(); err != nil {
		return Meta{}, fmt.Errorf("media: transfer %s: close: %w", p.ID, diskErr(err))
	}
	t.f = nil
	m := Meta{
		ID: p.ID, File: p.ID + ext(p.Name), Name: p.Name, Device: p.Device, Command: p.Command,
		Time: s.o.Now().UTC(), Size: p.Size, SHA256: hex.EncodeToString(p.SHA256[:]), MIME: p.MIME,
		Width: width, Height: height, DurationMs: p.DurationMs, Transport: p.Transport,
	}
	if _, err := s.root.Lstat(m.File); err == nil {
		return Meta{}, fmt.Errorf("media: %s: %w", m.File, fs.ErrExist)
	}
	if err := s.root.Rename(path.Join(t.dir, dataFile), m.File); err != nil {
		return Meta{}, fmt.Errorf("media: transfer %s: place file: %w", p.ID, diskErr(err))
	}
	if err := s.writeSidecar(m); err != nil {
		_ = s.root.Remove(m.File)
		return Meta{}, fmt.Errorf("media: transfer %s: sidecar: %w", p.ID, diskErr(err))
	}
	s.syncDir(".")
	if err := s.root.RemoveAll(t.dir); err != nil {
		s.o.Log.Warn("media: remove finished partial", "id", p.ID, "err", err)
	}
	return m, nil
}

// Release suspends the transfer (its connection was cut): the data is
// fsynced and the map saved, so Begin with the same plan resumes it, and
// the transfer no longer counts as in flight. Safe after the end (no-op).
func (t *Partial) Release() error {
	if t.finished {
		return nil
	}
	defer t.finish()
	err := t.f.Sync()
	if err == nil {
		err = t.save()
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("media: suspend transfer %s: %w", t.plan.ID, diskErr(err))
	}
	return nil
}

// Cancel ends the transfer and removes its partial data; nothing of it
// stays. Safe after the end (no-op).
func (t *Partial) Cancel() {
	if t.finished {
		return
	}
	if t.f != nil {
		t.f.Close()
	}
	if err := t.s.root.RemoveAll(t.dir); err != nil {
		t.s.o.Log.Warn("media: remove cancelled partial", "id", t.plan.ID, "err", err)
	}
	t.finish()
}

func (t *Partial) finish() {
	t.finished = true
	t.f = nil
	t.s.release(t.plan.ID)
}

// diskErr wraps ENOSPC and quota errors as ErrDiskFull (keeping the cause).
func diskErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) || isQuota(err) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

// imageSize reads the dimensions from a JPEG, PNG or GIF header (known by
// its magic bytes; the decoders are called directly, nothing is registered
// with package image); ok is false for anything else (a clip, a damaged
// image).
func imageSize(r io.ReaderAt) (w, h int, ok bool) {
	var magic [8]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil {
		return 0, 0, false
	}
	var decode func(io.Reader) (image.Config, error)
	switch {
	case bytes.HasPrefix(magic[:], []byte{0xff, 0xd8, 0xff}):
		decode = jpeg.DecodeConfig
	case bytes.HasPrefix(magic[:], []byte("\x89PNG\r\n\x1a\n")):
		decode = png.DecodeConfig
	case bytes.HasPrefix(magic[:], []byte("GIF8")):
		decode = gif.DecodeConfig
	default:
		return 0, 0, false
	}
	c, err := decode(io.NewSectionReader(r, 0, 1<<62))
	if err != nil || c.Width <= 0 || c.Height <= 0 {
		return 0, 0, false
	}
	return c.Width, c.Height, true
}

// PutBlockSize is the block size Put plans with (1 MiB).
const PutBlockSize = 1 << 20

// Put stores data, held whole in memory, as one transfer of plan (Size,
// BlockSize, SHA256 and Blocks are filled in from data): a saved live
// clip, a kept talk utterance. Errors: Begin's (ErrTooLarge, ErrBusy,
// ErrDiskFull, …), WriteBlock's and Commit's; a failed Put leaves
// nothing.
func (s *Store) Put(plan Plan, data []byte) (Meta, error) {
	const bs = PutBlockSize
	plan.Size, plan.BlockSize, plan.SHA256, plan.Blocks = int64(len(data)), bs, sha256.Sum256(data), nil
	for off := 0; off < len(data); off += bs {
		plan.Blocks = append(plan.Blocks, sha256.Sum256(data[off:min(off+bs, len(data))]))
	}
	p, err := s.Begin(plan)
	if err != nil {
		return Meta{}, err
	}
	for i := range plan.Blocks {
		if err := p.WriteBlock(i, data[i*bs:min((i+1)*bs, len(data))]); err != nil {
			p.Cancel()
			return Meta{}, err
		}
	}
	m, err := p.Commit()
	if err != nil {
		p.Cancel()
		return Meta{}, err
	}
	return m, nil
}
