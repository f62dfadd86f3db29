//go:build unix

package atrium

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/collab"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// TestAgentsCollaborate: two agents on scripted model servers collaborate
// through the ask_role tool (issue 24 item 4). main's model asks role
// writer; the ACL lets writer collaborate on the brief, so writer's
// instance (spawned for it) accepts, gets the task as a visible turn in a
// session of its own, its model answers, the answer completes the
// collaboration, and main's next model request carries it. A second ask
// about main's own config (writer may not collaborate on it) waits for the
// person: the bounded wait ends with "still waiting for the person …
// collaboration id", the person accepts over the gateway (collab.decide),
// and writer answers all the same; a third the person declines, and main's
// model is told so. Every step is broadcast as collab.changed.
func TestAgentsCollaborate(t *testing.T) {
	writerModel := newScriptModel(t,
		modeltest.Turn{Text: "Release line: Atrium 1.0 ships on Friday. (writer)"},
		modeltest.Turn{Text: "Plan reviewed: looks fine. (writer)"},
	)
	mainModel := newScriptModel(t,
		modeltest.Turn{Calls: [][2]string{{"ask_role", `{"action":"ask","role":"writer","task":"Write one line announcing the release.","context":["memory/global/brief.md"],"waitSeconds":120}`}}},
		modeltest.Turn{Text: "The writer wrote the line."},
		modeltest.Turn{Calls: [][2]string{{"ask_role", `{"action":"ask","role":"writer","task":"Review my plan.","waitSeconds":1}`}}},
		modeltest.Turn{Text: "Waiting for the person."},
		modeltest.Turn{Calls: [][2]string{{"ask_role", `{"action":"ask","role":"writer","task":"Proofread my diary.","waitSeconds":120}`}}},
		modeltest.Turn{Text: "Declined, fine."},
	)
	env := map[string]string{"OPENAI_BASE_URL": mainModel.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "scripted"}
	a, ws := startApp(t, func(k string) string { return env[k] })
	writeFiles(t, ws, map[string]string{
		"memory/.acl": `version: "1.0"
rules:
  global/brief.md: {read: ["*"], write: [admin, main], collaborate: [main, writer]}
  global/**:       {read: ["*"], write: [admin, main], collaborate: [admin, main]}
  roles/main/**:   {read: [main, admin], write: [main, admin], collaborate: [main, admin]}
  roles/writer/**: {read: [writer, admin], write: [writer, admin], collaborate: [writer, admin]}
`,
		"memory/global/brief.md":      "# Brief\n\nAtrium 1.0 ships on Friday.\n",
		"memory/roles/main/config.md": "---\ndescription: main\n---\nYou are main.\n",
		"memory/roles/writer/config.md": "---\ndescription: writer\nmodel: {provider: openai, baseUrl: \"" + writerModel.URL + "/v1\", model: scripted-writer}\n---\n" +
			"You are the writer.\n",
	})
	must(t, a.ACL.Load(ws+"/memory/.acl"))
	must(t, a.Memory.Sync(context.Background()))
	cl := dial(t, a)
	person := dial(t, a)

	send := func(session, text string) runEvents {
		t.Helper()
		var sent struct{ RunID string }
		cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": session, "message": text}, &sent)
		ev := follow(t, cl, sent.RunID, nil)
		if ev.named("chat.final") == nil {
			t.Fatalf("run did not end with chat.final: %v", ev.frames)
		}
		return ev
	}
	changed := func(match func(c collab.Collaboration) bool) collab.Collaboration {
		t.Helper()
		var c collab.Collaboration
		person.waitEvent("collab.changed", func(p json.RawMessage) bool {
			return json.Unmarshal(p, &c) == nil && match(c)
		})
		return c
	}

	// 1: the ACL lets writer collaborate on the brief: no person needed.
	send("s-1", "Ask the writer for a release line.")
	if n := writerModel.Count(); n != 1 {
		t.Fatalf("writer's model got %d requests, want 1", n)
	}
	if !strings.Contains(writerModel.Body(0), "Write one line announcing the release.") || !strings.Contains(writerModel.Body(0), "You are the writer.") {
		t.Errorf("writer's model did not get the task in writer's persona: %s", writerModel.Body(0))
	}
	res := mainModel.Request(1).ToolMessages()
	if len(res) != 1 {
		t.Fatalf("main's second request carries %d tool results: %s", len(res), mainModel.Body(1))
	}
	for _, content := range res {
		if !strings.Contains(content, "Atrium 1.0 ships on Friday. (writer)") || !strings.Contains(content, `"status":"completed"`) {
			t.Errorf("main's model got %s", content)
		}
	}
	done := changed(func(c collab.Collaboration) bool { return c.Status == collab.StatusCompleted })
	if done.From != "main" || done.To != "writer" || done.Result == nil || done.CompletedBy != "writer" || len(done.History) != 3 {
		t.Errorf("first collaboration: %+v", done)
	}
	// Writer's turn is visible: its session holds the task and the answer.
	var hist struct {
		Messages []struct{ Role, Content, SessionID string }
	}
	cl.ok("history.profile", map[string]any{"profileId": "writer-1"}, &hist)
	seen := false
	for _, m := range hist.Messages {
		seen = seen || (m.Role == "user" && strings.Contains(m.Content, "[Collaboration "+done.ID+"]") && m.SessionID == "collab-"+strings.TrimPrefix(done.ID, "c-"))
	}
	if !seen {
		t.Errorf("writer-1's history does not show the task: %+v", hist.Messages)
	}

	// 2: main's own config: writer may not collaborate on it, the person accepts.
	send("s-2", "Ask the writer to review my plan.")
	res = mainModel.Request(3).ToolMessages()
	var waiting string
	for _, content := range res {
		waiting = content
	}
	pending := changed(func(c collab.Collaboration) bool { return c.Status == collab.StatusPending && c.NeedsPerson })
	if !strings.Contains(waiting, "still waiting for the person to accept, collaboration id "+pending.ID) {
		t.Fatalf("the bounded wait said %s", waiting)
	}
	person.ok("collab.decide", map[string]any{"collabId": pending.ID, "decision": "accept"}, nil)
	answered := changed(func(c collab.Collaboration) bool { return c.ID == pending.ID && c.Status == collab.StatusCompleted })
	if answered.Result == nil || !strings.Contains(answered.Result.Output, "Plan reviewed") {
		t.Errorf("the accepted collaboration: %+v", answered)
	}

	// 3: the person declines; main's model is told.
	declined := make(chan gateway.ResponseFrame, 1)
	var sent struct{ RunID string }
	cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": "s-3", "message": "Ask the writer to proofread my diary."}, &sent)
	go func() { // the person answers while the run waits
		c := changed(func(c collab.Collaboration) bool { return c.Status == collab.StatusPending && c.NeedsPerson })
		declined <- person.call("collab.decide", map[string]any{"collabId": c.ID, "decision": "decline", "reason": "private"})
	}()
	if ev := follow(t, cl, sent.RunID, nil); ev.named("chat.final") == nil {
		t.Fatalf("run did not end with chat.final: %v", ev.frames)
	}
	select {
	case r := <-declined:
		if !r.OK {
			t.Fatalf("collab.decide decline: %+v", r.Error)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the person's decline did not return within 60 s")
	}
	for _, content := range mainModel.Request(5).ToolMessages() {
		if !strings.Contains(content, `"status":"declined"`) || !strings.Contains(content, "the person declined") {
			t.Errorf("main's model got %s after the decline", content)
		}
	}
	if n := writerModel.Count(); n != 2 {
		t.Errorf("writer's model got %d requests, want 2 (nothing for the declined one)", n)
	}
	var list struct{ Collaborations []collab.Collaboration }
	cl.ok("collab.list", map[string]any{}, &list)
	if len(list.Collaborations) != 3 || list.Collaborations[0].Status != collab.StatusDeclined {
		t.Errorf("collab.list: %+v", list.Collaborations)
	}
}

// TestAgentAskingBackIsRefused: writer, answering main's collaboration,
// asks main back through ask_role; the ask is refused (main is waiting for
// writer's answer), writer's model is told so and answers, and that
// answer reaches main. Without the refusal each agent's ask would start
// another model run of the other, without end.
func TestAgentAskingBackIsRefused(t *testing.T) {
	writerModel := newScriptModel(t,
		modeltest.Turn{Calls: [][2]string{{"ask_role", `{"action":"ask","role":"main","task":"What should the release line say?","context":["memory/global/brief.md"],"waitSeconds":5}`}}},
		modeltest.Turn{Text: "Atrium 1.0 ships on Friday. (writer, on its own)"},
	)
	mainModel := newScriptModel(t,
		modeltest.Turn{Calls: [][2]string{{"ask_role", `{"action":"ask","role":"writer","task":"Write one line announcing the release.","context":["memory/global/brief.md"],"waitSeconds":120}`}}},
		modeltest.Turn{Text: "The writer wrote the line."},
	)
	env := map[string]string{"OPENAI_BASE_URL": mainModel.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "scripted"}
	a, ws := startApp(t, func(k string) string { return env[k] })
	writeFiles(t, ws, map[string]string{
		"memory/.acl": `version: "1.0"
rules:
  global/**:       {read: ["*"], write: [admin, main], collaborate: [admin, main, writer]}
  roles/main/**:   {read: [main, admin], write: [main, admin], collaborate: [main, admin]}
  roles/writer/**: {read: [writer, admin], write: [writer, admin], collaborate: [writer, admin]}
`,
		"memory/global/brief.md":      "# Brief\n\nAtrium 1.0 ships on Friday.\n",
		"memory/roles/main/config.md": "---\ndescription: main\n---\nYou are main.\n",
		"memory/roles/writer/config.md": "---\ndescription: writer\nmodel: {provider: openai, baseUrl: \"" + writerModel.URL + "/v1\", model: scripted-writer}\n---\n" +
			"You are the writer.\n",
	})
	must(t, a.ACL.Load(ws+"/memory/.acl"))
	must(t, a.Memory.Sync(context.Background()))
	cl := dial(t, a)

	var sent struct{ RunID string }
	cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": "s-1", "message": "Ask the writer for a release line."}, &sent)
	if ev := follow(t, cl, sent.RunID, nil); ev.named("chat.final") == nil {
		t.Fatalf("run did not end with chat.final: %v", ev.frames)
	}
	if n := writerModel.Count(); n != 2 {
		t.Fatalf("writer's model got %d requests, want 2 (the task, then the refused ask's result)", n)
	}
	told := toolText(writerModel.Request(1).ToolMessages())
	if !strings.Contains(told, "main is waiting for writer's answer") {
		t.Errorf("writer's model was told %q, want the refusal", told)
	}
	if n := mainModel.Count(); n != 2 {
		t.Fatalf("main's model got %d requests, want 2 (asking back must not start a run of main)", n)
	}
	if got := toolText(mainModel.Request(1).ToolMessages()); !strings.Contains(got, "(writer, on its own)") {
		t.Errorf("main's model got %s, want writer's answer", got)
	}
}

// toolText joins a model request's tool results (by call id).
func toolText(byCall map[string]string) string {
	var b strings.Builder
	for _, content := range byCall {
		b.WriteString(content + "\n")
	}
	return b.String()
}
