package atrium

// The adversarial suite, issue 21 item 3: anyone on the LAN could block all
// pairing. Wrong setup codes from 15 addresses filled a global cap of 50
// failures, after which the right code from a new address was refused for
// 10 minutes. Here the real app, bound to 127.0.0.2 (TLS), is flooded over
// WSS from 16 other loopback addresses (16 machines on the LAN), each up to
// its own limit.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/devices"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/pairing"
)

// TestAdversarialPairingFlood: 16 addresses × 5 wrong codes (each
// address's limit) lock the code that was live during the flood after
// pairing.DefaultMaxWrongTries of them — the person is told at once
// (device.pair.code.locked with its id; the phone is refused with
// code_locked and "make a new one"), audited — and every attacker address
// is then refused before its code is looked at, even the right one; and
// the person's phone, from a new address, pairs with a fresh code.
func TestAdversarialPairingFlood(t *testing.T) {
	k := startAttack(t)
	var during devices.PairCode
	must(t, k.admin.Call(k.ctx, "device.pair.code", map[string]any{}, &during))
	if during.CodeID == "" || during.MaxWrongTries != pairing.DefaultMaxWrongTries {
		t.Fatalf("device.pair.code: codeId %q, maxWrongTries %d", during.CodeID, during.MaxWrongTries)
	}
	evCtx, cancel := context.WithTimeout(k.ctx, 30*time.Second) // a bound of its own: the rest still runs without the event
	defer cancel()
	locked := firstEvent(evCtx, k.admin, devices.EventCodeLocked)

	const addrs = 16
	attacker := func(i int) string { return fmt.Sprintf("127.0.0.%d", 100+i) }
	wrong := 0 // wrong codes refused as anything but code_invalid
	var firstWrong error
	for a := range addrs {
		for g := range pairing.DefaultPerIPFailures {
			_, err := k.dev(attacker(a), newDeviceKey(t), gateway.ClientOptions{SetupCode: fmt.Sprintf("ZZZZ-%02d%02d", a, g)})
			if ge := gwError(err); ge == nil || ge.Code != gateway.CodeUnauthorized || ge.Details["reason"] != "code_invalid" {
				if wrong++; firstWrong == nil {
					firstWrong = fmt.Errorf("address %s, guess %d: %w", attacker(a), g+1, err)
				}
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d wrong codes were not refused as code_invalid (each address is within its own limit); the first: %v",
			wrong, addrs*pairing.DefaultPerIPFailures, firstWrong)
	}

	// The code live during the flood is locked, and the person knows it.
	select {
	case ev := <-locked:
		var p struct {
			CodeID     string
			WrongTries int
		}
		must(t, json.Unmarshal(ev.Payload, &p))
		if p.CodeID != during.CodeID || p.WrongTries != pairing.DefaultMaxWrongTries {
			t.Errorf("%s %+v, want code %s after %d", devices.EventCodeLocked, p, during.CodeID, pairing.DefaultMaxWrongTries)
		}
	case <-evCtx.Done():
		t.Errorf("no %s for the code live during the flood", devices.EventCodeLocked)
	}
	es, err := k.a.Audit.Tail(10, audit.Filter{Operation: "device.pair.code.locked"})
	must(t, err)
	if len(es) != 1 || !strings.Contains(es[0].Target, during.CodeID) || es[0].Result != audit.Denied {
		t.Errorf("audit of the lock: %+v, want one entry naming code %s", es, during.CodeID)
	}
	before := len(k.denied())
	late := newDeviceKey(t)
	_, err = k.dev("127.0.0.60", late, gateway.ClientOptions{SetupCode: during.Display})
	refused(t, "the locked code from a new address", err, gateway.CodeUnauthorized, "code_locked",
		fmt.Sprintf("locked after %d wrong tries; make a new one", pairing.DefaultMaxWrongTries))
	k.audited("the locked code", before, "connect", "device:"+late.Public().ID())

	// A fresh code: every attacker address is past its limit, so even the
	// right code is refused there before it is looked at, and those tries
	// count against nothing.
	fresh, _ := k.code()
	for a := range addrs {
		_, err := k.dev(attacker(a), newDeviceKey(t), gateway.ClientOptions{SetupCode: fresh})
		refused(t, "the fresh code from attacker "+attacker(a), err, gateway.CodeUnauthorized, "rate_limited", "too many wrong setup codes")
	}

	// The person's phone, from a new address, pairs with the fresh code.
	phone := newDeviceKey(t)
	p, err := k.dev("127.0.0.61", phone, gateway.ClientOptions{SetupCode: fresh, Role: gateway.RoleNode, Caps: []string{"system"},
		Commands: []string{"location.get"}})
	if err != nil {
		t.Fatalf("the person's phone with a fresh code after the flood: %v", err)
	}
	if a := p.Auth(); a.Status != gateway.AuthPending || !slices.Contains(k.pending(), phone.Public().ID()) {
		t.Fatalf("the phone's hello-ok %+v, pending %v", a, k.pending())
	}
	must(t, k.admin.Call(k.ctx, "device.pair.approve", map[string]any{"requestId": p.Auth().RequestID}, nil))
	var res struct {
		Decision     string
		DeviceTokens map[string]string
	}
	must(t, json.Unmarshal(waitEvent(k.ctx, t, p, devices.EventPairResolved), &res))
	if res.Decision != "approved" || res.DeviceTokens[gateway.RoleNode] == "" {
		t.Fatalf("device.pair.resolved %+v", res)
	}
	n := k.mustDev("127.0.0.61", phone, gateway.ClientOptions{Role: gateway.RoleNode, DeviceToken: res.DeviceTokens[gateway.RoleNode],
		Caps: []string{"system"}, Commands: []string{"location.get"}})
	if a := n.Auth(); a.Status != gateway.AuthPaired || a.Role != gateway.RoleNode {
		t.Fatalf("the paired phone's hello-ok %+v", a)
	}
}
