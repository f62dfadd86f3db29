package canvas

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzCheck feeds any bytes as one A2UI line (an agent's canvas.push jsonl,
// docs/PROTOCOL.md "Canvas and A2UI") to the validator with the shipped
// v0.8 and v0.9 schemas. Properties: a refusal is a LineError for that
// line with a short reason; an accepted line is a JSON object of a known
// version and kind with a surfaceId of at most MaxIDBytes, its Raw is the
// compact form of the input, and Raw is accepted again as the same line.
func FuzzCheck(f *testing.F) {
	for _, l := range validLines {
		f.Add([]byte(l))
	}
	for _, s := range []string{
		`{}`, `[]`, `null`, `{"version":"v1.0","deleteSurface":{"surfaceId":"s"}}`, `{"version":"v0.9"}`,
		`{"deleteSurface":{"surfaceId":""}}`, `{"deleteSurface":{"surfaceId":"s"},"beginRendering":{"surfaceId":"s","root":"r"}}`,
		`{"version":"v0.9","updateComponents":{"surfaceId":"n","components":[{"id":"root","component":"Nope"}]}}`,
		`{"surfaceUpdate":{"surfaceId":"s","components":[{"id":"x","component":{"Image":{"url":{"literalString":"javascript:alert(1)"}}}}]}}`,
		`{"version":"v0.9","createSurface":{"surfaceId":"n","catalogId":"https://evil.example/c.json"}}`,
		"{\"deleteSurface\":{\"surfaceId\":\"\xff\"}}",
	} {
		f.Add([]byte(s))
	}
	v := validator(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 64<<10 {
			return
		}
		l, err := v.Check(7, raw)
		if err != nil {
			var le LineError
			if !errors.As(err, &le) || le.Line != 7 || le.Reason == "" || utf8.RuneCountInString(le.Reason) > maxReasonRune+1 {
				t.Fatalf("refusal %#v for %q", err, raw)
			}
			return
		}
		if (l.Version != V08 && l.Version != V09) || l.Kind == "" || l.SurfaceID == "" || len(l.SurfaceID) > MaxIDBytes || l.N != 7 {
			t.Fatalf("accepted %q as %+v", raw, l)
		}
		var want bytes.Buffer
		if err := json.Compact(&want, raw); err != nil || !bytes.Equal(want.Bytes(), l.Raw) {
			t.Fatalf("Raw %q is not the compact form of %q (%v)", l.Raw, raw, err)
		}
		again, err := v.Check(8, l.Raw)
		if err != nil || again.Version != l.Version || again.Kind != l.Kind || again.SurfaceID != l.SurfaceID || !bytes.Equal(again.Raw, l.Raw) {
			t.Fatalf("Raw %q does not check again as the same line: %+v, %v", l.Raw, again, err)
		}
	})
}
