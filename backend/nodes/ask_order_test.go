package nodes

import (
	"slices"
	"testing"

	"github.com/atrium-dev/atrium/backend/audit"
)

// auditHook is an Auditor that shows each entry to hook before recording it.
type auditHook struct {
	Auditor
	hook func(audit.Entry)
}

func (a auditHook) Record(e audit.Entry) error {
	a.hook(e)
	return a.Auditor.Record(e)
}

// TestExecAskAuditedBeforeTheNodeHears: the person's decision on an exec
// ask is in the audit log before the asking node can have it — a node
// runs an allowed command the moment its node.exec.ask returns. The audit
// hook looks at the ask's answer channel as the entry is recorded; before
// the fix the decision was already in it.
func TestExecAskAuditedBeforeTheNodeHears(t *testing.T) {
	f := newFixture(t, Options{})
	pa := &pendingAsk{connID: "conn-1", answer: make(chan string, 1),
		ask: ExecAsk{ID: "ask-1", NodeID: "node-1", Command: []string{"rm", "-r", "build"}}}
	var heardFirst []bool
	f.svc.o.Audit = auditHook{Auditor: f.al, hook: func(e audit.Entry) {
		if e.Operation == MethodExecAskAnswer {
			heardFirst = append(heardFirst, len(pa.answer) > 0)
		}
	}}
	for _, d := range []string{DecisionAllowOnce, DecisionDeny} {
		f.svc.mu.Lock()
		f.svc.asks[pa.ask.ID] = pa
		f.svc.mu.Unlock()
		if err := f.svc.Answer(Caller{Role: "admin"}, pa.ask.ID, d); err != nil {
			t.Fatal(err)
		}
		if got := <-pa.answer; got != d {
			t.Fatalf("the node got %q, want %q", got, d)
		}
	}
	if !slices.Equal(heardFirst, []bool{false, false}) {
		t.Fatalf("the node had the decision before it was audited (allow, deny): %v", heardFirst)
	}
	if es := f.audits(MethodExecAskAnswer); len(es) != 2 || es[0].Result != audit.Denied || es[1].Result != audit.Allowed { // newest first
		t.Fatalf("audit %+v", es)
	}
}
