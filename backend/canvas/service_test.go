package canvas

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

type update struct {
	PushID   string            `json:"pushId"`
	Target   string            `json:"target"`
	Op       string            `json:"op"`
	Surfaces []string          `json:"surfaces"`
	Messages []json.RawMessage `json:"messages"`
	JS       string            `json:"js"`
	FrameURL string            `json:"frameUrl"`
	URL      string            `json:"url"`
}

// serveUI answers every canvas.update of c with answer's params for
// canvas.rendered, until the connection ends; got receives each update.
func serveUI(t testing.TB, c *gateway.Client, answer func(update) map[string]any) <-chan update {
	got := make(chan update, 64)
	go func() {
		for ev := range c.Events() {
			if ev.Event != EventUpdate {
				continue
			}
			var u update
			if err := json.Unmarshal(ev.Payload, &u); err != nil {
				t.Errorf("canvas.update: %v", err)
				return
			}
			got <- u
			p := answer(u)
			p["pushId"] = u.PushID
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			_ = c.Call(ctx, MethodRendered, p, nil)
			cancel()
		}
	}()
	return got
}

const formV08 = `{"surfaceUpdate":{"surfaceId":"form","components":[{"id":"root","component":{"Column":{"children":{"explicitList":["name","ok"]}}}},` +
	`{"id":"name","component":{"TextField":{"label":{"literalString":"Name"},"text":{"path":"/form/name"}}}},` +
	`{"id":"okText","component":{"Text":{"text":{"literalString":"OK"}}}},` +
	`{"id":"ok","component":{"Button":{"child":"okText","action":{"name":"submit","context":[{"key":"name","value":{"path":"/form/name"}}]}}}}]}}`

const beginV08 = `{"beginRendering":{"surfaceId":"form","root":"root"}}`

// TestPushStopsAtFirstInvalidLine: the lines before an invalid line apply
// and reach the UI; it and the lines after it do not; the error names its
// line number; a push waits for the UI's render report.
func TestPushStopsAtFirstInvalidLine(t *testing.T) {
	f := newFixture(t, t.TempDir(), Options{})
	ui := f.ui()
	got := serveUI(t, ui, func(update) map[string]any { return map[string]any{"ok": true} })
	admin := f.ui()
	res := call[PushResult](t, admin, MethodPush, map[string]any{"target": Desktop, "jsonl": jsonl(
		formV08,
		"",
		beginV08,
		`{"surfaceUpdate":{"surfaceId":"form","components":[{"id":"x","component":{"Text":{}}}]}}`,
		`{"dataModelUpdate":{"surfaceId":"form","contents":[{"key":"a","valueString":"never"}]}}`,
	)})
	if res.Applied != 2 || len(res.Errors) != 1 || res.Errors[0].Line != 4 || !strings.Contains(res.Errors[0].Reason, "missing property 'text'") {
		t.Fatalf("push: %+v", res)
	}
	if !res.Rendered || res.Reason != "" {
		t.Fatalf("push not rendered: %+v", res)
	}
	u := <-got
	if u.Op != "push" || u.PushID != res.PushID || len(u.Messages) != 2 || u.Target != Desktop {
		t.Fatalf("update: %+v", u)
	}
	st := call[State](t, admin, MethodState, map[string]any{"target": Desktop})
	if len(st.Surfaces) != 1 || st.Surfaces[0].SessionKey != PersonSession || strings.Contains(fmt.Sprint(st), "never") {
		t.Fatalf("state: %s", mustJSON(t, st))
	}
}

// TestPushWithoutUI: with no UI connected a push says so at once, and its
// surface is kept for the next UI; a UI that does not answer is named too.
func TestPushWithoutUI(t *testing.T) {
	f := newFixture(t, t.TempDir(), Options{RenderWait: 300 * time.Millisecond})
	res, err := f.svc.Push(context.Background(), Who{Agent: "main", SessionKey: "main/s1"}, Desktop, formV08)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rendered || !strings.Contains(res.Reason, "no UI connection") {
		t.Fatalf("push: %+v", res)
	}
	silent := f.ui() // connected, never answers
	_ = silent
	res, err = f.svc.Push(context.Background(), Who{Agent: "main", SessionKey: "main/s1"}, Desktop, beginV08)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rendered || !strings.Contains(res.Reason, "no UI answered within") {
		t.Fatalf("push: %+v", res)
	}
	if st := f.svc.StateOf(Desktop); len(st.Surfaces) != 1 || len(st.Surfaces[0].Messages) != 2 {
		t.Fatalf("state: %s", mustJSON(t, st))
	}
	// A renderer's complaint comes back as renderErrors.
	ui := f.ui()
	serveUI(t, ui, func(update) map[string]any {
		return map[string]any{"ok": false, "errors": []LineError{{Line: 1, Reason: "unknown root"}}}
	})
	res, err = f.svc.Push(context.Background(), Who{Agent: "main", SessionKey: "main/s1"}, Desktop, beginV08)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rendered || len(res.RenderErrors) != 1 || res.RenderErrors[0].Reason != "unknown root" {
		t.Fatalf("push: %+v", res)
	}
}

// TestCompactionAndRestart: many updates keep one surface of its latest
// components and the data-model updates not overwritten; the compacted
// messages are valid lines that rebuild the same surface; the state
// survives a restart of the service on the same state.db.
func TestCompactionAndRestart(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, Options{})
	who := Who{Agent: "main", SessionKey: "main/s1"}
	var lines []string
	lines = append(lines, beginV08, formV08)
	for i := range 200 {
		lines = append(lines,
			fmt.Sprintf(`{"surfaceUpdate":{"surfaceId":"form","components":[{"id":"okText","component":{"Text":{"text":{"literalString":"OK %d"}}}}]}}`, i),
			fmt.Sprintf(`{"dataModelUpdate":{"surfaceId":"form","path":"/form","contents":[{"key":"name","valueString":"v%d"}]}}`, i),
			fmt.Sprintf(`{"dataModelUpdate":{"surfaceId":"form","path":"/form/name","contents":[{"key":".","valueString":"w%d"}]}}`, i))
	}
	lines = append(lines, `{"dataModelUpdate":{"surfaceId":"form","path":"/other","contents":[{"key":"x","valueBoolean":true}]}}`)
	res, err := f.svc.Push(context.Background(), who, Desktop, jsonl(lines...))
	if err != nil || res.Applied != len(lines) {
		t.Fatalf("push: %+v %v", res, err)
	}
	st := f.svc.StateOf(Desktop)
	if len(st.Surfaces) != 1 {
		t.Fatalf("state: %s", mustJSON(t, st))
	}
	msgs := st.Surfaces[0].Messages
	// begin, one component line, /form (v199), /form/name (w199), /other.
	if len(msgs) != 5 {
		t.Fatalf("%d messages kept, want 5: %s", len(msgs), msgs)
	}
	if !strings.Contains(string(msgs[1]), "OK 199") || strings.Contains(string(msgs[1]), "OK 198") ||
		!strings.Contains(string(msgs[2]), `"v199"`) || !strings.Contains(string(msgs[3]), `"w199"`) {
		t.Fatalf("not the latest: %s", msgs)
	}
	// They are valid lines, and applying them again gives the same surface.
	var again []string
	for _, m := range msgs {
		again = append(again, string(m))
	}
	g := newFixture(t, t.TempDir(), Options{})
	if res, err := g.svc.Push(context.Background(), who, Desktop, jsonl(again...)); err != nil || res.Applied != 5 {
		t.Fatalf("replayed: %+v %v", res, err)
	}
	if a, b := mustJSON(t, g.svc.StateOf(Desktop).Surfaces), mustJSON(t, st.Surfaces); a != b {
		t.Fatalf("rebuilt surface differs:\n%s\n%s", a, b)
	}
	// A root update drops every data-model update before it.
	if _, err := f.svc.Push(context.Background(), who, Desktop, `{"dataModelUpdate":{"surfaceId":"form","contents":[{"key":"form","valueMap":[{"key":"name","valueString":"root"}]}]}}`); err != nil {
		t.Fatal(err)
	}
	if msgs := f.svc.StateOf(Desktop).Surfaces[0].Messages; len(msgs) != 3 {
		t.Fatalf("after a root update: %s", msgs)
	}
	want := mustJSON(t, f.svc.StateOf(Desktop))

	// Restart: a new service on the same state.db.
	h := newFixture(t, dir, Options{})
	if got := mustJSON(t, h.svc.StateOf(Desktop)); got != want {
		t.Fatalf("after a restart:\n%s\nwant\n%s", got, want)
	}
	// deleteSurface forgets it, also on disk.
	if _, err := h.svc.Push(context.Background(), who, Desktop, `{"deleteSurface":{"surfaceId":"form"}}`); err != nil {
		t.Fatal(err)
	}
	k := newFixture(t, dir, Options{})
	if st := k.svc.StateOf(Desktop); len(st.Surfaces) != 0 {
		t.Fatalf("deleted surface kept: %s", mustJSON(t, st))
	}
}

// TestV09Surfaces: createSurface first, once; a component update naming
// only properties keeps the type; a v0.8 line for a v0.9 surface is
// refused.
func TestV09Surfaces(t *testing.T) {
	f := newFixture(t, t.TempDir(), Options{})
	who := Who{Agent: "main", SessionKey: "main/s1"}
	create := `{"version":"v0.9","createSurface":{"surfaceId":"n","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}}`
	res, _ := f.svc.Push(context.Background(), who, Desktop, `{"version":"v0.9","updateComponents":{"surfaceId":"n","components":[{"id":"root","component":"Text","text":"a"}]}}`)
	if res.Applied != 0 || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Reason, "createSurface first") {
		t.Fatalf("update before create: %+v", res)
	}
	res, _ = f.svc.Push(context.Background(), who, Desktop, jsonl(create,
		`{"version":"v0.9","updateComponents":{"surfaceId":"n","components":[{"id":"root","component":"Text","text":"a"}]}}`,
		`{"version":"v0.9","updateDataModel":{"surfaceId":"n","path":"/a/b","value":1}}`,
		`{"version":"v0.9","updateDataModel":{"surfaceId":"n","path":"/a","value":{"b":2}}}`,
		create))
	if res.Applied != 4 || len(res.Errors) != 1 || res.Errors[0].Line != 5 || !strings.Contains(res.Errors[0].Reason, "already exists") {
		t.Fatalf("push: %+v", res)
	}
	res, _ = f.svc.Push(context.Background(), who, Desktop, `{"deleteSurface":{"surfaceId":"n"}}`)
	if res.Applied != 0 || !strings.Contains(res.Errors[0].Reason, "is v0.9") {
		t.Fatalf("v0.8 line on a v0.9 surface: %+v", res)
	}
	msgs := f.svc.StateOf(Desktop).Surfaces[0].Messages
	if len(msgs) != 3 || !strings.Contains(string(msgs[2]), `"value":{"b":2}`) {
		t.Fatalf("compacted: %s", msgs)
	}
}

// TestBounds: jsonl size, lines per push, line size, surfaces per session,
// components per surface; another session's surface is not taken over.
func TestBounds(t *testing.T) {
	f := newFixture(t, t.TempDir(), Options{MaxJSONLBytes: 4096, MaxLines: 5, MaxLineBytes: 1024, MaxSurfacesPerSession: 2, MaxComponents: 3})
	who := Who{Agent: "main", SessionKey: "main/s1"}
	ctx := context.Background()
	if _, err := f.svc.Push(ctx, who, Desktop, strings.Repeat(" ", 4097)); !isCode(err, gateway.CodePayloadTooLarge) {
		t.Fatalf("big jsonl: %v", err)
	}
	if _, err := f.svc.Push(ctx, who, Desktop, strings.Repeat(beginV08+"\n", 6)); !isCode(err, gateway.CodeInvalidRequest) {
		t.Fatalf("6 lines: %v", err)
	}
	long := `{"beginRendering":{"surfaceId":"s","root":"` + strings.Repeat("r", 1100) + `"}}`
	if res, _ := f.svc.Push(ctx, who, Desktop, jsonl(beginV08, long)); res.Applied != 1 || res.Errors[0].Line != 2 || !strings.Contains(res.Errors[0].Reason, "bytes (at most 1024)") {
		t.Fatalf("long line: %+v", res)
	}
	surf := func(id string) string { return fmt.Sprintf(`{"beginRendering":{"surfaceId":%q,"root":"r"}}`, id) }
	if res, _ := f.svc.Push(ctx, who, Desktop, jsonl(surf("a"), surf("b"))); res.Applied != 1 || !strings.Contains(res.Errors[0].Reason, "would show 3 surfaces") {
		t.Fatalf("third surface: %+v", res)
	}
	// Another session has its own two.
	other := Who{Agent: "main", SessionKey: "main/s2"}
	if res, _ := f.svc.Push(ctx, other, Desktop, jsonl(surf("c"), surf("d"))); res.Applied != 2 {
		t.Fatalf("other session: %+v", res)
	}
	if res, _ := f.svc.Push(ctx, other, Desktop, surf("form")); res.Applied != 0 || !strings.Contains(res.Errors[0].Reason, "belongs to another session (main/s1)") {
		t.Fatalf("takeover: %+v", res)
	}
	comps := `{"surfaceUpdate":{"surfaceId":"form","components":[{"id":"1","component":{"Divider":{}}},{"id":"2","component":{"Divider":{}}},{"id":"3","component":{"Divider":{}}},{"id":"4","component":{"Divider":{}}}]}}`
	if res, _ := f.svc.Push(ctx, who, Desktop, comps); res.Applied != 0 || !strings.Contains(res.Errors[0].Reason, "would hold 4 components (at most 3)") {
		t.Fatalf("components: %+v", res)
	}
}

// TestFrameAncestorsChecked: a source that would change the CSP's meaning
// is refused.
func TestFrameAncestorsChecked(t *testing.T) {
	for _, bad := range []string{"x; script-src *", "a b", "'none'", ""} {
		_, err := New(context.Background(), Options{Gateway: &gateway.Server{}, FrameAncestors: []string{bad}})
		if err == nil || !strings.Contains(err.Error(), "FrameAncestors") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func isCode(err error, code string) bool {
	ge, ok := err.(*gateway.Error)
	return ok && ge.Code == code
}

// TestNodeTarget: a push to a node goes as node.invoke canvas.a2ui.push
// and is rendered when the node answers; the node gets its surfaces again
// (replay) when it reconnects; a node acts only on its own surfaces.
func TestNodeTarget(t *testing.T) {
	f := newFixture(t, t.TempDir(), Options{})
	phone, id := f.node("phone")
	reqs := make(chan nodes.InvokeRequestEvent, 16)
	serveNode := func(c *gateway.Client) {
		go func() {
			for ev := range c.Events() {
				if ev.Event != nodes.EventInvokeRequest {
					continue
				}
				var r nodes.InvokeRequestEvent
				_ = json.Unmarshal(ev.Payload, &r)
				reqs <- r
				b, _ := json.Marshal(map[string]any{"rendered": true})
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				_ = c.Call(ctx, nodes.MethodInvokeResult, nodes.ResultParams{ID: r.ID, OK: true, Payload: b}, nil)
				cancel()
			}
		}()
	}
	serveNode(phone)
	admin := f.operator() // not a UI: desktop pushes say at once that none is open
	res := call[PushResult](t, admin, MethodPush, map[string]any{"target": id, "jsonl": jsonl(formV08, beginV08)})
	if !res.Rendered || res.Applied != 2 {
		t.Fatalf("push to node: %+v", res)
	}
	r := <-reqs
	var p struct {
		Messages []json.RawMessage `json:"messages"`
		Replay   bool              `json:"replay"`
	}
	_ = json.Unmarshal(r.Params, &p)
	if r.Command != "canvas.a2ui.push" || len(p.Messages) != 2 || p.Replay {
		t.Fatalf("invoke: %+v", r)
	}
	// The node acts on its surface: accepted; on the desktop's: refused.
	act := call[ActionResult](t, phone, MethodAction, map[string]any{"surfaceId": "form", "componentId": "ok", "name": "submit", "context": map[string]any{"name": "Ada"}})
	if !act.Accepted || act.SessionKey != PersonSession {
		t.Fatalf("action: %+v", act)
	}
	if e := callErr(phone, MethodAction, map[string]any{"target": Desktop, "surfaceId": "form", "componentId": "ok", "name": "submit"}); e == nil || e.Code != gateway.CodeForbidden {
		t.Fatalf("action on the desktop from a node: %v", e)
	}
	if e := callErr(phone, MethodState, map[string]any{"target": id}); e == nil || e.Code != gateway.CodeForbidden {
		t.Fatalf("canvas.state from a node: %v", e)
	}
	// The node closes its own surface (it stays closed), not the desktop's.
	if _, err := f.svc.Push(context.Background(), Who{}, Desktop, formV08); err != nil {
		t.Fatal(err)
	}
	if e := callErr(phone, MethodReset, map[string]any{"target": Desktop, "surfaceId": "form"}); e == nil || e.Code != gateway.CodeForbidden {
		t.Fatalf("reset of the desktop from a node: %v", e)
	}
	rr := call[ResetResult](t, phone, MethodReset, map[string]any{"surfaceId": "form"})
	if len(rr.Removed) != 1 || !rr.Rendered {
		t.Fatalf("the node's reset: %+v", rr)
	}
	if r := <-reqs; r.Command != "canvas.a2ui.reset" {
		t.Fatalf("invoke: %+v", r)
	}
	if len(f.svc.StateOf(id).Surfaces) != 0 || len(f.svc.StateOf(Desktop).Surfaces) != 1 {
		t.Fatalf("after the node's reset: %s %s", mustJSON(t, f.svc.StateOf(id)), mustJSON(t, f.svc.StateOf(Desktop)))
	}
	if _, err := f.svc.Push(context.Background(), Who{}, id, jsonl(formV08, beginV08)); err != nil {
		t.Fatal(err)
	}
	<-reqs
	// A node's id is per connection for the local node: the push to a
	// node that is gone is kept and said so.
	phone.Close()
	waitFor(t, "the node gone", func() bool { n, err := f.nodes.Describe(id); return err == nil && !n.Connected })
	res2, err := f.svc.Push(context.Background(), Who{}, id, `{"dataModelUpdate":{"surfaceId":"form","contents":[{"key":"x","valueString":"y"}]}}`)
	if err != nil || res2.Rendered || res2.Reason == "" {
		t.Fatalf("push to a gone node: %+v %v", res2, err)
	}
}

// TestReplayOnConnect: a node that connects gets what is kept for it.
func TestReplayOnConnect(t *testing.T) {
	f := newFixture(t, t.TempDir(), Options{})
	// The local node's id is local:<connId>: keep surfaces under the id
	// the next connection will have by pushing while it is connected, then
	// reconnecting the same paired device is covered by the wiring's test;
	// here the service's replay of a known id is driven directly.
	phone, id := f.node("phone")
	got := make(chan nodes.InvokeRequestEvent, 8)
	go func() {
		for ev := range phone.Events() {
			if ev.Event != nodes.EventInvokeRequest {
				continue
			}
			var r nodes.InvokeRequestEvent
			_ = json.Unmarshal(ev.Payload, &r)
			got <- r
			b, _ := json.Marshal(map[string]any{"rendered": true})
			_ = phone.Call(context.Background(), nodes.MethodInvokeResult, nodes.ResultParams{ID: r.ID, OK: true, Payload: b}, nil)
		}
	}()
	if res, err := f.svc.Push(context.Background(), Who{}, id, jsonl(formV08, beginV08)); err != nil || !res.Rendered {
		t.Fatal(res, err)
	}
	if res, err := f.svc.Present(context.Background(), Who{}, id, "https://example.com/", "", &Placement{X: 1, Y: 2, Width: 300, Height: 200}); err != nil || !res.Rendered {
		t.Fatal(res, err)
	}
	<-got
	<-got
	f.svc.replay(id)
	var cmds []string
	var replayed bool
	for len(cmds) < 2 {
		r := <-got
		cmds = append(cmds, r.Command)
		if r.Command == "canvas.a2ui.push" {
			var p struct {
				Replay   bool              `json:"replay"`
				Messages []json.RawMessage `json:"messages"`
			}
			_ = json.Unmarshal(r.Params, &p)
			replayed = p.Replay && len(p.Messages) == 2
		}
	}
	if strings.Join(cmds, ",") != "canvas.a2ui.push,canvas.present" || !replayed {
		t.Fatalf("replay: %v %v", cmds, replayed)
	}
}

// TestActionsQueuedSurviveRestart: an action while the session answers is
// stored and queued; after a restart it is sent, with the form's values
// intact, in order.
func TestActionsQueuedSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, Options{})
	who := Who{Agent: "main", SessionKey: "main/s1"}
	if _, err := f.svc.Push(context.Background(), who, Desktop, jsonl(formV08, beginV08)); err != nil {
		t.Fatal(err)
	}
	f.chat.setBusy("main/s1", true)
	admin := f.ui()
	values := map[string]any{"name": "Ada Lovelace 艾达", "agree": true, "level": 7, "choice": []string{"b"}}
	a1 := call[ActionResult](t, admin, MethodAction, map[string]any{"surfaceId": "form", "componentId": "ok", "name": "submit", "context": values})
	a2 := call[ActionResult](t, admin, MethodAction, map[string]any{"surfaceId": "form", "componentId": "ok", "name": "again"})
	if !a1.Accepted || !a1.Queued || !a2.Queued || a1.SessionKey != "main/s1" {
		t.Fatalf("actions: %+v %+v", a1, a2)
	}
	if e := callErr(admin, MethodAction, map[string]any{"surfaceId": "nope", "componentId": "ok", "name": "x"}); e == nil || e.Code != gateway.CodeNotFound {
		t.Fatalf("unknown surface: %v", e)
	}
	f.svc.Wake()
	if n := len(f.chat.messages()); n != 0 {
		t.Fatalf("sent while busy: %d", n)
	}
	// Restart with a chat whose session is free.
	g := newFixture(t, dir, Options{})
	waitFor(t, "both actions sent", func() bool { return len(g.chat.messages()) >= 1 })
	m := g.chat.messages()[0]
	if m.profile != "main" || m.session != "s1" || m.key != a1.ActionID || !strings.Contains(m.message, `Canvas action "submit" on surface "form" (component "ok")`) {
		t.Fatalf("message: %+v", m)
	}
	_, block, _ := strings.Cut(m.message, "```json\n")
	block, _, _ = strings.Cut(block, "\n```")
	var ua struct {
		UserAction struct {
			Name, SurfaceID, SourceComponentID string
			Context                            map[string]any
		} `json:"userAction"`
	}
	if err := json.Unmarshal([]byte(block), &ua); err != nil {
		t.Fatalf("the message's JSON: %v\n%s", err, m.message)
	}
	if mustJSON(t, ua.UserAction.Context) != mustJSON(t, values) || ua.UserAction.SourceComponentID != "ok" {
		t.Fatalf("values: %+v", ua.UserAction)
	}
	// The fake chat is never busy after a send: the second follows.
	waitFor(t, "the second action", func() bool { return len(g.chat.messages()) == 2 })
	if g.chat.messages()[1].key != a2.ActionID {
		t.Fatalf("order: %+v", g.chat.messages())
	}
}

// TestPresentedFrame: html is served on the sandboxed frame path with its
// CSP, the eval bridge first; not after hide; eval needs an html page and
// runs through the UI's answer; snapshot stores the UI's PNG.
func TestPresentedFrame(t *testing.T) {
	f := newFixture(t, t.TempDir(), Options{FrameAncestors: []string{"wails://wails", "wails.localhost:*"}})
	ui := f.ui()
	var img bytes.Buffer
	_ = png.Encode(&img, image.NewRGBA(image.Rect(0, 0, 4, 3)))
	got := serveUI(t, ui, func(u update) map[string]any {
		switch u.Op {
		case "eval":
			return map[string]any{"ok": true, "value": 42}
		case "snapshot":
			return map[string]any{"ok": true, "pngBase64": base64.StdEncoding.EncodeToString(img.Bytes())}
		}
		return map[string]any{"ok": true}
	})
	admin := f.ui()
	if e := callErr(admin, MethodEval, map[string]any{"target": Desktop, "js": "1+1"}); e == nil || e.Code != gateway.CodeConflict {
		t.Fatalf("eval without a page: %v", e)
	}
	if e := callErr(admin, MethodPresent, map[string]any{"target": Desktop, "url": "javascript:alert(1)"}); e == nil || e.Code != gateway.CodeInvalidRequest {
		t.Fatalf("javascript url: %v", e)
	}
	html := "<!DOCTYPE html><title>t</title><p>hello</p>"
	res := call[ShowResult](t, admin, MethodPresent, map[string]any{"target": Desktop, "html": html, "placement": map[string]any{"x": 0, "y": 0, "width": 400, "height": 300}})
	if !res.Rendered || !strings.HasPrefix(res.FrameURL, FramePath) {
		t.Fatalf("present: %+v", res)
	}
	if u := <-got; u.Op != "present" || u.FrameURL != res.FrameURL {
		t.Fatalf("update: %+v", u)
	}
	resp, err := http.Get("http://" + f.gw.Addr() + res.FrameURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != FrameCSP+" wails://wails wails.localhost:*" || resp.Header.Get("X-Frame-Options") != "" ||
		!strings.HasPrefix(string(body), "<!DOCTYPE html><script>") || !strings.HasSuffix(string(body), "<p>hello</p>") {
		t.Fatalf("frame: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	if !strings.HasPrefix(FrameCSP, "sandbox allow-scripts allow-forms;") || strings.Contains(FrameCSP, "allow-same-origin") || !strings.Contains(FrameCSP, "connect-src 'none'") {
		t.Fatalf("CSP: %s", FrameCSP)
	}
	ev := call[EvalResult](t, admin, MethodEval, map[string]any{"target": Desktop, "js": "6*7"})
	if !ev.OK || string(ev.Value) != "42" {
		t.Fatalf("eval: %+v", ev)
	}
	if u := <-got; u.Op != "eval" || u.JS != "6*7" {
		t.Fatalf("update: %+v", u)
	}
	snap := call[map[string]json.RawMessage](t, admin, MethodSnapshot, map[string]any{"target": Desktop})
	var meta struct {
		ID, MIME, Command, Device, Path string
		Width, Height                   int
	}
	_ = json.Unmarshal(snap["media"], &meta)
	if meta.MIME != "image/png" || meta.Command != "canvas.snapshot" || meta.Device != Desktop || meta.Width != 4 || meta.Height != 3 ||
		meta.Path != filepath.Join(f.media.Dir(), meta.ID+".png") {
		t.Fatalf("snapshot: %s", snap["media"])
	}
	<-got
	call[ShowResult](t, admin, MethodHide, map[string]any{"target": Desktop})
	resp, err = http.Get("http://" + f.gw.Addr() + res.FrameURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("frame after hide: %d", resp.StatusCode)
	}
}

// TestActionBounds: a context that is not an object, or one whose message
// would be longer than chat takes, is refused before anything is stored.
func TestActionBounds(t *testing.T) {
	f := newFixture(t, t.TempDir(), Options{})
	who := Who{Agent: "main", SessionKey: "main/s1"}
	if _, err := f.svc.Push(context.Background(), who, Desktop, jsonl(formV08, beginV08)); err != nil {
		t.Fatal(err)
	}
	admin := f.ui()
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000) // 10 KB of JSON, far more once indented
	for name, ctxJSON := range map[string]json.RawMessage{
		"array":  json.RawMessage(`[1,2]`),
		"string": json.RawMessage(`"x"`),
		"big":    json.RawMessage(`{"x":"` + strings.Repeat("a", MaxContextBytes) + `"}`),
		"deep":   json.RawMessage(`{"x":` + deep + `}`),
	} {
		e := callErr(admin, MethodAction, map[string]any{"surfaceId": "form", "componentId": "ok", "name": "submit", "context": ctxJSON})
		if e == nil || e.Code != gateway.CodeInvalidRequest {
			t.Errorf("%s: %v", name, e)
		}
	}
	if list, err := f.svc.st.waiting(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("stored: %v %v", list, err)
	}
}

// TestV09ActionShape: an action on a v0.9 surface reaches the agent as
// v0.9's client-to-server event ({version, action}, client_to_server.json),
// and a surface created with sendDataModel gets the client's data model as
// a2uiClientDataModel (client_data_model.json) — both validated against
// the shipped schemas; a v0.8 surface keeps userAction and ignores a data
// model; a data model that is not an object is refused.
func TestV09ActionShape(t *testing.T) {
	f := newFixture(t, t.TempDir(), Options{})
	who := Who{Agent: "main", SessionKey: "main/s1"}
	res, err := f.svc.Push(context.Background(), who, Desktop, jsonl(
		`{"version":"v0.9","createSurface":{"surfaceId":"n","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json","sendDataModel":true}}`,
		`{"version":"v0.9","updateComponents":{"surfaceId":"n","components":[{"id":"root","component":"Text","text":"a"}]}}`))
	if err != nil || res.Applied != 2 {
		t.Fatalf("push: %+v %v", res, err)
	}
	if _, err := f.svc.Push(context.Background(), who, Desktop, jsonl(formV08, beginV08)); err != nil {
		t.Fatal(err)
	}
	ui := f.ui()
	dm := map[string]any{"email": "ada@example.com", "seats": 2, "名字": "艾达"}
	call[ActionResult](t, ui, MethodAction, map[string]any{"surfaceId": "n", "componentId": "root", "name": "signup", "context": map[string]any{"seats": 2}, "dataModel": dm})
	waitFor(t, "the v0.9 action", func() bool { return len(f.chat.messages()) == 1 })
	blocks := jsonBlocks(f.chat.messages()[0].message)
	if len(blocks) != 2 {
		t.Fatalf("want the event and the data model, got %d blocks:\n%s", len(blocks), f.chat.messages()[0].message)
	}
	c := compileSchema(t, "v0_9/client_to_server.json")
	if err := c.Validate(decodeAny(t, blocks[0])); err != nil {
		t.Fatalf("the event is not v0.9 client_to_server: %v\n%s", err, blocks[0])
	}
	d := compileSchema(t, "v0_9/client_data_model.json")
	var wrapped map[string]json.RawMessage
	if err := json.Unmarshal([]byte(blocks[1]), &wrapped); err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(decodeAny(t, string(wrapped["a2uiClientDataModel"]))); err != nil {
		t.Fatalf("the data model is not v0.9 client_data_model: %v\n%s", err, blocks[1])
	}
	if !strings.Contains(blocks[1], `"名字": "艾达"`) {
		t.Fatalf("data model: %s", blocks[1])
	}
	// v0.8: userAction, no data model block.
	call[ActionResult](t, ui, MethodAction, map[string]any{"surfaceId": "form", "componentId": "ok", "name": "submit", "dataModel": dm})
	waitFor(t, "the v0.8 action", func() bool { return len(f.chat.messages()) == 2 })
	b8 := jsonBlocks(f.chat.messages()[1].message)
	if len(b8) != 1 || !strings.Contains(b8[0], `"userAction"`) {
		t.Fatalf("v0.8 action: %q", b8)
	}
	if e := callErr(ui, MethodAction, map[string]any{"surfaceId": "n", "componentId": "root", "name": "x", "dataModel": []int{1}}); e == nil || e.Code != gateway.CodeInvalidRequest {
		t.Fatalf("a data model that is an array: %v", e)
	}
}

// jsonBlocks are the ```json fenced blocks of a message, in order.
func jsonBlocks(msg string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(msg, "```json\n")
		if !ok {
			return out
		}
		block, after, _ := strings.Cut(rest, "\n```")
		out = append(out, block)
		msg = after
	}
}

// compileSchema compiles one shipped v0.9 schema file (name under the
// schemas' root, "v0_9/…") with every v0.9 file as a resource.
func compileSchema(t testing.TB, name string) *jsonschema.Schema {
	t.Helper()
	fsys := schemas(t)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	err := fs.WalkDir(fsys, "v0_9", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".json" {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return err
		}
		return c.AddResource(schema09Base+strings.TrimPrefix(p, "v0_9/"), doc)
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(schema09Base + strings.TrimPrefix(name, "v0_9/"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// decodeAny decodes JSON text for a jsonschema.Schema's Validate.
func decodeAny(t testing.TB, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}
