package atrium

import (
	"context"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/model/modeltest"
)

// TestAgentExecAsksTwice runs the exec tool from a chat over the real
// gateway with config.json's default exec approval ("ask"): the person is
// asked for the session's L2 level and then for the command itself; the
// command runs (sandboxed where bwrap is installed) and its output reaches
// the model. A second command in the same session is asked again (exec
// approval "ask" is per command; the L2 grant holds) and, refused, comes
// back to the model as "denied".
func TestAgentExecAsksTwice(t *testing.T) {
	mdl := newScriptModel(t,
		modeltest.Turn{Calls: [][2]string{{"exec", `{"argv":["echo","hello 你好"]}`}}},
		modeltest.Turn{Text: "It printed hello."},
		modeltest.Turn{Calls: [][2]string{{"exec", `{"argv":["echo","again"]}`}}},
		modeltest.Turn{Text: "I was not allowed."},
	)
	env := map[string]string{"OPENAI_BASE_URL": mdl.URL + "/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "scripted"}
	a, _ := startApp(t, func(k string) string { return env[k] })
	must(t, a.Memory.Sync(context.Background()))
	cl := dial(t, a)
	type sendRes struct{ RunID string }
	var kinds []string
	answer := func(allow bool) func(p permissionReq) {
		return func(p permissionReq) {
			kinds = append(kinds, p.Kind+"/"+string(p.Level))
			if p.Tool != "exec" {
				t.Errorf("question for %s", p.Tool)
			}
			cl.ok("agent.permission.answer", map[string]any{"id": p.ID, "allow": allow}, nil)
		}
	}
	var r1 sendRes
	cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": "s-x", "message": "run echo"}, &r1)
	follow(t, cl, r1.RunID, onAsk(t, answer(true)))
	if strings.Join(kinds, ",") != "level/L2,exec/L2" {
		t.Fatalf("questions %v, want the L2 level then the command", kinds)
	}
	res := mdl.Request(1).ToolMessages()
	if len(res) != 1 {
		t.Fatalf("tool results %v", res)
	}
	for _, c := range res {
		if !strings.Contains(c, "hello 你好") {
			t.Fatalf("exec result the model saw: %s", c)
		}
	}

	kinds = nil
	var r2 sendRes
	cl.ok("chat.send", map[string]any{"profileId": "main", "sessionId": "s-x", "message": "again"}, &r2)
	follow(t, cl, r2.RunID, onAsk(t, answer(false)))
	if strings.Join(kinds, ",") != "exec/L2" {
		t.Fatalf("questions %v, want only the command (L2 is granted)", kinds)
	}
	if c := mdl.Request(3).ToolMessages()["call_2_0"]; !strings.Contains(c, `"denied"`) {
		t.Fatalf("refused exec result the model saw: %q", c)
	}
}
