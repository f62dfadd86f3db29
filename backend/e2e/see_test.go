package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"image/jpeg"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// seeModel is a scripted model server of one API shape ("openai",
// "anthropic" or "ollama": Ollama is reached through its OpenAI-compatible
// /v1). The person's latest message picks a script (by a text it
// contains): until a tool result follows that message, the model calls the
// script's tool (camera_snap {} for "look out of the window": the seed's
// example in one call); then it streams the script's reply. It records
// every request's body.
type seeModel struct {
	api     string
	scripts []seeScript

	mu     sync.Mutex
	bodies [][]byte
}

// seeScript is what the model does when the person's message contains
// Prompt: call Tool with Args, then answer Reply.
type seeScript struct{ Prompt, Tool, Args, Reply string }

func (m *seeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := modeltest.ChatPath
	if m.api == "anthropic" {
		path = modeltest.AnthropicPath
	}
	if r.Method != http.MethodPost || r.URL.Path != path {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read the body", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.bodies = append(m.bodies, body)
	m.mu.Unlock()
	sc, answered := m.state(body)
	turn := modeltest.Turn{Text: "I do not know what to do."}
	switch {
	case sc != nil && answered:
		turn = modeltest.Turn{Text: sc.Reply}
	case sc != nil:
		turn = modeltest.Turn{Calls: [][2]string{{sc.Tool, sc.Args}}}
	}
	if m.api == "anthropic" {
		modeltest.AnthropicTurns(turn)[0](w, r)
		return
	}
	modeltest.Turns(turn)[0](w, r)
}

// state reads a request's conversation: the script of the person's latest
// message that has one (nil: none) and whether a tool result (an
// OpenAI-compatible tool message, an Anthropic tool_result block) follows
// that message.
func (m *seeModel) state(body []byte) (*seeScript, bool) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil, false
	}
	var sc *seeScript
	answered := false
	for _, msg := range req.Messages {
		var text string
		var parts []struct{ Type, Text string }
		if json.Unmarshal(msg.Content, &text) != nil && json.Unmarshal(msg.Content, &parts) == nil {
			for _, p := range parts {
				text += p.Text
				answered = answered || p.Type == "tool_result"
			}
		}
		answered = answered || msg.Role == "tool"
		if msg.Role != "user" {
			continue
		}
		for i := range m.scripts {
			if strings.Contains(text, m.scripts[i].Prompt) {
				sc, answered = &m.scripts[i], false
			}
		}
	}
	return sc, answered
}

// answered is the body of the first request that carries the result of
// the tool the person's message containing prompt asked for, or nil.
func (m *seeModel) answered(prompt string) []byte {
	m.mu.Lock()
	bodies := append([][]byte(nil), m.bodies...)
	m.mu.Unlock()
	for _, b := range bodies {
		if sc, ok := m.state(b); ok && sc.Prompt == prompt {
			return b
		}
	}
	return nil
}

// first is the body of the first request, or nil.
func (m *seeModel) first() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.bodies) == 0 {
		return nil
	}
	return m.bodies[0]
}

// TestAgentLooksOutOfTheWindow (issue 22 item 6, the seed's example end to
// end): the real app with a scripted model of each API shape
// (OpenAI-compatible, Anthropic, Ollama), a paired phone Chromium with a
// fake camera, and the desktop UI in another Chromium. The person types
// "look out of the window"; the model calls camera_snap {}; the desktop
// asks and the person clicks Allow; the phone takes the photo and sends
// it over WebRTC; the next model request carries it in that API's shape,
// its bytes' SHA-256 equal to the stored file's and the page's; the
// answer streams into the chat, which shows the photo inline at its
// natural size. A model configured without vision gets the photo's path
// and details as text and no image.
func TestAgentLooksOutOfTheWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	for _, tc := range []struct {
		name, api string
		vision    bool
	}{{"openai", "openai", true}, {"anthropic", "anthropic", true}, {"ollama", "ollama", true}, {"openai-without-vision", "openai", false}} {
		t.Run(tc.name, func(t *testing.T) { lookOutOfTheWindow(t, chromium, tc.api, tc.vision) })
	}
}

func lookOutOfTheWindow(t *testing.T, chromium, api string, vision bool) {
	const look = "look out of the window"
	reply := "Out of the window: a green test picture with a moving circle. 窗外是一张绿色的测试画面。"
	mdl := &seeModel{api: api, scripts: []seeScript{
		{Prompt: look, Tool: "camera_snap", Args: `{}`, Reply: reply},
		{Prompt: whereIsThePhone, Tool: "location_get", Args: `{}`, Reply: locationOffReply},
	}}
	srv := httptest.NewServer(mdl)
	t.Cleanup(srv.Close)
	cfg := map[string]any{"provider": api, "baseUrl": srv.URL, "apiKey": "k-e2e", "model": "scripted-vision", "vision": vision}
	switch api {
	case "openai":
		cfg["baseUrl"] = srv.URL + "/v1"
	case "ollama":
		delete(cfg, "apiKey")
	}
	tmp := t.TempDir()
	g := startMediaGatewayWith(t, tmp, func(home string) {
		b, err := json.Marshal(map[string]any{"model": cfg})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, "config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	phone, deviceID := g.pairBrowser(t, chromium, filepath.Join(tmp, "phone"), []string{"camera.snap"}, []string{"camera"},
		chromedp.UserAgent(phoneUA), chromedp.WindowSize(412, 915))

	desktop := newBrowser(t, chromium, filepath.Join(tmp, "desktop"))
	if err := chromedp.Do(desktop, chromedp.Navigate(g.uiURL)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	waitFor(t, desktop, "the UI to connect", connected, 30*time.Second)
	sendChat(t, desktop, look)

	// The person is asked on the desktop, and allows it.
	waitFor(t, desktop, "the question for camera_snap",
		`document.querySelector('[data-testid=permission-prompt] [data-testid=permission-tool]')?.textContent === 'camera_snap'`, 60*time.Second)
	prompt := js[string](t, desktop, `document.querySelector('[data-testid=permission-prompt]').innerText`)
	for _, want := range []string{"camera.snap", deviceID, "back camera", "for this call only"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the question does not say %q:\n%s", want, prompt)
		}
	}
	if overflow := js[[]int](t, desktop, `[...document.querySelectorAll('[data-testid=permission-prompt] *')].filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'auto').map(e => e.scrollWidth - e.clientWidth)`); len(overflow) > 0 {
		t.Errorf("the question's text runs out of its box (by %v px)", overflow)
	}
	shot(t, desktop, "see-ask-en-desktop.png")
	click(t, desktop, `[data-testid=permission-allow]`)
	waitFor(t, desktop, "the question to close", `!document.querySelector('[data-testid=permission-prompt]')`, 10*time.Second)

	// The answer streams in and the photo shows inline.
	q, _ := json.Marshal(reply)
	waitFor(t, desktop, "the model's answer in the chat",
		`[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.textContent.includes(`+string(q)+`))`, 90*time.Second)
	const img = `document.querySelector('[data-testid=chat-message][data-role=assistant] [data-testid=chat-image] img')`
	waitFor(t, desktop, "the photo in the chat", `!!`+img+` && `+img+`.complete && `+img+`.naturalWidth > 0`, 30*time.Second)
	mediaID := js[string](t, desktop, `document.querySelector('[data-testid=chat-image]').dataset.mediaId`)
	natural := js[[]int](t, desktop, `[`+img+`.naturalWidth, `+img+`.naturalHeight]`)

	// The stored photo: the page's bytes, the size the chat shows.
	waitFor(t, phone, "the phone to show the photo it sent", `!!document.querySelector('[data-testid=phone-last-photo]')`, 10*time.Second)
	pageSum := js[string](t, phone, `document.querySelector('[data-testid=phone-last-photo]').dataset.sha256`)
	var side struct {
		File, MIME, Command, Device string
		SHA256                      string `json:"sha256"`
		Width, Height               int
	}
	raw, err := os.ReadFile(filepath.Join(g.home, "media", mediaID+".json"))
	if err != nil || json.Unmarshal(raw, &side) != nil {
		t.Fatalf("the photo's sidecar %s: %v", raw, err)
	}
	photo, err := os.ReadFile(filepath.Join(g.home, "media", side.File))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(photo)
	stored := hex.EncodeToString(sum[:])
	if stored != pageSum || side.SHA256 != stored || side.Command != "camera.snap" || side.Device != deviceID || side.MIME != "image/jpeg" {
		t.Fatalf("the stored photo's SHA-256 %s, the page's %s; sidecar %+v", stored, pageSum, side)
	}
	dim, err := jpeg.DecodeConfig(bytes.NewReader(photo))
	if err != nil {
		t.Fatalf("the stored photo is no JPEG: %v", err)
	}
	if len(natural) != 2 || natural[0] != dim.Width || natural[1] != dim.Height || side.Width != dim.Width || side.Height != dim.Height {
		t.Fatalf("the chat's photo is %v, the file %d×%d, the sidecar %d×%d", natural, dim.Width, dim.Height, side.Width, side.Height)
	}

	askWhereThePhoneIs(t, desktop, phone, mdl)

	// The model requests.
	if first := mdl.first(); !bytes.Contains(first, []byte(`"camera_snap"`)) || !bytes.Contains(first, []byte("look out of the window")) {
		t.Fatalf("the first request offers no camera_snap: %.600s", first)
	}
	body := mdl.answered(look)
	if body == nil {
		t.Fatal("no model request carried the tool's result")
	}
	sent := sentImages(t, api, body)
	if !vision {
		if len(sent) != 0 || bytes.Contains(body, []byte("data:image")) || bytes.Contains(body, []byte(`"image_url"`)) {
			t.Fatalf("a model without vision was sent the picture: %.800s", body)
		}
		tool := toolText(t, body)
		for _, want := range []string{filepath.Join(g.home, "media", side.File), `"mime":"image/jpeg"`, `"attached":false`, "does not take images",
			`"width":` + itoa(dim.Width), `"height":` + itoa(dim.Height), `"bytes":` + itoa(len(photo))} {
			if !strings.Contains(tool, want) {
				t.Errorf("the tool result the model read lacks %s:\n%s", want, tool)
			}
		}
		return
	}
	if api == "openai" {
		phoneShowsThePhoto(t, g, desktop, phone, deviceID, mediaID, dim.Width, dim.Height)
	}
	if len(sent) != 1 {
		t.Fatalf("%d images in the request after the photo, want 1: %.800s", len(sent), body)
	}
	got := sha256.Sum256(sent[0])
	if hex.EncodeToString(got[:]) != stored {
		t.Fatalf("the image the model got (%d bytes) is not the stored photo (%d bytes)", len(sent[0]), len(photo))
	}
	t.Logf("%s: photo %s %d×%d, %d bytes, in the request as this API's image", api, mediaID, dim.Width, dim.Height, len(photo))
}

// The second message of the e2e: the phone's location, which is off.
const (
	whereIsThePhone  = "where is the phone?"
	locationOffReply = "The phone's location is off; its person can turn it on. 手机的位置是关闭的。"
)

// askWhereThePhoneIs: the person asks where the phone is; the model calls
// location_get {}; the person allows it on the desktop; the phone, whose
// location is off (as it is until its person turns it on), refuses; the
// model's next request carries a denial in the phone's own words, the chat
// shows the call denied and the model's answer.
func askWhereThePhoneIs(t *testing.T, desktop, phone context.Context, mdl *seeModel) {
	t.Helper()
	sendChat(t, desktop, whereIsThePhone)
	waitFor(t, desktop, "the question for location_get",
		`document.querySelector('[data-testid=permission-prompt] [data-testid=permission-tool]')?.textContent === 'location_get'`, 60*time.Second)
	click(t, desktop, `[data-testid=permission-allow]`)
	q, _ := json.Marshal(locationOffReply)
	waitFor(t, desktop, "the model's answer about the location",
		`[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant][data-state=final]')].some(e => e.textContent.includes(`+string(q)+`))`, 90*time.Second)
	waitFor(t, desktop, "the location_get call shown as denied",
		`[...document.querySelectorAll('[data-testid=chat-tool]')].some(e => e.dataset.status === 'denied' && e.textContent.includes('location_get'))`, 10*time.Second)
	waitFor(t, phone, "the phone's record of its refusal",
		`document.querySelector('[data-testid=phone-last-invoke]')?.dataset.command === 'location.get' && document.querySelector('[data-testid=phone-last-invoke]')?.dataset.ok === 'false'`, 10*time.Second)
	body := mdl.answered(whereIsThePhone)
	for _, want := range []string{`status\":\"denied`, "location.get on ", "FORBIDDEN: location is off on this device: its person can turn it on"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("the model was not told %s: %.1500s", want, body)
		}
	}
}

// phoneShowsThePhoto: the phone, scoped admin by the person (its chat UI
// then shows main's conversation and may read media), shows the same photo
// inline at its natural size. With $ATRIUM_E2E_OUT set, the chat with the
// photo is saved in English and Chinese, on the desktop and the phone
// (see-chat-{en,zh}-{desktop,phone}.png).
func phoneShowsThePhoto(t *testing.T, g *mediaGateway, desktop, phone context.Context, deviceID, mediaID string, w, h int) {
	t.Helper()
	g.admin.call("device.scope.set", map[string]any{"deviceId": deviceID, "scope": "admin"})
	sel := `document.querySelector('[data-testid=chat-image][data-media-id="` + mediaID + `"] img')`
	waitFor(t, phone, "the photo in the phone's chat", `!!`+sel+` && `+sel+`.complete && `+sel+`.naturalWidth > 0`, 30*time.Second)
	if got := js[[]int](t, phone, `[`+sel+`.naturalWidth, `+sel+`.naturalHeight]`); len(got) != 2 || got[0] != w || got[1] != h {
		t.Fatalf("the phone's chat shows the photo at %v, want %d×%d", got, w, h)
	}
	if js[float64](t, phone, sel+`.getBoundingClientRect().width`) > 412 {
		t.Errorf("the photo is wider than the phone's screen")
	}
	for _, l := range []string{"en", "zh"} {
		for _, tab := range []struct {
			name string
			ctx  context.Context
		}{{"desktop", desktop}, {"phone", phone}} {
			js[bool](t, tab.ctx, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = '`+l+`'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
			waitFor(t, tab.ctx, "the UI in "+l, `document.querySelector('[data-testid=lang-select]').value === '`+l+`'`, 10*time.Second)
			js[bool](t, tab.ctx, `(`+sel+`.scrollIntoView({block: 'center'}), true)`)
			shot(t, tab.ctx, "see-chat-"+l+"-"+tab.name+".png")
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// sentImages are the JPEG images in a model request body, in the shape of
// api: OpenAI-compatible and Ollama (/v1) a user message's image_url part
// with a data URL; Anthropic an image block (base64 source) inside the
// tool_result. An image in any other place fails the test.
func sentImages(t *testing.T, api string, body []byte) [][]byte {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("the request body: %v", err)
	}
	type part struct {
		Type     string `json:"type"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
		Source *struct {
			Type, Data string
			MediaType  string `json:"media_type"`
		} `json:"source"`
		Content json.RawMessage `json:"content"`
	}
	decode := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("an image's base64: %v", err)
		}
		return b
	}
	var out [][]byte
	for _, m := range req.Messages {
		var parts []part
		if json.Unmarshal(m.Content, &parts) != nil {
			continue // a string
		}
		for _, p := range parts {
			switch {
			case api != "anthropic" && p.Type == "image_url":
				u, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/jpeg;base64,")
				if m.Role != "user" || !ok {
					t.Fatalf("an image_url in a %s message, or not a JPEG data URL: %.80s", m.Role, p.ImageURL.URL)
				}
				out = append(out, decode(u))
			case api == "anthropic" && p.Type == "tool_result":
				var inner []part
				_ = json.Unmarshal(p.Content, &inner)
				for _, ip := range inner {
					if ip.Type == "image" {
						if ip.Source == nil || ip.Source.Type != "base64" || ip.Source.MediaType != "image/jpeg" {
							t.Fatalf("an image block %+v", ip.Source)
						}
						out = append(out, decode(ip.Source.Data))
					}
				}
			case p.Type == "image" || p.Type == "image_url":
				t.Fatalf("an image part %q outside its place for %s", p.Type, api)
			}
		}
	}
	return out
}

// toolText is the text of the tool result in an OpenAI-compatible request
// (the tool message's content).
func toolText(t *testing.T, body []byte) string {
	t.Helper()
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			s, _ := m.Content.(string)
			return s
		}
	}
	t.Fatalf("no tool message in %.600s", body)
	return ""
}
