package live

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// Methods and events (docs/PROTOCOL.md "Live view"; who may call each is
// in "Who may call").
const (
	MethodOpen  = "live.open"
	MethodStop  = "live.stop"
	MethodSave  = "live.save"
	MethodOffer = "node.live.offer"
	// EventChunk goes to the viewer's connection only: {viewId, seq, data
	// (base64 of WebM bytes), ageMs?}.
	EventChunk = "live.chunk"
	// EventEnded goes to the viewer's connection: {viewId, reason, by}.
	EventEnded = "live.ended"
	// SaveCommand is the command of a saved clip's sidecar.
	SaveCommand = "live.save"
)

// Node commands that start a live view (declared by the node, approved at
// pairing like every command).
const (
	CommandCamera = "camera.live"
	CommandScreen = "screen.live"
)

// Reasons of live.ended.
const (
	ReasonStopped     = "stopped"      // the viewer (by "viewer") or the node's person (by "node") stopped it
	ReasonViewerSlow  = "viewer_slow"  // the viewer's connection fell Options.ViewerBacklog behind
	ReasonViewerGone  = "viewer_gone"  // the viewer's connection closed
	ReasonNodeGone    = "node_gone"    // the node's channel or connection closed
	ReasonNodeSilent  = "node_silent"  // no message from the node for Options.IdleTimeout
	ReasonMaxDuration = "max_duration" // Options.MaxDuration reached
	ReasonBadStream   = "bad_stream"   // the node sent bytes that are not a WebM stream, or an oversized chunk
	ReasonShutdown    = "shutdown"     // the gateway is stopping
)

// Who ended a view (live.ended's by).
const (
	ByViewer  = "viewer"
	ByNode    = "node"
	ByGateway = "gateway"
)

// ErrOffer: a malformed SDP offer (an Acceptor wraps it); INVALID_REQUEST.
var ErrOffer = errors.New("invalid live SDP offer")

// Defaults of Options.
const (
	DefaultMaxViews        = 4
	DefaultMaxViewsPerNode = 1
	DefaultMaxDuration     = 30 * time.Minute
	DefaultIdleTimeout     = 10 * time.Second
	DefaultOpenTimeout     = 30 * time.Second
	DefaultPingInterval    = time.Second
	DefaultMaxChunkBytes   = 256 << 10 // the data channel's message size (rtc.DefaultMaxMessageSize)
	DefaultViewerBacklog   = 4 << 20   // bytes queued to the viewer's WebSocket
	DefaultRingBytes       = 64 << 20
	MaxSaveSeconds         = 60
	DefaultTimesliceMs     = 250
	MaxOfferSDP            = 64 << 10
	lingerStop             = time.Second // the node's 'X' is flushed before its connection is closed
)

// Hooks receive what a node's live connection delivers (see rtc.StreamHooks).
type Hooks struct {
	Message func(b []byte)
	Closed  func()
}

// Conn is the gateway's side of a node's live connection.
type Conn interface {
	Send(b []byte) error
	Close()
}

// Acceptor answers a node's SDP offer from peer (its WebSocket's address)
// and returns the connection and the SDP answer; errors wrap ErrOffer for
// a malformed offer. The wiring implements it with rtc.AcceptStream.
type Acceptor func(ctx context.Context, peer net.IP, offerSDP string, h Hooks) (Conn, string, error)

// Invoker runs a node command (*nodes.Service).
type Invoker interface {
	Invoke(ctx context.Context, who nodes.Caller, req nodes.InvokeRequest) (nodes.InvokeResult, error)
}

// Auditor records one decision (*audit.Log).
type Auditor interface {
	Record(e audit.Entry) error
}

// Options configure a Service. Zero values take the defaults named.
type Options struct {
	Gateway *gateway.Server // required
	Nodes   Invoker         // required
	Accept  Acceptor        // required
	// Store receives live.save's clips (nil: live.save is UNAVAILABLE).
	Store *media.Store
	// Audit records live.open decisions and refusals (nil: none).
	Audit Auditor
	// MayOpen decides whether a paired operator device may open, stop or
	// save a live view: nil to allow, else the reason it may not (the
	// wiring: scope admin only, as for node.invoke; docs/PROTOCOL.md
	// "Device scope"). Nil MayOpen allows every operator.
	MayOpen func(ctx context.Context, deviceID string) error
	// MaxViews (4) live views in all; MaxViewsPerNode (1) per node.
	MaxViews, MaxViewsPerNode int
	// MaxDuration ends a view after this long (30 min).
	MaxDuration time.Duration
	// IdleTimeout ends a view whose node sent nothing for this long (10 s).
	IdleTimeout time.Duration
	// OpenTimeout bounds live.open: the node's camera, its offer and its
	// channel opening (30 s).
	OpenTimeout time.Duration
	// PingInterval between clock pings to the node (1 s).
	PingInterval time.Duration
	// MaxChunkBytes caps one chunk message from the node (256 KiB).
	MaxChunkBytes int
	// ViewerBacklog: a view whose viewer connection has more than this
	// many bytes waiting to be written ends with viewer_slow (4 MiB),
	// before the gateway would close that connection as a slow consumer.
	ViewerBacklog int64
	// RingBytes caps the clusters kept for live.save (64 MiB); the ring
	// keeps MaxSaveSeconds (60 s) of them.
	RingBytes int
	// Now is the clock (time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxViews <= 0 {
		o.MaxViews = DefaultMaxViews
	}
	if o.MaxViewsPerNode <= 0 {
		o.MaxViewsPerNode = DefaultMaxViewsPerNode
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = DefaultMaxDuration
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.MaxChunkBytes <= 0 {
		o.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if o.ViewerBacklog <= 0 {
		o.ViewerBacklog = DefaultViewerBacklog
	}
	if o.RingBytes <= 0 {
		o.RingBytes = DefaultRingBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Service runs the gateway's live views. Safe for concurrent use.
type Service struct {
	o Options

	// queued is the viewer connection's backlog (the gateway's Queued).
	queued func(connID string) (int64, bool)

	mu     sync.Mutex
	views  map[string]*view
	closed bool
}

// ErrOptions: a required option is missing.
var ErrOptions = errors.New("live: Options.Gateway, Nodes and Accept are required")

// New makes the service; Register adds its methods.
func New(o Options) (*Service, error) {
	if o.Gateway == nil || o.Nodes == nil || o.Accept == nil {
		return nil, ErrOptions
	}
	return &Service{o: o.withDefaults(), views: map[string]*view{}, queued: o.Gateway.Queued}, nil
}

type viewState int

const (
	stOpening viewState = iota // the node was asked; no offer yet
	stOffered                  // the node's connection was answered
	stEnded
)

type view struct {
	s                  *Service
	id, nodeID, source string
	viewer             string // the viewer's connection id
	viewerAdmin        bool
	started            time.Time
	done               chan struct{}

	mu       sync.Mutex
	state    viewState
	nodeConn string
	conn     Conn
	parser   *webmParser
	ring     ring
	last     time.Time // the node's last message
	offset   float64   // node clock − gateway clock, ms
	bestRTT  float64   // of the ping that gave offset (0: none yet)
	width    int
	height   int
	badBytes bool
}

// OpenParams are live.open's params.
type OpenParams struct {
	NodeID   string `json:"nodeId"`
	Source   string `json:"source"`             // "camera" or "screen"
	Facing   string `json:"facing,omitempty"`   // camera: "front" (default) or "back"
	FPS      int    `json:"fps,omitempty"`      // 1…30 (camera 15, screen 5)
	MaxWidth int    `json:"maxWidth,omitempty"` // 160…1920 (640)
}

// OpenResult is live.open's answer.
type OpenResult struct {
	ViewID      string `json:"viewId"`
	NodeID      string `json:"nodeId"`
	Source      string `json:"source"`
	MimeType    string `json:"mimeType"`
	Width       int    `json:"width,omitempty"`
	Height      int    `json:"height,omitempty"`
	TimesliceMs int    `json:"timesliceMs"`
}

// nodeParams are what the node's camera.live / screen.live get.
type nodeParams struct {
	ViewID        string `json:"viewId"`
	Facing        string `json:"facing,omitempty"`
	FPS           int    `json:"fps"`
	MaxWidth      int    `json:"maxWidth"`
	TimesliceMs   int    `json:"timesliceMs"`
	MaxChunkBytes int    `json:"maxChunkBytes"`
}

func (p *OpenParams) check() (string, error) {
	cmd := ""
	switch p.Source {
	case "camera":
		cmd = CommandCamera
		if p.FPS == 0 {
			p.FPS = 15
		}
		if p.Facing == "" {
			p.Facing = "front"
		}
		if p.Facing != "front" && p.Facing != "back" {
			return "", gateway.Errorf(gateway.CodeInvalidRequest, "live.open: facing must be front or back")
		}
	case "screen":
		cmd = CommandScreen
		if p.FPS == 0 {
			p.FPS = 5
		}
		if p.Facing != "" {
			return "", gateway.Errorf(gateway.CodeInvalidRequest, "live.open: facing is for the camera only")
		}
	default:
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "live.open: source must be camera or screen")
	}
	if p.MaxWidth == 0 {
		p.MaxWidth = 640
	}
	switch {
	case p.NodeID == "":
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "live.open: nodeId is required")
	case p.FPS < 1 || p.FPS > 30:
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "live.open: fps must be 1…30")
	case p.MaxWidth < 160 || p.MaxWidth > 1920:
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "live.open: maxWidth must be 160…1920")
	}
	return cmd, nil
}

func callerOf(c *gateway.Call) nodes.Caller {
	return nodes.Caller{Role: nodes.AuditRole(c.Principal), IP: c.RemoteIP}
}

func (s *Service) audit(op string, c *gateway.Call, target string, allowed bool, reason string) {
	if s.o.Audit == nil {
		return
	}
	res := audit.Denied
	if allowed {
		res = audit.Allowed
	}
	if err := s.o.Audit.Record(audit.Entry{Operation: op, Role: nodes.AuditRole(c.Principal), Target: target, Result: res, Reason: reason, IP: c.RemoteIP}); err != nil {
		s.o.Logger.Warn("live audit not recorded", "op", op, "err", err)
	}
}

// mayUse asks MayOpen about a paired operator device; a refusal is
// FORBIDDEN and audited.
func (s *Service) mayUse(ctx context.Context, c *gateway.Call, target string) error {
	if s.o.MayOpen == nil || c.Principal.Class() != gateway.OperatorDevice {
		return nil
	}
	if err := s.o.MayOpen(ctx, c.Principal.Device); err != nil {
		s.audit(c.Method, c, target, false, err.Error())
		return gateway.Errorf(gateway.CodeForbidden, "%s: %v", c.Method, err)
	}
	return nil
}

// Open serves live.open: it asks the node to stream (camera.live or
// screen.live) and returns once the node's channel is open and the node
// answered. Errors: INVALID_REQUEST, FORBIDDEN (audited), UNAVAILABLE
// (bounds; the node could not start), node.invoke's.
func (s *Service) Open(ctx context.Context, c *gateway.Call, p OpenParams) (OpenResult, error) {
	cmd, err := p.check()
	if err != nil {
		return OpenResult{}, err
	}
	target := p.NodeID + " " + p.Source
	if err := s.mayUse(ctx, c, target); err != nil {
		return OpenResult{}, err
	}
	v := &view{s: s, id: media.NewID(), nodeID: p.NodeID, source: p.Source, viewer: c.ConnID,
		viewerAdmin: c.Principal.Class() == gateway.Admin, started: s.o.Now(), done: make(chan struct{}),
		parser: newWebmParser(), ring: ring{keep: MaxSaveSeconds * time.Second, maxBytes: s.o.RingBytes}}
	s.mu.Lock()
	perNode := 0
	for _, o := range s.views {
		if o.nodeID == p.NodeID {
			perNode++
		}
	}
	switch {
	case s.closed:
		s.mu.Unlock()
		return OpenResult{}, gateway.Errorf(gateway.CodeUnavailable, "live.open: the gateway is stopping")
	case len(s.views) >= s.o.MaxViews:
		s.mu.Unlock()
		return OpenResult{}, &gateway.Error{Code: gateway.CodeUnavailable, Retryable: true,
			Message: fmt.Sprintf("live.open: %d live views are open, the most there may be; stop one first", len(s.views))}
	case perNode >= s.o.MaxViewsPerNode:
		s.mu.Unlock()
		return OpenResult{}, &gateway.Error{Code: gateway.CodeUnavailable, Retryable: true,
			Message: fmt.Sprintf("live.open: node %s is already streaming a live view (at most %d); stop it first", p.NodeID, s.o.MaxViewsPerNode)}
	}
	s.views[v.id] = v
	s.mu.Unlock()

	params, _ := json.Marshal(nodeParams{ViewID: v.id, Facing: p.Facing, FPS: p.FPS, MaxWidth: p.MaxWidth,
		TimesliceMs: DefaultTimesliceMs, MaxChunkBytes: s.o.MaxChunkBytes})
	res, err := s.o.Nodes.Invoke(ctx, callerOf(c), nodes.InvokeRequest{NodeID: p.NodeID, Command: cmd, Params: params,
		TimeoutMs: s.o.OpenTimeout.Milliseconds()})
	if err != nil {
		s.end(v, "", "", false)
		return OpenResult{}, err
	}
	if !res.OK {
		s.end(v, "", "", false)
		code, msg := gateway.CodeUnavailable, "the node could not start the live view"
		if res.Error != nil {
			msg = fmt.Sprintf("%s (%s)", res.Error.Message, res.Error.Code)
			if res.Error.Code == gateway.CodeForbidden {
				code = gateway.CodeForbidden
			}
		}
		return OpenResult{}, &gateway.Error{Code: code, Message: fmt.Sprintf("live.open: node %s: %s", p.NodeID, msg),
			Details: map[string]any{"nodeError": res.Error}}
	}
	var got struct {
		MimeType string `json:"mimeType"`
		Width    int    `json:"width"`
		Height   int    `json:"height"`
	}
	_ = json.Unmarshal(res.Payload, &got)
	v.mu.Lock()
	state := v.state
	v.width, v.height = got.Width, got.Height
	v.mu.Unlock()
	if state != stOffered {
		s.end(v, "", "", false)
		return OpenResult{}, gateway.Errorf(gateway.CodeUnavailable, "live.open: node %s answered without a live connection", p.NodeID)
	}
	s.audit(MethodOpen, c, target, true, "live view opened")
	s.o.Logger.Info("live view opened", "view", v.id, "node", p.NodeID, "source", p.Source)
	go v.watch()
	return OpenResult{ViewID: v.id, NodeID: res.NodeID, Source: p.Source, MimeType: got.MimeType, Width: got.Width,
		Height: got.Height, TimesliceMs: DefaultTimesliceMs}, nil
}

// Offer serves node.live.offer {viewId, sdp} from a node connection: only
// the node the view was opened on, only once, only while it opens.
// Errors: INVALID_REQUEST, FORBIDDEN (audited), UNAVAILABLE.
func (s *Service) Offer(ctx context.Context, c *gateway.Call, viewID, sdp string) (string, error) {
	switch {
	case viewID == "" || sdp == "":
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "node.live.offer: viewId and sdp are required")
	case len(sdp) > MaxOfferSDP:
		return "", gateway.Errorf(gateway.CodeInvalidRequest, "node.live.offer: sdp is %d bytes, at most %d", len(sdp), MaxOfferSDP)
	}
	nodeID := nodes.NodeIDOf(c.Principal, c.ConnID)
	refuse := func(reason string) (string, error) {
		s.audit(MethodOffer, c, nodeID+" "+viewID, false, reason)
		return "", gateway.Errorf(gateway.CodeForbidden, "node.live.offer: %s", reason)
	}
	s.mu.Lock()
	v := s.views[viewID]
	s.mu.Unlock()
	if v == nil {
		return refuse(fmt.Sprintf("no live view %q was asked for (unknown or ended)", viewID))
	}
	if v.nodeID != nodeID {
		return refuse(fmt.Sprintf("live view %s was asked of another node", viewID))
	}
	v.mu.Lock()
	if v.state != stOpening {
		v.mu.Unlock()
		return refuse(fmt.Sprintf("live view %s has its connection already", viewID))
	}
	v.state = stOffered
	v.nodeConn = c.ConnID
	v.last = s.o.Now()
	v.mu.Unlock()
	conn, answer, err := s.o.Accept(ctx, net.ParseIP(c.RemoteIP), sdp, Hooks{Message: v.message, Closed: func() { s.end(v, ReasonNodeGone, ByNode, true) }})
	if err != nil {
		s.end(v, ReasonNodeGone, ByGateway, true)
		if errors.Is(err, ErrOffer) {
			return "", gateway.Errorf(gateway.CodeInvalidRequest, "node.live.offer: %v", err)
		}
		s.o.Logger.Warn("live offer not answered", "view", viewID, "err", err)
		return "", gateway.Errorf(gateway.CodeUnavailable, "node.live.offer: the gateway could not answer the offer")
	}
	v.mu.Lock()
	ended := v.state == stEnded
	if !ended {
		v.conn = conn
	}
	v.mu.Unlock()
	if ended {
		conn.Close()
		return "", gateway.Errorf(gateway.CodeUnavailable, "node.live.offer: live view %s ended", viewID)
	}
	return answer, nil
}

// viewOf finds a view the caller may act on: its viewer's connection or
// the person (admin); anything else is as unknown.
func (s *Service) viewOf(c *gateway.Call, viewID string) *view {
	s.mu.Lock()
	v := s.views[viewID]
	s.mu.Unlock()
	if v == nil || (v.viewer != c.ConnID && c.Principal.Class() != gateway.Admin) {
		return nil
	}
	return v
}

// Stop serves live.stop: false when there is no such view of the caller's.
func (s *Service) Stop(ctx context.Context, c *gateway.Call, viewID string) (bool, error) {
	if err := s.mayUse(ctx, c, viewID); err != nil {
		return false, err
	}
	v := s.viewOf(c, viewID)
	if v == nil {
		return false, nil
	}
	s.end(v, ReasonStopped, ByViewer, true)
	return true, nil
}

// SaveResult is live.save's answer: the stored clip's sidecar and path.
type SaveResult struct {
	media.Meta
	Path string `json:"path"`
}

// Save serves live.save: the last seconds (1…MaxSaveSeconds) of a live
// view, from its last keyframe cluster at or before then, stored in the
// media store as a WebM with command "live.save". Errors: INVALID_REQUEST,
// NOT_FOUND, FORBIDDEN, UNAVAILABLE (nothing to save yet, no store, the
// store's bounds), INTERNAL.
func (s *Service) Save(ctx context.Context, c *gateway.Call, viewID string, seconds int) (SaveResult, error) {
	if seconds < 1 || seconds > MaxSaveSeconds {
		return SaveResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "live.save: seconds must be 1…%d", MaxSaveSeconds)
	}
	if err := s.mayUse(ctx, c, viewID); err != nil {
		return SaveResult{}, err
	}
	v := s.viewOf(c, viewID)
	if v == nil {
		return SaveResult{}, gateway.Errorf(gateway.CodeNotFound, "live.save: no live view %q of yours", viewID)
	}
	if s.o.Store == nil {
		return SaveResult{}, gateway.Errorf(gateway.CodeUnavailable, "live.save: this gateway has no media store")
	}
	v.mu.Lock()
	file, dur, err := v.ring.last(time.Duration(seconds)*time.Second, s.o.Now())
	w, h := v.width, v.height
	v.mu.Unlock()
	if errors.Is(err, ErrNothingToSave) {
		return SaveResult{}, &gateway.Error{Code: gateway.CodeUnavailable, Retryable: true, Message: "live.save: no keyframe has arrived yet; try again in a moment"}
	}
	if err != nil {
		return SaveResult{}, fmt.Errorf("live.save: %w", err)
	}
	m, err := s.o.Store.Put(media.Plan{ID: media.NewID(), Device: v.nodeID, Command: SaveCommand,
		Name: "live-" + v.source + ".webm", MIME: "video/webm", Width: w, Height: h, DurationMs: dur,
		Transport: media.TransportWebRTC}, file)
	switch {
	case errors.Is(err, media.ErrBusy), errors.Is(err, media.ErrDiskFull), errors.Is(err, media.ErrTooLarge):
		return SaveResult{}, gateway.Errorf(gateway.CodeUnavailable, "live.save: %v", err)
	case err != nil:
		return SaveResult{}, fmt.Errorf("live.save: %w", err)
	}
	p, err := s.o.Store.Path(m.ID)
	if err != nil {
		return SaveResult{}, fmt.Errorf("live.save: %w", err)
	}
	s.o.Logger.Info("live view saved", "view", v.id, "media", m.ID, "bytes", m.Size, "durationMs", dur)
	return SaveResult{Meta: m, Path: p}, nil
}

// Disconnected ends the views of a closed connection (the gateway's
// OnClosed hook): as viewer viewer_gone, as node node_gone.
func (s *Service) Disconnected(ci gateway.ConnInfo) {
	s.mu.Lock()
	var gone []*view
	for _, v := range s.views {
		v.mu.Lock()
		if v.viewer == ci.ConnID || v.nodeConn == ci.ConnID {
			gone = append(gone, v)
		}
		v.mu.Unlock()
	}
	s.mu.Unlock()
	for _, v := range gone {
		if v.viewer == ci.ConnID {
			s.end(v, ReasonViewerGone, ByViewer, true)
		} else {
			s.end(v, ReasonNodeGone, ByNode, true)
		}
	}
}

// Close ends every view (shutdown) and refuses new ones.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	all := make([]*view, 0, len(s.views))
	for _, v := range s.views {
		all = append(all, v)
	}
	s.mu.Unlock()
	for _, v := range all {
		s.end(v, ReasonShutdown, ByGateway, true)
	}
}

// Views is the number of live views (opening ones included).
func (s *Service) Views() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.views)
}

// end ends v once: the node is told 'X' {reason, by} (unless it ended it)
// and its connection closed after lingerStop, the viewer live.ended
// (when announce).
func (s *Service) end(v *view, reason, by string, announce bool) {
	v.mu.Lock()
	if v.state == stEnded {
		v.mu.Unlock()
		return
	}
	v.state = stEnded
	conn := v.conn
	v.mu.Unlock()
	close(v.done)
	s.mu.Lock()
	delete(s.views, v.id)
	s.mu.Unlock()
	if conn != nil {
		if by != ByNode {
			_ = conn.Send(jsonMsg(msgStop, stopMsg{Reason: reason, By: by}))
			time.AfterFunc(lingerStop, conn.Close)
		} else {
			conn.Close()
		}
	}
	if announce {
		// Best effort: a viewer gone has nothing to be told.
		_ = s.o.Gateway.Send(v.viewer, EventEnded, map[string]string{"viewId": v.id, "reason": reason, "by": by})
		s.o.Logger.Info("live view ended", "view", v.id, "node", v.nodeID, "reason", reason, "by", by)
	}
}

// watch pings the node for its clock and ends the view when the node
// falls silent or MaxDuration is reached.
func (v *view) watch() {
	s := v.s
	t := time.NewTicker(s.o.PingInterval)
	defer t.Stop()
	limit := time.NewTimer(s.o.MaxDuration)
	defer limit.Stop()
	v.ping()
	for {
		select {
		case <-v.done:
			return
		case <-limit.C:
			s.end(v, ReasonMaxDuration, ByGateway, true)
			return
		case <-t.C:
			v.mu.Lock()
			silent := s.o.Now().Sub(v.last) > s.o.IdleTimeout
			v.mu.Unlock()
			if silent {
				s.end(v, ReasonNodeSilent, ByGateway, true)
				return
			}
			v.ping()
		}
	}
}

func (v *view) ping() {
	v.mu.Lock()
	conn := v.conn
	v.mu.Unlock()
	if conn != nil {
		_ = conn.Send(jsonMsg(msgPing, pingMsg{T: unixMs(v.s.o.Now())}))
	}
}

func unixMs(t time.Time) float64 { return float64(t.UnixNano()) / 1e6 }

// message takes one message of the node's channel (docs/PROTOCOL.md
// "Live view", framing).
func (v *view) message(b []byte) {
	s := v.s
	now := s.o.Now()
	v.mu.Lock()
	if v.state == stEnded {
		v.mu.Unlock()
		return
	}
	v.last = now
	v.mu.Unlock()
	switch b[0] {
	case msgChunk:
		v.chunk(b, now)
	case msgPong:
		var p pongMsg
		if json.Unmarshal(b[1:], &p) != nil {
			s.end(v, ReasonBadStream, ByGateway, true)
			return
		}
		rtt := unixMs(now) - p.T
		if rtt < 0 || p.N <= 0 {
			return
		}
		v.mu.Lock()
		if v.bestRTT == 0 || rtt < v.bestRTT {
			v.bestRTT = max(rtt, 1e-3)
			v.offset = p.N - (p.T+unixMs(now))/2
		}
		v.mu.Unlock()
	case msgStop:
		s.end(v, ReasonStopped, ByNode, true)
	default:
		s.end(v, ReasonBadStream, ByGateway, true)
	}
}

// chunk forwards a chunk to the viewer and keeps it in the ring.
func (v *view) chunk(b []byte, now time.Time) {
	s := v.s
	if len(b) < chunkHeader+1 || len(b)-chunkHeader > s.o.MaxChunkBytes {
		s.end(v, ReasonBadStream, ByGateway, true)
		return
	}
	seq := binary.BigEndian.Uint32(b[1:])
	captured := math.Float64frombits(binary.BigEndian.Uint64(b[5:]))
	data := b[chunkHeader:]
	v.mu.Lock()
	segs, err := v.parser.feed(data)
	v.ring.add(segs, now)
	var age *float64
	if v.bestRTT > 0 && captured > 0 {
		a := unixMs(now) - (captured - v.offset)
		age = &a
	}
	v.mu.Unlock()
	if err != nil {
		s.o.Logger.Warn("live stream refused", "view", v.id, "err", err)
		s.end(v, ReasonBadStream, ByGateway, true)
		return
	}
	if q, ok := s.queued(v.viewer); !ok {
		s.end(v, ReasonViewerGone, ByViewer, true)
		return
	} else if q > s.o.ViewerBacklog {
		s.end(v, ReasonViewerSlow, ByGateway, true)
		return
	}
	ev := chunkEvent{ViewID: v.id, Seq: seq, Data: data, AgeMs: age}
	if err := s.o.Gateway.Send(v.viewer, EventChunk, ev); err != nil {
		s.end(v, ReasonViewerGone, ByViewer, true)
	}
}

type chunkEvent struct {
	ViewID string   `json:"viewId"`
	Seq    uint32   `json:"seq"`
	Data   []byte   `json:"data"` // base64 in JSON
	AgeMs  *float64 `json:"ageMs,omitempty"`
}

// Register adds the methods to the gateway and declares the events.
func (s *Service) Register() {
	g := s.o.Gateway
	g.DeclareEvents(EventChunk, EventEnded)
	g.Handle(MethodOpen, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p OpenParams
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.Open(ctx, c, p)
	})
	g.Handle(MethodStop, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ViewID string `json:"viewId"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		ok, err := s.Stop(ctx, c, p.ViewID)
		if err != nil {
			return nil, err
		}
		return map[string]bool{"stopped": ok}, nil
	})
	g.Handle(MethodSave, gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ViewID  string `json:"viewId"`
			Seconds int    `json:"seconds"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return s.Save(ctx, c, p.ViewID, p.Seconds)
	})
	g.Handle(MethodOffer, gateway.Write(gateway.Nodes), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ViewID string `json:"viewId"`
			SDP    string `json:"sdp"`
		}
		if err := gateway.DecodeParams(c, &p); err != nil {
			return nil, err
		}
		sdp, err := s.Offer(ctx, c, p.ViewID, p.SDP)
		if err != nil {
			return nil, err
		}
		return map[string]string{"sdp": sdp}, nil
	})
}
