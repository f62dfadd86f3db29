package nodehost

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/atrium-dev/atrium/backend/device"
	"github.com/atrium-dev/atrium/backend/safefile"
)

// File names inside the state dir.
const (
	KeyFileName       = "device.key"
	ConfigFileName    = "node.json"
	ApprovalsFileName = "exec-approvals.json"
	// DirName is the state dir's name in the home folder (DefaultDir).
	DirName = ".atrium-node"
	// EnvHome names the environment variable that sets the state dir.
	EnvHome = "ATRIUM_NODE_HOME"
)

// ErrCorrupt: a state file exists but cannot be read as what it should be.
// The file is left alone (never replaced), so nothing is lost.
var ErrCorrupt = errors.New("corrupt state file")

// DefaultDir is the state dir: $ATRIUM_NODE_HOME if set (getenv may be nil:
// os.Getenv), else ~/.atrium-node.
func DefaultDir(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if d := getenv(EnvHome); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("node state dir: %w (set %s)", err, EnvHome)
	}
	return filepath.Join(home, DirName), nil
}

// Config is node.json: where the host's gateway is and what it holds from it.
// Tokens are secrets (the file is 0600); they are never logged.
type Config struct {
	// GatewayURL is the gateway's WebSocket URL ("wss://127.0.0.2:18789/ws").
	GatewayURL string `json:"gatewayUrl,omitempty"`
	// GatewayID is the gateway's id (hex SHA-256 of its identity key).
	GatewayID string `json:"gatewayId,omitempty"`
	// TLSSHA256 is the pinned certificate fingerprint (64 hex characters).
	TLSSHA256 string `json:"tlsSha256,omitempty"`
	// TLSSPKISHA256 is the SHA-256 (hex) of the pinned certificate's public
	// key, learned over the first pinned connection: a certificate the
	// gateway renewed with the same key (new names, new dates) is accepted
	// and re-pinned; one with another key never is.
	TLSSPKISHA256 string `json:"tlsSpkiSha256,omitempty"`
	// DisplayName is what the host calls itself (connect client.displayName).
	DisplayName string `json:"displayName,omitempty"`
	// Tokens are the device tokens by role ("node", "operator").
	Tokens map[string]string `json:"tokens,omitempty"`
	// PairedAt is when the first token arrived (RFC 3339, UTC); a host that
	// was ever paired asks for a repair instead of giving up.
	PairedAt string `json:"pairedAt,omitempty"`
}

// State is an opened state dir: the device key and node.json. Config changes
// go through Update, which writes node.json atomically. Safe for concurrent
// use.
type State struct {
	Dir string
	key *device.PrivateKey
	log *slog.Logger

	mu  sync.Mutex
	cfg Config
}

// OpenState opens the state dir dir, creating it (0700) and the device key
// (Ed25519, 0600) the first time. A folder or key file open to others is set
// back to owner-only with a warning. Errors: ErrCorrupt for a key or node.json
// that cannot be read (the file is kept as it is), the file system's.
func OpenState(dir string, log *slog.Logger) (*State, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if dir == "" {
		return nil, errors.New("node state dir: empty path")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create node state dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("node state dir: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("node state dir %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o077 != 0 {
		log.Warn("node state dir was open to others, set to 0700", "dir", dir, "mode", st.Mode().Perm().String())
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("node state dir: %w", err)
		}
	}
	s := &State{Dir: dir, log: log}
	if s.key, err = s.loadKey(); err != nil {
		return nil, err
	}
	if s.cfg, err = s.loadConfig(); err != nil {
		return nil, err
	}
	return s, nil
}

// Key is the device key.
func (s *State) Key() *device.PrivateKey { return s.key }

// DeviceID is the device's id (hex SHA-256 of its public key).
func (s *State) DeviceID() string { return s.key.Public().ID() }

// Config returns a copy of node.json's current content.
func (s *State) Config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.clone()
}

// Update applies f to a copy of the config and writes node.json (atomically,
// 0600); the in-memory config changes only when the write succeeded.
func (s *State) Update(f func(*Config)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.cfg.clone()
	f(&next)
	data, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", ConfigFileName, err)
	}
	if err := safefile.WriteFile(filepath.Join(s.Dir, ConfigFileName), append(data, '\n'), safefile.Options{Perm: 0o600, Exact: true}); err != nil {
		return fmt.Errorf("write %s: %w", ConfigFileName, err)
	}
	s.cfg = next
	return nil
}

func (c Config) clone() Config {
	out := c
	if c.Tokens != nil {
		out.Tokens = make(map[string]string, len(c.Tokens))
		for k, v := range c.Tokens {
			out.Tokens[k] = v
		}
	}
	return out
}

func (s *State) loadConfig() (Config, error) {
	name := filepath.Join(s.Dir, ConfigFileName)
	data, err := s.readPrivate(name)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, err
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %v (fix or move the file; it is not replaced)", ErrCorrupt, name, err)
	}
	return c, nil
}

// readPrivate reads a secret file, setting it back to 0600 with a warning
// when it is open to others.
func (s *State) readPrivate(name string) ([]byte, error) {
	st, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrCorrupt, name)
	}
	if st.Mode().Perm()&0o077 != 0 {
		s.log.Warn("secret file was open to others, set to 0600", "file", name, "mode", st.Mode().Perm().String())
		if err := os.Chmod(name, 0o600); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

func (s *State) loadKey() (*device.PrivateKey, error) {
	name := filepath.Join(s.Dir, KeyFileName)
	data, err := s.readPrivate(name)
	if errors.Is(err, fs.ErrNotExist) {
		return s.createKey(name)
	}
	if err != nil {
		return nil, err
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" || strings.TrimSpace(string(rest)) != "" {
		return nil, fmt.Errorf("%w: %s: want one PEM \"PRIVATE KEY\" block (the file is kept; a new key would be a new device)", ErrCorrupt, name)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, name, err)
	}
	ed, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s: key is %T, want Ed25519", ErrCorrupt, name, k)
	}
	return device.FromEd25519(ed), nil
}

func (s *State) createKey(name string) (*device.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate device key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode device key: %w", err)
	}
	k := device.FromEd25519(priv)
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	// CreateFile never replaces: two hosts starting at once on one state dir
	// cannot each write a key; the loser reads the winner's.
	if err := safefile.CreateFile(name, data, safefile.Options{Perm: 0o600, Exact: true}); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return s.loadKey()
		}
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	s.log.Info("device key created", "deviceId", k.Public().ID())
	return k, nil
}
