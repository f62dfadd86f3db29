// Package media is the media store of SPEC §7 and issue 22: the photos,
// clips and screen recordings that nodes send land in $ATRIUM_HOME/media/
// (paths.Layout.MediaDir), each as two files:
//
//   - <id><ext>   the media itself (ext from the sender's file name, e.g. ".jpg");
//   - <id>.json   its sidecar, a Meta: device, command, time, size, sha256,
//     MIME type, dimensions or duration when known, and the transport
//     ("webrtc" or "https") it came over.
//
// A file counts only once its sidecar exists: List, Get and Open read
// sidecars, and the sidecar is written last (through safefile, atomically)
// after the file itself was renamed into place from the partial area.
//
// Transfers in progress live in media/.partial/<id>/: the file being
// assembled (data, written block by block at its offset) and state.json
// (the Plan and the map of blocks received, written through safefile every
// 64 blocks and when a transfer is suspended). Every block is checked
// against its SHA-256 before it is written, and the whole file against the
// file's SHA-256 before it is put in place, so a cancelled, cut or corrupt
// transfer never leaves a half-written file among the media: a cut one can
// resume from its missing blocks (Begin with the same Plan), a cancelled
// or failed one is removed. Partials untouched for Options.PartialTTL are
// removed when the store is opened.
//
// Bounds: Options.MaxFileSize per file (ErrTooLarge), Options.MaxInFlight
// transfers in total and Options.MaxPerDevice per device (ErrBusy), and the
// free space of the disk, checked before a transfer starts and on every
// write (ErrDiskFull).
//
// Why the media file is not written with safefile.WriteFile: safefile
// takes the whole content in memory, and a clip may be hundreds of MiB. The
// file is instead assembled in the partial area on the same file system,
// fsynced, and renamed into place inside the same os.Root, followed by an
// fsync of the folder, which is the same atomic step safefile takes.
package media

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/safefile"
)

// Sentinel errors; the functions wrap them with context.
var (
	// ErrNotFound: no media (no sidecar) with that id.
	ErrNotFound = errors.New("media not found")
	// ErrInvalid: a malformed id or Plan (sizes, block count, hashes).
	ErrInvalid = errors.New("invalid media request")
	// ErrTooLarge: the file is larger than Options.MaxFileSize.
	ErrTooLarge = errors.New("media file too large")
	// ErrBusy: too many transfers in flight (in total, for this device, or
	// this very transfer is already under way).
	ErrBusy = errors.New("too many media transfers in flight")
	// ErrDiskFull: not enough free space for the file (before a transfer
	// starts, or a write failed with ENOSPC or a quota error).
	ErrDiskFull = errors.New("disk full")
	// ErrBlockChecksum: a block's SHA-256 is not the one the Plan promised.
	ErrBlockChecksum = errors.New("block checksum mismatch")
	// ErrBlockSize: a block's index or length does not match the Plan.
	ErrBlockSize = errors.New("block index or length does not match the plan")
	// ErrFileChecksum: every block matched but the whole file's SHA-256 did
	// not; the transfer is discarded.
	ErrFileChecksum = errors.New("file checksum mismatch")
	// ErrIncomplete: Commit before every block arrived.
	ErrIncomplete = errors.New("transfer incomplete")
	// ErrDone: the transfer was already committed, released or cancelled.
	ErrDone = errors.New("transfer already finished")
)

// Code is the code a transfer ends with when the store refuses it with
// err, the same over every transport (node.invoke's error code, the data
// channel's cancel): TOO_LARGE (ErrTooLarge), BUSY (ErrBusy), DISK_FULL
// (ErrDiskFull), CHECKSUM (ErrFileChecksum, ErrBlockChecksum), INVALID
// (ErrInvalid, ErrBlockSize), else CANCELLED.
func Code(err error) string {
	switch {
	case errors.Is(err, ErrTooLarge):
		return "TOO_LARGE"
	case errors.Is(err, ErrBusy):
		return "BUSY"
	case errors.Is(err, ErrDiskFull):
		return "DISK_FULL"
	case errors.Is(err, ErrFileChecksum), errors.Is(err, ErrBlockChecksum):
		return "CHECKSUM"
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrBlockSize):
		return "INVALID"
	}
	return "CANCELLED"
}

// Transport names for Meta.Transport.
const (
	TransportWebRTC = "webrtc" // a WebRTC data channel (package rtc)
	TransportHTTPS  = "https"  // the chunked upload fallback
	// TransportGateway: inline over the gateway's WebSocket (a Canvas
	// snapshot, package canvas).
	TransportGateway = "gateway"
)

// Defaults of Options.
const (
	DefaultMaxFileSize  int64 = 2 << 30 // 2 GiB
	DefaultMaxInFlight        = 8
	DefaultMaxPerDevice       = 2
	DefaultMinFree      int64 = 64 << 20 // 64 MiB
	DefaultPartialTTL         = 24 * time.Hour
)

// Block bounds of a Plan and the most blocks one file may have.
const (
	MinBlockSize = 1 << 10 // 1 KiB
	MaxBlockSize = 4 << 20 // 4 MiB
	MaxBlocks    = 1 << 20
)

// Options bound the store. Zero values take the defaults named on each field.
type Options struct {
	// MaxFileSize is the largest file accepted, in bytes (0: DefaultMaxFileSize, 2 GiB).
	MaxFileSize int64
	// MaxInFlight is the most transfers between Begin and their end, in
	// total (0: DefaultMaxInFlight, 8).
	MaxInFlight int
	// MaxPerDevice is the most transfers in flight from one device
	// (0: DefaultMaxPerDevice, 2).
	MaxPerDevice int
	// MinFree is the free space, in bytes, that must remain on the disk after
	// a transfer's missing bytes are written (0: DefaultMinFree, 64 MiB;
	// negative: none).
	MinFree int64
	// PartialTTL is how long a suspended transfer's partial data is kept
	// for a resume; older ones are removed by Open (0: DefaultPartialTTL, 24 h).
	PartialTTL time.Duration
	// FreeSpace reports the bytes available to this process on the disk
	// holding dir, or -1 when unknown (nil: the operating system's figure;
	// tests inject a small disk).
	FreeSpace func(dir string) (int64, error)
	// Now is the clock of sidecar times (nil: time.Now).
	Now func() time.Time
	// Log receives the store's warnings (nil: slog.Default()).
	Log *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = DefaultMaxFileSize
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxPerDevice <= 0 {
		o.MaxPerDevice = DefaultMaxPerDevice
	}
	if o.MinFree == 0 {
		o.MinFree = DefaultMinFree
	} else if o.MinFree < 0 {
		o.MinFree = 0
	}
	if o.PartialTTL <= 0 {
		o.PartialTTL = DefaultPartialTTL
	}
	if o.FreeSpace == nil {
		o.FreeSpace = freeSpace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Meta is a media file's sidecar (<id>.json), as stored and as media.list
// and media.get return it.
type Meta struct {
	ID         string    `json:"id"`                   // 32 lowercase hex characters
	File       string    `json:"file"`                 // the file's name in the media folder, <id><ext>
	Name       string    `json:"name,omitempty"`       // the name the sender gave it
	Device     string    `json:"device"`               // the sending device's id
	Command    string    `json:"command"`              // the node command that made it, e.g. "camera.snap"
	Time       time.Time `json:"time"`                 // when it was stored (UTC)
	Size       int64     `json:"size"`                 // bytes
	SHA256     string    `json:"sha256"`               // hex SHA-256 of the file
	MIME       string    `json:"mime,omitempty"`       // e.g. "image/jpeg"
	Width      int       `json:"width,omitempty"`      // pixels: from the header of a JPEG, PNG or GIF, else as the sender said
	Height     int       `json:"height,omitempty"`     // pixels, when known
	DurationMs int64     `json:"durationMs,omitempty"` // clips and recordings, when known
	Transport  string    `json:"transport"`            // TransportWebRTC or TransportHTTPS
	// SourceSHA256 and SourceSize are the file as the sender sent it, set
	// when the gateway rewrote it after the transfer (Rewrite: a WebM clip
	// remuxed so that it names its duration and can be seeked); SHA256 and
	// Size are then those of the file on disk. Absent: the file is the
	// sender's own.
	SourceSHA256 string `json:"sourceSha256,omitempty"`
	SourceSize   int64  `json:"sourceSize,omitempty"`
}

// Store is the media folder. Safe for concurrent use; a Partial is used by
// one goroutine at a time.
type Store struct {
	dir  string
	root *os.Root
	o    Options

	mu       sync.Mutex
	inflight map[string]string // transfer id → device

	// fileMu orders Delete and the last step of Rewrite (a rewritten file
	// never comes back after its media was deleted).
	fileMu sync.Mutex
}

const partialDir = ".partial"

var idRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// NewID returns a new transfer and media id: 32 hex characters from crypto/rand.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// ValidID reports whether id has the shape NewID gives (every id is checked
// before it names a file).
func ValidID(id string) bool { return idRE.MatchString(id) }

// Open opens (creating it, mode 0700) the media folder dir, normally
// paths.Layout.MediaDir, and removes partial transfers older than
// PartialTTL and media files whose sidecar was never written.
func Open(dir string, o Options) (*Store, error) {
	if err := os.MkdirAll(path.Join(dir, partialDir), 0o700); err != nil {
		return nil, fmt.Errorf("media: create %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("media: open %s: %w", dir, err)
	}
	s := &Store{dir: dir, root: root, o: o.withDefaults(), inflight: map[string]string{}}
	s.sweep()
	return s, nil
}

// Close closes the folder. Partials still open keep their own files.
func (s *Store) Close() error { return s.root.Close() }

// MaxFileSize is the largest file the store accepts, in bytes.
func (s *Store) MaxFileSize() int64 { return s.o.MaxFileSize }

// Dir is the media folder.
func (s *Store) Dir() string { return s.dir }

// sweep removes expired partials and orphan media files (a crash between
// the rename of a file and its sidecar).
func (s *Store) sweep() {
	now := s.o.Now()
	if ents, err := fs.ReadDir(s.root.FS(), partialDir); err == nil {
		for _, e := range ents {
			p := path.Join(partialDir, e.Name())
			st, err := s.root.Stat(path.Join(p, stateFile))
			if err == nil && now.Sub(st.ModTime()) < s.o.PartialTTL {
				continue
			}
			if err := s.root.RemoveAll(p); err != nil {
				s.o.Log.Warn("media: remove expired partial", "id", e.Name(), "err", err)
			}
		}
	}
	ents, err := fs.ReadDir(s.root.FS(), ".")
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() || strings.HasSuffix(name, ".json") {
			continue
		}
		id, _, _ := strings.Cut(name, ".")
		if !ValidID(id) {
			continue
		}
		if _, err := s.root.Stat(id + ".json"); errors.Is(err, fs.ErrNotExist) {
			if err := s.root.Remove(name); err != nil {
				s.o.Log.Warn("media: remove orphan file", "file", name, "err", err)
			}
		}
	}
}

// List returns every stored media's Meta, newest first (ties by id). A
// sidecar that cannot be read is skipped with a warning.
func (s *Store) List() ([]Meta, error) {
	ents, err := fs.ReadDir(s.root.FS(), ".")
	if err != nil {
		return nil, fmt.Errorf("media: list: %w", err)
	}
	out := []Meta{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !ValidID(id) || e.IsDir() {
			continue
		}
		m, err := s.Get(id)
		if err != nil {
			s.o.Log.Warn("media: skip unreadable sidecar", "id", id, "err", err)
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Meta) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Get returns the Meta of media id. Errors: ErrInvalid (malformed id),
// ErrNotFound, or the sidecar's read or parse error.
func (s *Store) Get(id string) (Meta, error) {
	if !ValidID(id) {
		return Meta{}, fmt.Errorf("media: id %q: %w", id, ErrInvalid)
	}
	b, err := s.root.ReadFile(id + ".json")
	if errors.Is(err, fs.ErrNotExist) {
		return Meta{}, fmt.Errorf("media %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Meta{}, fmt.Errorf("media %s: read sidecar: %w", id, err)
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("media %s: parse sidecar: %w", id, err)
	}
	if m.ID != id || !validFile(id, m.File) {
		return Meta{}, fmt.Errorf("media %s: sidecar names another file (%q): %w", id, m.File, ErrInvalid)
	}
	return m, nil
}

// Open returns media id's file, open for reading, and its Meta. The caller
// closes the file. Errors as Get; a sidecar without its file is ErrNotFound.
func (s *Store) Open(id string) (*os.File, Meta, error) {
	m, err := s.Get(id)
	if err != nil {
		return nil, Meta{}, err
	}
	f, err := s.root.Open(m.File)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Meta{}, fmt.Errorf("media %s: file %s missing: %w", id, m.File, ErrNotFound)
	}
	if err != nil {
		return nil, Meta{}, fmt.Errorf("media %s: open: %w", id, err)
	}
	return f, m, nil
}

// Path is the OS path of media id's file (for a caller that copies it,
// e.g. into a memory note). Errors as Get.
func (s *Store) Path(id string) (string, error) {
	m, err := s.Get(id)
	if err != nil {
		return "", err
	}
	return path.Join(s.dir, m.File), nil
}

// Delete removes media id: the sidecar first (from then on it is gone for
// List and Get), then the file. Errors: ErrInvalid, ErrNotFound, or the
// file system's.
func (s *Store) Delete(id string) error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	m, err := s.Get(id)
	if err != nil {
		return err
	}
	if err := s.root.Remove(id + ".json"); err != nil {
		return fmt.Errorf("media %s: remove sidecar: %w", id, err)
	}
	// The sidecar's removal is on disk before the file goes: a crash in
	// between leaves a file without a sidecar (swept at the next Open),
	// never a sidecar naming a missing file.
	s.syncDir(".")
	if err := s.root.Remove(m.File); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("media %s: remove file: %w", id, err)
	}
	s.syncDir(".")
	return nil
}

func (s *Store) syncDir(dir string) {
	if d, err := s.root.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// validFile: name is <id> or <id>.<ext> with a short lowercase alphanumeric ext.
func validFile(id, name string) bool {
	rest, ok := strings.CutPrefix(name, id)
	return ok && (rest == "" || extRE.MatchString(rest))
}

var extRE = regexp.MustCompile(`^\.[a-z0-9]{1,8}$`)

// ext is the file extension kept from a sender's name: lowercased, only
// when it is 1–8 ASCII letters or digits, else none.
func ext(name string) string {
	e := strings.ToLower(path.Ext(strings.ReplaceAll(name, "\\", "/")))
	if extRE.MatchString(e) {
		return e
	}
	return ""
}

// writeSidecar writes m as <id>.json through safefile (a new file, never
// replacing one, mode 0600).
func (s *Store) writeSidecar(m Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	t, err := safefile.NewTempIn(s.root, ".", append(b, '\n'), safefile.Options{Perm: 0o600, Exact: true})
	if err != nil {
		return err
	}
	defer t.Close()
	return t.Link(m.ID + ".json")
}
