package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/atrium-dev/atrium/backend/safefile"
)

// ErrInvalid marks a patch that Store.Patch refused: not a JSON object, an
// unknown key, a value of the wrong type, or settings Validate rejects. The
// error text names the key. The file is left as it was.
var ErrInvalid = errors.New("invalid settings")

// KeyField is the JSON name of every secret in config.json (model.apiKey,
// profiles.<role>.model.apiKey, memory.embedding.apiKey). Redact replaces
// it with KeySetField.
const (
	KeyField    = "apiKey"
	KeySetField = "apiKeySet"
)

// Store is config.json for the settings UI (SPEC §9): read it, and patch it
// while the app runs. Patches are applied to the file as it is on disk at
// that moment (a hand edit made meanwhile is kept), validated as a whole,
// and written atomically (temporary file in the same folder, fsync, rename;
// mode 0600 since the file holds API keys), indented, with only the keys
// that are set, so it stays easy to edit by hand: a patch keeps the file's
// key order (new keys go last) and its comment keys ("//…", see Load). A Store is safe for
// concurrent use; concurrent patches are applied one after the other.
type Store struct {
	path string
	mu   sync.Mutex
}

// NewStore returns the store of the config file at path (it need not exist).
func NewStore(path string) *Store { return &Store{path: path} }

// Path is the config file's path.
func (s *Store) Path() string { return s.path }

// Load reads and validates the file (see Load).
func (s *Store) Load() (Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Load(s.path)
}

// Patch applies patch, a JSON merge patch (RFC 7386: an object's keys
// replace or, when null, remove the same keys; nested objects merge), to the
// file and returns the settings before and after. A KeySetField key anywhere
// in the patch is ignored (it is what Redact shows in place of a key), so
// a client may send back what it read: an API key is only changed by
// sending KeyField (a string sets it, null removes it). An invalid patch
// returns an error wrapping ErrInvalid; a file that is malformed on disk is
// an error naming it, and nothing is written either way.
func (s *Store) Patch(patch json.RawMessage) (before, after Config, err error) {
	p, perr := decodeOrdered(patch)
	if _, ok := p.(*object); perr != nil || !ok {
		return before, after, fmt.Errorf("%w: the patch must be a JSON object of settings", ErrInvalid)
	}
	dropKeys(p, func(k string) bool { return k == KeySetField })

	s.mu.Lock()
	defer s.mu.Unlock()
	if before, err = Load(s.path); err != nil {
		return before, after, err
	}
	var current any = &object{}
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return before, after, fmt.Errorf("read config: %w", err)
	case len(bytes.TrimSpace(data)) > 0:
		if current, err = decodeOrdered(data); err != nil {
			return before, after, fmt.Errorf("config %s: %w", s.path, err)
		}
	}
	merged := mergeOrdered(current, p)
	out, err := encodeOrdered(merged)
	if err != nil {
		return before, after, fmt.Errorf("encode config: %w", err)
	}
	dropKeys(merged, isComment) // what Load reads
	plain, err := encodeOrdered(merged)
	if err != nil {
		return before, after, fmt.Errorf("encode config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&after); err != nil {
		return before, after, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := after.Validate(); err != nil {
		return before, after, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := writeAtomic(s.path, append(out, '\n')); err != nil {
		return before, after, err
	}
	return before, after, nil
}

// writeAtomic replaces path with data atomically (package safefile: a
// temporary file in the same folder, fsync, rename, folder fsync), mode
// exactly 0600 (the file holds API keys), keeping the owner of the file it
// replaces.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	if err := safefile.WriteFile(path, data, safefile.Options{Perm: 0o600, Exact: true}); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}

// Redact returns c as the generic JSON object config.get sends: every
// KeyField is removed and replaced by KeySetField, true when a key was set.
// No secret of c is in the result.
func Redact(c Config) (map[string]any, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	redact(m)
	return m, nil
}

func redact(v any) {
	switch t := v.(type) {
	case map[string]any:
		if k, ok := t[KeyField].(string); ok {
			t[KeySetField] = k != ""
			delete(t, KeyField)
		}
		for _, x := range t {
			redact(x)
		}
	case []any:
		for _, x := range t {
			redact(x)
		}
	}
}
