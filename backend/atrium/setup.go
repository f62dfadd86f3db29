package atrium

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/paths"
)

// setupService implements api.Setup: the first start's choice of where
// memory lives (issue 17). In an app started with Options.FirstRun it
// offers ~/Atrium and an OpenClaw workspace found on this machine, takes
// the choice, writes it to config.json ("workspace", atomically, keeping
// the file as written) and ends App.Run so that the caller opens the
// workspace in this process. In a running app it reports the workspace in
// force and refuses another choice.
type setupService struct {
	a      *App
	store  *config.Store
	first  bool
	source string
	pick   func(ctx context.Context, title string) (string, error)

	mu     sync.Mutex
	chosen string
	done   chan struct{} // closed when chosen
}

func newSetupService(a *App, store *config.Store, o Options) *setupService {
	return &setupService{a: a, store: store, first: o.FirstRun, source: o.WorkspaceSource, pick: o.PickFolder,
		done: make(chan struct{})}
}

func (s *setupService) Status(ctx context.Context) (api.SetupStatus, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return api.SetupStatus{}, fmt.Errorf("setup status: %w", err)
	}
	st := api.SetupStatus{Home: home, StateDir: s.a.Layout.Home, Picker: s.pick != nil}
	s.mu.Lock()
	chosen := s.chosen
	s.mu.Unlock()
	switch {
	case !s.first:
		st.Chosen, st.Workspace, st.Source = true, s.a.Layout.Workspace, s.source
	case chosen != "":
		st.Chosen, st.Workspace, st.Source = true, chosen, "config"
	case s.source == "config":
		st.Missing = s.a.Layout.Workspace // config.json names it, and it is gone
	}
	def, err := paths.DefaultWorkspace()
	if err != nil {
		return st, fmt.Errorf("setup status: %w", err)
	}
	st.Options = append(st.Options, option("new", def, s.a))
	if oc, err := paths.OpenClawWorkspace(); err == nil {
		if o := option("openclaw", oc, s.a); o.Exists {
			st.Options = append(st.Options, o)
		}
	}
	return st, nil
}

// option describes one folder offered (what is in it when it exists).
func option(kind, dir string, a *App) api.WorkspaceOption {
	o := api.WorkspaceOption{Kind: kind, Path: dir}
	sum, err := memory.Inspect(dir)
	switch {
	case err == nil:
		o.Exists, o.WorkspaceSummary = true, sum
	case !errors.Is(err, fs.ErrNotExist):
		a.log.Warn("setup: folder not inspected", "path", dir, "err", err)
	}
	return o
}

func (s *setupService) Choose(ctx context.Context, c api.SetupChoice) (api.SetupResult, error) {
	var res api.SetupResult
	if !s.first {
		return res, fmt.Errorf("%w: memory lives in %s (from %s); to move it, change \"workspace\" in %s",
			api.ErrSetupDone, s.a.Layout.Workspace, sourceText(s.source), s.store.Path())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chosen != "" {
		return res, fmt.Errorf("%w: %s was chosen; Atrium is opening it", api.ErrSetupDone, s.chosen)
	}
	dir, err := workspaceDir(c.Path, s.a.Layout.Home)
	if err != nil {
		return res, err
	}
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return res, fmt.Errorf("%w: %s is a file, not a folder", api.ErrSetupInvalid, dir)
	case errors.Is(err, fs.ErrNotExist):
		if !c.Create {
			return res, fmt.Errorf("%w: the folder %s does not exist", api.ErrSetupInvalid, dir)
		}
		if pst, perr := os.Stat(filepath.Dir(dir)); perr != nil || !pst.IsDir() {
			return res, fmt.Errorf("%w: the folder %s does not exist, nor its parent %s", api.ErrSetupInvalid, dir, filepath.Dir(dir))
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return res, fmt.Errorf("create workspace: %w", err)
		}
		res.Created = true
	case err != nil:
		return res, fmt.Errorf("workspace %s: %w", dir, err)
	}
	patch, err := json.Marshal(map[string]string{"workspace": dir})
	if err != nil {
		return res, fmt.Errorf("encode workspace: %w", err)
	}
	if _, _, err := s.store.Patch(patch); err != nil {
		if res.Created {
			_ = os.Remove(dir)
		}
		return res, fmt.Errorf("save the workspace: %w", err)
	}
	s.a.log.Info("workspace chosen", "path", dir, "created", res.Created, "config", s.store.Path())
	s.chosen = dir
	close(s.done)
	res.Workspace, res.Restarting = dir, true
	return res, nil
}

func (s *setupService) Pick(ctx context.Context, title string) (string, error) {
	if s.pick == nil {
		return "", fmt.Errorf("%w: this UI runs in a browser; type the folder's path", api.ErrNoPicker)
	}
	if title == "" {
		title = "Atrium"
	}
	return s.pick(ctx, title)
}

// workspaceDir turns a typed folder into the workspace's absolute, clean
// path ("~" and "~/…" are the home folder) and refuses the folders that
// cannot hold memory: a relative path, a root, the home folder itself
// (everything in it would be watched), the state dir or a folder in it.
func workspaceDir(typed, stateDir string) (string, error) {
	p := strings.TrimSpace(typed)
	home, herr := os.UserHomeDir()
	if p == "~" || strings.HasPrefix(p, "~/") {
		if herr != nil {
			return "", fmt.Errorf("%w: %s: no home folder (%v)", api.ErrSetupInvalid, typed, herr)
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: %q is not a full path (start it with / or ~/)", api.ErrSetupInvalid, typed)
	}
	p = filepath.Clean(p)
	if filepath.Dir(p) == p {
		return "", fmt.Errorf("%w: %s is the root of a disk; choose a folder in it", api.ErrSetupInvalid, p)
	}
	if herr == nil && p == filepath.Clean(home) {
		return "", fmt.Errorf("%w: %s is your home folder; choose or make a folder in it (e.g. %s)", api.ErrSetupInvalid, p, filepath.Join(home, "Atrium"))
	}
	if rel, err := filepath.Rel(stateDir, p); err == nil && (rel == "." || !strings.HasPrefix(rel, "..")) {
		return "", fmt.Errorf("%w: %s is in Atrium's state folder %s", api.ErrSetupInvalid, p, stateDir)
	}
	return p, nil
}

// sourceText says where the workspace in force came from.
func sourceText(source string) string {
	switch source {
	case "flag":
		return "--workspace"
	case "env":
		return "$" + paths.EnvWorkspace
	case "config":
		return "config.json"
	}
	return "the default"
}

// Chosen is the workspace setup.choose chose in a first-run app ("" when
// none was chosen, or the app is not a first-run one).
func (a *App) Chosen() string {
	if a.setup == nil {
		return ""
	}
	a.setup.mu.Lock()
	defer a.setup.mu.Unlock()
	return a.setup.chosen
}

// runFirst serves the first-run app's gateway until ctx is done or a
// workspace is chosen.
func (a *App) runFirst(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- wrap("gateway", a.Gateway.Run(ctx)) }()
	select {
	case err := <-errc:
		return err
	case <-a.setup.done:
		a.log.Info("workspace chosen; opening it")
	}
	cancel()
	return <-errc
}
