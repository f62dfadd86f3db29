package gwid_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gwid"
)

func keysDir(t *testing.T) string { return filepath.Join(t.TempDir(), "keys") }

func mode(t *testing.T, name string) os.FileMode {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func TestIdentityCreatedOnceThenLoaded(t *testing.T) {
	dir := keysDir(t)
	a, err := gwid.LoadIdentity(gwid.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(a.Public())
	if a.ID != hex.EncodeToString(sum[:]) {
		t.Fatalf("id %s is not the hex SHA-256 of the public key", a.ID)
	}
	file := filepath.Join(dir, gwid.IdentityFile)
	before, _ := os.ReadFile(file)
	b, err := gwid.LoadIdentity(gwid.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(file)
	if b.ID != a.ID || !bytes.Equal(before, after) {
		t.Fatalf("reload changed the identity: %s → %s", a.ID, b.ID)
	}
	if !ed25519.Verify(a.Public(), []byte("m"), b.Sign([]byte("m"))) {
		t.Fatal("the reloaded key does not sign for the first one's public key")
	}
	if other, _ := gwid.LoadIdentity(gwid.Options{Dir: keysDir(t)}); other.ID == a.ID {
		t.Fatal("two state dirs got the same gateway id")
	}
	if runtime.GOOS != "windows" {
		if m := mode(t, dir); m != 0o700 {
			t.Fatalf("keys dir mode %v, want 0700", m)
		}
		if m := mode(t, file); m != 0o600 {
			t.Fatalf("key file mode %v, want 0600", m)
		}
	}
}

// TestIdentityConcurrentFirstStart: several loaders racing on an empty
// folder agree on one key (the loser of the create reads the winner's).
func TestIdentityConcurrentFirstStart(t *testing.T) {
	dir := keysDir(t)
	ids := make([]string, 6)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			id, err := gwid.LoadIdentity(gwid.Options{Dir: dir})
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = id.ID
		})
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("concurrent first starts disagree: %v", ids)
		}
	}
}

func TestLooseModesTightened(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	dir := keysDir(t)
	if _, err := gwid.LoadIdentity(gwid.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, gwid.IdentityFile)
	os.Chmod(dir, 0o755)
	os.Chmod(file, 0o644)
	var log bytes.Buffer
	if _, err := gwid.LoadIdentity(gwid.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&log, nil))}); err != nil {
		t.Fatal(err)
	}
	if mode(t, dir) != 0o700 || mode(t, file) != 0o600 {
		t.Fatalf("modes %v %v, want 0700 0600", mode(t, dir), mode(t, file))
	}
	if !strings.Contains(log.String(), "keys folder was open to others") || !strings.Contains(log.String(), "key file was open to others") {
		t.Fatalf("no warning logged: %s", log.String())
	}
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// corruptKept writes each case's content as file in a fresh keys folder
// and checks that load fails with ErrCorrupt naming the file, which is
// left untouched.
func corruptKept(t *testing.T, file string, cases map[string][]byte, load func(gwid.Options) error) {
	t.Helper()
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			dir := keysDir(t)
			os.MkdirAll(dir, 0o700)
			path := filepath.Join(dir, file)
			os.WriteFile(path, content, 0o600)
			err := load(gwid.Options{Dir: dir})
			if !errors.Is(err, gwid.ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want ErrCorrupt naming %s", err, path)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
				t.Fatal("the corrupt file was replaced")
			}
		})
	}
}

func TestCorruptIdentityIsAnErrorAndKept(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKCS8PrivateKey(ed)
	cases := map[string][]byte{
		"empty":            {},
		"garbage":          []byte("not a key\n"),
		"truncated PEM":    pemOf("PRIVATE KEY", edDER)[:40],
		"wrong block type": pemOf("EC PRIVATE KEY", edDER),
		"P-256 key":        pemOf("PRIVATE KEY", ecDER),
		"bad DER":          pemOf("PRIVATE KEY", edDER[:len(edDER)-3]),
		"trailing data":    append(pemOf("PRIVATE KEY", edDER), "junk"...),
		"two keys":         append(pemOf("PRIVATE KEY", edDER), pemOf("PRIVATE KEY", edDER)...),
	}
	corruptKept(t, gwid.IdentityFile, cases, func(o gwid.Options) error { _, err := gwid.LoadIdentity(o); return err })
	// A folder where the file should be: an error, not a new key elsewhere.
	dir := keysDir(t)
	os.MkdirAll(filepath.Join(dir, gwid.IdentityFile), 0o700)
	if _, err := gwid.LoadIdentity(gwid.Options{Dir: dir}); !errors.Is(err, gwid.ErrCorrupt) {
		t.Fatalf("folder as key file: %v", err)
	}
}

func TestCertCreatedOnceThenLoaded(t *testing.T) {
	dir := keysDir(t)
	o := gwid.Options{Dir: dir, Hosts: []string{"127.0.0.2", "Atrium-Box.local", "[::1]", "0.0.0.0", ""}}
	a, err := gwid.LoadCert(o)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, gwid.TLSFile)
	before, _ := os.ReadFile(file)
	b, err := gwid.LoadCert(o)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(file)
	if a.SHA256 != b.SHA256 || !bytes.Equal(before, after) {
		t.Fatal("reloading changed the certificate")
	}
	if runtime.GOOS != "windows" && mode(t, file) != 0o600 {
		t.Fatalf("tls.pem mode %v", mode(t, file))
	}
	leaf := a.Leaf
	if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("key %T, want ECDSA", leaf.PublicKey)
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1", "127.0.0.2", "atrium-box.local"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("certificate does not name %s: %v", h, err)
		}
	}
	if v := leaf.NotAfter.Sub(leaf.NotBefore); v < 800*24*time.Hour {
		t.Fatalf("validity %s", v)
	}
	// The fingerprints, by definition.
	if a.SHA256 != sha256.Sum256(leaf.Raw) || a.Hex() != hex.EncodeToString(a.SHA256[:]) {
		t.Fatal("SHA256 is not the digest of the DER certificate")
	}
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	if a.SPKIBase64() != base64.StdEncoding.EncodeToString(spki[:]) || len(a.SPKIBase64()) != 44 {
		t.Fatalf("SPKI base64 %q", a.SPKIBase64())
	}
	if d := a.Display(); len(d) != 95 || strings.ToUpper(d) != d || strings.Count(d, ":") != 31 {
		t.Fatalf("display form %q", d)
	}
	for _, s := range []string{a.Display(), a.Hex(), strings.ToLower(a.Display()), " " + a.Hex() + "\n"} {
		if fp, err := gwid.ParseFingerprint(s); err != nil || fp != a.SHA256 {
			t.Fatalf("ParseFingerprint(%q) = %x, %v", s, fp, err)
		}
	}
	for _, s := range []string{"", "zz", a.Hex()[:62], a.Hex() + "00"} {
		if _, err := gwid.ParseFingerprint(s); !errors.Is(err, gwid.ErrBadFingerprint) {
			t.Fatalf("ParseFingerprint(%q): %v", s, err)
		}
	}
}

func TestCertRenewal(t *testing.T) {
	dir := keysDir(t)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var log bytes.Buffer
	o := gwid.Options{Dir: dir, Hosts: []string{"127.0.0.2"}, Now: func() time.Time { return t0 },
		Logger: slog.New(slog.NewTextHandler(&log, nil))}
	first, err := gwid.LoadCert(o)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		hosts  []string
		at     time.Time
		renew  bool
		reason string
	}{
		{"a year later, same hosts", []string{"127.0.0.2"}, t0.AddDate(1, 0, 0), false, ""},
		{"a host it already names, in another spelling", []string{"127.0.0.2", "LOCALHOST", "::1"}, t0, false, ""},
		{"unspecified bind address", []string{"0.0.0.0", "::"}, t0, false, ""},
		{"a new bind address", []string{"127.0.0.3"}, t0, true, "hosts"},
		{"a new name", []string{"127.0.0.3", "box.local"}, t0, true, "hosts"},
		{"expires within 30 days", []string{"127.0.0.3", "box.local"}, t0.Add(gwid.DefaultValidity - 29*24*time.Hour), true, "expires"},
		{"clock before the certificate", []string{"127.0.0.3", "box.local"}, t0.AddDate(-1, 0, 0), true, "not yet valid"},
	}
	prev := first
	for _, c := range cases {
		log.Reset()
		o.Hosts, o.Now = c.hosts, func() time.Time { return c.at }
		got, err := gwid.LoadCert(o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		renewed := got.SHA256 != prev.SHA256
		if renewed != c.renew {
			t.Fatalf("%s: renewed=%v, want %v", c.name, renewed, c.renew)
		}
		if c.renew {
			l := log.String()
			if !strings.Contains(l, "tls certificate renewed") || (!strings.Contains(l, "reason=\""+c.reason+"\"") && !strings.Contains(l, "reason="+c.reason+" ")) {
				t.Fatalf("%s: log %q, want a renewal line with reason %s", c.name, log.String(), c.reason)
			}
			if got.SPKI != first.SPKI {
				t.Fatalf("%s: renewal changed the key (SPKI pin)", c.name)
			}
			for _, h := range c.hosts {
				if err := got.Leaf.VerifyHostname(h); err != nil {
					t.Fatalf("%s: renewed certificate does not name %s", c.name, h)
				}
			}
		} else if log.Len() != 0 {
			t.Fatalf("%s: logged %q without renewing", c.name, log.String())
		}
		prev = got
	}
}

func TestCorruptCertIsAnErrorAndKept(t *testing.T) {
	one, _ := gwid.LoadCert(gwid.Options{Dir: keysDir(t)})
	two, _ := gwid.LoadCert(gwid.Options{Dir: keysDir(t)})
	certPEM := func(c *gwid.Cert) []byte { return pemOf("CERTIFICATE", c.Leaf.Raw) }
	keyPEM := func(c *gwid.Cert) []byte {
		der, _ := x509.MarshalPKCS8PrivateKey(c.TLS.PrivateKey)
		return pemOf("PRIVATE KEY", der)
	}
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKCS8PrivateKey(ed)
	cases := map[string][]byte{
		"empty":                     {},
		"garbage":                   []byte("-----BEGIN NOTHING-----\n"),
		"certificate without key":   certPEM(one),
		"key first":                 append(keyPEM(one), certPEM(one)...),
		"key of another cert":       append(certPEM(one), keyPEM(two)...),
		"Ed25519 key":               append(certPEM(one), pemOf("PRIVATE KEY", edDER)...),
		"certificate DER truncated": append(pemOf("CERTIFICATE", one.Leaf.Raw[:100]), keyPEM(one)...),
	}
	corruptKept(t, gwid.TLSFile, cases, func(o gwid.Options) error { _, err := gwid.LoadCert(o); return err })
	// The honest pair in the right order loads.
	dir := keysDir(t)
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, gwid.TLSFile), append(certPEM(one), keyPEM(one)...), 0o600)
	if c, err := gwid.LoadCert(gwid.Options{Dir: dir}); err != nil || c.SHA256 != one.SHA256 {
		t.Fatalf("honest file: %v", err)
	}
}

// TestPinnedHandshake: a real TLS server on 127.0.0.2 serving the gateway's
// certificate; a client pinning its fingerprint talks to it, one pinning
// another certificate's fingerprint and one trusting the system roots are
// refused, and a client trusting exactly this certificate verifies the
// LAN-style address against its SANs.
func TestPinnedHandshake(t *testing.T) {
	cert, err := gwid.LoadCert(gwid.Options{Dir: keysDir(t), Hosts: []string{"127.0.0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := gwid.LoadCert(gwid.Options{Dir: keysDir(t)})
	ln, err := tls.Listen("tcp", "127.0.0.2:0", cert.ServerConfig())
	if err != nil {
		ln, err = tls.Listen("tcp", "127.0.0.1:0", cert.ServerConfig())
		if err != nil {
			t.Fatal(err)
		}
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					io.WriteString(c, "hello")
				}
			}()
		}
	}()
	addr := ln.Addr().String()
	t.Logf("serving TLS on %s", addr)
	host := strings.Split(addr, ":")[0]

	dial := func(cfg *tls.Config) (string, error) {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return "", err
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if got, err := dial(gwid.PinnedClientConfig(cert.SHA256)); err != nil || got != "hello" {
		t.Fatalf("pinned client: %q, %v", got, err)
	}
	if _, err := dial(gwid.PinnedClientConfig(other.SHA256)); !errors.Is(err, gwid.ErrFingerprintMismatch) {
		t.Fatalf("client pinning another certificate: err = %v, want ErrFingerprintMismatch", err)
	}
	if _, err := dial(&tls.Config{ServerName: host}); err == nil {
		t.Fatal("a client trusting only the system roots accepted the self-signed certificate")
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	if got, err := dial(&tls.Config{RootCAs: pool, ServerName: host}); err != nil || got != "hello" {
		t.Fatalf("client trusting the certificate for %s: %q, %v", host, got, err)
	}
	if _, err := dial(&tls.Config{RootCAs: pool, ServerName: "elsewhere.example"}); err == nil {
		t.Fatal("certificate accepted for a name it does not carry")
	}
}

func TestFingerprintWords(t *testing.T) {
	// Proquint vectors from Wilkerson's proposal: 127.0.0.1 = lusab-babad,
	// 63.84.220.193 = gutih-tugad.
	var fp [32]byte
	copy(fp[:], []byte{127, 0, 0, 1, 63, 84, 220, 193})
	if got := gwid.FingerprintWords(fp); got != "lusab babad gutih tugad" {
		t.Fatalf("words %q", got)
	}
	fp2 := fp
	fp2[7] ^= 1
	if gwid.FingerprintWords(fp2) == gwid.FingerprintWords(fp) {
		t.Fatal("a one-bit change gave the same words")
	}
	fp[20] ^= 0xff // beyond the first 64 bits: not shown
	if gwid.FingerprintWords(fp) != "lusab babad gutih tugad" {
		t.Fatal("words depend on more than the first 64 bits")
	}
	c, _ := gwid.LoadCert(gwid.Options{Dir: keysDir(t)})
	if w := strings.Fields(c.Words()); len(w) != 4 || len(w[0]) != 5 {
		t.Fatalf("certificate words %q", c.Words())
	}
}
