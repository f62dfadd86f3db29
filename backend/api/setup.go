package api

import (
	"context"
	"errors"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/memory"
)

// Sentinel errors of a Setup implementation.
var (
	// ErrSetupInvalid: the chosen folder cannot be the workspace (not
	// absolute, not a folder, the state dir, the home folder itself…); the
	// message says why. INVALID_REQUEST.
	ErrSetupInvalid = errors.New("invalid workspace")
	// ErrSetupDone: a workspace is chosen already (setup.choose is for the
	// first start). CONFLICT.
	ErrSetupDone = errors.New("workspace already chosen")
	// ErrNoPicker: there is no window to show a folder dialog in (the UI in
	// a browser). UNAVAILABLE.
	ErrNoPicker = errors.New("no folder dialog")
)

// Setup is what the setup.* methods need (the first start without a
// terminal, issue 17; implemented by the wiring package). Every method is
// the person's: only operator connections reach it.
type Setup interface {
	// Status says whether a workspace is chosen and what may be offered.
	Status(ctx context.Context) (SetupStatus, error)
	// Choose makes path the workspace (config.json "workspace") and has the
	// app open it; errors wrap ErrSetupInvalid or ErrSetupDone.
	Choose(ctx context.Context, c SetupChoice) (SetupResult, error)
	// Pick shows the window's native folder dialog and returns the folder
	// chosen ("" when cancelled); ErrNoPicker without a window.
	Pick(ctx context.Context, title string) (string, error)
}

// SetupStatus is the payload of setup.status.
type SetupStatus struct {
	// Chosen: a workspace is in force (Workspace, from Source: "flag",
	// "env", "config" or "default" — ~/Atrium used before); false on the
	// first start, when the window asks.
	Chosen    bool   `json:"chosen"`
	Workspace string `json:"workspace,omitempty"`
	Source    string `json:"source,omitempty"`
	// Missing is the workspace config.json names when that folder is gone
	// (the window then asks again).
	Missing string `json:"missing,omitempty"`
	// Home is the person's home folder, StateDir $ATRIUM_HOME (neither can
	// be the workspace).
	Home     string `json:"home"`
	StateDir string `json:"stateDir"`
	// Options are the folders offered: "new" (~/Atrium) always, "openclaw"
	// when an OpenClaw workspace was found on this machine.
	Options []WorkspaceOption `json:"options"`
	// Picker: the window can show a native folder dialog (setup.pick).
	Picker bool `json:"picker"`
}

// WorkspaceOption is one folder setup.status offers, with what is in it.
type WorkspaceOption struct {
	Kind   string `json:"kind"` // "new" or "openclaw"
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	memory.WorkspaceSummary
}

// SetupChoice is setup.choose's params: the folder (absolute, or starting
// with "~/") and whether a missing one may be created (its parent must
// exist).
type SetupChoice struct {
	Path   string `json:"path"`
	Create bool   `json:"create"`
}

// SetupResult is setup.choose's payload. Restarting: the app now closes
// this connection and opens the workspace (the UI reconnects by itself).
type SetupResult struct {
	Workspace  string `json:"workspace"`
	Created    bool   `json:"created"`
	Restarting bool   `json:"restarting"`
}

// SetupOnly binds the gateway of an app that waits for the first start's
// choice: health (memory state "setup"), app.focus and the setup.*
// methods, nothing else (there is no workspace yet).
func SetupOnly(g *gateway.Server, s Setup, focus func(), version string, started time.Time) {
	g.Handle("health", gateway.Read(gateway.Everyone), func(ctx context.Context, c *gateway.Call) (any, error) {
		return map[string]any{"ok": true, "version": version, "uptimeMs": time.Since(started).Milliseconds(),
			"memory": map[string]any{"state": "setup"}}, nil
	})
	registerFocus(g, focus)
	registerSetup(g, s)
}

// registerSetup adds setup.status, setup.choose and setup.pick: operator
// connections only (a node gets FORBIDDEN). setup.choose is a write (it
// needs an idempotencyKey).
func registerSetup(g *gateway.Server, s Setup) {
	g.Handle("setup.status", gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		st, err := s.Status(ctx)
		return st, setupErr(err)
	})
	g.Handle("setup.choose", gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p SetupChoice
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if p.Path == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "setup.choose: path (the workspace folder) is required")
		}
		res, err := s.Choose(ctx, p)
		return res, setupErr(err)
	})
	g.Handle("setup.pick", gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			Title string `json:"title"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		path, err := s.Pick(ctx, p.Title)
		if err != nil {
			return nil, setupErr(err)
		}
		return map[string]any{"path": path}, nil
	})
}

// registerFocus adds app.focus: a second start of the desktop app asks the
// running one to show its window instead of opening another (SPEC §1; the
// person only).
func registerFocus(g *gateway.Server, focus func()) {
	g.Handle("app.focus", gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		if focus == nil {
			return map[string]any{"focused": false}, nil
		}
		focus()
		return map[string]any{"focused": true}, nil
	})
}

func setupErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrSetupInvalid):
		return &gateway.Error{Code: gateway.CodeInvalidRequest, Message: err.Error()}
	case errors.Is(err, ErrSetupDone):
		return &gateway.Error{Code: gateway.CodeConflict, Message: err.Error()}
	case errors.Is(err, ErrNoPicker):
		return &gateway.Error{Code: gateway.CodeUnavailable, Message: err.Error()}
	}
	return mapErr(err)
}
