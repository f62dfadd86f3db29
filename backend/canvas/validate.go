package canvas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// A2UI versions, as [Line.Version] and canvas.state name them.
const (
	V08 = "v0.8"
	V09 = "v0.9"
)

// Message kinds (the one key of a line's object that says what it does).
const (
	KindBeginRendering   = "beginRendering"   // v0.8
	KindSurfaceUpdate    = "surfaceUpdate"    // v0.8
	KindDataModelUpdate  = "dataModelUpdate"  // v0.8
	KindCreateSurface    = "createSurface"    // v0.9
	KindUpdateComponents = "updateComponents" // v0.9
	KindUpdateDataModel  = "updateDataModel"  // v0.9
	KindDeleteSurface    = "deleteSurface"    // both
)

var (
	kinds08 = []string{KindSurfaceUpdate, KindBeginRendering, KindDataModelUpdate, KindDeleteSurface}
	kinds09 = []string{KindCreateSurface, KindUpdateComponents, KindUpdateDataModel, KindDeleteSurface}
)

// Schema files, as laid out by frontend.A2UISchemas() (the copy of
// @a2ui/web_core's src/v0_8/schemas and src/v0_9/schemas).
const (
	schema08      = "v0_8/server_to_client_with_standard_catalog.json"
	schema09      = "v0_9/server_to_client.json"
	schema09Base  = "https://a2ui.org/specification/v0_9/"
	catalog09     = "v0_9/catalogs/basic/catalog.json"
	schema08URL   = "https://a2ui.org/specification/v0_8/server_to_client_with_standard_catalog.json"
	maxReasonRune = 600
)

// LineError is one refused line: its 1-based number in the pushed JSONL
// and why (a schema complaint with its JSON pointer, an unknown version,
// or a rule of the kept surfaces).
type LineError struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// Line is one validated A2UI message.
type Line struct {
	N         int             // 1-based line number in the push
	Version   string          // V08 or V09
	Kind      string          // KindBeginRendering, …
	SurfaceID string          // the surface it is about
	Raw       json.RawMessage // the line as pushed (compact JSON)
}

// Validator checks A2UI lines against the official schemas. Safe for
// concurrent use once built.
type Validator struct {
	v08, v09 *jsonschema.Schema
	defs09   map[string]*jsonschema.Schema // per message kind, for clearer reasons
	comp09   map[string]*jsonschema.Schema // per basic-catalogue component type, likewise
	types09  []string                      // those types, in catalogue order
}

// NewValidator compiles the v0.8 (standard catalogue) and v0.9 (basic
// catalogue) server-to-client schemas from schemas, laid out as
// frontend.A2UISchemas() is (v0_8/…, v0_9/…). Nothing is fetched from the
// network: every $ref resolves inside schemas (the v0.9 files are
// registered under their $id, https://a2ui.org/specification/v0_9/…, and the
// basic catalogue also as …/v0_9/catalog.json, the name server_to_client.json
// refers to). Errors: a missing or malformed schema file, or one that does
// not compile.
func NewValidator(schemas fs.FS) (*Validator, error) {
	if schemas == nil {
		return nil, errors.New("canvas: no A2UI schemas (Options.Schemas)")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	load := func(name, url string) error {
		b, err := fs.ReadFile(schemas, name)
		if err != nil {
			return fmt.Errorf("canvas: A2UI schema %s: %w", name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("canvas: A2UI schema %s: %w", name, err)
		}
		if err := c.AddResource(url, doc); err != nil {
			return fmt.Errorf("canvas: A2UI schema %s: %w", name, err)
		}
		return nil
	}
	if err := load(schema08, schema08URL); err != nil {
		return nil, err
	}
	// Every v0.9 schema file (not the examples) under its own URL.
	err := fs.WalkDir(schemas, "v0_9", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "examples" {
			return fs.SkipDir
		}
		if d.IsDir() || path.Ext(p) != ".json" {
			return nil
		}
		return load(p, schema09Base+strings.TrimPrefix(p, "v0_9/"))
	})
	if err != nil {
		return nil, fmt.Errorf("canvas: A2UI v0.9 schemas: %w", err)
	}
	// server_to_client.json says "catalog.json#/$defs/anyComponent": the
	// catalogue a surface uses; Atrium renders the basic one.
	if err := load(catalog09, schema09Base+"catalog.json"); err != nil {
		return nil, err
	}
	v := &Validator{defs09: map[string]*jsonschema.Schema{}}
	if v.v08, err = c.Compile(schema08URL); err != nil {
		return nil, fmt.Errorf("canvas: compile %s: %w", schema08, err)
	}
	if v.v09, err = c.Compile(schema09Base + "server_to_client.json"); err != nil {
		return nil, fmt.Errorf("canvas: compile %s: %w", schema09, err)
	}
	for k, def := range map[string]string{KindCreateSurface: "CreateSurfaceMessage", KindUpdateComponents: "UpdateComponentsMessage",
		KindUpdateDataModel: "UpdateDataModelMessage", KindDeleteSurface: "DeleteSurfaceMessage"} {
		if v.defs09[k], err = c.Compile(schema09Base + "server_to_client.json#/$defs/" + def); err != nil {
			return nil, fmt.Errorf("canvas: compile %s %s: %w", schema09, def, err)
		}
	}
	// The basic catalogue's components one by one: a broken component
	// of updateComponents is named by its own schema, not by the 18
	// branches of anyComponent that it fails.
	cat, err := fs.ReadFile(schemas, catalog09)
	if err != nil {
		return nil, fmt.Errorf("canvas: A2UI schema %s: %w", catalog09, err)
	}
	var catDoc struct {
		Components json.RawMessage `json:"components"`
	}
	if err := json.Unmarshal(cat, &catDoc); err != nil {
		return nil, fmt.Errorf("canvas: A2UI schema %s: %w", catalog09, err)
	}
	v.comp09 = map[string]*jsonschema.Schema{}
	dec := json.NewDecoder(bytes.NewReader(catDoc.Components))
	if _, err := dec.Token(); err == nil { // {
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			name, _ := tok.(string)
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				break
			}
			if v.comp09[name], err = c.Compile(schema09Base + "catalog.json#/components/" + name); err != nil {
				return nil, fmt.Errorf("canvas: compile %s component %s: %w", catalog09, name, err)
			}
			v.types09 = append(v.types09, name)
		}
	}
	return v, nil
}

// componentReason names the first component of a v0.9 updateComponents
// that its type's schema refuses ("" when none is found).
func (v *Validator) componentReason(doc map[string]any) string {
	body, _ := doc[KindUpdateComponents].(map[string]any)
	comps, _ := body["components"].([]any)
	for i, c := range comps {
		obj, _ := c.(map[string]any)
		typ, _ := obj["component"].(string)
		where := fmt.Sprintf("/updateComponents/components/%d", i)
		sch := v.comp09[typ]
		if sch == nil {
			return fmt.Sprintf("at %s/component: unknown component %q (the basic catalogue has %s)", where, typ, strings.Join(v.types09, ", "))
		}
		if err := sch.Validate(c); err != nil {
			return schemaReasonAt(where, err)
		}
	}
	return ""
}

// noLoader refuses every URL the schemas do not hold: validation never
// reaches the network or the file system.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("canvas: the A2UI schemas refer to %s, which is not among them", url)
}

// Check validates one line (n is its line number, for the error): JSON
// object, its version told by its shape (docs/PROTOCOL.md "Canvas and
// A2UI": {"version":"v0.9", …} or one of v0.8's four keys), then the
// schema of that version. The error is a LineError.
func (v *Validator) Check(n int, raw []byte) (Line, error) {
	fail := func(format string, a ...any) (Line, error) {
		return Line{}, LineError{Line: n, Reason: cutReason(fmt.Sprintf(format, a...))}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fail("not JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return fail("not a JSON object (an A2UI line is one message object)")
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ver, hasVer := obj["version"]
	var l Line
	switch {
	case hasVer && ver == V09:
		l.Version = V09
		l.Kind = oneKind(obj, kinds09)
		if l.Kind == "" {
			return fail("a v0.9 line holds exactly one of %s (it holds %s)", strings.Join(kinds09, ", "), strings.Join(keys, ", "))
		}
		if err := v.v09.Validate(doc); err != nil {
			reason := schemaReason(err)
			if err2 := v.defs09[l.Kind].Validate(doc); err2 != nil {
				reason = schemaReason(err2) // the reason within the one message kind it can be
			}
			if l.Kind == KindUpdateComponents {
				if r := v.componentReason(obj); r != "" {
					reason = r
				}
			}
			return fail("%s", reason)
		}
	case hasVer:
		b, _ := json.Marshal(ver)
		return fail("unknown A2UI version: \"version\":%s (Atrium renders v0.8 and v0.9)", cutBytes(b, 40))
	default:
		l.Version = V08
		l.Kind = oneKind(obj, kinds08)
		if l.Kind == "" || len(obj) != 1 {
			return fail("unknown A2UI version: a line is v0.9 ({\"version\":\"v0.9\", …}) or v0.8 (one of %s); this one holds %s",
				strings.Join(kinds08, ", "), strings.Join(keys, ", "))
		}
		if err := v.v08.Validate(doc); err != nil {
			return fail("%s", schemaReason(err))
		}
	}
	body, _ := obj[l.Kind].(map[string]any)
	l.SurfaceID, _ = body["surfaceId"].(string)
	if l.SurfaceID == "" {
		return fail("%s needs a surfaceId", l.Kind)
	}
	if len(l.SurfaceID) > MaxIDBytes {
		return fail("surfaceId is %d bytes (at most %d)", len(l.SurfaceID), MaxIDBytes)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return fail("not JSON: %v", err)
	}
	l.N, l.Raw = n, json.RawMessage(buf.Bytes())
	return l, nil
}

// oneKind is the one key of obj among kinds, "" when none or several.
func oneKind(obj map[string]any, kinds []string) string {
	found := ""
	for _, k := range kinds {
		if _, ok := obj[k]; ok {
			if found != "" {
				return ""
			}
			found = k
		}
	}
	return found
}

// schemaReason makes one line of a validation error: the most specific
// complaint (the deepest instance location; oneOf branches that fail at
// the top say little), its JSON pointer, and how many more there are.
func schemaReason(err error) string { return schemaReasonAt("", err) }

// schemaReasonAt is schemaReason for a value found at JSON pointer prefix
// of the line.
func schemaReasonAt(prefix string, err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(leaves) == 0 {
		return ve.Error()
	}
	// "false schema" (unevaluatedProperties: false) follows from another
	// complaint about the same object; name that one.
	if real := slices.DeleteFunc(slices.Clone(leaves), func(e *jsonschema.ValidationError) bool {
		_, f := e.ErrorKind.(*kind.FalseSchema)
		return f
	}); len(real) > 0 {
		leaves = real
	}
	best := slices.MaxFunc(leaves, func(a, b *jsonschema.ValidationError) int {
		return len(a.InstanceLocation) - len(b.InstanceLocation)
	})
	// MaxFunc returns the first maximal one only when none later is
	// larger; keep the first of the deepest for a stable reason.
	for _, l := range leaves {
		if len(l.InstanceLocation) == len(best.InstanceLocation) {
			best = l
			break
		}
	}
	ptr := prefix + "/" + strings.Join(best.InstanceLocation, "/")
	if prefix != "" && len(best.InstanceLocation) == 0 {
		ptr = prefix
	}
	out := fmt.Sprintf("at %s: %s", ptr, best.ErrorKind.LocalizedString(message.NewPrinter(language.English)))
	if n := len(leaves) - 1; n > 0 {
		out += fmt.Sprintf(" (and %d more)", n)
	}
	return out
}

func cutReason(s string) string {
	if utf8.RuneCountInString(s) <= maxReasonRune {
		return s
	}
	r := []rune(s)
	return string(r[:maxReasonRune]) + "…"
}

func cutBytes(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
