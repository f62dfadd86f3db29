package nodes

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// Presence defaults (SPEC §7).
const (
	// DefaultPresenceTTL is how long an entry stays after its last
	// connection ended.
	DefaultPresenceTTL = 5 * time.Minute
	// DefaultPresenceMax caps the number of entries; over it the oldest
	// entry is dropped.
	DefaultPresenceMax = 200
)

// PresenceEntry is one client instance in the presence list (SPEC §7,
// event "presence" and hello-ok snapshot.presence). It is keyed by its
// principal and InstanceID (the client's client.instanceId, or its connId
// when it sent none): a paired device's entries by its DeviceID, the
// operator token's (DeviceID "") apart, so no device can replace another
// principal's entry by choosing its instance id. Host is the name the client gave itself (client.displayName, else
// client.id); IP the address of its newest connection. Caps and Commands
// are those of a node connection (commands: declared ∩ approved); empty
// for operators. LastInputSeconds is what the client last reported with
// presence.update (seconds since the person's last input on that device),
// absent until it reports. TS is the time of the last change in Unix
// milliseconds; for a disconnected entry, when its last connection ended
// (it expires TTL after that).
//
// One device's connections with the same instance id are one entry (the
// seed's rule; a paired phone's UI and node connections): Roles lists the
// roles of its connections (sorted, distinct); Role, Mode, Caps and
// Commands are those of its newest node connection when it has one (what
// the Nodes panel is about), else of its newest connection; the other
// fields are the newest connection's.
type PresenceEntry struct {
	InstanceID       string   `json:"instanceId"`
	Host             string   `json:"host"`
	IP               string   `json:"ip"`
	Version          string   `json:"version"`
	Platform         string   `json:"platform"`
	Mode             string   `json:"mode"`
	Role             string   `json:"role"`
	Roles            []string `json:"roles"`
	DeviceID         string   `json:"deviceId,omitempty"`
	Caps             []string `json:"caps"`
	Commands         []string `json:"commands"`
	Connected        bool     `json:"connected"`
	LastInputSeconds *float64 `json:"lastInputSeconds,omitempty"`
	TS               int64    `json:"ts"`
}

// PresenceOptions configure a [Presence] table. Zero values take the
// defaults.
type PresenceOptions struct {
	// TTL: how long a disconnected entry stays; default DefaultPresenceTTL.
	TTL time.Duration
	// Max entries; default DefaultPresenceMax.
	Max int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Presence is the presence table: one entry per client instance, each
// tracking the connections that carry it. An entry is connected while any
// of them is open; it expires TTL after the last one closed. When an
// insert takes the table over Max, the oldest entry goes: the disconnected
// entry that ended longest ago, else (all connected) the connected entry
// that changed longest ago. Safe for concurrent use.
type Presence struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[string]*presenceItem
	seq     uint64 // insertion order, breaks ties between equal timestamps
}

type presenceItem struct {
	e     PresenceEntry           // the merged entry (see PresenceEntry)
	conns map[string]presenceConn // the open connections carrying it, by connId
	at    time.Time               // last change (connected) or end of the last connection
	seq   uint64
}

// presenceConn is what one connection said of itself; seq orders the
// connections of an entry (higher = newer).
type presenceConn struct {
	e   PresenceEntry
	seq uint64
}

// merge recomputes it.e from its open connections (no-op without any: a
// disconnected entry keeps what its last connections said).
func (it *presenceItem) merge() {
	var newest, node *presenceConn
	roles := []string{}
	for _, c := range it.conns {
		c := c
		if newest == nil || c.seq > newest.seq {
			newest = &c
		}
		if c.e.Role == "node" && (node == nil || c.seq > node.seq) {
			node = &c
		}
		if !slices.Contains(roles, c.e.Role) {
			roles = append(roles, c.e.Role)
		}
	}
	if newest == nil {
		return
	}
	e := newest.e
	if node != nil {
		e.Role, e.Mode, e.Caps, e.Commands = node.e.Role, node.e.Mode, node.e.Caps, node.e.Commands
	}
	sort.Strings(roles)
	e.Roles = roles
	e.LastInputSeconds, e.Connected, e.TS = it.e.LastInputSeconds, it.e.Connected, it.e.TS
	it.e = e
}

// NewPresence returns an empty table with o's defaults.
func NewPresence(o PresenceOptions) *Presence {
	if o.TTL <= 0 {
		o.TTL = DefaultPresenceTTL
	}
	if o.Max <= 0 {
		o.Max = DefaultPresenceMax
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Presence{ttl: o.TTL, max: o.Max, now: o.Now, entries: map[string]*presenceItem{}}
}

// Seen records that connection connID carries instance e.InstanceID of
// principal e.DeviceID (an empty InstanceID is connID): the entry is
// created or connID's part of it replaced by e (the entry merges its
// connections, see PresenceEntry), it is connected, and its TS is now. A
// nil e.LastInputSeconds keeps the value already known. Expired
// entries go first; a new entry over Max drops the oldest. Seen returns
// the entry's key (for Input and Gone).
func (p *Presence) Seen(connID string, e PresenceEntry) string {
	if e.InstanceID == "" {
		e.InstanceID = connID
	}
	key := "local/" + e.InstanceID
	if e.DeviceID != "" {
		key = "device:" + e.DeviceID + "/" + e.InstanceID
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(now)
	it := p.entries[key]
	if it == nil {
		p.seq++
		it = &presenceItem{conns: map[string]presenceConn{}, seq: p.seq}
		p.entries[key] = it
	}
	if e.LastInputSeconds != nil {
		v := *e.LastInputSeconds
		it.e.LastInputSeconds = &v
	}
	e.Caps, e.Commands = nonNil(e.Caps), nonNil(e.Commands)
	p.seq++
	it.conns[connID] = presenceConn{e: e, seq: p.seq}
	it.e.Connected, it.e.TS, it.at = true, now.UnixMilli(), now
	it.merge()
	for len(p.entries) > p.max {
		p.dropOldestLocked(key)
	}
	return key
}

// Input records lastInputSeconds for the entry of instance key carried by
// connID (nil: unknown, the entry has none). It reports false when there
// is no such entry (it expired, was dropped for space, or connID does not
// carry it).
func (p *Presence) Input(key, connID string, lastInputSeconds *float64) bool {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(now)
	it := p.entries[key]
	if it == nil {
		return false
	}
	if _, ok := it.conns[connID]; !ok {
		return false
	}
	var v *float64
	if lastInputSeconds != nil {
		x := *lastInputSeconds
		v = &x
	}
	it.e.LastInputSeconds, it.e.TS, it.at = v, now.UnixMilli(), now
	return true
}

// Gone records that connection connID of instance key ended. When it was
// the entry's last connection the entry becomes disconnected with TS now
// (it expires TTL later). It reports whether the table changed.
func (p *Presence) Gone(key, connID string) bool {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	expired := p.expireLocked(now)
	it := p.entries[key]
	if it == nil {
		return expired > 0
	}
	if _, ok := it.conns[connID]; !ok {
		return expired > 0
	}
	delete(it.conns, connID)
	if len(it.conns) == 0 {
		it.e.Connected, it.e.TS, it.at = false, now.UnixMilli(), now
	} else {
		it.e.TS, it.at = now.UnixMilli(), now
		it.merge()
	}
	return true
}

// Expire removes the disconnected entries older than TTL and returns how
// many went.
func (p *Presence) Expire() int {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expireLocked(now)
}

// NextExpiry is when the next disconnected entry expires (zero when none
// is disconnected).
func (p *Presence) NextExpiry() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var next time.Time
	for _, it := range p.entries {
		if len(it.conns) == 0 {
			if at := it.at.Add(p.ttl); next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return next
}

// List returns the live entries, newest change first (ties by instance
// id, then device id), as copies the caller may keep.
func (p *Presence) List() []PresenceEntry {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(now)
	out := make([]PresenceEntry, 0, len(p.entries))
	for _, it := range p.entries {
		e := it.e
		e.Caps, e.Commands, e.Roles = slices.Clone(e.Caps), slices.Clone(e.Commands), slices.Clone(e.Roles)
		if e.LastInputSeconds != nil {
			v := *e.LastInputSeconds
			e.LastInputSeconds = &v
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TS != out[j].TS {
			return out[i].TS > out[j].TS
		}
		if out[i].InstanceID != out[j].InstanceID {
			return out[i].InstanceID < out[j].InstanceID
		}
		return out[i].DeviceID < out[j].DeviceID
	})
	return out
}

// Len is the number of entries (expired ones included until the next
// call that expires them).
func (p *Presence) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.entries)
}

func (p *Presence) expireLocked(now time.Time) int {
	n := 0
	for k, it := range p.entries {
		if len(it.conns) == 0 && !now.Before(it.at.Add(p.ttl)) {
			delete(p.entries, k)
			n++
		}
	}
	return n
}

// dropOldestLocked removes the oldest entry other than keep: disconnected
// entries before connected ones, then by time of the last change, then
// by insertion order.
func (p *Presence) dropOldestLocked(keep string) {
	var victim string
	var v *presenceItem
	older := func(a, b *presenceItem) bool {
		ac, bc := len(a.conns) > 0, len(b.conns) > 0
		if ac != bc {
			return !ac
		}
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		return a.seq < b.seq
	}
	for k, it := range p.entries {
		if k == keep {
			continue
		}
		if v == nil || older(it, v) {
			victim, v = k, it
		}
	}
	if v == nil {
		return
	}
	delete(p.entries, victim)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}
