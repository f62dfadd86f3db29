package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/nodes"
)

const canvasJSONL = `{"surfaceUpdate":{"surfaceId":"cli","components":[{"id":"root","component":{"Text":{"text":{"literalString":"hi"}}}}]}}
{"beginRendering":{"surfaceId":"cli","root":"root"}}
{"surfaceUpdate":{"surfaceId":"cli","components":[{"id":"x","component":{"Text":{}}}]}}
{"deleteSurface":{"surfaceId":"cli"}}
`

// answerCanvas answers every canvas.update of c (a UI of the person) as a
// renderer would: eval's value is 3, everything else ok.
func answerCanvas(t *testing.T, c *gateway.Client) {
	go func() {
		for ev := range c.Events() {
			if ev.Event != "canvas.update" {
				continue
			}
			var u struct{ PushID, Op string }
			_ = json.Unmarshal(ev.Payload, &u)
			p := map[string]any{"pushId": u.PushID, "ok": true}
			if u.Op == "eval" {
				p["value"] = 3
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			_ = c.Call(ctx, "canvas.rendered", p, nil)
			cancel()
		}
	}()
}

// TestCanvasCommands: atrium nodes canvas a2ui push, present and eval on
// the app's own Canvas (--node desktop) and on a node, with line-numbered
// errors (FILE:LINE: reason) and exit 1 for a refused line or a push
// nothing rendered.
func TestCanvasCommands(t *testing.T) {
	a := startNodeApp(t)
	file := filepath.Join(t.TempDir(), "form.jsonl")
	if err := os.WriteFile(file, []byte(canvasJSONL), 0o644); err != nil {
		t.Fatal(err)
	}

	// No UI open: kept, not rendered, and line 3 refused.
	code, out, errOut := a.cli(t, "nodes", "canvas", "a2ui", "push", "--node", "desktop", "--jsonl", file)
	if code != 1 || !strings.Contains(errOut, file+":3: at /surfaceUpdate/components/0/component/Text: missing property 'text'") ||
		!strings.Contains(out, "pushed 2 lines to desktop: kept, not rendered: no Canvas is open") {
		t.Fatalf("push without a UI: exit %d\n%s\n%s", code, out, errOut)
	}

	// A UI (client.mode "ui", as the app's window) answers: rendered.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tok, err := os.ReadFile(filepath.Join(a.home, "gateway.token"))
	if err != nil {
		t.Fatal(err)
	}
	ui, err := gateway.Dial(ctx, gateway.ClientOptions{URL: "ws://127.0.0.1:" + a.port + "/ws", Token: strings.TrimSpace(string(tok)),
		Client: gateway.ClientInfo{ID: "atrium-ui", InstanceID: "window", Mode: "ui", Platform: "linux", Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ui.Close() })
	answerCanvas(t, ui)
	good := filepath.Join(t.TempDir(), "good.jsonl")
	if err := os.WriteFile(good, []byte(strings.Join(strings.Split(canvasJSONL, "\n")[:2], "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := a.cli(t, "nodes", "canvas", "a2ui", "push", "--node", "desktop", "--jsonl", good); code != 0 || out != "pushed 2 lines to desktop: rendered\n" {
		t.Fatalf("push: exit %d\n%s\n%s", code, out, errOut)
	}
	page := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(page, []byte("<p>hello</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := a.cli(t, "nodes", "canvas", "present", "--node", "desktop", "--html", page, "--width", "400", "--height", "300"); code != 0 || out != "shown on desktop\n" {
		t.Fatalf("present: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := a.cli(t, "nodes", "canvas", "eval", "--node", "desktop", "--js", "1+2"); code != 0 || out != "3\n" {
		t.Fatalf("eval: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := a.cli(t, "nodes", "canvas", "present", "--node", "desktop", "--target", "file:///etc/passwd"); code == 0 || !strings.Contains(errOut, "http or https") {
		t.Fatalf("present file URL: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := a.cli(t, "nodes", "canvas", "a2ui", "push", "--jsonl", good); code != 2 || !strings.Contains(errOut, "needs --node") {
		t.Fatalf("push without --node: exit %d\n%s", code, errOut)
	}

	// A node (the local node: the operator token with role node) that
	// renders A2UI and shows pages.
	nodeConn, err := gateway.Dial(ctx, gateway.ClientOptions{URL: "ws://127.0.0.1:" + a.port + "/ws", Token: strings.TrimSpace(string(tok)), Role: gateway.RoleNode,
		Caps: []string{"canvas"}, Commands: []string{"canvas.a2ui.push", "canvas.present", "canvas.eval"},
		Client: gateway.ClientInfo{ID: "test-phone", DisplayName: "tablet", InstanceID: "tablet", Mode: "node", Platform: "linux", Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nodeConn.Close() })
	got := make(chan string, 8)
	go func() {
		for ev := range nodeConn.Events() {
			if ev.Event != nodes.EventInvokeRequest {
				continue
			}
			var r nodes.InvokeRequestEvent
			_ = json.Unmarshal(ev.Payload, &r)
			got <- r.Command
			b, _ := json.Marshal(map[string]any{"rendered": true})
			_ = nodeConn.Call(context.Background(), nodes.MethodInvokeResult, nodes.ResultParams{ID: r.ID, OK: true, Payload: b}, nil)
		}
	}()
	if code, out, errOut := a.cli(t, "nodes", "canvas", "a2ui", "push", "--node", "tablet", "--jsonl", good); code != 0 || out != "pushed 2 lines to tablet: rendered\n" {
		t.Fatalf("push to a node: exit %d\n%s\n%s", code, out, errOut)
	}
	if c := <-got; c != "canvas.a2ui.push" {
		t.Fatalf("the node got %s", c)
	}
	if code, out, errOut := a.cli(t, "nodes", "canvas", "present", "--node", "tablet", "--target", "https://example.com/"); code != 0 || out != "shown on tablet\n" {
		t.Fatalf("present on a node: exit %d\n%s\n%s", code, out, errOut)
	}
}
