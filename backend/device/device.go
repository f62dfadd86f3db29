// Package device is the identity of a device that joins Atrium (a phone's
// browser, `atrium node` on another computer; SPEC §7, issue 16 item 2):
// its public key, its deviceId, and the signature its `connect` request
// carries so that the gateway knows the request comes from the holder of the
// key, now, for this gateway and this connection.
//
// # Keys and their wire encoding
//
// Two algorithms are accepted; the algorithm travels beside the key
// (connect.device.algorithm, absent = "ed25519") and is recorded with the
// pairing:
//
//   - "ed25519" (Ed25519, RFC 8032): the public key is the raw 32 bytes, the
//     signature the 64 bytes of RFC 8032. WebCrypto: generateKey({name:
//     "Ed25519"}), exportKey("raw"), sign({name: "Ed25519"}).
//   - "ecdsa-p256" (ECDSA over NIST P-256 with SHA-256), for browsers that
//     lack Ed25519: the public key is the 65-byte uncompressed point
//     0x04‖X‖Y (SEC 1 §2.3.3, what WebCrypto's exportKey("raw") gives for an
//     ECDSA key); the signature is IEEE P1363 r‖s, 32 + 32 bytes big-endian,
//     which is what WebCrypto's sign({name: "ECDSA", hash: "SHA-256"})
//     returns (not ASN.1 DER). DER signatures are refused.
//
// In JSON both the key and the signature are base64 (URL-safe or standard
// alphabet, padding optional; see DecodeBase64). A key of the wrong length,
// a P-256 point that is not on the curve, or an Ed25519 point of small
// order (for the identity point one fixed signature verifies every message)
// is ErrBadPublicKey.
//
// # deviceId
//
// deviceId = lowercase hex SHA-256 of the raw public key bytes above (64 hex
// characters). The two encodings have different lengths, so no key of one
// algorithm can share an id with a key of the other.
//
// # The signed payload
//
// The device signs the UTF-8 bytes of Payload.Bytes: fields joined by "|",
// see Payload. Version 1 is SPEC §7's; version 2 (planned for pairing,
// docs/PROTOCOL.md) adds the gateway's id so a signature made for one gateway
// is refused by every other. The gateway never trusts the client for the
// fields it knows itself: it builds the payload from its own gateway id and
// the nonce it sent in connect.challenge, and from the connect request's
// client, role and scopes, then verifies (VerifyConnect).
//
// ECDSA signatures are malleable ((r, n−s) is valid too); nothing here relies
// on a signature being unique: replays are stopped by the nonce, the time
// window and the gateway id, not by remembering signatures.
package device

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Algorithm names a device key's algorithm as it travels on the wire and is
// stored with a pairing.
type Algorithm string

// The accepted algorithms (see the package comment for their encodings).
const (
	Ed25519   Algorithm = "ed25519"
	ECDSAP256 Algorithm = "ecdsa-p256"
)

// Sizes of the wire encodings, in bytes.
const (
	Ed25519KeySize = ed25519.PublicKeySize // 32
	P256KeySize    = 65                    // 0x04‖X‖Y
	SignatureSize  = 64                    // Ed25519, and P-256 r‖s
)

// DefaultMaxSkew is how far signedAtMs may be from the gateway's clock, either
// way (SPEC §7: ±10 min).
const DefaultMaxSkew = 10 * time.Minute

// Errors. VerifyConnect and the parsers return errors that wrap exactly one
// of these (test with errors.Is).
var (
	// ErrUnsupportedAlgorithm: the algorithm is neither "ed25519" nor
	// "ecdsa-p256".
	ErrUnsupportedAlgorithm = errors.New("unsupported device key algorithm")
	// ErrBadPublicKey: undecodable, wrong length, not a point on P-256, or
	// an Ed25519 point of small order.
	ErrBadPublicKey = errors.New("bad device public key")
	// ErrDeviceIDMismatch: the deviceId claimed is not the SHA-256 of the key.
	ErrDeviceIDMismatch = errors.New("device id does not match the public key")
	// ErrBadSignature: undecodable, wrong length, or not a valid signature by
	// the key over the payload the gateway expects (another gateway's id,
	// another client, role, scopes, token or time all end here).
	ErrBadSignature = errors.New("bad device signature")
	// ErrStaleSignature: signedAtMs is further from the gateway's clock than
	// the allowed skew (a replay later, or a wrong clock).
	ErrStaleSignature = errors.New("device signature is stale or from the future")
	// ErrNonceMismatch: the nonce the device says it signed is not the one
	// this connection's connect.challenge sent.
	ErrNonceMismatch = errors.New("device signature nonce does not match the challenge")
	// ErrBadField: a payload field contains the separator "|" (or a scope
	// contains ","), is empty where it must not be, or the version is
	// unknown; such a payload could be read two ways and is never signed or
	// verified.
	ErrBadField = errors.New("bad signed payload field")
	// ErrOldVersion: a version 1 payload where the gateway requires version 2.
	ErrOldVersion = errors.New("device signature payload version too old")
)

// PublicKey is a device's public key: its algorithm and its raw wire bytes.
// Obtain one from ParsePublicKey or DecodePublicKey, which validate it.
type PublicKey struct {
	Alg Algorithm
	Raw []byte // 32 bytes (Ed25519) or 65 bytes (P-256 uncompressed)

	ec *ecdsa.PublicKey // parsed P-256 key, nil for Ed25519
}

// ParseAlgorithm maps the wire name to an Algorithm; "" means Ed25519 (the
// default when connect.device.algorithm is absent). Errors:
// ErrUnsupportedAlgorithm.
func ParseAlgorithm(name string) (Algorithm, error) {
	switch Algorithm(name) {
	case "", Ed25519:
		return Ed25519, nil
	case ECDSAP256:
		return ECDSAP256, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnsupportedAlgorithm, name)
}

// ParsePublicKey validates raw as a key of alg. Errors:
// ErrUnsupportedAlgorithm, ErrBadPublicKey.
func ParsePublicKey(alg Algorithm, raw []byte) (PublicKey, error) {
	switch alg {
	case Ed25519:
		if len(raw) != Ed25519KeySize {
			return PublicKey{}, fmt.Errorf("%w: ed25519 key is %d bytes, want %d", ErrBadPublicKey, len(raw), Ed25519KeySize)
		}
		if smallOrder(raw) {
			return PublicKey{}, fmt.Errorf("%w: ed25519 key is a point of small order", ErrBadPublicKey)
		}
		return PublicKey{Alg: alg, Raw: append([]byte(nil), raw...)}, nil
	case ECDSAP256:
		if len(raw) != P256KeySize || raw[0] != 4 {
			return PublicKey{}, fmt.Errorf("%w: P-256 key must be the %d-byte uncompressed point", ErrBadPublicKey, P256KeySize)
		}
		ec, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
		if err != nil {
			return PublicKey{}, fmt.Errorf("%w: %v", ErrBadPublicKey, err)
		}
		return PublicKey{Alg: alg, Raw: append([]byte(nil), raw...), ec: ec}, nil
	}
	return PublicKey{}, fmt.Errorf("%w: %q", ErrUnsupportedAlgorithm, alg)
}

// smallOrder reports whether the 32-byte Ed25519 encoding raw (RFC 8032
// §5.1.2: y little-endian, the top bit x's sign) is a point whose order
// divides the cofactor 8. crypto/ed25519 verifies against such a key: for
// the identity point, R = the identity and S = 0 verify every message, so
// anyone could sign for that deviceId. The check maps y to the birationally
// equivalent Montgomery u = (1+y)/(1−y) (RFC 7748 §4.1) and lets X25519,
// whose scalars are multiples of 8, say whether [8·k]P is the identity
// (crypto/ecdh refuses that all-zero result); y = 1 is the identity itself.
func smallOrder(raw []byte) bool {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	be := make([]byte, 32)
	for i := range be {
		be[i] = raw[31-i]
	}
	be[0] &= 0x7f
	y := new(big.Int).Mod(new(big.Int).SetBytes(be), p)
	one := big.NewInt(1)
	den := new(big.Int).Mod(new(big.Int).Sub(one, y), p)
	if den.Sign() == 0 {
		return true
	}
	u := new(big.Int).Add(one, y)
	u.Mul(u, new(big.Int).ModInverse(den, p)).Mod(u, p)
	ub := u.FillBytes(make([]byte, 32))
	for i, j := 0, len(ub)-1; i < j; i, j = i+1, j-1 {
		ub[i], ub[j] = ub[j], ub[i]
	}
	pub, err := ecdh.X25519().NewPublicKey(ub)
	if err != nil {
		return true
	}
	scalar := make([]byte, 32)
	scalar[0] = 9 // any scalar: X25519 clamps it to a multiple of 8
	priv, err := ecdh.X25519().NewPrivateKey(scalar)
	if err != nil {
		return true
	}
	_, err = priv.ECDH(pub)
	return err != nil
}

// DecodePublicKey is ParsePublicKey for the wire form: the algorithm name
// ("" = ed25519) and the key in base64 (DecodeBase64).
func DecodePublicKey(alg, b64 string) (PublicKey, error) {
	a, err := ParseAlgorithm(alg)
	if err != nil {
		return PublicKey{}, err
	}
	raw, err := DecodeBase64(b64)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: %v", ErrBadPublicKey, err)
	}
	return ParsePublicKey(a, raw)
}

// ID is the deviceId: lowercase hex SHA-256 of k.Raw (64 characters).
func (k PublicKey) ID() string {
	sum := sha256.Sum256(k.Raw)
	return hex.EncodeToString(sum[:])
}

// Encode is the key's base64 wire form (URL-safe, unpadded).
func (k PublicKey) Encode() string { return base64.RawURLEncoding.EncodeToString(k.Raw) }

// Verify checks that sig (64 bytes, see the package comment) is k's
// signature over msg. Errors: ErrBadSignature, ErrUnsupportedAlgorithm for a
// PublicKey not made by ParsePublicKey.
func (k PublicKey) Verify(msg, sig []byte) error {
	if len(sig) != SignatureSize {
		return fmt.Errorf("%w: %d bytes, want %d", ErrBadSignature, len(sig), SignatureSize)
	}
	switch k.Alg {
	case Ed25519:
		if len(k.Raw) == Ed25519KeySize && ed25519.Verify(ed25519.PublicKey(k.Raw), msg, sig) {
			return nil
		}
		return ErrBadSignature
	case ECDSAP256:
		if k.ec == nil {
			return fmt.Errorf("%w: key not parsed", ErrBadPublicKey)
		}
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		h := sha256.Sum256(msg)
		if ecdsa.Verify(k.ec, h[:], r, s) {
			return nil
		}
		return ErrBadSignature
	}
	return fmt.Errorf("%w: %q", ErrUnsupportedAlgorithm, k.Alg)
}

// DecodeBase64 decodes s in the URL-safe or the standard alphabet, with or
// without "=" padding (WebCrypto clients encode by hand, and do it either
// way).
func DecodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// Payload is what a device signs at connect. Bytes gives the exact bytes.
//
// Version 1 (SPEC §7):
//
//	v1|deviceId|clientId|mode|role|scopes|signedAtMs|token|nonce
//
// Version 2 (issue 16, planned for pairing; docs/PROTOCOL.md):
//
//	v2|gatewayId|deviceId|clientId|mode|role|scopes|signedAtMs|token|nonce
//
// where scopes are the connect request's scopes in the order sent, joined
// by "," ("" for none); signedAtMs is decimal milliseconds since the Unix
// epoch (no sign for positive values, no leading zeros); token is
// connect.auth.token ("" when none); nonce is connect.challenge's nonce;
// gatewayId is the gateway's id (package gwid: hex SHA-256 of its identity
// key). No field may contain "|", no scope may contain "," or be empty, and
// deviceId, clientId, role and nonce (and gatewayId in v2) must not be empty:
// Bytes refuses such a payload with ErrBadField, so one byte string can never
// be read as two different payloads.
type Payload struct {
	Version    int // 1 or 2
	GatewayID  string
	DeviceID   string
	ClientID   string
	Mode       string
	Role       string
	Scopes     []string
	SignedAtMs int64
	Token      string
	Nonce      string
}

// Bytes is the exact byte string signed (see Payload). Errors: ErrBadField.
func (p Payload) Bytes() ([]byte, error) {
	var head []string
	switch p.Version {
	case 1:
		head = []string{"v1"}
	case 2:
		if p.GatewayID == "" {
			return nil, fmt.Errorf("%w: gatewayId is empty", ErrBadField)
		}
		head = []string{"v2", p.GatewayID}
	default:
		return nil, fmt.Errorf("%w: unknown version %d", ErrBadField, p.Version)
	}
	for _, f := range [...]struct{ name, v string }{{"deviceId", p.DeviceID}, {"clientId", p.ClientID}, {"role", p.Role}, {"nonce", p.Nonce}} {
		if f.v == "" {
			return nil, fmt.Errorf("%w: %s is empty", ErrBadField, f.name)
		}
	}
	for _, sc := range p.Scopes {
		if sc == "" || strings.ContainsAny(sc, ",|") {
			return nil, fmt.Errorf("%w: scope %q", ErrBadField, sc)
		}
	}
	fields := append(head, p.DeviceID, p.ClientID, p.Mode, p.Role, strings.Join(p.Scopes, ","),
		strconv.FormatInt(p.SignedAtMs, 10), p.Token, p.Nonce)
	for _, f := range fields {
		if strings.Contains(f, "|") {
			return nil, fmt.Errorf("%w: a field contains \"|\"", ErrBadField)
		}
	}
	return []byte(strings.Join(fields, "|")), nil
}

// Proof is connect.device as the device sends it, decoded:
// {id, algorithm?, publicKey, signature, signedAt, nonce}.
type Proof struct {
	ID        string    // claimed deviceId (hex)
	Key       PublicKey // from DecodePublicKey
	Signature []byte    // 64 bytes (DecodeBase64 of connect.device.signature)
	SignedAt  int64     // signedAtMs
	Nonce     string    // the nonce the device says it signed
}

// Expect is what the gateway knows itself about the connection being
// verified. The zero MaxSkew means DefaultMaxSkew; version 2 payloads only
// unless AllowV1.
type Expect struct {
	GatewayID string        // this gateway's id (used by version 2)
	Nonce     string        // the nonce this connection's connect.challenge sent
	Now       time.Time     // the gateway's clock
	MaxSkew   time.Duration // allowed |Now − SignedAt| (default DefaultMaxSkew)
	// AllowV1 accepts version 1 payloads (SPEC §7's, without the gateway
	// id, so replayable to another gateway that trusts the same device).
	// The zero value refuses them with ErrOldVersion.
	AllowV1 bool
}

// VerifyConnect checks a connect request's device proof. claim holds the
// request's own fields (ClientID, Mode, Role, Scopes, Token) and the Version
// the device signed; VerifyConnect fills in DeviceID, SignedAtMs, Nonce and
// GatewayID itself — the nonce and gateway id from want, never from the
// device — and verifies the signature over the result. Checks, in order, each
// with its error: the version (ErrOldVersion, ErrBadField), the id matches
// the key (ErrDeviceIDMismatch), the nonce is this connection's
// (ErrNonceMismatch), signedAt is within the skew (ErrStaleSignature), the
// signature (ErrBadSignature; a signature made for another gateway, client,
// role, scopes or token fails here). It returns the verified deviceId.
func VerifyConnect(p Proof, claim Payload, want Expect) (string, error) {
	if claim.Version == 1 && !want.AllowV1 {
		return "", fmt.Errorf("%w: v1, this gateway requires v2", ErrOldVersion)
	}
	id := p.Key.ID()
	if len(p.Key.Raw) == 0 {
		return "", fmt.Errorf("%w: no key", ErrBadPublicKey)
	}
	if p.ID != id {
		return "", ErrDeviceIDMismatch
	}
	if want.Nonce == "" || p.Nonce != want.Nonce {
		return "", ErrNonceMismatch
	}
	skew := want.MaxSkew
	if skew <= 0 {
		skew = DefaultMaxSkew
	}
	if d := want.Now.Sub(time.UnixMilli(p.SignedAt)); d > skew || d < -skew {
		return "", fmt.Errorf("%w: signed %s from the gateway's clock, allowed ±%s", ErrStaleSignature, d.Round(time.Second), skew)
	}
	claim.DeviceID, claim.SignedAtMs, claim.Nonce, claim.GatewayID = id, p.SignedAt, want.Nonce, want.GatewayID
	msg, err := claim.Bytes()
	if err != nil {
		return "", err
	}
	if err := p.Key.Verify(msg, p.Signature); err != nil {
		return "", err
	}
	return id, nil
}

// PrivateKey is a device's key pair, for devices written in Go (`atrium
// node`) and for tests. Browsers keep theirs in WebCrypto.
type PrivateKey struct {
	pub PublicKey
	ed  ed25519.PrivateKey
	ec  *ecdsa.PrivateKey
}

// GenerateKey makes a new key pair of alg from crypto/rand. Errors:
// ErrUnsupportedAlgorithm.
func GenerateKey(alg Algorithm) (*PrivateKey, error) {
	switch alg {
	case Ed25519:
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate ed25519 key: %w", err)
		}
		return &PrivateKey{pub: PublicKey{Alg: alg, Raw: pub}, ed: priv}, nil
	case ECDSAP256:
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate P-256 key: %w", err)
		}
		return fromECDSA(priv)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedAlgorithm, alg)
}

// FromEd25519 wraps an existing Ed25519 private key (e.g. one loaded from a
// node's state dir).
func FromEd25519(priv ed25519.PrivateKey) *PrivateKey {
	pub := priv.Public().(ed25519.PublicKey)
	return &PrivateKey{pub: PublicKey{Alg: Ed25519, Raw: append([]byte(nil), pub...)}, ed: priv}
}

func fromECDSA(priv *ecdsa.PrivateKey) (*PrivateKey, error) {
	raw, err := priv.PublicKey.Bytes()
	if err != nil {
		return nil, fmt.Errorf("encode P-256 key: %w", err)
	}
	pub, err := ParsePublicKey(ECDSAP256, raw)
	if err != nil {
		return nil, err
	}
	return &PrivateKey{pub: pub, ec: priv}, nil
}

// Public is the key's public half.
func (k *PrivateKey) Public() PublicKey { return k.pub }

// Sign signs msg in the wire format of the key's algorithm (64 bytes; P-256:
// IEEE P1363 r‖s over SHA-256, as WebCrypto does).
func (k *PrivateKey) Sign(msg []byte) ([]byte, error) {
	if k.ed != nil {
		return ed25519.Sign(k.ed, msg), nil
	}
	h := sha256.Sum256(msg)
	r, s, err := ecdsa.Sign(rand.Reader, k.ec, h[:])
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	sig := make([]byte, SignatureSize)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return sig, nil
}

// SignConnect fills p's DeviceID with this key's id and signs p.Bytes,
// returning the proof to send as connect.device. Errors: ErrBadField.
func (k *PrivateKey) SignConnect(p Payload) (Proof, error) {
	p.DeviceID = k.pub.ID()
	msg, err := p.Bytes()
	if err != nil {
		return Proof{}, err
	}
	sig, err := k.Sign(msg)
	if err != nil {
		return Proof{}, err
	}
	return Proof{ID: p.DeviceID, Key: k.pub, Signature: sig, SignedAt: p.SignedAtMs, Nonce: p.Nonce}, nil
}
