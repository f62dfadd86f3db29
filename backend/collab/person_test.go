package collab

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/audit"
)

// TestPersonDecides: the ACL decides who accepts (issue 24 item 4). On
// experience.md writer holds collaborate, so writer accepts with the token;
// on notes.md it does not, so only the person does (NeedsPerson), and
// writer's accept is refused. The person accepts, declines and completes
// without a token; a role may not decide for the person; the invited role
// declines with its token; Show gives the person the history and the
// shared view; OnChange hears every change; everything is audited.
func TestPersonDecides(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var seen []Collaboration
	e.svc.o.OnChange = func(c Collaboration) { mu.Lock(); seen = append(seen, c); mu.Unlock() }
	ctx := context.Background()
	person := acl.Principal{Admin: true}

	own := e.request(600, experience)
	if own.Collaboration.NeedsPerson {
		t.Errorf("writer holds collaborate on experience.md, yet NeedsPerson")
	}
	asked := e.request(600, notesFile)
	if !asked.Collaboration.NeedsPerson {
		t.Fatalf("writer lacks collaborate on notes.md, yet not NeedsPerson: %+v", asked.Collaboration)
	}
	if _, err := e.svc.Accept(ctx, writer, asked.ID, asked.Token); !errors.Is(err, ErrForbidden) {
		t.Fatalf("writer accepts what the person must: %v", err)
	}
	for _, who := range []acl.Principal{writer, codeExpert, {Authenticated: true}} {
		if _, err := e.svc.Decide(ctx, who, asked.ID, DecisionAccept, ""); !errors.Is(err, ErrForbidden) {
			t.Errorf("Decide as %+v: %v, want ErrForbidden", who, err)
		}
		if _, err := e.svc.Show(ctx, who, asked.ID); !errors.Is(err, ErrForbidden) {
			t.Errorf("Show as %+v: %v, want ErrForbidden", who, err)
		}
	}
	if _, err := e.svc.Decide(ctx, person, asked.ID, "maybe", ""); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("an unknown decision: %v", err)
	}
	if _, err := e.svc.Decide(ctx, person, asked.ID, DecisionComplete, ""); !errors.Is(err, ErrState) {
		t.Errorf("complete of a pending one: %v", err)
	}
	sh, err := e.svc.Show(ctx, person, asked.ID)
	if err != nil || sh.Shared == nil || len(sh.Collaboration.History) != 1 || !sh.Collaboration.NeedsPerson {
		t.Fatalf("Show: %+v %v", sh, err)
	}
	c, err := e.svc.Decide(ctx, person, asked.ID, DecisionAccept, "go ahead")
	if err != nil || c.Status != StatusAccepted || c.NeedsPerson {
		t.Fatalf("the person accepts: %+v %v", c, err)
	}
	if _, err := e.svc.Decide(ctx, person, asked.ID, DecisionDecline, ""); !errors.Is(err, ErrState) {
		t.Errorf("decline of an accepted one: %v", err)
	}
	c, err = e.svc.Decide(ctx, person, asked.ID, DecisionComplete, "")
	if err != nil || c.Status != StatusCompleted || c.CompletedBy != PersonWriter || c.Result == nil {
		t.Fatalf("the person completes: %+v %v", c, err)
	}
	if _, err := e.svc.Complete(ctx, writer, asked.ID, asked.Token, Result{Output: "late", Importance: 0.1}); !errors.Is(err, ErrState) {
		t.Errorf("complete after the person's: %v", err)
	}

	declined := e.request(600, notesFile)
	if c, err := e.svc.Decide(ctx, person, declined.ID, DecisionDecline, "not now"); err != nil || c.Status != StatusDeclined {
		t.Fatalf("the person declines: %+v %v", c, err)
	}
	if _, err := e.svc.Decide(ctx, person, declined.ID, DecisionAccept, ""); !errors.Is(err, ErrState) {
		t.Errorf("accept after a decline: %v", err)
	}
	if _, err := e.svc.View(ctx, writer, declined.ID, declined.Token, "", 0); !errors.Is(err, ErrState) {
		t.Errorf("view after a decline: %v", err)
	}
	if _, err := e.svc.Decline(ctx, codeExpert, own.ID, own.Token, ""); !errors.Is(err, ErrForbidden) {
		t.Errorf("the requester declines: %v", err)
	}
	if c, err := e.svc.Decline(ctx, writer, own.ID, own.Token, "busy"); err != nil || c.Status != StatusDeclined || c.CompletedBy != "writer" {
		t.Fatalf("writer declines: %+v %v", c, err)
	}
	list, err := e.svc.List(ctx, person, ListFilter{Status: StatusDeclined})
	if err != nil || len(list) != 2 {
		t.Fatalf("declined list: %+v %v", list, err)
	}
	mu.Lock()
	n := len(seen)
	last := seen[n-1]
	mu.Unlock()
	// 3 requests, accept, complete, 2 declines.
	if n != 7 || last.ID != own.ID || last.Status != StatusDeclined || len(last.History) != 2 {
		t.Errorf("OnChange heard %d changes, last %+v", n, last)
	}
	if d, err := e.al.Tail(100, audit.Filter{Operation: OpDecide}); err != nil || len(d) < 9 {
		t.Errorf("collab.decide audited %d times (%v), want at least 9", len(d), err)
	}
}
