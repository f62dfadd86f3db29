package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
)

func nodeParams() map[string]any {
	p := connectParams(testToken)
	p["role"] = RoleNode
	return p
}

// whoAmI answers with the caller's principal and params.
func whoAmI(_ context.Context, call *Call) (any, error) {
	return map[string]any{"principal": call.Principal.Key(), "params": call.Params}, nil
}

// TestIdempotencyPerPrincipal: results are kept per principal, bound to
// the params, and required on methods with side effects.
func TestIdempotencyPerPrincipal(t *testing.T) {
	_, url := newTestServer(t, Options{}, func(s *Server) {
		s.Handle("thing.do", Write(Everyone), whoAmI)
		s.Handle("thing.get", Read(Everyone), whoAmI)
	})
	op, _ := connect(t, url)
	node, _ := connectWith(t, url, nodeParams())
	principal := func(f frame) string {
		t.Helper()
		if !f.OK {
			t.Fatalf("call failed: %+v", f.Error)
		}
		var p struct{ Principal string }
		if err := json.Unmarshal(f.Payload, &p); err != nil {
			t.Fatal(err)
		}
		return p.Principal
	}
	params := map[string]any{"path": "memory/private.md", "idempotencyKey": "k-1"}
	for _, m := range []string{"thing.do", "thing.get"} {
		if got := principal(op.call("o-"+m, m, params)); got != RoleOperator {
			t.Fatalf("%s: operator got %q", m, got)
		}
		// The node replays the operator's key: it gets its own answer.
		if got := principal(node.call("n-"+m, m, params)); got != RoleNode {
			t.Fatalf("%s: node replaying the operator's key got the answer for %q", m, got)
		}
	}
	// A reused key with other params is refused; the first params still
	// replay.
	other := map[string]any{"path": "memory/other.md", "idempotencyKey": "k-1"}
	if f := op.call("o2", "thing.do", other); f.OK || f.Error.Code != CodeInvalidRequest {
		t.Fatalf("reused key, other params: %+v, want INVALID_REQUEST", f)
	}
	if got := principal(op.call("o3", "thing.do", params)); got != RoleOperator {
		t.Fatalf("replay: %q", got)
	}
	// A method with side effects without a key is refused; a read is not.
	for _, p := range []any{nil, map[string]any{}, map[string]any{"idempotencyKey": ""}, map[string]any{"idempotencyKey": nil}} {
		if f := op.call("o4", "thing.do", p); f.OK || f.Error.Code != CodeInvalidRequest {
			t.Fatalf("no key %v: %+v, want INVALID_REQUEST", p, f)
		}
	}
	if f := op.call("o5", "thing.get", nil); !f.OK {
		t.Fatalf("read without key: %+v", f.Error)
	}
	if f := op.call("o6", "thing.do", map[string]any{"idempotencyKey": 7}); f.OK || f.Error.Code != CodeInvalidRequest {
		t.Fatalf("key of another type: %+v", f)
	}
}

// TestOperatorOnlyMethods: node connections are refused on operator-only
// methods before the handler runs (and OnForbidden hears of it); hello-ok
// lists the kinds.
func TestOperatorOnlyMethods(t *testing.T) {
	var mu sync.Mutex
	var ran, refused []string
	handler := func(_ context.Context, call *Call) (any, error) {
		mu.Lock()
		ran = append(ran, call.Role+" "+call.Method)
		mu.Unlock()
		return nil, nil
	}
	_, url := newTestServer(t, Options{}, func(s *Server) {
		s.Handle("r", Read(Everyone), handler)
		s.Handle("ro", Read(Operators), handler)
		s.Handle("w", Write(Everyone), handler)
		s.Handle("wo", Write(Admin), handler)
		s.OnForbidden(func(call *Call, reason string) {
			mu.Lock()
			refused = append(refused, call.Role+" "+call.Method)
			mu.Unlock()
		})
	})
	op, hello := connect(t, url)
	if !slices.Equal(hello.Features.SideEffects, []string{"w", "wo"}) || !slices.Equal(hello.Features.OperatorOnly, []string{"ro", "wo"}) {
		t.Fatalf("features %+v", hello.Features)
	}
	node, _ := connectWith(t, url, nodeParams())
	key := map[string]string{"idempotencyKey": "k"}
	for _, m := range []string{"r", "ro", "w", "wo"} {
		if f := op.call("o", m, key); !f.OK {
			t.Fatalf("operator %s: %+v", m, f.Error)
		}
		f := node.call("n", m, key)
		if want := m == "r" || m == "w"; f.OK != want || (!want && f.Error.Code != CodeForbidden) {
			t.Fatalf("node %s: %+v", m, f)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"operator r", "node r", "operator ro", "operator w", "node w", "operator wo"}; !slices.Equal(ran, want) {
		t.Fatalf("handlers ran for %v, want %v", ran, want)
	}
	if want := []string{"node ro", "node wo"}; !slices.Equal(refused, want) {
		t.Fatalf("OnForbidden heard %v, want %v", refused, want)
	}
}

func TestHandleNeedsKind(t *testing.T) {
	s, err := New(Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Handle without a kind did not panic")
		}
	}()
	s.Handle("x", Kind{Write: true}, echo)
}
