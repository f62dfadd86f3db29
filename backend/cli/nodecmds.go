package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/nodehost"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// The `atrium nodes` subcommands that run commands on nodes (SPEC §7,
// issue 22 item 5), through the running app's node.list and node.invoke
// as admin (the operator token on loopback).

// nodeCommandSubs are the nodes subcommands that act on nodes (the others
// manage pairings, devices.go).
var nodeCommandSubs = []string{"describe", "invoke", "run", "notify", "location get", "camera snap", "camera clip", "screen record", "screen snapshot"}

// nodeSubGroups are the nodes subcommands of two words: the first word and
// the second words it takes.
var nodeSubGroups = map[string][]string{"location": {"get"}, "camera": {"snap", "clip"}, "screen": {"record", "snapshot"}}

// Defaults of the node commands' --timeout.
const (
	// defaultInvokeTimeout is node.invoke's own default (nodes.DefaultInvokeTimeout).
	defaultInvokeTimeout = 30 * time.Second
	// defaultMediaTimeout gives a photo time for the camera to start, the
	// person to allow it the first time, and the transfer.
	defaultMediaTimeout = 60 * time.Second
	// defaultRunTimeout is the node host's own ceiling for a run
	// (exec-approvals.json timeoutMs, default nodehost.DefaultTimeoutMs):
	// asking for more gets no more unless the node's file allows it.
	defaultRunTimeout = nodehost.DefaultTimeoutMs * time.Millisecond
	// callSlack is how much longer than --timeout the CLI waits for the
	// gateway's answer (the gateway itself answers TIMEOUT after the
	// timeout plus a tenth, at most 2 s).
	callSlack = 15 * time.Second
	// runAnswerMargin is how much longer than the run's own timeout the
	// gateway waits for system.run's answer, so that a command the node
	// stopped at --timeout is reported with its output (timedOut), not
	// as the gateway's TIMEOUT.
	runAnswerMargin = 5 * time.Second
)

// Exit statuses of `atrium nodes run` that are not the command's own.
const (
	// exitRunTimedOut: the node killed the command at the timeout (as
	// timeout(1) does).
	exitRunTimedOut = 124
	// exitRunKilled: the command ended by a signal the CLI cannot name
	// (else 128 + the signal's number, as a shell reports it).
	exitRunKilled = 128
)

// exitStatus is an exit status passed through from a node's command: Main
// returns it and prints nothing more.
type exitStatus struct{ code int }

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// nodeTargetHelp says what --node takes (every node command's usage).
const nodeTargetHelp = "--node takes a node's name, its id or the start of its id (4 characters at\n" +
	"least, unambiguous), or caps:CAP[,CAP…] for any connected node with those caps\n" +
	"that may run the command. With several candidates the one with the fewest\n" +
	"invokes in flight gets the work; one that answers busy (or is gone) before the\n" +
	"command ran hands it to the next. A name several connected nodes share is\n" +
	"refused with the list of them: give the id then.\n\n"

// nodeCmd holds the flags shared by the node commands.
type nodeCmd struct {
	common
	node    string
	timeout time.Duration
}

func (c *nodeCmd) register(fs *flag.FlagSet, timeout time.Duration, withNode bool) {
	c.registerApp(fs)
	c.registerJSON(fs)
	if withNode {
		fs.StringVar(&c.node, "node", "", "the node: a `name`, an id or id prefix, or caps:CAP[,CAP…]")
	}
	fs.DurationVar(&c.timeout, "timeout", timeout, "how long the node has to answer (at most 10m)")
}

// check validates --node and --timeout.
func (c *nodeCmd) check(sub string) error {
	if c.node == "" {
		return fmt.Errorf("%w: nodes %s needs --node NAME (a name, an id or caps:CAP; atrium nodes list shows them)", errUsage, sub)
	}
	if c.timeout <= 0 || c.timeout > nodes.MaxInvokeTimeout {
		return fmt.Errorf("%w: --timeout %v: want more than 0 and at most %v", errUsage, c.timeout, nodes.MaxInvokeTimeout)
	}
	return nil
}

// runNodeCommand runs `atrium nodes describe|invoke|run|notify|location get`.
func runNodeCommand(ctx context.Context, sub string, args []string, o Options) error {
	var c nodeCmd
	fs := newFlagSet("nodes "+sub, o)
	var command, params, cwd, title, body, accuracy, facing, out string
	var env envFlag
	var maxWidth int
	var quality float64
	var delay, duration time.Duration
	var noAudio bool
	var fps, screen int
	var format string
	switch sub {
	case "describe":
		c.register(fs, defaultInvokeTimeout, false)
	case "invoke":
		c.register(fs, defaultInvokeTimeout, true)
		fs.StringVar(&command, "command", "", "the `command` to run, e.g. system.which (atrium nodes describe lists a node's)")
		fs.StringVar(&params, "params", "{}", "the command's params as a JSON `object`")
	case "run":
		c.register(fs, defaultRunTimeout, true)
		fs.StringVar(&cwd, "cwd", "", "absolute working `dir`ectory on the node (default: the node user's home)")
		fs.Var(&env, "env", "`NAME=VALUE` for the command's environment (repeatable; the node keeps only names on its envAllowlist)")
	case "notify":
		c.register(fs, defaultInvokeTimeout, true)
		fs.StringVar(&title, "title", "", "the notification's `title`")
		fs.StringVar(&body, "body", "", "the notification's `text`")
	case "camera snap":
		c.register(fs, defaultMediaTimeout, true)
		fs.StringVar(&facing, "facing", "both", "which camera: front (the person's side), back, or both (one photo each)")
		fs.IntVar(&maxWidth, "max-width", 0, "the photo's width at most, in `pixels` (default: the node's, 1600 on a phone)")
		fs.Float64Var(&quality, "quality", 0, "JPEG `quality` 0.05…1 (default: the node's, 0.85 on a phone)")
		fs.DurationVar(&delay, "delay", 0, "wait this long after the camera starts before the photo (at most 10s)")
		fs.StringVar(&out, "out", "", "also copy each photo into this `dir`ectory (it lands in $ATRIUM_HOME/media in any case)")
	case "camera clip":
		c.register(fs, 0, true)
		fs.StringVar(&facing, "facing", "back", "which camera: front (the person's side) or back")
		fs.DurationVar(&duration, "duration", 5*time.Second, "the clip's length (0.5s to 60s)")
		fs.BoolVar(&noAudio, "no-audio", false, "record no sound")
		fs.StringVar(&out, "out", "", "also copy the clip into this `dir`ectory (it lands in $ATRIUM_HOME/media in any case)")
	case "screen record":
		c.register(fs, 0, true)
		fs.DurationVar(&duration, "duration", 10*time.Second, "the recording's length (0.5s to 60s)")
		fs.IntVar(&fps, "fps", 10, "frames per second (1 to 30)")
		fs.IntVar(&screen, "screen", -1, "which `screen` of a node with several (0, 1, …; `atrium node`: X screen N of its display;\n"+
			"default: the whole display, or the one a browser's person picks)")
		fs.StringVar(&out, "out", "", "also copy the recording into this `dir`ectory (it lands in $ATRIUM_HOME/media in any case)")
	case "screen snapshot":
		c.register(fs, defaultMediaTimeout, true)
		fs.StringVar(&format, "format", "png", "png or jpeg")
		fs.IntVar(&maxWidth, "max-width", 0, "the picture's width at most, in `pixels` (default: the node's, 3840)")
		fs.Float64Var(&quality, "quality", 0, "JPEG `quality` 0.05…1 (default: the node's)")
		fs.IntVar(&screen, "screen", -1, "which `screen` of a node with several (0, 1, …; default: the whole display)")
		fs.StringVar(&out, "out", "", "also copy the picture into this `dir`ectory (it lands in $ATRIUM_HOME/media in any case)")
	case "location get":
		c.register(fs, defaultInvokeTimeout, true)
		fs.StringVar(&accuracy, "accuracy", "balanced", "coarse (about 1 km, a position up to 10 minutes old), balanced (the device's\n"+
			"ordinary fix, up to 1 minute old) or precise (GPS, fresh)")
	}
	pos, err := parse(fs, args, o)
	if err != nil {
		if sub == "run" && errors.Is(err, errUsage) {
			return fmt.Errorf("%w (put the command after --: atrium nodes run --node NAME -- make test)", err)
		}
		return err
	}
	usage := func() error {
		cmd, _ := lookup("nodes " + sub)
		return fmt.Errorf("%w: usage: %s", errUsage, cmd.usage())
	}
	switch sub {
	case "describe":
		if len(pos) != 1 {
			return usage()
		}
		c.node = pos[0]
	case "run":
		if len(pos) == 0 {
			return fmt.Errorf("%w: nodes run needs the command to run after --: atrium nodes run --node NAME -- make test", errUsage)
		}
	default:
		if len(pos) != 0 {
			return usage()
		}
	}
	if (sub == "camera clip" || sub == "screen record") && c.timeout == 0 {
		c.timeout = min(duration+defaultMediaTimeout, nodes.MaxInvokeTimeout) // the recording, then as long as a photo
	}
	if err := c.check(sub); err != nil {
		return err
	}
	p := map[string]any{}
	switch sub {
	case "invoke":
		if command == "" {
			return fmt.Errorf("%w: nodes invoke needs --command (e.g. system.which; atrium nodes describe NAME lists a node's)", errUsage)
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(params), &obj); err != nil || obj == nil {
			return fmt.Errorf("%w: --params must be a JSON object, e.g. '{\"name\":\"git\"}'", errUsage)
		}
		p = obj
	case "run":
		command = "system.run"
		p["command"], p["timeoutMs"] = pos, c.timeout.Milliseconds()
		if cwd != "" {
			p["cwd"] = cwd
		}
		if len(env) > 0 {
			p["env"] = map[string]string(env)
		}
	case "notify":
		if title == "" && body == "" {
			return fmt.Errorf("%w: nodes notify needs --title or --body", errUsage)
		}
		command, p["title"], p["body"] = "system.notify", title, body
	case "location get":
		lp, err := locationParams(accuracy)
		if err != nil {
			return err
		}
		command, p = "location.get", lp
	case "camera snap":
		if facing != "front" && facing != "back" && facing != "both" {
			return fmt.Errorf("%w: --facing %q: want front, back or both", errUsage, facing)
		}
		if delay < 0 || delay > 10*time.Second {
			return fmt.Errorf("%w: --delay %v: want 0 to 10s", errUsage, delay)
		}
		command = "camera.snap"
		if maxWidth > 0 {
			p["maxWidth"] = maxWidth
		}
		if quality > 0 {
			p["quality"] = quality
		}
		if delay > 0 {
			p["delayMs"] = delay.Milliseconds()
		}
	case "camera clip":
		if facing != "front" && facing != "back" {
			return fmt.Errorf("%w: --facing %q: want front or back", errUsage, facing)
		}
		if err := checkDuration(duration, c.timeout); err != nil {
			return err
		}
		command, p["durationMs"], p["includeAudio"] = "camera.clip", duration.Milliseconds(), !noAudio
	case "screen record":
		if err := checkDuration(duration, c.timeout); err != nil {
			return err
		}
		if fps < 1 || fps > 30 {
			return fmt.Errorf("%w: --fps %d: want 1 to 30", errUsage, fps)
		}
		command, p["durationMs"], p["fps"] = "screen.record", duration.Milliseconds(), fps
		if screen >= 0 {
			p["screen"] = screen
		}
	case "screen snapshot":
		if format != "png" && format != "jpeg" {
			return fmt.Errorf("%w: --format %q: want png or jpeg", errUsage, format)
		}
		command, p["format"] = "screen.snapshot", format
		if maxWidth > 0 {
			p["maxWidth"] = maxWidth
		}
		if quality > 0 {
			p["quality"] = quality
		}
		if screen >= 0 {
			p["screen"] = screen
		}
	}
	if (sub == "screen record" || sub == "screen snapshot") && screen < -1 {
		return fmt.Errorf("%w: --screen %d: want 0 or more", errUsage, screen)
	}
	if out != "" {
		if st, err := os.Stat(out); err != nil || !st.IsDir() {
			return fmt.Errorf("%w: --out %s is not a directory", errUsage, out)
		}
	}
	r, err := c.dialRunningApp(ctx, o, "nodes "+sub)
	if err != nil {
		return err
	}
	defer r.Close()
	cands, err := resolveNodes(ctx, r, c.node, command)
	if err != nil {
		return err
	}
	if sub == "describe" {
		if c.json {
			if len(cands) == 1 {
				return printJSON(o.Stdout, cands[0])
			}
			return printJSON(o.Stdout, map[string]any{"nodes": cands})
		}
		return printDescribe(o.Stdout, cands)
	}
	switch sub {
	case "camera snap":
		facings := []string{facing}
		if facing == "both" {
			facings = []string{"front", "back"}
		}
		return takeMedia(ctx, o, r, cands, command, facings, p, c.timeout, out, "photos", c.json)
	case "camera clip":
		return takeMedia(ctx, o, r, cands, command, []string{facing}, p, c.timeout, out, "clips", c.json)
	case "screen record":
		return takeMedia(ctx, o, r, cands, command, []string{"screen"}, p, c.timeout, out, "recordings", c.json)
	case "screen snapshot":
		return takeMedia(ctx, o, r, cands, command, []string{"screen"}, p, c.timeout, out, "screenshots", c.json)
	}
	var watch *askWatch
	if sub == "run" {
		watch = watchAsks(r.c, cands, pos, o.Stderr)
	}
	timeout := c.timeout
	if sub == "run" {
		timeout = min(timeout+runAnswerMargin, nodes.MaxInvokeTimeout)
	}
	res, err := invokeFirstFree(ctx, r, cands, command, p, timeout)
	if watch != nil {
		watch.stop()
	}
	if err != nil {
		return err
	}
	return printResult(o, sub, c.json, res, cands)
}

// checkDuration checks a recording's --duration (0.5s to 60s, the nodes'
// bounds) against --timeout, which must leave time for the send.
func checkDuration(duration, timeout time.Duration) error {
	if duration < 500*time.Millisecond || duration > time.Minute {
		return fmt.Errorf("%w: --duration %v: want 0.5s to 60s", errUsage, duration)
	}
	if duration >= timeout {
		return fmt.Errorf("%w: --timeout %v must be longer than --duration %v", errUsage, timeout, duration)
	}
	return nil
}

// envFlag is --env NAME=VALUE, repeatable.
type envFlag map[string]string

func (e *envFlag) String() string { return "" }
func (e *envFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	if *e == nil {
		*e = envFlag{}
	}
	(*e)[name] = value
	return nil
}

// locationParams are location.get's params for --accuracy: the phone page
// reads accuracy (coarse: the position rounded to about 1 km) and the
// Geolocation API's highAccuracy and maxAgeMs.
func locationParams(accuracy string) (map[string]any, error) {
	p := map[string]any{"accuracy": accuracy}
	switch accuracy {
	case "coarse":
		p["highAccuracy"], p["maxAgeMs"] = false, (10 * time.Minute).Milliseconds()
	case "balanced":
		p["highAccuracy"], p["maxAgeMs"] = false, time.Minute.Milliseconds()
	case "precise":
		p["highAccuracy"], p["maxAgeMs"] = true, 0
	default:
		return nil, fmt.Errorf("%w: --accuracy %q: want coarse, balanced or precise", errUsage, accuracy)
	}
	return p, nil
}

// resolveNodes finds the nodes --node spec names (node.list): caps:A,B →
// every connected node with those caps that may run command; else the node
// with that id, else the nodes with that name (case-insensitive; the
// connected ones when some are), else the node whose id starts with spec
// (at least 4 characters). Several nodes for a name or prefix is an error
// listing them. The result is ordered for invokeFirstFree: connected
// first, then fewest invokes in flight, then node.list's order (by name).
// command "" (describe) filters nothing by command.
func resolveNodes(ctx context.Context, r remoteMemory, spec, command string) ([]nodes.Node, error) {
	var l struct {
		Nodes []nodes.Node `json:"nodes"`
	}
	if err := r.call(ctx, nodes.MethodNodeList, nil, &l); err != nil {
		return nil, fmt.Errorf("node.list: %w", err)
	}
	all := l.Nodes
	var out []nodes.Node
	if capList, ok := strings.CutPrefix(spec, "caps:"); ok {
		caps := splitList(capList)
		if len(caps) == 0 {
			return nil, fmt.Errorf("%w: --node caps: names no capability (e.g. caps:system)", errUsage)
		}
		offered := false
		for _, n := range all {
			if !n.Connected || !hasEvery(n.Caps, caps) {
				continue
			}
			offered = true
			if command == "" || slices.Contains(n.Commands, command) {
				out = append(out, n)
			}
		}
		switch {
		case !offered:
			return nil, fmt.Errorf("no connected node has caps %s; connected: %s", strings.Join(caps, ", "), nodeNames(all, true))
		case len(out) == 0:
			return nil, fmt.Errorf("no connected node with caps %s may run %s (what a node may run is approved at pairing; atrium nodes list shows it)",
				strings.Join(caps, ", "), command)
		}
	} else {
		out = pickNamed(all, spec)
		if len(out) == 0 {
			return nil, fmt.Errorf("no node %q; connected: %s (atrium nodes list shows every paired device)", spec, nodeNames(all, true))
		}
		if len(out) > 1 {
			return nil, fmt.Errorf("--node %q is ambiguous: it names %d nodes: %s; give the id (or a longer id prefix)", spec, len(out), nodeNames(out, false))
		}
	}
	slices.SortStableFunc(out, func(a, b nodes.Node) int {
		switch {
		case a.Connected != b.Connected:
			if a.Connected {
				return -1
			}
			return 1
		default:
			return a.InvokesInFlight - b.InvokesInFlight
		}
	})
	return out, nil
}

// pickNamed is the nodes spec names: its id, else its name, else its id prefix.
func pickNamed(all []nodes.Node, spec string) []nodes.Node {
	for _, n := range all {
		if n.NodeID == spec {
			return []nodes.Node{n}
		}
	}
	var named, connected, prefixed []nodes.Node
	for _, n := range all {
		if strings.EqualFold(n.DisplayName, spec) {
			named = append(named, n)
			if n.Connected {
				connected = append(connected, n)
			}
		}
		if len(spec) >= 4 && strings.HasPrefix(strings.ToLower(n.NodeID), strings.ToLower(spec)) {
			prefixed = append(prefixed, n)
		}
	}
	switch {
	case len(connected) > 0:
		return connected // a node listed for a while after it disconnected does not make a name ambiguous
	case len(named) > 0:
		return named
	}
	return prefixed
}

// nodeNames lists nodes for an error: "name (id, connected)"; connectedOnly
// leaves the disconnected out; "none" when empty.
func nodeNames(ns []nodes.Node, connectedOnly bool) string {
	var parts []string
	for _, n := range ns {
		if connectedOnly && !n.Connected {
			continue
		}
		state := "connected"
		if !n.Connected {
			state = "disconnected"
		}
		parts = append(parts, fmt.Sprintf("%s (%s, %s, caps %s)", n.DisplayName, n.NodeID, state, listOrDash(n.Caps)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func hasEvery(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func listOrDash(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ",")
}

// cannotRunHere are the failures a node reports when the command could
// not start on it at all (no ffmpeg, no camera, no display or no such
// screen, a phone page in the background): another node of a caps
// selector may well run it.
var cannotRunHere = map[string]bool{"FFMPEG_NOT_FOUND": true, "NO_CAMERA": true, "NO_SCREEN": true,
	"SCREEN_CAPTURE_UNAVAILABLE": true, "NODE_BACKGROUND_UNAVAILABLE": true}

// invokeFirstFree sends command to the first of cands (ordered by
// resolveNodes) that takes it: a retryable UNAVAILABLE whose reason says
// the command did not run (busy, not connected), or a node's failure
// saying it cannot run it there (cannotRunHere), moves on to the next
// candidate; anything else is the answer. When the last candidate cannot
// run it either, its failure is the answer. timeout is node.invoke's
// timeoutMs; the CLI waits at most callSlack longer for the gateway.
func invokeFirstFree(ctx context.Context, r remoteMemory, cands []nodes.Node, command string, params map[string]any,
	timeout time.Duration) (nodes.InvokeResult, error) {
	var refused []string
	for i, n := range cands {
		cctx, cancel := context.WithTimeout(ctx, timeout+callSlack)
		var res nodes.InvokeResult
		err := r.c.Call(cctx, nodes.MethodNodeInvoke, map[string]any{"nodeId": n.NodeID, "command": command, "params": params,
			"timeoutMs": timeout.Milliseconds()}, &res)
		cancel()
		var ge *gateway.Error
		if errors.As(err, &ge) && ge.Code == gateway.CodeUnavailable && len(cands) > 1 &&
			(ge.Details["reason"] == nodes.ReasonBusy || ge.Details["reason"] == nodes.ReasonNotConnected) {
			refused = append(refused, ge.Message)
			continue
		}
		if err != nil {
			return res, invokeError(n, command, timeout, err)
		}
		if !res.OK && res.Error != nil && cannotRunHere[res.Error.Code] && i < len(cands)-1 {
			refused = append(refused, fmt.Sprintf("node %s: %s %s", n.DisplayName, res.Error.Code, res.Error.Message))
			continue
		}
		return res, nil
	}
	return nodes.InvokeResult{}, fmt.Errorf("no node took %s, try again in a moment: %s", command, strings.Join(refused, "; "))
}

// invokeError is node.invoke's refusal for people: the gateway's message
// and what to do.
func invokeError(n nodes.Node, command string, timeout time.Duration, err error) error {
	var ge *gateway.Error
	if !errors.As(err, &ge) {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("node %s: no answer from the app within %v: %w", n.DisplayName, timeout+callSlack, err)
		}
		return err
	}
	switch ge.Code {
	case gateway.CodeTimeout:
		return fmt.Errorf("%s (give it longer with --timeout, at most %v)", ge.Message, nodes.MaxInvokeTimeout)
	case gateway.CodeForbidden:
		if nodes.IsMediaCommand(command) || command == "camera.list" {
			return fmt.Errorf("%s (camera and screen commands: `atrium node` offers them only where ffmpeg is installed — it says "+
				"what it left out when it starts; a phone page has no screen.*; what a node may run is approved at pairing: "+
				"atrium nodes describe %s)", ge.Message, n.NodeID)
		}
		return fmt.Errorf("%s (what a node may run is approved at pairing: atrium nodes describe %s)", ge.Message, n.NodeID)
	case gateway.CodeUnavailable:
		return fmt.Errorf("%s (is it running? atrium nodes list shows when it was last seen)", ge.Message)
	}
	return errors.New(ge.Message)
}

// nodeFailure is a result in which the node reports a failure, with what
// to do about the common ones.
func nodeFailure(res nodes.InvokeResult, name string) error {
	e := res.Error
	if e == nil {
		e = &nodes.NodeError{Code: "UNKNOWN", Message: "the node reported a failure without details"}
	}
	hint := ""
	switch {
	case res.Command == "system.run" && e.Code == gateway.CodeForbidden:
		hint = " (the node's exec-approvals.json decides what runs: mode deny, allowlist, ask or full)"
	case res.Command == "location.get" && e.Code == gateway.CodeForbidden:
		hint = " (location is off until the device's person turns it on, on the phone page)"
	}
	return fmt.Errorf("node %s: %s %s: %s%s", name, res.Command, e.Code, e.Message, hint)
}

// nameOf is the display name of node id among cands (id when absent).
func nameOf(cands []nodes.Node, id string) string {
	for _, n := range cands {
		if n.NodeID == id {
			return n.DisplayName
		}
	}
	return id
}

// printResult shows a node command's result: system.run's streams and exit
// status, a notification's delivery, a position, or invoke's JSON.
func printResult(o Options, sub string, asJSON bool, res nodes.InvokeResult, cands []nodes.Node) error {
	name := nameOf(cands, res.NodeID)
	if !res.OK {
		if asJSON {
			_ = printJSON(o.Stdout, res)
		}
		return nodeFailure(res, name)
	}
	switch sub {
	case "invoke":
		if asJSON {
			return printJSON(o.Stdout, res)
		}
		var v any
		if err := json.Unmarshal(res.Payload, &v); err != nil {
			return fmt.Errorf("node %s answered a payload that is not JSON: %w", name, err)
		}
		return printJSON(o.Stdout, v)
	case "run":
		return printRun(o, asJSON, res, name)
	case "notify":
		var n struct {
			Delivered bool   `json:"delivered"`
			Via       string `json:"via"`
		}
		if err := json.Unmarshal(res.Payload, &n); err != nil {
			return fmt.Errorf("node %s: system.notify's answer: %w", name, err)
		}
		if asJSON {
			return printJSON(o.Stdout, map[string]any{"nodeId": res.NodeID, "delivered": n.Delivered, "via": n.Via})
		}
		if !n.Delivered {
			// atrium node without a desktop notifier (via "log"): the node took it, nobody saw it.
			fmt.Fprintf(o.Stdout, "Sent to %s, which could not show it (via %s): on Linux atrium node shows notifications with notify-send (Debian libnotify-bin).\n", name, n.Via)
			return nil
		}
		fmt.Fprintf(o.Stdout, "Notified %s (via %s).\n", name, n.Via)
		return nil
	case "location get":
		return printLocation(o.Stdout, asJSON, res, name)
	}
	return nil
}

// printRun writes system.run's stdout and stderr to ours and returns its
// exit status as an exitStatus (nil for 0); notes about the run (cut
// output, dropped env, timeout, signal) go to stderr after its own.
func printRun(o Options, asJSON bool, res nodes.InvokeResult, name string) error {
	var run nodehost.RunResult
	if err := json.Unmarshal(res.Payload, &run); err != nil {
		return fmt.Errorf("node %s: system.run's answer: %w", name, err)
	}
	if asJSON {
		if err := printJSON(o.Stdout, struct {
			NodeID string `json:"nodeId"`
			nodehost.RunResult
		}{res.NodeID, run}); err != nil {
			return err
		}
	} else {
		if _, err := io.WriteString(o.Stdout, run.Stdout); err != nil {
			return fmt.Errorf("write the command's stdout: %w", err)
		}
		if _, err := io.WriteString(o.Stderr, run.Stderr); err != nil {
			return fmt.Errorf("write the command's stderr: %w", err)
		}
		if run.Truncated {
			fmt.Fprintf(o.Stderr, "atrium: %s cut the output at its maxOutputBytes (the command wrote %d bytes to stdout, %d to stderr)\n",
				name, run.StdoutBytes, run.StderrBytes)
		}
		if len(run.EnvDropped) > 0 {
			fmt.Fprintf(o.Stderr, "atrium: %s dropped --env %s (not on its envAllowlist)\n", name, strings.Join(run.EnvDropped, ", "))
		}
	}
	code := run.ExitCode
	switch {
	case run.TimedOut:
		fmt.Fprintf(o.Stderr, "atrium: %s stopped the command at its timeout after %v (give it longer with --timeout; the node's exec-approvals.json timeoutMs caps it)\n",
			name, time.Duration(run.DurationMs)*time.Millisecond)
		code = exitRunTimedOut
	case run.Signal != "":
		fmt.Fprintf(o.Stderr, "atrium: the command on %s was killed by signal %s\n", name, run.Signal)
		code = exitRunKilled + signalNumbers[run.Signal]
	case code < 0 || code > 255:
		code = 1 // an exit code a process status cannot carry (e.g. a Windows NTSTATUS)
	}
	if code == 0 {
		return nil
	}
	return exitStatus{code}
}

// signalNumbers are the POSIX numbers of the signals a node names (Go's
// syscall.Signal.String on Unix) that are the same on every Unix.
var signalNumbers = map[string]int{"hangup": 1, "interrupt": 2, "quit": 3, "aborted": 6, "killed": 9,
	"segmentation fault": 11, "broken pipe": 13, "terminated": 15}

// printLocation shows location.get's payload: the position, its accuracy
// and when it was taken, then what else the device reported.
func printLocation(w io.Writer, asJSON bool, res nodes.InvokeResult, name string) error {
	var loc struct {
		Latitude  float64  `json:"latitude"`
		Longitude float64  `json:"longitude"`
		Accuracy  float64  `json:"accuracyMeters"`
		Altitude  *float64 `json:"altitudeMeters"`
		Heading   *float64 `json:"headingDegrees"`
		Speed     *float64 `json:"speedMps"`
		Timestamp int64    `json:"timestamp"`
	}
	if err := json.Unmarshal(res.Payload, &loc); err != nil {
		return fmt.Errorf("node %s: location.get's answer: %w", name, err)
	}
	if asJSON {
		var v map[string]any
		_ = json.Unmarshal(res.Payload, &v)
		v["nodeId"] = res.NodeID
		return printJSON(w, v)
	}
	at := time.UnixMilli(loc.Timestamp).Local().Format("2006-01-02 15:04:05")
	fmt.Fprintf(w, "%s: %.6f, %.6f ±%.0f m (taken %s)\n", name, loc.Latitude, loc.Longitude, loc.Accuracy, at)
	var more []string
	if loc.Altitude != nil {
		more = append(more, fmt.Sprintf("altitude %.0f m", *loc.Altitude))
	}
	if loc.Speed != nil {
		more = append(more, fmt.Sprintf("speed %.1f m/s", *loc.Speed))
	}
	if loc.Heading != nil {
		more = append(more, fmt.Sprintf("heading %.0f°", *loc.Heading))
	}
	if len(more) > 0 {
		fmt.Fprintf(w, "  %s\n", strings.Join(more, ", "))
	}
	return nil
}

// printDescribe shows nodes for people.
func printDescribe(w io.Writer, ns []nodes.Node) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, n := range ns {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s\t%s\n", "Node:", n.DisplayName)
		fmt.Fprintf(tw, "%s\t%s\n", "Id:", n.NodeID)
		fmt.Fprintf(tw, "%s\t%s (%s, version %s)\n", "Platform:", orDash(n.Platform), orDash(n.Mode), orDash(n.Version))
		if n.Connected {
			fmt.Fprintf(tw, "%s\tyes, since %s from %s (%d connection(s))\n", "Connected:",
				time.UnixMilli(n.ConnectedAt).Local().Format("2006-01-02 15:04:05"), orDash(n.IP), len(n.Connections))
		} else {
			fmt.Fprintf(tw, "%s\tno, last seen %s\n", "Connected:", time.UnixMilli(n.LastSeen).Local().Format("2006-01-02 15:04:05"))
		}
		fmt.Fprintf(tw, "%s\t%s\n", "Caps:", listOrDash(n.Caps))
		fmt.Fprintf(tw, "%s\t%s\n", "Commands:", listOrDash(n.Commands))
		fmt.Fprintf(tw, "%s\t%d\n", "In flight:", n.InvokesInFlight)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// askWatch tells the person at the terminal when a node asks the desktop
// whether to run the command (exec approvals "ask"): the exec.ask.*
// events this admin connection gets.
type askWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
}

// watchAsks prints a line to w when one of cands asks about argv (argv[0]
// as the node resolved it: its base name is compared), and another when
// that ask is answered.
func watchAsks(c *gateway.Client, cands []nodes.Node, argv []string, w io.Writer) *askWatch {
	aw := &askWatch{done: make(chan struct{})}
	ids := map[string]bool{}
	for _, n := range cands {
		ids[n.NodeID] = true
	}
	aw.wg.Go(func() {
		mine := map[string]bool{}
		for {
			select {
			case <-aw.done:
				return
			case ev, ok := <-c.Events():
				if !ok {
					return
				}
				switch ev.Event {
				case nodes.EventExecAskRequested:
					var a nodes.ExecAsk
					if json.Unmarshal(ev.Payload, &a) != nil || !ids[a.NodeID] || !sameCommand(a.Command, argv) {
						continue
					}
					mine[a.ID] = true
					fmt.Fprintf(w, "atrium: waiting for approval on the desktop: %s asks whether to run %s (answer in the Atrium window; no answer by %s denies it)\n",
						a.DisplayName, strings.Join(a.Command, " "), time.UnixMilli(a.ExpiresAt).Local().Format("15:04:05"))
				case nodes.EventExecAskResolved:
					var r nodes.ExecAskResolved
					if json.Unmarshal(ev.Payload, &r) != nil || !mine[r.ID] {
						continue
					}
					fmt.Fprintf(w, "atrium: %s (%s)\n", askOutcome(r.Decision), r.By)
				}
			}
		}
	})
	return aw
}

func (aw *askWatch) stop() {
	close(aw.done)
	aw.wg.Wait()
}

func askOutcome(decision string) string {
	switch decision {
	case nodes.DecisionAllowOnce:
		return "approved once"
	case nodes.DecisionAllowAlways:
		return "approved, and added to the node's allowlist"
	}
	return "denied"
}

// sameCommand reports whether the asked argv is argv, argv[0] resolved to
// a path by the node (compared by base name, / or \ separated).
func sameCommand(asked, argv []string) bool {
	if len(asked) != len(argv) || len(argv) == 0 || !slices.Equal(asked[1:], argv[1:]) {
		return false
	}
	base := func(s string) string { return s[strings.LastIndexAny(s, `/\`)+1:] }
	return base(asked[0]) == base(argv[0])
}

// takeMedia runs a media command (camera.snap, camera.clip) once per
// facing (the second on the node that took the first) and shows each
// stored file (printMedia; --json: {<jsonKey>:[{facing, nodeId, media,
// saved}]}). Every facing is tried; a failed one is reported after the
// others.
func takeMedia(ctx context.Context, o Options, r remoteMemory, cands []nodes.Node, command string, facings []string,
	params map[string]any, timeout time.Duration, out, jsonKey string, asJSON bool) error {
	var shown []map[string]any
	var errs []error
	for _, f := range facings {
		p := maps.Clone(params)
		if f != "screen" {
			p["facing"] = f
		}
		res, err := invokeFirstFree(ctx, r, cands, command, p, timeout)
		if err == nil && !res.OK {
			err = nodeFailure(res, nameOf(cands, res.NodeID))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", mediaLabel(f), err))
			continue
		}
		cands = []nodes.Node{nodeOf(cands, res.NodeID)} // the other facing from the same device
		m, err := mediaOf(res)
		if err == nil {
			err = checkMedia(&m, out, f)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", mediaLabel(f), err))
			continue
		}
		if asJSON {
			shown = append(shown, map[string]any{"facing": f, "nodeId": res.NodeID, "media": m.Media, "saved": m.saved})
			continue
		}
		printMedia(o.Stdout, f, m)
	}
	if asJSON && len(shown) > 0 {
		if err := printJSON(o.Stdout, map[string]any{jsonKey: shown}); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// mediaLabel names a capture in an error: "front camera", "screen".
func mediaLabel(facing string) string {
	if facing == "screen" {
		return facing
	}
	return facing + " camera"
}

// shownMedia is a stored file as the CLI shows it: node.invoke's media and
// where --out copied it ("" when not asked).
type shownMedia struct {
	nodes.Media
	saved string
}

// mediaOf is a media command's stored file from its result.
func mediaOf(res nodes.InvokeResult) (shownMedia, error) {
	var m nodes.Media
	if len(res.Media) == 0 || json.Unmarshal(res.Media, &m) != nil || m.Path == "" {
		return shownMedia{}, fmt.Errorf("the answer names no stored file (media %s)", res.Media)
	}
	return shownMedia{Media: m}, nil
}

// checkMedia reads the stored file (this computer's: the app answers on
// loopback), checks its SHA-256 against the sidecar's and copies it into
// dir (when not "") as <name-or-id>-<label><ext>. A file this user cannot
// read is shown unchecked unless it must be copied.
func checkMedia(m *shownMedia, dir, label string) error {
	f, err := os.Open(m.Path)
	if err != nil {
		if dir == "" {
			return nil
		}
		return fmt.Errorf("read the stored file to copy it: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	var dst *os.File
	var w io.Writer = h
	if dir != "" {
		name := filepath.Join(dir, m.ID+"-"+label+filepath.Ext(m.File))
		if dst, err = os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
			return fmt.Errorf("copy the photo: %w", err)
		}
		w = io.MultiWriter(h, dst)
		m.saved = name
	}
	_, err = io.Copy(w, f)
	if dst != nil {
		err = errors.Join(err, dst.Close())
	}
	if sum := hex.EncodeToString(h.Sum(nil)); err == nil && sum != m.SHA256 {
		err = fmt.Errorf("the stored file %s has SHA-256 %s, its sidecar says %s", m.Path, sum, m.SHA256)
	}
	if err != nil && m.saved != "" {
		_ = os.Remove(m.saved) // nothing half-written
		m.saved = ""
	}
	if err != nil {
		return fmt.Errorf("check the stored file: %w", err)
	}
	return nil
}

// printMedia shows a stored file: its path, size, SHA-256 and what else is
// known, and where it was copied.
func printMedia(w io.Writer, label string, m shownMedia) {
	dims := ""
	if m.Width > 0 && m.Height > 0 {
		dims = fmt.Sprintf(", %d×%d", m.Width, m.Height)
	}
	if m.DurationMs > 0 {
		dims += fmt.Sprintf(", %.1f s", float64(m.DurationMs)/1000)
	}
	fmt.Fprintf(w, "%s: %s\n  %d bytes%s, %s, sha256 %s\n", label, m.Path, m.Size, dims, orDash(m.MIME), m.SHA256)
	if m.saved != "" {
		fmt.Fprintf(w, "  copied to %s\n", m.saved)
	}
}

// nodeOf is node id among cands.
func nodeOf(cands []nodes.Node, id string) nodes.Node {
	for _, n := range cands {
		if n.NodeID == id {
			return n
		}
	}
	return nodes.Node{NodeID: id, DisplayName: id}
}
