package history

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// Two clients (conversations c1, c2) share one profile timeline: Profile
// sees both, Conversation each one's alone, with the same cursor paging.
func TestConversationDomain(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	var c1 []string
	for i := 0; i < 7; i++ {
		m := msg(i, "s1")
		m.ConversationID = "c2"
		if i%3 != 2 { // 0,1,3,4,6 in c1; 2,5 in c2
			m.ConversationID = "c1"
			c1 = append(c1, m.ID)
		}
		if err := st.Append(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	prof, err := st.Profile(ctx, "main", "", 100)
	if err != nil || len(prof.Messages) != 7 {
		t.Fatalf("profile = %v, %v; want all 7", ids(prof.Messages), err)
	}
	page, err := st.Conversation(ctx, "c1", "", 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ids(page.Messages)); got != fmt.Sprint(c1[2:]) || page.NextBefore != c1[2] {
		t.Fatalf("newest page = %s next %q, want %v next %q", got, page.NextBefore, c1[2:], c1[2])
	}
	if page.Messages[0].ConversationID != "c1" {
		t.Fatalf("conversationId not read back: %+v", page.Messages[0])
	}
	older, err := st.Conversation(ctx, "c1", page.NextBefore, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ids(older.Messages)); got != fmt.Sprint(c1[:2]) || older.NextBefore != "" {
		t.Fatalf("older page = %s next %q, want %v", got, older.NextBefore, c1[:2])
	}
	// A cursor of another conversation is not one of c1's.
	if _, err := st.Conversation(ctx, "c1", "m02", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("foreign cursor: %v, want ErrNotFound", err)
	}
	if _, err := st.Conversation(ctx, "", "", 3); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty conversation: %v, want ErrInvalid", err)
	}
	if p, err := st.Conversation(ctx, "nobody", "", 3); err != nil || len(p.Messages) != 0 {
		t.Fatalf("unknown conversation = %v, %v; want empty", p.Messages, err)
	}

	// Deleting removes the message from both domains; again reports false.
	ok, err := st.Delete(ctx, c1[0])
	if err != nil || !ok {
		t.Fatalf("delete = %v, %v", ok, err)
	}
	if ok, err := st.Delete(ctx, c1[0]); err != nil || ok {
		t.Fatalf("second delete = %v, %v; want false, nil", ok, err)
	}
	prof, _ = st.Profile(ctx, "main", "", 100)
	conv, _ := st.Conversation(ctx, "c1", "", 100)
	for _, m := range append(prof.Messages, conv.Messages...) {
		if m.ID == c1[0] {
			t.Fatalf("deleted message %s still listed", m.ID)
		}
	}
	if len(prof.Messages) != 6 || len(conv.Messages) != len(c1)-1 {
		t.Fatalf("after delete: profile %d, conversation %d messages", len(prof.Messages), len(conv.Messages))
	}
}
