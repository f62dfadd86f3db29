package nodes

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func keys(l []PresenceEntry) map[string]PresenceEntry {
	m := map[string]PresenceEntry{}
	for _, e := range l {
		m[e.InstanceID] = e
	}
	return m
}

func TestPresenceTTLAfterDisconnect(t *testing.T) {
	c := newClock()
	p := NewPresence(PresenceOptions{Now: c.Now})
	k := p.Seen("conn-1", PresenceEntry{InstanceID: "phone", Host: "Pixel 8", Role: "node", Caps: []string{"location"}})
	anon := p.Seen("conn-2", PresenceEntry{Host: "cli"})
	if anon == k || keys(p.List())["conn-2"].Host != "cli" {
		t.Fatalf("entry without instanceId keyed %q, listed %+v, want its connId as instanceId", anon, p.List())
	}
	c.Add(time.Hour) // connected entries never expire
	if n := p.Expire(); n != 0 || p.Len() != 2 {
		t.Fatalf("expired %d of connected entries, %d left", n, p.Len())
	}
	if !p.Gone(k, "conn-1") {
		t.Fatal("Gone reported no change")
	}
	gone := c.Now()
	e := keys(p.List())["phone"]
	if e.Connected || e.TS != gone.UnixMilli() {
		t.Fatalf("after disconnect: %+v, want connected=false ts=%d", e, gone.UnixMilli())
	}
	if got := p.NextExpiry(); !got.Equal(gone.Add(DefaultPresenceTTL)) {
		t.Fatalf("next expiry %v, want %v", got, gone.Add(DefaultPresenceTTL))
	}
	c.Add(DefaultPresenceTTL - time.Millisecond)
	if _, ok := keys(p.List())["phone"]; !ok {
		t.Fatal("entry expired before its TTL")
	}
	c.Add(time.Millisecond)
	if _, ok := keys(p.List())["phone"]; ok {
		t.Fatal("entry still listed at its TTL")
	}
	if _, ok := keys(p.List())["conn-2"]; !ok {
		t.Fatal("the connected entry went too")
	}
}

func TestPresenceReconnectKeepsOneEntry(t *testing.T) {
	c := newClock()
	p := NewPresence(PresenceOptions{Now: c.Now})
	k := p.Seen("a", PresenceEntry{InstanceID: "laptop", Host: "old name"})
	if !p.Input(k, "a", secs(42)) {
		t.Fatal("Input on a live entry failed")
	}
	// A second connection of the same instance (a reconnect overlapping
	// the old socket) keeps one entry and the reported input.
	if p.Seen("b", PresenceEntry{InstanceID: "laptop", Host: "new name"}) != k {
		t.Fatal("the second connection of an instance got another key")
	}
	p.Gone(k, "a")
	l := p.List()
	if len(l) != 1 || !l[0].Connected || l[0].Host != "new name" || l[0].LastInputSeconds == nil || *l[0].LastInputSeconds != 42 {
		t.Fatalf("list %+v", l)
	}
	if p.Input(k, "a", secs(1)) {
		t.Fatal("a closed connection updated the entry")
	}
	// null: the client no longer knows; the entry says nothing.
	if !p.Input(k, "b", nil) {
		t.Fatal("Input(nil) on a live entry failed")
	}
	if l := p.List(); l[0].LastInputSeconds != nil {
		t.Fatalf("after an unknown input time: %v", *l[0].LastInputSeconds)
	}
	p.Gone(k, "b")
	if l := p.List(); len(l) != 1 || l[0].Connected {
		t.Fatalf("after both closed: %+v", l)
	}
	// Coming back within the TTL revives the same entry.
	c.Add(time.Minute)
	p.Seen("c", PresenceEntry{InstanceID: "laptop"})
	c.Add(DefaultPresenceTTL)
	if l := p.List(); len(l) != 1 || !l[0].Connected {
		t.Fatalf("revived entry: %+v", l)
	}
}

func TestPresenceCapDropsOldest(t *testing.T) {
	c := newClock()
	p := NewPresence(PresenceOptions{Now: c.Now})
	var k200 string
	for i := range 250 {
		k := p.Seen(fmt.Sprintf("c%d", i), PresenceEntry{InstanceID: fmt.Sprintf("n%03d", i)})
		if i == 200 {
			k200 = k
		}
		c.Add(time.Millisecond)
	}
	m := keys(p.List())
	if len(m) != DefaultPresenceMax {
		t.Fatalf("%d entries, want %d", len(m), DefaultPresenceMax)
	}
	for i := range 250 {
		_, ok := m[fmt.Sprintf("n%03d", i)]
		if want := i >= 50; ok != want {
			t.Fatalf("entry n%03d present=%v, want %v (the 50 oldest go)", i, ok, want)
		}
	}
	// A disconnected entry goes before an older connected one.
	p.Gone(k200, "c200")
	p.Seen("new", PresenceEntry{InstanceID: "newest"})
	m = keys(p.List())
	if _, ok := m["n200"]; ok {
		t.Fatal("the disconnected entry was kept over the cap")
	}
	if _, ok := m["n050"]; !ok {
		t.Fatal("the oldest connected entry went although a disconnected one could")
	}
	if _, ok := m["newest"]; !ok || len(m) != DefaultPresenceMax {
		t.Fatalf("new entry missing or size %d", len(m))
	}
}

// TestPresenceKeyedByPrincipal: an instance id is the client's choice, so
// entries are keyed by principal too: two devices (and the operator
// token) with one instance id keep their own entries, and a device's
// later connection never replaces another's.
func TestPresenceKeyedByPrincipal(t *testing.T) {
	p := NewPresence(PresenceOptions{Now: newClock().Now})
	ka := p.Seen("a", PresenceEntry{InstanceID: "x", DeviceID: "dev-a", Host: "phone A"})
	kb := p.Seen("b", PresenceEntry{InstanceID: "x", DeviceID: "dev-b", Host: "phone B"})
	kl := p.Seen("l", PresenceEntry{InstanceID: "x", Host: "desk"})
	if ka == kb || ka == kl || kb == kl {
		t.Fatalf("keys %q %q %q: one shared by two principals", ka, kb, kl)
	}
	hosts := map[string]string{}
	for _, e := range p.List() {
		hosts[e.DeviceID] = e.Host
	}
	if len(hosts) != 3 || hosts["dev-a"] != "phone A" || hosts["dev-b"] != "phone B" || hosts[""] != "desk" {
		t.Fatalf("entries by device %v", hosts)
	}
	if p.Input(ka, "b", secs(1)) || !p.Gone(kb, "b") || p.Gone(ka, "b") {
		t.Fatal("device B's connection reached device A's entry")
	}
}

func secs(v float64) *float64 { return &v }

// One device's connections with one instance id are one entry (issue 24: a
// paired phone's UI and node connections were two rows): the node's caps
// and role survive the UI connection's (re)connect, Roles lists both, and
// the entry stays connected until the last of them ends.
func TestPresenceMergesOneDeviceInstance(t *testing.T) {
	c := newClock()
	p := NewPresence(PresenceOptions{Now: c.Now})
	node := PresenceEntry{InstanceID: "phone-1", Host: "Pixel 8", Role: "node", Mode: "node", DeviceID: "dev-a",
		Caps: []string{"camera"}, Commands: []string{"camera.snap"}}
	ui := PresenceEntry{InstanceID: "phone-1", Host: "Pixel 8", Role: "operator", Mode: "ui", DeviceID: "dev-a"}
	k1 := p.Seen("conn-node", node)
	c.Add(time.Second)
	k2 := p.Seen("conn-ui", ui)
	if k1 != k2 {
		t.Fatalf("keys %q and %q for one device's instance", k1, k2)
	}
	l := p.List()
	if len(l) != 1 {
		t.Fatalf("%d entries for one device's instance, want 1: %+v", len(l), l)
	}
	e := l[0]
	if e.Role != "node" || e.Mode != "node" || fmt.Sprint(e.Caps) != "[camera]" || fmt.Sprint(e.Commands) != "[camera.snap]" ||
		fmt.Sprint(e.Roles) != "[node operator]" || !e.Connected {
		t.Fatalf("merged entry %+v, want the node's role, mode, caps and commands, roles [node operator]", e)
	}
	if !p.Gone(k1, "conn-node") {
		t.Fatal("Gone of the node connection reported no change")
	}
	e = p.List()[0]
	if !e.Connected || e.Role != "operator" || len(e.Caps) != 0 || fmt.Sprint(e.Roles) != "[operator]" {
		t.Fatalf("after the node connection ended: %+v, want the UI connection's entry, connected", e)
	}
	p.Gone(k2, "conn-ui")
	if e = p.List()[0]; e.Connected {
		t.Fatalf("after both ended: %+v, want disconnected", e)
	}
}

// A command line's connection (client.mode "cli") is no presence row,
// while the person's UI and a node are (issue 24: every CLI command added
// an "atrium-cli" row).
func TestPresenceSkipsCommandLine(t *testing.T) {
	f := newFixture(t, Options{})
	ci := func(id, mode string, role string) gateway.ConnInfo {
		return gateway.ConnInfo{ConnID: id, Principal: gateway.Principal{Role: role},
			Client: gateway.ClientInfo{ID: "atrium-" + mode, Mode: mode, InstanceID: id}}
	}
	f.svc.Connected(ci("c-cli", ModeCLI, gateway.RoleOperator))
	f.svc.Connected(ci("c-ui", "ui", gateway.RoleOperator))
	if !f.svc.Input("c-cli", nil) {
		t.Fatal("presence.update of an open CLI connection refused")
	}
	got := keys(f.svc.Presence().List())
	if _, ok := got["c-cli"]; ok || len(got) != 1 {
		t.Fatalf("presence %+v, want only the UI's entry", got)
	}
	f.svc.Disconnected(ci("c-cli", ModeCLI, gateway.RoleOperator))
	if n := len(f.svc.Presence().List()); n != 1 {
		t.Fatalf("%d entries after the CLI left, want 1", n)
	}
}
