package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
	"github.com/atrium-dev/atrium/backend/nodes"
)

// storeMedia puts data into the media store as a node's transfer would
// (Begin, blocks, Commit) and returns its sidecar.
func storeMedia(t *testing.T, s *media.Store, name, mime string, data []byte, w, h int) media.Meta {
	t.Helper()
	p := media.Plan{ID: media.NewID(), Device: "dev-1", Command: "camera.snap", Name: name, Size: int64(len(data)),
		SHA256: sha256.Sum256(data), BlockSize: media.MinBlockSize, MIME: mime, Width: w, Height: h, Transport: media.TransportWebRTC}
	for off := 0; off < len(data); off += p.BlockSize {
		p.Blocks = append(p.Blocks, sha256.Sum256(data[off:min(off+p.BlockSize, len(data))]))
	}
	part, err := s.Begin(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Blocks {
		off := i * p.BlockSize
		if err := part.WriteBlock(i, data[off:off+p.BlockLen(i)]); err != nil {
			t.Fatal(err)
		}
	}
	m, err := part.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// openMediaStore opens an empty media store, closed when t ends.
func openMediaStore(t *testing.T) *media.Store {
	t.Helper()
	store, err := media.Open(filepath.Join(t.TempDir(), "media"), media.Options{MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewNRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// mediaNode is a real gateway and nodes service with a node that answers
// camera.snap and camera.clip with media the test stored, as the node does
// once its transfer landed (docs/PROTOCOL.md "Media transfers" step 3).
func mediaNode(t *testing.T, answers map[string]media.Meta) *nodeNet {
	t.Helper()
	return newNodeNetWith(t, []string{"camera.snap", "camera.clip"}, func(r nodes.InvokeRequestEvent) nodes.ResultParams {
		m := answers[r.Command]
		raw, _ := json.Marshal(m)
		return nodes.ResultParams{ID: r.ID, OK: true, Payload: json.RawMessage(`{"format":"png"}`), Media: raw}
	})
}

// TestNodesToolReturnsThePhoto: "look out of the window" end to end
// below the gateway — the model calls nodes invoke camera.snap, the node
// answers with a stored photo, and the next model request carries the
// photo; a clip is no image; a media id the store does not have is an
// error.
func TestNodesToolReturnsThePhoto(t *testing.T) {
	store := openMediaStore(t)
	photo := pngOf(t, 32, 24)
	snap := storeMedia(t, store, "snap.png", "image/png", photo, 32, 24)
	clip := storeMedia(t, store, "clip.webm", "video/webm", []byte("not really a video, but stored as one"), 0, 0)
	n := mediaNode(t, map[string]media.Meta{"camera.snap": snap, "camera.clip": clip})
	ask := &asker{yes: true}
	perms := agent.NewPermissions(agent.PermissionOptions{Session: "s-1", Role: "code-expert", Asker: ask})
	e := newTestEnv(t, Options{MediaDir: store.Dir(), Nodes: &NodesOptions{Nodes: n.svc, Permissions: perms, Media: store}})

	srv := modeltest.New(t, modeltest.Options{}, modeltest.Turns(
		modeltest.Turn{Calls: [][2]string{{NodesTool, `{"action":"invoke","nodeId":"` + n.nodeID + `","command":"camera.snap","params":{"facing":"back"}}`}}},
		modeltest.Turn{Text: "A dark window."})...)
	a, err := agent.New(agent.Options{
		Provider:    model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.BaseURL(), Model: "vision", Vision: true, Logger: quiet()}),
		Tools:       e.reg,
		Permissions: perms,
		Logger:      quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := a.Run(context.Background(), agent.Task{Input: "look out of the window"})
	if err != nil || rep.Text != "A dark window." {
		t.Fatalf("%q %v", rep.Text, err)
	}
	res := rep.Results[0]
	want := filepath.Join(store.Dir(), snap.File)
	if real, err := filepath.EvalSymlinks(want); err == nil {
		want = real
	}
	if len(res.Images) != 1 || res.Images[0].Path != want || res.Images[0].MediaID != snap.ID || res.Images[0].Width != 32 || res.Images[0].MIME != "image/png" {
		t.Fatalf("images %+v", res.Images)
	}
	if !strings.Contains(srv.Body(1), "data:image/png;base64,"+base64.StdEncoding.EncodeToString(photo)) {
		t.Fatalf("the photo is not in the next request: %.500s", srv.Body(1))
	}

	r := e.call(NodesTool, map[string]any{"action": "invoke", "nodeId": n.nodeID, "command": "camera.clip"})
	if r.Status != agent.StatusOK || len(r.Images) != 0 || !contains(string(r.Data), clip.ID) {
		t.Fatalf("a clip is no image, its media reference stays: %+v", r)
	}
	if err := store.Delete(snap.ID); err != nil {
		t.Fatal(err)
	}
	r = e.call(NodesTool, map[string]any{"action": "invoke", "nodeId": n.nodeID, "command": "camera.snap"})
	if r.Status != agent.StatusError || !contains(r.Error, "media not found") {
		t.Fatalf("a result naming media the store lacks: %+v", r)
	}
}

// TestImagePathsConfined: a picture is shown only from the media folder or
// the workspace; a path outside, a symlink leading out and a folder are
// refused.
func TestImagePathsConfined(t *testing.T) {
	mediaDir := filepath.Join(t.TempDir(), "media")
	writeFile(t, filepath.Join(mediaDir, "a.png"), "x")
	e := newTestEnv(t, Options{MediaDir: mediaDir})
	x := &env{o: Options{Guard: e.g, MediaDir: mediaDir}}
	for _, ok := range []string{filepath.Join(mediaDir, "a.png"), filepath.Join(e.ws, "notes", "todo.txt")} {
		if img, err := x.imageResult(ok, agent.Image{MIME: "image/png"}); err != nil || img.Bytes == 0 {
			t.Errorf("%s: %+v %v", ok, img, err)
		}
	}
	link := filepath.Join(e.ws, "notes", "out.png")
	if err := os.Symlink(filepath.Join(e.outside, "secret.txt"), link); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{filepath.Join(e.outside, "secret.txt"), link, filepath.Join(e.ws, "notes"), mediaDir, filepath.Join(mediaDir, "..", "x.png")} {
		if _, err := x.imageResult(bad, agent.Image{}); !errors.Is(err, ErrImagePath) {
			t.Errorf("%s: want ErrImagePath, got %v", bad, err)
		}
	}
}
