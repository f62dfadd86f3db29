// Package collab runs collaborations between two roles (SPEC §5.4
// "Collaboration", §5.1 action `collaborate`; issue 4 item 7).
//
// A collaboration goes pending → accepted → completed:
//
//   - Request (role From, acting as itself): From invites To to a task
//     about the files listed in Context, for TTL. "The files involved" are
//     exactly the Context paths (at least one, at most MaxContextFiles,
//     memory files): From must hold `collaborate` on every one of them
//     (each checked and audited by the guard, operation collab.request);
//     one missing right refuses the request. The answer holds the
//     collaboration's id and its token (32 random bytes, base64url; only
//     its SHA-256 is stored, and a presented token is compared in constant
//     time) and the shared view.
//   - Accept: only by role To, with the token, while pending and unexpired,
//     and only when To holds `collaborate` on every context file; else the
//     person accepts or declines (Decide, person.go). Decline: by To with
//     the token, or by the person.
//   - Complete: by either party of an accepted, unexpired collaboration,
//     with the token and a Result. Importance above
//     Options.SummaryThreshold (default 0.7; 0.7 itself writes nothing)
//     appends a summary to Options.SummaryPath (default
//     memory/global/project-status.md, where the seed's walkthrough keeps
//     the project's progress, S000 §6 case 1 step 4) through the memory
//     engine's Write, so versions, conflicts, the index and memory.changed
//     apply. The summary is the collaboration's decision, not the
//     completing role's own write right: it is audited as operation
//     collab.summary with that role, and the role is the version vector's
//     writer.
//   - Write: a party writes a Context file through an accepted, unexpired
//     collaboration, only if both parties hold `collaborate` on it (SPEC
//     §5.1: "write through it only while that collaboration is accepted and
//     unexpired"); audited as collab.write.
//   - View: the shared memory view, what both roles may read: the memory
//     files both may read, the Context files both may read with their text,
//     and optionally a search whose readable predicate is the AND of both
//     roles' read rights (every result readable by both).
//
// Every call is made by an acl.Principal with a role (a collaboration is
// between roles; admin and devices act through `as` or not at all, see
// package api), and every decision, allowed or denied, is one audit entry
// through the guard (operations collab.request, collab.accept,
// collab.complete, collab.summary, collab.write, collab.view, collab.list).
// Collaborations are kept in state.db (store.go) and survive restarts;
// List shows them with their history. A collaboration past its expiry is
// reported with status expired and refuses everything but List.
package collab

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
)

// Sentinel errors; test with errors.Is. The gateway maps them to
// NOT_FOUND, FORBIDDEN, FORBIDDEN, CONFLICT and INVALID_REQUEST.
var (
	// ErrNotFound: no collaboration has that id (or the invited role does
	// not exist in the workspace).
	ErrNotFound = errors.New("collab: not found")
	// ErrForbidden: wrong token, wrong role, or a missing `collaborate`
	// right. ACL refusals also match memory.ErrForbidden.
	ErrForbidden = errors.New("collab: forbidden")
	// ErrExpired: the collaboration's ttl has passed.
	ErrExpired = errors.New("collab: expired")
	// ErrState: the collaboration is not in the state the call needs
	// (accept of an accepted one, complete before accept, any use after
	// completion or a decline).
	ErrState = errors.New("collab: wrong state")
	// ErrInvalidInput: a malformed request (empty task, no context, a ttl
	// out of range, an importance outside [0,1] ...).
	ErrInvalidInput = errors.New("collab: invalid input")
)

// Status is a collaboration's state.
type Status string

// The states. StatusExpired is reported, never stored: a pending or
// accepted collaboration past ExpiresAt.
const (
	StatusPending   Status = "pending"
	StatusAccepted  Status = "accepted"
	StatusCompleted Status = "completed"
	StatusExpired   Status = "expired"
)

// Defaults and limits of Options and the requests.
const (
	DefaultTTL              = time.Hour // the seed's ttl=3600
	DefaultMaxTTL           = 7 * 24 * time.Hour
	DefaultSummaryPath      = "memory/global/project-status.md"
	DefaultSummaryThreshold = 0.7
	MaxContextFiles         = 32
	MaxTaskChars            = 4000
	MaxOutputBytes          = 64 << 10
	MaxArtifacts            = 32
	MaxArtifactChars        = 512
	// SummaryOutputChars is how much of Result.Output the global summary
	// quotes (characters).
	SummaryOutputChars = 500
	// DefaultListLimit and MaxListLimit bound List.
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Memory is what collaborations need of the memory engine (implemented by
// *memory.Manager).
type Memory interface {
	Write(ctx context.Context, r memory.WriteRequest) (memory.WriteResult, error)
	Get(ctx context.Context, o memory.GetOptions) (memory.GetResponse, error)
	Search(ctx context.Context, o memory.SearchOptions) (memory.SearchResponse, error)
	Files(ctx context.Context) ([]memory.FileInfo, error)
	ListRoles(ctx context.Context) ([]memory.RoleInfo, error)
}

// Options configures New.
type Options struct {
	// DB is state.db (statedb.Open). Required.
	DB *sql.DB
	// Guard checks and audits every decision. Required.
	Guard *guard.Guard
	// Memory writes summaries and collaboration writes, and serves the
	// shared view. Required.
	Memory Memory
	// SummaryPath is the global file summaries are appended to
	// (workspace-relative; default DefaultSummaryPath).
	SummaryPath string
	// SummaryThreshold: a Result.Importance strictly above it writes a
	// summary; 0 means DefaultSummaryThreshold (0.7).
	SummaryThreshold float64
	// DefaultTTL applies when a request gives no ttl (default 1 h);
	// MaxTTL is the longest allowed (default 7 days).
	DefaultTTL, MaxTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives "collab requested", "collab accepted", "collab
	// completed", "collab decided" (info). Default slog.Default().
	Logger *slog.Logger
	// OnChange, when set, is called with the collaboration as stored (with
	// its history and NeedsPerson) after each change: request, accept,
	// decline, a person's decision, write, complete (person.go). It runs on
	// the caller's goroutine, outside the service's lock, and should not
	// block for long.
	OnChange func(Collaboration)
}

// Service runs collaborations. Safe for concurrent use; state changes are
// serialised.
type Service struct {
	o   Options
	log *slog.Logger
	mu  sync.Mutex
}

// New creates the tables if needed and returns a Service.
func New(ctx context.Context, o Options) (*Service, error) {
	switch {
	case o.DB == nil:
		return nil, errors.New("collab: Options.DB is required")
	case o.Guard == nil:
		return nil, errors.New("collab: Options.Guard is required")
	case o.Memory == nil:
		return nil, errors.New("collab: Options.Memory is required")
	}
	if o.SummaryPath == "" {
		o.SummaryPath = DefaultSummaryPath
	}
	if o.SummaryThreshold == 0 {
		o.SummaryThreshold = DefaultSummaryThreshold
	}
	if o.DefaultTTL <= 0 {
		o.DefaultTTL = DefaultTTL
	}
	if o.MaxTTL <= 0 {
		o.MaxTTL = DefaultMaxTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := createTables(ctx, o.DB); err != nil {
		return nil, err
	}
	return &Service{o: o, log: o.Logger.With("component", "collab")}, nil
}

// Collaboration is one collaboration as List and the calls return it
// (never its token). Times are UTC; zero times are omitted on the wire.
type Collaboration struct {
	ID             string    `json:"collabId"`
	From           string    `json:"from"`
	To             string    `json:"to"`
	Task           string    `json:"task"`
	Context        []string  `json:"context"` // workspace-relative memory paths
	Status         Status    `json:"status"`
	CreatedAt      time.Time `json:"createdAt"`
	ExpiresAt      time.Time `json:"expiresAt"`
	AcceptedAt     time.Time `json:"acceptedAt,omitzero"`
	CompletedAt    time.Time `json:"completedAt,omitzero"`
	CompletedBy    string    `json:"completedBy,omitempty"`
	Result         *Result   `json:"result,omitempty"`
	SummaryPath    string    `json:"summaryPath,omitempty"`    // set when a summary was written
	SummaryVersion string    `json:"summaryVersion,omitempty"` // the summary file's version after it
	// NeedsPerson: pending, and the ACL leaves its acceptance to the
	// person (the invited role lacks collaborate on a context file;
	// person.go).
	NeedsPerson bool    `json:"needsPerson,omitempty"`
	History     []Event `json:"history,omitempty"` // List only
}

// Result is what Complete records: Output (text, at most MaxOutputBytes),
// Importance in [0,1], Artifacts (names or paths of what was produced, at
// most MaxArtifacts of at most MaxArtifactChars each).
type Result struct {
	Output     string   `json:"output"`
	Importance float64  `json:"importance"`
	Artifacts  []string `json:"artifacts,omitempty"`
}

// Event is one step of a collaboration's history: request, accept, write
// (Detail: the path), complete, summary (Detail: the summary file).
type Event struct {
	At     time.Time `json:"at"`
	Role   string    `json:"role"`
	Action string    `json:"action"`
	Detail string    `json:"detail,omitempty"`
}

// Request is Service.Request's input. From defaults to the caller's role;
// TTL in seconds (0: Options.DefaultTTL).
type Request struct {
	From    string   `json:"from"`
	To      string   `json:"to"`
	Task    string   `json:"task"`
	Context []string `json:"context"`
	TTL     int      `json:"ttl"`
}

// Requested is Request's answer: the collaboration, its token (shown
// once, never stored) and the shared view.
type Requested struct {
	Collaboration Collaboration `json:"collaboration"`
	ID            string        `json:"collabId"`
	Token         string        `json:"token"`
	Shared        View          `json:"shared"`
}

// ContextFile is a Context file both parties may read, with its text.
type ContextFile struct {
	Path string `json:"path"`
	Text string `json:"text"`
}

// View is the shared memory view (SPEC §5.4): only what both roles may
// read. Files: every indexed memory file both may read; Context: the
// Context files both may read, with their text (Withheld counts the
// others); Results: the search hits of Query, each readable by both.
type View struct {
	Files    []memory.FileInfo     `json:"files"`
	Context  []ContextFile         `json:"context"`
	Withheld int                   `json:"withheld"`
	Query    string                `json:"query,omitempty"`
	Results  []memory.SearchResult `json:"results,omitempty"`
}

// Operations recorded in the audit log.
const (
	OpRequest  = "collab.request"
	OpAccept   = "collab.accept"
	OpComplete = "collab.complete"
	OpSummary  = "collab.summary"
	OpWrite    = "collab.write"
	OpView     = "collab.view"
	OpList     = "collab.list"
)

var idPattern = regexp.MustCompile(`^c-[0-9a-f]{32}$`)

func target(id string) string { return "collab " + id }

// deny audits a refusal and returns it wrapping sentinel.
func (s *Service) deny(who acl.Principal, op, tgt string, sentinel error, reason string) error {
	if err := s.o.Guard.Record(who, op, tgt, false, reason); err != nil {
		return err
	}
	return fmt.Errorf("%s %s: %w: %s", op, tgt, sentinel, reason)
}

// allow audits an allowed decision.
func (s *Service) allow(who acl.Principal, op, tgt, reason string) error {
	return s.o.Guard.Record(who, op, tgt, true, reason)
}

// actor refuses a principal without a role.
func (s *Service) actor(who acl.Principal, op, tgt string) error {
	if who.Role == "" {
		return s.deny(who, op, tgt, ErrForbidden, "collaborations are between roles: act as a role")
	}
	return nil
}

func newSecret(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("collab: random: %w", err)
	}
	return b, nil
}

func hashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// tokenOK compares the presented token's hash with the stored one in
// constant time.
func tokenOK(stored, presented string) bool {
	got := hashToken(presented)
	return subtle.ConstantTimeCompare([]byte(stored), []byte(got)) == 1
}

// effective is r's status at now (pending/accepted past expiry: expired).
func effective(c Collaboration, now time.Time) Status {
	if (c.Status == StatusPending || c.Status == StatusAccepted) && !now.Before(c.ExpiresAt) {
		return StatusExpired
	}
	return c.Status
}

// cleanText checks a one-field text: UTF-8, no NUL, at most max characters.
func cleanText(what, s string, max int) error {
	switch {
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%s contains a NUL byte", what)
	case utf8.RuneCountInString(s) > max:
		return fmt.Errorf("%s is longer than %d characters", what, max)
	}
	return nil
}

// Request opens a collaboration (see the package doc). Errors: ErrForbidden
// (no role, From is not the caller, a missing collaborate right, also
// memory.ErrForbidden), ErrInvalidInput (also memory.ErrInvalidPath for a
// refused path), ErrNotFound (To is not a role of the workspace), or a
// storage or audit error.
func (s *Service) Request(ctx context.Context, who acl.Principal, r Request) (Requested, error) {
	if r.From == "" {
		r.From = who.Role
	}
	tgt := "collab " + r.From + " → " + r.To
	if err := s.actor(who, OpRequest, tgt); err != nil {
		return Requested{}, err
	}
	if r.From != who.Role {
		return Requested{}, s.deny(who, OpRequest, tgt, ErrForbidden, fmt.Sprintf("role %s may not request a collaboration for role %s", who.Role, r.From))
	}
	invalid := func(reason string) (Requested, error) {
		return Requested{}, s.deny(who, OpRequest, tgt, ErrInvalidInput, reason)
	}
	if err := acl.ValidateRole(r.To); err != nil {
		return invalid("to: " + err.Error())
	}
	if r.To == r.From {
		return invalid("a role cannot collaborate with itself")
	}
	r.Task = strings.TrimSpace(r.Task)
	if r.Task == "" {
		return invalid("task is empty")
	}
	if err := cleanText("task", r.Task, MaxTaskChars); err != nil {
		return invalid(err.Error())
	}
	if len(r.Context) == 0 {
		return invalid("context must list at least one memory file (the files the collaboration is about)")
	}
	if len(r.Context) > MaxContextFiles {
		return invalid(fmt.Sprintf("context lists %d files, at most %d", len(r.Context), MaxContextFiles))
	}
	ttl := time.Duration(r.TTL) * time.Second
	switch {
	case r.TTL < 0:
		return invalid(fmt.Sprintf("ttl %d is negative", r.TTL))
	case r.TTL == 0:
		ttl = s.o.DefaultTTL
	case ttl > s.o.MaxTTL:
		return invalid(fmt.Sprintf("ttl %ds is longer than %ds", r.TTL, int(s.o.MaxTTL/time.Second)))
	}
	roles, err := s.o.Memory.ListRoles(ctx)
	if err != nil {
		return Requested{}, fmt.Errorf("%s: list roles: %w", OpRequest, err)
	}
	if !slices.ContainsFunc(roles, func(ri memory.RoleInfo) bool { return ri.Role == r.To }) {
		return Requested{}, s.deny(who, OpRequest, tgt, ErrNotFound, fmt.Sprintf("role %s does not exist in this workspace", r.To))
	}
	// The files involved: From must hold collaborate on each (one audit
	// entry per file).
	var paths []string
	for _, raw := range r.Context {
		rel, err := s.o.Guard.Check(who, OpRequest, acl.Collaborate, raw)
		if err != nil {
			if errors.Is(err, memory.ErrForbidden) {
				return Requested{}, fmt.Errorf("%w: %w", ErrForbidden, err)
			}
			if errors.Is(err, memory.ErrInvalidPath) {
				return Requested{}, fmt.Errorf("%w: %w", ErrInvalidInput, err)
			}
			return Requested{}, err
		}
		if !slices.Contains(paths, rel) {
			paths = append(paths, rel)
		}
	}

	idb, err := newSecret(16)
	if err != nil {
		return Requested{}, err
	}
	tokb, err := newSecret(32)
	if err != nil {
		return Requested{}, err
	}
	token := base64.RawURLEncoding.EncodeToString(tokb)
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	c := Collaboration{ID: "c-" + hex.EncodeToString(idb), From: r.From, To: r.To, Task: r.Task, Context: paths,
		Status: StatusPending, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	reason := fmt.Sprintf("%s invites %s for %s; collaborate on %d file(s)", r.From, r.To, ttl, len(paths))
	if err := s.allow(who, OpRequest, target(c.ID), reason); err != nil {
		return Requested{}, err
	}
	s.mu.Lock()
	err = insert(ctx, s.o.DB, row{Collaboration: c, tokenHash: hashToken(token)}, Event{At: now, Role: who.Role, Action: "request", Detail: r.To})
	s.mu.Unlock()
	if err != nil {
		return Requested{}, err
	}
	s.log.Info("collab requested", "id", c.ID, "from", c.From, "to", c.To, "files", len(paths))
	view, err := s.view(ctx, who, c, "", 0)
	if err != nil {
		return Requested{}, err
	}
	s.changed(ctx, c.ID)
	return Requested{Collaboration: s.annotate(c), ID: c.ID, Token: token, Shared: view}, nil
}

// find loads collaboration id, auditing an unknown or malformed id as a
// refusal of op (ErrNotFound).
func (s *Service) find(ctx context.Context, who acl.Principal, op, id string) (row, error) {
	if !idPattern.MatchString(id) {
		return row{}, s.deny(who, op, target(id), ErrNotFound, "no collaboration has this id")
	}
	r, ok, err := load(ctx, s.o.DB, id)
	if err != nil {
		return row{}, err
	}
	if !ok {
		return row{}, s.deny(who, op, target(id), ErrNotFound, "no collaboration has this id")
	}
	return r, nil
}

// authenticate loads id and checks, in this order, the caller's role, the
// id, the token (constant time), the caller's party (toOnly: only the
// invited role), completion and expiry, auditing a refusal under op.
func (s *Service) authenticate(ctx context.Context, who acl.Principal, op, id, token string, toOnly bool) (row, error) {
	tgt := target(id)
	if err := s.actor(who, op, tgt); err != nil {
		return row{}, err
	}
	r, err := s.find(ctx, who, op, id)
	if err != nil {
		return row{}, err
	}
	if !tokenOK(r.tokenHash, token) {
		return row{}, s.deny(who, op, tgt, ErrForbidden, "wrong token")
	}
	switch {
	case toOnly && who.Role != r.To:
		return row{}, s.deny(who, op, tgt, ErrForbidden, fmt.Sprintf("only the invited role %s may accept; the caller is role %s", r.To, who.Role))
	case !toOnly && who.Role != r.To && who.Role != r.From:
		return row{}, s.deny(who, op, tgt, ErrForbidden, fmt.Sprintf("role %s is not a party (%s, %s)", who.Role, r.From, r.To))
	}
	if r.Status == StatusCompleted || r.Status == StatusDeclined {
		return row{}, s.deny(who, op, tgt, ErrState, "the collaboration is "+string(r.Status)+"; its token is spent")
	}
	if effective(r.Collaboration, s.o.Now()) == StatusExpired {
		return row{}, s.deny(who, op, tgt, ErrExpired, "the collaboration expired at "+r.ExpiresAt.Format(time.RFC3339))
	}
	return r, nil
}

// Accepted is Accept's answer: the collaboration and the shared view.
type Accepted struct {
	Collaboration Collaboration `json:"collaboration"`
	Shared        View          `json:"shared"`
}

// Accept accepts a pending collaboration as its invited role. Errors:
// ErrNotFound (unknown or malformed id), ErrForbidden (no role, wrong
// token, not the invited role), ErrExpired, ErrState (not pending), or a
// storage or audit error.
func (s *Service) Accept(ctx context.Context, who acl.Principal, id, token string) (Accepted, error) {
	a, err := s.accept(ctx, who, id, token)
	if err == nil {
		s.changed(ctx, id)
	}
	return a, err
}

func (s *Service) accept(ctx context.Context, who acl.Principal, id, token string) (Accepted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.authenticate(ctx, who, OpAccept, id, token, true)
	if err != nil {
		return Accepted{}, err
	}
	if r.Status != StatusPending {
		return Accepted{}, s.deny(who, OpAccept, target(id), ErrState, "the collaboration is already "+string(r.Status))
	}
	if s.needsPerson(r.Collaboration) {
		return Accepted{}, s.deny(who, OpAccept, target(id), ErrForbidden,
			fmt.Sprintf("the ACL does not let %s collaborate on every context file: the person accepts or declines", r.To))
	}
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	if err := s.allow(who, OpAccept, target(id), fmt.Sprintf("%s accepts %s's invitation until %s", who.Role, r.From, r.ExpiresAt.Format(time.RFC3339))); err != nil {
		return Accepted{}, err
	}
	ok, err := update(ctx, s.o.DB, id, StatusPending, "status = ?, accepted_ms = ?", []any{string(StatusAccepted), ms(now)},
		Event{At: now, Role: who.Role, Action: "accept"})
	if err != nil {
		return Accepted{}, err
	}
	if !ok {
		return Accepted{}, fmt.Errorf("%s %s: %w: changed concurrently", OpAccept, id, ErrState)
	}
	r.Status, r.AcceptedAt = StatusAccepted, now
	s.log.Info("collab accepted", "id", id, "role", who.Role)
	v, err := s.view(ctx, who, r.Collaboration, "", 0)
	if err != nil {
		return Accepted{}, err
	}
	return Accepted{Collaboration: r.Collaboration, Shared: v}, nil
}

func validResult(res Result) error {
	switch {
	case strings.TrimSpace(res.Output) == "":
		return errors.New("result.output is empty")
	case len(res.Output) > MaxOutputBytes:
		return fmt.Errorf("result.output is %d bytes, at most %d", len(res.Output), MaxOutputBytes)
	case !utf8.ValidString(res.Output) || strings.IndexByte(res.Output, 0) >= 0:
		return errors.New("result.output is not text")
	case math.IsNaN(res.Importance) || res.Importance < 0 || res.Importance > 1:
		return fmt.Errorf("result.importance %v is outside [0,1]", res.Importance)
	case len(res.Artifacts) > MaxArtifacts:
		return fmt.Errorf("result.artifacts has %d entries, at most %d", len(res.Artifacts), MaxArtifacts)
	}
	for _, a := range res.Artifacts {
		if err := cleanText("artifact", a, MaxArtifactChars); err != nil {
			return err
		}
		if strings.TrimSpace(a) == "" || strings.ContainsFunc(a, unicode.IsControl) {
			return fmt.Errorf("artifact %q is empty or has control characters", a)
		}
	}
	return nil
}

// Completed is Complete's answer: the collaboration (with its result and,
// when one was written, SummaryPath and SummaryVersion).
type Completed struct {
	Collaboration Collaboration `json:"collaboration"`
	Summary       bool          `json:"summary"` // a global summary was written
}

// Complete records the result of an accepted collaboration (see the
// package doc for the summary). Errors: those of Accept (ErrState also for
// complete before accept and for any call after completion),
// ErrInvalidInput (result), or the summary write's error (then the
// collaboration stays accepted and Complete may be retried).
func (s *Service) Complete(ctx context.Context, who acl.Principal, id, token string, res Result) (Completed, error) {
	c, err := s.complete(ctx, who, id, token, res)
	if err == nil {
		s.changed(ctx, id)
	}
	return c, err
}

func (s *Service) complete(ctx context.Context, who acl.Principal, id, token string, res Result) (Completed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.authenticate(ctx, who, OpComplete, id, token, false)
	if err != nil {
		return Completed{}, err
	}
	if r.Status != StatusAccepted {
		return Completed{}, s.deny(who, OpComplete, target(id), ErrState, "the collaboration is "+string(r.Status)+", not accepted")
	}
	if err := validResult(res); err != nil {
		return Completed{}, s.deny(who, OpComplete, target(id), ErrInvalidInput, err.Error())
	}
	now := s.o.Now().UTC().Truncate(time.Millisecond)
	c := r.Collaboration
	c.Status, c.CompletedAt, c.CompletedBy, c.Result = StatusCompleted, now, who.Role, &res
	summary := res.Importance > s.o.SummaryThreshold
	if err := s.allow(who, OpComplete, target(id), fmt.Sprintf("completed by %s, importance %.2f (summary above %.2f: %v)", who.Role, res.Importance, s.o.SummaryThreshold, summary)); err != nil {
		return Completed{}, err
	}
	if summary {
		wr, err := s.writeSummary(ctx, who, c)
		if err != nil {
			return Completed{}, err
		}
		c.SummaryPath, c.SummaryVersion = wr.Path, wr.Version
	}
	resJSON, err := jsonString(res)
	if err != nil {
		return Completed{}, err
	}
	ok, err := update(ctx, s.o.DB, id, StatusAccepted,
		"status = ?, completed_ms = ?, completed_by = ?, result = ?, summary_path = ?, summary_version = ?",
		[]any{string(StatusCompleted), ms(now), who.Role, resJSON, c.SummaryPath, c.SummaryVersion},
		Event{At: now, Role: who.Role, Action: "complete", Detail: fmt.Sprintf("importance %.2f", res.Importance)})
	if err != nil {
		return Completed{}, err
	}
	if !ok {
		return Completed{}, fmt.Errorf("%s %s: %w: changed concurrently", OpComplete, id, ErrState)
	}
	if summary {
		if err := event(ctx, s.o.DB, id, Event{At: now, Role: who.Role, Action: "summary", Detail: c.SummaryPath}); err != nil {
			return Completed{}, err
		}
	}
	s.log.Info("collab completed", "id", id, "role", who.Role, "summary", summary)
	return Completed{Collaboration: c, Summary: summary}, nil
}

// writeSummary appends c's summary to Options.SummaryPath as role who
// (audited as collab.summary; the engine's Authorize hook is told the
// write was checked).
func (s *Service) writeSummary(ctx context.Context, who acl.Principal, c Collaboration) (memory.WriteResult, error) {
	rel, name, err := s.o.Guard.Canonical(who, OpSummary, s.o.SummaryPath)
	if err != nil {
		return memory.WriteResult{}, err
	}
	reason := fmt.Sprintf("importance %.2f > %.2f: summary of collaboration %s (%s → %s) into %s", c.Result.Importance, s.o.SummaryThreshold, c.ID, c.From, c.To, name)
	if err := s.allow(who, OpSummary, name, reason); err != nil {
		return memory.WriteResult{}, err
	}
	wctx := guard.WithChecked(guard.WithPrincipal(ctx, who), rel)
	wr, err := s.o.Memory.Write(wctx, memory.WriteRequest{Path: rel, Content: summaryText(c), Mode: memory.WriteAppend, Writer: who.Role})
	if err != nil {
		return memory.WriteResult{}, fmt.Errorf("%s %s: %w", OpSummary, c.ID, err)
	}
	return wr, nil
}

// summaryText is the Markdown appended to the summary file.
func summaryText(c Collaboration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Collaboration %s → %s (%s)\n\n", c.From, c.To, c.CompletedAt.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "- id: %s\n- task: %s\n- completed by: %s, importance %.2f\n", c.ID, oneLine(c.Task, 300), c.CompletedBy, c.Result.Importance)
	if len(c.Result.Artifacts) > 0 {
		fmt.Fprintf(&b, "- artifacts: %s\n", strings.Join(c.Result.Artifacts, ", "))
	}
	fmt.Fprintf(&b, "- result: %s\n", oneLine(c.Result.Output, SummaryOutputChars))
	return b.String()
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// WriteRequest is a write through a collaboration: a memory_write of one
// of its Context files (Path, Content, Mode, BaseVersion as in
// memory.WriteRequest).
type WriteRequest struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Mode        string `json:"mode"`
	BaseVersion string `json:"baseVersion,omitempty"`
}

// Write writes a Context file through an accepted, unexpired
// collaboration, by one of its parties, when both parties hold
// `collaborate` on it (SPEC §5.1). Errors: those of Accept, ErrState (not
// accepted), ErrInvalidInput (not a Context file; also memory.ErrInvalidPath
// for a refused path), ErrForbidden (a party lacks collaborate), or the
// memory engine's write error.
func (s *Service) Write(ctx context.Context, who acl.Principal, id, token string, w WriteRequest) (memory.WriteResult, error) {
	res, err := s.write(ctx, who, id, token, w)
	if err == nil {
		s.changed(ctx, id)
	}
	return res, err
}

func (s *Service) write(ctx context.Context, who acl.Principal, id, token string, w WriteRequest) (memory.WriteResult, error) {
	s.mu.Lock() // no Complete in between: the write happens while accepted
	defer s.mu.Unlock()
	r, err := s.authenticate(ctx, who, OpWrite, id, token, false)
	if err != nil {
		return memory.WriteResult{}, err
	}
	if r.Status != StatusAccepted {
		return memory.WriteResult{}, s.deny(who, OpWrite, target(id), ErrState, "writes need an accepted collaboration; it is "+string(r.Status))
	}
	rel, name, err := s.o.Guard.Canonical(who, OpWrite, w.Path)
	if err != nil {
		return memory.WriteResult{}, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if !slices.Contains(r.Context, rel) {
		return memory.WriteResult{}, s.deny(who, OpWrite, name, ErrInvalidInput, fmt.Sprintf("%s is not one of collaboration %s's files", rel, id))
	}
	for _, party := range []string{r.From, r.To} {
		if d := s.o.Guard.Decide(acl.Principal{Role: party}, acl.Collaborate, rel); !d.Allowed {
			return memory.WriteResult{}, s.deny(who, OpWrite, name, fmt.Errorf("%w: %w", ErrForbidden, memory.ErrForbidden), fmt.Sprintf("collaboration %s: %s", id, d.Reason))
		}
	}
	if err := s.allow(who, OpWrite, name, fmt.Sprintf("through collaboration %s (accepted until %s); %s and %s hold collaborate", id, r.ExpiresAt.Format(time.RFC3339), r.From, r.To)); err != nil {
		return memory.WriteResult{}, err
	}
	wctx := guard.WithChecked(guard.WithPrincipal(ctx, who), rel)
	res, err := s.o.Memory.Write(wctx, memory.WriteRequest{Path: rel, Content: w.Content, Mode: w.Mode, BaseVersion: w.BaseVersion, Writer: who.Role})
	if err != nil {
		return memory.WriteResult{}, fmt.Errorf("%s %s: %w", OpWrite, id, err)
	}
	if err := event(ctx, s.o.DB, id, Event{At: s.o.Now().UTC(), Role: who.Role, Action: "write", Detail: rel}); err != nil {
		return res, err
	}
	return res, nil
}

// View returns the shared memory view of a pending or accepted,
// unexpired collaboration to one of its parties (query "" skips the
// search; max results 0 = memory.DefaultMaxResults). Errors:
// ErrInvalidInput for a query memory.CheckQuery refuses (longer than
// memory.MaxQueryChars, say), checked first; those of Accept, or the
// memory engine's.
func (s *Service) View(ctx context.Context, who acl.Principal, id, token, query string, max int) (View, error) {
	if strings.TrimSpace(query) != "" {
		if err := memory.CheckQuery(query); err != nil {
			return View{}, fmt.Errorf("%s %s: %w: %w", OpView, id, ErrInvalidInput, err)
		}
	}
	r, err := s.authenticate(ctx, who, OpView, id, token, false)
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, who, r.Collaboration, query, max)
}

// bothRead is the shared view's readable predicate: the AND of both
// parties' read rights.
func (s *Service) bothRead(c Collaboration) func(string) bool {
	a, b := acl.Principal{Role: c.From}, acl.Principal{Role: c.To}
	return func(rel string) bool { return s.o.Guard.Readable(a, rel) && s.o.Guard.Readable(b, rel) }
}

func (s *Service) view(ctx context.Context, who acl.Principal, c Collaboration, query string, max int) (View, error) {
	ok := s.bothRead(c)
	v := View{Files: []memory.FileInfo{}, Context: []ContextFile{}}
	files, err := s.o.Memory.Files(ctx)
	if err != nil {
		return View{}, fmt.Errorf("%s %s: %w", OpView, c.ID, err)
	}
	for _, f := range files {
		if ok(f.Path) {
			v.Files = append(v.Files, f)
		}
	}
	for _, p := range c.Context {
		if !ok(p) {
			v.Withheld++
			continue
		}
		g, err := s.o.Memory.Get(ctx, memory.GetOptions{Path: p})
		if errors.Is(err, memory.ErrNotFound) {
			continue
		}
		if err != nil {
			return View{}, fmt.Errorf("%s %s: %s: %w", OpView, c.ID, p, err)
		}
		v.Context = append(v.Context, ContextFile{Path: p, Text: g.Text})
	}
	withheldHits := 0
	if strings.TrimSpace(query) != "" {
		v.Query = query
		res, err := s.o.Memory.Search(ctx, memory.SearchOptions{Query: query, MaxResults: max, Readable: ok})
		if err != nil {
			return View{}, fmt.Errorf("%s %s: %w", OpView, c.ID, err)
		}
		withheldHits = res.Withheld
		for _, hit := range res.Results { // re-check, and AlsoIn too
			if !ok(hit.Path) {
				withheldHits++
				continue
			}
			also := hit.AlsoIn[:0:0]
			for _, a := range hit.AlsoIn {
				if ok(a) {
					also = append(also, a)
				}
			}
			if len(also) == 0 {
				also = nil
			}
			hit.AlsoIn = also
			v.Results = append(v.Results, hit)
		}
	}
	reason := fmt.Sprintf("shared view of %s and %s: %d files, %d context files (%d withheld), %d results (%d filtered)",
		c.From, c.To, len(v.Files), len(v.Context), v.Withheld, len(v.Results), withheldHits)
	if err := s.allow(who, OpView, target(c.ID), reason); err != nil {
		return View{}, err
	}
	return v, nil
}

// ListFilter selects collaborations: Status ("" = all; pending, accepted,
// completed, declined or expired, as reported), Limit (0 = DefaultListLimit, at
// most MaxListLimit).
type ListFilter struct {
	Status Status `json:"status,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// List returns collaborations newest first with their history: admin sees
// all, a role those it is a party of; other principals are refused.
// Audited as one entry. Errors: ErrForbidden, ErrInvalidInput (filter),
// or a storage or audit error.
func (s *Service) List(ctx context.Context, who acl.Principal, f ListFilter) ([]Collaboration, error) {
	if who.Role == "" && !who.Admin {
		return nil, s.deny(who, OpList, "collaborations", ErrForbidden, "only admin and roles list collaborations")
	}
	switch f.Status {
	case "", StatusPending, StatusAccepted, StatusCompleted, StatusDeclined, StatusExpired:
	default:
		return nil, s.deny(who, OpList, "collaborations", ErrInvalidInput, fmt.Sprintf("status %q (want pending, accepted, completed, declined or expired)", f.Status))
	}
	if f.Limit < 0 || f.Limit > MaxListLimit {
		return nil, s.deny(who, OpList, "collaborations", ErrInvalidInput, fmt.Sprintf("limit %d out of 0..%d", f.Limit, MaxListLimit))
	}
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	all, err := list(ctx, s.o.DB, who.Role, MaxListLimit)
	if err != nil {
		return nil, err
	}
	now := s.o.Now()
	out := []Collaboration{}
	for _, c := range all {
		c.Status = effective(c, now)
		if (f.Status == "" || c.Status == f.Status) && len(out) < f.Limit {
			out = append(out, s.annotate(c))
		}
	}
	if err := s.allow(who, OpList, "collaborations", fmt.Sprintf("%d listed", len(out))); err != nil {
		return nil, err
	}
	return out, nil
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("collab: encode: %w", err)
	}
	return string(b), nil
}
