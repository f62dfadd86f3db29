package atrium

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/collab"
	"github.com/atrium-dev/atrium/backend/gateway"
)

// TestCollabPersonMethods: the person's collab.decide and collab.show
// and the invited role's collab.decline over the real gateway (issue 24
// item 4), with who may call them: the person at the desktop (operator
// token, no `as`) and a paired operator device scoped admin decide; the
// same connection acting `as` a role, devices scoped to a role or
// `authenticated`, a node and an unpaired (pending) device are FORBIDDEN,
// each refusal audited. The invited role's own accept is refused where
// the ACL leaves it to the person; collab.changed reaches the person.
func TestCollabPersonMethods(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, map[string]string{
		"memory/.acl":                      seedRules + "  roles/code-expert/plan.md:       {read: [code-expert, writer, admin], write: [code-expert], collaborate: [code-expert]}\n",
		"memory/roles/code-expert/plan.md": "# Plan\n\nShip on Friday.\n",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	op := gwDial(ctx, t, a, gateway.RoleOperator, "person-op")
	must(t, op.Call(ctx, "memory.sync", nil, nil))
	watch := gwDial(ctx, t, a, gateway.RoleOperator, "person-watch")
	nextChange := func() collab.Collaboration {
		t.Helper()
		for {
			select {
			case f := <-watch.Events():
				var c collab.Collaboration
				if f.Event == "collab.changed" && json.Unmarshal(f.Payload, &c) == nil {
					return c
				}
			case <-ctx.Done():
				t.Fatal("no collab.changed")
			}
		}
	}
	request := func(file string) collab.Requested {
		t.Helper()
		var r collab.Requested
		must(t, op.Call(ctx, "collab.request", map[string]any{"as": "code-expert", "to": "writer", "task": "review", "context": []string{file}, "ttl": 600}, &r))
		return r
	}
	plan := request("memory/roles/code-expert/plan.md")
	if !plan.Collaboration.NeedsPerson {
		t.Fatalf("writer lacks collaborate on plan.md, yet needsPerson is false: %+v", plan.Collaboration)
	}
	if c := nextChange(); c.ID != plan.ID || !c.NeedsPerson || c.Status != collab.StatusPending {
		t.Errorf("collab.changed %+v", c)
	}
	err := op.Call(ctx, "collab.accept", map[string]any{"as": "writer", "collabId": plan.ID, "token": plan.Token}, nil)
	if errCode(err) != gateway.CodeForbidden {
		t.Errorf("writer accepts what the person must: %v", err)
	}

	key, toks := pairDevice(ctx, t, a, op, []string{gateway.RoleOperator}, nil)
	adminPhone, err := deviceDial(ctx, t, a, key, gateway.ClientOptions{DeviceToken: toks[gateway.RoleOperator], Role: gateway.RoleOperator})
	must(t, err)
	must(t, op.Call(ctx, "device.scope.set", map[string]any{"deviceId": key.Public().ID(), "scope": "admin"}, nil))
	writerKey, writerToks := pairDevice(ctx, t, a, op, []string{gateway.RoleOperator}, nil)
	must(t, op.Call(ctx, "device.scope.set", map[string]any{"deviceId": writerKey.Public().ID(), "scope": "role:writer"}, nil))
	writerPhone, err := deviceDial(ctx, t, a, writerKey, gateway.ClientOptions{DeviceToken: writerToks[gateway.RoleOperator], Role: gateway.RoleOperator})
	must(t, err)
	others := devicePrincipals(ctx, t, a) // operator device scoped authenticated, node device, unpaired
	node := gwDial(ctx, t, a, gateway.RoleNode, "person-node")

	type refusal struct {
		name    string
		conn    *gateway.Client
		params  map[string]any
		auditAs string
	}
	decide := map[string]any{"collabId": plan.ID, "decision": "accept"}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{k: v}
		for kk, vv := range m {
			out[kk] = vv
		}
		return out
	}
	refusals := []refusal{
		{"admin acting as the invited role", op, with(decide, "as", "writer"), "writer"},
		{"admin acting as the requester", op, with(decide, "as", "code-expert"), "code-expert"},
		{"device scoped role:writer", writerPhone, decide, "writer"},
		{"device scoped authenticated", others[0].cl, decide, "authenticated"},
		{"node device", others[1].cl, decide, "authenticated"},
		{"unpaired device", others[2].cl, decide, "anonymous"},
		{"local node", node, decide, "authenticated"},
	}
	for _, method := range []string{"collab.decide", "collab.show"} {
		for _, r := range refusals {
			err := r.conn.Call(ctx, method, r.params, nil)
			if errCode(err) != gateway.CodeForbidden {
				t.Errorf("%s by %s: %v, want FORBIDDEN", method, r.name, err)
				continue
			}
			e, terr := a.Audit.Tail(1, audit.Filter{})
			if terr != nil || len(e) != 1 || e[0].Result != audit.Denied || e[0].Role != r.auditAs {
				t.Errorf("%s by %s: audit %+v %v, want denied by %s", method, r.name, e, terr, r.auditAs)
			}
		}
	}
	for _, r := range refusals[3:] { // collab.decline: only the invited role with its token
		if err := r.conn.Call(ctx, "collab.decline", map[string]any{"collabId": plan.ID, "token": plan.Token}, nil); errCode(err) != gateway.CodeForbidden {
			t.Errorf("collab.decline by %s: %v, want FORBIDDEN", r.name, err)
		}
	}
	if err := op.Call(ctx, "collab.decline", map[string]any{"collabId": plan.ID, "token": plan.Token}, nil); errCode(err) != gateway.CodeForbidden {
		t.Errorf("collab.decline by admin without as: %v, want FORBIDDEN", err)
	}
	if err := op.Call(ctx, "collab.decide", map[string]any{"decision": "accept"}, nil); errCode(err) != gateway.CodeInvalidRequest {
		t.Errorf("collab.decide without collabId: %v", err)
	}

	// The person: show, accept at the desktop; a second one declined on
	// the admin-scoped phone; a third declined by writer itself.
	var shown collab.Shown
	must(t, op.Call(ctx, "collab.show", map[string]any{"collabId": plan.ID}, &shown))
	if shown.Shared == nil || len(shown.Shared.Context) != 1 || len(shown.Collaboration.History) != 1 {
		t.Errorf("collab.show: %+v", shown)
	}
	var res struct{ Collaboration collab.Collaboration }
	must(t, op.Call(ctx, "collab.decide", decide, &res))
	if res.Collaboration.Status != collab.StatusAccepted {
		t.Errorf("accepted: %+v", res.Collaboration)
	}
	second := request("memory/roles/code-expert/plan.md")
	must(t, adminPhone.Call(ctx, "collab.decide", map[string]any{"collabId": second.ID, "decision": "decline", "reason": "不是现在"}, &res))
	if res.Collaboration.Status != collab.StatusDeclined || res.Collaboration.CompletedBy != collab.PersonWriter {
		t.Errorf("declined on the phone: %+v", res.Collaboration)
	}
	third := request("memory/roles/code-expert/experience.md")
	must(t, writerPhone.Call(ctx, "collab.decline", map[string]any{"as": "writer", "collabId": third.ID, "token": third.Token}, &res))
	if res.Collaboration.Status != collab.StatusDeclined || res.Collaboration.CompletedBy != "writer" {
		t.Errorf("declined by writer: %+v", res.Collaboration)
	}
	if err := op.Call(ctx, "collab.decide", map[string]any{"collabId": third.ID, "decision": "accept"}, nil); errCode(err) != gateway.CodeConflict {
		t.Errorf("accept after a decline: %v, want CONFLICT", err)
	}
	must(t, op.Call(ctx, "collab.decide", map[string]any{"collabId": plan.ID, "decision": "complete", "reason": "done by hand"}, &res))
	if res.Collaboration.Status != collab.StatusCompleted || res.Collaboration.Result == nil || res.Collaboration.Result.Output != "done by hand" {
		t.Errorf("completed by the person: %+v", res.Collaboration)
	}
}
