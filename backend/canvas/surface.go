package canvas

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// surface is one kept surface, compacted (docs/PROTOCOL.md "Canvas and
// A2UI", Surfaces kept): its latest begin line, the latest of each
// component by id in first-seen order, and the data-model updates not
// overwritten by a later one.
type surface struct {
	ID         string          `json:"id"`
	Version    string          `json:"version"`
	Owner      string          `json:"owner"` // sessionKey: "<profileId>/<sessionId>"
	Begin      json.RawMessage `json:"begin,omitempty"`
	Components []component     `json:"components,omitempty"`
	Data       []dataLine      `json:"data,omitempty"`
	Seq        int64           `json:"seq"` // creation order within the target
	index      map[string]int  // component id → position in Components
}

type component struct {
	ID   string          `json:"id"`
	Type string          `json:"type,omitempty"` // v0.9: the component's type, kept when an update names only properties
	Raw  json.RawMessage `json:"raw"`
}

type dataLine struct {
	Path []string        `json:"path"` // normalised segments; empty: the root
	Raw  json.RawMessage `json:"raw"`  // the whole line
}

func (s *surface) clone() *surface {
	c := *s
	c.Components = append([]component(nil), s.Components...)
	c.Data = append([]dataLine(nil), s.Data...)
	c.index = nil
	return &c
}

func (s *surface) idx() map[string]int {
	if s.index == nil {
		s.index = make(map[string]int, len(s.Components))
		for i, c := range s.Components {
			s.index[c.ID] = i
		}
	}
	return s.index
}

// messages are the lines that rebuild the surface, in order: begin, one
// component line, the data-model lines. They are valid A2UI lines.
func (s *surface) messages() []json.RawMessage {
	var out []json.RawMessage
	if s.Begin != nil {
		out = append(out, s.Begin)
	}
	if len(s.Components) > 0 {
		comps := make([]json.RawMessage, len(s.Components))
		for i, c := range s.Components {
			comps[i] = c.Raw
		}
		body := map[string]any{"surfaceId": s.ID, "components": comps}
		var line any = map[string]any{KindSurfaceUpdate: body}
		if s.Version == V09 {
			line = map[string]any{"version": V09, KindUpdateComponents: body}
		}
		b, _ := json.Marshal(line) // raw messages and strings only: cannot fail
		out = append(out, b)
	}
	for _, d := range s.Data {
		out = append(out, d.Raw)
	}
	return out
}

// limits bound what one surface may hold.
type limits struct {
	components int // distinct component ids
	dataLines  int // data-model lines after compaction
}

// apply applies one validated line to s (nil: the surface does not exist
// yet) and returns the surface as it is after the line (nil: deleted), or
// the reason the line is refused (then s is unchanged). s is modified in
// place: callers pass a clone.
func apply(s *surface, l Line, owner string, lim limits) (*surface, string) {
	if s != nil && s.Version != l.Version {
		return s, fmt.Sprintf("surface %q is %s; this line is %s (delete the surface first)", l.SurfaceID, s.Version, l.Version)
	}
	if s != nil && s.Owner != owner {
		return s, fmt.Sprintf("surface %q belongs to another session (%s); reset it or use another surfaceId", l.SurfaceID, s.Owner)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(l.Raw, &obj); err != nil {
		return s, "not a JSON object"
	}
	var body map[string]json.RawMessage
	_ = json.Unmarshal(obj[l.Kind], &body) // validated: an object
	switch l.Kind {
	case KindDeleteSurface:
		return nil, ""
	case KindCreateSurface:
		if s != nil {
			return s, fmt.Sprintf("surface %q already exists; send deleteSurface first (A2UI v0.9 createSurface)", l.SurfaceID)
		}
		return &surface{ID: l.SurfaceID, Version: V09, Owner: owner, Begin: l.Raw}, ""
	case KindUpdateComponents, KindUpdateDataModel:
		if s == nil {
			return s, fmt.Sprintf("no surface %q: send createSurface first (A2UI v0.9)", l.SurfaceID)
		}
	}
	if s == nil { // v0.8 creates a surface with its first message
		s = &surface{ID: l.SurfaceID, Version: V08, Owner: owner}
	}
	switch l.Kind {
	case KindBeginRendering:
		s.Begin = l.Raw
	case KindSurfaceUpdate, KindUpdateComponents:
		var comps []json.RawMessage
		_ = json.Unmarshal(body["components"], &comps)
		idx := s.idx()
		added := 0
		for _, raw := range comps {
			if _, ok := idx[componentID(raw)]; !ok {
				added++
			}
		}
		if n := len(s.Components) + added; n > lim.components {
			return s, fmt.Sprintf("surface %q would hold %d components (at most %d)", l.SurfaceID, n, lim.components)
		}
		for _, raw := range comps {
			c := component{ID: componentID(raw), Raw: raw}
			if s.Version == V09 {
				c = mergeV09(s, idx, c)
			}
			if i, ok := idx[c.ID]; ok {
				s.Components[i] = c
			} else {
				idx[c.ID] = len(s.Components)
				s.Components = append(s.Components, c)
			}
		}
	case KindDataModelUpdate, KindUpdateDataModel:
		var p string
		_ = json.Unmarshal(body["path"], &p)
		segs := pathSegments(s.Version, p)
		kept := s.Data[:0:0]
		for _, d := range s.Data {
			if !hasPrefix(d.Path, segs) { // overwritten by this line: at or below its path
				kept = append(kept, d)
			}
		}
		if len(kept)+1 > lim.dataLines {
			return s, fmt.Sprintf("surface %q would keep %d data-model updates (at most %d); update an enclosing path", l.SurfaceID, len(kept)+1, lim.dataLines)
		}
		s.Data = append(kept, dataLine{Path: segs, Raw: l.Raw})
	}
	return s, ""
}

// componentID is a component object's "id".
func componentID(raw json.RawMessage) string {
	var c struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.ID
}

// mergeV09 keeps a v0.9 component's type when an update names only its
// properties (web_core's processor keeps the existing type then).
func mergeV09(s *surface, idx map[string]int, c component) component {
	var m map[string]json.RawMessage
	if json.Unmarshal(c.Raw, &m) != nil {
		return c
	}
	var typ string
	_ = json.Unmarshal(m["component"], &typ)
	if typ != "" {
		c.Type = typ
		return c
	}
	if i, ok := idx[c.ID]; ok && s.Components[i].Type != "" {
		c.Type = s.Components[i].Type
		m["component"], _ = json.Marshal(c.Type)
		if b, err := json.Marshal(m); err == nil {
			c.Raw = b
		}
	}
	return c
}

var bracketIndex = regexp.MustCompile(`\[(\d+)\]`)

// pathSegments normalises a data-model path as the renderers do: v0.8
// (web_core's normalizePath) takes "a.b", "a[0]" and "/a/b" alike; v0.9
// paths are JSON pointers. The root is no segments.
func pathSegments(version, p string) []string {
	if version == V08 {
		p = bracketIndex.ReplaceAllString(p, ".$1")
		return strings.FieldsFunc(p, func(r rune) bool { return r == '.' || r == '/' })
	}
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// hasPrefix reports whether path lies at or below prefix.
func hasPrefix(path, prefix []string) bool {
	if len(path) < len(prefix) {
		return false
	}
	for i := range prefix {
		if path[i] != prefix[i] {
			return false
		}
	}
	return true
}
