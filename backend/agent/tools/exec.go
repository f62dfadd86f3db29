package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
)

// Exec approval modes (SPEC §6).
const (
	ApprovalDeny      = "deny"      // never run anything
	ApprovalAllowlist = "allowlist" // run binaries whose path matches ExecOptions.Allowlist
	ApprovalAsk       = "ask"       // ask the person for every command
	ApprovalFull      = "full"      // run any binary
)

// Sandbox modes (ExecOptions.Sandbox).
const (
	SandboxAuto    = "auto"    // bubblewrap when bwrap is installed, else run directly
	SandboxRequire = "require" // refuse to run without bubblewrap
	SandboxOff     = "off"     // run directly
)

// Exec defaults.
const (
	DefaultExecTimeout   = 30 * time.Second
	MaxExecTimeout       = 10 * time.Minute
	DefaultMaxOutput     = 64 << 10
	DefaultExecPath      = "/usr/local/bin:/usr/bin:/bin"
	DefaultExecWaitDelay = 2 * time.Second
)

// Approver asks the person about one command (exec approval "ask");
// *agent.Permissions implements it.
type Approver interface {
	AskOnce(ctx context.Context, req agent.PermissionRequest) (bool, error)
}

// ExecOptions configure the exec tool (level L2: the session must also hold
// L2, which the loop asks for).
type ExecOptions struct {
	// Approval is the exec approval mode: ApprovalDeny (default),
	// ApprovalAllowlist, ApprovalAsk or ApprovalFull.
	Approval string
	// Allowlist holds binary path globs (filepath.Match syntax, e.g.
	// "/usr/bin/*", "/usr/bin/git") for ApprovalAllowlist. They are
	// matched against the absolute path the command resolves to through
	// Path (not following a final symlink: /usr/bin/python3 is matched as
	// such).
	Allowlist []string
	// Approver answers ApprovalAsk. Required for it.
	Approver Approver
	// Dirs are the directories (absolute) a command may read and write;
	// the first is the default working directory, and "dir" arguments
	// must be inside one of them. Default: the guard's workspace.
	Dirs []string
	// ReadOnlyDirs are further directories a sandboxed command may read.
	ReadOnlyDirs []string
	// Sandbox is SandboxAuto (default), SandboxRequire or SandboxOff.
	// Inside bubblewrap a command sees /usr (and the /bin, /lib, /sbin
	// links), /etc/alternatives and /etc/ld.so.cache read-only, a fresh
	// /tmp, /proc and /dev, Dirs read-write and ReadOnlyDirs read-only,
	// and has no network (every namespace unshared).
	Sandbox string
	// Bwrap is the bubblewrap binary. Default: "bwrap" looked up in PATH.
	Bwrap string
	// Timeout is the default and MaxTimeout the longest timeout of one
	// command. Defaults DefaultExecTimeout (30 s), MaxExecTimeout (10 min).
	Timeout    time.Duration
	MaxTimeout time.Duration
	// MaxOutput caps each of stdout and stderr (bytes; the rest is
	// counted, not kept). Default DefaultMaxOutput (64 KiB).
	MaxOutput int
	// Path is the PATH commands are looked up in and run with. Default
	// DefaultExecPath.
	Path string
}

type execTool struct {
	e     *env
	o     ExecOptions
	bwrap string // "" when not sandboxing
}

func newExecTool(e *env, o ExecOptions) (*execTool, error) {
	if o.Approval == "" {
		o.Approval = ApprovalDeny
	}
	switch o.Approval {
	case ApprovalDeny, ApprovalAllowlist, ApprovalFull:
	case ApprovalAsk:
		if o.Approver == nil {
			return nil, errors.New("tools: exec approval \"ask\" needs ExecOptions.Approver")
		}
	default:
		return nil, fmt.Errorf("tools: exec approval %q (want deny, allowlist, ask or full)", o.Approval)
	}
	for _, g := range o.Allowlist {
		if _, err := filepath.Match(g, ""); err != nil || !filepath.IsAbs(g) {
			return nil, fmt.Errorf("tools: exec allowlist glob %q must be an absolute path glob", g)
		}
	}
	if len(o.Dirs) == 0 {
		o.Dirs = []string{e.o.Guard.Workspace()}
	}
	for i, list := range [][]string{o.Dirs, o.ReadOnlyDirs} {
		for j, d := range list {
			abs, err := filepath.Abs(d)
			if err != nil {
				return nil, fmt.Errorf("tools: exec dir %q: %w", d, err)
			}
			real, err := filepath.EvalSymlinks(abs)
			if err != nil {
				return nil, fmt.Errorf("tools: exec dir %q: %w", d, err)
			}
			if i == 0 {
				o.Dirs[j] = real
			} else {
				o.ReadOnlyDirs[j] = real
			}
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultExecTimeout
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = MaxExecTimeout
	}
	o.Timeout = min(o.Timeout, o.MaxTimeout)
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.Path == "" {
		o.Path = DefaultExecPath
	}
	if o.Sandbox == "" {
		o.Sandbox = SandboxAuto
	}
	x := &execTool{e: e, o: o}
	switch o.Sandbox {
	case SandboxOff:
	case SandboxAuto, SandboxRequire:
		name := o.Bwrap
		if name == "" {
			name = "bwrap"
		}
		if p, err := exec.LookPath(name); err == nil {
			x.bwrap = p
		} else if o.Sandbox == SandboxRequire {
			return nil, fmt.Errorf("tools: exec sandbox required but %s is not installed: %w", name, err)
		}
	default:
		return nil, fmt.Errorf("tools: exec sandbox %q (want auto, require or off)", o.Sandbox)
	}
	return x, nil
}

// Sandboxed reports whether commands run inside bubblewrap.
func (x *execTool) Sandboxed() bool { return x.bwrap != "" }

const execSchema = `{"type":"object","properties":{` +
	`"argv":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":256,"description":"the program and its arguments, e.g. [\"ls\", \"-la\"]; no shell is involved"},` +
	`"dir":{"type":"string","description":"working directory (absolute, inside an allowed directory; default the first)"},` +
	`"stdin":{"type":"string","maxLength":1048576,"description":"text given on standard input"},` +
	`"timeoutSec":{"type":"number","exclusiveMinimum":0,"description":"seconds before the command is killed"}` +
	`},"required":["argv"],"additionalProperties":false}`

func (x *execTool) register(r *agent.Registry) error {
	return r.Register(agent.Spec{Name: Exec, Level: agent.L2, Timeout: x.o.MaxTimeout + 5*time.Second, Schema: json.RawMessage(execSchema),
		Description: fmt.Sprintf("Run a program (no shell) with a timeout; output is capped. Exec approval: %s.", x.o.Approval)}, x.run)
}

type execResult struct {
	Binary       string `json:"binary"`
	Dir          string `json:"dir"`
	ExitCode     int    `json:"exitCode"`
	Stdout       string `json:"stdout"`
	Stderr       string `json:"stderr"`
	StdoutBytes  int64  `json:"stdoutBytes"`
	StderrBytes  int64  `json:"stderrBytes"`
	Truncated    bool   `json:"truncated,omitempty"`
	Sandbox      string `json:"sandbox"` // "bwrap" | "none"
	DurationMsec int64  `json:"durationMs"`
}

// capped keeps the first max bytes written and counts all.
type capped struct {
	mu    sync.Mutex
	max   int
	buf   bytes.Buffer
	total int64
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (x *execTool) run(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a struct {
		Argv       []string `json:"argv"`
		Dir        string   `json:"dir"`
		Stdin      string   `json:"stdin"`
		TimeoutSec float64  `json:"timeoutSec"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("exec: %w", err)
	}
	for _, s := range a.Argv {
		if strings.IndexByte(s, 0) >= 0 {
			return agent.Output{}, errors.New("exec: arguments must not contain NUL")
		}
	}
	bin, err := x.lookPath(a.Argv[0])
	if err != nil {
		return agent.Output{}, fmt.Errorf("exec: %w", err)
	}
	dir, err := x.dir(a.Dir)
	if err != nil {
		return agent.Output{}, x.e.deny(Exec, a.Dir, err.Error())
	}
	line := commandLine(bin, a.Argv[1:])
	if err := x.approve(ctx, c, bin, dir, line); err != nil {
		return agent.Output{}, err
	}
	timeout := x.o.Timeout
	if a.TimeoutSec > 0 {
		timeout = min(time.Duration(a.TimeoutSec*float64(time.Second)), x.o.MaxTimeout)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := append([]string{bin}, a.Argv[1:]...)
	res := execResult{Binary: bin, Dir: dir, Sandbox: "none"}
	if x.bwrap != "" {
		argv = append(x.bwrapArgs(dir), argv...)
		res.Sandbox = "bwrap"
	}
	cmd := exec.CommandContext(rctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + x.o.Path, "HOME=" + dir, "LANG=C.UTF-8"}
	if x.bwrap != "" {
		cmd.Env = nil // bwrap --clearenv sets the command's environment
	}
	cmd.Stdin = strings.NewReader(a.Stdin)
	stdout, stderr := &capped{max: x.o.MaxOutput}, &capped{max: x.o.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = DefaultExecWaitDelay
	killGroup(cmd)
	start := time.Now()
	err = cmd.Run()
	res.DurationMsec = time.Since(start).Milliseconds()
	res.Stdout, res.Stderr = strings.ToValidUTF8(stdout.buf.String(), "\uFFFD"), strings.ToValidUTF8(stderr.buf.String(), "\uFFFD")
	res.StdoutBytes, res.StderrBytes = stdout.total, stderr.total
	res.Truncated = stdout.total > int64(stdout.buf.Len()) || stderr.total > int64(stderr.buf.Len())
	var ee *exec.ExitError
	switch {
	case rctx.Err() != nil && ctx.Err() == nil:
		return agent.Output{}, fmt.Errorf("exec %s: killed after the timeout of %s; output so far: %s", line, timeout, tail(res.Stdout+res.Stderr, 500))
	case ctx.Err() != nil:
		return agent.Output{}, fmt.Errorf("exec %s: %w", line, ctx.Err())
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	case err != nil:
		return agent.Output{}, fmt.Errorf("exec %s: %w", line, err)
	}
	return agent.Output{Data: res, LogSummary: fmt.Sprintf("%s: exit %d, %d+%d bytes of output (sandbox %s)", line, res.ExitCode, res.StdoutBytes, res.StderrBytes, res.Sandbox)}, nil
}

func tail(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n:])
}

// commandLine renders a command for prompts and logs (quoted where needed).
func commandLine(bin string, args []string) string {
	parts := []string{bin}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`;&|<>*?") {
			a = fmt.Sprintf("%q", a)
		}
		parts = append(parts, a)
	}
	s := strings.Join(parts, " ")
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// lookPath resolves argv[0]: an absolute path as is (cleaned), a bare name
// through Path; relative paths with folders are refused.
func (x *execTool) lookPath(name string) (string, error) {
	if filepath.IsAbs(name) {
		p := filepath.Clean(name)
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s is not an executable file", p)
		}
		return p, nil
	}
	if strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("%q: give a program name or an absolute path", name)
	}
	for _, d := range filepath.SplitList(x.o.Path) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in %s", name, x.o.Path)
}

// dir resolves the working directory: "" is the first of Dirs; others must
// be absolute and inside one of Dirs after resolving symlinks.
func (x *execTool) dir(d string) (string, error) {
	if d == "" {
		return x.o.Dirs[0], nil
	}
	if !filepath.IsAbs(d) {
		return "", fmt.Errorf("working directory %q must be absolute", d)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(d))
	if err != nil {
		return "", fmt.Errorf("working directory %q: %v", d, err)
	}
	for _, allowed := range x.o.Dirs {
		if rel, err := filepath.Rel(allowed, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return real, nil
		}
	}
	return "", fmt.Errorf("working directory %q is outside the allowed directories", d)
}

// approve applies the exec approval mode and audits the decision.
func (x *execTool) approve(ctx context.Context, c agent.Call, bin, dir, line string) error {
	switch x.o.Approval {
	case ApprovalFull:
		return x.e.allow(Exec, line, "exec approval full")
	case ApprovalAllowlist:
		for _, g := range x.o.Allowlist {
			if ok, _ := filepath.Match(g, bin); ok {
				return x.e.allow(Exec, line, fmt.Sprintf("exec allowlist %q", g))
			}
		}
		return x.e.deny(Exec, line, fmt.Sprintf("%s is not on the exec allowlist", bin))
	case ApprovalAsk:
		yes, err := x.o.Approver.AskOnce(ctx, agent.PermissionRequest{Kind: agent.KindExec, Tool: Exec, CallID: c.ID, Level: agent.L2,
			ArgsSummary: line, Reason: fmt.Sprintf("run %s in %s?", line, dir),
			ReasonCode: agent.ReasonCodeExecRun, ReasonParams: map[string]string{"command": line, "dir": dir}})
		if err != nil {
			return fmt.Errorf("exec: %w", err)
		}
		if !yes {
			return x.e.deny(Exec, line, "the person did not approve the command")
		}
		return x.e.allow(Exec, line, "approved by the person")
	}
	return x.e.deny(Exec, line, "exec approval is deny")
}

// bwrapArgs builds the bubblewrap command line up to the program.
func (x *execTool) bwrapArgs(dir string) []string {
	args := []string{x.bwrap, "--die-with-parent", "--new-session", "--unshare-all",
		"--ro-bind", "/usr", "/usr"}
	for _, p := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64"} {
		st, err := os.Lstat(p)
		switch {
		case err != nil:
		case st.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", target, p)
			}
		case st.IsDir():
			args = append(args, "--ro-bind", p, p)
		}
	}
	args = append(args, "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
		"--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	for _, d := range x.o.ReadOnlyDirs {
		args = append(args, "--ro-bind", d, d)
	}
	for _, d := range x.o.Dirs {
		args = append(args, "--bind", d, d)
	}
	args = append(args, "--chdir", dir, "--clearenv", "--setenv", "PATH", x.o.Path, "--setenv", "HOME", dir,
		"--setenv", "LANG", "C.UTF-8", "--")
	return args
}
