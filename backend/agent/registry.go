package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/atrium-dev/atrium/backend/model"
)

// Level is a tool's permission level (SPEC §6): L0 read-only, L1 local
// write, L2 run programs, L3 network.
type Level int

// The permission levels.
const (
	L0 Level = iota // read-only
	L1              // local write (memory, workspace files)
	L2              // run programs
	L3              // network
)

// String returns "L0" … "L3".
func (l Level) String() string { return fmt.Sprintf("L%d", int(l)) }

// Valid reports whether l is L0 … L3.
func (l Level) Valid() bool { return l >= L0 && l <= L3 }

// Tool defaults and limits.
const (
	// DefaultToolTimeout bounds one attempt of a tool call when its Spec
	// names none.
	DefaultToolTimeout = 30 * time.Second
	// MaxToolRetries caps Spec.MaxRetries.
	MaxToolRetries = 5
	// MaxArgsBytes caps the argument JSON of one call.
	MaxArgsBytes = 256 << 10
)

// Spec describes a tool (SPEC §6): Name (1–64 of [A-Za-z0-9_-], the
// name the model calls), Description (for the model), Schema (a JSON
// Schema, draft 2020-12 unless it says otherwise in "$schema", which the
// arguments must satisfy; it must describe an object), Level, Timeout of
// one attempt (0: DefaultToolTimeout) and MaxRetries (attempts after the
// first, only for failures wrapping ErrRetryable; 0 … MaxToolRetries).
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Level       Level           `json:"level"`
	Timeout     time.Duration   `json:"timeout"`
	MaxRetries  int             `json:"maxRetries"`
}

// Call is one tool call: {callId, tool, args}. Args is the argument JSON
// as the model sent it.
type Call struct {
	ID   string          `json:"callId"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// Status is a tool result's status (SPEC §6).
type Status string

// Result statuses.
const (
	StatusOK       Status = "ok"
	StatusError    Status = "error"    // the call failed; Error says why (fed back so the model can re-plan)
	StatusDenied   Status = "denied"   // a permission, the ACL, the person or an exec approval refused it
	StatusAccepted Status = "accepted" // taken on; the outcome comes later (a tool may return it)
)

// Result is a tool result: {status, data, logSummary} plus bookkeeping.
// Data is the tool's whole output (JSON) as kept in the transcript; the
// model sees ForModel's summary and truncated body. Error is set for
// StatusError and StatusDenied. Attempts counts the handler's runs (0 when
// the call was refused before it ran); Duration is their total time (JSON:
// nanoseconds).
type Result struct {
	CallID string          `json:"callId"`
	Tool   string          `json:"tool"`
	Status Status          `json:"status"`
	Data   json.RawMessage `json:"data,omitempty"`
	// Images are the pictures the tool returned (Output.Images): files,
	// by reference, never their bytes.
	Images     []Image       `json:"images,omitempty"`
	LogSummary string        `json:"logSummary"`
	Error      string        `json:"error,omitempty"`
	Attempts   int           `json:"attempts"`
	Duration   time.Duration `json:"duration"`
}

// Output is what a Handler returns on success: Data is any value encoded
// to JSON (a json.RawMessage is kept as is); LogSummary one line for logs
// and for the model ("12 results", "wrote 340 bytes to notes/todo.md").
// Status may be StatusAccepted for work that finishes later; empty means
// StatusOK.
//
// Images are pictures the tool returns (a node's camera.snap): files the
// tool has checked lie where tools may point (package agent/tools: the
// media folder or the workspace). A model that takes images gets them with
// the tool's message, any other their path and metadata (ToolMessage).
type Output struct {
	Data       any
	LogSummary string
	Status     Status
	Images     []Image
}

// Handler runs one call. args are the validated arguments; ctx carries the
// attempt's timeout. An error wrapping ErrDenied becomes StatusDenied,
// one wrapping ErrRetryable is retried up to Spec.MaxRetries times, any
// other is StatusError. The error text is shown to the model.
type Handler func(ctx context.Context, call Call) (Output, error)

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

type entry struct {
	spec    Spec
	schema  *jsonschema.Schema
	handler Handler
}

// Registry holds the tools an agent may be offered. Validation uses
// github.com/santhosh-tekuri/jsonschema/v6 (full JSON Schema, drafts 4 to
// 2020-12; no remote $ref is ever loaded: schemas must be self-contained).
// Safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]*entry
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{tools: map[string]*entry{}} }

// noLoader refuses every external schema reference.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema reference %s: remote schemas are not loaded", url)
}

// Register adds a tool. Errors wrap ErrInvalidSpec: a bad name, a
// duplicate, a nil handler, an invalid level, timeout or retry count, or
// a schema that does not compile or does not describe an object.
func (r *Registry) Register(s Spec, h Handler) error {
	switch {
	case !toolName.MatchString(s.Name):
		return fmt.Errorf("%w: tool name %q (want 1–64 of A-Z a-z 0-9 _ -)", ErrInvalidSpec, s.Name)
	case h == nil:
		return fmt.Errorf("%w: tool %s has no handler", ErrInvalidSpec, s.Name)
	case !s.Level.Valid():
		return fmt.Errorf("%w: tool %s: level %d (want 0–3)", ErrInvalidSpec, s.Name, s.Level)
	case s.Timeout < 0:
		return fmt.Errorf("%w: tool %s: negative timeout", ErrInvalidSpec, s.Name)
	case s.MaxRetries < 0 || s.MaxRetries > MaxToolRetries:
		return fmt.Errorf("%w: tool %s: maxRetries %d (want 0–%d)", ErrInvalidSpec, s.Name, s.MaxRetries, MaxToolRetries)
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultToolTimeout
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s.Schema))
	if err != nil {
		return fmt.Errorf("%w: tool %s: schema is not JSON: %v", ErrInvalidSpec, s.Name, err)
	}
	if obj, ok := doc.(map[string]any); !ok || obj["type"] != "object" {
		return fmt.Errorf("%w: tool %s: schema must be an object with \"type\": \"object\"", ErrInvalidSpec, s.Name)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	url := "atrium:tool/" + s.Name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return fmt.Errorf("%w: tool %s: schema: %v", ErrInvalidSpec, s.Name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return fmt.Errorf("%w: tool %s: schema: %v", ErrInvalidSpec, s.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[s.Name]; dup {
		return fmt.Errorf("%w: tool %s is already registered", ErrInvalidSpec, s.Name)
	}
	r.tools[s.Name] = &entry{spec: s, schema: sch, handler: h}
	return nil
}

// Spec returns the named tool's spec.
func (r *Registry) Spec(name string) (Spec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	if !ok {
		return Spec{}, false
	}
	return e.spec, true
}

// Specs returns every spec sorted by name.
func (r *Registry) Specs() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Spec, 0, len(r.tools))
	for _, e := range r.tools {
		out = append(out, e.spec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ModelTools returns the model-facing definitions of the tools keep
// accepts (nil keep: all), sorted by name.
func (r *Registry) ModelTools(keep func(Spec) bool) []model.Tool {
	var out []model.Tool
	for _, s := range r.Specs() {
		if keep == nil || keep(s) {
			out = append(out, model.Tool{Name: s.Name, Description: s.Description, Parameters: s.Schema})
		}
	}
	return out
}

// ParseArgs checks that raw is one JSON object (empty or whitespace counts
// as {}) and returns it compacted. An error wraps ErrBadJSON.
func ParseArgs(raw json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if len(t) > MaxArgsBytes {
		return nil, fmt.Errorf("%w: arguments are %d bytes (limit %d)", ErrBadJSON, len(t), MaxArgsBytes)
	}
	if !utf8.Valid(t) {
		return nil, fmt.Errorf("%w: arguments are not UTF-8", ErrBadJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: text after the JSON object", ErrBadJSON)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%w: arguments must be a JSON object", ErrBadJSON)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, t); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	return b.Bytes(), nil
}

// Validate checks args (already ParseArgs'd) against the named tool's
// schema. Errors wrap ErrUnknownTool or ErrInvalidArgs (with the
// validator's message, which names the failing field).
func (r *Registry) Validate(name string, args json.RawMessage) error {
	r.mu.RLock()
	e, ok := r.tools[name]
	r.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	return e.validate(args)
}

func (e *entry) validate(args json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgs, err)
	}
	if err := e.schema.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		msg := err.Error()
		if errors.As(err, &ve) {
			msg = strings.TrimSpace(strings.ReplaceAll(ve.Error(), "atrium:tool/"+e.spec.Name+".json#", ""))
		}
		return fmt.Errorf("%w for %s: %s", ErrInvalidArgs, e.spec.Name, msg)
	}
	return nil
}

// Invoke runs a call that the caller has already permitted: it parses and
// validates the arguments, then runs the handler with the spec's timeout
// per attempt, retrying failures that wrap ErrRetryable up to MaxRetries
// times. It never returns an error: every outcome is a Result (an unknown
// tool or bad arguments are StatusError with Attempts 0). The caller's
// ctx ending stops retries; the Result then says so.
func (r *Registry) Invoke(ctx context.Context, c Call, now func() time.Time) Result {
	if now == nil {
		now = time.Now
	}
	res := Result{CallID: c.ID, Tool: c.Tool}
	r.mu.RLock()
	e, ok := r.tools[c.Tool]
	r.mu.RUnlock()
	if !ok {
		return failed(res, StatusError, fmt.Errorf("%w: %q", ErrUnknownTool, c.Tool))
	}
	args, err := ParseArgs(c.Args)
	if err != nil {
		return failed(res, StatusError, err)
	}
	if err := e.validate(args); err != nil {
		return failed(res, StatusError, err)
	}
	c.Args = args
	start := now()
	defer func() { res.Duration = now().Sub(start) }()
	for attempt := 0; ; attempt++ {
		res.Attempts = attempt + 1
		out, err := e.attempt(ctx, c)
		if err == nil {
			data, merr := encode(out.Data)
			if merr != nil {
				return failed(res, StatusError, fmt.Errorf("tool %s: cannot encode its output: %w", c.Tool, merr))
			}
			res.Status, res.Data, res.LogSummary, res.Images = StatusOK, data, out.LogSummary, out.Images
			if out.Status == StatusAccepted {
				res.Status = StatusAccepted
			}
			if res.LogSummary == "" {
				res.LogSummary = fmt.Sprintf("%s: %d bytes", c.Tool, len(data))
			}
			return res
		}
		switch {
		case errors.Is(err, ErrDenied):
			return failed(res, StatusDenied, err)
		case ctx.Err() != nil:
			return failed(res, StatusError, fmt.Errorf("tool %s stopped: %w", c.Tool, context.Cause(ctx)))
		case errors.Is(err, ErrRetryable) && attempt < e.spec.MaxRetries:
			continue
		}
		if attempt > 0 {
			err = fmt.Errorf("%w (after %d attempts)", err, attempt+1)
		}
		return failed(res, StatusError, err)
	}
}

// attempt runs the handler once under the spec's timeout; a timeout is
// ErrToolTimeout (retryable).
func (e *entry) attempt(ctx context.Context, c Call) (out Output, err error) {
	actx, cancel := context.WithTimeoutCause(ctx, e.spec.Timeout, errAttemptTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s panicked: %v", c.Tool, p)
		}
	}()
	out, err = e.handler(actx, c)
	if err != nil && ctx.Err() == nil && context.Cause(actx) == errAttemptTimeout {
		err = fmt.Errorf("%w: %s took longer than %s: %w", ErrToolTimeout, c.Tool, e.spec.Timeout, ErrRetryable)
	}
	return out, err
}

var errAttemptTimeout = errors.New("tool attempt timed out")

func failed(r Result, st Status, err error) Result {
	r.Status, r.Error = st, err.Error()
	r.LogSummary = fmt.Sprintf("%s %s: %s", r.Tool, st, firstLine(err.Error(), 200))
	return r
}

// encode marshals v without HTML escaping; a json.RawMessage is checked
// and kept.
func encode(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, errors.New("raw output is not JSON")
		}
		return raw, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// firstLine returns s's first line cut at n characters.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}
