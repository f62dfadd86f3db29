// Package atrium is the wiring package: it builds every backend part in
// order — paths, config, operator token, gateway transport, state db,
// ACL holder, audit log and guard (SPEC §5.1), memory engine (with its
// file versions in the state db and the guard as its Authorize hook), history, model
// provider, chat service (whose runs on profile instances go to the
// worker pool, remote.go), collaborations (SPEC §5.4, in the state db), method bindings — and runs the long-lived ones. Both `atrium serve` and the desktop window start
// the app through it. It holds no business logic.
package atrium

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/agent/tools"
	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/applock"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/canvas"
	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/collab"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/devices"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/gwid"
	"github.com/atrium-dev/atrium/backend/heartbeat"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/live"
	"github.com/atrium-dev/atrium/backend/mcpserve"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/versions"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/atrium-dev/atrium/backend/pairing"
	"github.com/atrium-dev/atrium/backend/paths"
	"github.com/atrium-dev/atrium/backend/safefile"
	"github.com/atrium-dev/atrium/backend/statedb"
	"github.com/atrium-dev/atrium/backend/talk"
	"github.com/atrium-dev/atrium/backend/upload"
	"github.com/atrium-dev/atrium/backend/worker"
)

// Options configures New.
type Options struct {
	// Layout is the resolved state dir and workspace (required).
	Layout paths.Layout
	// Port on 127.0.0.1; 0 means config.json's gateway.port, else
	// config.DefaultPort. Use -1 for an ephemeral port (tests).
	Port int
	// UI is the built frontend served at "/" (nil: a page saying it is not built).
	UI fs.FS
	// A2UISchemas are the official A2UI schemas (frontend.A2UISchemas())
	// the Canvas validates every pushed line against. Nil: no Canvas
	// (canvas.* not served).
	A2UISchemas fs.FS
	// Version is reported by health and hello-ok.
	Version string
	// AllowedOrigins are extra WebSocket origins (the desktop window's).
	AllowedOrigins []string
	// Getenv reads the environment for model detection (default os.Getenv).
	Getenv func(string) string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// RescanInterval overrides the memory engine's periodic rescan (0 = its default).
	RescanInterval time.Duration
	// AnyPortIfBusy makes Listen fall back to a free port when the chosen
	// one is taken (the desktop window is handed the address; browsers and
	// the CLI find it in $ATRIUM_HOME/gateway.json).
	AnyPortIfBusy bool
	// FetchAllowPrivate lets the agents' web_fetch reach loopback and
	// private addresses (tests against local servers). Default false.
	FetchAllowPrivate bool
	// LocalModelServers is where config.detect looks for model servers on
	// this machine (nil: model.LocalCandidates, Ollama, LM Studio and
	// llama.cpp on 127.0.0.1).
	LocalModelServers []model.LocalCandidate
	// TalkNow is the clock of Talk's bounds (an utterance's 60 s, a talk's
	// 10 min of silence); nil: time.Now. Tests advance their own.
	TalkNow func() time.Time
	// TalkSpeechStall ends a talk as slow_reader when its page leaves more
	// than talk.MaxSpeechQueued (1 MiB) of the voice unread this long
	// (talk.Options.SpeechStall; 0: talk.DefaultSpeechStall, 30 s).
	TalkSpeechStall time.Duration
	// TalkSpeechStart bounds the wait for a speech server's answer to
	// begin; past it the reply goes to the page's own voice
	// (talk.Options.SpeechStart; 0: talk.DefaultSpeechStart, 15 s).
	TalkSpeechStart time.Duration
	// Focus brings the app's window to the front (app.focus: a second
	// double-click asks the running app for it); nil: there is no window.
	Focus func()
	// FirstRun: no workspace was chosen yet (Layout.Workspace is only the
	// default offered, and is not created). New then builds the gateway
	// with health, app.focus and the setup.* methods only; Run returns nil
	// once setup.choose chose a workspace (App.Chosen), which it wrote to
	// config.json, and the caller starts the app on it in this process.
	FirstRun bool
	// WorkspaceSource says where Layout.Workspace came from: "flag",
	// "env", "config" or "default" (setup.status shows it).
	WorkspaceSource string
	// PickFolder shows the window's native folder dialog and returns the
	// folder chosen ("" when cancelled) for setup.pick; nil: no window.
	PickFolder func(ctx context.Context, title string) (string, error)
	// Bind overrides config.json's gateway.bind ("loopback", "lan" or an IP
	// literal; see config.Gateway.Bind); "" keeps config.json's, default
	// loopback.
	Bind string
	// MDNSInterfaces names the interfaces the gateway is advertised on by
	// mDNS when not bound to loopback (nil: the multicast interfaces holding
	// the served addresses; see discovery.AdvertiserOptions.Interfaces).
	MDNSInterfaces []string
	// MaxLANPending caps the connections to the LAN listeners, all
	// addresses together, that are not authenticated: every connection from
	// its accept until it closes or a WebSocket on it completes its
	// handshake (before its first byte, in its TLS handshake, sending a
	// request, waiting for or reading its answer, idle between keep-alive
	// requests, in the WebSocket handshake); default DefaultMaxLANPending.
	// MaxLANPendingPerAddr caps them per remote address, an IPv6 address
	// counted by its /64 (default DefaultMaxLANPendingPerAddr). A
	// connection over a cap is closed at once.
	MaxLANPending, MaxLANPendingPerAddr int
	// MaxLANConns caps the connections open on the LAN listeners,
	// authenticated or not (default DefaultMaxLANConns); it is lowered to
	// what the process's open-file limit leaves after a reserve of a
	// quarter of it (at least 256, at most half) for everything else, the
	// 127.0.0.1 listener first. A connection over it, or one given a file
	// descriptor inside that reserve, is closed at once.
	MaxLANConns int
	// FFmpeg is the ffmpeg binary that remuxes a stored WebM clip or
	// recording (media.FFmpegRemux: stream copy, so it names its duration
	// and can be seeked); "" looks for "ffmpeg" on PATH when the first clip
	// is stored; "none" turns the remux off (the clip stays as sent).
	FFmpeg string
	// HeartbeatClock is the heartbeat scheduler's clock (tests move it by
	// hand); nil: the system clock.
	HeartbeatClock heartbeat.Clock
	// HeartbeatLocation is where agents.heartbeat.activeHours are read;
	// nil: time.Local.
	HeartbeatLocation *time.Location
}

// App is a built Atrium backend. Fields are read-only after New.
type App struct {
	Layout paths.Layout
	// Config is config.json as loaded at start (Settings: as in force).
	Config  config.Config
	Token   string
	Gateway *gateway.Server
	Memory  *memory.Manager
	History *history.Store
	Chat    *chat.Service
	// Heartbeat schedules main's heartbeat turn (agents.heartbeat,
	// heartbeat.go).
	Heartbeat *heartbeat.Scheduler
	// Media is the media store in $ATRIUM_HOME/media (photos, clips and
	// recordings from nodes, SPEC §7): media.get serves it, the nodes
	// tool shows its pictures to the model.
	Media *media.Store
	// ACL holds the policy of <workspace>/memory/.acl (reloaded by Run),
	// Audit the audit log in $ATRIUM_HOME/audit, Guard the enforcement
	// point in front of memory (SPEC §5.1).
	ACL   *acl.Holder
	Audit *audit.Log
	Guard *guard.Guard
	// Collab runs collaborations between roles (SPEC §5.4), kept in state.db.
	Collab *collab.Service
	// collabs lets agents collaborate through the ask_role tool (collabs.go).
	collabs *collabBroker
	// Pool is the light profile index and the profile instances, each a
	// worker process (SPEC §3, §6; profiles.spawn/stop).
	Pool *worker.Pool
	// Identity is the gateway's long-lived key (its id is what devices
	// sign); Pairing the one pairing store (codes, requests, paired
	// devices, in state.db); Devices admits devices and serves device.*
	// (devices.go).
	Identity *gwid.Identity
	Pairing  *pairing.Service
	Devices  *devices.Service
	// PairInfoFunc, when set before Run (by the LAN listeners), says where
	// devices reach the gateway; nil: loopback only.
	PairInfoFunc func() devices.PairInfo
	// Nodes is presence, the node registry, node.invoke and the exec
	// asks (SPEC §7; nodes.go).
	Nodes *nodes.Service
	// Canvas is the Canvas and A2UI service (canvas.*; nil without
	// Options.A2UISchemas).
	Canvas    *canvas.Service
	canvasLog *slog.Logger
	// Model is the model configuration of the main profile (model.Detect,
	// then ProfileModel) and ModelReason why it was chosen, at start
	// (Settings and config.get show the model in force after a change).
	Model       model.Config
	ModelReason string
	// Vision is whether Model takes images and where that was learnt.
	Vision model.VisionInfo

	log     *slog.Logger
	hooks   connHooks
	getenv  func(string) string
	db      *sql.DB
	lock    *applock.Lock // one app per state dir, held from New to Close
	anyPort bool
	// conf holds the settings in force: Config at start, then each
	// config.patch (settings.go).
	conf atomic.Pointer[config.Config]
	// mu guards Model, ModelReason (after New) and restart.
	mu sync.Mutex
	// restart lists the changed settings that take effect at the next start.
	restart []string
	// setup answers setup.* (setup.go).
	setup *setupService
	// lan holds the LAN listeners, their certificate and the mDNS
	// advertisement (lan.go).
	lan lan
	// mediaRx receives media transfers into Media (media.go); nil in a
	// first-run app.
	mediaRx *mediaRelay
	// ffmpegOpt is Options.FFmpeg; ffmpegPath what it resolved to, once
	// (media.go ffmpeg).
	ffmpegOpt  string
	ffmpegOnce sync.Once
	ffmpegPath string
	// uploads is the HTTPS fallback of media transfers (media.go), served
	// by the gateway's upload route once the nodes service is up.
	uploads atomic.Pointer[upload.Server]
	// mcp is the /mcp handler (mcp.go), nil until built.
	mcp atomic.Pointer[mcpserve.HTTP]
	// MCPTokens are the MCP clients' tokens (nil until built).
	MCPTokens *mcpserve.Tokens
	// Live runs the live views (live.go); nil in a first-run app.
	Live *live.Service
	// Talk runs the talks (talk.go, issue 27); nil in a first-run app.
	Talk *talk.Service
}

// AlreadyRunningError is New's error when another app runs on the same
// state dir (it holds the app lock, package applock; errors.Is(err,
// applock.ErrHeld) is true). A second app would share its token and
// remove its gateway.json on exit, so it is refused.
type AlreadyRunningError struct {
	// Home is the state dir, PID the running app's process id (0 when
	// unknown).
	Home string
	PID  int
	// URL is the running app's UI address, without the token
	// ("http://127.0.0.1:18789/"); "" when it has not published its
	// address yet (it is starting).
	URL string
	// TokenFile holds the operator token the UI asks for.
	TokenFile string
}

func (e *AlreadyRunningError) Error() string {
	who := "Atrium is already running"
	if e.PID > 0 {
		who += fmt.Sprintf(" (pid %d)", e.PID)
	}
	who += " with state dir " + e.Home
	if e.URL == "" {
		return who + "; it is still starting. Use that app, or give this one its own state dir (--home or " + paths.EnvHome + ")"
	}
	return who + ": open " + e.URL + " (the UI asks for the token in " + e.TokenFile + "), or give this app its own state dir (--home or " + paths.EnvHome + ")"
}

// Unwrap makes errors.Is(err, applock.ErrHeld) true.
func (e *AlreadyRunningError) Unwrap() error { return applock.ErrHeld }

// alreadyRunning describes the app that holds the lock: its address from
// gateway.json when that file is the holder's (a file left by an app that
// was killed names another pid).
func alreadyRunning(l paths.Layout, held *applock.HeldError) *AlreadyRunningError {
	e := &AlreadyRunningError{Home: l.Home, PID: held.PID, TokenFile: l.TokenFile()}
	if info, err := ReadGatewayInfo(l.GatewayFile()); err == nil && (held.PID == 0 || info.PID == held.PID) {
		e.URL = "http://" + info.Addr + "/"
	}
	return e
}

// MemoryRanking turns config.json's memory.search into the memory
// engine's ranking options (zero values keep its measured defaults). The
// app and the CLI's memory commands both use it.
func MemoryRanking(c config.Search) memory.Ranking {
	return memory.Ranking{VectorWeight: c.VectorWeight, MMR: c.MMR, MMRLambda: c.MMRLambda, TemporalDecay: c.TemporalDecay, HalfLifeDays: c.HalfLifeDays}
}

// NewEmbedder builds the memory engine's embedder from config.json's
// memory.embedding (SPEC §4.2; see config.Embedding and embed.New for the
// defaults): builtin when nothing is configured, else ollama or openai, with
// OPENAI_API_KEY and OPENAI_BASE_URL read through getenv (nil: os.Getenv)
// when config has no key or base URL. It sends no request. The app and the
// CLI's memory commands both use it, so that they open the index with the
// same embedder (another one would make the index rebuild).
func NewEmbedder(c config.Embedding, getenv func(string) string, log *slog.Logger) (embed.Embedder, error) {
	e, err := embed.New(embed.Settings{
		Provider:       c.Provider,
		Model:          c.Model,
		BaseURL:        c.BaseURL,
		APIKey:         c.APIKey,
		Dims:           c.Dims,
		MaxInputTokens: c.MaxInputTokens,
		Timeout:        time.Duration(c.TimeoutSeconds) * time.Second,
		Logger:         log,
		Getenv:         getenv,
	})
	if err != nil {
		return nil, fmt.Errorf("embedding provider: %w", err)
	}
	return e, nil
}

// New builds the app. Nothing listens and nothing is indexed until Run.
func New(ctx context.Context, o Options) (_ *App, err error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	a := &App{Layout: o.Layout, log: o.Logger, getenv: o.Getenv, anyPort: o.AnyPortIfBusy, ffmpegOpt: o.FFmpeg}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	if err := o.Layout.Ensure(); err != nil {
		return nil, err
	}
	if a.lock, err = applock.Acquire(o.Layout.LockFile()); err != nil {
		var held *applock.HeldError
		if errors.As(err, &held) {
			return nil, alreadyRunning(o.Layout, held)
		}
		return nil, err
	}
	store := config.NewStore(o.Layout.ConfigFile())
	if a.Config, err = store.Load(); err != nil {
		return nil, err
	}
	a.conf.Store(&a.Config)
	if a.Token, err = gateway.LoadOrCreateToken(o.Layout.TokenFile()); err != nil {
		return nil, fmt.Errorf("operator token: %w", err)
	}
	if a.lan.bind, err = resolveBind(o.Bind, a.Config.Gateway.Bind); err != nil {
		return nil, err
	}
	a.lan.mdnsIfs = o.MDNSInterfaces
	a.lan.pending = newPendingLimiter(o.MaxLANPending, o.MaxLANPendingPerAddr, o.MaxLANConns)

	port := o.Port
	switch {
	case port == 0 && a.Config.Gateway.Port != 0:
		port = a.Config.Gateway.Port
	case port == 0:
		port = config.DefaultPort
	case port < 0:
		port = 0
	}
	if err := a.loadIdentity(); err != nil {
		return nil, err
	}
	a.Gateway, err = gateway.New(gateway.Options{
		Addr:            net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Token:           a.Token,
		GatewayID:       a.Identity.ID,
		Authenticate:    a.authenticate,
		OnAuthenticated: a.connOpened,
		OnClosed:        a.connClosed,
		UI:              o.UI,
		Version:         o.Version,
		AllowedOrigins:  o.AllowedOrigins,
		Logger:          o.Logger,
		Snapshot:        a.snapshot,
		Upload:          http.HandlerFunc(a.serveUpload),
		MCP:             http.HandlerFunc(a.serveMCP),
		MCPAuthorized:   a.mcpAuthorized,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	a.setup = newSetupService(a, store, o)
	if o.FirstRun {
		api.SetupOnly(a.Gateway, a.setup, o.Focus, o.Version, time.Now())
		o.Logger.Info("first start: waiting for the person to choose where memory lives", "offered", o.Layout.Workspace)
		return a, nil
	}
	if created, err := o.Layout.EnsureWorkspace(); err != nil {
		return nil, err
	} else if created {
		o.Logger.Info("workspace created", "path", o.Layout.Workspace)
	}

	// state.db before memory: the memory engine keeps its file versions
	// and conflict records there (SPEC §5.3).
	if a.db, err = statedb.Open(o.Layout.StateDB()); err != nil {
		return nil, err
	}
	wsAbs, err := filepath.Abs(o.Layout.Workspace) // the memory engine's spelling of it
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	versionStore, err := versions.Open(a.db, versions.Options{Workspace: wsAbs})
	if err != nil {
		return nil, fmt.Errorf("memory versions: %w", err)
	}

	// The ACL and the audit log before memory: every write the engine does
	// for a principal asks the guard (SPEC §5.1). Session owners are read
	// from the engine's records once it exists.
	a.Guard, err = NewGuard(o.Layout, guard.OwnersFunc(func(id string) (string, bool) {
		if a.Memory == nil {
			return "", false
		}
		return a.Memory.SessionOwner(id)
	}), o.Logger)
	if err != nil {
		return nil, err
	}
	a.ACL, a.Audit = a.Guard.ACL(), a.Guard.Audit()
	if err := a.openDevices(ctx); err != nil {
		return nil, err
	}

	emb, err := NewEmbedder(a.Config.Memory.Embedding, o.Getenv, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	rewrite, rewriteTimeout := memoryRewrite(a.Config.Memory.Search, a.model, model.OpenAIOptions{Logger: o.Logger})
	a.Memory, err = memory.Open(memory.Options{
		Workspace:      o.Layout.Workspace,
		IndexDir:       o.Layout.IndexDir(),
		Embedder:       emb,
		Ranking:        MemoryRanking(a.Config.Memory.Search),
		Rewrite:        rewrite,
		RewriteTimeout: rewriteTimeout,
		Logger:         o.Logger,
		RescanInterval: o.RescanInterval,
		LockWait:       5 * time.Second, // a previous run may still be shutting down
		OnChange: func(ev memory.ChangeEvent) {
			a.Gateway.Broadcast("memory.changed", ev)
			a.mcpChanged(ev.Paths)
		},
		OnProgress: func(p memory.Progress) { a.Gateway.Broadcast("memory.progress", p) },
		Versions:   versionStore,
		Authorize:  a.Guard.Authorize,
		Readable:   a.Guard.ReadableFrom,
		ACL:        a.ACL.Policy,
	})
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}

	if a.History, err = history.Open(a.db); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if a.Media, err = media.Open(o.Layout.MediaDir(), media.Options{Log: o.Logger}); err != nil {
		return nil, fmt.Errorf("media: %w", err)
	}

	// A configured model that cannot be reached does not stop the app: Detect
	// then returns the offline provider, and the reason says what failed.
	a.Model, a.ModelReason, err = model.Detect(ctx, a.Config.Model, model.DetectOptions{Getenv: o.Getenv, Logger: o.Logger})
	if err != nil {
		o.Logger.Warn("model unavailable", "err", err)
		err = nil
	}
	// The one chat profile, main, may have its own model (persona front
	// matter, config.json profiles.main.model).
	mainModel, why := ProfileModel(o.Layout.Workspace, a.Config, a.Model, acl.MainRole, o.Getenv, o.Logger)
	if mainModel != a.Model {
		o.Logger.Info("profile model", "role", acl.MainRole, "provider", mainModel.Provider, "model", mainModel.Model,
			"base_url", mainModel.BaseURL, "why", why)
		a.Model, a.ModelReason = mainModel, why
	}
	a.Model, a.Vision = withVision(ctx, a.Model)
	provider, err := model.FromConfig(a.Model, model.OpenAIOptions{Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	// Runs of profile instances go to their worker processes (remote.go);
	// the runner gets the pool below, before anything is served.
	runner := newPoolRunner(o.Layout.Workspace, o.Logger)
	runner.offline = func(profile string) bool {
		cfg, _ := ProfileModel(o.Layout.Workspace, a.config(), a.model(), profile, o.Getenv, o.Logger)
		return cfg.Provider == "" || cfg.Provider == model.ProviderOffline
	}
	a.Chat, err = chat.New(chat.Options{
		History:       a.History,
		Provider:      provider,
		Memory:        roleSearcher{m: a.Memory, g: a.Guard, role: acl.MainRole},
		SearcherFor:   func(role string) chat.Searcher { return roleSearcher{m: a.Memory, g: a.Guard, role: role} },
		Tools:         a.agentTools(o),
		ContextWindow: a.Model.ContextWindow,
		Emit:          a.chatEmit,
		Remote:        runner,
		MainContext:   a.Memory.MainContext,
		OfflineCard:   a.offlineCard,
		SaveNote:      a.saveSessionNote,
		Logger:        o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}

	if a.Heartbeat, err = a.newHeartbeat(o); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}

	if _, err := a.Chat.RecoverInterrupted(ctx); err != nil {
		o.Logger.Warn("interrupted chat runs not recovered", "err", err)
	}

	// Collaborations after memory and the guard: every decision is
	// checked and audited by the guard, summaries go through memory.Write.
	a.collabs = newCollabBroker(a, o.Logger)
	if a.Collab, err = collab.New(ctx, collab.Options{DB: a.db, Guard: a.Guard, Memory: a.Memory, Logger: o.Logger, OnChange: a.collabs.onChange}); err != nil {
		return nil, fmt.Errorf("collaborations: %w", err)
	}

	// The light index of profiles (stat only); instances start on
	// profiles.spawn, each with its profile's model settings, read then.
	if a.Pool, err = worker.NewPool(worker.PoolOptions{
		Workspace: o.Layout.Workspace,
		EnvFor: func(profile string) ([]string, error) {
			cfg, _ := ProfileModel(o.Layout.Workspace, a.config(), a.model(), profile, o.Getenv, o.Logger)
			b, err := json.Marshal(cfg)
			if err != nil {
				return nil, fmt.Errorf("model settings of %s: %w", profile, err)
			}
			return []string{worker.EnvModel + "=" + string(b)}, nil
		},
		OnStatus: func(st worker.Status) { a.Gateway.Broadcast(api.InstanceEvent, st) },
		OnEvent:  runner.dispatch,
		Logger:   o.Logger,
	}); err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	runner.pool = a.Pool

	if err := a.newNodes(o.Logger); err != nil {
		return nil, err
	}
	if err := a.newLive(o.Logger); err != nil {
		return nil, err
	}
	if err := a.newTalk(o.TalkNow, o.TalkSpeechStall, o.TalkSpeechStart, o.Logger); err != nil {
		return nil, err
	}
	if err := a.newCanvas(ctx, o, o.Logger); err != nil {
		return nil, err
	}
	if err := a.newMCP(ctx, o.Version, o.Logger); err != nil {
		return nil, err
	}
	st := &settings{a: a, store: store, local: o.LocalModelServers}
	api.Register(api.Options{
		Gateway:     a.Gateway,
		Roles:       roleApp{a: a, settings: st},
		Instances:   a.Pool,
		Memory:      a.Memory,
		Guard:       a.Guard,
		DeviceScope: a.deviceScope,
		Messages:    a.History,
		Chat:        a.Chat,
		Collab:      a.Collab,
		Embedder:    emb,
		Settings:    st,
		Focus:       o.Focus,
		Setup:       a.setup,
		Media:       a.Media,
		Version:     o.Version,
		Started:     time.Now(),
	})
	return a, nil
}

// agentTools builds the tool registry of one chat run (SPEC §6): the
// agent/tools memory and file tools and web_fetch, acting as the
// profile's role (the chat's only profile, main, is role main) in the
// run's session, so the ACL applies to everything they read and write
// and every decision is audited. exec follows config.json's agents.exec
// (default approval "ask": every command is put to the person through the
// session's permissions), in a bubblewrap sandbox limited to the workspace
// where bwrap is installed.
func (a *App) agentTools(o Options) func(chat.ToolScope) (*agent.Registry, error) {
	return func(sc chat.ToolScope) (*agent.Registry, error) {
		reg := agent.NewRegistry()
		role := sc.Role // an instance's tools act as its profile
		if role == "" {
			role = acl.MainRole
		}
		err := tools.Register(reg, tools.Options{
			Guard:     a.Guard,
			Memory:    a.Memory,
			Principal: acl.Principal{Role: role, Session: sc.SessionID},
			Fetch:     &tools.FetchOptions{AllowPrivate: o.FetchAllowPrivate},
			Exec:      a.execOptions(sc),
			Nodes:     a.nodesTool(sc),
			Canvas:    a.canvasTool(sc),
			Collab:    a.collabTool(role),
			MediaDir:  a.Layout.MediaDir(),
			Logger:    o.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("agent tools of %s: %w", sc.ProfileID, err)
		}
		return reg, nil
	}
}

// execOptions are the exec tool's settings for a run of scope sc.
func (a *App) execOptions(sc chat.ToolScope) *tools.ExecOptions {
	exec := a.config().Agents.Exec // the settings in force: a change applies to the next tool call
	x := &tools.ExecOptions{Approval: exec.Approval, Allowlist: exec.Allowlist}
	if x.Approval == "" {
		x.Approval = tools.ApprovalAsk
	}
	if x.Approval == tools.ApprovalAsk {
		if sc.Permissions == nil {
			x.Approval = tools.ApprovalDeny // nobody to ask
		} else {
			x.Approver = sc.Permissions
		}
	}
	return x
}

func (a *App) snapshot() gateway.Snapshot {
	s := gateway.Snapshot{Presence: a.presenceSnapshot()}
	if a.Chat != nil {
		for _, p := range a.Chat.Profiles() {
			s.Profiles = append(s.Profiles, p)
		}
	}
	return s
}

// Listen binds the gateway's port on 127.0.0.1, so URL is known before Run,
// and, unless the bind is loopback, the HTTPS/WSS listeners on the same
// port (lan.go). A port in use is reported with the address.
func (a *App) Listen() error {
	err := a.Gateway.Listen()
	if err != nil && a.anyPort && errors.Is(err, syscall.EADDRINUSE) {
		a.log.Warn("gateway port in use; using a free port", "err", err)
		err = a.Gateway.ListenOn("127.0.0.1:0")
	}
	if err != nil {
		return fmt.Errorf("gateway listen: %w", err)
	}
	if err := a.listenLAN(); err != nil {
		return err
	}
	if err := WriteGatewayInfo(a.Layout.GatewayFile(), GatewayInfo{Addr: a.Gateway.Addr(), PID: os.Getpid(), LANInfo: a.LAN()}); err != nil {
		a.log.Warn("gateway info not written; the CLI will need --port", "path", a.Layout.GatewayFile(), "err", err)
	}
	return nil
}

// GatewayInfo is the content of paths.Layout.GatewayFile.
type GatewayInfo struct {
	Addr string `json:"addr"` // host:port of the plain listener on 127.0.0.1
	PID  int    `json:"pid"`  // process that serves it
	// LANInfo: bind, HTTPS/WSS addresses and URLs, TLS fingerprint, gateway id.
	LANInfo
}

// WriteGatewayInfo writes info atomically (package safefile: temp file,
// fsync, rename), always mode 0600.
func WriteGatewayInfo(path string, info GatewayInfo) error {
	data, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encode gateway info: %w", err)
	}
	if err := safefile.WriteFile(path, data, safefile.Options{Perm: 0o600, Exact: true}); err != nil {
		return fmt.Errorf("write gateway info: %w", err)
	}
	return nil
}

// ReadGatewayInfo reads what WriteGatewayInfo wrote.
func ReadGatewayInfo(path string) (GatewayInfo, error) {
	var info GatewayInfo
	data, err := os.ReadFile(path)
	if err != nil {
		return info, fmt.Errorf("read gateway info: %w", err)
	}
	if err := json.Unmarshal(data, &info); err != nil || info.Addr == "" {
		return info, fmt.Errorf("read gateway info %s: malformed", path)
	}
	return info, nil
}

// URL is the UI address with the operator token in the fragment (valid after Listen).
func (a *App) URL() string { return "http://" + a.Gateway.Addr() + "/#token=" + a.Token }

// WSURL is the gateway WebSocket address (valid after Listen).
func (a *App) WSURL() string { return "ws://" + a.Gateway.Addr() + "/ws" }

// Run serves the gateway and keeps memory indexed until ctx is done or one
// of them fails; it then stops the other and returns the first error. A
// first-run app (Options.FirstRun) serves its gateway until ctx is done or
// a workspace is chosen (then it returns nil and App.Chosen names it).
func (a *App) Run(ctx context.Context) error {
	if a.Memory == nil && a.setup != nil && a.setup.first {
		return a.runFirst(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 11)                              // one per goroutine below
	go func() { errc <- wrap("profiles", a.Pool.Run(ctx)) }() // stops every instance at the end
	go func() { errc <- wrap("memory", a.Memory.Run(ctx)) }()
	go func() { errc <- wrap("gateway", a.Gateway.Run(ctx)) }()
	go func() { errc <- wrap("acl", a.ACL.Run(ctx)) }()            // reloads memory/.acl on change
	go func() { errc <- wrap("nodes", a.Nodes.Run(ctx)) }()        // expires presence entries
	go func() { errc <- wrap("devices", a.Devices.Run(ctx)) }()    // expires pairing requests
	go func() { errc <- wrap("gateway LAN", a.runLAN(ctx)) }()     // HTTPS/WSS listeners, mDNS
	go func() { errc <- wrap("canvas", a.runCanvas(ctx)) }()       // sends waiting user actions
	go func() { errc <- wrap("heartbeat", a.runHeartbeat(ctx)) }() // main's heartbeat turns
	go func() { errc <- a.runSessions(ctx) }()                     // daily and idle session resets
	go func() { errc <- wrap("mcp", a.runMCP(ctx)) }()             // memory changes to MCP resources
	first := <-errc
	cancel()
	var errs []error
	errs = append(errs, first)
	for range cap(errc) - 1 {
		errs = append(errs, <-errc)
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// NewGuard builds the ACL holder on <workspace>/memory/.acl (loaded once
// here; App.Run keeps it current), the audit log in layout.AuditDir() and
// the guard over both (SPEC §5.1). A malformed .acl is not an error: the
// holder keeps admin-only rules and reports it in its Status (and the log).
// owners resolves $session_owner (nil: no session has an owner); log nil
// means slog.Default(). The app and the CLI's local memory commands both
// use it, so that both enforce and audit the same way.
func NewGuard(layout paths.Layout, owners acl.SessionOwners, log *slog.Logger) (*guard.Guard, error) {
	if log == nil {
		log = slog.Default()
	}
	holder := acl.NewHolder(acl.HolderOptions{Logger: log})
	aclPath := filepath.Join(layout.Workspace, "memory", ".acl")
	if err := holder.Load(aclPath); err != nil {
		log.Warn("acl not loaded; admin-only rules in force", "path", aclPath, "err", err)
	}
	auditLog, err := audit.New(audit.Options{Dir: layout.AuditDir(), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	g, err := guard.New(guard.Options{Workspace: layout.Workspace, ACL: holder, Audit: auditLog, Owners: owners, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("guard: %w", err)
	}
	return g, nil
}

func wrap(what string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Close releases everything New opened, in reverse order.
func (a *App) Close() error {
	var errs []error
	a.closeLAN() // when Run never served them
	// Remove the gateway file only if it names this process.
	if info, err := ReadGatewayInfo(a.Layout.GatewayFile()); err == nil && info.PID == os.Getpid() {
		errs = append(errs, os.Remove(a.Layout.GatewayFile()))
	}
	if a.Chat != nil {
		errs = append(errs, a.Chat.Close())
	}
	if u := a.uploads.Load(); u != nil {
		u.Close() // uploads suspended, their partials kept
	}
	if a.Live != nil {
		a.Live.Close() // before Media: no save after it closes
	}
	if a.Talk != nil {
		a.Talk.Close() // before Media: no utterance kept after it closes
	}
	if a.mediaRx != nil {
		a.mediaRx.Close() // before Media: its transfers are aborted first
	}
	if a.db != nil {
		errs = append(errs, a.db.Close())
	}
	if a.Memory != nil {
		errs = append(errs, a.Memory.Close())
	}
	if a.Media != nil {
		errs = append(errs, a.Media.Close())
	}
	errs = append(errs, a.lock.Release()) // last: the next app may start now
	return errors.Join(errs...)
}

// roleSearcher is the chat service's memory_search (the agent's way in,
// SPEC §5.1): searches as role `role` (the chat's only profile is main),
// scoped to what the role may read (filtered before ranking, see package
// guard) and audited as one entry.
type roleSearcher struct {
	m    *memory.Manager
	g    *guard.Guard
	role string
}

func (r roleSearcher) Search(ctx context.Context, o memory.SearchOptions) (memory.SearchResponse, error) {
	who := acl.Principal{Role: r.role}
	o.Readable = func(rel string) bool { return r.g.Readable(who, rel) }
	res, err := r.m.Search(ctx, o)
	if err != nil {
		return res, err
	}
	return r.g.FilterSearch(who, o.Query, res)
}
