package agent

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/model"
)

// DefaultResultChars caps the text of one tool result given to the model
// (characters of ForModel's output body).
const DefaultResultChars = 8000

// Truncate cuts s to at most max characters as head + marker + tail
// (SPEC §6: the model sees a truncated body, the transcript keeps it all):
// the first and last parts are kept whole characters, split about evenly
// around "\n…[N characters cut]…\n". s is returned unchanged when it fits;
// max below 64 is taken as 64. cut reports whether anything was cut.
func Truncate(s string, max int) (out string, cut bool) {
	max = maxInt(max, 64)
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s, false
	}
	r := []rune(s)
	// The marker's length depends on the number it names; size it for n.
	marker := func(k int) string { return fmt.Sprintf("\n…[%d characters cut]…\n", k) }
	keep := max - utf8.RuneCountInString(marker(n))
	head := keep - keep/2
	tail := keep / 2
	return string(r[:head]) + marker(n-head-tail) + string(r[n-tail:]), true
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// modelView is the tool message the model reads.
type modelView struct {
	CallID  string          `json:"callId"`
	Status  Status          `json:"status"`
	Summary string          `json:"summary"`
	Error   string          `json:"error,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Truncated: Data is a JSON string holding head + marker + tail of
	// the output's JSON text, which had FullChars characters.
	Truncated bool `json:"truncated,omitempty"`
	FullChars int  `json:"fullChars,omitempty"`
	// Images: the pictures the tool returned, each with its path and
	// metadata and whether it is attached to this message (imageView).
	Images []imageView `json:"images,omitempty"`
}

// Image is a picture a tool returned, by reference: Path is the file
// (absolute), MIME its type (e.g. "image/jpeg"), MediaID the media store's
// id when it is a node's media (backend/media), Width and Height in
// pixels and Bytes its size, when known. The transcript and chat history
// keep this reference, never the bytes.
type Image struct {
	Path    string `json:"path"`
	MIME    string `json:"mime,omitempty"`
	MediaID string `json:"mediaId,omitempty"`
	Width   int    `json:"width,omitempty"`
	Height  int    `json:"height,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"`
}

// imageView is an Image as the model reads it in the tool message.
type imageView struct {
	Image
	// Attached: the picture itself is attached to the message. Note says
	// why not otherwise.
	Attached bool   `json:"attached"`
	Note     string `json:"note,omitempty"`
}

// Notes on images that are not attached (ToolMessage).
const (
	NoteNoVision = "the model in use does not take images: only the file's path and metadata are given"
)

// ToolMessage is the model's tool message answering call callID of tool
// with result r: the content is ForModel's (with max), and when vision is
// true (the model takes images, model.TakesImages) each image of r that
// can be sent (model.CheckImage: readable, one of model.ImageMIMETypes,
// at most model.MaxImageBase64Bytes as base64) is attached as a
// model.Image by path. An image that is not attached is listed in the
// content with its path and metadata and the reason (no vision, or the
// check's error: too large, missing, not an image).
func ToolMessage(callID, tool string, r Result, max int, vision bool) model.Message {
	m := model.Message{Role: model.RoleTool, ToolCallID: callID, Name: tool}
	views := make([]imageView, len(r.Images))
	for i, img := range r.Images {
		views[i] = imageView{Image: img}
		switch mi := (model.Image{Path: img.Path, MIME: img.MIME}); {
		case !vision:
			views[i].Note = NoteNoVision
		default:
			if err := model.CheckImage(mi); err != nil {
				views[i].Note = "not attached: " + err.Error()
				continue
			}
			views[i].Attached = true
			m.Images = append(m.Images, mi)
		}
	}
	m.Content = forModel(r, max, views)
	return m
}

// ForModel renders r for the model: a JSON object {callId, status,
// summary, error?, data, images?} (images: r.Images with their path and
// metadata, attached: false — ToolMessage attaches them) whose data is the whole output when its JSON
// text has at most max characters, else a string with its head and tail
// (Truncate) and "truncated": true, "fullChars": N. The Result itself is
// not changed (the transcript keeps the whole output).
func ForModel(r Result, max int) string {
	views := make([]imageView, len(r.Images))
	for i, img := range r.Images {
		views[i] = imageView{Image: img, Note: "not attached"}
	}
	return forModel(r, max, views)
}

func forModel(r Result, max int, images []imageView) string {
	v := modelView{CallID: r.CallID, Status: r.Status, Summary: r.LogSummary, Error: r.Error, Images: images}
	if r.Error != "" {
		v.Error, _ = Truncate(r.Error, max)
	}
	if len(r.Data) > 0 {
		text := string(r.Data)
		if cut, did := Truncate(text, max); did {
			s, _ := encode(cut)
			v.Data, v.Truncated, v.FullChars = s, true, utf8.RuneCountInString(text)
		} else {
			v.Data = r.Data
		}
	}
	b, err := encode(v)
	if err != nil { // cannot happen: every field encodes
		return fmt.Sprintf(`{"callId":%q,"status":"error","error":"result could not be encoded"}`, r.CallID)
	}
	return string(b)
}
