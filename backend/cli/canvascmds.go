package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
)

// `atrium nodes canvas present|eval|a2ui push` (SPEC §7, §8; issue 23):
// the running app's canvas.* methods as admin, on a node (--node as for
// every node command) or on the app's own Canvas (--node desktop).

// canvasDesktop is --node's name of the app's own Canvas.
const canvasDesktop = "desktop"

// runCanvas runs `atrium nodes canvas …`; args start after "canvas".
func runCanvas(ctx context.Context, args []string, o Options) error {
	verb, rest := takeCommand(args)
	switch {
	case verb == "a2ui":
		v2, rest2 := takeCommand(rest)
		if v2 != "push" {
			if v2 == "" && len(rest2) > 0 && isHelpFlag(rest2[0]) {
				return runCanvasCommand(ctx, "a2ui push", rest2, o)
			}
			return fmt.Errorf("%w: nodes canvas a2ui needs the subcommand push", errUsage)
		}
		return runCanvasCommand(ctx, "a2ui push", rest2, o)
	case verb == "present" || verb == "eval":
		return runCanvasCommand(ctx, verb, rest, o)
	case verb == "" && len(rest) > 0 && isHelpFlag(rest[0]), verb == "help":
		printGroup(o.Stdout, "nodes canvas")
		return flag.ErrHelp
	case verb == "":
		return fmt.Errorf("%w: nodes canvas needs a subcommand: present, eval, a2ui push", errUsage)
	}
	return fmt.Errorf("%w: unknown nodes canvas subcommand %q (present, eval, a2ui push)", errUsage, verb)
}

func runCanvasCommand(ctx context.Context, sub string, args []string, o Options) error {
	var c nodeCmd
	fs := newFlagSet("nodes canvas "+sub, o)
	c.register(fs, 0, true)
	var target, html, js, file string
	var x, y, w, h float64
	switch sub {
	case "present":
		fs.StringVar(&target, "target", "", "the http(s) `URL` to show (or --html)")
		fs.StringVar(&html, "html", "", "a `file` of HTML to show in the sandboxed frame ('-': standard input)")
		fs.Float64Var(&x, "x", 0, "placement: left edge, CSS `pixels` (with --width and --height)")
		fs.Float64Var(&y, "y", 0, "placement: top edge, CSS `pixels`")
		fs.Float64Var(&w, "width", 0, "placement: width, CSS `pixels` (0: where the target puts it)")
		fs.Float64Var(&h, "height", 0, "placement: height, CSS `pixels`")
	case "eval":
		fs.StringVar(&js, "js", "", "the JavaScript `expression` to run in the presented page (its value is printed as JSON)")
	case "a2ui push":
		fs.StringVar(&file, "jsonl", "", "the A2UI JSON Lines `file` to push ('-': standard input)")
	}
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		cmd, _ := lookup("nodes canvas " + sub)
		return fmt.Errorf("%w: usage: %s", errUsage, cmd.usage())
	}
	if c.node == "" {
		return fmt.Errorf("%w: nodes canvas %s needs --node NAME (a node, or %q for the app's own Canvas)", errUsage, sub, canvasDesktop)
	}
	if c.timeout == 0 {
		c.timeout = 30 * time.Second
	}
	if err := c.check("canvas " + sub); err != nil {
		return err
	}
	params := map[string]any{}
	method := ""
	switch sub {
	case "present":
		method = "canvas.present"
		switch {
		case (target == "") == (html == ""):
			return fmt.Errorf("%w: nodes canvas present needs --target URL or --html FILE (one of them)", errUsage)
		case target != "":
			params["url"] = target
		default:
			b, err := readInput(html, o.Stdin)
			if err != nil {
				return fmt.Errorf("--html: %w", err)
			}
			params["html"] = string(b)
		}
		if w > 0 || h > 0 {
			params["placement"] = map[string]float64{"x": x, "y": y, "width": w, "height": h}
		}
	case "eval":
		if js == "" {
			return fmt.Errorf("%w: nodes canvas eval needs --js EXPR", errUsage)
		}
		method = "canvas.eval"
		params["js"], params["timeoutMs"] = js, min(c.timeout, time.Minute).Milliseconds()
	case "a2ui push":
		if file == "" {
			return fmt.Errorf("%w: nodes canvas a2ui push needs --jsonl FILE", errUsage)
		}
		b, err := readInput(file, o.Stdin)
		if err != nil {
			return fmt.Errorf("--jsonl: %w", err)
		}
		method, params["jsonl"] = "canvas.a2ui.push", string(b)
	}
	r, err := c.dialRunningApp(ctx, o, "nodes canvas "+sub)
	if err != nil {
		return err
	}
	defer r.Close()
	name := canvasDesktop
	params["target"] = canvasDesktop
	if c.node != canvasDesktop {
		cands, err := resolveNodes(ctx, r, c.node, method)
		if err != nil {
			return err
		}
		params["target"], name = cands[0].NodeID, cands[0].DisplayName
		if name == "" {
			name = cands[0].NodeID
		}
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout+callSlack)
	defer cancel()
	var raw json.RawMessage
	if err := r.c.Call(cctx, method, params, &raw); err != nil {
		var ge *gateway.Error
		if errors.As(err, &ge) {
			return errors.New(ge.Message)
		}
		return err
	}
	if c.json {
		_, err := fmt.Fprintf(o.Stdout, "%s\n", raw)
		return err
	}
	switch sub {
	case "present":
		var res struct {
			Rendered bool   `json:"rendered"`
			Reason   string `json:"reason"`
		}
		_ = json.Unmarshal(raw, &res)
		if !res.Rendered {
			return fmt.Errorf("presented on %s but not shown (it is kept and shown when the Canvas opens): %s", name, res.Reason)
		}
		_, err := fmt.Fprintf(o.Stdout, "shown on %s\n", name)
		return err
	case "eval":
		var res struct {
			OK    bool            `json:"ok"`
			Value json.RawMessage `json:"value"`
			Error string          `json:"error"`
		}
		_ = json.Unmarshal(raw, &res)
		if !res.OK {
			return fmt.Errorf("eval on %s: %s", name, res.Error)
		}
		if len(res.Value) == 0 {
			res.Value = json.RawMessage("null")
		}
		_, err := fmt.Fprintf(o.Stdout, "%s\n", res.Value)
		return err
	}
	var res struct {
		Applied int `json:"applied"`
		Errors  []struct {
			Line   int    `json:"line"`
			Reason string `json:"reason"`
		} `json:"errors"`
		Rendered     bool   `json:"rendered"`
		Reason       string `json:"reason"`
		RenderErrors []struct {
			Line   int    `json:"line"`
			Reason string `json:"reason"`
		} `json:"renderErrors"`
	}
	_ = json.Unmarshal(raw, &res)
	src := file
	if src == "-" {
		src = "stdin"
	}
	for _, e := range res.Errors { // like a compiler: FILE:LINE: reason
		fmt.Fprintf(o.Stderr, "%s:%d: %s\n", src, e.Line, e.Reason)
	}
	for _, e := range res.RenderErrors {
		fmt.Fprintf(o.Stderr, "%s:%d: %s (the renderer)\n", src, e.Line, e.Reason)
	}
	state := "rendered"
	if !res.Rendered {
		state = "kept, not rendered: " + res.Reason
	}
	fmt.Fprintf(o.Stdout, "pushed %d lines to %s: %s\n", res.Applied, name, state)
	switch {
	case len(res.Errors) > 0:
		return fmt.Errorf("%d lines applied; line %d refused", res.Applied, res.Errors[0].Line)
	case !res.Rendered:
		return errors.New("not rendered")
	}
	return nil
}

// readInput reads a file, or stdin for "-".
func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		if stdin == nil {
			stdin = os.Stdin
		}
		return io.ReadAll(io.LimitReader(stdin, 8<<20))
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}
