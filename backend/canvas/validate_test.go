package canvas

import (
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"strings"
	"testing"
)

// schemas are the committed copies of @a2ui/web_core's schemas, the files
// frontend.A2UISchemas() embeds.
func schemas(t testing.TB) fs.FS {
	t.Helper()
	dir := "../../frontend/src/lib/a2ui/schemas"
	if _, err := os.Stat(dir + "/v0_8/server_to_client_with_standard_catalog.json"); err != nil {
		t.Fatalf("the A2UI schemas are not in %s: %v", dir, err)
	}
	return os.DirFS(dir)
}

func validator(t testing.TB) *Validator {
	t.Helper()
	v, err := NewValidator(schemas(t))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Valid v0.8 lines (the standard catalogue) and v0.9 lines (basic).
var validLines = []string{
	`{"beginRendering":{"surfaceId":"s","root":"root","styles":{"primaryColor":"#00BFFF","font":"Roboto"}}}`,
	`{"surfaceUpdate":{"surfaceId":"s","components":[{"id":"root","component":{"Column":{"children":{"explicitList":["t","b"]}}}},` +
		`{"id":"t","component":{"Text":{"text":{"literalString":"Hello"},"usageHint":"h1"}}},` +
		`{"id":"b","component":{"Button":{"child":"t","action":{"name":"go","context":[{"key":"name","value":{"path":"/form/name"}}]}}}}]}}`,
	`{"dataModelUpdate":{"surfaceId":"s","path":"/form","contents":[{"key":"name","valueString":"Ada"},{"key":"n","valueNumber":3}]}}`,
	`{"deleteSurface":{"surfaceId":"s"}}`,
	`{"version":"v0.9","createSurface":{"surfaceId":"n","catalogId":"https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"}}`,
	`{"version":"v0.9","updateComponents":{"surfaceId":"n","components":[{"id":"root","component":"Text","text":"hi"}]}}`,
	`{"version":"v0.9","updateDataModel":{"surfaceId":"n","path":"/user/name","value":"Ada"}}`,
	`{"version":"v0.9","deleteSurface":{"surfaceId":"n"}}`,
}

func TestValidLines(t *testing.T) {
	v := validator(t)
	for i, l := range validLines {
		got, err := v.Check(i+1, []byte(l))
		if err != nil {
			t.Errorf("line %d %s: %v", i+1, l, err)
			continue
		}
		if got.SurfaceID == "" || got.Kind == "" || got.N != i+1 {
			t.Errorf("line %d: %+v", i+1, got)
		}
	}
}

// TestWebCoreExamples: every v0.9 example message that ships with
// @a2ui/web_core validates against the schemas.
func TestWebCoreExamples(t *testing.T) {
	v := validator(t)
	fsys := schemas(t)
	files, err := fs.Glob(fsys, "v0_9/catalogs/basic/examples/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("examples: %v %d", err, len(files))
	}
	lines := 0
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			t.Fatal(err)
		}
		var ex struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &ex); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, m := range ex.Messages {
			if _, err := v.Check(i+1, m); err != nil {
				t.Errorf("%s message %d: %v", path.Base(f), i+1, err)
			}
			lines++
		}
	}
	t.Logf("%d example files, %d messages", len(files), lines)
}

// TestInvalidLinesGolden: each refused line with the reason the agent gets.
func TestInvalidLinesGolden(t *testing.T) {
	v := validator(t)
	for _, tc := range []struct{ name, line, want string }{
		{"not json", `{"surfaceUpdate":`, "line 7: not JSON"},
		{"array", `[1,2]`, "line 7: not a JSON object"},
		{"unknown version", `{"version":"v0.7","createSurface":{"surfaceId":"x","catalogId":"c"}}`, `line 7: unknown A2UI version: "version":"v0.7"`},
		{"no version, unknown shape", `{"render":{"surfaceId":"x"}}`, "line 7: unknown A2UI version: a line is v0.9"},
		{"two v0.8 messages", `{"beginRendering":{"surfaceId":"s","root":"r"},"deleteSurface":{"surfaceId":"s"}}`, "line 7: unknown A2UI version"},
		{"v0.9 two messages", `{"version":"v0.9","deleteSurface":{"surfaceId":"n"},"createSurface":{"surfaceId":"n","catalogId":"c"}}`, "line 7: a v0.9 line holds exactly one of"},
		{"v0.8 unknown component", `{"surfaceUpdate":{"surfaceId":"s","components":[{"id":"a","component":{"Blink":{}}}]}}`, "line 7: at /surfaceUpdate/components/0/component"},
		{"v0.8 text without text", `{"surfaceUpdate":{"surfaceId":"s","components":[{"id":"a","component":{"Text":{"usageHint":"h1"}}}]}}`, "line 7: at /surfaceUpdate/components/0/component/Text: missing property 'text'"},
		{"v0.8 begin without root", `{"beginRendering":{"surfaceId":"s"}}`, "line 7: at /beginRendering: missing property 'root'"},
		{"v0.9 missing catalog", `{"version":"v0.9","createSurface":{"surfaceId":"n"}}`, "line 7: at /createSurface: missing property 'catalogId'"},
		{"v0.9 text without text", `{"version":"v0.9","updateComponents":{"surfaceId":"n","components":[{"id":"root","component":"Text"}]}}`, "line 7: at /updateComponents/components/0: missing property 'text'"},
		{"v0.9 unknown component", `{"version":"v0.9","updateComponents":{"surfaceId":"n","components":[{"id":"root","component":"Blink"}]}}`, "line 7: at /updateComponents/components/0/component: unknown component \"Blink\" (the basic catalogue has Text, Image"},
		{"v0.9 bad action", `{"version":"v0.9","updateComponents":{"surfaceId":"n","components":[{"id":"b","component":"Button","child":"x","action":{"event":{"name":3}}}]}}`, "line 7: at /updateComponents/components/0/action/event/name: got number, want string"},
		{"no surface id", `{"deleteSurface":{}}`, "line 7: at /deleteSurface: missing property 'surfaceId'"},
	} {
		_, err := v.Check(7, []byte(tc.line))
		if err == nil {
			t.Errorf("%s: accepted %s", tc.name, tc.line)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s:\n got %s\nwant %s…", tc.name, err, tc.want)
		}
	}
}
