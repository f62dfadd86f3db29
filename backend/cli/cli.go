// Package cli is the `atrium` command line (SPEC §1): the desktop app (no
// arguments), `serve`, `memory index|search|get|status`, `agents
// list|create|spawn|stop`, `version`, and the hidden `worker` (one
// profile instance's process, started by the app; package worker). It parses flags and environment, builds the app
// through package atrium, and prints results for people (or JSON with
// --json). The desktop window itself is
// injected by main (Options.Desktop), so backend never imports Wails.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/atrium-dev/atrium/backend/atrium"
	"github.com/atrium-dev/atrium/backend/paths"
	"github.com/atrium-dev/atrium/backend/worker"
)

// DesktopOptions is what the desktop window needs to show the UI.
type DesktopOptions struct {
	UI     fs.FS
	WSURL  string
	Token  string
	Logger *slog.Logger
}

// Options are main's injections.
type Options struct {
	// Version printed by `atrium version` and reported by the gateway.
	Version string
	// UI is the built frontend.
	UI fs.FS
	// Desktop opens the window and blocks until it closes; nil means this
	// binary has no window (then `atrium` alone behaves like `atrium serve`).
	Desktop func(ctx context.Context, o DesktopOptions) error
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
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(o.Stderr, "atrium:", err)
		fmt.Fprintln(o.Stderr, "Run 'atrium help' for usage.")
		return 2
	default:
		fmt.Fprintln(o.Stderr, "atrium:", err)
		return 1
	}
}

const usage = `Atrium — a local-first home for a team of AI agents.

Usage:
  atrium [flags]                       open the desktop window (or serve, when there is no display)
  atrium serve [flags]                 run the gateway and UI at http://127.0.0.1:18789
  atrium memory index [flags]          index the workspace's Markdown memory now
  atrium memory search [flags] QUERY   hybrid (BM25 + vector) search
  atrium memory get [flags] PATH       print a memory file (--from N --lines M)
  atrium memory write [flags] PATH     write standard input to a memory file
                                       (--mode append|replace, --base VERSION)
  atrium memory status [flags]         files, chunks, provider, model, last sync, ACL in force
  atrium audit tail [flags]            the newest access decisions (-n N, --role R,
                                       --result allowed|denied, --operation OP)
  atrium agents list [flags]           roles (profiles) under memory/roles with their config
  atrium agents create ROLE "DESC"     cold start: config from the role template, ACL rule, index,
                                       and the new role's starting context (--capabilities a,b)
  atrium agents spawn ROLE             start an instance ROLE-k of a role in the running app
                                       (its own worker process); prints the instance id
  atrium agents stop INSTANCE          stop a running instance (e.g. coder-1)
  atrium bench retrieval --set DIR     retrieval quality of a BEIR-style set or LoCoMo workspaces:
                                       Recall@1/5/10, nDCG@10, MRR for keyword, vector, hybrid
  atrium bench scale [flags]           index scale benchmark: index time, disk, RSS, search latency
                                       (bench reads ../shared/corpora or $ATRIUM_CORPORA)
  atrium bench control [flags]         control-center benchmark: 100 profiles, 10 worker instances,
                                       time to a usable UI, RSS, throughput and chunk latency with
                                       200 clients (--profiles, --active, --clients, --duration, --json)
  atrium version                       print the version

Flags (every command but bench, before or after the command):
  --workspace DIR   Markdown memory (env ATRIUM_WORKSPACE, default ~/Atrium)
  --home DIR        state dir (env ATRIUM_HOME, default ~/.atrium)
  --port N          gateway port on 127.0.0.1 (default 18789)
  --json            machine-readable output (memory and agents commands)

Search flags: --max-results N (default 6), --min-score S (0..1; 0 means the
default 0.35; a negative value turns the floor off), --mode hybrid|keyword|vector
(default hybrid; keyword = BM25 leg only, vector = embedding leg only).
Get flags: --from LINE --lines N.
memory search|get|write --as ROLE: act as that role, checked and audited
exactly as that role (SPEC §5.1); without it you act as admin.
Bench retrieval flags: --set DIR (required), --workspaces DIR, --qrels NAME,
--limit N, --modes keyword,vector,hybrid, --categories 1,2,3,4, --depth N,
--workers N (default 1), --json, --out FILE (also write the JSON report to FILE).
Environment: ATRIUM_LOG=debug|info|warn|error; OPENAI_API_KEY, OPENAI_BASE_URL,
OPENAI_MODEL select an OpenAI-compatible model (see README).
`

// common holds the flags every command accepts.
type common struct {
	workspace, home string
	port            int
	json            bool
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.workspace, "workspace", "", "workspace directory")
	fs.StringVar(&c.home, "home", "", "state directory")
	fs.IntVar(&c.port, "port", 0, "gateway port")
	fs.BoolVar(&c.json, "json", false, "JSON output")
}

// parse parses flags that may appear before, between or after positional
// arguments ("atrium memory search 数据库 --json").
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
		args = fs.Args()
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

// printHelp prints the general usage and the flags of one command.
func printHelp(fs *flag.FlagSet, o Options) {
	fmt.Fprint(o.Stdout, usage)
	if fs.Name() == "atrium" {
		fmt.Fprintln(o.Stdout, "\nFlags of 'atrium':")
	} else {
		fmt.Fprintf(o.Stdout, "\nFlags of 'atrium %s':\n", fs.Name())
	}
	fs.SetOutput(o.Stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
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
	case "worker": // hidden: a profile instance's process, started by the app (SPEC §3)
		err := worker.Command(ctx, worker.CommandOptions{Args: args, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, Getenv: o.Getenv})
		if errors.Is(err, worker.ErrUsage) {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		return err
	case "version":
		fmt.Fprintln(o.Stdout, "atrium", o.Version, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
		return nil
	case "help":
		fmt.Fprint(o.Stdout, usage)
		return nil
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
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
		case "home", "workspace", "port":
			i++ // the flag's value
		}
	}
	return -1
}

func (c *common) layout(o Options) (paths.Layout, error) {
	return paths.Resolve(c.home, c.workspace, o.Getenv)
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

func runDesktop(ctx context.Context, args []string, o Options) error {
	var c common
	fs := newFlagSet("atrium", o)
	c.register(fs)
	if _, err := parse(fs, args, o); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	if o.Desktop == nil {
		fmt.Fprintln(o.Stderr, "atrium: this build has no desktop window; serving the UI in the browser instead")
		return runServe(ctx, args, o)
	}
	if err := displayUsable(o.Getenv); err != nil {
		fmt.Fprintf(o.Stderr, "atrium: no usable display (%v); serving the UI in the browser instead\n", err)
		return runServe(ctx, args, o)
	}
	log := newLogger(o, slog.LevelInfo)
	// The window is handed the gateway's address, so when the default port
	// is taken (and none was asked for) any free port will do.
	a, err := start(ctx, c, o, log, []string{"wails://wails", "wails.localhost", "wails.localhost:*"}, c.port == 0)
	if err != nil {
		return err
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	winErr := o.Desktop(ctx, DesktopOptions{UI: o.UI, WSURL: a.WSURL(), Token: a.Token, Logger: log})
	cancel()
	return errors.Join(winErr, <-runErr)
}

func runServe(ctx context.Context, args []string, o Options) error {
	var c common
	fs := newFlagSet("serve", o)
	c.register(fs)
	if _, err := parse(fs, args, o); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	log := newLogger(o, slog.LevelInfo)
	a, err := start(ctx, c, o, log, nil, false)
	if err != nil {
		return err
	}
	defer a.Close()
	fmt.Fprintf(o.Stdout, "Atrium %s is running.\n  Open:      %s\n  Workspace: %s\n  State dir: %s\n  Model:     %s (%s)\nPress Ctrl+C to stop.\n",
		o.Version, a.URL(), a.Layout.Workspace, a.Layout.Home, modelName(a), a.ModelReason)
	return a.Run(ctx)
}

func modelName(a *atrium.App) string {
	if a.Model.Model == "" {
		return a.Model.Provider
	}
	return a.Model.Provider + "/" + a.Model.Model
}

// start builds the app and binds its port.
func start(ctx context.Context, c common, o Options, log *slog.Logger, origins []string, anyPort bool) (*atrium.App, error) {
	layout, err := c.layout(o)
	if err != nil {
		return nil, err
	}
	a, err := atrium.New(ctx, atrium.Options{
		Layout:         layout,
		Port:           c.port,
		UI:             o.UI,
		Version:        o.Version,
		AllowedOrigins: origins,
		Getenv:         o.Getenv,
		Logger:         log,
		AnyPortIfBusy:  anyPort,
	})
	if err != nil {
		return nil, err
	}
	if err := a.Listen(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
