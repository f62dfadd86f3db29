package atrium

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/collab"
)

// TestCollabTurnEndsBeforeSendReturns: the invited role's turn may answer,
// and its chat.final reach the broker, before chat.send has returned to
// the broker — a fast model on a loaded machine. The collaboration still
// completes with the answer. The broker's send is wrapped to return only
// once the collaboration completed (or after a bound): before the fix the
// broker learned which answer was the turn's from Send's result, too late,
// and the collaboration stayed accepted until it expired.
func TestCollabTurnEndsBeforeSendReturns(t *testing.T) {
	a, ws := startApp(t, func(string) string { return "" })
	seedWorkspace(t, a, ws, map[string]string{
		"memory/.acl":                          seedRules + "  roles/code-expert/for-main.md:   {read: [code-expert, main, admin], write: [code-expert], collaborate: [code-expert, main]}\n",
		"memory/roles/code-expert/for-main.md": "# For main\n\nThe build takes four minutes.\n",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	who := acl.Principal{Role: "code-expert", Session: "s-turn"}

	send := a.collabs.send
	a.collabs.send = func(sctx context.Context, r chat.SendRequest) (chat.SendResult, error) {
		res, err := send(sctx, r)
		if err != nil {
			return res, err
		}
		id := "c-" + strings.TrimPrefix(r.SessionID, collabTurnPrefix)
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second) // the bound when the answer is lost
		defer wcancel()
		if c, err := a.collabs.Wait(wctx, who, id); err != nil || c.Status != collab.StatusCompleted {
			t.Errorf("the turn's run ended before Send returned, and the collaboration is %q (%v), not completed", c.Status, err)
		}
		return res, nil
	}
	c, err := a.collabs.Ask(ctx, who, collab.Request{To: "main", Task: "How long does the build take?",
		Context: []string{"memory/roles/code-expert/for-main.md"}, TTL: 600}, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	done, err := a.collabs.Wait(ctx, who, c.ID)
	if err != nil || done.Status != collab.StatusCompleted {
		t.Fatalf("collaboration %+v, %v: want completed by main's answer", done, err)
	}
	a.collabs.mu.Lock()
	defer a.collabs.mu.Unlock()
	if len(a.collabs.turns) != 0 || len(a.collabs.byMsg) != 0 {
		t.Errorf("the ended turn is still tracked: turns %v, byMsg %v", a.collabs.turns, a.collabs.byMsg)
	}
}
