package gwid

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/safefile"
)

// ErrFingerprintMismatch: the server's certificate is not the pinned one
// (PinnedClientConfig).
var ErrFingerprintMismatch = errors.New("TLS certificate fingerprint does not match the pinned one")

// ErrBadFingerprint: a fingerprint string is not 32 bytes of hex.
var ErrBadFingerprint = errors.New("bad certificate fingerprint")

// Cert is the gateway's TLS certificate and the fingerprints derived from it.
type Cert struct {
	// TLS is ready for tls.Config.Certificates (Leaf set).
	TLS tls.Certificate
	// Leaf is the parsed certificate.
	Leaf *x509.Certificate
	// SHA256 is the SHA-256 of the DER certificate: the fingerprint that
	// travels in the QR code and the mDNS TXT record (tlsSha256).
	SHA256 [32]byte
	// SPKI is the SHA-256 of the certificate's DER SubjectPublicKeyInfo
	// (stable across renewals, since the key is kept).
	SPKI [32]byte
}

// Hex is SHA256 as 64 lowercase hex characters (the QR and TXT form).
func (c *Cert) Hex() string { return hex.EncodeToString(c.SHA256[:]) }

// Display is SHA256 as uppercase hex pairs separated by colons
// ("AB:CD:…", 95 characters), the form browsers show.
func (c *Cert) Display() string { return DisplayFingerprint(c.SHA256) }

// SPKIBase64 is SPKI in standard base64 (44 characters), what Chromium's
// --ignore-certificate-errors-spki-list takes.
func (c *Cert) SPKIBase64() string { return base64.StdEncoding.EncodeToString(c.SPKI[:]) }

// Words is the certificate fingerprint as words for people to compare
// (FingerprintWords).
func (c *Cert) Words() string { return FingerprintWords(c.SHA256) }

// ServerConfig is a TLS server configuration serving this certificate
// (TLS 1.2 or newer).
func (c *Cert) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.TLS}, MinVersion: tls.VersionTLS12}
}

// DisplayFingerprint formats a fingerprint as uppercase hex pairs joined by
// colons.
func DisplayFingerprint(fp [32]byte) string {
	parts := make([]string, len(fp))
	for i, b := range fp {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// ParseFingerprint reads a certificate fingerprint in either form (64 hex
// characters, or hex pairs separated by colons; any case). Errors:
// ErrBadFingerprint.
func ParseFingerprint(s string) ([32]byte, error) {
	var fp [32]byte
	h := strings.ReplaceAll(strings.TrimSpace(s), ":", "")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != len(fp) {
		return fp, fmt.Errorf("%w: %q", ErrBadFingerprint, s)
	}
	copy(fp[:], b)
	return fp, nil
}

// PinnedClientConfig is a TLS client configuration that accepts exactly the
// server certificate whose DER SHA-256 is fp, whatever its names or issuer
// (the gateway's certificate is self-signed; the pin replaces the chain).
// Any other certificate fails the handshake with an error wrapping
// ErrFingerprintMismatch.
func PinnedClientConfig(fp [32]byte) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain and name checks are replaced by the pin below, which
		// VerifyConnection applies to every handshake, resumed ones included.
		InsecureSkipVerify: true, //nolint:gosec // pinned by VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("%w: no certificate", ErrFingerprintMismatch)
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(got[:], fp[:]) != 1 {
				return fmt.Errorf("%w: got %s", ErrFingerprintMismatch, hex.EncodeToString(got[:]))
			}
			return nil
		},
	}
}

// LoadCert loads the TLS certificate from o.Dir/tls.pem, creating it the
// first time, and renews it (same key, new certificate, one Info log line
// "tls certificate renewed" with the reason) when it expires within
// o.RenewBefore, is not yet valid, or does not name every host in o.Hosts.
// Errors: ErrCorrupt (wrapped, naming the file) for a file that is not a
// certificate followed by its P-256 PKCS #8 key; the file system's.
func LoadCert(o Options) (*Cert, error) {
	if err := ensureDir(o); err != nil {
		return nil, err
	}
	hosts := certHosts(o.Hosts)
	name := filepath.Join(o.Dir, TLSFile)
	wopt := safefile.Options{Perm: 0o600, Exact: true}
	data, err := readKeyFile(o, name)
	if errors.Is(err, fs.ErrNotExist) {
		key, gerr := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if gerr != nil {
			return nil, fmt.Errorf("generate TLS key: %w", gerr)
		}
		data, err = newCertPEM(o, key, hosts)
		if err == nil {
			err = safefile.CreateFile(name, data, wopt)
		}
		if errors.Is(err, fs.ErrExist) { // another process made it first: use theirs
			data, err = readKeyFile(o, name)
		} else if err == nil {
			o.logger().Info("tls certificate created", "file", name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	c, key, err := parseCertPEM(name, data)
	if err != nil {
		return nil, err
	}
	now := o.now()
	reason := ""
	switch {
	case now.Before(c.Leaf.NotBefore):
		reason = "not yet valid"
	case !now.Before(c.Leaf.NotAfter.Add(-renewBefore(o))):
		reason = "expires"
	case !covers(c.Leaf, hosts):
		reason = "hosts"
	}
	if reason == "" {
		return c, nil
	}
	data, err = newCertPEM(o, key, hosts)
	if err == nil {
		err = safefile.WriteFile(name, data, wopt)
	}
	if err != nil {
		return nil, fmt.Errorf("renew TLS certificate: %w", err)
	}
	if c, _, err = parseCertPEM(name, data); err != nil {
		return nil, err
	}
	o.logger().Info("tls certificate renewed", "reason", reason, "file", name,
		"notAfter", c.Leaf.NotAfter.UTC().Format(time.RFC3339), "sha256", c.Hex())
	return c, nil
}

func renewBefore(o Options) time.Duration {
	if o.RenewBefore <= 0 {
		return DefaultRenewBefore
	}
	return o.RenewBefore
}

// certHosts is the host list with the loopback names added, normalised
// (lower case, no brackets, no unspecified addresses), deduplicated.
func certHosts(in []string) []string {
	out := []string{"localhost", "127.0.0.1", "::1"}
	for _, h := range in {
		h = strings.ToLower(strings.Trim(strings.TrimSpace(h), "[]"))
		if ip := net.ParseIP(h); ip != nil {
			if ip.IsUnspecified() {
				continue
			}
			h = ip.String()
		}
		if h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// covers reports whether the certificate names every host.
func covers(leaf *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(leaf.DNSNames, h) {
			return false
		}
	}
	return true
}

// newCertPEM makes a self-signed certificate for key naming hosts, and
// returns it and the key as tls.pem's content.
func newCertPEM(o Options, key *ecdsa.PrivateKey, hosts []string) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	validity := o.Validity
	if validity <= 0 {
		validity = DefaultValidity
	}
	now := o.now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Atrium gateway", Organization: []string{"Atrium"}},
		NotBefore:             now.Add(-time.Hour), // a client clock a little behind still accepts it
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode TLS key: %w", err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...), nil
}

// parseCertPEM reads tls.pem's content: the certificate, then its key.
func parseCertPEM(name string, data []byte) (*Cert, *ecdsa.PrivateKey, error) {
	blocks, err := pemBlocks(name, data, "CERTIFICATE", "PRIVATE KEY")
	if err != nil {
		return nil, nil, err
	}
	leaf, err := x509.ParseCertificate(blocks[0].Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: certificate: %v", ErrCorrupt, name, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(blocks[1].Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: key: %v", ErrCorrupt, name, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, nil, fmt.Errorf("%w: %s: the key is not ECDSA P-256", ErrCorrupt, name)
	}
	if !key.PublicKey.Equal(leaf.PublicKey) {
		return nil, nil, fmt.Errorf("%w: %s: the key does not belong to the certificate", ErrCorrupt, name)
	}
	c := &Cert{
		TLS:    tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf},
		Leaf:   leaf,
		SHA256: sha256.Sum256(leaf.Raw),
		SPKI:   sha256.Sum256(leaf.RawSubjectPublicKeyInfo),
	}
	return c, key, nil
}
