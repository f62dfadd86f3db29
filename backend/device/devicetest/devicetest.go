// Package devicetest plays a device against a gateway in tests: a device
// key pair (NewKey), what a phone or a node host says about itself
// (Phone, NodeHost), and the signed device connect (Dial: the proof for
// the gateway id, closed when the test ends). It is imported by tests
// only.
//
//	key := devicetest.NewKey(t, device.Ed25519)
//	c, err := devicetest.Dial(ctx, t, key, gateway.ClientOptions{URL: url, GatewayID: id, SetupCode: code})
package devicetest

import (
	"context"
	"testing"

	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// NewKey returns a new device key pair of alg (device.Ed25519,
// device.ECDSAP256); t fails when it cannot be made.
func NewKey(t testing.TB, alg device.Algorithm) *device.PrivateKey {
	t.Helper()
	k, err := device.GenerateKey(alg)
	if err != nil {
		t.Fatalf("device key (%s): %v", alg, err)
	}
	return k
}

// Phone is what the tests' phone says about itself in its connect (an
// Android phone offering node commands, shown as "Pixel 8").
func Phone() gateway.ClientInfo {
	return gateway.ClientInfo{ID: "atrium-phone", Version: "test", Platform: "android", Mode: "node", DisplayName: "Pixel 8"}
}

// NodeHost is what the tests' `atrium node` host says about itself (a
// Linux node host shown as "build box").
func NodeHost() gateway.ClientInfo {
	return gateway.ClientInfo{ID: "node-host", Platform: "linux", Mode: "node", DisplayName: "build box"}
}

// Dial connects to the gateway as the device holding key: gateway.Dial
// with o.Device = key, so that the connect carries the device's signed
// proof for o.GatewayID (which, like o.URL, the caller sets); o.Client
// defaults to Phone(). A connection that succeeds is closed when t ends;
// the error is gateway.Dial's (a refusal is the server's *gateway.Error, errors.As).
func Dial(ctx context.Context, t testing.TB, key *device.PrivateKey, o gateway.ClientOptions) (*gateway.Client, error) {
	t.Helper()
	o.Device = key
	if o.Client.ID == "" {
		o.Client = Phone()
	}
	c, err := gateway.Dial(ctx, o)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}
