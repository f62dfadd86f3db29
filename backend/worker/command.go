package worker

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/atrium-dev/atrium/backend/model"
)

// EnvModel names the environment variable through which the parent hands
// a worker its model configuration: a JSON model.Config
// (`{"provider","baseUrl","apiKey","model"}`). Without it the worker
// detects the model from its environment like the app does (model.Detect,
// SPEC §6).
const EnvModel = "ATRIUM_WORKER_MODEL"

// CommandOptions are what `atrium worker` hands Command.
type CommandOptions struct {
	Args           []string // the arguments after "worker"
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	Logger         *slog.Logger // default: text records on Stderr
}

// ErrUsage marks a bad `atrium worker` command line.
var ErrUsage = errors.New("atrium worker needs --profile ID --instance ID [--heartbeat-ms N] [--max-line-bytes N]")

// Command runs the hidden `atrium worker` subcommand: it parses --profile,
// --instance, --heartbeat-ms (default DefaultHeartbeatInterval) and
// --max-line-bytes (default DefaultMaxLineBytes), builds the model
// provider (EnvModel, else model.Detect from the environment) and runs
// Serve on stdin/stdout until stdin ends or ctx is done (SIGTERM).
func Command(ctx context.Context, o CommandOptions) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	profile := fs.String("profile", "", "profile id")
	instance := fs.String("instance", "", "instance id")
	hb := fs.Int64("heartbeat-ms", DefaultHeartbeatInterval.Milliseconds(), "heartbeat interval (ms)")
	maxLine := fs.Int("max-line-bytes", DefaultMaxLineBytes, "longest request line (bytes)")
	if err := fs.Parse(o.Args); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *profile == "" || *instance == "" || *hb <= 0 || fs.NArg() > 0 {
		return ErrUsage
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(o.Stderr, nil))
	}
	var cfg model.Config
	if raw := o.Getenv(EnvModel); raw != "" {
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			return fmt.Errorf("worker: %s is not a model config: %w", EnvModel, err)
		}
	} else {
		var why string
		var err error
		cfg, why, err = model.Detect(ctx, model.Config{}, model.DetectOptions{Getenv: o.Getenv, Logger: log})
		if err != nil {
			return fmt.Errorf("worker: detect model: %w", err)
		}
		log.Info("worker model", "instance", *instance, "provider", cfg.Provider, "model", cfg.Model, "why", why)
	}
	p, err := model.FromConfig(cfg, model.OpenAIOptions{Logger: log})
	if err != nil {
		return fmt.Errorf("worker: model: %w", err)
	}
	if p == nil {
		p = noModel{}
	}
	return Serve(ctx, ServeOptions{In: o.Stdin, Out: o.Stdout, Provider: p, ProfileID: *profile, InstanceID: *instance,
		HeartbeatInterval: time.Duration(*hb) * time.Millisecond, MaxLineBytes: *maxLine, Logger: log})
}

// Main runs Command as a whole process on os.Stdin, os.Stdout, os.Stderr
// and the environment, for a binary re-executed as a worker (tests whose
// app under test spawns os.Executable(), i.e. the test binary, dispatch to
// it from TestMain): args are the arguments after "worker"; SIGTERM or an
// interrupt stops it. It returns the exit status: 0, or 1 after writing
// the error to stderr.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := Command(ctx, CommandOptions{Args: args, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// noModel answers every run with a configuration error: the offline
// provider (answers from memory search) lives in the parent's chat
// service, not in workers.
type noModel struct{}

func (noModel) Name() string  { return model.ProviderOffline }
func (noModel) Model() string { return "" }
func (noModel) Stream(context.Context, model.Request, func(model.Delta)) (model.Response, error) {
	return model.Response{}, &model.Error{Kind: model.ErrConfig, Msg: "no model configured for this worker (set OPENAI_BASE_URL/OPENAI_API_KEY or the profile's model)"}
}
