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

// The node tools of their own (issue 22 item 6): one call each, for what
// a model is most often asked to do with a paired device ("look out of the
// window"). Each is registered only while a connected node may run its
// command, and its description names those nodes.
const (
	CameraSnapTool     = "camera_snap"
	CameraClipTool     = "camera_clip"
	ScreenSnapshotTool = "screen_snapshot"
	LocationGetTool    = "location_get"
)

// ErrNoSuchNode: a node tool named a node that is not connected or may not
// run the command, or no connected node may run it.
var ErrNoSuchNode = errors.New("no such node")

// nodeShortcut is a tool of its own for one node command.
type nodeShortcut struct {
	name, command, what, description, schema string
	// params turns the tool's arguments into the command's params and
	// its timeout (0: the nodes default).
	params func(raw json.RawMessage) (json.RawMessage, int64, error)
}

const nodeArg = `"node":{"type":"string","maxLength":256,"description":"the device's name or id; omit it to use the one listed above (the first when several)"}`

// Screen pictures are asked for as JPEG at most 1920 wide: a model takes
// an image of at most model.MaxImageBase64Bytes, which a full-size PNG of
// a large screen exceeds.
const (
	screenSnapshotFormat   = "jpeg"
	screenSnapshotMaxWidth = 1920
	screenSnapshotQuality  = 0.85
)

// clipSlack is added to a clip's length for the invoke's timeout: the
// camera starting and the transfer.
const clipSlack = 30 * time.Second

var nodeShortcuts = []nodeShortcut{
	{name: CameraSnapTool, command: "camera.snap", what: "cameras",
		description: "Take a photo with the camera of a paired device (a phone) and look at it: \"look out of the window\", \"what is on my desk\". " +
			"facing back (default) is the camera on the far side of a phone, front the person's side. The person is asked every time. " +
			"You get the photo when you take images, else its file path, size and dimensions.",
		schema: `{"type":"object","properties":{` + nodeArg + `,` +
			`"facing":{"type":"string","enum":["back","front"],"description":"which camera (default back)"},` +
			`"maxWidth":{"type":"integer","minimum":160,"maximum":4096,"description":"the photo's width at most, in pixels (default 1600)"}` +
			`},"additionalProperties":false}`,
		params: func(raw json.RawMessage) (json.RawMessage, int64, error) {
			var a struct {
				Facing   string `json:"facing"`
				MaxWidth int    `json:"maxWidth"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, 0, err
			}
			p := map[string]any{"facing": orDefault(a.Facing, "back")}
			if a.MaxWidth > 0 {
				p["maxWidth"] = a.MaxWidth
			}
			b, err := json.Marshal(p)
			return b, 0, err
		}},
	{name: CameraClipTool, command: "camera.clip", what: "cameras",
		description: "Record a short video clip (1 to 60 seconds) with the camera of a paired device. The person is asked every time. " +
			"A clip is not shown to you: you get its file path, length, size and type.",
		schema: `{"type":"object","properties":{` + nodeArg + `,` +
			`"facing":{"type":"string","enum":["back","front"],"description":"which camera (default back)"},` +
			`"seconds":{"type":"integer","minimum":1,"maximum":60,"description":"the clip's length (default 5)"},` +
			`"audio":{"type":"boolean","description":"record sound too (default true)"}` +
			`},"additionalProperties":false}`,
		params: func(raw json.RawMessage) (json.RawMessage, int64, error) {
			var a struct {
				Facing  string `json:"facing"`
				Seconds int    `json:"seconds"`
				Audio   *bool  `json:"audio"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, 0, err
			}
			if a.Seconds == 0 {
				a.Seconds = 5
			}
			if a.Seconds < 1 || a.Seconds > 60 {
				return nil, 0, fmt.Errorf("seconds %d: want 1 to 60", a.Seconds)
			}
			d := time.Duration(a.Seconds) * time.Second
			b, err := json.Marshal(map[string]any{"facing": orDefault(a.Facing, "back"), "durationMs": d.Milliseconds(), "includeAudio": a.Audio == nil || *a.Audio})
			return b, (d + clipSlack).Milliseconds(), err
		}},
	{name: ScreenSnapshotTool, command: "screen.snapshot", what: "screens",
		description: "Take a picture of the screen of a paired computer and look at it. The person is asked every time (and their browser may ask which screen). " +
			"You get the picture when you take images, else its file path, size and dimensions.",
		schema: `{"type":"object","properties":{` + nodeArg + `},"additionalProperties":false}`,
		params: func(json.RawMessage) (json.RawMessage, int64, error) {
			b, err := json.Marshal(map[string]any{"format": screenSnapshotFormat, "maxWidth": screenSnapshotMaxWidth, "quality": screenSnapshotQuality})
			return b, 0, err
		}},
	{name: LocationGetTool, command: "location.get", what: "locations",
		description: "Where a paired device (a phone) is: latitude and longitude in degrees, accuracy in metres. The person is asked every time, " +
			"and a device answers only once its person turned location on in its Atrium page.",
		schema: `{"type":"object","properties":{` + nodeArg + `,` +
			`"accuracy":{"type":"string","enum":["coarse","balanced","precise"],"description":"coarse: a recent fix will do (default balanced)"}` +
			`},"additionalProperties":false}`,
		params: func(raw json.RawMessage) (json.RawMessage, int64, error) {
			var a struct {
				Accuracy string `json:"accuracy"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, 0, err
			}
			b, err := json.Marshal(map[string]any{"accuracy": orDefault(a.Accuracy, "balanced")})
			return b, 0, err
		}},
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// registerShortcuts adds the node tools whose command some connected node
// may run now (the run's tools are made at its start, as the nodes tool
// itself is).
func (n *nodesTool) registerShortcuts(r *agent.Registry) error {
	list := n.o.Nodes.Nodes()
	for _, s := range nodeShortcuts {
		var names []string
		for _, nd := range list {
			if nd.Connected && slices.Contains(nd.Commands, s.command) {
				names = append(names, fmt.Sprintf("%s (id %s, %s)", nd.DisplayName, nd.NodeID, orDefault(nd.Platform, "unknown platform")))
			}
		}
		if len(names) == 0 {
			continue
		}
		s := s
		desc := s.description + " Devices with " + s.what + " now: " + strings.Join(names, "; ") + "."
		err := r.Register(agent.Spec{Name: s.name, Level: agent.L0, Schema: json.RawMessage(s.schema), Description: desc,
			Timeout: agent.DefaultAskTimeout + nodes.MaxInvokeTimeout + 5*time.Second},
			func(ctx context.Context, c agent.Call) (agent.Output, error) { return n.shortcut(ctx, c, s) })
		if err != nil {
			return err
		}
	}
	return nil
}

// shortcut runs s: the node named (or the first connected one that may run
// s.command), asked like the nodes tool's invoke.
func (n *nodesTool) shortcut(ctx context.Context, c agent.Call, s nodeShortcut) (agent.Output, error) {
	var a struct {
		Node string `json:"node"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("%s: %w", s.name, err)
	}
	params, timeoutMs, err := s.params(c.Args)
	if err != nil {
		return agent.Output{}, fmt.Errorf("%s: %w", s.name, err)
	}
	nd, err := pickNode(n.o.Nodes.Nodes(), a.Node, s.command)
	if err != nil {
		return agent.Output{}, fmt.Errorf("%s: %w", s.name, err)
	}
	return n.invoke(ctx, c, nodesArgs{Action: "invoke", NodeID: nd.NodeID, Command: s.command, Params: params, TimeoutMs: timeoutMs,
		name: nd.DisplayName})
}

// pickNode is the connected node spec names (its id, else its name,
// letter case ignored) that may run command, or with spec "" the one of
// them with the fewest invokes in flight (ties: the order of list).
// ErrNoSuchNode names the devices that could.
func pickNode(list []nodes.Node, spec, command string) (nodes.Node, error) {
	var able []nodes.Node
	for _, nd := range list {
		if nd.Connected && slices.Contains(nd.Commands, command) {
			able = append(able, nd)
		}
	}
	names := func() string {
		if len(able) == 0 {
			return "none"
		}
		s := make([]string, len(able))
		for i, nd := range able {
			s[i] = nd.DisplayName + " (" + nd.NodeID + ")"
		}
		return strings.Join(s, ", ")
	}
	if spec == "" {
		if len(able) == 0 {
			return nodes.Node{}, fmt.Errorf("%w: no connected device may run %s", ErrNoSuchNode, command)
		}
		best := able[0]
		for _, nd := range able[1:] {
			if nd.InvokesInFlight < best.InvokesInFlight {
				best = nd
			}
		}
		return best, nil
	}
	if i := slices.IndexFunc(able, func(nd nodes.Node) bool { return nd.NodeID == spec }); i >= 0 {
		return able[i], nil
	}
	var named []nodes.Node
	for _, nd := range able {
		if strings.EqualFold(nd.DisplayName, spec) {
			named = append(named, nd)
		}
	}
	switch len(named) {
	case 1:
		return named[0], nil
	case 0:
		return nodes.Node{}, fmt.Errorf("%w: %q is not a connected device that may run %s; these may: %s", ErrNoSuchNode, spec, command, names())
	}
	return nodes.Node{}, fmt.Errorf("%w: %q names %d devices; give the id of one: %s", ErrNoSuchNode, spec, len(named), names())
}
