package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// TestNodeToolsOfTheirOwn (issue 22 item 6): with a connected node that
// may run camera.snap, camera.clip, screen.snapshot and location.get, the
// run's tools include camera_snap, camera_clip, screen_snapshot and
// location_get, each naming that node. "look out of the window" is one
// call of camera_snap without arguments: the back camera of the only
// camera, the person asked (the question names the device and the
// camera), the next model request carrying the photo. Every call asks
// again; a clip comes back as its type, length, size and path, no image;
// a screen picture is asked for as a JPEG a model can take; a phone whose
// location is off answers with a denial that says so; a device that is
// not there, or bad arguments, are errors naming what is there. A node
// without those commands gets none of these tools.
func TestNodeToolsOfTheirOwn(t *testing.T) {
	store := openMediaStore(t)
	photo := pngOf(t, 40, 30)
	snap := storeMedia(t, store, "snap.png", "image/png", photo, 40, 30)
	clip := storeMedia(t, store, "clip.webm", "video/webm", []byte("a clip's bytes"), 0, 0)
	clipPath, err := store.Path(clip.ID)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	params := map[string]json.RawMessage{}
	const locationOff = "location is off on this device: its person can turn it on in the phone page (Location: while this page is in use)"
	n := newNodeNetWith(t, []string{"camera.snap", "camera.clip", "screen.snapshot", "location.get"}, func(r nodes.InvokeRequestEvent) nodes.ResultParams {
		mu.Lock()
		params[r.Command] = r.Params
		mu.Unlock()
		var m any
		switch r.Command {
		case "camera.snap", "screen.snapshot":
			m = snap
		case "camera.clip":
			c := clip
			c.DurationMs = 3000
			m = struct {
				media.Meta
				Path string `json:"path"`
			}{c, clipPath}
		default:
			return nodes.ResultParams{ID: r.ID, OK: false, Error: &nodes.NodeError{Code: "FORBIDDEN", Message: locationOff}}
		}
		raw, _ := json.Marshal(m)
		return nodes.ResultParams{ID: r.ID, OK: true, Payload: json.RawMessage(`{}`), Media: raw}
	})
	sent := func(command string) map[string]any {
		mu.Lock()
		defer mu.Unlock()
		var p map[string]any
		_ = json.Unmarshal(params[command], &p)
		return p
	}
	ask := &asker{yes: true}
	perms := agent.NewPermissions(agent.PermissionOptions{Session: "s-1", Role: "code-expert", Asker: ask})
	e := newTestEnv(t, Options{MediaDir: store.Dir(), Nodes: &NodesOptions{Nodes: n.svc, Permissions: perms, Media: store}})
	for _, name := range []string{CameraSnapTool, CameraClipTool, ScreenSnapshotTool, LocationGetTool} {
		s, ok := e.reg.Spec(name)
		if !ok || !strings.Contains(s.Description, "build-box (id "+n.nodeID+", linux)") {
			t.Fatalf("tool %s: %v %+v", name, ok, s)
		}
	}

	// One call, no arguments: the model sees the photo.
	srv := modeltest.New(t, modeltest.Options{}, modeltest.Turns(
		modeltest.Turn{Calls: [][2]string{{CameraSnapTool, `{}`}}},
		modeltest.Turn{Text: "Grey roofs and a crane."})...)
	a, err := agent.New(agent.Options{
		Provider: model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.BaseURL(), Model: "vision", Vision: true, Logger: quiet()}),
		Tools:    e.reg, Permissions: perms, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.Run(context.Background(), agent.Task{Input: "look out of the window"})
	if err != nil || rep.Text != "Grey roofs and a crane." {
		t.Fatalf("%q %v", rep.Text, err)
	}
	if !strings.Contains(srv.Body(0), `"name":"camera_snap"`) {
		t.Fatalf("the model was not offered camera_snap: %.400s", srv.Body(0))
	}
	if !strings.Contains(srv.Body(1), "data:image/png;base64,"+base64.StdEncoding.EncodeToString(photo)) {
		t.Fatalf("the photo is not in the next request: %.500s", srv.Body(1))
	}
	if p := sent("camera.snap"); p["facing"] != "back" {
		t.Fatalf("camera.snap params %v, want the back camera", p)
	}
	q := ask.questions()
	if len(q) != 1 || q[0].Kind != KindNode || q[0].Tool != CameraSnapTool || !contains(q[0].Reason, "run camera.snap on build-box ("+n.nodeID+") (back camera)?") {
		t.Fatalf("questions %+v", q)
	}
	// The same sentence as a code and its values, for the UI's own words (issue 24 item 8).
	if want := map[string]string{"command": "camera.snap", "node": "build-box (" + n.nodeID + ")", "facing": "back"}; q[0].ReasonCode != agent.ReasonCodeNodeRun || !maps.Equal(q[0].ReasonParams, want) {
		t.Fatalf("reason code %q params %v, want %q %v", q[0].ReasonCode, q[0].ReasonParams, agent.ReasonCodeNodeRun, want)
	}
	r := e.call(CameraSnapTool, map[string]any{"node": "BUILD-BOX", "facing": "front", "maxWidth": 800})
	if r.Status != agent.StatusOK || len(r.Images) != 1 || r.Images[0].MediaID != snap.ID || len(ask.questions()) != 2 {
		t.Fatalf("a second snap by name, asked again: %+v (%d questions)", r, len(ask.questions()))
	}
	if p := sent("camera.snap"); p["facing"] != "front" || p["maxWidth"] != float64(800) {
		t.Fatalf("camera.snap params %v", p)
	}

	// A clip is no image: its type, length, size and path.
	r = e.call(CameraClipTool, map[string]any{"node": n.nodeID, "seconds": 3, "audio": false})
	want := "camera.clip on build-box: ok, video/webm, 3.0 s, 14 bytes at " + clipPath
	if r.Status != agent.StatusOK || len(r.Images) != 0 || r.LogSummary != want || !contains(agent.ForModel(r, 4000), `"durationMs":3000`) {
		t.Fatalf("clip: %+v, want summary %q", r, want)
	}
	if p := sent("camera.clip"); p["durationMs"] != float64(3000) || p["includeAudio"] != false || p["facing"] != "back" {
		t.Fatalf("camera.clip params %v", p)
	}

	r = e.call(ScreenSnapshotTool, map[string]any{})
	if r.Status != agent.StatusOK || len(r.Images) != 1 {
		t.Fatalf("screen: %+v", r)
	}
	if p := sent("screen.snapshot"); p["format"] != "jpeg" || p["maxWidth"] != float64(1920) {
		t.Fatalf("screen.snapshot params %v", p)
	}

	// Location off on the phone: a denial that says what to do.
	r = e.call(LocationGetTool, map[string]any{"accuracy": "coarse"})
	if r.Status != agent.StatusDenied || !contains(r.Error, "location.get on build-box: FORBIDDEN: "+locationOff) {
		t.Fatalf("location off: %+v", r)
	}
	if p := sent("location.get"); p["accuracy"] != "coarse" {
		t.Fatalf("location.get params %v", p)
	}
	// The same through the nodes tool (it said "ok" for a failed result).
	r = e.call(NodesTool, map[string]any{"action": "invoke", "nodeId": n.nodeID, "command": "location.get"})
	if r.Status != agent.StatusDenied || !contains(r.Error, "location.get on "+n.nodeID+": FORBIDDEN: "+locationOff) {
		t.Fatalf("location off through nodes: %+v", r)
	}
	if got := len(ask.questions()); got != 6 {
		t.Fatalf("%d questions, want one per call (6)", got)
	}

	// Nothing there, bad arguments: errors that say what is there.
	r = e.call(CameraSnapTool, map[string]any{"node": "kitchen"})
	if r.Status != agent.StatusError || !contains(r.Error, `"kitchen" is not a connected device that may run camera.snap; these may: build-box (`+n.nodeID+")") {
		t.Fatalf("unknown device: %+v", r)
	}
	if r := e.call(CameraClipTool, map[string]any{"seconds": 61}); r.Status != agent.StatusError {
		t.Fatalf("a 61 s clip: %+v", r)
	}
	if got := len(ask.questions()); got != 6 {
		t.Fatalf("refused calls asked the person: %d questions", got)
	}

	plain := newTestEnv(t, Options{Nodes: &NodesOptions{Nodes: newNodeNet(t).svc, Permissions: perms}})
	for _, name := range []string{CameraSnapTool, CameraClipTool, ScreenSnapshotTool, LocationGetTool} {
		if _, ok := plain.reg.Spec(name); ok {
			t.Errorf("%s offered without a node that may run it", name)
		}
	}
}

// TestPickNode: by id, by name (letter case ignored), the least busy when
// none is named; only connected nodes that may run the command.
func TestPickNode(t *testing.T) {
	list := []nodes.Node{
		{NodeID: "a", DisplayName: "Phone", Connected: true, Commands: []string{"camera.snap"}, InvokesInFlight: 2},
		{NodeID: "b", DisplayName: "Tablet", Connected: true, Commands: []string{"camera.snap"}},
		{NodeID: "c", DisplayName: "Old phone", Connected: false, Commands: []string{"camera.snap"}},
		{NodeID: "d", DisplayName: "Box", Connected: true, Commands: []string{"system.run"}},
		{NodeID: "e", DisplayName: "phone", Connected: true, Commands: []string{"camera.snap"}},
	}
	for _, tc := range []struct{ spec, want, err string }{
		{"", "b", ""}, {"a", "a", ""}, {"tablet", "b", ""},
		{"phone", "", `"phone" names 2 devices`}, {"Old phone", "", "these may: Phone (a), Tablet (b), phone (e)"}, {"Box", "", "is not a connected device"},
	} {
		nd, err := pickNode(list, tc.spec, "camera.snap")
		if tc.err != "" {
			if !errors.Is(err, ErrNoSuchNode) || !contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || nd.NodeID != tc.want {
			t.Errorf("%q: %s %v, want %s", tc.spec, nd.NodeID, err, tc.want)
		}
	}
	if _, err := pickNode(list, "", "location.get"); !errors.Is(err, ErrNoSuchNode) || !contains(err.Error(), "no connected device may run location.get") {
		t.Errorf("nobody: %v", err)
	}
}
