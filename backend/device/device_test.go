package device_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/device"
)

var now = time.Date(2026, 12, 1, 23, 30, 0, 0, time.UTC)

const (
	gwA   = "aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11"
	gwB   = "bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22bb22"
	nonce = "n-6f1d2c"
)

// claim is the connect request's own fields, as the gateway reads them.
func claim() device.Payload {
	return device.Payload{Version: 2, ClientID: "atrium-phone", Mode: "webchat", Role: "operator",
		Scopes: []string{"operator.read", "operator.write"}, Token: ""}
}

func expect() device.Expect {
	return device.Expect{GatewayID: gwA, Nonce: nonce, Now: now}
}

// signed is what an honest device sends to gateway A for claim(), signed at now.
func signed(t *testing.T, k *device.PrivateKey, mut func(*device.Payload)) device.Proof {
	t.Helper()
	p := claim()
	p.GatewayID, p.Nonce, p.SignedAtMs = gwA, nonce, now.UnixMilli()
	if mut != nil {
		mut(&p)
	}
	pr, err := k.SignConnect(p)
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

func TestVerifyConnect(t *testing.T) {
	for _, alg := range []device.Algorithm{device.Ed25519, device.ECDSAP256} {
		k, err := device.GenerateKey(alg)
		if err != nil {
			t.Fatal(err)
		}
		other, _ := device.GenerateKey(alg)
		cases := []struct {
			name  string
			proof func() device.Proof
			claim func(*device.Payload)
			want  func(*device.Expect)
			err   error
		}{
			{name: "honest", proof: func() device.Proof { return signed(t, k, nil) }},
			{name: "skew 9m59s late", proof: func() device.Proof { return signed(t, k, nil) },
				want: func(e *device.Expect) { e.Now = now.Add(10*time.Minute - time.Second) }},
			{name: "replayed 11 minutes later", proof: func() device.Proof { return signed(t, k, nil) },
				want: func(e *device.Expect) { e.Now = now.Add(11 * time.Minute) }, err: device.ErrStaleSignature},
			{name: "signed in the future", proof: func() device.Proof { return signed(t, k, nil) },
				want: func(e *device.Expect) { e.Now = now.Add(-11 * time.Minute) }, err: device.ErrStaleSignature},
			{name: "replayed to another gateway", proof: func() device.Proof { return signed(t, k, nil) },
				want: func(e *device.Expect) { e.GatewayID = gwB }, err: device.ErrBadSignature},
			{name: "replayed on a connection with another nonce", proof: func() device.Proof { return signed(t, k, nil) },
				want: func(e *device.Expect) { e.Nonce = "n-other" }, err: device.ErrNonceMismatch},
			{name: "claims the new nonce but signed the old", proof: func() device.Proof {
				pr := signed(t, k, func(p *device.Payload) { p.Nonce = "n-old" })
				pr.Nonce = nonce
				return pr
			}, err: device.ErrBadSignature},
			{name: "no challenge nonce known", proof: func() device.Proof { return signed(t, k, nil) },
				want: func(e *device.Expect) { e.Nonce = "" }, err: device.ErrNonceMismatch},
			{name: "signedAt changed after signing", proof: func() device.Proof {
				pr := signed(t, k, nil)
				pr.SignedAt += 1000
				return pr
			}, err: device.ErrBadSignature},
			{name: "another key than the deviceId", proof: func() device.Proof {
				pr := signed(t, k, nil)
				pr.Key = other.Public()
				return pr
			}, err: device.ErrDeviceIDMismatch},
			{name: "another key with its own id, signature of the first", proof: func() device.Proof {
				pr := signed(t, k, nil)
				pr.Key, pr.ID = other.Public(), other.Public().ID()
				return pr
			}, err: device.ErrBadSignature},
			{name: "tampered scopes", proof: func() device.Proof { return signed(t, k, nil) },
				claim: func(p *device.Payload) { p.Scopes = append(p.Scopes, "operator.admin") }, err: device.ErrBadSignature},
			{name: "scopes reordered", proof: func() device.Proof { return signed(t, k, nil) },
				claim: func(p *device.Payload) { p.Scopes = []string{"operator.write", "operator.read"} }, err: device.ErrBadSignature},
			{name: "role changed to node", proof: func() device.Proof { return signed(t, k, nil) },
				claim: func(p *device.Payload) { p.Role = "node" }, err: device.ErrBadSignature},
			{name: "another client id", proof: func() device.Proof { return signed(t, k, nil) },
				claim: func(p *device.Payload) { p.ClientID = "atrium-cli" }, err: device.ErrBadSignature},
			{name: "another token", proof: func() device.Proof { return signed(t, k, nil) },
				claim: func(p *device.Payload) { p.Token = "stolen" }, err: device.ErrBadSignature},
			{name: "v1 signature where v2 is required", proof: func() device.Proof {
				return signed(t, k, func(p *device.Payload) { p.Version = 1 })
			}, claim: func(p *device.Payload) { p.Version = 1 }, err: device.ErrOldVersion},
			{name: "v1 allowed, then verified as v1", proof: func() device.Proof {
				return signed(t, k, func(p *device.Payload) { p.Version = 1 })
			}, claim: func(p *device.Payload) { p.Version = 1 }, want: func(e *device.Expect) { e.AllowV1 = true }},
			{name: "v2 signature presented as v1", proof: func() device.Proof { return signed(t, k, nil) },
				claim: func(p *device.Payload) { p.Version = 1 }, want: func(e *device.Expect) { e.AllowV1 = true }, err: device.ErrBadSignature},
			{name: "signature truncated", proof: func() device.Proof {
				pr := signed(t, k, nil)
				pr.Signature = pr.Signature[:63]
				return pr
			}, err: device.ErrBadSignature},
			{name: "signature zero", proof: func() device.Proof {
				pr := signed(t, k, nil)
				pr.Signature = make([]byte, 64)
				return pr
			}, err: device.ErrBadSignature},
			{name: "no key", proof: func() device.Proof {
				pr := signed(t, k, nil)
				pr.Key = device.PublicKey{}
				return pr
			}, err: device.ErrBadPublicKey},
			{name: "separator in client id", proof: func() device.Proof { return signed(t, k, nil) },
				claim: func(p *device.Payload) { p.ClientID = "atrium|phone" }, err: device.ErrBadField},
		}
		for _, c := range cases {
			t.Run(string(alg)+"/"+c.name, func(t *testing.T) {
				cl, w := claim(), expect()
				if c.claim != nil {
					c.claim(&cl)
				}
				if c.want != nil {
					c.want(&w)
				}
				id, err := device.VerifyConnect(c.proof(), cl, w)
				if c.err == nil {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if id != k.Public().ID() {
						t.Fatalf("id %s, want %s", id, k.Public().ID())
					}
					return
				}
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				if id != "" {
					t.Fatalf("refused proof still returned id %q", id)
				}
			})
		}
	}
}

func TestPayloadBytes(t *testing.T) {
	p := device.Payload{Version: 2, GatewayID: "gw", DeviceID: "dev", ClientID: "cli", Mode: "node", Role: "node",
		Scopes: []string{"a", "b"}, SignedAtMs: 1764631800000, Token: "tok", Nonce: "n1"}
	b, err := p.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "v2|gw|dev|cli|node|node|a,b|1764631800000|tok|n1"; got != want {
		t.Fatalf("v2 payload %q, want %q", got, want)
	}
	p.Version, p.Scopes, p.Token = 1, nil, ""
	b, _ = p.Bytes()
	if got, want := string(b), "v1|dev|cli|node|node||1764631800000||n1"; got != want {
		t.Fatalf("v1 payload %q, want %q", got, want)
	}

	bad := []struct {
		name string
		mut  func(*device.Payload)
	}{
		{"version 0", func(p *device.Payload) { p.Version = 0 }},
		{"version 3", func(p *device.Payload) { p.Version = 3 }},
		{"v2 without gateway", func(p *device.Payload) { p.GatewayID = "" }},
		{"gateway with separator", func(p *device.Payload) { p.GatewayID = "a|b" }},
		{"empty device", func(p *device.Payload) { p.DeviceID = "" }},
		{"empty client", func(p *device.Payload) { p.ClientID = "" }},
		{"empty role", func(p *device.Payload) { p.Role = "" }},
		{"empty nonce", func(p *device.Payload) { p.Nonce = "" }},
		{"separator in mode", func(p *device.Payload) { p.Mode = "a|b" }},
		{"separator in token", func(p *device.Payload) { p.Token = "t|n2" }},
		{"separator in nonce", func(p *device.Payload) { p.Nonce = "n|x" }},
		{"comma in a scope", func(p *device.Payload) { p.Scopes = []string{"a,b"} }},
		{"pipe in a scope", func(p *device.Payload) { p.Scopes = []string{"a|b"} }},
		{"empty scope", func(p *device.Payload) { p.Scopes = []string{"a", ""} }},
	}
	for _, c := range bad {
		q := device.Payload{Version: 2, GatewayID: "gw", DeviceID: "dev", ClientID: "cli", Role: "node", Nonce: "n1"}
		c.mut(&q)
		if _, err := q.Bytes(); !errors.Is(err, device.ErrBadField) {
			t.Errorf("%s: err = %v, want ErrBadField", c.name, err)
		}
	}
}

func TestDeviceIDIsSHA256OfRawKey(t *testing.T) {
	for _, alg := range []device.Algorithm{device.Ed25519, device.ECDSAP256} {
		k, _ := device.GenerateKey(alg)
		sum := sha256.Sum256(k.Public().Raw)
		if got := k.Public().ID(); got != hex.EncodeToString(sum[:]) || len(got) != 64 {
			t.Fatalf("%s: id %q", alg, got)
		}
		wantLen := map[device.Algorithm]int{device.Ed25519: 32, device.ECDSAP256: 65}[alg]
		if len(k.Public().Raw) != wantLen {
			t.Fatalf("%s: raw key %d bytes, want %d", alg, len(k.Public().Raw), wantLen)
		}
		// The wire form round-trips in every base64 variant a browser may use.
		raw := k.Public().Raw
		for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding, base64.RawStdEncoding} {
			pk, err := device.DecodePublicKey(string(alg), enc.EncodeToString(raw))
			if err != nil || pk.ID() != k.Public().ID() {
				t.Fatalf("%s: decode %v", alg, err)
			}
		}
	}
}

// TestRFC8032Vector checks verification against RFC 8032 §7.1 test 1, so the
// wire encoding is the standard one, not merely self-consistent.
func TestRFC8032Vector(t *testing.T) {
	pub, _ := hex.DecodeString("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
	sig, _ := hex.DecodeString("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
	k, err := device.ParsePublicKey(device.Ed25519, pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Verify(nil, sig); err != nil {
		t.Fatalf("RFC 8032 vector refused: %v", err)
	}
	if err := k.Verify([]byte("x"), sig); !errors.Is(err, device.ErrBadSignature) {
		t.Fatalf("other message: %v", err)
	}
}

// TestP256SignatureFormat: a signature is IEEE P1363 r‖s (what WebCrypto
// produces), verifiable by the standard library once split; ASN.1 DER, what
// Go and OpenSSL produce by default, is refused.
func TestP256SignatureFormat(t *testing.T) {
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	raw, _ := priv.PublicKey.Bytes()
	k, err := device.ParsePublicKey(device.ECDSAP256, raw)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("v2|gw|dev|cli||node||1|x|n")
	h := sha256.Sum256(msg)
	r, s, _ := ecdsa.Sign(rand.Reader, priv, h[:])
	p1363 := make([]byte, 64)
	r.FillBytes(p1363[:32])
	s.FillBytes(p1363[32:])
	if err := k.Verify(msg, p1363); err != nil {
		t.Fatalf("P1363 signature refused: %v", err)
	}
	der, _ := ecdsa.SignASN1(rand.Reader, priv, h[:])
	if err := k.Verify(msg, der); !errors.Is(err, device.ErrBadSignature) {
		t.Fatalf("DER signature: err = %v, want ErrBadSignature", err)
	}
	// A signature by the same key with the other algorithm's verifier.
	ed, _ := device.GenerateKey(device.Ed25519)
	if err := ed.Public().Verify(msg, p1363); !errors.Is(err, device.ErrBadSignature) {
		t.Fatalf("P-256 signature under an Ed25519 key: %v", err)
	}
}

func TestParsePublicKeyRefuses(t *testing.T) {
	ed, _, _ := ed25519.GenerateKey(rand.Reader)
	p, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	unc, _ := p.PublicKey.Bytes()
	offCurve := append([]byte(nil), unc...)
	offCurve[64] ^= 1
	compressed := elliptic.MarshalCompressed(elliptic.P256(), p.PublicKey.X, p.PublicKey.Y)
	cases := []struct {
		name string
		alg  string
		b64  string
		err  error
	}{
		{"ed25519 31 bytes", "ed25519", base64.RawURLEncoding.EncodeToString(ed[:31]), device.ErrBadPublicKey},
		{"ed25519 key as P-256", "ecdsa-p256", base64.RawURLEncoding.EncodeToString(ed), device.ErrBadPublicKey},
		{"P-256 key as ed25519", "", base64.RawURLEncoding.EncodeToString(unc), device.ErrBadPublicKey},
		{"P-256 point off the curve", "ecdsa-p256", base64.RawURLEncoding.EncodeToString(offCurve), device.ErrBadPublicKey},
		{"P-256 compressed point", "ecdsa-p256", base64.RawURLEncoding.EncodeToString(compressed), device.ErrBadPublicKey},
		{"not base64", "ed25519", "!!!", device.ErrBadPublicKey},
		{"RSA", "rsa", base64.RawURLEncoding.EncodeToString(ed), device.ErrUnsupportedAlgorithm},
		{"case variant", "Ed25519", base64.RawURLEncoding.EncodeToString(ed), device.ErrUnsupportedAlgorithm},
	}
	for _, c := range cases {
		if _, err := device.DecodePublicKey(c.alg, c.b64); !errors.Is(err, c.err) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.err)
		}
	}
	if _, err := device.GenerateKey("rsa"); !errors.Is(err, device.ErrUnsupportedAlgorithm) {
		t.Errorf("GenerateKey(rsa): %v", err)
	}
	if k, err := device.DecodePublicKey("", base64.StdEncoding.EncodeToString(ed)); err != nil || k.Alg != device.Ed25519 {
		t.Errorf("absent algorithm must mean ed25519: %v %v", k.Alg, err)
	}
	// A loaded Ed25519 key (FromEd25519) signs what its public key verifies.
	fk := device.FromEd25519(ed25519.NewKeyFromSeed(make([]byte, 32)))
	sig, _ := fk.Sign([]byte("m"))
	if err := fk.Public().Verify([]byte("m"), sig); err != nil || !strings.HasPrefix(fk.Public().Encode(), "O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik") {
		t.Fatalf("FromEd25519: %v %s", err, fk.Public().Encode())
	}
}
