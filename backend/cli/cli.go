// Package cli is the `atrium` command line (SPEC §1): the desktop app (no
// arguments), `serve`, `memory index|search|get|status`, `agents
// list|create|spawn|stop`, `version`, and the hidden `worker` (one
// profile instance's process, started by the app; package worker). It parses flags and environment, builds the app
// through package atrium, and prints results for people (or JSON with
// --json). The desktop window itself is
// injected by main (Options.Desktop), so backend never imports Wails.
package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/atrium-dev/atrium/backend/applock"
	"github.com/atrium-dev/atrium/backend/atrium"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/paths"
	"github.com/atrium-dev/atrium/backend/worker"
)

// DesktopOptions is what the desktop window needs to show the UI.
type DesktopOptions struct {
	UI     fs.FS
	WSURL  string
	Token  string
	Logger *slog.Logger
	// Focus receives a value when the window should come to the front (a
	// second start of the app asked for it).
	Focus <-chan struct{}
	// SetPicker is called by the window once it is up with its native
	// folder dialog (title in, the folder chosen out, "" when cancelled);
	// the first start's "another folder" uses it (setup.pick).
	SetPicker func(pick func(title string) (string, error))
	// Languages are the system's languages from the environment
	// (SystemLanguages), for the UI in the window.
	Languages []string
}

// Options are main's injections.
type Options struct {
	// Version printed by `atrium version` and reported by the gateway.
	Version string
	// UI is the built frontend.
	UI fs.FS
	// A2UISchemas are the official A2UI schemas the Canvas validates
	// against (frontend.A2UISchemas()); nil: the app has no Canvas.
	A2UISchemas fs.FS
	// Desktop opens the window and blocks until it closes; nil means this
	// binary has no window (then `atrium` alone behaves like `atrium serve`).
	Desktop func(ctx context.Context, o DesktopOptions) error
	// Fatal shows a start failure of the desktop app to the person (a
	// native dialog: a double-clicked app has no terminal); nil: stderr
	// and the log only.
	Fatal func(title, message string)
	// Stdout, Stderr default to os.Stdout, os.Stderr.
	Stdout, Stderr io.Writer
	// Stdin defaults to os.Stdin (`atrium memory write` reads its content there).
	Stdin io.Reader
	// Getenv defaults to os.Getenv.
	Getenv func(string) string
	// Context is the parent context (default context.Background()); the
	// commands also stop on SIGINT and SIGTERM.
	Context context.Context
}

// errUsage marks a command-line mistake (exit status 2).
var errUsage = errors.New("usage")

// Main runs the command line and returns the process exit status.
func Main(args []string, o Options) int {
	if (o.Stdout == nil || o.Stderr == nil) && consoleWanted(args) {
		attachConsole() // Windows: the GUI-subsystem .exe run from a terminal (console_windows.go)
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Context == nil {
		o.Context = context.Background()
	}
	ctx, stop := signal.NotifyContext(o.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, args, o)
	var status exitStatus
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &status):
		return status.code // a node's command's own status: it printed what it had to say
	case errors.Is(err, errUsage):
		fmt.Fprintln(o.Stderr, "atrium:", err)
		fmt.Fprintf(o.Stderr, "Run '%s' for usage.\n", helpHint(args))
		return 2
	default:
		fmt.Fprintln(o.Stderr, "atrium:", err)
		return 1
	}
}

// common holds the flags every command accepts.
type common struct {
	workspace, home string
	port            int
	json            bool
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.workspace, "workspace", "", "workspace `dir`ectory: the Markdown memory (env ATRIUM_WORKSPACE, default ~/Atrium)")
	fs.StringVar(&c.home, "home", "", "state `dir`ectory (env ATRIUM_HOME, default ~/.atrium)")
	fs.IntVar(&c.port, "port", 0, "gateway port `N` on 127.0.0.1 (default gateway.port in config.json, else 18789)")
}

// registerApp adds the flags of the commands that act on the running app
// of a state dir whichever workspace it serves (pair, nodes): --home and
// --port, and --workspace, accepted because scripts pass it to every
// command, and said to be unused.
func (c *common) registerApp(fs *flag.FlagSet) {
	fs.StringVar(&c.home, "home", "", "state `dir`ectory of the running app (env ATRIUM_HOME, default ~/.atrium); its gateway.json says where the app listens")
	fs.IntVar(&c.port, "port", 0, "gateway port `N` on 127.0.0.1 (default: the app's gateway.json, else gateway.port in config.json, else 18789)")
	fs.StringVar(&c.workspace, "workspace", "", "not used: this command talks to the app of --home, whichever workspace it serves (a `dir` given is ignored)")
}

// registerJSON adds --json, for the commands that print results.
func (c *common) registerJSON(fs *flag.FlagSet) {
	fs.BoolVar(&c.json, "json", false, "machine-readable output (JSON)")
}

// appFlags are the flags of the commands that run the app (atrium, serve)
// besides the common ones.
type appFlags struct {
	createWorkspace bool
	bind            string
}

func (f *appFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.createWorkspace, "create-workspace", false, "create the workspace folder when it does not exist")
	fs.StringVar(&f.bind, "bind", "", "where the gateway listens besides plain HTTP on 127.0.0.1: `loopback`, lan (HTTPS/WSS on every LAN address) or one IP address (HTTPS/WSS there); default gateway.bind in config.json, else loopback")
}

// parse parses flags that may appear before, between or after positional
// arguments ("atrium memory search 数据库 --json"); everything after "--"
// is positional ("atrium nodes run --node box -- ls -la").
func parse(fs *flag.FlagSet, args []string, o Options) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(fs, o)
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil // the flag package ate the "--" that ends the flags
		}
		args = rest
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// newFlagSet makes a flag set that reports nothing itself: parse errors come
// back as errUsage (printed once by Main) and -h/--help prints the command's
// usage with its flags (printHelp).
func newFlagSet(name string, o Options) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

func run(ctx context.Context, args []string, o Options) error {
	cmd, args := takeCommand(args)
	switch cmd {
	case "":
		return runDesktop(ctx, args, o)
	case "serve":
		return runServe(ctx, args, o)
	case "memory":
		return runMemory(ctx, args, o)
	case "agents":
		return runAgents(ctx, args, o)
	case "audit":
		return runAudit(ctx, args, o)
	case "bench":
		return runBench(ctx, args, o)
	case "node":
		return runNode(ctx, args, o)
	case "nodes":
		return runNodes(ctx, args, o)
	case "pair":
		return runPair(ctx, args, o)
	case "collab":
		return runCollab(ctx, args, o)
	case "mcp":
		return runMCP(ctx, args, o)
	case "worker": // hidden: a profile instance's process, started by the app (SPEC §3)
		err := worker.Command(ctx, worker.CommandOptions{Args: args, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Getenv: o.Getenv})
		if errors.Is(err, worker.ErrUsage) {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return err
	case "version":
		if pos, err := parse(newFlagSet("version", o), args, o); err != nil {
			return err
		} else if len(pos) > 0 {
			return fmt.Errorf("%w: version takes no arguments", errUsage)
		}
		fmt.Fprintln(o.Stdout, "atrium", o.Version, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
		return nil
	case "help": // atrium help [COMMAND [SUBCOMMAND]]: the overview, or `COMMAND --help`
		if len(args) == 0 || isHelpFlag(args[0]) {
			fmt.Fprint(o.Stdout, overview())
			return nil
		}
		if len(args) > maxCommandWords() || strings.HasPrefix(args[0], "-") {
			return fmt.Errorf("%w: help takes a command (and its subcommands), e.g. atrium help memory search", errUsage)
		}
		return run(ctx, append(args[:len(args):len(args)], "--help"), o)
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

// maxCommandWords is the number of words of the longest command name
// ("nodes canvas a2ui push": 4), so `atrium help` takes any command.
func maxCommandWords() int {
	n := 1
	for _, c := range commands() {
		n = max(n, len(strings.Fields(c.name)))
	}
	return n
}

// takeCommand returns the command word of args (see commandIndex; "" when
// there is none) and the other arguments in order. Flags may come before a
// command or subcommand too ("atrium --home H memory index").
func takeCommand(args []string) (string, []string) {
	i := commandIndex(args)
	if i < 0 {
		return "", args
	}
	return args[i], append(args[:i:i], args[i+1:]...)
}

// commandIndex returns the index of the command word in args: the first
// argument that is neither a flag nor the value of a flag every command
// takes (--home, --workspace, --port); -1 when there is none.
func commandIndex(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return -1
		}
		if !strings.HasPrefix(a, "-") {
			return i
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		switch name {
		case "home", "workspace", "port", "bind":
			i++ // the flag's value
		}
	}
	return -1
}

func (c *common) layout(o Options) (paths.Layout, error) {
	l, _, err := c.resolve(o)
	return l, err
}

// Where the workspace of a layout came from (atrium.Options.WorkspaceSource).
const (
	fromFlag    = "flag"
	fromEnv     = "env"
	fromConfig  = "config"
	fromDefault = "default"
)

// resolve is the state dir and workspace of the command, and where the
// workspace came from: --workspace, $ATRIUM_WORKSPACE, "workspace" in
// config.json (chosen on the first start), else the default ~/Atrium. A
// config.json that cannot be read is left to the command's own load of
// it, which reports it.
func (c *common) resolve(o Options) (paths.Layout, string, error) {
	l, err := paths.Resolve(c.home, c.workspace, o.Getenv)
	if err != nil {
		return l, "", err
	}
	switch {
	case c.workspace != "":
		return l, fromFlag, nil
	case o.Getenv(paths.EnvWorkspace) != "":
		return l, fromEnv, nil
	}
	if cfg, err := config.Load(l.ConfigFile()); err == nil {
		if w, err := cfg.WorkspaceDir(); err == nil && w != "" {
			l.Workspace = w
			return l, fromConfig, nil
		}
	}
	return l, fromDefault, nil
}

// validate checks flag values that the flag package cannot.
func (c *common) validate() error {
	if c.port < 0 || c.port > 65535 {
		return fmt.Errorf("%w: --port %d is not a TCP port (1..65535)", errUsage, c.port)
	}
	return nil
}

// newLogger logs to stderr at level (ATRIUM_LOG=debug|info|warn|error overrides it).
func newLogger(o Options, level slog.Level) *slog.Logger {
	switch strings.ToLower(o.Getenv("ATRIUM_LOG")) {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: level}))
}

// Log files of the app (desktop and serve) in $ATRIUM_HOME/logs: rotated
// at LogMaxMB, LogBackups old files kept (compressed) for LogMaxDays.
const (
	LogFileName = "atrium.log"
	LogMaxMB    = 10
	LogBackups  = 5
	LogMaxDays  = 30
)

// appLogger is newLogger that also writes to $ATRIUM_HOME/logs/atrium.log
// (rotated, see LogMaxMB), so an app started without a terminal leaves a
// record. Records are held in memory until the returned logFile is opened
// (this process is the state dir's app, or failed to start for another
// reason) or dropped (another app runs there and owns the file: two
// writers would overwrite each other's lines). When the state dir cannot
// be made, it logs to stderr alone and says so there.
func appLogger(o Options, c common, level slog.Level) (*slog.Logger, *logFile) {
	lf := &logFile{}
	layout, err := c.layout(o)
	if err == nil {
		err = os.MkdirAll(layout.LogsDir(), 0o700)
	}
	if err != nil {
		fmt.Fprintf(o.Stderr, "atrium: no log file (%v); logging to standard error only\n", err)
		lf.Drop()
		return newLogger(o, level), lf
	}
	lf.file = &lumberjack.Logger{Filename: filepath.Join(layout.LogsDir(), LogFileName), MaxSize: LogMaxMB,
		MaxBackups: LogBackups, MaxAge: LogMaxDays, Compress: true}
	lo := o
	lo.Stderr = io.MultiWriter(o.Stderr, lf)
	return newLogger(lo, level), lf
}

// logFile is the app's log file, written only once Open was called;
// records before that wait in memory.
type logFile struct {
	mu      sync.Mutex
	file    *lumberjack.Logger
	pending bytes.Buffer
	open    bool
	dropped bool
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.open:
		return l.file.Write(p)
	case !l.dropped && l.pending.Len() < 1<<20:
		l.pending.Write(p)
	}
	return len(p), nil
}

// Open writes what is pending and everything after to the file.
func (l *logFile) Open() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open || l.dropped || l.file == nil {
		return
	}
	l.open = true
	_, _ = l.file.Write(l.pending.Bytes())
	l.pending.Reset()
}

// Drop forgets what is pending and writes nothing to the file.
func (l *logFile) Drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		l.dropped = true
		l.pending.Reset()
	}
}

// Close closes the file.
func (l *logFile) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open {
		l.file.Close()
	}
}

// decide opens the log file unless err says another app owns this state
// dir (and so its log file).
func (l *logFile) decide(err error) {
	if errors.Is(err, applock.ErrHeld) {
		l.Drop()
		return
	}
	l.Open()
}

func runDesktop(ctx context.Context, args []string, o Options) error {
	var (
		c  common
		af appFlags
	)
	fs := newFlagSet("atrium", o)
	c.register(fs)
	af.register(fs)
	if pos, err := parse(fs, args, o); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("%w: unknown command %q", errUsage, pos[0])
	}
	if err := c.validate(); err != nil {
		return err
	}
	if o.Desktop == nil {
		fmt.Fprintln(o.Stderr, "atrium: this build has no desktop window; serving the UI in the browser instead")
		return serveWindowless(ctx, c, af, o, true)
	}
	if err := displayUsable(o.Getenv); err != nil {
		fmt.Fprintf(o.Stderr, "atrium: no usable display (%v); serving the UI in the browser instead\n", err)
		return serveWindowless(ctx, c, af, o, true)
	}
	log, lf := appLogger(o, c, slog.LevelInfo)
	defer lf.Close()
	err := desktop(ctx, c, af, o, log, lf)
	if err != nil {
		log.Error("app failed", "err", err)
		if o.Fatal != nil {
			o.Fatal("Atrium", "Atrium could not start:\n\n"+err.Error())
		}
	}
	return err
}

// desktop runs the app with its window, or, when this state dir's app is
// running already, asks it to bring its window to the front (app.focus)
// and returns nil: a second double-click shows the first window.
func desktop(ctx context.Context, c common, af appFlags, o Options, log *slog.Logger, lf *logFile) error {
	focus := make(chan struct{}, 1)
	picker := &folderPicker{}
	// The window is handed the gateway's address, so when the default port
	// is taken (and none was asked for) any free port will do.
	so := startOpts{
		origins:  []string{"wails://wails", "wails.localhost", "wails.localhost:*"},
		anyPort:  c.port == 0,
		firstRun: true,
		pick:     picker.pick,
		focus: func() {
			log.Info("window brought to the front: the app was started again")
			select {
			case focus <- struct{}{}:
			default: // one request pending is enough
			}
		},
	}
	a, err := startWith(ctx, c, af, o, log, so)
	lf.decide(err)
	var running *atrium.AlreadyRunningError
	if errors.As(err, &running) && running.URL != "" {
		if ferr := focusRunning(ctx, running); ferr == nil {
			log.Info("app already running; its window was brought to the front", "url", running.URL, "pid", running.PID)
			return nil
		} else {
			log.Warn("app already running; could not bring its window to the front", "err", ferr)
		}
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- runChosen(ctx, a, c, af, o, log, so, nil) }()
	winErr := o.Desktop(ctx, DesktopOptions{UI: o.UI, WSURL: a.WSURL(), Token: a.Token, Logger: log, Focus: focus, SetPicker: picker.set,
		Languages: SystemLanguages(o.Getenv)})
	cancel()
	return errors.Join(winErr, <-runErr)
}

// runChosen runs a until ctx ends. When a is a first-start app and the
// person chose where memory lives (setup.choose), it is closed and the app
// is started again on that workspace in this process, on the same port
// (the window and browsers keep their address and reconnect by
// themselves); started is then told about it (nil: nothing to tell). It
// closes the last app it ran.
func runChosen(ctx context.Context, a *atrium.App, c common, af appFlags, o Options, log *slog.Logger, so startOpts,
	started func(*atrium.App)) error {
	for {
		err := a.Run(ctx)
		ws := a.Chosen()
		if err != nil || ws == "" || ctx.Err() != nil {
			return errors.Join(err, a.Close())
		}
		_, port, _ := net.SplitHostPort(a.Gateway.Addr())
		if cerr := a.Close(); cerr != nil {
			log.Warn("first-start app not closed cleanly", "err", cerr)
		}
		next := c
		next.workspace = "" // config.json has it now
		fmt.Sscan(port, &next.port)
		so.anyPort, so.firstRun = false, false
		if a, err = startWith(ctx, next, af, o, log, so); err != nil {
			return fmt.Errorf("open the workspace %s: %w", ws, err)
		}
		log.Info("workspace opened", "path", a.Layout.Workspace)
		if started != nil {
			started(a)
		}
	}
}

// folderPicker holds the window's native folder dialog once the window is
// up (DesktopOptions.SetPicker).
type folderPicker struct {
	mu sync.Mutex
	fn func(title string) (string, error)
}

func (p *folderPicker) set(fn func(title string) (string, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn = fn
}

func (p *folderPicker) pick(ctx context.Context, title string) (string, error) {
	p.mu.Lock()
	fn := p.fn
	p.mu.Unlock()
	if fn == nil {
		return "", errors.New("the window has no folder dialog (yet); type the folder's path")
	}
	return fn(title)
}

// focusRunning asks the app described by r for app.focus over its gateway
// (with the operator token of its state dir). It fails when the app has no
// window (atrium serve) or cannot be reached.
func focusRunning(ctx context.Context, r *atrium.AlreadyRunningError) error {
	token, err := os.ReadFile(r.TokenFile)
	if err != nil {
		return fmt.Errorf("focus the running app: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws := "ws://" + strings.TrimSuffix(strings.TrimPrefix(r.URL, "http://"), "/") + "/ws"
	cl, err := gateway.Dial(ctx, gateway.ClientOptions{URL: ws, Token: strings.TrimSpace(string(token)),
		Client: gateway.ClientInfo{ID: "atrium-second-start", Version: "", Platform: runtime.GOOS, Mode: "cli", InstanceID: "second-start"}})
	if err != nil {
		return fmt.Errorf("focus the running app: %w", err)
	}
	defer cl.Close()
	var res struct {
		Focused bool `json:"focused"`
	}
	if err := cl.Call(ctx, "app.focus", map[string]any{}, &res); err != nil {
		return fmt.Errorf("focus the running app: %w", err)
	}
	if !res.Focused {
		return errors.New("focus the running app: it has no window (atrium serve)")
	}
	return nil
}

func runServe(ctx context.Context, args []string, o Options) error {
	var (
		c  common
		af appFlags
	)
	fs := newFlagSet("serve", o)
	c.register(fs)
	af.register(fs)
	if pos, err := parse(fs, args, o); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("%w: serve takes no arguments (got %q)", errUsage, pos[0])
	}
	if err := c.validate(); err != nil {
		return err
	}
	return serveWindowless(ctx, c, af, o, false)
}

// serveWindowless runs the app without a window and prints where to open it.
// firstRun: the app (`atrium` without a display) asks in the UI where
// memory lives when nothing chose it yet; `atrium serve` never asks (it
// uses ~/Atrium then).
func serveWindowless(ctx context.Context, c common, af appFlags, o Options, firstRun bool) error {
	log, lf := appLogger(o, c, slog.LevelInfo)
	defer lf.Close()
	so := startOpts{firstRun: firstRun}
	a, err := startWith(ctx, c, af, o, log, so)
	lf.decide(err)
	if err != nil {
		return err
	}
	banner := func(a *atrium.App) {
		fmt.Fprintf(o.Stdout, "Atrium %s is running.\n  Open:      %s\n%s  Workspace: %s\n  State dir: %s\n%sPress Ctrl+C to stop.\n",
			o.Version, a.URL(), lanLines(a.LAN()), a.Layout.Workspace, a.Layout.Home, modelLines(modelName(a), a.ModelReason))
	}
	if a.Memory == nil {
		fmt.Fprintf(o.Stdout, "Atrium %s is running for the first time: choose where memory lives in the UI.\n  Open:      %s\n  State dir: %s\n"+
			"  (or start it with --workspace DIR)\nPress Ctrl+C to stop.\n", o.Version, a.URL(), a.Layout.Home)
	} else {
		banner(a)
	}
	return runChosen(ctx, a, c, af, o, log, so, banner)
}

// lanLines is the LAN part of serve's banner: the HTTPS addresses and the
// certificate's fingerprint as words (what a phone shows when it pairs),
// or nothing with a loopback bind.
func lanLines(l atrium.LANInfo) string {
	if l.Bind == config.BindLoopback {
		return ""
	}
	if len(l.URLs) == 0 {
		return fmt.Sprintf("  LAN:       none (gateway.bind %s found no address to serve; 127.0.0.1 only)\n", l.Bind)
	}
	out := ""
	for i, u := range l.URLs {
		label := "LAN:"
		if i > 0 {
			label = ""
		}
		out += fmt.Sprintf("  %-10s %s (HTTPS only)\n", label, u)
	}
	return out + fmt.Sprintf("  TLS:       %s\n             %s\n", l.TLSFingerprintWords, l.TLSFingerprint)
}

// modelLines is the model part of serve's banner: the model, and on a line
// of its own why it was chosen (the reason carries its own parentheses, so
// it is never wrapped in more).
func modelLines(model, reason string) string {
	out := fmt.Sprintf("  Model:     %s\n", model)
	if reason != "" {
		out += fmt.Sprintf("  Chosen:    %s\n", reason)
	}
	return out
}

func modelName(a *atrium.App) string {
	if a.Model.Model == "" {
		return a.Model.Provider
	}
	return a.Model.Provider + "/" + a.Model.Model
}

// startOpts are what differs between the ways the app is started.
type startOpts struct {
	// origins are extra WebSocket origins (the window's).
	origins []string
	// anyPort: a free port will do when the chosen one is taken.
	anyPort bool
	// focus raises the window (nil: no window).
	focus func()
	// firstRun: when nothing chose the workspace (no --workspace,
	// $ATRIUM_WORKSPACE or "workspace" in config.json) and the default
	// ~/Atrium was never indexed, start the first-run app that asks.
	firstRun bool
	// pick shows the window's folder dialog (nil: no window).
	pick func(ctx context.Context, title string) (string, error)
}

// start builds the app and binds its port. The workspace must exist
// unless appWorkspace allows creating it; a second app on the same state
// dir is refused (atrium.AlreadyRunningError); a port in use is reported
// with the ways to choose another (portInUse).
func start(ctx context.Context, c common, af appFlags, o Options, log *slog.Logger, origins []string, anyPort bool) (*atrium.App, error) {
	return startWith(ctx, c, af, o, log, startOpts{origins: origins, anyPort: anyPort})
}

// startWith is start with all of startOpts.
func startWith(ctx context.Context, c common, af appFlags, o Options, log *slog.Logger, so startOpts) (*atrium.App, error) {
	layout, source, err := c.resolve(o)
	if err != nil {
		return nil, err
	}
	// The window asks where memory lives when nothing chose it, and again
	// when the folder config.json names is gone (a person who
	// double-clicked has no flags to add).
	first := so.firstRun && (source == fromDefault && !indexedBefore(layout) || source == fromConfig && missing(layout.Workspace))
	if !first {
		if err := appWorkspace(layout, af.createWorkspace); err != nil {
			return nil, err
		}
	}
	a, err := atrium.New(ctx, atrium.Options{
		Layout:          layout,
		Port:            c.port,
		UI:              o.UI,
		A2UISchemas:     o.A2UISchemas,
		Version:         o.Version,
		AllowedOrigins:  so.origins,
		Getenv:          o.Getenv,
		Logger:          log,
		AnyPortIfBusy:   so.anyPort,
		Focus:           so.focus,
		FirstRun:        first,
		WorkspaceSource: source,
		PickFolder:      so.pick,
		Bind:            af.bind,
	})
	if err != nil {
		return nil, err
	}
	if err := a.Listen(); err != nil {
		a.Close()
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, portInUse(err, c.port, a.Config.Gateway.Port, layout)
		}
		return nil, err
	}
	return a, nil
}

// missing reports whether dir does not exist.
func missing(dir string) bool {
	_, err := os.Stat(dir)
	return errors.Is(err, fs.ErrNotExist)
}

// indexedBefore reports whether Atrium indexed layout's workspace before
// (its index folder exists): a default ~/Atrium in use before the first
// start asked is kept without asking.
func indexedBefore(layout paths.Layout) bool {
	_, err := os.Stat(layout.IndexDir())
	return err == nil
}

// appWorkspace decides whether the app may open layout's workspace: an
// existing folder, yes; a missing one only with --create-workspace, or
// when it is the default ~/Atrium that Atrium never indexed (the first
// start). A mistyped --workspace or ATRIUM_WORKSPACE is refused, as the
// memory commands refuse it, instead of becoming an empty workspace; and
// so is a default workspace that was indexed before and has gone (an
// empty one in its place would look like all memory was deleted).
func appWorkspace(layout paths.Layout, create bool) error {
	_, err := os.Stat(layout.Workspace)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return layout.CheckWorkspace()
	}
	if create {
		return nil // atrium.New creates it
	}
	def, _ := paths.DefaultWorkspace()
	if layout.Workspace != def {
		return fmt.Errorf("%w; to start a new workspace there, add --create-workspace", layout.CheckWorkspace())
	}
	if _, err := os.Stat(layout.IndexDir()); err == nil {
		return fmt.Errorf("workspace %s is missing, but Atrium indexed it before (its index in %s is kept): "+
			"restore the folder, choose another with --workspace, or add --create-workspace to start an empty one",
			layout.Workspace, layout.Home)
	}
	return nil
}

// portInUse explains a gateway port that another program holds: which
// port, where it came from (--port, gateway.port in config.json, or the
// default), and both ways to choose another.
func portInUse(err error, flagPort, configPort int, layout paths.Layout) error {
	port, from := flagPort, "--port"
	switch {
	case flagPort != 0:
	case configPort != 0:
		port, from = configPort, "gateway.port in "+layout.ConfigFile()
	default:
		port, from = config.DefaultPort, "the default"
	}
	note := ""
	if port == config.DefaultPort {
		note = fmt.Sprintf(" (OpenClaw's gateway uses %d too)", config.DefaultPort)
	}
	var op *net.OpError // "listen tcp 127.0.0.1:18789: bind: address already in use", without the wrapping
	if errors.As(err, &op) {
		err = op
	}
	return fmt.Errorf("port %d (%s) on 127.0.0.1 is already in use by another program%s. "+
		"Start Atrium on a free port with --port N, or set gateway.port in %s for every start: {\"gateway\": {\"port\": N}} (%w)",
		port, from, note, layout.ConfigFile(), err)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
