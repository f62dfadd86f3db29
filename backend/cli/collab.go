package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// This file is `atrium collab list|show|request|accept|decline|complete`
// (issue 24 item 4): collaborations through the running app's gateway
// (docs/PROTOCOL.md "Routing and collaboration"). Without --as a command
// is the person's (admin: collab.list, collab.show, collab.decide); with
// --as ROLE and --token it acts for that role (collab.accept,
// collab.decline, collab.complete with the token collab.request printed).

// cliCollab is the part of a Collaboration the CLI shows.
type cliCollab struct {
	ID          string    `json:"collabId"`
	From        string    `json:"from"`
	To          string    `json:"to"`
	Task        string    `json:"task"`
	Context     []string  `json:"context"`
	Status      string    `json:"status"`
	NeedsPerson bool      `json:"needsPerson"`
	CreatedAt   time.Time `json:"createdAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	CompletedBy string    `json:"completedBy"`
	Result      *struct {
		Output     string  `json:"output"`
		Importance float64 `json:"importance"`
	} `json:"result"`
	History []struct {
		At     time.Time `json:"at"`
		Role   string    `json:"role"`
		Action string    `json:"action"`
		Detail string    `json:"detail"`
	} `json:"history"`
}

// collabHelp is the collab commands' shared usage text.
const collabHelp = "Without --as the command is the person's (the desktop's admin): accept and\n" +
	"decline a pending collaboration, complete an accepted one, no token needed.\n" +
	"With --as ROLE --token TOKEN it acts for that role (the invited role accepts\n" +
	"only where the ACL lets it collaborate on every context file).\n" + appHelp

func runCollab(ctx context.Context, args []string, o Options) error {
	sub, args := takeCommand(args)
	if ok, err := group("collab", sub, args, o); !ok {
		return err
	}
	var c common
	fs := newFlagSet("collab "+sub, o)
	c.registerApp(fs)
	c.registerJSON(fs)
	var as, token, status, to, task, ctxFiles, reason, output string
	var ttl int
	var importance float64
	switch sub {
	case "list":
		fs.StringVar(&status, "status", "", "only `S`: pending, accepted, completed, declined or expired")
		fs.StringVar(&as, "as", "", "list as `ROLE` (its own collaborations; default: all, as the person)")
	case "request":
		fs.StringVar(&as, "as", "", "the requesting `ROLE` (required)")
		fs.StringVar(&to, "to", "", "the invited `ROLE` (required)")
		fs.StringVar(&task, "task", "", "what is asked (required)")
		fs.StringVar(&ctxFiles, "context", "", "comma-separated memory `paths` it is about (required)")
		fs.IntVar(&ttl, "ttl", 0, "lifetime in `seconds` (default 3600)")
	case "accept", "decline", "complete":
		fs.StringVar(&as, "as", "", "act as `ROLE` (with --token); default: the person")
		fs.StringVar(&token, "token", "", "the collaboration's `TOKEN` (with --as)")
		if sub == "decline" {
			fs.StringVar(&reason, "reason", "", "why (recorded in the history)")
		}
		if sub == "complete" {
			fs.StringVar(&output, "output", "", "the result (required with --as; the person's: recorded as the result)")
			fs.Float64Var(&importance, "importance", 0, "the result's importance 0..1 (with --as; above 0.7 a summary goes to global memory)")
		}
	}
	pos, err := parse(fs, args, o)
	if err != nil {
		return err
	}
	want := 1
	if sub == "list" || sub == "request" {
		want = 0
	}
	if len(pos) != want {
		cmd, _ := lookup("collab " + sub)
		return fmt.Errorf("%w: usage: %s", errUsage, cmd.usage())
	}
	if (as == "") != (token == "") && (sub == "accept" || sub == "decline" || sub == "complete") {
		return fmt.Errorf("%w: collab %s: --as and --token go together", errUsage, sub)
	}
	if sub == "request" && (as == "" || to == "" || strings.TrimSpace(task) == "" || ctxFiles == "") {
		return fmt.Errorf("%w: collab request needs --as, --to, --task and --context", errUsage)
	}
	if sub == "complete" && as != "" && strings.TrimSpace(output) == "" {
		return fmt.Errorf("%w: collab complete --as needs --output", errUsage)
	}
	r, err := c.dialRunningApp(ctx, o, "collab "+sub)
	if err != nil {
		return err
	}
	defer r.Close()
	var method string
	params := map[string]any{}
	if as != "" {
		params["as"] = as
	}
	if want == 1 {
		params["collabId"] = pos[0]
	}
	person := as == ""
	switch sub {
	case "list":
		method = "collab.list"
		if status != "" {
			params["status"] = status
		}
	case "show":
		method = "collab.show"
	case "request":
		method = "collab.request"
		params["to"], params["task"], params["context"] = to, task, splitList(ctxFiles)
		if ttl != 0 {
			params["ttl"] = ttl
		}
	case "accept", "decline", "complete":
		if person {
			method = "collab.decide"
			params["decision"] = sub
			if reason != "" {
				params["reason"] = reason
			}
			if output != "" {
				params["reason"] = output
			}
			break
		}
		method = "collab." + sub
		params["token"] = token
		switch sub {
		case "decline":
			if reason != "" {
				params["reason"] = reason
			}
		case "complete":
			params["result"] = map[string]any{"output": output, "importance": importance}
		}
	}
	var res struct {
		Collaborations []cliCollab `json:"collaborations"`
		Collaboration  *cliCollab  `json:"collaboration"`
		ID             string      `json:"collabId"`
		Token          string      `json:"token"`
		Summary        bool        `json:"summary"`
		Shared         *struct {
			Files   []struct{ Path string } `json:"files"`
			Context []struct {
				Path string `json:"path"`
				Text string `json:"text"`
			} `json:"context"`
			Withheld int `json:"withheld"`
		} `json:"shared"`
	}
	if c.json {
		var raw map[string]any
		if err := r.call(ctx, method, params, &raw); err != nil {
			return err
		}
		return printJSON(o.Stdout, raw)
	}
	if err := r.call(ctx, method, params, &res); err != nil {
		return err
	}
	w := o.Stdout
	switch sub {
	case "list":
		return printCollabs(w, res.Collaborations)
	case "request":
		fmt.Fprintf(w, "Collaboration %s: %s asks %s (%s, until %s)\n", res.ID, res.Collaboration.From, res.Collaboration.To,
			collabState(*res.Collaboration), res.Collaboration.ExpiresAt.Local().Format("2006-01-02 15:04:05"))
		fmt.Fprintf(w, "Token (shown once; the parties' accept, complete, write and view need it): %s\n", res.Token)
		return nil
	}
	if res.Collaboration == nil {
		return fmt.Errorf("collab %s: the app answered without a collaboration", sub)
	}
	printCollab(w, *res.Collaboration)
	if res.Shared != nil {
		fmt.Fprintf(w, "Shared view: %d files both roles may read; %d context files (%d withheld)\n", len(res.Shared.Files), len(res.Shared.Context), res.Shared.Withheld)
		for _, f := range res.Shared.Context {
			fmt.Fprintf(w, "--- %s\n%s\n", f.Path, strings.TrimRight(f.Text, "\n"))
		}
	}
	return nil
}

// collabState is the status, with who must accept a pending one.
func collabState(c cliCollab) string {
	switch {
	case c.Status == "pending" && c.NeedsPerson:
		return "pending: the person accepts or declines"
	case c.Status == "pending":
		return "pending: " + c.To + " accepts"
	}
	return c.Status
}

// expiresIn says how long an open collaboration has left.
func expiresIn(c cliCollab, now time.Time) string {
	if c.Status != "pending" && c.Status != "accepted" {
		return "-"
	}
	d := c.ExpiresAt.Sub(now).Round(time.Second)
	if d <= 0 {
		return "expired"
	}
	return d.String()
}

func printCollabs(w io.Writer, list []cliCollab) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No collaborations.")
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tFROM\tTO\tSTATUS\tEXPIRES IN\tTASK")
	now := time.Now()
	for _, c := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.From, c.To, collabState(c), expiresIn(c, now), oneLineCut(c.Task, 60))
	}
	return tw.Flush()
}

func printCollab(w io.Writer, c cliCollab) {
	fmt.Fprintf(w, "Collaboration %s: %s asks %s\n", c.ID, c.From, c.To)
	fmt.Fprintf(w, "Status: %s (expires in %s)\n", collabState(c), expiresIn(c, time.Now()))
	fmt.Fprintf(w, "Task: %s\n", c.Task)
	fmt.Fprintf(w, "Files: %s\n", strings.Join(c.Context, ", "))
	if c.Result != nil {
		fmt.Fprintf(w, "Result (by %s, importance %.2f): %s\n", c.CompletedBy, c.Result.Importance, c.Result.Output)
	}
	for _, h := range c.History {
		line := fmt.Sprintf("  %s  %s %s", h.At.Local().Format("2006-01-02 15:04:05"), h.Role, h.Action)
		if h.Detail != "" {
			line += ": " + h.Detail
		}
		fmt.Fprintln(w, line)
	}
}

// oneLineCut is s on one line, cut to n characters.
func oneLineCut(s string, n int) string {
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n-1]) + "…"
}
