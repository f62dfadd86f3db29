package memory

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ErrFrontMatter: a memory file's YAML front matter is malformed. The error
// is a *FrontMatterError (line and reason). A file with malformed front
// matter is still indexed and searched as plain text; only the features
// that read its front matter (sessions, roles, cold start) report it.
var ErrFrontMatter = errors.New("memory: malformed front matter")

// FrontMatterError says where and why a file's front matter is malformed.
// Line is 1-based in the file (0 when unknown); for a YAML syntax error it
// is the line the YAML library reports, often where the enclosing
// construct (a mapping, a flow list) starts.
type FrontMatterError struct {
	Path   string
	Line   int
	Reason string
}

// Error implements error: "memory/x.md: front matter line 3: ...".
func (e *FrontMatterError) Error() string {
	where := "front matter"
	if e.Line > 0 {
		where = fmt.Sprintf("front matter line %d", e.Line)
	}
	if e.Path != "" {
		return e.Path + ": " + where + ": " + e.Reason
	}
	return where + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrFrontMatter) true.
func (e *FrontMatterError) Unwrap() error { return ErrFrontMatter }

// FrontMatter is the YAML block a memory file may start with (SPEC §4.1,
// §5.4): a first line "---", YAML, and a line "---" (or "..."). Only the
// keys Atrium uses are decoded; others are ignored.
//
//	type          global | role | session | role-template | decision ...
//	role, owner   the role the file belongs to / the session's owner
//	session       the session id (session files)
//	description   one line describing the role or file
//	tags          a list, or a comma-separated string
//	capabilities  a list, or a comma-separated string (role configs)
//	created       RFC 3339 time (or a YAML timestamp / date)
//	modified      idem
//	ttl           seconds, a whole number ≥ 0 (sessions)
type FrontMatter struct {
	Type         string    `json:"type,omitempty"`
	Role         string    `json:"role,omitempty"`
	Owner        string    `json:"owner,omitempty"`
	Session      string    `json:"session,omitempty"`
	Description  string    `json:"description,omitempty"`
	Tags         []string  `json:"tags,omitempty"`
	Capabilities []string  `json:"capabilities,omitempty"`
	Created      time.Time `json:"created,omitzero"`
	Modified     time.Time `json:"modified,omitzero"`
	TTL          int64     `json:"ttl,omitempty"` // seconds; 0 = not given
	// Raw is the decoded YAML mapping (every key), for callers that need
	// more than the fields above.
	Raw map[string]any `json:"-"`
}

// yamlErrLine pulls the line out of a yaml error ("yaml: line 3: ...").
var yamlErrLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ParseFrontMatter splits text into its front matter and body. ok is false
// (and the error nil) when the text has no front matter: its first line is
// not "---". body is the text after the closing line (the whole text when
// there is none) and bodyLine the 1-based line it starts at. A block that
// is never closed, YAML that does not parse, is not a mapping, or has a
// known key of the wrong type is a *FrontMatterError (ErrFrontMatter);
// body is then the whole text, so the file still reads as plain text.
func ParseFrontMatter(text string) (fm FrontMatter, body string, bodyLine int, ok bool, err error) {
	t := strings.TrimPrefix(text, "\uFEFF")
	first, rest, found := strings.Cut(t, "\n")
	if strings.TrimRight(first, " \r") != "---" {
		return FrontMatter{}, text, 1, false, nil
	}
	if !found {
		return FrontMatter{}, text, 1, true, &FrontMatterError{Line: 1, Reason: "\"---\" is not closed by a second \"---\" line"}
	}
	var yb strings.Builder
	line := 2
	for {
		l, more, hasMore := strings.Cut(rest, "\n")
		if tl := strings.TrimRight(l, " \r"); tl == "---" || tl == "..." {
			body = more
			bodyLine = line + 1
			break
		}
		if !hasMore {
			return FrontMatter{}, text, 1, true, &FrontMatterError{Line: 1, Reason: "\"---\" is not closed by a second \"---\" line"}
		}
		yb.WriteString(l)
		yb.WriteByte('\n')
		rest = more
		line++
	}
	fm, err = decodeFrontMatter(yb.String())
	if err != nil {
		return FrontMatter{}, text, 1, true, err
	}
	return fm, body, bodyLine, true, nil
}

// decodeFrontMatter decodes the YAML of a front matter block (which starts
// on line 2 of its file).
func decodeFrontMatter(y string) (FrontMatter, error) {
	var fm FrontMatter
	if strings.TrimSpace(y) == "" {
		return fm, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(y), &doc); err != nil {
		fe := &FrontMatterError{Reason: strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlErrLine.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			fe.Line, fe.Reason = n+1, m[2]
		}
		return fm, fe
	}
	if len(doc.Content) == 0 {
		return fm, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fm, &FrontMatterError{Line: root.Line + 1, Reason: "expected a mapping of keys (key: value)"}
	}
	fm.Raw = map[string]any{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := strings.ToLower(strings.TrimSpace(k.Value))
		at := v.Line + 1
		var err error
		switch key {
		case "type":
			fm.Type, err = scalar(v)
		case "role":
			fm.Role, err = scalar(v)
		case "owner":
			fm.Owner, err = scalar(v)
		case "session":
			fm.Session, err = scalar(v)
		case "description":
			fm.Description, err = scalar(v)
		case "tags":
			fm.Tags, err = stringList(v)
		case "capabilities":
			fm.Capabilities, err = stringList(v)
		case "created":
			fm.Created, err = timeValue(v)
		case "modified":
			fm.Modified, err = timeValue(v)
		case "ttl":
			fm.TTL, err = ttlValue(v)
		}
		if err != nil {
			return FrontMatter{}, &FrontMatterError{Line: at, Reason: fmt.Sprintf("%s: %v", key, err)}
		}
		var x any
		if derr := v.Decode(&x); derr == nil {
			fm.Raw[k.Value] = x
		}
	}
	return fm, nil
}

func scalar(v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("expected a single value")
	}
	if v.Tag == "!!null" {
		return "", nil
	}
	return strings.TrimSpace(v.Value), nil
}

func stringList(v *yaml.Node) ([]string, error) {
	var out []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return nil, nil
		}
		for _, s := range strings.Split(v.Value, ",") {
			add(s)
		}
	case yaml.SequenceNode:
		for _, c := range v.Content {
			if c.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("expected a list of words")
			}
			add(c.Value)
		}
	default:
		return nil, fmt.Errorf("expected a list or a comma-separated string")
	}
	return out, nil
}

func timeValue(v *yaml.Node) (time.Time, error) {
	if v.Kind != yaml.ScalarNode {
		return time.Time{}, fmt.Errorf("expected a time")
	}
	s := strings.TrimSpace(v.Value)
	if s == "" || v.Tag == "!!null" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time (2026-02-11T14:30:22Z)", s)
}

func ttlValue(v *yaml.Node) (int64, error) {
	if v.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("expected a number of seconds")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v.Value), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a whole number of seconds ≥ 0", v.Value)
	}
	return n, nil
}
