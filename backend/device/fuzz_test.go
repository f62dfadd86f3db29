package device_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/device"
)

// FuzzDecodePublicKey feeds any algorithm name and base64 text to the
// public key wire form parser (connect.device.algorithm/publicKey,
// docs/PROTOCOL.md "Device identity"). Properties: a refusal is one of the
// package's sentinel errors; an accepted key has its algorithm's size, its
// Encode form decodes to the same key and id, its id is 64 lowercase hex
// characters, and a signature made of fuzzed bytes never verifies.
func FuzzDecodePublicKey(f *testing.F) {
	f.Add("", "11qYAYKxCrfVS_7TyWQHOg7hcvPaoiMlrwIaaPcHURo", []byte("sig"))
	f.Add("ed25519", "11qYAYKxCrfVS/7TyWQHOg7hcvPaoiMlrwIaaPcHURo=", make([]byte, 64))
	f.Add("ecdsa-p256", "BGsX0fLhLEJH-Lzm5WOkQPJ3A32BLeszoPShOUXYmMKWT-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU", make([]byte, 64))
	f.Add("ecdsa-p256", "BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", []byte{1})
	f.Add("rsa", "!!!", []byte(nil))
	f.Add("Ed25519", "====", []byte(nil))
	f.Fuzz(func(t *testing.T, alg, b64 string, sig []byte) {
		if len(b64) > 4096 {
			return
		}
		k, err := device.DecodePublicKey(alg, b64)
		if err != nil {
			if !errors.Is(err, device.ErrBadPublicKey) && !errors.Is(err, device.ErrUnsupportedAlgorithm) {
				t.Fatalf("DecodePublicKey(%q, %q): unexpected error class %v", alg, b64, err)
			}
			return
		}
		want := map[device.Algorithm]int{device.Ed25519: device.Ed25519KeySize, device.ECDSAP256: device.P256KeySize}[k.Alg]
		if want == 0 || len(k.Raw) != want {
			t.Fatalf("accepted %s key of %d bytes", k.Alg, len(k.Raw))
		}
		id := k.ID()
		if _, err := hex.DecodeString(id); err != nil || len(id) != 64 || strings.ToLower(id) != id {
			t.Fatalf("id %q is not 64 lowercase hex characters", id)
		}
		k2, err := device.DecodePublicKey(string(k.Alg), k.Encode())
		if err != nil || !bytes.Equal(k2.Raw, k.Raw) || k2.ID() != id {
			t.Fatalf("Encode form %q does not round trip: %v", k.Encode(), err)
		}
		if err := k.Verify([]byte("v2|gw|dev|cli||node||1||n"), sig); err == nil {
			t.Fatalf("fuzzed signature %x verified under %s key %q", sig, k.Alg, b64)
		}
	})
}

// FuzzPayloadBytes checks that the signed connect payload (Payload.Bytes)
// can never be read two ways: two payloads that both encode, to the same
// bytes, are the same payload (scopes compared as lists, nil = empty). A
// payload that encodes is also signed and verified by VerifyConnect, and
// verification under another nonce, client or token fails.
func FuzzPayloadBytes(f *testing.F) {
	f.Add(2, "gw", "cli", "node", "node", "a,b", "tok", "n1", 2, "gw", "cli", "node", "node", "a,b", "tok", "n1")
	f.Add(1, "", "atrium-phone", "webchat", "operator", "operator.read,operator.write", "", "n-6f1d2c",
		1, "", "atrium-phone", "webchat", "operator", "operator.read", "operator.write", "n-6f1d2c")
	f.Add(2, "g", "c", "m|x", "r", "", "t", "n", 2, "g", "c", "m", "x|r", "", "t", "n")
	f.Fuzz(func(t *testing.T, v1 int, gw1, cli1, mode1, role1, scopes1, tok1, nonce1 string,
		v2 int, gw2, cli2, mode2, role2, scopes2, tok2, nonce2 string) {
		const dev = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ";")
		}
		p1 := device.Payload{Version: v1, GatewayID: gw1, DeviceID: dev, ClientID: cli1, Mode: mode1, Role: role1,
			Scopes: split(scopes1), SignedAtMs: now.UnixMilli(), Token: tok1, Nonce: nonce1}
		p2 := device.Payload{Version: v2, GatewayID: gw2, DeviceID: dev, ClientID: cli2, Mode: mode2, Role: role2,
			Scopes: split(scopes2), SignedAtMs: now.UnixMilli(), Token: tok2, Nonce: nonce2}
		b1, err1 := p1.Bytes()
		b2, err2 := p2.Bytes()
		for _, err := range []error{err1, err2} {
			if err != nil && !errors.Is(err, device.ErrBadField) {
				t.Fatalf("Bytes: unexpected error class %v", err)
			}
		}
		if err1 == nil && err2 == nil && bytes.Equal(b1, b2) {
			same := p1.Version == p2.Version && p1.ClientID == p2.ClientID && p1.Mode == p2.Mode && p1.Role == p2.Role &&
				slices.Equal(p1.Scopes, p2.Scopes) && p1.Token == p2.Token && p1.Nonce == p2.Nonce &&
				(p1.Version == 1 || p1.GatewayID == p2.GatewayID)
			if !same {
				t.Fatalf("two payloads encode to %q:\n%+v\n%+v", b1, p1, p2)
			}
		}
		if err1 != nil {
			return
		}
		k := device.FromEd25519(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
		p1.DeviceID = k.Public().ID()
		pr, err := k.SignConnect(p1)
		if err != nil {
			t.Fatalf("SignConnect of an encodable payload: %v", err)
		}
		want := device.Expect{GatewayID: gw1, Nonce: nonce1, Now: now, AllowV1: true}
		claim := device.Payload{Version: p1.Version, ClientID: cli1, Mode: mode1, Role: role1, Scopes: p1.Scopes, Token: tok1}
		if id, err := device.VerifyConnect(pr, claim, want); err != nil || id != p1.DeviceID {
			t.Fatalf("VerifyConnect of an honest proof: id %q, %v", id, err)
		}
		other := want
		other.Nonce = nonce1 + "x"
		pr2 := pr
		pr2.Nonce = other.Nonce
		if _, err := device.VerifyConnect(pr2, claim, other); !errors.Is(err, device.ErrBadSignature) {
			t.Fatalf("proof replayed under another nonce: %v", err)
		}
		c2 := claim
		c2.Token = tok1 + "x"
		if _, err := device.VerifyConnect(pr, c2, want); !errors.Is(err, device.ErrBadSignature) {
			t.Fatalf("proof for another token: %v", err)
		}
		c3 := claim
		c3.ClientID = cli1 + "x"
		if _, err := device.VerifyConnect(pr, c3, want); !errors.Is(err, device.ErrBadSignature) {
			t.Fatalf("proof for another client: %v", err)
		}
	})
}

// TestSmallOrderKeysRefused: an Ed25519 key of small order is refused (for
// the identity point R = identity, S = 0 verifies every message; the
// standard library verifies against it), and real keys are not.
func TestSmallOrderKeysRefused(t *testing.T) {
	identity := make([]byte, 32)
	identity[0] = 1
	universal := make([]byte, 64)
	universal[0] = 1
	if !ed25519.Verify(identity, []byte("any message"), universal) {
		t.Fatal("the standard library no longer verifies the identity key's universal signature: this test needs a look")
	}
	minusOne := bytes.Repeat([]byte{0xff}, 32) // y = p−1 = −1, order 2
	minusOne[0], minusOne[31] = 0xec, 0x7f
	zero, zeroNeg := make([]byte, 32), make([]byte, 32) // y = 0, order 4
	zeroNeg[31] = 0x80
	for name, raw := range map[string][]byte{"identity": identity, "order 2": minusOne, "order 4": zero, "order 4, other sign": zeroNeg} {
		if _, err := device.ParsePublicKey(device.Ed25519, raw); !errors.Is(err, device.ErrBadPublicKey) {
			t.Errorf("%s: err = %v, want ErrBadPublicKey", name, err)
		}
	}
	for range 50 {
		k, err := device.GenerateKey(device.Ed25519)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := device.ParsePublicKey(device.Ed25519, k.Public().Raw); err != nil {
			t.Fatalf("a generated key is refused: %v", err)
		}
	}
}
