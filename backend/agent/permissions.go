package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Permission defaults (SPEC §6).
const (
	// DefaultBaseLevel is the highest level a session may use without
	// asking: L1 (read-only and local writes).
	DefaultBaseLevel = L1
	// DefaultGrantTTL is how long a level the person granted holds.
	DefaultGrantTTL = 10 * time.Minute
	// DefaultAskTimeout bounds the wait for the person's answer; no
	// answer in time is a denial.
	DefaultAskTimeout = 2 * time.Minute
)

// Request kinds (PermissionRequest.Kind).
const (
	KindLevel = "level" // may the session use Level for GrantTTL?
	KindExec  = "exec"  // may this one command run? (exec approval "ask")
)

// PermissionRequest is a question to the person, shaped for the gateway
// and the UI: ID (unique, 16 hex digits), Kind, Session and Role (who
// asks), Tool and CallID (what asks), Level, ArgsSummary (the call's
// arguments cut to 300 characters), Reason (the English sentence for the
// prompt), ReasonCode and ReasonParams (the same sentence as a code the UI
// translates and its values; reasons.go lists them), At (when asked) and
// Expires (when the ask times out).
type PermissionRequest struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Session     string `json:"session,omitempty"`
	Role        string `json:"role,omitempty"`
	Tool        string `json:"tool"`
	CallID      string `json:"callId,omitempty"`
	Level       Level  `json:"level"`
	ArgsSummary string `json:"argsSummary"`
	Reason      string `json:"reason"`
	// ReasonCode is one of the ReasonCode* constants ("" when the asker
	// gave only Reason); ReasonParams are its values by name.
	ReasonCode   string            `json:"reasonCode,omitempty"`
	ReasonParams map[string]string `json:"reasonParams,omitempty"`
	At           time.Time         `json:"at"`
	Expires      time.Time         `json:"expires"`
}

// Asker asks the person a yes/no question. Ask blocks until the answer,
// or until ctx ends (the caller bounds it with its ask timeout); an error
// counts as "no". Implementations must be safe for concurrent use.
type Asker interface {
	Ask(ctx context.Context, req PermissionRequest) (bool, error)
}

// AskerFunc adapts a function to Asker.
type AskerFunc func(ctx context.Context, req PermissionRequest) (bool, error)

// Ask implements Asker.
func (f AskerFunc) Ask(ctx context.Context, req PermissionRequest) (bool, error) { return f(ctx, req) }

// Grant is a level the person granted to a session until Expires.
type Grant struct {
	Level   Level     `json:"level"`
	Granted time.Time `json:"granted"`
	Expires time.Time `json:"expires"`
}

// PermissionOptions configure Permissions.
type PermissionOptions struct {
	// Session and Role name who asks (copied into requests).
	Session string
	Role    string
	// ReadOnly makes the session's base level L0 (read-only); default
	// false: DefaultBaseLevel (L1, read-only and local writes).
	ReadOnly bool
	// Asker asks the person. Nil: every level above Base is denied.
	Asker Asker
	// GrantTTL is how long a granted level holds. Default DefaultGrantTTL.
	GrantTTL time.Duration
	// AskTimeout bounds one question. Default DefaultAskTimeout.
	AskTimeout time.Duration
	// Now is the clock (grant expiry is tested with it). Default time.Now.
	Now func() time.Time
}

// Permissions are one session's levels (SPEC §6): the base levels, and the
// higher ones the person granted, each for GrantTTL. A grant covers its
// own level only (L3 network does not imply L2 programs). Safe for
// concurrent use; questions for one level are asked one at a time, so two
// calls in a round do not ask twice.
type Permissions struct {
	o      PermissionOptions
	base   Level
	mu     sync.Mutex
	grants map[Level]Grant
	asking map[Level]*sync.Mutex
}

// NewPermissions returns a session's permissions with o's defaults.
func NewPermissions(o PermissionOptions) *Permissions {
	base := DefaultBaseLevel
	if o.ReadOnly {
		base = L0
	}
	if o.GrantTTL <= 0 {
		o.GrantTTL = DefaultGrantTTL
	}
	if o.AskTimeout <= 0 {
		o.AskTimeout = DefaultAskTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Permissions{o: o, base: base, grants: map[Level]Grant{}, asking: map[Level]*sync.Mutex{}}
}

// Base returns the level used without asking.
func (p *Permissions) Base() Level { return p.base }

// Grants returns the grants in force now, by level.
func (p *Permissions) Grants() []Grant {
	now := p.o.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Grant
	for _, g := range p.grants {
		if now.Before(g.Expires) {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Level < out[j].Level })
	return out
}

// Revoke drops the grant of level l (the person withdrew it).
func (p *Permissions) Revoke(l Level) {
	p.mu.Lock()
	delete(p.grants, l)
	p.mu.Unlock()
}

// Decision says how a level check ended: Allowed, and How ("base",
// "grant", "asked", "denied", "no asker", "ask failed").
type Decision struct {
	Allowed bool
	How     string
	Reason  string
}

func (p *Permissions) granted(l Level) bool {
	now := p.o.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.grants[l]
	if ok && !now.Before(g.Expires) {
		delete(p.grants, l)
		return false
	}
	return ok
}

// Allow decides whether a call of tool at level l may run: at or below
// Base it may; a live grant of l lets it; else the person is asked (one
// question per level at a time, AskTimeout at most) and a yes grants l
// for GrantTTL. req fills the question (Tool, CallID, ArgsSummary);
// Kind, Level, ID, At, Expires, Session and Role are set here. A
// denial is a Decision, not an error; the error is non-nil only when ctx
// ended (it wraps ctx's cause).
func (p *Permissions) Allow(ctx context.Context, l Level, req PermissionRequest) (Decision, error) {
	if l <= p.base {
		return Decision{Allowed: true, How: "base", Reason: fmt.Sprintf("%s is within the session's base level %s", l, p.base)}, nil
	}
	if p.granted(l) {
		return Decision{Allowed: true, How: "grant", Reason: fmt.Sprintf("%s was granted by the person", l)}, nil
	}
	p.mu.Lock()
	lock := p.asking[l]
	if lock == nil {
		lock = &sync.Mutex{}
		p.asking[l] = lock
	}
	p.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()
	if p.granted(l) { // granted while this call waited for the lock
		return Decision{Allowed: true, How: "grant", Reason: fmt.Sprintf("%s was granted by the person", l)}, nil
	}
	req.Kind, req.Level = KindLevel, l
	if req.Reason == "" {
		req.Reason = fmt.Sprintf("%s wants %s (%s) for %s", nonEmpty(p.o.Role, "the agent"), l, levelWords(l), p.o.GrantTTL)
		req.ReasonCode = ReasonCodeLevel
		req.ReasonParams = map[string]string{"role": p.o.Role, "level": l.String(), "ttlSeconds": strconv.Itoa(int(p.o.GrantTTL / time.Second))}
	}
	yes, how, err := p.ask(ctx, req)
	if err != nil {
		return Decision{}, err
	}
	if !yes {
		return Decision{How: how, Reason: fmt.Sprintf("the person did not grant %s (%s)", l, how)}, nil
	}
	now := p.o.Now()
	p.mu.Lock()
	p.grants[l] = Grant{Level: l, Granted: now, Expires: now.Add(p.o.GrantTTL)}
	p.mu.Unlock()
	return Decision{Allowed: true, How: "asked", Reason: fmt.Sprintf("the person granted %s until %s", l, now.Add(p.o.GrantTTL).Format(time.RFC3339))}, nil
}

// AskOnce asks the person about one action (e.g. one command under exec
// approval "ask"); nothing is remembered. The answer is (false, nil) when
// there is no asker or the person said no or did not answer in time.
func (p *Permissions) AskOnce(ctx context.Context, req PermissionRequest) (bool, error) {
	if req.Kind == "" {
		req.Kind = KindExec
	}
	yes, _, err := p.ask(ctx, req)
	return yes, err
}

// ask fills req's bookkeeping fields and asks with the ask timeout.
func (p *Permissions) ask(ctx context.Context, req PermissionRequest) (bool, string, error) {
	if p.o.Asker == nil {
		return false, "no asker", nil
	}
	now := p.o.Now()
	req.ID, req.At, req.Expires = newID(), now, now.Add(p.o.AskTimeout)
	req.Session, req.Role = p.o.Session, p.o.Role
	actx, cancel := context.WithTimeoutCause(ctx, p.o.AskTimeout, errAskTimeout)
	defer cancel()
	yes, err := p.o.Asker.Ask(actx, req)
	switch {
	case ctx.Err() != nil:
		return false, "", fmt.Errorf("asking the person: %w", context.Cause(ctx))
	case err != nil && context.Cause(actx) == errAskTimeout:
		return false, "no answer in time", nil
	case err != nil:
		return false, "ask failed: " + err.Error(), nil
	case !yes:
		return false, "denied", nil
	}
	return true, "granted", nil
}

var errAskTimeout = errors.New("no answer in time")

func levelWords(l Level) string {
	switch l {
	case L0:
		return "read-only"
	case L1:
		return "local writes"
	case L2:
		return "run programs"
	}
	return "network access"
}

func nonEmpty(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// Pending is a gateway-friendly Asker: each question becomes a pending
// record (List) announced through Notify, and waits for Answer with its
// id (the UI's y/n) or for its context to end (then it is dropped and
// counts as "no"). Safe for concurrent use.
type Pending struct {
	notify func(PermissionRequest)
	mu     sync.Mutex
	open   map[string]pendingAsk
}

type pendingAsk struct {
	req PermissionRequest
	ch  chan bool
}

// NewPending returns a Pending; notify (may be nil) is called for every new
// question, e.g. to broadcast an event to the UI. It must not block.
func NewPending(notify func(PermissionRequest)) *Pending {
	return &Pending{notify: notify, open: map[string]pendingAsk{}}
}

// Ask implements Asker.
func (q *Pending) Ask(ctx context.Context, req PermissionRequest) (bool, error) {
	if req.ID == "" {
		req.ID = newID()
	}
	ch := make(chan bool, 1)
	q.mu.Lock()
	q.open[req.ID] = pendingAsk{req: req, ch: ch}
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		delete(q.open, req.ID)
		q.mu.Unlock()
	}()
	if q.notify != nil {
		q.notify(req)
	}
	select {
	case yes := <-ch:
		return yes, nil
	case <-ctx.Done():
		return false, fmt.Errorf("permission request %s: %w", req.ID, context.Cause(ctx))
	}
}

// List returns the open questions, oldest first.
func (q *Pending) List() []PermissionRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]PermissionRequest, 0, len(q.open))
	for _, p := range q.open {
		out = append(out, p.req)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Answer answers the open question id. An unknown id (never asked,
// answered already, or given up) is an error wrapping ErrNoSuchRequest.
func (q *Pending) Answer(id string, yes bool) error {
	q.mu.Lock()
	p, ok := q.open[id]
	if ok {
		delete(q.open, id)
	}
	q.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoSuchRequest, id)
	}
	p.ch <- yes
	return nil
}
