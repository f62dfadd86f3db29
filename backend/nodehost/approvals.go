package nodehost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/safefile"
)

// Exec approval modes (exec-approvals.json "mode").
const (
	// ModeDeny runs nothing.
	ModeDeny = "deny"
	// ModeAllowlist runs only executables on the allowlist.
	ModeAllowlist = "allowlist"
	// ModeAsk runs executables on the allowlist and asks the person (through
	// the gateway, node.exec.ask) about any other; no answer is deny.
	ModeAsk = "ask"
	// ModeFull runs anything.
	ModeFull = "full"
)

// Defaults of exec-approvals.json.
const (
	DefaultMode           = ModeAsk
	DefaultTimeoutMs      = 120_000
	DefaultMaxOutputBytes = 1 << 20
	// MaxOutputBytesLimit keeps both streams of a result well under the
	// gateway's 5 MB inline result limit.
	MaxOutputBytesLimit = 2 << 20
)

// ErrBadApprovals: exec-approvals.json is malformed. It denies every run
// until the file is fixed; it never means "full".
var ErrBadApprovals = errors.New("exec approvals file is malformed")

// Approvals is exec-approvals.json.
//
//	{"mode": "ask",                          // deny | allowlist | ask | full (required)
//	 "allowlist": ["/usr/bin/uname", "/usr/local/bin/*"],
//	 "envAllowlist": ["LANG", "MY_APP_*"],
//	 "timeoutMs": 120000,                    // default and ceiling of a run's timeout
//	 "maxOutputBytes": 1048576}              // cap of stdout and of stderr, each
//
// Allowlist entries are absolute paths of executables, or path.Match
// patterns over them ("/usr/bin/*"); a command is matched by the absolute
// path its argv[0] resolves to on this host (PATH lookup), so "ls" on the
// list would match nothing. envAllowlist entries are variable names or
// path.Match patterns over names; a caller's env entries whose names match
// none are dropped (and reported). Zero timeoutMs and maxOutputBytes take
// the defaults.
type Approvals struct {
	Mode           string   `json:"mode"`
	Allowlist      []string `json:"allowlist"`
	EnvAllowlist   []string `json:"envAllowlist"`
	TimeoutMs      int64    `json:"timeoutMs,omitempty"`
	MaxOutputBytes int      `json:"maxOutputBytes,omitempty"`
}

// DefaultApprovals is the content of a new exec-approvals.json.
func DefaultApprovals() Approvals {
	return Approvals{Mode: DefaultMode, Allowlist: []string{}, EnvAllowlist: []string{}, TimeoutMs: DefaultTimeoutMs, MaxOutputBytes: DefaultMaxOutputBytes}
}

// Timeout is the run timeout ceiling.
func (a Approvals) Timeout() time.Duration {
	if a.TimeoutMs <= 0 {
		return DefaultTimeoutMs * time.Millisecond
	}
	return time.Duration(a.TimeoutMs) * time.Millisecond
}

// OutputCap is the per-stream output cap in bytes.
func (a Approvals) OutputCap() int {
	if a.MaxOutputBytes <= 0 {
		return DefaultMaxOutputBytes
	}
	return a.MaxOutputBytes
}

// Allowed reports whether the executable at the absolute path exe is on the
// allowlist.
func (a Approvals) Allowed(exe string) bool {
	for _, p := range a.Allowlist {
		if p == exe {
			return true
		}
		if ok, err := path.Match(filepath.ToSlash(p), filepath.ToSlash(exe)); err == nil && ok {
			return true
		}
	}
	return false
}

// EnvAllowed reports whether a caller may set the environment variable name.
func (a Approvals) EnvAllowed(name string) bool {
	for _, p := range a.EnvAllowlist {
		if p == name {
			return true
		}
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

func (a Approvals) validate() error {
	switch a.Mode {
	case ModeDeny, ModeAllowlist, ModeAsk, ModeFull:
	case "":
		return errors.New(`"mode" is missing (deny, allowlist, ask or full)`)
	default:
		return fmt.Errorf(`"mode" is %q; want deny, allowlist, ask or full`, a.Mode)
	}
	for _, p := range a.Allowlist {
		if _, err := path.Match(filepath.ToSlash(p), ""); err != nil {
			return fmt.Errorf("allowlist entry %q: %v", p, err)
		}
		if !filepath.IsAbs(p) && !path.IsAbs(filepath.ToSlash(p)) {
			return fmt.Errorf("allowlist entry %q is not an absolute path (entries match the resolved executable)", p)
		}
	}
	for _, p := range a.EnvAllowlist {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return fmt.Errorf("envAllowlist entry %q is not a name or pattern", p)
		}
	}
	if a.TimeoutMs < 0 {
		return fmt.Errorf(`"timeoutMs" is %d; want > 0`, a.TimeoutMs)
	}
	if a.MaxOutputBytes < 0 || a.MaxOutputBytes > MaxOutputBytesLimit {
		return fmt.Errorf(`"maxOutputBytes" is %d; want 1…%d`, a.MaxOutputBytes, MaxOutputBytesLimit)
	}
	return nil
}

// ApprovalsFile reads and updates one exec-approvals.json. The file is read
// at every Load, so a person's edit applies to the next run without a
// restart. Safe for concurrent use within the process.
type ApprovalsFile struct {
	Path string
	mu   sync.Mutex
}

// NewApprovalsFile is the exec-approvals.json in the state dir dir.
func NewApprovalsFile(dir string) *ApprovalsFile {
	return &ApprovalsFile{Path: filepath.Join(dir, ApprovalsFileName)}
}

// Ensure writes the default file (mode "ask") if none exists; an existing
// file is never replaced.
func (f *ApprovalsFile) Ensure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := os.Lstat(f.Path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	data, _ := json.MarshalIndent(DefaultApprovals(), "", "  ")
	err := safefile.CreateFile(f.Path, append(data, '\n'), safefile.Options{Perm: 0o600, Exact: true})
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("write %s: %w", ApprovalsFileName, err)
	}
	return nil
}

// Load reads the file. A missing file is the defaults (mode "ask"). Errors:
// ErrBadApprovals (wrapped, naming the file and the fault) for anything
// malformed — unknown fields, a bad mode, a relative allowlist entry — and
// the file system's; a caller treats every error as "deny".
func (f *ApprovalsFile) Load() (Approvals, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loadLocked()
}

func (f *ApprovalsFile) loadLocked() (Approvals, error) {
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultApprovals(), nil
	}
	if err != nil {
		return Approvals{}, fmt.Errorf("read %s: %w", f.Path, err)
	}
	var a Approvals
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Approvals{}, fmt.Errorf("%w: %s: %v", ErrBadApprovals, f.Path, err)
	}
	if dec.More() {
		return Approvals{}, fmt.Errorf("%w: %s: data after the JSON object", ErrBadApprovals, f.Path)
	}
	if err := a.validate(); err != nil {
		return Approvals{}, fmt.Errorf("%w: %s: %v", ErrBadApprovals, f.Path, err)
	}
	return a, nil
}

// AllowAlways adds the executable path exe to the allowlist (the person
// answered "allow-always"), rewriting the file atomically and keeping the
// rest of it. A malformed file is not rewritten (ErrBadApprovals).
func (f *ApprovalsFile) AllowAlways(exe string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.loadLocked()
	if err != nil {
		return err
	}
	if slices.Contains(a.Allowlist, exe) {
		return nil
	}
	a.Allowlist = append(a.Allowlist, exe)
	if a.EnvAllowlist == nil {
		a.EnvAllowlist = []string{}
	}
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", ApprovalsFileName, err)
	}
	if err := safefile.WriteFile(f.Path, append(data, '\n'), safefile.Options{Perm: 0o600, Exact: true}); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	return nil
}
