package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// NodesTool is the nodes tool's name.
const NodesTool = "nodes"

// KindNode is the PermissionRequest kind of a question about one node
// command ("may the agent run X on node Y?").
const KindNode = "node"

// DefaultAskEveryCall are the node commands put to the person on every
// call (SPEC §6 highest level; issue 16): running a program, a
// notification on the person's device, the device's location, and the
// camera and screen commands that come later.
var DefaultAskEveryCall = []string{"system.run", "system.notify", "location.get", "camera.*", "screen.*"}

// Nodes is what the nodes tool needs of the node registry; *nodes.Service
// implements it.
type Nodes interface {
	Nodes() []nodes.Node
	Describe(id string) (nodes.Node, error)
	Invoke(ctx context.Context, who nodes.Caller, req nodes.InvokeRequest) (nodes.InvokeResult, error)
}

// Permissions are the session's permission levels and questions to the
// person; *agent.Permissions implements it.
type Permissions interface {
	Allow(ctx context.Context, l agent.Level, req agent.PermissionRequest) (agent.Decision, error)
	AskOnce(ctx context.Context, req agent.PermissionRequest) (bool, error)
}

// NodesOptions configure the nodes tool (level L0 for list and describe;
// invoke asks, see below).
type NodesOptions struct {
	// Nodes is the registry. Required.
	Nodes Nodes
	// Permissions decide invokes. Nil: every invoke is denied (nobody to
	// ask).
	Permissions Permissions
	// AskEveryCall are command patterns (path.Match syntax: "camera.*")
	// asked on every call at level L3, never remembered. Default
	// DefaultAskEveryCall. Every other command needs L3 (network: it runs
	// on another machine) through Permissions.Allow: the person is asked
	// unless they granted L3 to the session in the last 10 minutes.
	AskEveryCall []string
	// Media is the media store: a result whose media names a stored
	// picture (camera.snap, screen.snapshot) returns it as an image (the
	// model sees it when it takes images, else its path and metadata).
	// Nil: results keep their media reference only.
	Media Media
}

type nodesTool struct {
	e *env
	o NodesOptions
}

func newNodesTool(e *env, o NodesOptions) (*nodesTool, error) {
	if o.Nodes == nil {
		return nil, errors.New("tools: NodesOptions.Nodes is required")
	}
	if o.AskEveryCall == nil {
		o.AskEveryCall = DefaultAskEveryCall
	}
	for _, p := range o.AskEveryCall {
		if _, err := matchCommand(p, ""); err != nil {
			return nil, fmt.Errorf("tools: nodes AskEveryCall pattern %q: %w", p, err)
		}
	}
	return &nodesTool{e: e, o: o}, nil
}

const nodesSchema = `{"type":"object","properties":{` +
	`"action":{"type":"string","enum":["list","describe","invoke"],"description":"list the nodes, describe one, or invoke a command on one"},` +
	`"nodeId":{"type":"string","maxLength":256,"description":"the node (from list); for describe and invoke"},` +
	`"caps":{"type":"array","items":{"type":"string","maxLength":64},"maxItems":32,"description":"invoke on a connected node with these capabilities instead of naming nodeId"},` +
	`"command":{"type":"string","maxLength":128,"description":"for invoke: a command the node allows, e.g. system.run, system.which, system.notify, location.get, camera.snap, camera.clip, screen.snapshot"},` +
	`"params":{"type":"object","description":"the command's parameters, e.g. {\"command\":[\"uname\",\"-a\"]} for system.run, {\"name\":\"git\"} for system.which, {\"title\":\"…\",\"body\":\"…\"} for system.notify"},` +
	`"timeoutMs":{"type":"integer","minimum":1,"maximum":600000,"description":"for invoke: how long to wait for the node (default 30000)"}` +
	`},"required":["action"],"additionalProperties":false}`

func (n *nodesTool) register(r *agent.Registry) error {
	err := r.Register(agent.Spec{Name: NodesTool, Level: agent.L0, Schema: json.RawMessage(nodesSchema),
		// An invoke may wait for the person, then for the node.
		Timeout: agent.DefaultAskTimeout + nodes.MaxInvokeTimeout + 5*time.Second,
		Description: "Other devices paired with Atrium (nodes: computers, phones). list: the nodes, their capabilities and allowed commands; " +
			"describe: one node; invoke: run a command on a node (the person is asked first). A photo or screenshot a command returns is shown to you " +
			"when you take images, else its file path and size are given; a clip's path, length, size and type are given."}, n.run)
	if err != nil {
		return err
	}
	return n.registerShortcuts(r)
}

type nodesArgs struct {
	Action    string          `json:"action"`
	NodeID    string          `json:"nodeId"`
	Caps      []string        `json:"caps"`
	Command   string          `json:"command"`
	Params    json.RawMessage `json:"params"`
	TimeoutMs int64           `json:"timeoutMs"`
	// name is the node's display name (the node tools of their own know
	// it): the person's question says "<name> (<id>)" and the summary
	// "<name>"; default NodeID in both.
	name string
}

func (n *nodesTool) run(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a nodesArgs
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("nodes: %w", err)
	}
	switch a.Action {
	case "list":
		list := n.o.Nodes.Nodes()
		if err := n.e.allow(NodesTool, "list", "read-only"); err != nil {
			return agent.Output{}, err
		}
		connected := 0
		for _, nd := range list {
			if nd.Connected {
				connected++
			}
		}
		return agent.Output{Data: map[string]any{"nodes": list},
			LogSummary: fmt.Sprintf("%d nodes, %d connected", len(list), connected)}, nil
	case "describe":
		if a.NodeID == "" {
			return agent.Output{}, errors.New("nodes: describe needs nodeId (see action list)")
		}
		nd, err := n.o.Nodes.Describe(a.NodeID)
		if err != nil {
			return agent.Output{}, fmt.Errorf("nodes: %w", err)
		}
		if err := n.e.allow(NodesTool, "describe "+a.NodeID, "read-only"); err != nil {
			return agent.Output{}, err
		}
		return agent.Output{Data: nd, LogSummary: fmt.Sprintf("%s: %d commands", nd.DisplayName, len(nd.Commands))}, nil
	case "invoke":
		return n.invoke(ctx, c, a)
	}
	return agent.Output{}, fmt.Errorf("nodes: unknown action %q (list, describe or invoke)", a.Action)
}

func (n *nodesTool) invoke(ctx context.Context, c agent.Call, a nodesArgs) (agent.Output, error) {
	if a.Command == "" || (a.NodeID == "") == (len(a.Caps) == 0) {
		return agent.Output{}, errors.New("nodes: invoke needs command and either nodeId or caps")
	}
	where := a.NodeID
	code, params := agent.ReasonCodeNodeRun, map[string]string{"command": a.Command}
	if a.name != "" {
		where = a.name + " (" + a.NodeID + ")"
	} else if where == "" {
		where = "a node with caps " + strings.Join(a.Caps, ",")
		code, params["caps"] = agent.ReasonCodeNodeRunCaps, strings.Join(a.Caps, ",")
	}
	if code == agent.ReasonCodeNodeRun {
		params["node"] = where
	}
	target := where + " " + a.Command
	if n.o.Permissions == nil {
		return agent.Output{}, n.e.deny(NodesTool, target, "nobody to ask: node commands need the person's permission")
	}
	summary := cut(target+" "+string(a.Params), agent.MaxArgsSummaryChars)
	tool := c.Tool // the question names the tool the model called (nodes, camera_snap, …)
	if tool == "" {
		tool = NodesTool
	}
	if n.askEveryCall(a.Command) {
		yes, err := n.o.Permissions.AskOnce(ctx, agent.PermissionRequest{Kind: KindNode, Tool: tool, CallID: c.ID, Level: agent.L3,
			ArgsSummary: summary, Reason: fmt.Sprintf("run %s on %s%s?", a.Command, where, describeParams(a.Command, a.Params, params)),
			ReasonCode: code, ReasonParams: params})
		if err != nil {
			return agent.Output{}, fmt.Errorf("nodes: %w", err)
		}
		if !yes {
			return agent.Output{}, n.e.deny(NodesTool, target, "the person did not approve the command")
		}
		if err := n.e.allow(NodesTool, target, "approved by the person"); err != nil {
			return agent.Output{}, err
		}
	} else {
		d, err := n.o.Permissions.Allow(ctx, agent.L3, agent.PermissionRequest{Tool: tool, CallID: c.ID, ArgsSummary: summary})
		if err != nil {
			return agent.Output{}, fmt.Errorf("nodes: %w", err)
		}
		if !d.Allowed {
			return agent.Output{}, n.e.deny(NodesTool, target, d.Reason)
		}
		if err := n.e.allow(NodesTool, target, d.Reason); err != nil {
			return agent.Output{}, err
		}
	}
	req := nodes.InvokeRequest{NodeID: a.NodeID, Command: a.Command, Params: a.Params, TimeoutMs: a.TimeoutMs}
	if a.NodeID == "" {
		req.Selector = &nodes.Selector{Caps: a.Caps}
	}
	res, err := n.o.Nodes.Invoke(ctx, nodes.Caller{Role: "agent:" + n.e.p.Role}, req)
	if err != nil {
		if nodes.Refused(err) {
			return agent.Output{}, fmt.Errorf("%w: nodes: %w", agent.ErrDenied, err)
		}
		return agent.Output{}, fmt.Errorf("nodes: %w", err)
	}
	shown := res.NodeID
	if a.name != "" {
		shown = a.name
	}
	if !res.OK {
		return agent.Output{}, nodeFailed(res, shown)
	}
	out := agent.Output{Data: res, LogSummary: fmt.Sprintf("%s on %s: ok", res.Command, shown)}
	img, ok, err := n.e.mediaImage(n.o.Media, res.Media)
	if err != nil {
		return agent.Output{}, fmt.Errorf("nodes: %s on %s: %w", res.Command, res.NodeID, err)
	}
	switch {
	case ok:
		out.Images = []agent.Image{img}
		out.LogSummary = fmt.Sprintf("%s on %s: ok, %s %dx%d", res.Command, shown, img.MIME, img.Width, img.Height)
	case len(res.Media) > 0:
		out.LogSummary = fmt.Sprintf("%s on %s: ok, %s", res.Command, shown, mediaSummary(res.Media))
	}
	return out, nil
}

// ErrNodeFailed: the node ran the command and reported a failure (its
// code and message follow; docs/PROTOCOL.md "Nodes"). A node's FORBIDDEN
// (its person said no, or turned the feature off) is a denial as well.
var ErrNodeFailed = errors.New("the node could not do it")

// nodeFailed is the tool error for a failed result: the command, the
// node (shown: its name or id), the node's code and its message as the
// node wrote it (the phone page says what its person can do about it).
func nodeFailed(res nodes.InvokeResult, shown string) error {
	code, msg := "ERROR", "no reason given"
	if e := res.Error; e != nil {
		code, msg = e.Code, e.Message
	}
	err := fmt.Errorf("%w: %s on %s: %s: %s", ErrNodeFailed, res.Command, shown, code, msg)
	if res.Error.Refused() {
		return fmt.Errorf("%w: %w", agent.ErrDenied, err)
	}
	return err
}

// mediaSummary says what a stored file that is not a picture is (a clip, a
// recording): its type, length, size and path, from the media field of a
// result (the sidecar and its path).
func mediaSummary(raw json.RawMessage) string {
	var m struct {
		MIME       string `json:"mime"`
		Size       int64  `json:"size"`
		DurationMs int64  `json:"durationMs"`
		Path       string `json:"path"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return "media stored"
	}
	s := orDefault(m.MIME, "a file of unknown type")
	if m.DurationMs > 0 {
		s += fmt.Sprintf(", %.1f s", float64(m.DurationMs)/1000)
	}
	return s + fmt.Sprintf(", %d bytes at %s", m.Size, m.Path)
}

func (n *nodesTool) askEveryCall(command string) bool {
	return slices.ContainsFunc(n.o.AskEveryCall, func(p string) bool {
		ok, _ := matchCommand(p, command)
		return ok
	})
}

// matchCommand matches a command against a pattern: exact, or a prefix
// ending in ".*" ("camera.*" matches "camera.snap").
func matchCommand(pattern, command string) (bool, error) {
	if pattern == "" || strings.Contains(strings.TrimSuffix(pattern, ".*"), "*") {
		return false, errors.New("want a command name or a prefix ending in .*")
	}
	if p, ok := strings.CutSuffix(pattern, ".*"); ok {
		return strings.HasPrefix(command, p+"."), nil
	}
	return pattern == command, nil
}

// describeParams says what a system.run will run, or which camera a
// camera command uses, for the question's English sentence; it also puts
// the same details into reason (agent.ReasonParamFacing, ReasonParamArgv,
// ReasonParamCwd) for the UI's own words.
func describeParams(command string, params json.RawMessage, reason map[string]string) string {
	if strings.HasPrefix(command, "camera.") {
		var p struct {
			Facing string `json:"facing"`
		}
		if json.Unmarshal(params, &p) == nil && p.Facing != "" {
			reason[agent.ReasonParamFacing] = cut(p.Facing, 16)
			return " (" + cut(p.Facing, 16) + " camera)"
		}
		return ""
	}
	if command != "system.run" {
		return ""
	}
	var p struct {
		Command []string `json:"command"`
		Cwd     string   `json:"cwd"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.Command) == 0 {
		return ""
	}
	s := ": " + strings.Join(p.Command, " ")
	reason[agent.ReasonParamArgv] = cut(strings.Join(p.Command, " "), 200)
	if p.Cwd != "" {
		s += " (in " + p.Cwd + ")"
		reason[agent.ReasonParamCwd] = cut(p.Cwd, 200)
	}
	return cut(s, 200)
}

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
