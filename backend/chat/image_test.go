package chat

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

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/model"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// snapTools is the built-in registry plus "snap", which returns the photo
// at path as a media picture.
func snapTools(path string) func(*Options) {
	return func(o *Options) {
		o.Tools = func(ToolScope) (*agent.Registry, error) {
			reg, err := defaultTools(o.Memory)
			if err != nil {
				return nil, err
			}
			err = reg.Register(agent.Spec{Name: "snap", Level: agent.L0, Schema: json.RawMessage(`{"type":"object"}`)},
				func(context.Context, agent.Call) (agent.Output, error) {
					return agent.Output{Data: map[string]any{"ok": true}, LogSummary: "photo taken",
						Images: []agent.Image{{Path: path, MIME: "image/jpeg", MediaID: "0123456789abcdef0123456789abcdef", Width: 16, Height: 9}}}, nil
				})
			return reg, err
		}
	}
}

// TestChatPhotoToModelAndHistory: the model calls a tool that returns a
// photo; the next request carries it (OpenAI-compatible and Anthropic
// shapes), the stored answer keeps the tool call with the picture's
// reference and not its bytes, chat.final shows it to clients, and the
// next turn of the session attaches it again from history. A model
// without vision gets the path instead, in the run and from history.
func TestChatPhotoToModelAndHistory(t *testing.T) {
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, image.NewGray(image.Rect(0, 0, 16, 9)), nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "window.jpg")
	if err := os.WriteFile(path, jb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(jb.Bytes())
	turns := []modeltest.Turn{{Calls: [][2]string{{"snap", `{}`}}}, {Text: "A grey sky."}, {Text: "Still grey."}}
	for _, tc := range []struct {
		api    string
		vision bool
	}{{"openai", true}, {"anthropic", true}, {"openai", false}} {
		name := tc.api
		if !tc.vision {
			name += "-no-vision"
		}
		t.Run(name, func(t *testing.T) {
			var srv *modeltest.Server
			var p model.Provider
			if tc.api == "anthropic" {
				srv = modeltest.New(t, modeltest.Options{Path: modeltest.AnthropicPath}, modeltest.AnthropicTurns(turns...)...)
				p = model.NewAnthropic(model.AnthropicOptions{BaseURL: srv.URL, Model: "claude-test", Vision: tc.vision})
			} else {
				srv = modeltest.New(t, modeltest.Options{}, modeltest.Turns(turns...)...)
				p = model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.BaseURL(), Model: "scripted", Vision: tc.vision})
			}
			e := newEnv(t, p, nil, snapTools(path))
			res := e.send(t, "s-photo", "look out of the window")
			final := checkRun(t, res, e.rec.runEvents(t, res.RunID))
			fe, ok := final.payload.(FinalEvent)
			if !ok || fe.Message.Content != "A grey sky." {
				t.Fatalf("final %+v", final)
			}
			if ts := fe.Message.Tools; len(ts) != 1 || len(ts[0].Images) != 1 || ts[0].Images[0].Path != path || ts[0].Images[0].MediaID == "" {
				t.Fatalf("chat.final's tool record must name the picture: %+v", ts)
			}
			stored, err := e.store.Get(context.Background(), res.MessageID)
			if err != nil {
				t.Fatal(err)
			}
			if raw, _ := json.Marshal(stored); strings.Contains(string(raw), b64) || len(stored.Tools[0].Images) != 1 {
				t.Fatalf("history must keep the reference, not the bytes: %s", raw)
			}
			// The second request of the run, and the first of the next
			// turn (the photo comes back from history).
			res2 := e.send(t, "s-photo", "and now?")
			checkRun(t, res2, e.rec.runEvents(t, res2.RunID))
			for _, i := range []int{1, 2} {
				body := srv.Body(i)
				switch {
				case !tc.vision:
					if strings.Contains(body, b64) || !strings.Contains(body, strings.ReplaceAll(path, `\`, `\\`)) || !strings.Contains(body, "does not take images") {
						t.Fatalf("request %d: a model without vision gets the path, not the image: %.600s", i, body)
					}
				case tc.api == "anthropic":
					if !strings.Contains(body, `"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"`+b64+`"}`) {
						t.Fatalf("request %d lacks the image block: %.600s", i, body)
					}
				default:
					if !strings.Contains(body, `"image_url":{"url":"data:image/jpeg;base64,`+b64+`"}`) {
						t.Fatalf("request %d lacks the image_url: %.600s", i, body)
					}
				}
			}
		})
	}
}
