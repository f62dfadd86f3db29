// Package config reads $ATRIUM_HOME/config.json, the person's settings
// (SPEC §1). A missing file means the embedded defaults; a malformed file is
// an error naming the file, line and column, never a silent fallback.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/heartbeat"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/talk"
)

// DefaultPort is the gateway's default TCP port (SPEC §3).
const DefaultPort = 18789

// Config is the whole config.json. Zero values mean "use the default".
type Config struct {
	// Workspace is the folder of the Markdown memory (SPEC §4.1), chosen
	// in the window on the first start (setup.choose) or by hand: an
	// absolute path, or one starting with "~/" (the user's home). Empty:
	// $ATRIUM_WORKSPACE, else the first-start screen (the app) or ~/Atrium
	// (atrium serve). The --workspace flag and $ATRIUM_WORKSPACE win over it.
	Workspace string `json:"workspace,omitempty"`
	// Model selects the chat model (SPEC §6). Empty Provider = auto-detect:
	// env OPENAI_API_KEY/OPENAI_BASE_URL, then ANTHROPIC_API_KEY, then a
	// local Ollama, then offline (model.Detect).
	Model model.Config `json:"model"`
	// Profiles holds per-profile settings by role name (SPEC §6 "configured
	// per profile"), e.g. {"writer": {"model": {"provider": "anthropic",
	// "model": "claude-haiku-4-5"}}}. See ProfileModel.
	Profiles map[string]Profile `json:"profiles,omitempty"`
	// Gateway settings.
	Gateway Gateway `json:"gateway"`
	// Memory settings (SPEC §4).
	Memory Memory `json:"memory"`
	// Agents holds the agents' tool settings (SPEC §6).
	Agents Agents `json:"agents"`
	// Sessions holds the chat session lifecycle (SPEC §6).
	Sessions Sessions `json:"sessions"`
	// Talk holds the speech servers and voice of Talk (issue 27;
	// docs/PROTOCOL.md "Talk"): talk.Settings, validated by its Validate,
	// its apiKeys redacted like the models'.
	Talk talk.Settings `json:"talk"`
}

// Session reset modes of Sessions.Reset (SPEC §6 "Session lifecycle").
const (
	ResetDaily     = "daily"
	ResetIdle      = "idle"
	ResetDailyIdle = "daily+idle"
	ResetOff       = "off"
)

// Sessions is "sessions" in config.json, for example
//
//	{"reset": "daily+idle", "dailyAt": "04:00", "idleMinutes": 120}
//
// Reset: "daily" (default: at DailyAt local time every day), "idle"
// (after IdleMinutes without a message), "daily+idle" (whichever comes
// first) or "off" (only `/new` and `/reset` close a session). DailyAt is
// "HH:MM", 24 h, default "04:00" (SPEC §6). IdleMinutes: 1 to 10080 (a
// week); required by the idle modes. Applied at once, no restart.
type Sessions struct {
	Reset       string `json:"reset,omitempty"`
	DailyAt     string `json:"dailyAt,omitempty"`
	IdleMinutes int    `json:"idleMinutes,omitempty"`
}

// validate checks sessions.
func (s Sessions) validate() error {
	switch s.Reset {
	case "", ResetDaily, ResetIdle, ResetDailyIdle, ResetOff:
	default:
		return fmt.Errorf("sessions.reset %q: want daily, idle, daily+idle or off", s.Reset)
	}
	if s.DailyAt != "" {
		if t, err := time.Parse("15:04", s.DailyAt); err != nil || t.Format("15:04") != s.DailyAt {
			return fmt.Errorf("sessions.dailyAt %q: want HH:MM (24 h, e.g. 04:00)", s.DailyAt)
		}
	}
	if s.IdleMinutes < 0 || s.IdleMinutes > 10080 {
		return fmt.Errorf("sessions.idleMinutes %d: want 1 to 10080", s.IdleMinutes)
	}
	if (s.Reset == ResetIdle || s.Reset == ResetDailyIdle) && s.IdleMinutes == 0 {
		return fmt.Errorf("sessions.reset %s needs sessions.idleMinutes (1 to 10080)", s.Reset)
	}
	return nil
}

// Agents is "agents" in config.json.
type Agents struct {
	// Exec holds the exec approvals of the agents' exec tool.
	Exec Exec `json:"exec"`
	// Heartbeat schedules main's heartbeat turn (issue 24 item 7).
	Heartbeat Heartbeat `json:"heartbeat"`
}

// Heartbeat is "agents.heartbeat" in config.json, for example
// {"enabled": true, "every": "30m", "activeHours": {"start": "08:00", "end": "22:00"}}.
// Enabled unset: on exactly when the workspace's HEARTBEAT.md has
// something to do (OpenClaw workspaces carry one), else off until the
// person turns it on. Every is a Go duration of at least a minute (default
// 30m, heartbeat.DefaultEvery). ActiveHours in local time, "HH:MM"
// (00:00…24:00); unset or equal: all day.
type Heartbeat struct {
	Enabled     *bool       `json:"enabled,omitempty"`
	Every       string      `json:"every,omitempty"`
	ActiveHours ActiveHours `json:"activeHours"`
}

// ActiveHours is "agents.heartbeat.activeHours".
type ActiveHours struct {
	Start string `json:"start,omitempty"`
	End   string `json:"end,omitempty"`
}

// Settings returns the schedule agents.heartbeat describes; auto is what
// an unset Enabled means (the workspace uses HEARTBEAT.md). Errors name the
// key and wrap heartbeat.ErrBadSettings.
func (h Heartbeat) Settings(auto bool) (heartbeat.Settings, error) {
	s := heartbeat.Settings{On: auto}
	if h.Enabled != nil {
		s.On = *h.Enabled
	}
	if h.Every != "" {
		d, err := time.ParseDuration(h.Every)
		if err != nil {
			return s, fmt.Errorf("agents.heartbeat.every %q: %w: want a duration such as 30m or 1h", h.Every, heartbeat.ErrBadSettings)
		}
		if d < heartbeat.MinEvery {
			return s, fmt.Errorf("agents.heartbeat.every %q: %w: at least %v", h.Every, heartbeat.ErrBadSettings, heartbeat.MinEvery)
		}
		s.Every = d
	}
	for _, f := range []struct {
		key string
		in  string
		out *int
	}{{"start", h.ActiveHours.Start, &s.Start}, {"end", h.ActiveHours.End, &s.End}} {
		if f.in == "" {
			continue
		}
		m, err := heartbeat.ParseClock(f.in)
		if err != nil {
			return s, fmt.Errorf("agents.heartbeat.activeHours.%s: %w", f.key, err)
		}
		*f.out = m
	}
	return s, nil
}

// Exec is "agents.exec" in config.json (SPEC §6 "exec approvals"), for
// example {"approval": "allowlist", "allowlist": ["/usr/bin/git", "/usr/bin/ls"]}.
// Approval is deny, allowlist, ask or full; empty means ask (every command
// is put to the person, after the session's L2 grant). Allowlist holds
// absolute binary path globs for allowlist. Commands run in a bubblewrap
// sandbox limited to the workspace where bwrap is installed.
type Exec struct {
	Approval  string   `json:"approval,omitempty"`
	Allowlist []string `json:"allowlist,omitempty"`
}

// validate checks agents.exec.
func (e Exec) validate() error {
	switch e.Approval {
	case "", "deny", "allowlist", "ask", "full":
	default:
		return fmt.Errorf("agents.exec.approval %q: want deny, allowlist, ask or full", e.Approval)
	}
	for _, g := range e.Allowlist {
		if !filepath.IsAbs(g) {
			return fmt.Errorf("agents.exec.allowlist %q: want an absolute path glob", g)
		}
		if _, err := filepath.Match(g, ""); err != nil {
			return fmt.Errorf("agents.exec.allowlist %q: %w", g, err)
		}
	}
	return nil
}

// Profile is "profiles.<role>" in config.json.
type Profile struct {
	// Model overrides the app's model for this role, field by field (see
	// model.ForProfile); it may hold the API key for its server. Empty
	// fields fall back to the role's persona front matter, then to the
	// app's model.
	Model model.Config `json:"model"`
}

// ProfileModel returns profiles.<role>.model (the zero Config when the
// role has none).
func (c Config) ProfileModel(role string) model.Config {
	return c.Profiles[role].Model
}

// Memory holds the memory engine's settings.
type Memory struct {
	// Embedding selects the embedding provider of the vector leg (SPEC
	// §4.2). The zero value is the offline builtin embedder.
	Embedding Embedding `json:"embedding"`
	// Search holds the ranking options of memory_search (SPEC §4.3).
	Search Search `json:"search"`
}

// Search is "memory.search" in config.json, for example
//
//	{"vectorWeight": 0.5, "mmr": true, "temporalDecay": true, "halfLifeDays": 14}
//
// Zero values mean the measured defaults (package backend/memory, Ranking):
// vector weight 0.3 for the lexical builtin embedder and 0.7 (SPEC) for
// ollama/openai; MMR off (λ 0.7 when on); temporal decay off (half-life 30
// days when on); rewrite off (timeout 4000 ms when on). docs/BENCHMARKS.md
// shows what each option does.
type Search struct {
	VectorWeight  float64 `json:"vectorWeight,omitempty"`
	MMR           bool    `json:"mmr,omitempty"`
	MMRLambda     float64 `json:"mmrLambda,omitempty"`
	TemporalDecay bool    `json:"temporalDecay,omitempty"`
	HalfLifeDays  float64 `json:"halfLifeDays,omitempty"`
	// Rewrite lets the app's chat model put a question the index answers
	// weakly (confidence low or medium) into other words, searched too
	// (issue 25 item 5; memory.Options.Rewrite). Off by default: it sends
	// the question to the model and costs its latency.
	Rewrite bool `json:"rewrite,omitempty"`
	// RewriteTimeoutMs bounds the model's rewrite in milliseconds; past
	// it the search answers with its plain results. 0: 4000; at most
	// MaxRewriteTimeoutMs.
	RewriteTimeoutMs int `json:"rewriteTimeoutMs,omitempty"`
}

// MaxRewriteTimeoutMs is the largest memory.search.rewriteTimeoutMs.
const MaxRewriteTimeoutMs = 30000

// validate checks the ranges of memory.search.
func (s Search) validate() error {
	switch {
	case s.VectorWeight < 0 || s.VectorWeight > 1:
		return fmt.Errorf("memory.search.vectorWeight %v is not in [0,1]", s.VectorWeight)
	case s.MMRLambda < 0 || s.MMRLambda > 1:
		return fmt.Errorf("memory.search.mmrLambda %v is not in [0,1]", s.MMRLambda)
	case s.HalfLifeDays < 0 || s.HalfLifeDays > 36500:
		return fmt.Errorf("memory.search.halfLifeDays %v is not a number of days in (0, 36500]", s.HalfLifeDays)
	case s.RewriteTimeoutMs < 0 || s.RewriteTimeoutMs > MaxRewriteTimeoutMs:
		return fmt.Errorf("memory.search.rewriteTimeoutMs %d out of range 0..%d", s.RewriteTimeoutMs, MaxRewriteTimeoutMs)
	}
	return nil
}

// Embedding is "memory.embedding" in config.json, for example
//
//	{"provider": "ollama", "model": "nomic-embed-text", "dims": 768}
//	{"provider": "openai", "model": "text-embedding-3-small", "apiKey": "sk-..."}
//
// Zero values mean the provider's defaults (package backend/memory/embed):
// builtin 384 dims; ollama at http://127.0.0.1:11434 with
// nomic-embed-text; openai at https://api.openai.com/v1 (or
// $OPENAI_BASE_URL) with text-embedding-3-small and $OPENAI_API_KEY;
// dims learned from the provider; timeout 30 s; 512 input tokens.
// Changing provider, model or dims rebuilds the index.
type Embedding struct {
	// Provider: "builtin" (default), "ollama" or "openai" (any
	// OpenAI-compatible /v1/embeddings server).
	Provider string `json:"provider,omitempty"`
	// Model name at the provider (builtin has one: "hashed-ngram-v3"; earlier names are accepted).
	Model string `json:"model,omitempty"`
	// BaseURL of the API (ollama, openai); for openai it includes "/v1".
	BaseURL string `json:"baseUrl,omitempty"`
	// APIKey (openai); empty: $OPENAI_API_KEY.
	APIKey string `json:"apiKey,omitempty"`
	// Dims is the vector length (0: builtin 384, others learned).
	Dims int `json:"dims,omitempty"`
	// TimeoutSeconds bounds each request (ollama, openai); 0: 30 s.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// MaxInputTokens is the provider's input limit in estimated tokens
	// (ollama, openai); 0: 512. Chunks are sized to fit it.
	MaxInputTokens int `json:"maxInputTokens,omitempty"`
}

// Limits checked by Load for memory.embedding.
const (
	MaxEmbeddingDims      = 65536
	MaxEmbeddingTimeout   = 3600 // seconds
	MaxEmbeddingMaxTokens = 1 << 20
)

// validate checks the shape of memory.embedding; the provider packages
// check the rest when the embedder is built.
func (e Embedding) validate() error {
	switch e.Provider {
	case "", "builtin":
		if e.BaseURL != "" || e.APIKey != "" || e.TimeoutSeconds != 0 || e.MaxInputTokens != 0 {
			return errors.New("memory.embedding: baseUrl, apiKey, timeoutSeconds and maxInputTokens are not used by the builtin provider (set \"provider\": \"ollama\" or \"openai\")")
		}
	case "ollama", "openai":
	default:
		return fmt.Errorf("memory.embedding.provider %q is not one of builtin, ollama, openai", e.Provider)
	}
	if e.Dims < 0 || e.Dims > MaxEmbeddingDims {
		return fmt.Errorf("memory.embedding.dims %d out of range 0..%d", e.Dims, MaxEmbeddingDims)
	}
	if e.TimeoutSeconds < 0 || e.TimeoutSeconds > MaxEmbeddingTimeout {
		return fmt.Errorf("memory.embedding.timeoutSeconds %d out of range 0..%d", e.TimeoutSeconds, MaxEmbeddingTimeout)
	}
	if e.MaxInputTokens < 0 || e.MaxInputTokens > MaxEmbeddingMaxTokens {
		return fmt.Errorf("memory.embedding.maxInputTokens %d out of range 0..%d", e.MaxInputTokens, MaxEmbeddingMaxTokens)
	}
	if e.BaseURL != "" {
		u, err := url.Parse(e.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("memory.embedding.baseUrl %q is not an http(s) URL", e.BaseURL)
		}
		if u.User != nil {
			return fmt.Errorf("memory.embedding.baseUrl %s has a user name or password in it, which would be shown in Settings, errors and logs: put the key in apiKey instead", u.Redacted())
		}
		if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			return fmt.Errorf("memory.embedding.baseUrl %s://%s%s has a query or fragment (?… or #…) in it: the API's paths are added to the base URL, and a key there would be shown in Settings, errors and logs; put the key in apiKey instead", u.Scheme, u.Host, u.Path)
		}
	}
	return nil
}

// Gateway holds the listener settings.
type Gateway struct {
	// Port of every listener; default DefaultPort.
	Port int `json:"port,omitempty"`
	// Bind says where the gateway listens (issue 16): "" or BindLoopback
	// (the default) — plain HTTP on 127.0.0.1 only; BindLAN — also HTTPS/WSS
	// on every non-loopback unicast address of the up interfaces; or one IP
	// literal — also HTTPS/WSS on that address ("127.0.0.2" is how tests
	// run TLS). The plain 127.0.0.1 listener (the window, the CLI) is always
	// there. A change takes effect at the next start.
	Bind string `json:"bind,omitempty"`
}

// gateway.bind values besides an IP literal.
const (
	BindLoopback = "loopback"
	BindLAN      = "lan"
)

// CheckBind validates a gateway.bind value (or the --bind flag): "",
// "loopback", "lan" or one IP literal that can be listened on and is not
// 127.0.0.1 (the plain listener's own address). The error says what is
// accepted.
func CheckBind(bind string) error {
	switch bind {
	case "", BindLoopback, BindLAN:
		return nil
	}
	ip, err := netip.ParseAddr(bind)
	switch {
	case err != nil || ip.Zone() != "":
		return fmt.Errorf("gateway.bind %q: want %q, %q or one IP address of this machine", bind, BindLoopback, BindLAN)
	case ip.IsUnspecified():
		return fmt.Errorf("gateway.bind %q: use %q for every LAN address", bind, BindLAN)
	case ip.IsMulticast():
		return fmt.Errorf("gateway.bind %q is a multicast address", bind)
	case ip.Unmap() == netip.MustParseAddr("127.0.0.1"):
		return fmt.Errorf("gateway.bind %q is the plain loopback listener's address: use %q, or another address such as 127.0.0.2 for TLS on loopback", bind, BindLoopback)
	}
	return nil
}

// validate checks gateway.port and gateway.bind.
func (g Gateway) validate() error {
	if g.Port < 0 || g.Port > 65535 {
		return fmt.Errorf("gateway.port %d out of range 0..65535", g.Port)
	}
	return CheckBind(g.Bind)
}

// Load reads path. A missing file returns the zero Config and no error.
// Keys starting with "//" are the person's comments and are ignored; any
// other key Config does not have is an error naming it.
func Load(path string) (Config, error) {
	var c Config
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	// Comment keys ("//…") are the person's notes: left out here (the
	// offsets of errors below are then those of the file without them).
	if v, err := decodeOrdered(data); err == nil && hasComment(v) {
		dropKeys(v, isComment)
		if stripped, err := encodeOrdered(v); err == nil {
			data = stripped
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := position(data, se.Offset)
			return c, fmt.Errorf("config %s:%d:%d: %w", path, line, col, err)
		case errors.As(err, &te):
			line, col := position(data, te.Offset)
			return c, fmt.Errorf("config %s:%d:%d: %w", path, line, col, err)
		default:
			return c, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Validate checks every block of c: the model blocks (known provider,
// http(s) base URL), the gateway's port and bind, memory.embedding,
// memory.search, agents.exec and talk. The error names the offending key.
func (c Config) Validate() error {
	if c.Workspace != "" && !filepath.IsAbs(c.Workspace) && !strings.HasPrefix(c.Workspace, "~/") {
		return fmt.Errorf("workspace %q: want an absolute path (or one starting with ~/)", c.Workspace)
	}
	if err := c.Model.Validate(); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := c.Gateway.validate(); err != nil {
		return err
	}
	for role, p := range c.Profiles {
		if role == "" {
			return errors.New("profiles: empty role name")
		}
		if err := p.Model.Validate(); err != nil {
			return fmt.Errorf("profiles.%s.model: %w", role, err)
		}
	}
	if err := c.Memory.Embedding.validate(); err != nil {
		return err
	}
	if err := c.Memory.Search.validate(); err != nil {
		return err
	}
	if err := c.Sessions.validate(); err != nil {
		return err
	}
	if _, err := c.Agents.Heartbeat.Settings(false); err != nil {
		return err
	}
	if err := c.Talk.Validate(); err != nil {
		return err
	}
	return c.Agents.Exec.validate()
}

// WorkspaceDir is Workspace as an absolute, cleaned path ("~/" expanded
// with the user's home directory); "" when no workspace is set.
func (c Config) WorkspaceDir() (string, error) {
	w := c.Workspace
	if w == "" {
		return "", nil
	}
	if rest, ok := strings.CutPrefix(w, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("workspace %s: %w", w, err)
		}
		w = filepath.Join(home, rest)
	}
	return filepath.Clean(w), nil
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}
