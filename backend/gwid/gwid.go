// Package gwid is the gateway's own identity (issue 16 items 2 and 3): its
// long-lived Ed25519 identity key and the gateway id derived from it, and the
// self-signed TLS certificate it serves off loopback, with the fingerprints
// people and devices pin.
//
// Both live in the keys folder, $ATRIUM_HOME/keys (paths.Layout.KeysDir),
// mode 0700; their files are mode 0600 and written atomically
// (backend/safefile):
//
//   - gateway.key: the identity key, PEM "PRIVATE KEY" (PKCS #8, Ed25519).
//     Created once, then loaded. The gateway id is the lowercase hex SHA-256
//     of the raw 32-byte public key, the same rule as a deviceId (package
//     device), and is what device signatures (payload v2) name.
//   - tls.pem: the TLS certificate (PEM "CERTIFICATE", self-signed, ECDSA
//     P-256) followed by its key (PEM "PRIVATE KEY", PKCS #8). Created once;
//     renewed, with the same key and a log line, only when it expires within
//     Options.RenewBefore or no longer names every host in Options.Hosts.
//     Because the key is kept, the SPKI pin (SPKIBase64) survives a renewal;
//     the certificate fingerprint (SHA256) does not.
//
// A file that exists but cannot be read as what it must be is an error
// wrapping ErrCorrupt that names the file; it is never replaced, since
// replacing the identity key would silently orphan every pairing (a
// symlink or a folder in a key file's place is refused the same way). A file
// or folder readable by others is tightened to 0600/0700 with a warning.
package gwid

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/atrium-dev/atrium/backend/safefile"
)

// File names inside the keys folder.
const (
	IdentityFile = "gateway.key"
	TLSFile      = "tls.pem"
)

// Defaults of Options.
const (
	// DefaultValidity is a new certificate's lifetime: 825 days, the longest
	// Apple's platforms accept for a TLS server certificate (a phone's
	// browser is a client), long enough that people rarely re-pin.
	DefaultValidity = 825 * 24 * time.Hour
	// DefaultRenewBefore: a certificate expiring within this is renewed at
	// load.
	DefaultRenewBefore = 30 * 24 * time.Hour
)

// ErrCorrupt: a key or certificate file exists but is not what it must be
// (not PEM, wrong block, wrong key type, key and certificate disagree). The
// file is left as it is; the person decides (restore a backup, or delete it
// to start a new identity, which unpairs every device).
var ErrCorrupt = errors.New("corrupt key file")

// Options say where the keys are and what the certificate must cover. Dir
// is required; the zero value of every other field is its default.
type Options struct {
	// Dir is the keys folder ($ATRIUM_HOME/keys); created 0700 if missing.
	Dir string
	// Logger receives the warnings and the renewal line (default: discard).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Hosts are the names and IP literals the gateway serves TLS under (the
	// bind address, the machine's LAN addresses, its host name and
	// <host>.local). "localhost", 127.0.0.1 and ::1 are always included.
	// Unspecified addresses (0.0.0.0, ::) and "" are ignored: list the
	// interface addresses instead.
	Hosts []string
	// Validity of a new certificate (default DefaultValidity).
	Validity time.Duration
	// RenewBefore: renew when the certificate expires within this (default
	// DefaultRenewBefore).
	RenewBefore time.Duration
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

func (o Options) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

// Identity is the gateway's long-lived key pair.
type Identity struct {
	// ID is the gateway id: lowercase hex SHA-256 of the raw Ed25519 public
	// key (64 characters).
	ID   string
	priv ed25519.PrivateKey
}

// Public is the raw 32-byte Ed25519 public key.
func (id *Identity) Public() ed25519.PublicKey { return id.priv.Public().(ed25519.PublicKey) }

// Sign signs msg with the identity key (64-byte Ed25519 signature).
func (id *Identity) Sign(msg []byte) []byte { return ed25519.Sign(id.priv, msg) }

// LoadIdentity loads the identity key from o.Dir/gateway.key, creating it
// (and the folder) the first time. Errors: ErrCorrupt (wrapped, naming the
// file) for a file that is not an Ed25519 PKCS #8 PEM key; the file
// system's otherwise.
func LoadIdentity(o Options) (*Identity, error) {
	if err := ensureDir(o); err != nil {
		return nil, err
	}
	name := filepath.Join(o.Dir, IdentityFile)
	data, err := readKeyFile(o, name)
	if errors.Is(err, fs.ErrNotExist) {
		_, priv, gerr := ed25519.GenerateKey(rand.Reader)
		if gerr != nil {
			return nil, fmt.Errorf("generate gateway identity key: %w", gerr)
		}
		der, merr := x509.MarshalPKCS8PrivateKey(priv)
		if merr != nil {
			return nil, fmt.Errorf("encode gateway identity key: %w", merr)
		}
		data = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		err = safefile.CreateFile(name, data, safefile.Options{Perm: 0o600, Exact: true})
		if errors.Is(err, fs.ErrExist) { // another process made it first: use theirs
			data, err = readKeyFile(o, name)
		} else if err == nil {
			o.logger().Info("gateway identity key created", "file", name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gateway identity key: %w", err)
	}
	blocks, err := pemBlocks(name, data, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(blocks[0].Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s: %T is not an Ed25519 key", ErrCorrupt, name, k)
	}
	sum := sha256.Sum256(priv.Public().(ed25519.PublicKey))
	return &Identity{ID: hex.EncodeToString(sum[:]), priv: priv}, nil
}

// ensureDir creates o.Dir 0700, or tightens an existing one that others may
// read.
func ensureDir(o Options) error {
	if o.Dir == "" {
		return errors.New("gwid: Options.Dir is empty")
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return fmt.Errorf("create keys folder: %w", err)
	}
	st, err := os.Stat(o.Dir)
	if err != nil {
		return fmt.Errorf("keys folder: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("keys folder %s is not a directory", o.Dir)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		o.logger().Warn("keys folder was open to others, set to 0700", "dir", o.Dir, "mode", st.Mode().Perm().String())
		if err := os.Chmod(o.Dir, 0o700); err != nil {
			return fmt.Errorf("keys folder: %w", err)
		}
	}
	return nil
}

// readKeyFile reads a key file, tightening its mode to 0600 first if others
// may read it. A missing file is fs.ErrNotExist.
func readKeyFile(o Options, name string) ([]byte, error) {
	st, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrCorrupt, name)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		o.logger().Warn("key file was open to others, set to 0600", "file", name, "mode", st.Mode().Perm().String())
		if err := os.Chmod(name, 0o600); err != nil {
			return nil, err
		}
	}
	return os.ReadFile(name)
}

// pemBlocks decodes data as exactly the PEM blocks of the given types, in
// order, with nothing but white space around them.
func pemBlocks(name string, data []byte, types ...string) ([]*pem.Block, error) {
	var out []*pem.Block
	rest := data
	for _, typ := range types {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("%w: %s: no PEM %q block", ErrCorrupt, name, typ)
		}
		if b.Type != typ {
			return nil, fmt.Errorf("%w: %s: PEM block %q, want %q", ErrCorrupt, name, b.Type, typ)
		}
		out = append(out, b)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: %s: unexpected data after the PEM blocks", ErrCorrupt, name)
	}
	return out, nil
}
