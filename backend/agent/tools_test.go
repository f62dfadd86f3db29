package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRegisterRejectsBadSpecs(t *testing.T) {
	h := func(context.Context, Call) (Output, error) { return Output{}, nil }
	obj := json.RawMessage(`{"type":"object"}`)
	cases := map[string]Spec{
		"bad name":      {Name: "no spaces", Schema: obj},
		"empty name":    {Schema: obj},
		"level":         {Name: "x", Schema: obj, Level: 4},
		"retries":       {Name: "x", Schema: obj, MaxRetries: MaxToolRetries + 1},
		"timeout":       {Name: "x", Schema: obj, Timeout: -1},
		"not json":      {Name: "x", Schema: json.RawMessage(`{`)},
		"not object":    {Name: "x", Schema: json.RawMessage(`{"type":"string"}`)},
		"bad schema":    {Name: "x", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"strng"}}}`)},
		"remote $ref":   {Name: "x", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`)},
		"missing $defs": {Name: "x", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/nope"}}}`)},
	}
	for name, s := range cases {
		if err := NewRegistry().Register(s, h); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%s: err %v", name, err)
		}
	}
	r := NewRegistry()
	if err := r.Register(Spec{Name: "x", Schema: obj}, nil); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("nil handler: %v", err)
	}
	if err := r.Register(Spec{Name: "x", Schema: obj}, h); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Spec{Name: "x", Schema: obj}, h); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("duplicate: %v", err)
	}
	if s, _ := r.Spec("x"); s.Timeout != DefaultToolTimeout {
		t.Errorf("default timeout %s", s.Timeout)
	}
}

func TestParseAndValidateArgs(t *testing.T) {
	r := echoRegistry(t)
	for _, bad := range []string{`{"text":`, `[1]`, `"s"`, `{"a":1} {"b":2}`, `{"text":"x"}garbage`, "\xff"} {
		if _, err := ParseArgs(json.RawMessage(bad)); !errors.Is(err, ErrBadJSON) {
			t.Errorf("ParseArgs(%q) = %v", bad, err)
		}
	}
	if a, err := ParseArgs(json.RawMessage("  ")); err != nil || string(a) != "{}" {
		t.Errorf("empty args: %s %v", a, err)
	}
	for args, want := range map[string]string{
		`{}`:                        "text",
		`{"text":5}`:                "string",
		`{"text":"a","n":-1}`:       "minimum",
		`{"text":"a","extra":true}`: "extra",
	} {
		err := r.Validate("echo", json.RawMessage(args))
		if !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%s) = %v, want mention of %q", args, err, want)
		}
	}
	if err := r.Validate("echo", json.RawMessage(`{"text":"a","n":3}`)); err != nil {
		t.Errorf("valid args: %v", err)
	}
	if err := r.Validate("nope", json.RawMessage(`{}`)); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("unknown: %v", err)
	}
}

func TestInvokeRetriesTimeoutsAndStatuses(t *testing.T) {
	r := NewRegistry()
	obj := json.RawMessage(`{"type":"object"}`)
	var flaky, slow atomic.Int32
	must := func(s Spec, h Handler) {
		t.Helper()
		if err := r.Register(s, h); err != nil {
			t.Fatal(err)
		}
	}
	must(Spec{Name: "flaky", Schema: obj, MaxRetries: 2}, func(context.Context, Call) (Output, error) {
		if flaky.Add(1) < 3 {
			return Output{}, fmt.Errorf("busy: %w", ErrRetryable)
		}
		return Output{Data: json.RawMessage(`{"ok":true}`), LogSummary: "fine"}, nil
	})
	must(Spec{Name: "slow", Schema: obj, Timeout: 20 * time.Millisecond, MaxRetries: 1}, func(ctx context.Context, _ Call) (Output, error) {
		slow.Add(1)
		<-ctx.Done()
		return Output{}, ctx.Err()
	})
	must(Spec{Name: "deny", Schema: obj, MaxRetries: 3}, func(context.Context, Call) (Output, error) {
		return Output{}, fmt.Errorf("%w: not yours", ErrDenied)
	})
	must(Spec{Name: "fail", Schema: obj, MaxRetries: 3}, func(context.Context, Call) (Output, error) {
		return Output{}, errors.New("plain failure")
	})
	must(Spec{Name: "later", Schema: obj}, func(context.Context, Call) (Output, error) {
		return Output{Data: map[string]string{"job": "1"}, Status: StatusAccepted}, nil
	})
	must(Spec{Name: "panics", Schema: obj}, func(context.Context, Call) (Output, error) { panic("boom") })

	ctx := context.Background()
	if res := r.Invoke(ctx, Call{ID: "1", Tool: "flaky"}, nil); res.Status != StatusOK || res.Attempts != 3 || string(res.Data) != `{"ok":true}` || res.LogSummary != "fine" {
		t.Errorf("flaky: %+v", res)
	}
	res := r.Invoke(ctx, Call{ID: "2", Tool: "slow"}, nil)
	if res.Status != StatusError || res.Attempts != 2 || slow.Load() != 2 || !strings.Contains(res.Error, "took longer than 20ms") {
		t.Errorf("slow: %+v", res)
	}
	if res := r.Invoke(ctx, Call{ID: "3", Tool: "deny"}, nil); res.Status != StatusDenied || res.Attempts != 1 {
		t.Errorf("deny: %+v", res)
	}
	if res := r.Invoke(ctx, Call{ID: "4", Tool: "fail"}, nil); res.Status != StatusError || res.Attempts != 1 || res.Error != "plain failure" {
		t.Errorf("fail: %+v", res)
	}
	if res := r.Invoke(ctx, Call{ID: "5", Tool: "later"}, nil); res.Status != StatusAccepted {
		t.Errorf("later: %+v", res)
	}
	if res := r.Invoke(ctx, Call{ID: "6", Tool: "panics"}, nil); res.Status != StatusError || !strings.Contains(res.Error, "panicked") {
		t.Errorf("panics: %+v", res)
	}
	if res := r.Invoke(ctx, Call{ID: "7", Tool: "flaky", Args: json.RawMessage(`{`)}, nil); res.Status != StatusError || res.Attempts != 0 {
		t.Errorf("bad json: %+v", res)
	}
}

func TestTruncate(t *testing.T) {
	if s, cut := Truncate("short", 100); s != "short" || cut {
		t.Errorf("short: %q %v", s, cut)
	}
	long := strings.Repeat("头", 500) + "MIDDLE" + strings.Repeat("尾", 500)
	s, cut := Truncate(long, 200)
	if !cut || utf8.RuneCountInString(s) > 200 || !strings.HasPrefix(s, "头头头") || !strings.HasSuffix(s, "尾尾尾") ||
		strings.Contains(s, "MIDDLE") || !strings.Contains(s, "characters cut]") || !utf8.ValidString(s) {
		t.Errorf("cut (%d chars): %q", utf8.RuneCountInString(s), s)
	}
	// The marker counts what was cut: head + tail + cut = the original.
	var n int
	i := strings.Index(s, "…[")
	fmt.Sscanf(s[i+len("…["):], "%d", &n)
	head := utf8.RuneCountInString(s[:i-1]) // minus the "\n" before the marker
	tail := utf8.RuneCountInString(s[strings.LastIndex(s, "]…\n")+len("]…\n"):])
	if head+tail+n != utf8.RuneCountInString(long) {
		t.Errorf("head %d + tail %d + cut %d != %d", head, tail, n, utf8.RuneCountInString(long))
	}
	// ForModel keeps small data as JSON and an error as text.
	out := ForModel(Result{CallID: "c", Status: StatusError, Error: "bad", LogSummary: "x failed", Data: json.RawMessage(`{"a":1}`)}, 100)
	if out != `{"callId":"c","status":"error","summary":"x failed","error":"bad","data":{"a":1}}` {
		t.Errorf("ForModel: %s", out)
	}
}

func TestPermissionsGrantHoldsTenMinutes(t *testing.T) {
	c := newClock()
	var asked []PermissionRequest
	answer := true
	p := NewPermissions(PermissionOptions{Session: "s1", Role: "main", Now: c.Now,
		Asker: AskerFunc(func(ctx context.Context, r PermissionRequest) (bool, error) {
			asked = append(asked, r)
			return answer, nil
		})})
	ctx := context.Background()
	allow := func(l Level) Decision {
		t.Helper()
		d, err := p.Allow(ctx, l, PermissionRequest{Tool: "exec", CallID: "c", ArgsSummary: `{"argv":["ls"]}`})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, l := range []Level{L0, L1} {
		if d := allow(l); !d.Allowed || d.How != "base" {
			t.Errorf("%s: %+v", l, d)
		}
	}
	if len(asked) != 0 {
		t.Fatalf("asked for base levels")
	}
	if d := allow(L2); !d.Allowed || d.How != "asked" || len(asked) != 1 {
		t.Fatalf("first L2: %+v asked %d", d, len(asked))
	}
	q := asked[0]
	if q.Kind != KindLevel || q.Level != L2 || q.Tool != "exec" || q.Session != "s1" || q.Role != "main" || len(q.ID) != 16 ||
		!q.Expires.Equal(c.Now().Add(DefaultAskTimeout)) || q.ArgsSummary == "" {
		t.Errorf("request %+v", q)
	}
	c.Add(DefaultGrantTTL - time.Second)
	if d := allow(L2); !d.Allowed || d.How != "grant" || len(asked) != 1 {
		t.Fatalf("within 10 min: %+v asked %d", d, len(asked))
	}
	if g := p.Grants(); len(g) != 1 || g[0].Level != L2 {
		t.Errorf("grants %+v", g)
	}
	// L3 is its own question: an L2 grant does not cover it.
	answer = false
	if d := allow(L3); d.Allowed || len(asked) != 2 {
		t.Fatalf("L3: %+v", d)
	}
	c.Add(time.Second) // exactly 10 minutes after the grant
	if d := allow(L2); d.Allowed || len(asked) != 3 || len(p.Grants()) != 0 {
		t.Fatalf("after expiry: %+v asked %d", d, len(asked))
	}
	// Read-only sessions ask for L1; no asker means no.
	ro := NewPermissions(PermissionOptions{ReadOnly: true})
	if d, _ := ro.Allow(ctx, L1, PermissionRequest{Tool: "w"}); d.Allowed || d.How != "no asker" {
		t.Errorf("read-only L1: %+v", d)
	}
	if d, _ := ro.Allow(ctx, L0, PermissionRequest{Tool: "r"}); !d.Allowed {
		t.Errorf("read-only L0: %+v", d)
	}
}

func TestPermissionsAskTimeoutAndCancel(t *testing.T) {
	p := NewPermissions(PermissionOptions{AskTimeout: 20 * time.Millisecond, Asker: NewPending(nil)})
	d, err := p.Allow(context.Background(), L2, PermissionRequest{Tool: "exec"})
	if err != nil || d.Allowed || d.How != "no answer in time" {
		t.Fatalf("timeout: %+v %v", d, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Allow(ctx, L2, PermissionRequest{Tool: "exec"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestPendingAsker(t *testing.T) {
	seen := make(chan PermissionRequest, 4)
	q := NewPending(func(r PermissionRequest) { seen <- r })
	p := NewPermissions(PermissionOptions{Asker: q, Role: "writer"})
	type out struct {
		d   Decision
		err error
	}
	done := make(chan out)
	go func() {
		d, err := p.Allow(context.Background(), L3, PermissionRequest{Tool: "web_fetch", ArgsSummary: `{"url":"https://x"}`})
		done <- out{d, err}
	}()
	r := <-seen
	list := q.List()
	if len(list) != 1 || list[0].ID != r.ID || list[0].Tool != "web_fetch" || list[0].Level != L3 || list[0].Role != "writer" {
		t.Fatalf("pending %+v", list)
	}
	if err := q.Answer("nope", true); !errors.Is(err, ErrNoSuchRequest) {
		t.Errorf("unknown id: %v", err)
	}
	if err := q.Answer(r.ID, true); err != nil {
		t.Fatal(err)
	}
	if o := <-done; o.err != nil || !o.d.Allowed {
		t.Fatalf("answer: %+v", o)
	}
	if err := q.Answer(r.ID, true); !errors.Is(err, ErrNoSuchRequest) || len(q.List()) != 0 {
		t.Errorf("answered twice: %v, open %d", err, len(q.List()))
	}
}
