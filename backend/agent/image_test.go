package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// snapRegistry has "snap" (L0), which returns the picture at path.
func snapRegistry(t *testing.T, path string) *Registry {
	t.Helper()
	r := NewRegistry()
	err := r.Register(Spec{Name: "snap", Level: L0, Schema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, c Call) (Output, error) {
			return Output{Data: map[string]any{"taken": true}, LogSummary: "1 photo",
				Images: []Image{{Path: path, MIME: "image/jpeg", Width: 8, Height: 6, Bytes: 1234, MediaID: "m1"}}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func writeJPEG(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 6)), nil); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "photo.jpg")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, b.Bytes()
}

// TestToolImageReachesTheModel: the model calls a tool whose result is a
// photo; the NEXT request carries it in the API's own shape — OpenAI and
// Ollama (its OpenAI-compatible /v1, the only way Atrium talks to Ollama):
// the tool message's text and then a user message with an image_url data
// URL; Anthropic: an image block inside the tool_result.
func TestToolImageReachesTheModel(t *testing.T) {
	path, data := writeJPEG(t, t.TempDir())
	b64 := base64.StdEncoding.EncodeToString(data)
	yes := true
	turns := []modeltest.Turn{{Calls: [][2]string{{"snap", `{}`}}}, {Text: "I see a grey square."}}
	for _, provider := range []string{model.ProviderOpenAI, model.ProviderOllama, model.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			var srv *modeltest.Server
			cfg := model.Config{Provider: provider, Model: "vision-model", Vision: &yes}
			if provider == model.ProviderAnthropic {
				srv = modeltest.New(t, modeltest.Options{Path: modeltest.AnthropicPath}, modeltest.AnthropicTurns(turns...)...)
				cfg.BaseURL = srv.URL
			} else {
				srv = modeltest.New(t, modeltest.Options{}, modeltest.Turns(turns...)...)
				cfg.BaseURL = srv.BaseURL()
			}
			p, err := model.FromConfig(cfg, model.OpenAIOptions{})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := newAgent(t, Options{Provider: p, Tools: snapRegistry(t, path)})
			rep, err := a.Run(context.Background(), Task{Input: "look out of the window"})
			if err != nil || rep.Text != "I see a grey square." {
				t.Fatalf("%q %v", rep.Text, err)
			}
			if len(rep.Results) != 1 || len(rep.Results[0].Images) != 1 || rep.Results[0].Images[0].Path != path {
				t.Fatalf("the result must keep the image reference: %+v", rep.Results)
			}
			if strings.Contains(string(mustJSON(t, rep.Transcript)), b64) {
				t.Fatal("the transcript holds the image's bytes; it must hold the reference only")
			}
			if strings.Contains(srv.Body(0), b64) {
				t.Fatal("the first request already carries the image")
			}
			msgs := srv.Request(1).Messages()
			last := msgs[len(msgs)-1]
			if provider == model.ProviderAnthropic {
				tr := last["content"].([]any)[0].(map[string]any)
				inner, ok := tr["content"].([]any)
				if tr["type"] != "tool_result" || !ok || len(inner) != 2 {
					t.Fatalf("want a tool_result with [text, image]: %.400s", srv.Body(1))
				}
				img := inner[1].(map[string]any)
				src := img["source"].(map[string]any)
				if img["type"] != "image" || src["type"] != "base64" || src["media_type"] != "image/jpeg" || src["data"] != b64 {
					t.Fatalf("image block: %v %v %v", img["type"], src["type"], src["media_type"])
				}
				if !strings.Contains(inner[0].(map[string]any)["text"].(string), `"attached":true`) {
					t.Fatalf("the text block should say the image is attached: %v", inner[0])
				}
				return
			}
			tool := msgs[len(msgs)-2]
			if tool["role"] != "tool" || !strings.Contains(tool["content"].(string), path) {
				t.Fatalf("tool message: %v", tool)
			}
			parts := last["content"].([]any)
			url := parts[1].(map[string]any)["image_url"].(map[string]any)["url"]
			if last["role"] != "user" || url != "data:image/jpeg;base64,"+b64 {
				t.Fatalf("want a user message with the image after the tool message: %.400s", srv.Body(1))
			}
		})
	}
}

// TestToolImageWithoutVision: a model that does not take images gets the
// file's path and metadata as text, and no image part at all.
func TestToolImageWithoutVision(t *testing.T) {
	path, data := writeJPEG(t, t.TempDir())
	srv := modeltest.New(t, modeltest.Options{}, modeltest.Turns(modeltest.Turn{Calls: [][2]string{{"snap", `{}`}}}, modeltest.Turn{Text: "ok"})...)
	p := model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.BaseURL(), Model: "text-only"})
	a, _ := newAgent(t, Options{Provider: p, Tools: snapRegistry(t, path)})
	if _, err := a.Run(context.Background(), Task{Input: "look"}); err != nil {
		t.Fatal(err)
	}
	body := srv.Body(1)
	if strings.Contains(body, "image_url") || strings.Contains(body, base64.StdEncoding.EncodeToString(data)) {
		t.Fatalf("a model without vision got the image: %.300s", body)
	}
	tool := srv.Request(1).ToolMessages()["call_0_0"]
	for _, want := range []string{path, `"mime":"image/jpeg"`, `"width":8`, `"height":6`, `"attached":false`, NoteNoVision} {
		if !strings.Contains(tool, want) {
			t.Errorf("the tool message lacks %s: %s", want, tool)
		}
	}
}

// TestToolImageTooLarge: a photo over the cap is not attached; the tool
// message says why, and the run goes on.
func TestToolImageTooLarge(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.jpg")
	if err := os.WriteFile(big, append([]byte{0xFF, 0xD8, 0xFF, 0xE0}, make([]byte, model.MaxImageBase64Bytes)...), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := modeltest.New(t, modeltest.Options{}, modeltest.Turns(modeltest.Turn{Calls: [][2]string{{"snap", `{}`}}}, modeltest.Turn{Text: "too big"})...)
	p := model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.BaseURL(), Model: "v", Vision: true})
	a, _ := newAgent(t, Options{Provider: p, Tools: snapRegistry(t, big)})
	if _, err := a.Run(context.Background(), Task{Input: "look"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(srv.Body(1), "image_url") {
		t.Fatal("an oversize image was attached")
	}
	if tool := srv.Request(1).ToolMessages()["call_0_0"]; !strings.Contains(tool, "too large") || !strings.Contains(tool, `"attached":false`) {
		t.Fatalf("the tool message should say the image is too large: %s", tool)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
