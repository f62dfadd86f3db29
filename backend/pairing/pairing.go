// Package pairing is the one pairing store of the gateway (issue 16 items 4
// and 5): one-time setup codes, the pending pairing requests the person
// approves or rejects, and the paired devices with their device tokens
// (devices.go).
//
// Setup codes. NewCode makes a code of 8 characters from Crockford's base32
// alphabet (0-9, A-Z without I, L, O, U; 40 bits from crypto/rand), shown
// as "XXXX-XXXX", and a random id that names it in events and the UI. Typing
// is forgiving: case, spaces and dashes are ignored, O reads as 0 and I or
// L as 1. Only the SHA-256 of the normalised code is kept (Store); the code
// itself is returned once, to be shown in the QR code and never logged. A
// code lives Options.CodeTTL (10 minutes) and is single use: the first
// Redeem binds it to the device's id; a Redeem of the same code by the same
// device within Options.RetryWindow (1 minute) of that first use succeeds
// again (a retry, a second socket), any other is ErrUsed.
//
// Guessing (issue 21 item 3). A wrong guess names no code, so it cannot be
// charged to the code it was aimed at; instead every failed Redeem of a
// well-formed code that names no issued code is a wrong try against every
// live code (issued, unused, unexpired, not locked). After
// Options.MaxWrongTries (10) wrong tries a code is locked: dead for good
// (ErrLocked, a *LockedError), and the person makes a new one in one click.
// Each address (an IPv6 address by its /64) may fail Options.PerIPFailures
// (5) times per Options.FailureWindow (10 minutes); past that its tries are
// ErrRateLimited before the code is looked at, and count against nothing.
// There is no limit shared by all addresses, so no one can stop the person
// pairing with a fresh code.
//
// A try of an issued code that is dead (used by another device or past its
// retry window, locked, or expired: ErrUsed, ErrLocked, ErrExpired) is
// refused as such and counts against nothing, neither the live codes nor
// the address: it is the person's phone asking again with the code it
// scanned (a locked code's page reloaded), not a guess. The bound below
// still holds: such a try names a value that is not a live code c (c's
// record would have been found instead), so it tells the caller only that
// c differs from a code it already holds, and the caller can make such
// tries only with values it already knows — at most the dead codes still
// stored, each telling the same thing however often it is repeated. Over D
// known dead codes, P(c guessed) ≤ (MaxWrongTries + D) / 2^40 at the very
// worst, and D is codes the attacker saw issued, not codes it can make up:
// a value it makes up names no issued code and is charged as before.
//
// The bound. A try names one of 2^40 values. While a code c is live, each
// failed try is one of its at most MaxWrongTries wrong tries, and the try
// that names c ends the game, so an attacker who knows nothing of c gets at
// most MaxWrongTries tries at it, however many addresses it uses and
// however long c lives: P(c is guessed before it locks or expires) ≤
// MaxWrongTries / (2^40 − MaxWrongTries) ≈ 10 / 2^40 ≈ 9.1·10⁻¹² with the
// defaults; over m codes ever issued, at most m times that (a million codes:
// 9.1·10⁻⁶). A guessed code yields only a pending request that the person
// must still approve. The per-address limit is what bounds locking: A
// addresses make at most A·PerIPFailures wrong tries per FailureWindow, so
// they lock at most A·PerIPFailures/MaxWrongTries codes (A/2 with the
// defaults), and only codes live while they still have tries left; a code
// made after their tries are spent is not touched until the window moves.
//
// Pending requests. Submit records a device's request (5 minutes,
// Options.PendingTTL); a second Submit from the same device id updates the
// same request instead of adding another. Pending lists the live ones; Take
// removes one to approve or reject it.
//
// A Service is safe for concurrent use; it serialises its store operations,
// so a Store needs no transactions of its own. One Service per state dir
// (the app holds app.lock).
package pairing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultCodeTTL       = 10 * time.Minute
	DefaultRetryWindow   = time.Minute
	DefaultPendingTTL    = 5 * time.Minute
	DefaultFailureWindow = 10 * time.Minute
	DefaultPerIPFailures = 5
	DefaultMaxWrongTries = 10
	DefaultMaxPending    = 50
)

// Errors (test with errors.Is).
var (
	// ErrInvalidCode: no live code has this value (or it is malformed).
	ErrInvalidCode = errors.New("invalid setup code")
	// ErrUsed: the code was used by another device, or by this one more
	// than RetryWindow ago.
	ErrUsed = errors.New("setup code already used")
	// ErrExpired: the code or the request outlived its time.
	ErrExpired = errors.New("setup code or pairing request expired")
	// ErrRateLimited: too many failed codes from this address;
	// RateLimitError says when to try again.
	ErrRateLimited = errors.New("too many failed setup codes, try again later")
	// ErrLocked: the code was locked after Options.MaxWrongTries wrong tries
	// on the network (LockedError says how many); it never works again.
	ErrLocked = errors.New("setup code locked after too many wrong tries")
	// ErrNotFound: no pending request has this id.
	ErrNotFound = errors.New("pairing request not found")
	// ErrTooManyPending: MaxPending requests are already waiting.
	ErrTooManyPending = errors.New("too many pending pairing requests")
	// ErrBadRequest: a request without a device id.
	ErrBadRequest = errors.New("bad pairing request")
	// ErrNotPaired: no paired device has this id.
	ErrNotPaired = errors.New("device is not paired")
	// ErrTokenMismatch: the device token does not match the one stored for
	// the device and role (wrong, rotated, revoked, or the role is not
	// approved). The pairing record is kept: the device may ask to repair.
	ErrTokenMismatch = errors.New("device token does not match")
	// ErrNotRequested: an approval names a role or command the device did
	// not ask for.
	ErrNotRequested = errors.New("not requested by the device")
	// ErrWidened: a device resubmitting its pending request asked for a
	// role, command or capability the request does not hold (the person
	// may be reading it: what they approve by its id must be what they saw).
	ErrWidened = errors.New("a pending pairing request cannot ask for more")
)

// RateLimitError is the ErrRateLimited error with the time the caller may
// try again.
type RateLimitError struct{ RetryAfter time.Duration }

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%v (in %s)", ErrRateLimited, e.RetryAfter.Round(time.Second))
}

// Unwrap makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// LockedError is the ErrLocked error with the wrong tries that locked the
// code.
type LockedError struct{ WrongTries int }

func (e *LockedError) Error() string {
	return fmt.Sprintf("setup code locked after %d wrong tries", e.WrongTries)
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Options configure a Service. Store is required; zero fields take the
// defaults above (the package comment says what each limit bounds).
type Options struct {
	Store         Store
	Now           func() time.Time // default time.Now
	CodeTTL       time.Duration    // life of a setup code
	RetryWindow   time.Duration    // the same device may redeem its code again this long
	PendingTTL    time.Duration    // a pending request lives this long after its last Submit
	FailureWindow time.Duration    // the window of PerIPFailures
	PerIPFailures int              // failed Redeems per address (IPv6 /64) per FailureWindow
	MaxWrongTries int              // wrong tries that lock a live code
	MaxPending    int              // pending requests at a time
}

// Service issues and redeems setup codes and keeps pending requests.
type Service struct {
	o   Options
	mu  sync.Mutex
	lim limiter
}

// New checks o and fills in the defaults.
func New(o Options) (*Service, error) {
	if o.Store == nil {
		return nil, errors.New("pairing: Options.Store is nil")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.CodeTTL, DefaultCodeTTL)
	def(&o.RetryWindow, DefaultRetryWindow)
	def(&o.PendingTTL, DefaultPendingTTL)
	def(&o.FailureWindow, DefaultFailureWindow)
	for _, p := range []struct {
		n *int
		v int
	}{{&o.PerIPFailures, DefaultPerIPFailures}, {&o.MaxWrongTries, DefaultMaxWrongTries}, {&o.MaxPending, DefaultMaxPending}} {
		if *p.n <= 0 {
			*p.n = p.v
		}
	}
	return &Service{o: o, lim: limiter{window: o.FailureWindow, perKey: o.PerIPFailures, byKey: map[string][]time.Time{}}}, nil
}

// MaxWrongTries is the number of wrong tries that lock a live code
// (Options.MaxWrongTries).
func (s *Service) MaxWrongTries() int { return s.o.MaxWrongTries }

// codeAlphabet is Crockford's base32 alphabet.
const codeAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// CodeLen is the number of characters of a setup code (without the dash).
const CodeLen = 8

// Issued is a new setup code.
type Issued struct {
	Code          string    // "XXXX-XXXX"; returned once, never stored or logged
	ID            string    // random, 16 hex characters: names the code in events (never derived from it)
	ExpiresAt     time.Time // CreatedAt + Options.CodeTTL
	MaxWrongTries int       // wrong tries on the network that lock it (Options.MaxWrongTries)
}

// NewCode makes a setup code and stores its hash. Expired codes are purged
// here.
func (s *Service) NewCode(ctx context.Context) (Issued, error) {
	var b [5]byte // 40 bits = 8 × 5
	if _, err := rand.Read(b[:]); err != nil {
		return Issued{}, fmt.Errorf("setup code: %w", err)
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return Issued{}, fmt.Errorf("setup code id: %w", err)
	}
	v := uint64(b[0])<<32 | uint64(b[1])<<24 | uint64(b[2])<<16 | uint64(b[3])<<8 | uint64(b[4])
	code := make([]byte, CodeLen)
	for i := CodeLen - 1; i >= 0; i-- {
		code[i] = codeAlphabet[v&31]
		v >>= 5
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	if err := s.o.Store.DeleteCodesExpired(ctx, now.Add(-s.o.RetryWindow)); err != nil {
		return Issued{}, fmt.Errorf("purge setup codes: %w", err)
	}
	c := Code{Hash: hashCode(string(code)), ID: hex.EncodeToString(idb[:]), CreatedAt: now, ExpiresAt: now.Add(s.o.CodeTTL)}
	if err := s.o.Store.PutCode(ctx, c); err != nil {
		return Issued{}, fmt.Errorf("store setup code: %w", err)
	}
	return Issued{Code: string(code[:4]) + "-" + string(code[4:]), ID: c.ID, ExpiresAt: c.ExpiresAt, MaxWrongTries: s.o.MaxWrongTries}, nil
}

// NormalizeCode turns what a person typed into the canonical 8 characters,
// or reports false when it cannot be a code.
func NormalizeCode(typed string) (string, bool) {
	var b strings.Builder
	for _, r := range strings.ToUpper(typed) {
		switch r {
		case ' ', '-', '\t':
			continue
		case 'O':
			r = '0'
		case 'I', 'L':
			r = '1'
		}
		if r > 127 || !strings.ContainsRune(codeAlphabet, r) {
			return "", false
		}
		b.WriteRune(r)
	}
	if b.Len() != CodeLen {
		return "", false
	}
	return b.String(), true
}

func hashCode(norm string) string {
	sum := sha256.Sum256([]byte(norm))
	return hex.EncodeToString(sum[:])
}

// Redemption is what a Redeem did besides its answer.
type Redemption struct {
	// CodeID names the code redeemed (success only).
	CodeID string
	// Locked names the codes this failed try locked (MaxWrongTries
	// reached), for the caller to announce; set with the try's error.
	Locked []string
}

// Redeem spends the setup code for deviceID (the verified deviceId of the
// connecting device) calling from remoteIP (an IP literal; "" counts as one
// unknown address). Errors: ErrRateLimited (a *RateLimitError), ErrLocked
// (a *LockedError), ErrInvalidCode, ErrUsed, ErrExpired, or the store's.
// A failed try of a well-formed code is a wrong try against every live
// code; the Redemption names those it locked (see the package comment).
func (s *Service) Redeem(ctx context.Context, code, deviceID, remoteIP string) (Redemption, error) {
	if deviceID == "" {
		return Redemption{}, fmt.Errorf("%w: no device id", ErrBadRequest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	key := ipKey(remoteIP)
	if wait := s.lim.blocked(key, now); wait > 0 {
		return Redemption{}, &RateLimitError{RetryAfter: wait}
	}
	norm, ok := NormalizeCode(code)
	if !ok {
		s.lim.fail(key, now) // names no code: a typo, not a guess at one
		return Redemption{}, ErrInvalidCode
	}
	id, known, err := s.redeem(ctx, norm, deviceID, now)
	if err == nil {
		return Redemption{CodeID: id}, nil
	}
	if isStoreErr(err) || known {
		// A code that was issued (used, locked or expired) is not a guess
		// at a live one: it counts against nothing (see the package doc).
		return Redemption{}, err
	}
	s.lim.fail(key, now)
	locked, serr := s.wrongTry(ctx, now)
	if serr != nil {
		return Redemption{Locked: locked}, serr
	}
	return Redemption{Locked: locked}, err
}

type storeErr struct{ error }

func (e storeErr) Unwrap() error { return e.error }

func isStoreErr(err error) bool { var se storeErr; return errors.As(err, &se) }

// redeem spends the normalised code norm and returns its id; known says
// that norm is the value of an issued code (also when it is refused as
// used, locked or expired).
func (s *Service) redeem(ctx context.Context, norm, deviceID string, now time.Time) (string, bool, error) {
	c, found, err := s.o.Store.Code(ctx, hashCode(norm))
	if err != nil {
		return "", false, storeErr{fmt.Errorf("read setup code: %w", err)}
	}
	switch {
	case !found:
		return "", false, ErrInvalidCode
	case c.UsedBy != "":
		if c.UsedBy == deviceID && now.Sub(c.UsedAt) <= s.o.RetryWindow {
			return c.ID, true, nil
		}
		return "", true, ErrUsed
	case !c.LockedAt.IsZero():
		return "", true, &LockedError{WrongTries: c.WrongTries}
	case !now.Before(c.ExpiresAt):
		return "", true, ErrExpired
	}
	c.UsedBy, c.UsedAt = deviceID, now
	if err := s.o.Store.PutCode(ctx, c); err != nil {
		return "", true, storeErr{fmt.Errorf("store setup code: %w", err)}
	}
	return c.ID, true, nil
}

// wrongTry counts a failed try against every live code and returns the ids
// of those it locked.
func (s *Service) wrongTry(ctx context.Context, now time.Time) ([]string, error) {
	all, err := s.o.Store.Codes(ctx)
	if err != nil {
		return nil, storeErr{fmt.Errorf("read setup codes: %w", err)}
	}
	var locked []string
	for _, c := range all {
		if c.UsedBy != "" || !c.LockedAt.IsZero() || !now.Before(c.ExpiresAt) {
			continue
		}
		c.WrongTries++
		if c.WrongTries >= s.o.MaxWrongTries {
			c.LockedAt = now
		}
		if err := s.o.Store.PutCode(ctx, c); err != nil {
			return locked, storeErr{fmt.Errorf("store setup code: %w", err)}
		}
		if !c.LockedAt.IsZero() {
			locked = append(locked, c.ID)
		}
	}
	return locked, nil
}

// ipKey is the rate-limit key of an address: IPv4 as is, IPv6 by its /64
// (one host usually owns a whole /64), anything unparsable as itself.
func ipKey(ip string) string {
	p := net.ParseIP(strings.Trim(ip, "[]"))
	if p == nil {
		return "?" + ip
	}
	if v4 := p.To4(); v4 != nil {
		return v4.String()
	}
	return p.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// Request is a device's pending pairing request.
type Request struct {
	ID          string    // random, 32 hex characters
	DeviceID    string    // verified deviceId (package device)
	Algorithm   string    // "ed25519" or "ecdsa-p256"
	PublicKey   string    // base64 raw key, as sent
	DisplayName string    // what the device calls itself
	Platform    string    // client.platform
	Roles       []string  // "operator", "node"
	Commands    []string  // commands a node declared
	Caps        []string  // capabilities a node declared
	Repair      bool      // the key is already paired (it lost its token)
	RemoteIP    string    // where it came from
	CreatedAt   time.Time // first Submit
	ExpiresAt   time.Time // last Submit + PendingTTL
}

// Submit records r as pending, or refreshes the pending request of the
// same DeviceID: same ID, new expiry, display name, platform and address,
// and the roles, commands and caps of the first submission (what the
// person is shown stays what they approve by its ID; asking for less
// changes nothing). It returns the stored request. Errors: ErrBadRequest
// (no DeviceID), ErrWidened (the resubmission asks for a role, command or
// cap the pending request does not hold; it is left as it was),
// ErrTooManyPending, the store's.
func (s *Service) Submit(ctx context.Context, r Request) (Request, error) {
	if r.DeviceID == "" {
		return Request{}, fmt.Errorf("%w: no device id", ErrBadRequest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	live, err := s.live(ctx, now)
	if err != nil {
		return Request{}, err
	}
	r.CreatedAt, r.ExpiresAt = now, now.Add(s.o.PendingTTL)
	r.ID = ""
	for _, old := range live {
		if old.DeviceID != r.DeviceID {
			continue
		}
		for _, f := range []struct {
			what      string
			want, has []string
		}{{"role", r.Roles, old.Roles}, {"command", r.Commands, old.Commands}, {"capability", r.Caps, old.Caps}} {
			for _, x := range f.want {
				if !slices.Contains(f.has, x) {
					return Request{}, fmt.Errorf("%w: %s %q is not in request %s (%v)", ErrWidened, f.what, x, old.ID, f.has)
				}
			}
		}
		r.ID, r.CreatedAt = old.ID, old.CreatedAt
		r.Roles, r.Commands, r.Caps = old.Roles, old.Commands, old.Caps
	}
	if r.ID == "" {
		if len(live) >= s.o.MaxPending {
			return Request{}, ErrTooManyPending
		}
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return Request{}, fmt.Errorf("request id: %w", err)
		}
		r.ID = hex.EncodeToString(b[:])
	}
	if err := s.o.Store.PutRequest(ctx, r); err != nil {
		return Request{}, fmt.Errorf("store pairing request: %w", err)
	}
	return r, nil
}

// Pending lists the live requests, oldest first (expired ones are deleted).
func (s *Service) Pending(ctx context.Context) ([]Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live(ctx, s.o.Now())
}

func (s *Service) live(ctx context.Context, now time.Time) ([]Request, error) {
	all, err := s.o.Store.Requests(ctx)
	if err != nil {
		return nil, fmt.Errorf("read pairing requests: %w", err)
	}
	out := all[:0]
	for _, r := range all {
		if now.Before(r.ExpiresAt) {
			out = append(out, r)
		} else if err := s.o.Store.DeleteRequest(ctx, r.ID); err != nil {
			return nil, fmt.Errorf("delete expired pairing request: %w", err)
		}
	}
	return out, nil
}

// Take removes the pending request id and returns it, for the caller to
// approve or reject. Errors: ErrNotFound, ErrExpired (it is deleted too),
// the store's.
func (s *Service) Take(ctx context.Context, id string) (Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.find(ctx, id, s.o.Now())
	if err != nil {
		return Request{}, err
	}
	if err := s.o.Store.DeleteRequest(ctx, id); err != nil {
		return Request{}, fmt.Errorf("delete pairing request: %w", err)
	}
	return r, nil
}
