package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

// gatewayCall opens its own operator connection to the app behind uiURL
// (http://127.0.0.1:port/#token=…), makes one request and returns the
// response payload; it fails the test on any error.
func gatewayCall(t *testing.T, uiURL, method string, params any) json.RawMessage {
	t.Helper()
	base, token, ok := strings.Cut(uiURL, "/#token=")
	if !ok {
		t.Fatalf("no token in %s", uiURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/ws", nil)
	if err != nil {
		t.Fatalf("dial gateway: %v", err)
	}
	defer c.Close(websocket.StatusNormalClosure, "")
	c.SetReadLimit(16 << 20)
	write := func(id, method string, params any) {
		b, _ := json.Marshal(map[string]any{"type": "req", "id": id, "method": method, "params": params})
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatalf("write %s: %v", method, err)
		}
	}
	read := func(id string) json.RawMessage {
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("read %s: %v", id, err)
			}
			var f struct {
				Type, ID string
				OK       bool
				Payload  json.RawMessage
				Error    json.RawMessage
			}
			_ = json.Unmarshal(data, &f)
			if f.Type == "res" && f.ID == id {
				if !f.OK {
					t.Fatalf("%s refused: %s", id, f.Error)
				}
				return f.Payload
			}
		}
	}
	write("c", "connect", map[string]any{
		"minProtocol": 1, "maxProtocol": 1, "role": "operator",
		"client": map[string]any{"id": "atrium-e2e", "version": "test", "platform": "linux", "mode": "test", "instanceId": "e2e"},
		"auth":   map[string]any{"token": token},
	})
	read("c")
	write("m", method, params)
	return read("m")
}

// TestUIDeleteInOneTab: a message deleted in one tab disappears from the
// other tab (message.deleted) and from history.profile.
func TestUIDeleteInOneTab(t *testing.T) {
	tab1, url := openUI(t, &scriptedModel{reply: "An answer that outlives its question.", delay: 10 * time.Millisecond})
	tab2, cancel2 := chromedp.NewContext(tab1) // a second tab in the same browser
	defer cancel2()
	if err := chromedp.Do(tab2, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate tab 2: %v", err)
	}
	waitFor(t, tab2, "tab 2 to connect", connected, 30*time.Second)

	const question = "A question to delete"
	// Actions wait for their element; bound them so a missing element
	// fails the test instead of hanging it.
	bounded := func(parent context.Context) context.Context {
		ctx, cancel := context.WithTimeout(parent, 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	if err := chromedp.Do(bounded(tab1),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=chat-input]`), question),
		chromedp.Click(chromedp.CSS(`[data-testid=chat-send]`)),
	); err != nil {
		t.Fatalf("send from tab 1: %v", err)
	}
	const final = `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.textContent.includes('outlives its question'))`
	const hasQuestion = `[...document.querySelectorAll('[data-testid=chat-message][data-role=user]')].some(e => e.textContent.includes('` + question + `'))`
	waitFor(t, tab1, "the final answer in tab 1", final, 20*time.Second)
	waitFor(t, tab2, "the question and final answer in tab 2", final+" && "+hasQuestion, 20*time.Second)

	id := js[string](t, tab1, `document.querySelector('[data-testid=chat-message][data-role=user]').dataset.messageId`)
	if id == "" {
		t.Fatal("the question has no message id in tab 1")
	}
	var page struct {
		Messages []struct{ ID string } `json:"messages"`
	}
	if err := json.Unmarshal(gatewayCall(t, url, "history.profile", map[string]any{"profileId": "main", "limit": 50}), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 || page.Messages[0].ID != id {
		t.Fatalf("history.profile before the delete = %+v, want the question %s and its answer", page.Messages, id)
	}

	if err := chromedp.Do(bounded(tab1), chromedp.Click(chromedp.CSS(`[data-testid=chat-message][data-message-id="`+id+`"] [data-testid=chat-delete]`))); err != nil {
		t.Fatalf("click delete in tab 1: %v", err)
	}
	waitFor(t, tab1, "the question to go from tab 1", "!("+hasQuestion+")", 10*time.Second)
	waitFor(t, tab2, "the question to go from tab 2", "!("+hasQuestion+")", 10*time.Second)
	if !js[bool](t, tab2, final) {
		t.Error("tab 2 lost the answer too; only the question was deleted")
	}

	page.Messages = nil
	if err := json.Unmarshal(gatewayCall(t, url, "history.profile", map[string]any{"profileId": "main", "limit": 50}), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 1 || page.Messages[0].ID == id {
		t.Fatalf("history.profile after the delete = %+v, want only the answer", page.Messages)
	}

	// A reload (local cache + history) does not bring it back.
	if err := chromedp.Do(tab2, chromedp.Reload()); err != nil {
		t.Fatalf("reload tab 2: %v", err)
	}
	waitFor(t, tab2, "tab 2 to reconnect with the answer", connected+" && "+final, 30*time.Second)
	if js[bool](t, tab2, hasQuestion) {
		t.Error("the deleted question came back after a reload")
	}
}
