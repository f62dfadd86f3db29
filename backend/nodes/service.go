package nodes

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// Events the service sends (declared by [Service.Register]).
const (
	// EventPresence goes to operator connections: {entries:[PresenceEntry…]}.
	EventPresence = "presence"
	// EventInvokeRequest goes to one node connection: [InvokeRequestEvent].
	EventInvokeRequest = "node.invoke.request"
	// EventExecAskRequested goes to admin connections: [ExecAsk].
	EventExecAskRequested = "exec.ask.requested"
	// EventExecAskResolved goes to admin connections when an ask is
	// closed: {id, decision, by:"person"|"timeout"|"cancelled"}.
	EventExecAskResolved = "exec.ask.resolved"
)

// Defaults for [Options].
const (
	DefaultCoalesceDelay  = 250 * time.Millisecond
	DefaultSweepInterval  = 15 * time.Second
	DefaultInvokeTimeout  = 30 * time.Second
	MaxInvokeTimeout      = 10 * time.Minute
	DefaultMaxResultBytes = 5 << 20 // bytes of a result's payload (JSON) carried inline
	DefaultAskTimeout     = 2 * time.Minute
	MaxAskTimeout         = 10 * time.Minute
	// DefaultMaxPendingInvokes caps the invokes waiting for one node
	// connection (sent, not yet answered); see Options.MaxPendingInvokes.
	DefaultMaxPendingInvokes = 64
)

// ErrNoGateway: [New] was called without Options.Gateway.
var ErrNoGateway = errors.New("nodes: Options.Gateway is required")

// Auditor records one decision (*audit.Log implements it).
type Auditor interface {
	Record(e audit.Entry) error
}

// Options configure a [Service]. Zero values take the defaults.
type Options struct {
	// Gateway sends the events and serves the methods. Required.
	Gateway *gateway.Server
	// Audit receives one entry per node.invoke decision and per refused
	// node method. Nil: nothing is audited (tests of the bare service).
	Audit Auditor
	// PresenceTTL and PresenceMax: see [PresenceOptions] (5 min, 200).
	// Disconnected nodes stay in node.list for PresenceTTL too.
	PresenceTTL time.Duration
	PresenceMax int
	// CoalesceDelay: presence changes within it make one "presence"
	// event; default 250 ms.
	CoalesceDelay time.Duration
	// SweepInterval: how often Run expires old entries; default 15 s.
	SweepInterval time.Duration
	// MaxResultBytes caps a node.invoke.result payload (its JSON, bytes);
	// default 5 MiB. A larger one is refused (PAYLOAD_TOO_LARGE) and the
	// invoke fails with that code.
	MaxResultBytes int
	// MaxPendingInvokes caps the invokes waiting for the answer of one
	// node connection; default DefaultMaxPendingInvokes (64). One more is
	// answered UNAVAILABLE (retryable) at once, without being sent: a
	// burst never piles up in a node's send queue, and its caller never
	// waits for a timeout. (`atrium node` runs 8 at once and answers the
	// rest busy at once too.)
	MaxPendingInvokes int
	// MayInvoke, when set, decides whether a paired operator device's
	// connection may call node.invoke: nil to allow, else the reason it may
	// not, answered FORBIDDEN and audited. The wiring allows only devices
	// whose memory scope is admin (docs/PROTOCOL.md "Device scope"): a node
	// command such as system.run on a computer that holds the workspace
	// reads everything, so a narrower scope must not reach one. Nil: every
	// operator may invoke. The person's own connections (the operator
	// token) and the agents' nodes tool are never asked.
	MayInvoke func(ctx context.Context, deviceID string) error
	// Media takes the files of media commands (IsMediaCommand: camera.snap,
	// …): node.invoke expects a transfer before it sends the request, and
	// node.media.offer hands the node's offer to it. The wiring passes an
	// adapter over rtc.Receiver. Nil (tests of the bare service): no
	// transfer is expected and a media command's result passes through as
	// any other, media included; node.media.offer is refused (FORBIDDEN).
	Media MediaReceiver
	// MaxMediaBytes caps one media command's file (0: the media store's
	// limit, media.DefaultMaxFileSize unless the wiring set another).
	MaxMediaBytes int64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock of presence and node timestamps and expiry
	// (timeouts use real timers); default time.Now.
	Now func() time.Time
}

// peer is one authenticated connection as the gateway reported it.
type peer gateway.ConnInfo

func (p peer) isNode() bool { return p.Principal.Role == gateway.RoleNode }

// nodeID is the registry id of a node connection.
// NodeIDOf is the node id of a node connection: its device id, or
// "local:<connID>" for the local node (the operator token with role node).
func NodeIDOf(p gateway.Principal, connID string) string {
	return peer(gateway.ConnInfo{ConnID: connID, Principal: p}).nodeID()
}

func (p peer) nodeID() string {
	if p.Principal.Device != "" {
		return p.Principal.Device
	}
	return "local:" + p.ConnID
}

func (p peer) name() string {
	switch {
	case p.Client.DisplayName != "":
		return p.Client.DisplayName
	case p.Client.ID != "":
		return p.Client.ID
	}
	return p.nodeID()
}

// Service holds presence, the node registry, the pending invokes and the
// exec asks. Create it with [New], add its methods with [Service.Register],
// report connections with Connected/Disconnected, and keep [Service.Run]
// running. Safe for concurrent use.
type Service struct {
	o        Options
	gw       *gateway.Server
	log      *slog.Logger
	presence *Presence

	mu            sync.Mutex
	peers         map[string]*peerState // open connections by connId
	nodes         map[string]*nodeState // by nodeId
	invokes       map[string]*pendingInvoke
	pendingByConn map[string]int            // invokes waiting per node connection
	transfers     map[string]*pendingInvoke // media transfers by id, until their invoke ends
	asks          map[string]*pendingAsk

	flushMu   sync.Mutex
	scheduled bool
	flushes   uint64 // presence events sent (tests, benchmarks)
}

type peerState struct {
	p   peer
	key string // presence key
}

// New returns a Service with o's defaults.
func New(o Options) (*Service, error) {
	if o.Gateway == nil {
		return nil, ErrNoGateway
	}
	if o.CoalesceDelay <= 0 {
		o.CoalesceDelay = DefaultCoalesceDelay
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = DefaultMaxResultBytes
	}
	if o.MaxPendingInvokes <= 0 {
		o.MaxPendingInvokes = DefaultMaxPendingInvokes
	}
	if o.PresenceTTL <= 0 {
		o.PresenceTTL = DefaultPresenceTTL
	}
	if o.PresenceMax <= 0 {
		o.PresenceMax = DefaultPresenceMax
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{
		o:        o,
		gw:       o.Gateway,
		log:      o.Logger.With("component", "nodes"),
		presence: NewPresence(PresenceOptions{TTL: o.PresenceTTL, Max: o.PresenceMax, Now: o.Now}),
		peers:    map[string]*peerState{},
		nodes:    map[string]*nodeState{},
		invokes:  map[string]*pendingInvoke{},
		asks:     map[string]*pendingAsk{},

		pendingByConn: map[string]int{},
		transfers:     map[string]*pendingInvoke{},
	}, nil
}

// Presence is the presence table.
func (s *Service) Presence() *Presence { return s.presence }

// Connected records a new authenticated connection (the gateway's
// OnAuthenticated hook): its presence entry, and for a node connection its
// registry entry. Connections of other roles (an unpaired device) are
// ignored; an operator connection of client mode ModeCLI (one `atrium`
// command) gets no presence entry.
func (s *Service) Connected(ci gateway.ConnInfo) {
	p := peer(ci)
	if p.Principal.Role != gateway.RoleOperator && p.Principal.Role != gateway.RoleNode {
		return
	}
	if p.ConnectedAt.IsZero() {
		p.ConnectedAt = s.o.Now()
	}
	p.Caps, p.Commands = sortedSet(p.Caps), sortedSet(p.Commands)
	key := ""
	if inPresence(p) {
		key = s.presence.Seen(p.ConnID, presenceOf(p))
	}
	s.mu.Lock()
	s.peers[p.ConnID] = &peerState{p: p, key: key}
	if p.isNode() {
		s.nodeConnectedLocked(p)
	}
	s.mu.Unlock()
	s.log.Debug("peer connected", "connId", p.ConnID, "role", p.Principal.Role, "device", p.Principal.Device)
	s.changed()
}

// Disconnected records that a connection ended (the gateway's OnClosed
// hook): its presence entry and node entry become disconnected and its
// pending invokes fail with UNAVAILABLE (its exec asks end with the
// requests that wait for them).
func (s *Service) Disconnected(ci gateway.ConnInfo) {
	connID := ci.ConnID
	s.mu.Lock()
	ps := s.peers[connID]
	delete(s.peers, connID)
	var gone []*pendingInvoke
	if ps != nil && ps.p.isNode() {
		s.nodeConnGoneLocked(ps.p.nodeID(), connID)
		gone = s.failConnLocked(connID)
	}
	s.mu.Unlock()
	if ps == nil {
		return
	}
	for _, inv := range gone {
		if inv.detached {
			s.log.Info("media: node disconnected mid-transfer, waiting for a resume", "node", inv.nodeID, "transfer", inv.transfer)
			inv.finish(invokeOutcome{detached: true})
			continue
		}
		inv.finish(invokeOutcome{err: gateway.Errorf(gateway.CodeUnavailable, "node %s disconnected", inv.name)})
	}
	if ps.key == "" {
		return
	}
	s.presence.Gone(ps.key, connID)
	s.log.Debug("peer disconnected", "connId", connID)
	s.changed()
}

// ModeCLI is the client.mode of the command line's connections: each
// command is one short connection, so it is no presence entry (issue 24).
const ModeCLI = "cli"

// inPresence reports whether connection p has a presence entry: every
// operator and node connection but a command line's.
func inPresence(p peer) bool { return p.isNode() || p.Client.Mode != ModeCLI }

func presenceOf(p peer) PresenceEntry {
	host := p.Client.DisplayName
	if host == "" {
		host = p.Client.ID
	}
	return PresenceEntry{
		InstanceID: p.Client.InstanceID, Host: host, IP: p.RemoteIP, Version: p.Client.Version,
		Platform: p.Client.Platform, Mode: p.Client.Mode, Role: p.Principal.Role, DeviceID: p.Principal.Device,
		Caps: p.Caps, Commands: p.Commands,
	}
}

// PresenceSnapshot is the presence list for hello-ok snapshot.presence.
func (s *Service) PresenceSnapshot() []any {
	list := s.presence.List()
	out := make([]any, len(list))
	for i, e := range list {
		out[i] = e
	}
	return out
}

// PresenceEvent is the payload of the "presence" event.
type PresenceEvent struct {
	Entries []PresenceEntry `json:"entries"`
}

// changed schedules one presence event after CoalesceDelay, unless one is
// already scheduled: the changes until then go out together.
func (s *Service) changed() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.scheduled {
		return
	}
	s.scheduled = true
	time.AfterFunc(s.o.CoalesceDelay, s.flush)
}

func (s *Service) flush() {
	s.flushMu.Lock()
	s.scheduled = false
	s.flushes++
	s.flushMu.Unlock()
	s.gw.Broadcast(EventPresence, PresenceEvent{Entries: s.presence.List()})
}

// Flushes is the number of presence events sent so far.
func (s *Service) Flushes() uint64 {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.flushes
}

// Sweep expires presence entries and disconnected nodes older than the
// TTL, announcing the change; Run calls it every SweepInterval. It
// returns how many entries went.
func (s *Service) Sweep() int {
	n := s.presence.Expire()
	now := s.o.Now()
	s.mu.Lock()
	for id, ns := range s.nodes {
		if len(ns.conns) == 0 && !now.Before(ns.gone.Add(s.o.PresenceTTL)) {
			delete(s.nodes, id)
			n++
		}
	}
	s.mu.Unlock()
	if n > 0 {
		s.changed()
	}
	return n
}

// Run sweeps expired entries every SweepInterval until ctx ends; it
// returns nil then.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.o.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.Sweep()
		}
	}
}

// auditRecord records one decision; a failure is logged (the decision
// stands).
func (s *Service) auditRecord(op, role, ip, target string, allowed bool, reason string) {
	if s.o.Audit == nil {
		return
	}
	if err := s.o.Audit.Record(audit.Entry{Operation: op, Role: role, Target: target, Result: audit.Result(allowed), Reason: reason, IP: ip}); err != nil {
		s.log.Error("nodes audit failed", "operation", op, "target", target, "err", err)
	}
}

// AuditRole is the audit log's role for a gateway principal: "admin" for
// the local operator, else its key ("node", "operator/device:<id>",
// "node/device:<id>").
func AuditRole(p gateway.Principal) string {
	if p.Class() == gateway.Admin {
		return "admin"
	}
	return p.Key()
}

func sortedSet(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
