// Package upload is the HTTPS fallback of a media transfer (SPEC §7, issue
// 22 item 2): when a node cannot set up a WebRTC data channel (package
// rtc), it uploads the file in blocks over the gateway's own HTTPS origin,
// with its device token, for the same transfer ticket. docs/PROTOCOL.md
// "Media transfers" is the reference; in short (every request carries
// `Authorization: Bearer <the node's device token>` and
// `X-Atrium-Device: <its deviceId>`):
//
//	POST   /media/upload/{id}          the plan (JSON Plan, at most Options.MaxPlanBytes):
//	                                   size, SHA-256, block size, each block's SHA-256;
//	                                   → Status (the blocks still missing: on a resume only those)
//	GET    /media/upload/{id}          → Status of the plan posted last
//	PUT    /media/upload/{id}/{i}      block i, Content-Length = its length,
//	                                   X-Atrium-Block-SHA256 = its hex SHA-256 as planned;
//	                                   → Status; with the last block the file is stored
//	                                   (Status.Stored, .Media)
//	DELETE /media/upload/{id}          cancel: the partial file is removed
//
// The gateway (package gateway) lets a body through on these requests
// only, at most Options.MaxBlockSize bytes and under its request bound;
// this package checks the credentials, the ticket (Tickets: the transfer
// must be expected of that device, from the address of its gateway
// connection) and the block's declared hash before it reads a byte of a
// body, so an unauthenticated request costs its head. A block is read with
// a deadline (Options.BlockTimeout) through http.MaxBytesReader and
// written with media.Partial.WriteBlock (its SHA-256 checked again); the
// file is checked whole at Commit. A refusal of what was sent (a block not
// planned, a wrong hash or length, a slow body, too large) cancels the
// transfer: its partial data is removed and the ticket ends with the
// code. A request cut in the middle only loses its block: the sender asks
// GET (or posts the plan again) and sends the missing blocks. An upload
// idle for Options.IdleTimeout is suspended (the partial kept for a resume
// by either path, the ticket free again).
package upload

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/media"
)

// Sentinel errors of Tickets and Options.Authenticate.
var (
	// ErrUnrequested: no live ticket with that id for that device.
	ErrUnrequested = errors.New("media transfer not requested")
	// ErrTaken: the ticket's data channel is carrying the transfer.
	ErrTaken = errors.New("media transfer under way on another path")
	// ErrUnauthorized: a missing, unknown or wrong device token.
	ErrUnauthorized = errors.New("device token refused")
)

// Defaults of Options.
const (
	DefaultMaxBlockSize  = media.MaxBlockSize // 4 MiB
	DefaultMaxPlanBytes  = 256 << 10
	DefaultMaxPlanBlocks = 4096
	DefaultBlockTimeout  = 30 * time.Second
	DefaultIdleTimeout   = 60 * time.Second
)

// Header names of the route.
const (
	HeaderDevice    = "X-Atrium-Device"
	HeaderBlockHash = "X-Atrium-Block-SHA256"
)

// Version is Plan.V.
const Version = 1

// Codes a refusal ends a transfer with (the ticket's end, node.invoke's
// error code), as the data channel's (package rtc).
const (
	CodeTooLarge  = "TOO_LARGE"
	CodeBusy      = "BUSY"
	CodeDiskFull  = "DISK_FULL"
	CodeInvalid   = "INVALID"
	CodeEndless   = "UNREQUESTED_BLOCK"
	CodeChecksum  = "CHECKSUM"
	CodeTimeout   = "TIMEOUT"
	CodeCancelled = "CANCELLED"
)

// Ticket is a transfer the gateway expects (the one the data channel
// would carry too).
type Ticket struct {
	ID       string
	Device   string // the node's deviceId
	Command  string
	MaxSize  int64     // bytes (0: the store's limit)
	Deadline time.Time // the transfer's end
	PeerIP   net.IP    // the node connection's address (nil: any)
}

// Tickets are the transfers the gateway expects; the wiring shares them
// with the data channel, so one ticket is stored at most once.
type Tickets interface {
	// Take reserves ticket id of device for an upload and returns it with
	// a context that ends when the ticket does (stored by the other path,
	// aborted, expired). Errors wrap ErrUnrequested or ErrTaken.
	Take(device, id string) (Ticket, context.Context, error)
	// Let ends an upload's reservation without ending the ticket (the
	// upload was suspended; either path may resume it).
	Let(id string)
	// Stored ends the ticket with the stored file; an error means it had
	// ended already (the file is then removed).
	Stored(id string, m media.Meta) error
	// Failed ends the ticket with a refusal: code and message.
	Failed(id, code, message string)
}

// Refusal is one refused request, for the audit log.
type Refusal struct {
	Device   string // as claimed (X-Atrium-Device); Verified says whether its token was right
	Verified bool
	ID       string // the transfer id of the path
	RemoteIP string
	Status   int    // the HTTP status answered
	Code     string // the code the transfer ended with ("" when it did not end)
	Reason   string
}

// Options configure a Server. Store, Tickets and Authenticate are required.
type Options struct {
	Store   *media.Store
	Tickets Tickets
	// Authenticate checks device's node token in constant time; an error
	// wrapping ErrUnauthorized is a refusal (401), another a failure (503).
	Authenticate func(ctx context.Context, device, token string) error
	// Refused, when set, is told every refused request (audit).
	Refused func(Refusal)
	// MaxBlockSize is the largest block in bytes (0: DefaultMaxBlockSize,
	// 4 MiB; at most media.MaxBlockSize). The gateway's MaxUploadBody must
	// be at least this.
	MaxBlockSize int
	// MaxPlanBytes bounds a plan's JSON body (0: DefaultMaxPlanBytes, 256 KiB).
	MaxPlanBytes int64
	// MaxPlanBlocks bounds a plan's blocks (0: DefaultMaxPlanBlocks, 4096:
	// with 4 MiB blocks 16 GiB, more than the store takes).
	MaxPlanBlocks int
	// BlockTimeout bounds reading one block's body (0: DefaultBlockTimeout,
	// 30 s; the gateway's Timeouts.Request bounds the whole request too).
	BlockTimeout time.Duration
	// IdleTimeout suspends an upload without requests (0:
	// DefaultIdleTimeout, 60 s).
	IdleTimeout time.Duration
	// Log: nil slog.Default().
	Log *slog.Logger
}

// Server serves the upload route (gateway Options.Upload). Safe for
// concurrent use.
type Server struct {
	o Options

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
}

// New checks o and applies its defaults.
func New(o Options) (*Server, error) {
	if o.Store == nil || o.Tickets == nil || o.Authenticate == nil {
		return nil, errors.New("upload: Options.Store, Tickets and Authenticate are required")
	}
	if o.MaxBlockSize <= 0 || o.MaxBlockSize > media.MaxBlockSize {
		o.MaxBlockSize = DefaultMaxBlockSize
	}
	if o.MaxPlanBytes <= 0 {
		o.MaxPlanBytes = DefaultMaxPlanBytes
	}
	if o.MaxPlanBlocks <= 0 {
		o.MaxPlanBlocks = DefaultMaxPlanBlocks
	}
	if o.BlockTimeout <= 0 {
		o.BlockTimeout = DefaultBlockTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Server{o: o, sessions: map[string]*session{}}, nil
}

// Plan is POST's body: the file and how it is cut. Blocks are the hex
// SHA-256 of each block, ceil(Size/BlockSize) of them.
type Plan struct {
	V          int      `json:"v"`
	Name       string   `json:"name"`
	Size       int64    `json:"size"`
	SHA256     string   `json:"sha256"`
	BlockSize  int      `json:"blockSize"`
	Blocks     []string `json:"blocks"`
	MIME       string   `json:"mime,omitempty"`
	Width      int      `json:"width,omitempty"`
	Height     int      `json:"height,omitempty"`
	DurationMs int64    `json:"durationMs,omitempty"`
}

// Status is every success's answer.
type Status struct {
	ID        string   `json:"id"`
	Blocks    int      `json:"blocks"`
	BlockSize int      `json:"blockSize"`
	Missing   [][2]int `json:"missing"` // half-open ranges [a, b) of blocks still to send
	Stored    bool     `json:"stored"`
	Media     *Stored  `json:"media,omitempty"` // once Stored
}

// Stored names the stored file.
type Stored struct {
	ID        string `json:"id"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	Transport string `json:"transport"` // "https"
}

// session is one upload between its plan and its end.
type session struct {
	id     string
	device string
	ticket Ticket

	mu    sync.Mutex // one request at a time
	part  *media.Partial
	over  bool
	idle  *time.Timer
	stop  func() bool // ends the watch of the ticket's context
	count int         // blocks written since the plan
}

// ServeHTTP serves the route; the gateway has checked the path's shape,
// the method, the body's declared length and the origin.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/media/upload/")
	id, blockStr, hasBlock := strings.Cut(rest, "/")
	rf := Refusal{ID: id, Device: r.Header.Get(HeaderDevice), RemoteIP: remoteIP(r)}
	if !media.ValidID(id) {
		s.refuse(w, rf, http.StatusNotFound, "", "no such upload")
		return
	}
	token, ok := bearer(r)
	if !ok || rf.Device == "" || len(rf.Device) > 128 {
		s.refuse(w, rf, http.StatusUnauthorized, "", "a device token (Authorization: Bearer) and X-Atrium-Device are required")
		return
	}
	if err := s.o.Authenticate(r.Context(), rf.Device, token); err != nil {
		if errors.Is(err, ErrUnauthorized) {
			s.refuse(w, rf, http.StatusUnauthorized, "", "device token refused")
			return
		}
		s.o.Log.Warn("upload: device check failed", "device", rf.Device, "err", err)
		s.refuse(w, rf, http.StatusServiceUnavailable, "", "the device could not be checked")
		return
	}
	rf.Verified = true
	switch {
	case hasBlock:
		i, err := strconv.Atoi(blockStr)
		if err != nil {
			s.refuse(w, rf, http.StatusNotFound, "", "no such block")
			return
		}
		s.putBlock(w, r, rf, i)
	case r.Method == http.MethodPost:
		s.postPlan(w, r, rf)
	case r.Method == http.MethodGet:
		s.status(w, rf)
	case r.Method == http.MethodDelete:
		s.cancel(w, rf)
	default:
		s.refuse(w, rf, http.StatusMethodNotAllowed, "", "method not allowed")
	}
}

// session finds the upload of rf's transfer: nil when there is none,
// ErrUnrequested when it is another device's or the request comes from
// another address than the node's gateway connection.
func (s *Server) session(rf Refusal) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if se := s.sessions[rf.ID]; se != nil {
		if se.device != rf.Device || se.ticket.PeerIP != nil && !se.ticket.PeerIP.Equal(net.ParseIP(rf.RemoteIP)) {
			return nil, ErrUnrequested
		}
		return se, nil
	}
	return nil, nil
}

func (s *Server) postPlan(w http.ResponseWriter, r *http.Request, rf Refusal) {
	se, err := s.session(rf)
	if err != nil {
		s.refuse(w, rf, http.StatusForbidden, "", fmt.Sprintf("transfer %s was not asked of this device", rf.ID))
		return
	}
	if se == nil {
		se, err = s.open(rf)
		switch {
		case errors.Is(err, ErrTaken):
			s.refuse(w, rf, http.StatusConflict, "", "the transfer is under way on its data channel")
			return
		case err != nil:
			s.refuse(w, rf, http.StatusForbidden, "", err.Error())
			return
		}
	}
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.over {
		s.refuse(w, rf, http.StatusGone, "", "the transfer ended")
		return
	}
	se.touch(s.o.IdleTimeout)
	body, err := readAll(w, r, s.o.MaxPlanBytes, s.o.BlockTimeout)
	if err != nil {
		s.fail(w, se, rf, http.StatusBadRequest, CodeInvalid, fmt.Sprintf("plan: %v", err))
		return
	}
	var p Plan
	if err := json.Unmarshal(body, &p); err != nil {
		s.fail(w, se, rf, http.StatusBadRequest, CodeInvalid, "plan: malformed JSON")
		return
	}
	mp, code, err := s.plan(se.ticket, p)
	if err != nil {
		status := http.StatusBadRequest
		if code == CodeTooLarge {
			status = http.StatusRequestEntityTooLarge
		}
		s.fail(w, se, rf, status, code, err.Error())
		return
	}
	if se.part != nil {
		if !samePlan(se.part.Plan(), mp) {
			s.fail(w, se, rf, http.StatusConflict, CodeInvalid, "a second plan for another file")
			return
		}
		writeStatus(w, se.statusLocked())
		return
	}
	part, err := s.o.Store.Begin(mp)
	if errors.Is(err, media.ErrBusy) {
		// The data channel holds it, or the device has too many transfers
		// under way: not a fault of this one, the ticket stays.
		s.stopLocked(se, true)
		s.o.Tickets.Let(se.id)
		s.refuse(w, rf, http.StatusConflict, CodeBusy, err.Error())
		return
	}
	if err != nil {
		code := media.Code(err)
		s.fail(w, se, rf, storeStatus(code), code, err.Error())
		return
	}
	se.part = part
	writeStatus(w, se.statusLocked())
}

// plan checks p against the ticket and the bounds and makes the store's.
func (s *Server) plan(t Ticket, p Plan) (media.Plan, string, error) {
	sum, herr := hex.DecodeString(p.SHA256)
	n := media.NumBlocks(p.Size, p.BlockSize)
	switch {
	case p.V != Version:
		return media.Plan{}, CodeInvalid, fmt.Errorf("plan version %d, expected %d", p.V, Version)
	case p.Size <= 0:
		return media.Plan{}, CodeInvalid, fmt.Errorf("size %d", p.Size)
	case t.MaxSize > 0 && p.Size > t.MaxSize:
		return media.Plan{}, CodeTooLarge, fmt.Errorf("%d bytes, the limit is %d", p.Size, t.MaxSize)
	case p.Size > s.o.Store.MaxFileSize():
		return media.Plan{}, CodeTooLarge, fmt.Errorf("%d bytes, the limit is %d", p.Size, s.o.Store.MaxFileSize())
	case herr != nil || len(sum) != 32:
		return media.Plan{}, CodeInvalid, errors.New("the file's sha256 is not 64 hex digits")
	case p.BlockSize < media.MinBlockSize || p.BlockSize > s.o.MaxBlockSize:
		return media.Plan{}, CodeInvalid, fmt.Errorf("block size %d outside %d…%d", p.BlockSize, media.MinBlockSize, s.o.MaxBlockSize)
	case n > s.o.MaxPlanBlocks || len(p.Blocks) != n:
		return media.Plan{}, CodeInvalid, fmt.Errorf("%d block hashes for %d blocks (at most %d)", len(p.Blocks), n, s.o.MaxPlanBlocks)
	}
	mp := media.Plan{ID: t.ID, Device: t.Device, Command: t.Command, Name: p.Name, Size: p.Size,
		BlockSize: p.BlockSize, Blocks: make([][32]byte, n), MIME: p.MIME, Width: p.Width, Height: p.Height,
		DurationMs: p.DurationMs, Transport: media.TransportHTTPS}
	copy(mp.SHA256[:], sum)
	for i, h := range p.Blocks {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return media.Plan{}, CodeInvalid, fmt.Errorf("block %d's sha256 is not 64 hex digits", i)
		}
		mp.Blocks[i] = [32]byte(b)
	}
	return mp, "", nil
}

func samePlan(a, b media.Plan) bool {
	if a.Size != b.Size || a.SHA256 != b.SHA256 || a.BlockSize != b.BlockSize || len(a.Blocks) != len(b.Blocks) {
		return false
	}
	for i := range a.Blocks {
		if a.Blocks[i] != b.Blocks[i] {
			return false
		}
	}
	return true
}

// open takes rf's ticket and starts a session: it ends (the partial
// removed) when the ticket does, and is suspended when idle.
func (s *Server) open(rf Refusal) (*session, error) {
	t, ctx, err := s.o.Tickets.Take(rf.Device, rf.ID)
	if err != nil {
		return nil, err
	}
	if t.PeerIP != nil && !t.PeerIP.Equal(net.ParseIP(rf.RemoteIP)) {
		s.o.Tickets.Let(rf.ID)
		return nil, fmt.Errorf("transfer %s is taken from the address of the node's gateway connection only: %w", rf.ID, ErrUnrequested)
	}
	se := &session{id: rf.ID, device: rf.Device, ticket: t}
	s.mu.Lock()
	if s.closed || s.sessions[rf.ID] != nil {
		s.mu.Unlock()
		s.o.Tickets.Let(rf.ID)
		return nil, fmt.Errorf("transfer %s: %w", rf.ID, ErrTaken)
	}
	s.sessions[rf.ID] = se
	s.mu.Unlock()
	se.idle = time.AfterFunc(s.o.IdleTimeout, func() { s.suspend(se) })
	se.stop = context.AfterFunc(ctx, func() { s.end(se) })
	return se, nil
}

func (se *session) touch(idle time.Duration) {
	if se.idle != nil {
		se.idle.Reset(idle)
	}
}

// forget removes se from the table (once).
func (s *Server) forget(se *session) {
	s.mu.Lock()
	if s.sessions[se.id] == se {
		delete(s.sessions, se.id)
	}
	s.mu.Unlock()
	if se.idle != nil {
		se.idle.Stop()
	}
	if se.stop != nil {
		se.stop()
	}
}

// stopLocked ends se once (false when it had ended): its partial is
// released for a resume (keep) or removed, and se forgotten. se.mu is held.
func (s *Server) stopLocked(se *session, keep bool) bool {
	if se.over {
		return false
	}
	se.over = true
	switch {
	case se.part == nil:
	case keep:
		if err := se.part.Release(); err != nil {
			s.o.Log.Warn("upload: suspend", "id", se.id, "err", err)
		}
	default:
		se.part.Cancel()
	}
	s.forget(se)
	return true
}

// end: the ticket ended (the other path stored it, abort, deadline): the
// partial is removed.
func (s *Server) end(se *session) {
	se.mu.Lock()
	defer se.mu.Unlock()
	s.stopLocked(se, false)
}

// suspend: idle; the partial is kept and the ticket let go.
func (s *Server) suspend(se *session) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if s.stopLocked(se, true) {
		s.o.Tickets.Let(se.id)
		s.o.Log.Info("upload: idle, suspended for a resume", "id", se.id, "blocks", se.count)
	}
}

// fail refuses rf, cancels se's transfer (nothing left) and ends its
// ticket with code. se.mu is held.
func (s *Server) fail(w http.ResponseWriter, se *session, rf Refusal, status int, code, reason string) {
	s.endWith(se, code, reason)
	s.refuse(w, rf, status, code, reason)
}

// endWith cancels se's transfer (its partial removed) and ends its ticket
// with code, once. se.mu is held.
func (s *Server) endWith(se *session, code, reason string) {
	if s.stopLocked(se, false) {
		s.o.Tickets.Failed(se.id, code, reason)
	}
}

func (s *Server) status(w http.ResponseWriter, rf Refusal) {
	se := s.held(w, rf, http.StatusNotFound, "no upload under way: post the plan (a suspended one resumes)")
	if se == nil {
		return
	}
	defer se.mu.Unlock()
	writeStatus(w, se.statusLocked())
}

// held finds rf's upload under way and returns it locked (its idle timer
// reset), or refuses rf and returns nil: 403 another device's, else
// status and why when there is none.
func (s *Server) held(w http.ResponseWriter, rf Refusal, status int, why string) *session {
	se, err := s.session(rf)
	switch {
	case err != nil:
		s.refuse(w, rf, http.StatusForbidden, "", fmt.Sprintf("transfer %s was not asked of this device", rf.ID))
		return nil
	case se == nil:
		s.refuse(w, rf, status, "", why)
		return nil
	}
	se.mu.Lock()
	if se.over || se.part == nil {
		se.mu.Unlock()
		s.refuse(w, rf, status, "", why)
		return nil
	}
	se.touch(s.o.IdleTimeout)
	return se
}

func (s *Server) cancel(w http.ResponseWriter, rf Refusal) {
	se, err := s.session(rf)
	switch {
	case err != nil:
		s.refuse(w, rf, http.StatusForbidden, "", fmt.Sprintf("transfer %s was not asked of this device", rf.ID))
		return
	case se == nil:
		// A suspended upload or none: end the ticket if it is this device's.
		if _, _, err := s.o.Tickets.Take(rf.Device, rf.ID); err != nil {
			s.refuse(w, rf, http.StatusNotFound, "", "no such upload")
			return
		}
		s.o.Tickets.Failed(rf.ID, CodeCancelled, "cancelled by the node")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	se.mu.Lock()
	defer se.mu.Unlock()
	s.endWith(se, CodeCancelled, "cancelled by the node")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) putBlock(w http.ResponseWriter, r *http.Request, rf Refusal, i int) {
	se := s.held(w, rf, http.StatusConflict, "no upload under way: post the plan first")
	if se == nil {
		return
	}
	defer se.mu.Unlock()
	p := se.part.Plan()
	if i < 0 || i >= len(p.Blocks) {
		s.fail(w, se, rf, http.StatusBadRequest, CodeEndless, fmt.Sprintf("block %d of a plan of %d blocks", i, len(p.Blocks)))
		return
	}
	if want := int64(p.BlockLen(i)); r.ContentLength != want {
		s.fail(w, se, rf, http.StatusBadRequest, CodeInvalid, fmt.Sprintf("block %d is %d bytes, not %d", i, want, r.ContentLength))
		return
	}
	if h := r.Header.Get(HeaderBlockHash); !strings.EqualFold(h, hex.EncodeToString(p.Blocks[i][:])) {
		s.fail(w, se, rf, http.StatusUnprocessableEntity, CodeChecksum, fmt.Sprintf("block %d: %s is not its planned SHA-256", i, HeaderBlockHash))
		return
	}
	data, err := readAll(w, r, r.ContentLength, s.o.BlockTimeout)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		s.fail(w, se, rf, http.StatusRequestTimeout, CodeTimeout, fmt.Sprintf("block %d did not arrive within %s", i, s.o.BlockTimeout))
		return
	case err != nil:
		// Cut in the middle: the block is lost, the upload goes on.
		s.o.Log.Info("upload: block cut", "id", se.id, "block", i, "err", err)
		w.Header().Set("Connection", "close")
		http.Error(w, "the block was cut; send it again", http.StatusBadRequest)
		return
	}
	if err := se.part.WriteBlock(i, data); err != nil {
		code := media.Code(err)
		s.fail(w, se, rf, storeStatus(code), code, err.Error())
		return
	}
	se.count++
	if se.part.MissingCount() > 0 {
		writeStatus(w, se.statusLocked())
		return
	}
	m, err := se.part.Commit()
	if err != nil {
		code := media.Code(err)
		s.fail(w, se, rf, storeStatus(code), code, err.Error())
		return
	}
	se.over = true
	s.forget(se)
	if err := s.o.Tickets.Stored(se.id, m); err != nil {
		if derr := s.o.Store.Delete(m.ID); derr != nil {
			s.o.Log.Warn("upload: remove a file stored too late", "id", m.ID, "err", derr)
		}
		s.refuse(w, rf, http.StatusGone, "", "the transfer ended before the file was complete")
		return
	}
	st := Status{ID: se.id, Blocks: len(p.Blocks), BlockSize: p.BlockSize, Missing: [][2]int{}, Stored: true,
		Media: &Stored{ID: m.ID, Size: m.Size, SHA256: m.SHA256, Transport: m.Transport}}
	writeStatus(w, st)
}

func (se *session) statusLocked() Status {
	p := se.part.Plan()
	return Status{ID: se.id, Blocks: len(p.Blocks), BlockSize: p.BlockSize, Missing: ranges(se.part.Missing())}
}

// Close suspends every upload (partials kept, tickets let go).
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	all := make([]*session, 0, len(s.sessions))
	for _, se := range s.sessions {
		all = append(all, se)
	}
	s.mu.Unlock()
	for _, se := range all {
		s.suspend(se)
	}
}

// refuse answers status with reason and reports it. The connection is
// closed after the answer: a body not read is never read.
func (s *Server) refuse(w http.ResponseWriter, rf Refusal, status int, code, reason string) {
	rf.Status, rf.Code, rf.Reason = status, code, reason
	if s.o.Refused != nil {
		s.o.Refused(rf)
	}
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(struct {
		Code    string `json:"code,omitempty"`
		Message string `json:"message"`
	}{code, reason})
	_, _ = w.Write(append(b, '\n'))
}

func writeStatus(w http.ResponseWriter, st Status) {
	if st.Missing == nil {
		st.Missing = [][2]int{}
	}
	b, err := json.Marshal(st)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// readAll reads r's body, at most limit bytes, within timeout.
func readAll(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	if r.ContentLength < 0 || r.ContentLength > limit {
		return nil, fmt.Errorf("a body of %d bytes, at most %d", r.ContentLength, limit)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, r.ContentLength)
	body := http.MaxBytesReader(w, r.Body, limit)
	n, err := readFull(body, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func readFull(r interface{ Read([]byte) (int, error) }, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			if n == len(buf) {
				break
			}
			return n, err
		}
	}
	return n, nil
}

func bearer(r *http.Request) (string, bool) {
	a := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(a, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || len(tok) > 512 {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ranges turns ascending indexes into half-open ranges.
func ranges(idx []int) [][2]int {
	out := [][2]int{}
	for _, i := range idx {
		if n := len(out); n > 0 && out[n-1][1] == i {
			out[n-1][1]++
			continue
		}
		out = append(out, [2]int{i, i + 1})
	}
	return out
}

func storeStatus(code string) int {
	switch code {
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeBusy:
		return http.StatusConflict
	case CodeDiskFull:
		return http.StatusInsufficientStorage
	case CodeChecksum:
		return http.StatusUnprocessableEntity
	case CodeInvalid:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
