package atrium

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/model"
)

// settings implements api.Settings over config.json (SPEC §9): it reads
// and patches the file through config.Store and applies what it can to the
// running app at once (the main model, profile models for new instances,
// exec approvals); what needs a restart is reported, never half applied.
type settings struct {
	a     *App
	store *config.Store
	// local is where DetectLocal looks (nil: model.LocalCandidates).
	local []model.LocalCandidate
}

// config is the settings in force.
func (a *App) config() config.Config { return *a.conf.Load() }

// Settings returns the settings in force (config.json as last loaded or
// patched through the gateway).
func (a *App) Settings() config.Config { return a.config() }

func (s *settings) Get(ctx context.Context) (api.SettingsView, error) {
	// The file may have been edited by hand since: show what is on disk.
	c, err := s.store.Load()
	if err != nil {
		return api.SettingsView{}, err
	}
	return s.view(c, nil)
}

func (s *settings) view(c config.Config, pending []string) (api.SettingsView, error) {
	red, err := config.Redact(c)
	if err != nil {
		return api.SettingsView{}, err
	}
	st := s.a.Memory.Status()
	return api.SettingsView{
		Path:   s.store.Path(),
		Config: red,
		Model: api.ModelInUse{Provider: s.a.model().Provider, Model: s.a.model().Model, BaseURL: s.a.model().BaseURL,
			Reason: s.a.modelReason(), ReasonCode: model.ReasonCode(s.a.modelReason()), VisionInfo: s.a.vision()},
		Gateway:   s.a.gatewayInUse(),
		Embedding: api.EmbeddingInUse{Provider: st.Provider, Model: st.Model, Dims: st.Dims, Files: st.Files, Chunks: st.Chunks},
		Heartbeat: s.a.heartbeatInUse(c),
		Rewrite:   s.a.Memory.RewriteStats(),
		Restart:   pending,
	}, nil
}

func (s *settings) Patch(ctx context.Context, patch json.RawMessage) (api.SettingsView, error) {
	before, after, err := s.store.Patch(patch)
	if err != nil {
		return api.SettingsView{}, err
	}
	a := s.a
	a.conf.Store(&after)
	var restart []string
	if !reflect.DeepEqual(before.Model, after.Model) || !reflect.DeepEqual(before.ProfileModel(acl.MainRole), after.ProfileModel(acl.MainRole)) {
		if err := a.applyMainModel(ctx); err != nil {
			return api.SettingsView{}, err
		}
	}
	if before.Sessions != after.Sessions {
		a.applySessions()
	}
	if err := a.applyHeartbeat(); err != nil {
		return api.SettingsView{}, err
	}
	if before.Gateway != after.Gateway {
		restart = append(restart, "gateway")
	}
	if before.Memory.Embedding != after.Memory.Embedding {
		restart = append(restart, "memory.embedding")
	}
	if before.Memory.Search != after.Memory.Search {
		restart = append(restart, "memory.search")
	}
	a.log.Info("settings changed", "path", s.store.Path(), "restart", restart)
	s.a.pendingRestart(restart)
	return s.view(after, s.a.pendingRestart(nil))
}

// applyMainModel detects the main profile's model from the settings in
// force and hands it to chat (runs already going keep theirs).
func (a *App) applyMainModel(ctx context.Context) error {
	cfg := a.config()
	m, why, err := model.Detect(ctx, cfg.Model, model.DetectOptions{Getenv: a.getenv, Logger: a.log})
	if err != nil {
		a.log.Warn("model unavailable", "err", err)
	}
	if pm, pwhy := ProfileModel(a.Layout.Workspace, cfg, m, acl.MainRole, a.getenv, a.log); pm != m {
		m, why = pm, pwhy
	}
	m, vision := withVision(ctx, m)
	p, err := model.FromConfig(m, model.OpenAIOptions{Logger: a.log})
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := a.Chat.SetModel(p, m.ContextWindow); err != nil {
		return err
	}
	a.mu.Lock()
	a.Model, a.ModelReason, a.Vision = m, why, vision
	a.mu.Unlock()
	a.Gateway.Broadcast(api.EventSettingsChanged, map[string]any{"model": map[string]string{"provider": m.Provider, "model": m.Model}})
	return nil
}

func (a *App) model() model.Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.Model
}

// vision is whether the main profile's model takes images, as detected.
func (a *App) vision() model.VisionInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.Vision
}

// withVision finds out whether m's model takes images (model.DetectVision:
// config.json's "vision", else what the server says, else unknown) and
// returns m with Vision set when known, for FromConfig.
func withVision(ctx context.Context, m model.Config) (model.Config, model.VisionInfo) {
	info := model.DetectVision(ctx, m, model.DetectOptions{})
	return model.WithVision(m, info), info
}

func (a *App) modelReason() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ModelReason
}

// pendingRestart adds keys to the settings waiting for a restart and
// returns them all.
func (a *App) pendingRestart(keys []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range keys {
		if !contains(a.restart, k) {
			a.restart = append(a.restart, k)
		}
	}
	return append([]string{}, a.restart...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// target returns the stored model block the request is about, with the
// request's fields on top. The stored API key is kept only while the
// request names the same provider and base URL: a key is never sent to a
// server the person has not saved it for.
func (s *settings) target(r api.ModelRequest) (model.Config, error) {
	c := s.a.config()
	var stored model.Config
	switch {
	case r.Profile == "" || r.Profile == acl.MainRole && reflect.DeepEqual(c.ProfileModel(acl.MainRole), model.Config{}):
		stored = c.Model
	default:
		if err := acl.ValidateRole(r.Profile); err != nil {
			return model.Config{}, fmt.Errorf("%w: %v", config.ErrInvalid, err)
		}
		stored = c.ProfileModel(r.Profile)
		if stored.Provider == "" && stored.BaseURL == "" && stored.APIKey == "" {
			stored.Provider, stored.BaseURL, stored.APIKey = c.Model.Provider, c.Model.BaseURL, c.Model.APIKey
		}
	}
	out := stored
	if r.Provider != "" || r.BaseURL != "" {
		out.Provider, out.BaseURL = r.Provider, r.BaseURL
		if out.Provider != stored.Provider || out.BaseURL != stored.BaseURL {
			out.APIKey = ""
		}
	}
	if r.APIKey != "" {
		out.APIKey = r.APIKey
	}
	if r.Model != "" {
		out.Model = r.Model
	}
	if err := out.Validate(); err != nil {
		return model.Config{}, fmt.Errorf("%w: %v", config.ErrInvalid, err)
	}
	return out, nil
}

func (s *settings) Models(ctx context.Context, r api.ModelRequest) ([]string, error) {
	cfg, err := s.target(r)
	if err != nil {
		return nil, err
	}
	if cfg.Provider == "" {
		cfg.Provider = model.ProviderOpenAI
	}
	if cfg.APIKey == "" {
		cfg.APIKey = s.a.getenv(envKey(cfg.Provider))
	}
	return model.ListModels(ctx, cfg, model.DetectOptions{})
}

func (s *settings) Test(ctx context.Context, r api.ModelRequest) (model.TestResult, error) {
	cfg, err := s.target(r)
	if err != nil {
		return model.TestResult{}, err
	}
	// Complete it as the app would (environment, the server's first model).
	done, _, err := model.Detect(ctx, cfg, model.DetectOptions{Getenv: s.a.getenv, Logger: s.a.log})
	if err != nil {
		return model.TestResult{Provider: cfg.Provider, Model: cfg.Model}, err
	}
	return model.TestCall(ctx, done, r.Prompt, model.OpenAIOptions{Logger: s.a.log})
}

func (s *settings) Local(ctx context.Context) []model.LocalServer {
	return model.DetectLocal(ctx, s.local, model.DetectOptions{})
}

// envKey names the environment variable of provider's API key ("" for
// providers without one).
func envKey(provider string) string {
	switch provider {
	case model.ProviderOpenAI:
		return "OPENAI_API_KEY"
	case model.ProviderAnthropic:
		return "ANTHROPIC_API_KEY"
	}
	return ""
}
