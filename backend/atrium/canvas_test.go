package atrium

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/gateway"
)

const canvasForm = `{"surfaceUpdate":{"surfaceId":"form","components":[{"id":"root","component":{"Column":{"children":{"explicitList":["name","ok"]}}}},` +
	`{"id":"name","component":{"TextField":{"label":{"literalString":"Name"},"text":{"path":"/form/name"}}}},` +
	`{"id":"okText","component":{"Text":{"text":{"literalString":"OK"}}}},` +
	`{"id":"ok","component":{"Button":{"child":"okText","action":{"name":"submit","context":[{"key":"name","value":{"path":"/form/name"}}]}}}}]}}` +
	"\n" + `{"beginRendering":{"surfaceId":"form","root":"root"}}`

// TestCanvasMethods is the principal matrix of canvas.* on the real app:
// the person (admin) and a phone scoped admin use the Canvas; a phone
// scoped below admin, a node (but for canvas.action on its own surfaces),
// a paired node and an unpaired device are refused FORBIDDEN and audited.
// A press on a surface the person pushed becomes a visible turn in profile
// main's session "canvas", with the form's values.
func TestCanvasMethods(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, scopeFiles)
	if a.Canvas == nil {
		t.Fatal("no Canvas in the app")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "canvas-admin")
	var push struct {
		Applied  int
		Rendered bool
		Reason   string
		Errors   []struct {
			Line   int
			Reason string
		}
	}
	must(t, admin.Call(ctx, "canvas.a2ui.push", map[string]any{"target": "desktop", "jsonl": canvasForm + "\n{\"nope\":1}"}, &push))
	if push.Applied != 2 || len(push.Errors) != 1 || push.Errors[0].Line != 3 || !strings.Contains(push.Errors[0].Reason, "unknown A2UI version") {
		t.Fatalf("push: %+v", push)
	}
	// The admin connection is a UI that does not answer canvas.update:
	// the push says so rather than claiming a render.
	if push.Rendered || push.Reason == "" {
		t.Fatalf("push rendered without an answer: %+v", push)
	}

	var state struct {
		Surfaces []struct {
			SurfaceID, SessionKey string
			Messages              []json.RawMessage
		}
	}
	must(t, admin.Call(ctx, "canvas.state", map[string]any{"target": "desktop"}, &state))
	if len(state.Surfaces) != 1 || state.Surfaces[0].SessionKey != "main/canvas" || len(state.Surfaces[0].Messages) != 2 {
		t.Fatalf("state: %+v", state)
	}

	// Everyone else.
	others := append([]principalConn{{gateway.LocalNode, gwDial(ctx, t, a, gateway.RoleNode, "canvas-node"), "authenticated"}},
		devicePrincipals(ctx, t, a)...)
	writerPhone, writerID := scopedPhone(ctx, t, a, admin, "role:writer")
	others = append(others, principalConn{gateway.OperatorDevice, writerPhone, "operator/device:" + writerID})
	calls := map[string]map[string]any{
		"canvas.a2ui.push":  {"target": "desktop", "jsonl": `{"deleteSurface":{"surfaceId":"form"}}`},
		"canvas.a2ui.reset": {"target": "desktop"},
		"canvas.present":    {"target": "desktop", "html": "<p>x</p>"},
		"canvas.navigate":   {"target": "desktop", "url": "https://example.com/"},
		"canvas.hide":       {"target": "desktop"},
		"canvas.snapshot":   {"target": "desktop"},
		"canvas.eval":       {"target": "desktop", "js": "1"},
		"canvas.state":      {"target": "desktop"},
		"canvas.rendered":   {"pushId": "x", "ok": true},
		"canvas.action":     {"target": "desktop", "surfaceId": "form", "componentId": "ok", "name": "submit"},
	}
	for _, pc := range others {
		for method, params := range calls {
			var leak map[string]any
			err := pc.cl.Call(ctx, method, params, &leak)
			if errCode(err) != gateway.CodeForbidden || len(leak) != 0 {
				t.Errorf("%s (%s) %s: %v %v, want FORBIDDEN", pc.class, pc.role, method, err, leak)
				continue
			}
			e, terr := a.Audit.Tail(1, audit.Filter{})
			if terr != nil || len(e) != 1 || e[0].Result != audit.Denied || e[0].Operation != method {
				t.Errorf("%s (%s) %s: audit %+v %v", pc.class, pc.role, method, e, terr)
			}
		}
	}
	must(t, admin.Call(ctx, "canvas.state", map[string]any{"target": "desktop"}, &state))
	if len(state.Surfaces) != 1 {
		t.Fatalf("a refused call changed the Canvas: %+v", state)
	}

	// A phone scoped admin is the person.
	adminPhone, _ := scopedPhone(ctx, t, a, admin, "admin")
	must(t, adminPhone.Call(ctx, "canvas.state", map[string]any{"target": "desktop"}, &state))
	if len(state.Surfaces) != 1 {
		t.Fatalf("admin phone state: %+v", state)
	}

	// The press: stored, acknowledged, a visible turn in main/canvas.
	var act struct {
		Accepted   bool
		SessionKey string
		ActionID   string
	}
	must(t, adminPhone.Call(ctx, "canvas.action", map[string]any{"surfaceId": "form", "componentId": "ok", "name": "submit",
		"context": map[string]any{"name": "Ada 艾达", "agree": true}}, &act))
	if !act.Accepted || act.SessionKey != "main/canvas" {
		t.Fatalf("action: %+v", act)
	}
	var page struct {
		Messages []struct{ Role, SessionID, Content string }
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		must(t, admin.Call(ctx, "history.profile", map[string]any{"profileId": "main", "limit": 50}, &page))
		found := false
		for _, m := range page.Messages {
			if m.Role == "user" && m.SessionID == "canvas" && strings.Contains(m.Content, `"name": "Ada 艾达"`) && strings.Contains(m.Content, `Canvas action "submit"`) {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the action never became a message: %+v", page)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCanvasPromptExample: the A2UI example the system prompt gives models
// is valid against the official schemas, line by line, and renders a
// surface with a root.
func TestCanvasPromptExample(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	var lines []json.RawMessage
	must(t, json.Unmarshal([]byte(chat.CanvasExample), &lines))
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		if _, err := a.Canvas.Validator().Check(i+1, l); err != nil {
			t.Errorf("the prompt's example: %v", err)
		}
	}
}

// TestOfflineCard: with no model configured, the offline provider's answer
// comes with a small A2UI card of what it found on the desktop Canvas,
// owned by the answer's session; the card's lines are valid.
func TestOfflineCard(t *testing.T) {
	a, _ := startApp(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "offline-card")
	must(t, admin.Call(ctx, "memory.sync", nil, nil))
	var sent struct{ SessionID string }
	must(t, admin.Call(ctx, "chat.send", map[string]any{"profileId": "main", "message": "When does the deploy key rotation happen?"}, &sent))
	want := OfflineCardSurface + sent.SessionID
	deadline := time.Now().Add(60 * time.Second)
	for {
		var state struct {
			Surfaces []struct {
				SurfaceID, SessionKey string
				Messages              []json.RawMessage
			}
		}
		must(t, admin.Call(ctx, "canvas.state", map[string]any{"target": "desktop"}, &state))
		if len(state.Surfaces) == 1 {
			s := state.Surfaces[0]
			all := ""
			for _, m := range s.Messages {
				all += string(m)
			}
			if s.SurfaceID != want || s.SessionKey != "main/"+sent.SessionID || !strings.Contains(all, "MEMORY.md:") ||
				!strings.Contains(all, "every Friday") || !strings.Contains(all, `"Card"`) {
				t.Fatalf("card: %+v\n%s", s, all)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no offline card: %+v", state)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Chinese question, Chinese card.
	jsonl := offlineCardJSONL(chat.OfflineCard{Query: "数据库", Chinese: true, Results: nil}, "x")
	if !strings.Contains(jsonl, "记忆中找到") {
		t.Fatalf("zh card: %s", jsonl)
	}
}
