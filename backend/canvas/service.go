package canvas

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// Desktop is the target of the app's own Canvas (every UI connection of
// the person).
const Desktop = "desktop"

// PersonSession is the sessionKey owning what the person (not an agent)
// pushes: its actions reach profile main in session "canvas".
const PersonSession = "main/canvas"

// Defaults of [Options] (docs/PROTOCOL.md "Canvas and A2UI").
const (
	DefaultRenderWait            = 10 * time.Second
	DefaultMaxJSONLBytes         = 1 << 20   // a push's jsonl
	DefaultMaxLines              = 1000      // non-blank lines per push
	DefaultMaxLineBytes          = 256 << 10 // one line
	DefaultMaxSurfacesPerSession = 16        // per target and session
	DefaultMaxComponents         = 2000      // per surface
	DefaultMaxDataLines          = 1000      // data-model updates kept per surface
	DefaultMaxWaitingActions     = 256       // per session
	DefaultRetryInterval         = time.Second
	DefaultMaxHTMLBytes          = 512 << 10
	MaxURLBytes                  = 2048
	MaxJSBytes                   = 64 << 10
	MaxEvalTimeout               = 60 * time.Second
	DefaultEvalTimeout           = 10 * time.Second
	MaxIDBytes                   = 256      // surfaceId, componentId, action name
	MaxContextBytes              = 32 << 10 // an action's context, as JSON
	// MaxActionMessageChars bounds the message an action becomes
	// (characters): under chat's 64,000 (chat.MaxMessageChars), so that a
	// stored action is never one chat refuses.
	MaxActionMessageChars = 60000
)

// Sentinel errors.
var (
	// ErrBusy is what Options.Chat.SendAction returns while the session
	// answers another message: the action waits and is sent later.
	ErrBusy = errors.New("the session is answering")
	// ErrTooManyActions: the session already has MaxWaitingActions waiting.
	ErrTooManyActions = errors.New("too many canvas actions waiting")
)

// Nodes is what the service needs of the node registry (*nodes.Service).
type Nodes interface {
	Describe(id string) (nodes.Node, error)
	Invoke(ctx context.Context, who nodes.Caller, req nodes.InvokeRequest) (nodes.InvokeResult, error)
}

// Chat starts the turns user actions become; the wiring implements it over
// chat.Service.
type Chat interface {
	// SendAction stores message as the user's in session sessionID of
	// profileID and starts its answer (a visible turn), returning the run
	// id. idempotencyKey is the action's id. ErrBusy (wrapped) while the
	// session answers; any other error keeps the action waiting too.
	SendAction(ctx context.Context, profileID, sessionID, message, idempotencyKey string) (string, error)
	// Busy reports whether the session is answering now.
	Busy(profileID, sessionID string) bool
}

// Auditor records one decision (*audit.Log).
type Auditor interface {
	Record(e audit.Entry) error
}

// Options configure a [Service]. Zero values take the defaults.
type Options struct {
	// Gateway serves the methods and carries canvas.update. Required.
	Gateway *gateway.Server
	// DB is state.db: surfaces, presented pages and actions are kept there
	// (tables canvas_*). Required.
	DB *sql.DB
	// Schemas are the official A2UI schemas laid out as
	// frontend.A2UISchemas() (v0_8/…, v0_9/…). Required.
	Schemas fs.FS
	// Nodes is the node registry. Nil: node targets are NOT_FOUND.
	Nodes Nodes
	// Media stores snapshots. Nil: canvas.snapshot is UNAVAILABLE.
	Media *media.Store
	// Chat turns actions into user messages. Nil: actions are stored and
	// wait (tests of the bare service).
	Chat Chat
	// Audit receives refusals and the person's evals. Nil: none.
	Audit Auditor
	// MayUse decides whether a paired operator device may use the Canvas
	// (nil error) — the wiring allows devices scoped admin, as node.invoke.
	// Nil: every operator device may.
	MayUse func(ctx context.Context, deviceID string) error
	// FrameAncestors are more CSP sources that may frame a presented page
	// besides the gateway's own origin: the desktop window's origins
	// ("wails://wails", "wails.localhost:*"; the gateway's AllowedOrigins).
	// Letters, digits and . - : / * only (New refuses others). Default none.
	FrameAncestors []string
	// RenderWait bounds how long a push waits for the target to report it
	// rendered; default DefaultRenderWait (10 s).
	RenderWait time.Duration
	// Bounds: see the Default* constants.
	MaxJSONLBytes, MaxLines, MaxLineBytes, MaxSurfacesPerSession int
	MaxComponents, MaxDataLines, MaxWaitingActions, MaxHTMLBytes int
	// RetryInterval: how often waiting actions are tried again without a
	// Wake; default 1 s.
	RetryInterval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock of stored times; default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxJSONLBytes, DefaultMaxJSONLBytes)
	def(&o.MaxLines, DefaultMaxLines)
	def(&o.MaxLineBytes, DefaultMaxLineBytes)
	def(&o.MaxSurfacesPerSession, DefaultMaxSurfacesPerSession)
	def(&o.MaxComponents, DefaultMaxComponents)
	def(&o.MaxDataLines, DefaultMaxDataLines)
	def(&o.MaxWaitingActions, DefaultMaxWaitingActions)
	def(&o.MaxHTMLBytes, DefaultMaxHTMLBytes)
	if o.RenderWait <= 0 {
		o.RenderWait = DefaultRenderWait
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Service keeps the surfaces and pages of every target, sends them to the
// targets, waits for their render reports and turns user actions into
// messages. Create it with [New], add its methods with [Service.Register],
// report connections with [Service.Connected], and keep [Service.Run]
// running. Safe for concurrent use.
type Service struct {
	o   Options
	v   *Validator
	st  *store
	log *slog.Logger

	mu        sync.Mutex
	surfaces  map[string]map[string]*surface // target → surfaceId → surface
	presented map[string]*Presented          // target → page
	seq       int64
	pending   map[string]chan Rendered // pushId → the first answer
	targetMu  map[string]*sync.Mutex   // serialises the pushes of one target

	wake     chan struct{}
	frameCSP string // FrameCSP with Options.FrameAncestors
}

// Presented is a target's page (canvas.present / navigate).
type Presented struct {
	URL       string     `json:"url,omitempty"`
	HTML      string     `json:"html,omitempty"`
	Token     string     `json:"token,omitempty"` // html: /canvas/frame/<token>
	Placement *Placement `json:"placement,omitempty"`
	Owner     string     `json:"owner"`
}

// FrameURL is the path the page's frame loads, "" for a url page.
func (p *Presented) FrameURL() string {
	if p == nil || p.Token == "" {
		return ""
	}
	return FramePath + p.Token
}

// Placement is where the target shows a page, in CSS pixels of its
// Canvas, where it can honour it.
type Placement struct {
	X      float64 `json:"x"`
	Y      float64 `json:"y"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// New opens the service: the tables in Options.DB, the kept surfaces and
// pages, the schemas. Errors: missing options, a schema that does not
// compile, a database failure.
func New(ctx context.Context, o Options) (*Service, error) {
	if o.Gateway == nil {
		return nil, errors.New("canvas: Options.Gateway is required")
	}
	o = o.withDefaults()
	csp := FrameCSP
	for _, a := range o.FrameAncestors {
		if !validSource(a) {
			return nil, fmt.Errorf("canvas: Options.FrameAncestors: %q is not a CSP source", a)
		}
		csp += " " + a
	}
	v, err := NewValidator(o.Schemas)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, o.DB)
	if err != nil {
		return nil, err
	}
	s := &Service{o: o, v: v, st: st, log: o.Logger.With("component", "canvas"),
		pending: map[string]chan Rendered{}, targetMu: map[string]*sync.Mutex{}, wake: make(chan struct{}, 1), frameCSP: csp}
	if s.surfaces, err = st.loadSurfaces(ctx); err != nil {
		return nil, err
	}
	for _, m := range s.surfaces {
		for _, sf := range m {
			s.seq = max(s.seq, sf.Seq)
		}
	}
	if s.presented, err = st.loadPresented(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Validator is the service's A2UI validator.
func (s *Service) Validator() *Validator { return s.v }

// Who is who asks: the gateway principal (the person's connections) or an
// agent (Agent set, Principal zero).
type Who struct {
	Principal gateway.Principal
	ConnID    string
	IP        string
	// Agent is the agent's role and SessionKey its session
	// ("<profileId>/<sessionId>") when an agent asks through its tool.
	Agent      string
	SessionKey string
}

func (w Who) owner() string {
	if w.SessionKey != "" {
		return w.SessionKey
	}
	return PersonSession
}

// auditRole names who acts in the audit log: "agent:<role>", the
// principal (nodes.AuditRole), or "canvas" for the gateway itself (a
// replay to a node that connects).
func (w Who) auditRole() string {
	switch {
	case w.Agent != "":
		return "agent:" + w.Agent
	case w.Principal.Role == "":
		return "canvas"
	}
	return nodes.AuditRole(w.Principal)
}

func (w Who) caller() nodes.Caller { return nodes.Caller{Role: w.auditRole(), IP: w.IP} }

// lockTarget serialises what is sent to one target, so that it gets the
// pushes in the order they were kept.
func (s *Service) lockTarget(target string) func() {
	s.mu.Lock()
	m := s.targetMu[target]
	if m == nil {
		m = &sync.Mutex{}
		s.targetMu[target] = m
	}
	s.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// checkTarget: "desktop" or a known node.
func (s *Service) checkTarget(method, target string) error {
	switch {
	case target == "":
		return gateway.Errorf(gateway.CodeInvalidRequest, "%s: target is required (%q or a node id)", method, Desktop)
	case target == Desktop:
		return nil
	case s.o.Nodes == nil:
		return gateway.Errorf(gateway.CodeNotFound, "%s: no node %q (no nodes here)", method, target)
	}
	if _, err := s.o.Nodes.Describe(target); err != nil {
		return gateway.Errorf(gateway.CodeNotFound, "%s: no node %q", method, target)
	}
	return nil
}

// PushResult is canvas.a2ui.push's answer.
type PushResult struct {
	PushID       string      `json:"pushId"`
	Applied      int         `json:"applied"`
	Errors       []LineError `json:"errors"`
	Rendered     bool        `json:"rendered"`
	Reason       string      `json:"reason,omitempty"`
	RenderErrors []LineError `json:"renderErrors,omitempty"`
	Surfaces     []string    `json:"surfaces"`
}

// Push validates jsonl line by line, keeps what the valid lines before
// the first invalid one do, sends those lines to target and waits (at most
// RenderWait) for its render report. Errors (nothing applied):
// INVALID_REQUEST, PAYLOAD_TOO_LARGE, NOT_FOUND (target), INTERNAL (the
// database).
func (s *Service) Push(ctx context.Context, who Who, target, jsonl string) (PushResult, error) {
	const method = "canvas.a2ui.push"
	if len(jsonl) > s.o.MaxJSONLBytes {
		return PushResult{}, gateway.Errorf(gateway.CodePayloadTooLarge, "%s: jsonl is %d bytes (at most %d)", method, len(jsonl), s.o.MaxJSONLBytes)
	}
	if err := s.checkTarget(method, target); err != nil {
		return PushResult{}, err
	}
	raw := strings.Split(jsonl, "\n")
	n := 0
	for _, l := range raw {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	if n == 0 {
		return PushResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: jsonl holds no line", method)
	}
	if n > s.o.MaxLines {
		return PushResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: jsonl has %d lines (at most %d per push)", method, n, s.o.MaxLines)
	}
	res := PushResult{PushID: newID(), Errors: []LineError{}, Surfaces: []string{}}
	owner := who.owner()
	unlock := s.lockTarget(target)
	defer unlock()

	s.mu.Lock()
	cur := s.surfaces[target]
	work := map[string]*surface{} // touched surfaces: clones, nil = deleted
	get := func(id string) *surface {
		if sf, ok := work[id]; ok {
			return sf
		}
		if sf := cur[id]; sf != nil {
			c := sf.clone()
			work[id] = c
			return c
		}
		return nil
	}
	owned := func() int { // surfaces of owner on target after the lines so far
		k := 0
		for id, sf := range cur {
			if _, touched := work[id]; !touched && sf.Owner == owner {
				k++
			}
		}
		for _, sf := range work {
			if sf != nil && sf.Owner == owner {
				k++
			}
		}
		return k
	}
	seq := s.seq
	lim := limits{components: s.o.MaxComponents, dataLines: s.o.MaxDataLines}
	var lines []json.RawMessage
	for i, text := range raw {
		text = strings.TrimSuffix(text, "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		if len(text) > s.o.MaxLineBytes {
			res.Errors = append(res.Errors, LineError{Line: i + 1, Reason: fmt.Sprintf("the line is %d bytes (at most %d)", len(text), s.o.MaxLineBytes)})
			break
		}
		l, err := s.v.Check(i+1, []byte(text))
		if err != nil {
			var le LineError
			if !errors.As(err, &le) {
				le = LineError{Line: i + 1, Reason: err.Error()}
			}
			res.Errors = append(res.Errors, le)
			break
		}
		before := get(l.SurfaceID)
		after, reason := apply(before, l, owner, lim)
		if reason == "" && before == nil && after != nil && owned()+1 > s.o.MaxSurfacesPerSession {
			reason = fmt.Sprintf("this session would show %d surfaces on %s (at most %d); delete one first", owned()+1, target, s.o.MaxSurfacesPerSession)
		}
		if reason != "" {
			res.Errors = append(res.Errors, LineError{Line: l.N, Reason: cutReason(reason)})
			break
		}
		if before == nil && after != nil {
			seq++
			after.Seq = seq
		}
		work[l.SurfaceID] = after
		lines = append(lines, l.Raw)
		if !slices.Contains(res.Surfaces, l.SurfaceID) {
			res.Surfaces = append(res.Surfaces, l.SurfaceID)
		}
	}
	s.mu.Unlock()
	res.Applied = len(lines)
	if len(lines) == 0 {
		res.Reason = "nothing applied: the first line was refused"
		return res, nil
	}
	// Persist, then make it the state (the target lock keeps other pushes
	// of this target out meanwhile).
	if err := s.st.saveSurfaces(ctx, target, work, s.o.Now().UnixMilli()); err != nil {
		s.log.Error("canvas push not kept", "target", target, "err", err)
		return PushResult{}, gateway.Errorf(gateway.CodeInternal, "%s: %v", method, err)
	}
	s.mu.Lock()
	if s.surfaces[target] == nil {
		s.surfaces[target] = map[string]*surface{}
	}
	for id, sf := range work {
		if sf == nil {
			delete(s.surfaces[target], id)
		} else {
			s.surfaces[target][id] = sf
		}
	}
	s.seq = max(s.seq, seq)
	s.mu.Unlock()

	ans, reason := s.dispatch(ctx, who, target, res.PushID, "push", "canvas.a2ui.push",
		map[string]any{"surfaces": res.Surfaces, "messages": lines}, s.o.RenderWait)
	res.Rendered, res.Reason = reason == "" && ans.OK, reason
	if reason == "" && !ans.OK {
		res.Reason = "the target could not render it"
		if ans.Error != "" {
			res.Reason = ans.Error
		}
	}
	res.RenderErrors = ans.Errors
	return res, nil
}

// Rendered is a target's answer: canvas.rendered's params (the desktop),
// or a node's invoke payload.
type Rendered struct {
	PushID    string          `json:"pushId"`
	OK        bool            `json:"ok"`
	Errors    []LineError     `json:"errors,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
	Error     string          `json:"error,omitempty"`
	PNGBase64 string          `json:"pngBase64,omitempty"`
}

// dispatch sends op to target and waits at most wait for its answer:
// desktop through canvas.update and canvas.rendered, a node through
// node.invoke of command. reason is why there is no answer ("" when
// there is). Push, Reset and the page methods call it holding the
// target's lock, so that a target gets changes in the order they were
// kept; Eval and Snapshot keep nothing and do not take it.
func (s *Service) dispatch(ctx context.Context, who Who, target, pushID, op, command string, params map[string]any, wait time.Duration) (Rendered, string) {
	if target != Desktop {
		return s.toNode(ctx, who, target, pushID, command, params, wait)
	}
	return s.toDesktop(ctx, pushID, op, params, wait)
}

// UIMode is the client.mode of a connection that shows the desktop Canvas
// (the UI's gateway.ts connects with it).
const UIMode = "ui"

// uiConns are the connections that show the desktop Canvas: the person's
// UIs (client.mode UIMode; not the CLI) as admin, and those of operator
// devices MayUse allows.
func (s *Service) uiConns(ctx context.Context) []string {
	var ids []string
	for _, ci := range s.o.Gateway.Conns(func(ci gateway.ConnInfo) bool {
		c := ci.Principal.Class()
		return (c == gateway.Admin || c == gateway.OperatorDevice) && ci.Client.Mode == UIMode
	}) {
		if ci.Principal.Class() == gateway.OperatorDevice && s.o.MayUse != nil && s.o.MayUse(ctx, ci.Principal.Device) != nil {
			continue
		}
		ids = append(ids, ci.ConnID)
	}
	slices.Sort(ids)
	return ids
}

// Viewers reports whether anything shows a Canvas now: a UI of the person
// (client.mode UIMode) or a node that renders A2UI (it declared
// canvas.a2ui.push). The wiring offers agents the canvas tool only then,
// as it offers the nodes tool only while a node is connected.
func (s *Service) Viewers() bool {
	return len(s.o.Gateway.Conns(func(ci gateway.ConnInfo) bool {
		switch ci.Principal.Class() {
		case gateway.Admin, gateway.OperatorDevice:
			return ci.Client.Mode == UIMode
		case gateway.NodeDevice, gateway.LocalNode:
			return slices.Contains(ci.Commands, "canvas.a2ui.push")
		}
		return false
	})) > 0
}

// EventUpdate is the event that carries work to the desktop's UIs.
const EventUpdate = "canvas.update"

func (s *Service) toDesktop(ctx context.Context, pushID, op string, params map[string]any, wait time.Duration) (Rendered, string) {
	payload := map[string]any{"pushId": pushID, "target": Desktop, "op": op}
	for k, v := range params {
		payload[k] = v
	}
	ch := make(chan Rendered, 1)
	s.mu.Lock()
	s.pending[pushID] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, pushID)
		s.mu.Unlock()
	}()
	sent := 0
	for _, id := range s.uiConns(ctx) {
		if err := s.o.Gateway.Send(id, EventUpdate, payload); err == nil {
			sent++
		}
	}
	if sent == 0 {
		return Rendered{}, "no Canvas is open: no UI connection of the person is connected"
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r := <-ch:
		return r, ""
	case <-t.C:
		return Rendered{}, fmt.Sprintf("no UI answered within %s", wait.Round(time.Millisecond))
	case <-ctx.Done():
		return Rendered{}, "cancelled: " + context.Cause(ctx).Error()
	}
}

// Answer takes a UI's canvas.rendered: the first answer to pushID is the
// one; later ones and unknown ids are NOT_FOUND.
func (s *Service) Answer(r Rendered) error {
	s.mu.Lock()
	ch := s.pending[r.PushID]
	delete(s.pending, r.PushID)
	s.mu.Unlock()
	if ch == nil {
		return gateway.Errorf(gateway.CodeNotFound, "canvas.rendered: no push %q waits for an answer (answered, timed out or unknown)", r.PushID)
	}
	ch <- r // buffered, and only the first answer gets here
	return nil
}

func (s *Service) toNode(ctx context.Context, who Who, nodeID, pushID, command string, params map[string]any, wait time.Duration) (Rendered, string) {
	if s.o.Nodes == nil {
		return Rendered{}, "no nodes here"
	}
	p := map[string]any{"pushId": pushID}
	for k, v := range params {
		p[k] = v
	}
	body, err := json.Marshal(p)
	if err != nil {
		return Rendered{}, fmt.Sprintf("encode %s: %v", command, err)
	}
	res, err := s.o.Nodes.Invoke(ctx, who.caller(), nodes.InvokeRequest{NodeID: nodeID, Command: command, Params: body, TimeoutMs: wait.Milliseconds()})
	if err != nil {
		var ge *gateway.Error
		if errors.As(err, &ge) {
			return Rendered{}, ge.Message
		}
		return Rendered{}, err.Error()
	}
	if !res.OK {
		msg := "the node refused " + command
		if res.Error != nil {
			msg = fmt.Sprintf("%s: %s", res.Error.Code, res.Error.Message)
		}
		return Rendered{OK: false, Error: msg}, ""
	}
	var out struct {
		Rendered *bool           `json:"rendered"`
		OK       *bool           `json:"ok"`
		Errors   []LineError     `json:"errors"`
		Value    json.RawMessage `json:"value"`
		Error    string          `json:"error"`
		Data     string          `json:"dataBase64"`
		MIME     string          `json:"mime"`
	}
	_ = json.Unmarshal(res.Payload, &out)
	r := Rendered{PushID: pushID, OK: true, Errors: out.Errors, Value: out.Value, Error: out.Error, PNGBase64: out.Data}
	if out.Rendered != nil {
		r.OK = *out.Rendered
	}
	if out.OK != nil {
		r.OK = *out.OK
	}
	return r, ""
}

// State is canvas.state's answer.
type State struct {
	Target    string         `json:"target"`
	Surfaces  []SurfaceState `json:"surfaces"`
	Presented *PresentedView `json:"presented,omitempty"`
}

// SurfaceState is one kept surface as canvas.state gives it.
type SurfaceState struct {
	SurfaceID  string            `json:"surfaceId"`
	Version    string            `json:"version"`
	SessionKey string            `json:"sessionKey"`
	Messages   []json.RawMessage `json:"messages"`
}

// PresentedView is a page as canvas.state gives it.
type PresentedView struct {
	URL       string     `json:"url,omitempty"`
	HTML      string     `json:"html,omitempty"`
	FrameURL  string     `json:"frameUrl,omitempty"`
	Placement *Placement `json:"placement,omitempty"`
}

// StateOf is target's kept surfaces (oldest first, compacted) and page.
func (s *Service) StateOf(target string) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{Target: target, Surfaces: []SurfaceState{}}
	list := make([]*surface, 0, len(s.surfaces[target]))
	for _, sf := range s.surfaces[target] {
		list = append(list, sf)
	}
	slices.SortFunc(list, func(a, b *surface) int { return int(a.Seq - b.Seq) })
	for _, sf := range list {
		st.Surfaces = append(st.Surfaces, SurfaceState{SurfaceID: sf.ID, Version: sf.Version, SessionKey: sf.Owner, Messages: sf.messages()})
	}
	if p := s.presented[target]; p != nil {
		st.Presented = &PresentedView{URL: p.URL, HTML: p.HTML, FrameURL: p.FrameURL(), Placement: p.Placement}
	}
	return st
}

// ResetResult is canvas.a2ui.reset's answer.
type ResetResult struct {
	PushID   string   `json:"pushId"`
	Removed  []string `json:"removed"`
	Rendered bool     `json:"rendered"`
	Reason   string   `json:"reason,omitempty"`
}

// Reset forgets one surface of target (surfaceID) or all; an agent only
// its own session's. NOT_FOUND: an unknown surface (or another session's).
func (s *Service) Reset(ctx context.Context, who Who, target, surfaceID string) (ResetResult, error) {
	const method = "canvas.a2ui.reset"
	if err := s.checkTarget(method, target); err != nil {
		return ResetResult{}, err
	}
	unlock := s.lockTarget(target)
	defer unlock()
	s.mu.Lock()
	changed := map[string]*surface{}
	for id, sf := range s.surfaces[target] {
		if (surfaceID == "" || id == surfaceID) && (who.Agent == "" || sf.Owner == who.owner()) {
			changed[id] = nil
		}
	}
	s.mu.Unlock()
	if surfaceID != "" && len(changed) == 0 {
		return ResetResult{}, gateway.Errorf(gateway.CodeNotFound, "%s: no surface %q on %s", method, surfaceID, target)
	}
	res := ResetResult{PushID: newID(), Removed: []string{}}
	for id := range changed {
		res.Removed = append(res.Removed, id)
	}
	slices.Sort(res.Removed)
	if err := s.st.saveSurfaces(ctx, target, changed, s.o.Now().UnixMilli()); err != nil {
		return ResetResult{}, gateway.Errorf(gateway.CodeInternal, "%s: %v", method, err)
	}
	s.mu.Lock()
	for id := range changed {
		delete(s.surfaces[target], id)
	}
	s.mu.Unlock()
	ans, reason := s.dispatch(ctx, who, target, res.PushID, "reset", "canvas.a2ui.reset", map[string]any{"surfaces": res.Removed}, s.o.RenderWait)
	res.Rendered, res.Reason = reason == "" && ans.OK, reason
	if reason == "" && !ans.OK {
		res.Reason = ans.Error
	}
	return res, nil
}

// ShowResult is the answer of canvas.present, navigate and hide.
type ShowResult struct {
	PushID   string `json:"pushId"`
	Rendered bool   `json:"rendered"`
	Reason   string `json:"reason,omitempty"`
	FrameURL string `json:"frameUrl,omitempty"`
}

// checkURL: http or https, absolute, at most MaxURLBytes.
func checkURL(method, raw string) error {
	if len(raw) > MaxURLBytes {
		return gateway.Errorf(gateway.CodeInvalidRequest, "%s: url is %d bytes (at most %d)", method, len(raw), MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return gateway.Errorf(gateway.CodeInvalidRequest, "%s: url must be an absolute http or https URL", method)
	}
	return nil
}

// Present shows a page on target: url (http, https) or html (served on
// an opaque sandboxed origin at /canvas/frame/<token>). Exactly one of
// them. INVALID_REQUEST otherwise.
func (s *Service) Present(ctx context.Context, who Who, target, pageURL, html string, pl *Placement) (ShowResult, error) {
	const method = "canvas.present"
	if err := s.checkTarget(method, target); err != nil {
		return ShowResult{}, err
	}
	if (pageURL == "") == (html == "") {
		return ShowResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: exactly one of url and html", method)
	}
	p := &Presented{Placement: pl, Owner: who.owner()}
	if pl != nil && (pl.Width < 0 || pl.Height < 0) {
		return ShowResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: placement width and height must not be negative", method)
	}
	if pageURL != "" {
		if err := checkURL(method, pageURL); err != nil {
			return ShowResult{}, err
		}
		p.URL = pageURL
	} else {
		if len(html) > s.o.MaxHTMLBytes {
			return ShowResult{}, gateway.Errorf(gateway.CodePayloadTooLarge, "%s: html is %d bytes (at most %d)", method, len(html), s.o.MaxHTMLBytes)
		}
		p.HTML, p.Token = html, newID()
	}
	return s.show(ctx, who, target, method, "present", p, map[string]any{"url": p.URL, "frameUrl": p.FrameURL(), "placement": p.Placement})
}

// Navigate makes target's page url (the placement kept).
func (s *Service) Navigate(ctx context.Context, who Who, target, pageURL string) (ShowResult, error) {
	const method = "canvas.navigate"
	if err := s.checkTarget(method, target); err != nil {
		return ShowResult{}, err
	}
	if err := checkURL(method, pageURL); err != nil {
		return ShowResult{}, err
	}
	s.mu.Lock()
	var pl *Placement
	if old := s.presented[target]; old != nil {
		pl = old.Placement
	}
	s.mu.Unlock()
	p := &Presented{URL: pageURL, Placement: pl, Owner: who.owner()}
	return s.show(ctx, who, target, method, "navigate", p, map[string]any{"url": p.URL, "placement": pl})
}

// Hide closes target's page.
func (s *Service) Hide(ctx context.Context, who Who, target string) (ShowResult, error) {
	const method = "canvas.hide"
	if err := s.checkTarget(method, target); err != nil {
		return ShowResult{}, err
	}
	return s.show(ctx, who, target, method, "hide", nil, map[string]any{})
}

func (s *Service) show(ctx context.Context, who Who, target, method, op string, p *Presented, params map[string]any) (ShowResult, error) {
	unlock := s.lockTarget(target)
	defer unlock()
	if err := s.st.savePresented(ctx, target, p, s.o.Now().UnixMilli()); err != nil {
		return ShowResult{}, gateway.Errorf(gateway.CodeInternal, "%s: %v", method, err)
	}
	s.mu.Lock()
	if p == nil {
		delete(s.presented, target)
	} else {
		s.presented[target] = p
	}
	s.mu.Unlock()
	for k, v := range params { // leave out what is empty
		if v == "" || v == (*Placement)(nil) {
			delete(params, k)
		}
	}
	res := ShowResult{PushID: newID(), FrameURL: p.FrameURL()}
	deskOp := op
	if op == "navigate" {
		deskOp = "present" // the desktop shows the url as a presented page
	}
	ans, reason := s.dispatch(ctx, who, target, res.PushID, deskOp, method, params, s.o.RenderWait)
	res.Rendered, res.Reason = reason == "" && ans.OK, reason
	if reason == "" && !ans.OK {
		res.Reason = ans.Error
	}
	return res, nil
}

// EvalResult is canvas.eval's answer.
type EvalResult struct {
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"`
}

// Eval runs js in target's presented html page (its sandboxed frame), never
// in the app. CONFLICT: no html page shown; TIMEOUT or UNAVAILABLE: no
// answer. Callers that are agents must have asked the person.
func (s *Service) Eval(ctx context.Context, who Who, target, js string, timeout time.Duration) (EvalResult, error) {
	const method = "canvas.eval"
	if err := s.checkTarget(method, target); err != nil {
		return EvalResult{}, err
	}
	if js == "" || len(js) > MaxJSBytes {
		return EvalResult{}, gateway.Errorf(gateway.CodeInvalidRequest, "%s: js must be 1..%d bytes", method, MaxJSBytes)
	}
	if timeout <= 0 {
		timeout = DefaultEvalTimeout
	}
	timeout = min(timeout, MaxEvalTimeout)
	s.mu.Lock()
	p := s.presented[target]
	s.mu.Unlock()
	if p == nil || p.Token == "" {
		return EvalResult{}, gateway.Errorf(gateway.CodeConflict, "%s: %s shows no html page (canvas.present {html} first; a page shown by url cannot be reached)", method, target)
	}
	s.audit(method, who, target, true, fmt.Sprintf("%d bytes of JavaScript in the presented frame", len(js)))
	ans, reason := s.dispatch(ctx, who, target, newID(), "eval", method, map[string]any{"js": js, "timeoutMs": timeout.Milliseconds()}, timeout+time.Second)
	if reason != "" {
		return EvalResult{}, gateway.Errorf(gateway.CodeTimeout, "%s: %s", method, reason)
	}
	return EvalResult{OK: ans.OK, Value: ans.Value, Error: ans.Error}, nil
}

// Snapshot renders target's Canvas to PNG and stores it in the media
// store. UNAVAILABLE: no media store, no answer, or the target could not.
func (s *Service) Snapshot(ctx context.Context, who Who, target string) (media.Meta, error) {
	const method = "canvas.snapshot"
	if err := s.checkTarget(method, target); err != nil {
		return media.Meta{}, err
	}
	if s.o.Media == nil {
		return media.Meta{}, gateway.Errorf(gateway.CodeUnavailable, "%s: no media store", method)
	}
	ans, reason := s.dispatch(ctx, who, target, newID(), "snapshot", method, map[string]any{}, s.o.RenderWait)
	if reason == "" && !ans.OK {
		reason = ans.Error
		if reason == "" {
			reason = "the target could not draw its Canvas"
		}
	}
	if reason != "" {
		return media.Meta{}, gateway.Errorf(gateway.CodeUnavailable, "%s: %s", method, reason)
	}
	m, err := storePNG(s.o.Media, target, ans.PNGBase64)
	if err != nil {
		return media.Meta{}, gateway.Errorf(gateway.CodeUnavailable, "%s: %v", method, err)
	}
	return m, nil
}

func (s *Service) audit(op string, who Who, target string, allowed bool, reason string) {
	if s.o.Audit == nil {
		return
	}
	if err := s.o.Audit.Record(audit.Entry{Operation: op, Role: who.auditRole(), Target: target, Result: audit.Result(allowed), Reason: reason, IP: who.IP, Session: who.SessionKey}); err != nil {
		s.log.Error("canvas audit failed", "operation", op, "target", target, "err", err)
	}
}

// Connected is the gateway's OnAuthenticated hook: a node connection gets
// the surfaces and page kept for it (canvas.a2ui.push with replay, then
// canvas.present), in the background.
func (s *Service) Connected(ci gateway.ConnInfo) {
	if ci.Principal.Role != gateway.RoleNode || s.o.Nodes == nil {
		return
	}
	nodeID := ci.Principal.Device
	if nodeID == "" {
		nodeID = "local:" + ci.ConnID
	}
	if !slices.Contains(ci.Commands, "canvas.a2ui.push") {
		return
	}
	go s.replay(nodeID)
}

func (s *Service) replay(nodeID string) {
	unlock := s.lockTarget(nodeID)
	defer unlock()
	st := s.StateOf(nodeID)
	if len(st.Surfaces) == 0 && st.Presented == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.o.RenderWait)
	defer cancel()
	who := Who{} // the gateway itself
	if len(st.Surfaces) > 0 {
		var msgs []json.RawMessage
		var ids []string
		for _, sf := range st.Surfaces {
			msgs = append(msgs, sf.Messages...)
			ids = append(ids, sf.SurfaceID)
		}
		ans, reason := s.toNode(ctx, who, nodeID, newID(), "canvas.a2ui.push", map[string]any{"messages": msgs, "surfaces": ids, "replay": true}, s.o.RenderWait)
		s.log.Info("canvas replayed to node", "node", nodeID, "surfaces", len(ids), "rendered", reason == "" && ans.OK, "reason", reason)
	}
	if p := st.Presented; p != nil {
		params := map[string]any{"placement": p.Placement}
		if p.URL != "" {
			params["url"] = p.URL
		} else {
			params["frameUrl"] = p.FrameURL
		}
		_, reason := s.toNode(ctx, who, nodeID, newID(), "canvas.present", params, s.o.RenderWait)
		if reason != "" {
			s.log.Info("canvas page not replayed to node", "node", nodeID, "reason", reason)
		}
	}
}

// newID is 32 random hex characters.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// pngMagic starts every PNG file.
var pngMagic = []byte("\x89PNG\r\n\x1a\n")

func isPNG(b []byte) bool { return bytes.HasPrefix(b, pngMagic) }
