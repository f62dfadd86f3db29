package atrium

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/collab"
)

// TestCollabChain: an ask made while answering a collaboration extends
// that collaboration's chain of roles; asking back a role in the chain, or
// nesting deeper than maxCollabChain, is refused (agents asking each other
// back and forth would run models without end).
func TestCollabChain(t *testing.T) {
	b := newCollabBroker(&App{}, slog.New(slog.DiscardHandler))
	// main asked writer (c-01); writer, answering it, asked editor (c-02).
	b.asks["c-01"] = &collabAsk{c: collab.Collaboration{ID: "c-01", From: "main", To: "writer"}, chain: []string{"main"}}
	b.asks["c-02"] = &collabAsk{c: collab.Collaboration{ID: "c-02", From: "writer", To: "editor"}, chain: []string{"main", "writer"}}
	b.asks["c-03"] = &collabAsk{c: collab.Collaboration{ID: "c-03", From: "editor", To: "critic"}, chain: []string{"main", "writer", "editor"}}
	tests := []struct {
		name    string
		who     acl.Principal
		to      string
		want    string // the chain, or "" when refused
		refusal string
	}{
		{"an ordinary session", acl.Principal{Role: "main", Session: "s-1"}, "writer", "main", ""},
		{"answering c-01", acl.Principal{Role: "writer", Session: "collab-01"}, "editor", "main writer", ""},
		{"asking back the asker", acl.Principal{Role: "writer", Session: "collab-01"}, "main", "", "main is waiting for writer's answer"},
		{"asking back two up", acl.Principal{Role: "editor", Session: "collab-02"}, "main", "", "main → writer → editor → main"},
		{"asking itself", acl.Principal{Role: "main", Session: "s-1"}, "main", "", "waiting"},
		{"third level", acl.Principal{Role: "editor", Session: "collab-02"}, "critic", "main writer editor", ""},
		{"fourth level", acl.Principal{Role: "critic", Session: "collab-03"}, "poet", "", "at most 3 deep"},
		{"a session named like a turn it is not the invited role of", acl.Principal{Role: "poet", Session: "collab-01"}, "main", "poet", ""},
		{"an unknown turn", acl.Principal{Role: "writer", Session: "collab-99"}, "main", "writer", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chain, err := b.collabChain(tc.who, tc.to)
			if tc.refusal != "" {
				if !errors.Is(err, collab.ErrInvalidInput) || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("err = %v, want ErrInvalidInput saying %q", err, tc.refusal)
				}
				return
			}
			if err != nil || strings.Join(chain, " ") != tc.want {
				t.Fatalf("chain %v, err %v; want %q", chain, err, tc.want)
			}
		})
	}
}
