package chat

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestHeartbeatAck(t *testing.T) {
	long := strings.Repeat("x", HeartbeatAckMaxChars+1)
	for in, want := range map[string]bool{
		"HEARTBEAT_OK":                        true,
		"  HEARTBEAT_OK.\n":                   true,
		"**HEARTBEAT_OK**":                    true,
		"All quiet. HEARTBEAT_OK":             true,
		"HEARTBEAT_OK — nothing new today":    true,
		"Your 3 pm meeting moved to 4 pm.":    false,
		"Say HEARTBEAT_OK when nothing is up": false, // in the middle: not an acknowledgement
		"HEARTBEAT_OK " + long:                false, // too much besides the token
		"":                                    false,
	} {
		if got := IsHeartbeatAck(in); got != want {
			t.Errorf("IsHeartbeatAck(%q) = %v, want %v", in, got, want)
		}
	}
	if got, ok := StripHeartbeatOK("HEARTBEAT_OK\n" + long); !ok || got != long {
		t.Errorf("StripHeartbeatOK kept %q (%v)", got, ok)
	}
}

// TestHeartbeatTurn (issue 24 item 7): a heartbeat turn sends the prompt
// to main's model in its own session; an answer of HEARTBEAT_OK ends with
// a silent chat.final and leaves history untouched; another answer is
// stored as main's message (the prompt never is) and every event of both
// runs says heartbeat.
func TestHeartbeatTurn(t *testing.T) {
	ms := newModelServer(t, answer("HEARTBEAT_", "OK"), answer("Your 3 pm meeting moved to 4 pm."))
	e := newEnv(t, ms.provider(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	quiet, err := e.svc.Heartbeat(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !quiet.Silent || quiet.Outcome != "final" || quiet.Answer != "" {
		t.Fatalf("HEARTBEAT_OK turn = %+v, want silent final", quiet)
	}
	msgs := wireMessages(ms.body(0))
	if last := msgs[len(msgs)-1]; last["role"] != "user" || last["content"] != DefaultHeartbeatPrompt {
		t.Fatalf("model got %v last, want the heartbeat prompt", last)
	}
	for _, ev := range e.rec.runEvents(t, quiet.RunID) {
		if !ref(ev.payload).Heartbeat {
			t.Errorf("event %s of a heartbeat run lacks heartbeat:true", ev.name)
		}
		if f, ok := ev.payload.(FinalEvent); ok && !f.Silent {
			t.Errorf("final event of HEARTBEAT_OK not silent: %+v", f)
		}
	}
	if page, err := e.svc.History(ctx, ProfileMain, "", 10); err != nil || len(page.Messages) != 0 {
		t.Fatalf("history after a silent heartbeat = %+v, %v; want empty", page.Messages, err)
	}

	loud, err := e.svc.Heartbeat(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if loud.Silent || loud.Answer != "Your 3 pm meeting moved to 4 pm." {
		t.Fatalf("heartbeat with news = %+v", loud)
	}
	evs := e.rec.runEvents(t, loud.RunID)
	final, ok := evs[len(evs)-1].payload.(FinalEvent)
	if !ok || final.Silent || !final.Heartbeat || final.Message.Content != loud.Answer {
		t.Fatalf("terminal event %+v, want a shown heartbeat final", evs[len(evs)-1])
	}
	page, err := e.svc.History(ctx, ProfileMain, "", 10)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Role != "assistant" || page.Messages[0].Content != loud.Answer {
		t.Fatalf("history = %+v, %v; want only the heartbeat's answer", page.Messages, err)
	}
}
