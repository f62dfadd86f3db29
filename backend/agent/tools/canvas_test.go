package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/canvas"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/statedb"
)

// newCanvas is the real Canvas on a real gateway and state.db, with the
// committed official A2UI schemas; nothing shows it (no UI connected).
func newCanvas(t *testing.T) *canvas.Service {
	t.Helper()
	gw, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Token: "tools-canvas-token-0123456789", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := statedb.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := canvas.New(context.Background(), canvas.Options{Gateway: gw, DB: db, Logger: quiet(),
		Schemas: os.DirFS(filepath.Join("..", "..", "..", "frontend", "src", "lib", "a2ui", "schemas"))})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestCanvasTool: push and reset at L1 with line-numbered refusals fed back
// to the model; the surface owned by the run's session; a node's screen
// needs L3; eval is put to the person at L3 on every call and refused
// without them.
func TestCanvasTool(t *testing.T) {
	cv := newCanvas(t)
	ask := &asker{}
	perms := agent.NewPermissions(agent.PermissionOptions{Session: "s-1", Role: "code-expert", Asker: ask})
	e := newTestEnv(t, Options{Canvas: &CanvasOptions{Canvas: cv, SessionKey: "code-expert-1/s-1", Permissions: perms}})

	form := []map[string]any{
		{"surfaceUpdate": map[string]any{"surfaceId": "f", "components": []any{map[string]any{"id": "root", "component": map[string]any{"Text": map[string]any{"text": map[string]any{"literalString": "hi"}}}}}}},
		{"beginRendering": map[string]any{"surfaceId": "f", "root": "root"}},
	}
	r := e.call(CanvasTool, map[string]any{"action": "push", "messages": form})
	if r.Status != agent.StatusOK || !contains(r.LogSummary, "pushed 2 lines to desktop (kept): not rendered yet: no Canvas is open") {
		t.Fatalf("push: %+v", r)
	}
	if a := e.newest(); a.Operation != CanvasTool || a.Target != "desktop push" || a.Result != audit.Allowed || a.Role != "code-expert" {
		t.Fatalf("audit %+v", a)
	}
	if st := cv.StateOf(canvas.Desktop); len(st.Surfaces) != 1 || st.Surfaces[0].SessionKey != "code-expert-1/s-1" {
		t.Fatalf("state: %+v", st)
	}
	r = e.call(CanvasTool, map[string]any{"action": "push", "jsonl": `{"deleteSurface":{"surfaceId":"f"}}` + "\n" + `{"surfaceUpdate":{}}`})
	if r.Status != agent.StatusError || !contains(r.Error, "1 lines applied, line 2 refused: at /surfaceUpdate: missing properties") {
		t.Fatalf("invalid line: %+v", r)
	}
	if len(ask.questions()) != 0 {
		t.Fatalf("push asked the person: %+v", ask.questions())
	}

	// A node's screen: L3, asked; refused here.
	r = e.call(CanvasTool, map[string]any{"action": "present", "target": "some-node", "url": "https://example.com/"})
	if r.Status != agent.StatusDenied || len(ask.questions()) != 1 || ask.questions()[0].Level != agent.L3 {
		t.Fatalf("present on a node: %+v %+v", r, ask.questions())
	}
	// The desktop: L1.
	r = e.call(CanvasTool, map[string]any{"action": "present", "html": "<p>page</p>"})
	if r.Status != agent.StatusOK || len(ask.questions()) != 1 {
		t.Fatalf("present on the desktop: %+v", r)
	}
	// eval: asked every time at L3; no → denied and audited.
	r = e.call(CanvasTool, map[string]any{"action": "eval", "js": "document.title"})
	qs := ask.questions()
	if r.Status != agent.StatusDenied || len(qs) != 2 || qs[1].Kind != KindCanvasEval || qs[1].Level != agent.L3 || qs[1].ArgsSummary != "document.title" {
		t.Fatalf("eval refused: %+v %+v", r, qs)
	}
	if a := e.newest(); a.Target != "desktop eval" || a.Result != audit.Denied {
		t.Fatalf("audit %+v", a)
	}
	ask.mu.Lock()
	ask.yes = true
	ask.mu.Unlock()
	r = e.call(CanvasTool, map[string]any{"action": "eval", "js": "1"})
	if len(ask.questions()) != 3 || r.Status != agent.StatusError || !contains(r.Error, "no Canvas is open") {
		t.Fatalf("eval allowed, nobody shows it: %+v", r)
	}
	e2 := newTestEnv(t, Options{Canvas: &CanvasOptions{Canvas: cv, SessionKey: "main/s-2"}})
	if r := e2.call(CanvasTool, map[string]any{"action": "eval", "js": "1"}); r.Status != agent.StatusDenied {
		t.Fatalf("eval without anyone to ask: %+v", r)
	}
}

// TestCanvasToolSnapshot: the desktop's snapshot (a UI of the person
// draws its Canvas and answers the PNG) lands in the media store and comes
// back to the model as an image.
func TestCanvasToolSnapshot(t *testing.T) {
	const token = "tools-canvas-token-0123456789"
	gw, err := gateway.New(gateway.Options{Addr: "127.0.0.1:0", Token: token, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := statedb.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := media.Open(filepath.Join(t.TempDir(), "media"), media.Options{Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	cv, err := canvas.New(context.Background(), canvas.Options{Gateway: gw, DB: db, Media: store, Logger: quiet(),
		Schemas: os.DirFS(filepath.Join("..", "..", "..", "frontend", "src", "lib", "a2ui", "schemas"))})
	if err != nil {
		t.Fatal(err)
	}
	cv.Register()
	if err := gw.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	ui, err := gateway.Dial(dctx, gateway.ClientOptions{URL: "ws://" + gw.Addr() + "/ws", Token: token,
		Client: gateway.ClientInfo{ID: "atrium-ui", InstanceID: "w", Mode: canvas.UIMode, Platform: "linux"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ui.Close() })
	var pic bytes.Buffer
	if err := pngEncode(&pic, 40, 30); err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range ui.Events() {
			if ev.Event != canvas.EventUpdate {
				continue
			}
			var u struct{ PushID string }
			_ = json.Unmarshal(ev.Payload, &u)
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = ui.Call(cctx, canvas.MethodRendered, map[string]any{"pushId": u.PushID, "ok": true, "pngBase64": base64.StdEncoding.EncodeToString(pic.Bytes())}, nil)
			ccancel()
		}
	}()
	e := newTestEnv(t, Options{MediaDir: store.Dir(), Canvas: &CanvasOptions{Canvas: cv, SessionKey: "main/s-1", Media: store}})
	r := e.call(CanvasTool, map[string]any{"action": "snapshot"})
	if r.Status != agent.StatusOK || len(r.Images) != 1 || r.Images[0].MIME != "image/png" || r.Images[0].Width != 40 || r.Images[0].Height != 30 ||
		!strings.HasPrefix(r.Images[0].Path, store.Dir()) {
		t.Fatalf("snapshot: %+v", r)
	}
}

func pngEncode(w io.Writer, width, height int) error {
	return png.Encode(w, image.NewRGBA(image.Rect(0, 0, width, height)))
}
