package gateway

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"
)

// Idempotency limits (SPEC §3).
const (
	// IdempotencyWindow is how long a completed result is replayed for a
	// repeated (principal, method, idempotencyKey).
	IdempotencyWindow = 5 * time.Minute
	// MaxIdempotencyKeyLen caps the idempotencyKey length in bytes.
	MaxIdempotencyKeyLen = 256

	defaultIdemMaxEntries = 4096
	defaultIdemMaxBytes   = 32 << 20
)

type idemKey struct{ principal, method, key string }

// idemEntry is one deduplicated call. done is closed once payload/err are
// set. params is the hash of the params the key was first used with.
type idemEntry struct {
	key     idemKey
	params  [sha256.Size]byte
	done    chan struct{}
	payload json.RawMessage
	err     *Error
	expires time.Time // zero while running
	elem    *list.Element
}

// idemCache remembers results per (principal, method, key), bounded by entry count and
// by total payload bytes; the oldest entries go first. Results with a
// retryable error are not remembered, so a retry after a dropped connection
// or a timeout runs the handler again.
type idemCache struct {
	mu         sync.Mutex
	now        func() time.Time
	ttl        time.Duration
	maxEntries int
	maxBytes   int
	bytes      int
	m          map[idemKey]*idemEntry
	order      list.List // of *idemEntry, oldest first
}

func newIdemCache(now func() time.Time, ttl time.Duration, maxEntries, maxBytes int) *idemCache {
	return &idemCache{now: now, ttl: ttl, maxEntries: maxEntries, maxBytes: maxBytes, m: make(map[idemKey]*idemEntry)}
}

// begin returns the entry for (principal, method, key) and whether the
// caller must run the call (leader) and then call finish. Followers wait on
// entry.done. A key in use with other params (another hash) is refused
// with INVALID_REQUEST.
func (c *idemCache) begin(principal, method, key string, params [sha256.Size]byte) (e *idemEntry, leader bool, err *Error) {
	k := idemKey{principal, method, key}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.evictLocked(now)
	if e, ok := c.m[k]; ok {
		if e.expires.IsZero() || now.Before(e.expires) {
			if e.params != params {
				return nil, false, Errorf(CodeInvalidRequest,
					"%s: idempotencyKey %q was already used with other params; use a new key for a new action", method, key)
			}
			return e, false, nil
		}
		c.removeLocked(e)
	}
	e = &idemEntry{key: k, params: params, done: make(chan struct{})}
	e.elem = c.order.PushBack(e)
	c.m[k] = e
	c.evictLocked(now)
	return e, true, nil
}

// finish records the result of a leader's call and wakes the followers.
func (c *idemCache) finish(e *idemEntry, payload json.RawMessage, err *Error) {
	c.mu.Lock()
	e.payload, e.err = payload, err
	if err != nil && err.Retryable {
		c.removeLocked(e)
	} else if c.m[e.key] == e {
		e.expires = c.now().Add(c.ttl)
		c.bytes += len(payload)
		c.evictLocked(c.now())
	}
	c.mu.Unlock()
	close(e.done)
}

// evictLocked drops expired entries from the front and then the oldest
// entries while over a bound. Followers already waiting keep their pointer.
func (c *idemCache) evictLocked(now time.Time) {
	for f := c.order.Front(); f != nil; f = c.order.Front() {
		e := f.Value.(*idemEntry)
		expired := !e.expires.IsZero() && !now.Before(e.expires)
		if !expired && c.order.Len() <= c.maxEntries && c.bytes <= c.maxBytes {
			return
		}
		c.removeLocked(e)
	}
}

func (c *idemCache) removeLocked(e *idemEntry) {
	if e.elem == nil {
		return
	}
	c.order.Remove(e.elem)
	e.elem = nil
	if c.m[e.key] == e {
		delete(c.m, e.key)
	}
	if !e.expires.IsZero() {
		c.bytes -= len(e.payload)
	}
}

func (c *idemCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

const idemKeyField = `"idempotencyKey"`

// idempotencyKey returns params.idempotencyKey ("" when absent).
func idempotencyKey(params json.RawMessage) (string, *Error) {
	if !bytes.Contains(params, []byte(idemKeyField)) {
		return "", nil
	}
	var p struct {
		Key *json.RawMessage `json:"idempotencyKey"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.Key == nil || string(*p.Key) == "null" {
		return "", nil
	}
	var key string
	if err := json.Unmarshal(*p.Key, &key); err != nil {
		return "", Errorf(CodeInvalidRequest, "idempotencyKey must be a string")
	}
	if len(key) > MaxIdempotencyKeyLen {
		return "", Errorf(CodeInvalidRequest, "idempotencyKey longer than %d bytes", MaxIdempotencyKeyLen)
	}
	return key, nil
}

// paramsHash hashes params in a canonical form (object keys sorted, no
// spaces, numbers as written) without the idempotencyKey member, so that a
// retry that encodes the same params differently is still the same call.
func paramsHash(params json.RawMessage) ([sha256.Size]byte, *Error) {
	var v any
	if len(params) > 0 {
		d := json.NewDecoder(bytes.NewReader(params))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return [sha256.Size]byte{}, Errorf(CodeInvalidRequest, "params are not valid JSON: %s", describeJSONError(err))
		}
	}
	if m, ok := v.(map[string]any); ok {
		delete(m, "idempotencyKey")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return [sha256.Size]byte{}, Errorf(CodeInvalidRequest, "params cannot be hashed: %v", err)
	}
	return sha256.Sum256(b), nil
}
