// Package paths owns every file-system location Atrium uses (SPEC §1): the
// state dir ($ATRIUM_HOME, default ~/.atrium) and the workspace
// ($ATRIUM_WORKSPACE, default ~/Atrium). No other package builds these paths.
package paths

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Environment variables read by Resolve.
const (
	EnvHome      = "ATRIUM_HOME"
	EnvWorkspace = "ATRIUM_WORKSPACE"
)

// Layout is the resolved pair of directories. Both are absolute and cleaned.
type Layout struct {
	Home      string // state dir: config.json, state.db, index/, logs/, gateway.token
	Workspace string // the Markdown memory (source of truth)
}

// Resolve picks each directory from, in order: the explicit argument (a
// command-line flag), the environment variable, the default under the user's
// home directory. getenv defaults to os.Getenv.
func Resolve(home, workspace string, getenv func(string) string) (Layout, error) {
	h, err := ResolveHome(home, getenv)
	if err != nil {
		return Layout{}, err
	}
	w, err := pick(workspace, EnvWorkspace, "Atrium", getenv)
	if err != nil {
		return Layout{}, err
	}
	return Layout{Home: h, Workspace: w}, nil
}

// ResolveHome picks the state dir alone, as Resolve does (home, else
// $ATRIUM_HOME, else ~/.atrium): for commands that talk to the app of a
// state dir whatever workspace it serves.
func ResolveHome(home string, getenv func(string) string) (string, error) {
	return pick(home, EnvHome, ".atrium", getenv)
}

// pick is flag, else the environment variable env, else def under the
// user's home directory, made absolute.
func pick(flag, env, def string, getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	v := flag
	if v == "" {
		v = getenv(env)
	}
	if v == "" {
		userHome, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no %s set and no user home directory: %w", env, err)
		}
		v = filepath.Join(userHome, def)
	}
	abs, err := filepath.Abs(v)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", v, err)
	}
	return abs, nil
}

// DefaultWorkspace is ~/Atrium, the workspace when none is chosen.
func DefaultWorkspace() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no user home directory: %w", err)
	}
	return filepath.Join(home, "Atrium"), nil
}

// OpenClawWorkspace is where OpenClaw keeps its agent's workspace by
// default, ~/.openclaw/workspace (MEMORY.md, memory/YYYY-MM-DD.md, SOUL.md
// …); the first start offers it when it exists.
func OpenClawWorkspace() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no user home directory: %w", err)
	}
	return filepath.Join(home, ".openclaw", "workspace"), nil
}

// Ensure creates the state dir (mode 0700) with its subdirectories. A
// read-only or unwritable state dir is an error that names the directory.
// The workspace is left alone (see EnsureWorkspace, CheckWorkspace).
func (l Layout) Ensure() error {
	for _, d := range []string{l.Home, l.IndexRoot(), l.LogsDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
	}
	probe := filepath.Join(l.Home, ".write-test")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return fmt.Errorf("state dir %s is not writable: %w", l.Home, err)
	}
	return errors.Join(os.Remove(probe))
}

// EnsureWorkspace creates the workspace (0755) if it is missing, as the app
// does on first start, and reports whether it created it.
func (l Layout) EnsureWorkspace() (created bool, err error) {
	if _, err := os.Stat(l.Workspace); err == nil {
		return false, l.CheckWorkspace()
	}
	if err := os.MkdirAll(l.Workspace, 0o755); err != nil {
		return false, fmt.Errorf("create workspace: %w", err)
	}
	return true, nil
}

// CheckWorkspace reports a missing workspace, or one that is not a
// directory, with a message that says how to choose another. The CLI uses it
// so that a mistyped --workspace is never created.
func (l Layout) CheckWorkspace() error {
	st, err := os.Stat(l.Workspace)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("workspace %s does not exist (choose one with --workspace or %s)", l.Workspace, EnvWorkspace)
		}
		return fmt.Errorf("workspace: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("workspace %s is not a directory", l.Workspace)
	}
	return nil
}

// ConfigFile is $ATRIUM_HOME/config.json.
func (l Layout) ConfigFile() string { return filepath.Join(l.Home, "config.json") }

// StateDB is $ATRIUM_HOME/state.db (history and other app state).
func (l Layout) StateDB() string { return filepath.Join(l.Home, "state.db") }

// TokenFile is $ATRIUM_HOME/gateway.token, the local operator token (mode 0600).
func (l Layout) TokenFile() string { return filepath.Join(l.Home, "gateway.token") }

// GatewayFile is $ATRIUM_HOME/gateway.json: the address and pid of the
// running app's gateway, written after it binds its port and removed when it
// stops, so the CLI can find an app started with --port.
func (l Layout) GatewayFile() string { return filepath.Join(l.Home, "gateway.json") }

// LockFile is $ATRIUM_HOME/app.lock: the running app holds a lock on it
// (package applock), so a second app on the same state dir is refused.
func (l Layout) LockFile() string { return filepath.Join(l.Home, "app.lock") }

// LogsDir is $ATRIUM_HOME/logs.
func (l Layout) LogsDir() string { return filepath.Join(l.Home, "logs") }

// AuditDir is $ATRIUM_HOME/audit: the audit log's day files (SPEC §5.1
// "Audit": YYYY-MM-DD.jsonl).
func (l Layout) AuditDir() string { return filepath.Join(l.Home, "audit") }

// KeysDir is $ATRIUM_HOME/keys (mode 0700): the gateway's identity key and
// its TLS certificate (package gwid), files of mode 0600.
func (l Layout) KeysDir() string { return filepath.Join(l.Home, "keys") }

// MediaDir is $ATRIUM_HOME/media (mode 0700): photos, clips and screen
// recordings from nodes, each beside its JSON sidecar, and the transfers
// still under way in media/.partial (package media, SPEC §7, issue 22).
func (l Layout) MediaDir() string { return filepath.Join(l.Home, "media") }

// IndexRoot is $ATRIUM_HOME/index.
func (l Layout) IndexRoot() string { return filepath.Join(l.Home, "index") }

// IndexDir is the search index of this layout's workspace:
// $ATRIUM_HOME/index/<first 16 hex of sha256(workspace path)>. Each workspace
// gets its own index, so switching workspaces never mixes them.
func (l Layout) IndexDir() string {
	sum := sha256.Sum256([]byte(l.Workspace))
	return filepath.Join(l.IndexRoot(), hex.EncodeToString(sum[:8]))
}
