package model

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// testPNG returns a small real PNG.
func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// toolImageConversation is a run after the model called a tool that
// returned a photo, with a second call in the same round without one: the
// next request must carry the photo.
func toolImageConversation(path string) []Message {
	return []Message{
		{Role: RoleSystem, Content: "sys"},
		{Role: RoleUser, Content: "look out of the window"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{
			{ID: "call_a", Name: "nodes", Arguments: json.RawMessage(`{"action":"invoke","command":"camera.snap"}`)},
			{ID: "call_b", Name: "nodes", Arguments: json.RawMessage(`{"action":"list"}`)},
		}},
		{Role: RoleTool, ToolCallID: "call_a", Name: "nodes", Content: `{"status":"ok"}`, Images: []Image{{Path: path, MIME: "image/png"}}},
		{Role: RoleTool, ToolCallID: "call_b", Name: "nodes", Content: `{"status":"ok","data":[]}`},
	}
}

func writePNG(t *testing.T) (string, []byte) {
	t.Helper()
	data := testPNG(t)
	path := filepath.Join(t.TempDir(), "snap.png")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// TestOpenAIToolImageShape: the tool message keeps its text (the API
// takes no images there), and a user message with an image_url data URL
// follows the last tool message of the round, not before.
func TestOpenAIToolImageShape(t *testing.T) {
	for _, provider := range []string{ProviderOpenAI, ProviderOllama} {
		t.Run(provider, func(t *testing.T) {
			s := newScripted(t, modeltest.Turns(modeltest.Turn{Text: "a garden"})...)
			v := true
			p, err := FromConfig(Config{Provider: provider, BaseURL: s.BaseURL(), Model: "m", Vision: &v}, OpenAIOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !TakesImages(p) {
				t.Fatal("vision: true in the config, but TakesImages says no")
			}
			path, data := writePNG(t)
			if _, err := p.Stream(context.Background(), Request{Messages: toolImageConversation(path)}, nil); err != nil {
				t.Fatal(err)
			}
			msgs := s.request(0).Messages()
			if len(msgs) != 6 {
				t.Fatalf("want 6 messages (system, user, assistant, tool, tool, user with the image), got %d: %s", len(msgs), s.Body(0))
			}
			for i, role := range []string{"system", "user", "assistant", "tool", "tool", "user"} {
				if msgs[i]["role"] != role {
					t.Fatalf("message %d is %v, want %s: %s", i, msgs[i]["role"], role, s.Body(0))
				}
			}
			if c, ok := msgs[3]["content"].(string); !ok || c != `{"status":"ok"}` {
				t.Fatalf("the tool message must keep its text content, got %#v", msgs[3]["content"])
			}
			parts, ok := msgs[5]["content"].([]any)
			if !ok || len(parts) != 2 {
				t.Fatalf("the image message's content: %#v", msgs[5]["content"])
			}
			text := parts[0].(map[string]any)
			if text["type"] != "text" || !strings.Contains(text["text"].(string), "call_a") {
				t.Fatalf("first part: %#v", text)
			}
			img := parts[1].(map[string]any)
			want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)
			if img["type"] != "image_url" || img["image_url"].(map[string]any)["url"] != want {
				t.Fatalf("image part: %#v", img)
			}
		})
	}
}

func TestOpenAIUserImageShape(t *testing.T) {
	s := newScripted(t, modeltest.Turns(modeltest.Turn{Text: "ok"})...)
	data := testPNG(t)
	// A wrong stated type is corrected from the bytes.
	msgs := []Message{{Role: RoleUser, Content: "what is this?", Images: []Image{{Data: data, MIME: "image/jpeg"}}}}
	if _, err := s.client(OpenAIOptions{}).Stream(context.Background(), Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	parts := s.request(0).Messages()[0]["content"].([]any)
	if parts[0].(map[string]any)["text"] != "what is this?" {
		t.Fatalf("text part: %#v", parts[0])
	}
	url := parts[1].(map[string]any)["image_url"].(map[string]any)["url"].(string)
	if url != "data:image/png;base64,"+base64.StdEncoding.EncodeToString(data) {
		t.Fatalf("url %.60s…", url)
	}
}

// TestAnthropicToolImageShape: the photo travels inside the tool_result
// block as an image block with a base64 source.
func TestAnthropicToolImageShape(t *testing.T) {
	s := newAntScripted(t, modeltest.AnthropicTurns(modeltest.Turn{Text: "a garden"})...)
	path, data := writePNG(t)
	c := s.client(AnthropicOptions{Vision: true})
	if !TakesImages(c) {
		t.Fatal("TakesImages: no")
	}
	resp, err := c.Stream(context.Background(), Request{Messages: toolImageConversation(path)}, nil)
	if err != nil || resp.Content != "a garden" {
		t.Fatalf("%q %v", resp.Content, err)
	}
	msgs := s.request(0).Messages()
	if len(msgs) != 3 {
		t.Fatalf("want user, assistant, user (tool results): %s", s.Body(0))
	}
	blocks := msgs[2]["content"].([]any)
	if len(blocks) != 2 {
		t.Fatalf("want two tool_result blocks: %#v", blocks)
	}
	first := blocks[0].(map[string]any)
	if first["type"] != "tool_result" || first["tool_use_id"] != "call_a" {
		t.Fatalf("first block: %#v", first)
	}
	inner, ok := first["content"].([]any)
	if !ok || len(inner) != 2 {
		t.Fatalf("tool_result content must be [text, image]: %#v", first["content"])
	}
	if tb := inner[0].(map[string]any); tb["type"] != "text" || tb["text"] != `{"status":"ok"}` {
		t.Fatalf("text block: %#v", tb)
	}
	ib := inner[1].(map[string]any)
	src := ib["source"].(map[string]any)
	if ib["type"] != "image" || src["type"] != "base64" || src["media_type"] != "image/png" || src["data"] != base64.StdEncoding.EncodeToString(data) {
		t.Fatalf("image block: type %v source %v %v", ib["type"], src["type"], src["media_type"])
	}
	if second := blocks[1].(map[string]any); second["content"] != `{"status":"ok","data":[]}` {
		t.Fatalf("a tool result without an image keeps its text content: %#v", second["content"])
	}
}

func TestAnthropicUserImageShape(t *testing.T) {
	s := newAntScripted(t, modeltest.AnthropicTurns(modeltest.Turn{Text: "ok"})...)
	data := testPNG(t)
	msgs := []Message{{Role: RoleUser, Content: "what is this?", Images: []Image{{Data: data}}}}
	if _, err := s.client(AnthropicOptions{}).Stream(context.Background(), Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	blocks := s.request(0).Messages()[0]["content"].([]any)
	if len(blocks) != 2 || blocks[0].(map[string]any)["type"] != "image" || blocks[1].(map[string]any)["text"] != "what is this?" {
		t.Fatalf("want [image, text]: %s", s.Body(0))
	}
}

// TestImageBounds: an oversize image, too many images, a file that is no
// image or cannot be read, and an image on an assistant turn are refused
// with ErrImage before anything is sent, for both API shapes.
func TestImageBounds(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.jpg")
	// Over the cap once base64-encoded: 3/4 of it plus one byte.
	bigData := append([]byte{0xFF, 0xD8, 0xFF, 0xE0}, make([]byte, MaxImageBase64Bytes/4*3)...)
	if err := os.WriteFile(big, bigData, 0o600); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("hello, not an image"), 0o600); err != nil {
		t.Fatal(err)
	}
	small := testPNG(t)
	many := make([]Image, MaxImagesPerRequest+1)
	for i := range many {
		many[i] = Image{Data: small}
	}
	cases := []struct {
		name string
		msgs []Message
		want string
	}{
		{"oversize", []Message{{Role: RoleUser, Content: "x", Images: []Image{{Path: big}}}}, "too large"},
		{"too many", []Message{{Role: RoleUser, Content: "x", Images: many}}, "at most"},
		{"not an image", []Message{{Role: RoleUser, Content: "x", Images: []Image{{Path: text}}}}, "not an image"},
		{"missing file", []Message{{Role: RoleUser, Content: "x", Images: []Image{{Path: filepath.Join(dir, "gone.png")}}}}, "cannot read"},
		{"assistant", []Message{{Role: RoleUser, Content: "x"}, {Role: RoleAssistant, Content: "y", Images: []Image{{Data: small}}}}, "assistant"},
	}
	for _, tc := range cases {
		for _, api := range []string{"openai", "anthropic"} {
			t.Run(tc.name+"/"+api, func(t *testing.T) {
				var p Provider
				var count func() int
				if api == "openai" {
					s := newScripted(t, func(w http.ResponseWriter, r *http.Request) {})
					p, count = s.client(OpenAIOptions{Vision: true}), s.Count
				} else {
					s := newAntScripted(t, func(w http.ResponseWriter, r *http.Request) {})
					p, count = s.client(AnthropicOptions{Vision: true}), s.Count
				}
				_, err := p.Stream(context.Background(), Request{Messages: tc.msgs}, nil)
				if !errors.Is(err, ErrImage) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("want ErrImage saying %q, got %v", tc.want, err)
				}
				if count() != 0 {
					t.Fatal("a request was sent")
				}
			})
		}
	}
}

// TestDetectVision: config wins; Ollama's /api/show capabilities; a model
// list entry that says (OpenRouter's architecture.input_modalities, a
// capabilities list); OpenAI's plain list is unknown; offline is no.
func TestDetectVision(t *testing.T) {
	yes, no := true, false
	if got := DetectVision(context.Background(), Config{Provider: ProviderOpenAI, Model: "m", Vision: &yes}, DetectOptions{}); got != (VisionInfo{VisionYes, VisionFromConfig}) {
		t.Fatalf("config true: %+v", got)
	}
	if got := DetectVision(context.Background(), Config{Provider: ProviderOllama, Model: "m", Vision: &no}, DetectOptions{}); got != (VisionInfo{VisionNo, VisionFromConfig}) {
		t.Fatalf("config false: %+v", got)
	}
	if got := DetectVision(context.Background(), Config{Provider: ProviderOffline}, DetectOptions{}); got.Vision != VisionNo {
		t.Fatalf("offline: %+v", got)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch req.Model {
		case "llava:7b":
			_, _ = w.Write([]byte(`{"capabilities":["completion","vision"]}`))
		case "llama3.2":
			_, _ = w.Write([]byte(`{"capabilities":["completion","tools"]}`))
		default:
			_, _ = w.Write([]byte(`{"details":{}}`)) // an older Ollama: no capabilities
		}
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"data":[{"id":"gpt-x","object":"model"},` +
			`{"id":"router/vl","architecture":{"input_modalities":["text","image"]}},` +
			`{"id":"router/text","architecture":{"input_modalities":["text"]}},` +
			`{"id":"caps","capabilities":["vision","tools"]}]}`))
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	srv := hs.URL
	cases := []struct {
		cfg  Config
		want Support
	}{
		{Config{Provider: ProviderOllama, BaseURL: srv + "/v1", Model: "llava:7b"}, VisionYes},
		{Config{Provider: ProviderOllama, BaseURL: srv, Model: "llama3.2"}, VisionNo},
		{Config{Provider: ProviderOllama, BaseURL: srv, Model: "old"}, VisionUnknown},
		{Config{Provider: ProviderOpenAI, BaseURL: srv + "/v1", Model: "router/vl"}, VisionYes},
		{Config{Provider: ProviderOpenAI, BaseURL: srv + "/v1", Model: "router/text"}, VisionNo},
		{Config{Provider: ProviderOpenAI, BaseURL: srv + "/v1", Model: "caps"}, VisionYes},
		{Config{Provider: ProviderOpenAI, BaseURL: srv + "/v1", Model: "gpt-x"}, VisionUnknown},
		{Config{Provider: ProviderOpenAI, BaseURL: srv + "/v1", Model: "not-listed"}, VisionUnknown},
		{Config{Provider: ProviderAnthropic, BaseURL: srv, Model: "caps"}, VisionYes},
	}
	for _, tc := range cases {
		if got := DetectVision(context.Background(), tc.cfg, DetectOptions{}); got.Vision != tc.want {
			t.Errorf("%s %s: %+v, want %s", tc.cfg.Provider, tc.cfg.Model, got, tc.want)
		}
	}
	// What the server says reaches the client.
	cfg := WithVision(Config{Provider: ProviderOllama, BaseURL: srv + "/v1", Model: "llava:7b"},
		DetectVision(context.Background(), Config{Provider: ProviderOllama, BaseURL: srv, Model: "llava:7b"}, DetectOptions{}))
	p, err := FromConfig(cfg, OpenAIOptions{})
	if err != nil || !TakesImages(p) {
		t.Fatalf("server-detected vision does not reach the client: %v", err)
	}
	if p, _ := FromConfig(Config{Provider: ProviderOpenAI, Model: "gpt-x"}, OpenAIOptions{}); TakesImages(p) {
		t.Fatal("unknown vision must not take images")
	}
}

// TestProfileVision: a profile on another model does not inherit the
// app model's vision; its own config.json vision applies.
func TestProfileVision(t *testing.T) {
	yes, no := true, false
	base := Config{Provider: ProviderOllama, BaseURL: DefaultOllamaURL + "/v1", Model: "llava", Vision: &yes}
	out, _, err := ForProfile(base, ProfileSettings{Role: "r", Markdown: Override{Model: "llama3.2"}}, nil)
	if err != nil || out.Vision != nil {
		t.Fatalf("another model kept the base's vision: %v %v", out.Vision, err)
	}
	out, _, err = ForProfile(base, ProfileSettings{Role: "r", Config: Config{Vision: &no}}, nil)
	if err != nil || out.Vision == nil || *out.Vision {
		t.Fatalf("profile vision false: %v %v", out.Vision, err)
	}
}

// TestFitImages: past the cap, the oldest messages' images give way, and
// their text names the files left out.
func TestFitImages(t *testing.T) {
	var msgs []Message
	for i := 0; i < MaxImagesPerRequest+2; i++ {
		msgs = append(msgs, Message{Role: RoleUser, Content: "m", Images: []Image{{Path: filepath.Join("p", string(rune('a'+i)))}}})
	}
	out := FitImages(msgs)
	n := 0
	for _, m := range out {
		n += len(m.Images)
	}
	if n != MaxImagesPerRequest || len(out[0].Images) != 0 || len(out[1].Images) != 0 || len(out[2].Images) != 1 {
		t.Fatalf("kept %d images; first three messages: %d %d %d", n, len(out[0].Images), len(out[1].Images), len(out[2].Images))
	}
	if !strings.Contains(out[0].Content, filepath.Join("p", "a")) || len(msgs[0].Images) != 1 {
		t.Fatalf("the note names the file, and the input is unchanged: %q", out[0].Content)
	}
	if few := msgs[:3]; &FitImages(few)[0] != &few[0] {
		t.Fatal("under the cap the messages come back as they are")
	}
}
