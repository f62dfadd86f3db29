package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/collab"
	"github.com/atrium-dev/atrium/backend/memory"
)

// AskRole is the collaboration tool's name (issue 24 item 4, SPEC §5.4):
// an agent asks another role for help on its own.
const AskRole = "ask_role"

// Collaborations is what the ask_role tool needs of the app: it opens a
// collaboration as the agent's role, has the invited role's instance
// answer the task as a visible turn, and keeps the collaboration's token
// (the tool never sees it). The wiring's collaboration broker implements
// it (backend/atrium collabs.go).
type Collaborations interface {
	// Ask opens a collaboration from who.Role (collab.Request: who.Role
	// must hold collaborate on every context file; an empty context
	// means the broker's default) and starts it: the invited role's agent
	// accepts where the ACL lets it, else the person is asked.
	// importance in [0,1] is the result's importance once answered.
	// Errors: package collab's (ErrForbidden, ErrInvalidInput,
	// ErrNotFound) or the broker's.
	Ask(ctx context.Context, who acl.Principal, r collab.Request, importance float64) (collab.Collaboration, error)
	// Wait waits until collaboration id, asked by who, is completed,
	// declined or expired, or ctx is done (then it returns its state
	// then and no error). Errors: collab.ErrNotFound (not one of who's,
	// or unknown to the broker, e.g. after a restart).
	Wait(ctx context.Context, who acl.Principal, id string) (collab.Collaboration, error)
	// View is the shared view of an open collaboration of who's
	// (collab.Service.View with its token).
	View(ctx context.Context, who acl.Principal, id, query string) (collab.View, error)
	// Write writes a context file through an accepted collaboration of
	// who's (collab.Service.Write with its token).
	Write(ctx context.Context, who acl.Principal, id string, w collab.WriteRequest) (memory.WriteResult, error)
}

// CollabOptions configure the ask_role tool.
type CollabOptions struct {
	// Collaborations is the broker. Required.
	Collaborations Collaborations
	// Wait bounds how long one call waits for the answer (or for the
	// person's acceptance, then the answer); after it the tool answers
	// "still working, collaboration id X" and the agent may call action
	// wait later. Default DefaultCollabWait (2 min); the model may ask for
	// less with waitSeconds.
	Wait time.Duration
}

// DefaultCollabWait is CollabOptions.Wait's default.
const DefaultCollabWait = 2 * time.Minute

// DefaultCollabImportance is a result's importance when the model names
// none (at or below 0.7: no summary in global memory).
const DefaultCollabImportance = 0.5

type collabTool struct {
	e *env
	o CollabOptions
}

func newCollabTool(e *env, o CollabOptions) (*collabTool, error) {
	if o.Collaborations == nil {
		return nil, errors.New("tools: CollabOptions.Collaborations is required")
	}
	if o.Wait <= 0 {
		o.Wait = DefaultCollabWait
	}
	return &collabTool{e: e, o: o}, nil
}

const collabSchema = `{"type":"object","properties":{` +
	`"action":{"type":"string","enum":["ask","wait","view","write"]},` +
	`"role":{"type":"string","maxLength":64,"description":"ask: the role to ask"},` +
	`"task":{"type":"string","maxLength":4000,"description":"ask: what you need, self-contained"},` +
	`"context":{"type":"array","items":{"type":"string","maxLength":512},"maxItems":32,"description":"ask: memory files it is about (default your config.md)"},` +
	`"ttlSeconds":{"type":"integer","minimum":60,"maximum":604800},` +
	`"importance":{"type":"number","minimum":0,"maximum":1,"description":"ask: above 0.7 the result is summarised in global memory (default 0.5)"},` +
	`"waitSeconds":{"type":"integer","minimum":1,"maximum":600},` +
	`"collabId":{"type":"string","maxLength":64},` +
	`"query":{"type":"string","maxLength":4000,"description":"view: search the shared memory"},` +
	`"path":{"type":"string","maxLength":512,"description":"write: a context file"},` +
	`"content":{"type":"string"},` +
	`"mode":{"type":"string","enum":["append","replace"]}` +
	`},"required":["action"],"additionalProperties":false}`

func (ct *collabTool) register(r *agent.Registry) error {
	return r.Register(agent.Spec{Name: AskRole, Level: agent.L1, Schema: json.RawMessage(collabSchema),
		// ask waits at most Wait (the person's acceptance included).
		Timeout: ct.o.Wait + 30*time.Second,
		Description: "Ask another role for help (ask): its answer is the result; the person may have to accept first. " +
			"If it takes longer, you get the collaboration id: call wait with it. view: the shared memory; write: a context file."}, ct.run)
}

type collabArgs struct {
	Action      string   `json:"action"`
	Role        string   `json:"role"`
	Task        string   `json:"task"`
	Context     []string `json:"context"`
	TTLSeconds  int      `json:"ttlSeconds"`
	Importance  *float64 `json:"importance"`
	WaitSeconds int      `json:"waitSeconds"`
	CollabID    string   `json:"collabId"`
	Query       string   `json:"query"`
	Path        string   `json:"path"`
	Content     string   `json:"content"`
	Mode        string   `json:"mode"`
}

// collabAnswer is the tool's result: the collaboration's state, and the
// other role's answer once there is one, or a note saying what happens
// next.
type collabAnswer struct {
	CollabID  string   `json:"collabId"`
	Role      string   `json:"role"`
	Status    string   `json:"status"`
	Answer    string   `json:"answer,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
	ExpiresAt string   `json:"expiresAt,omitempty"`
	Note      string   `json:"note,omitempty"`
}

func (ct *collabTool) run(ctx context.Context, c agent.Call) (agent.Output, error) {
	var a collabArgs
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return agent.Output{}, fmt.Errorf("ask_role: %w", err)
	}
	who := ct.e.p
	switch a.Action {
	case "ask":
		imp := DefaultCollabImportance
		if a.Importance != nil {
			imp = *a.Importance
		}
		co, err := ct.o.Collaborations.Ask(ctx, who, collab.Request{From: who.Role, To: a.Role, Task: a.Task, Context: a.Context, TTL: a.TTLSeconds}, imp)
		if err != nil {
			return agent.Output{}, collabErr(err)
		}
		return ct.wait(ctx, co.ID, a.WaitSeconds)
	case "wait":
		if a.CollabID == "" {
			return agent.Output{}, errors.New("ask_role: wait needs collabId")
		}
		return ct.wait(ctx, a.CollabID, a.WaitSeconds)
	case "view":
		if a.CollabID == "" {
			return agent.Output{}, errors.New("ask_role: view needs collabId")
		}
		v, err := ct.o.Collaborations.View(ctx, who, a.CollabID, a.Query)
		if err != nil {
			return agent.Output{}, collabErr(err)
		}
		return agent.Output{Data: v, LogSummary: fmt.Sprintf("shared view of %s: %d files, %d context files, %d results", a.CollabID, len(v.Files), len(v.Context), len(v.Results))}, nil
	case "write":
		if a.CollabID == "" || a.Path == "" {
			return agent.Output{}, errors.New("ask_role: write needs collabId and path")
		}
		if a.Mode == "" {
			a.Mode = memory.WriteAppend
		}
		res, err := ct.o.Collaborations.Write(ctx, who, a.CollabID, collab.WriteRequest{Path: a.Path, Content: a.Content, Mode: a.Mode})
		if err != nil {
			return agent.Output{}, collabErr(err)
		}
		return agent.Output{Data: res, LogSummary: fmt.Sprintf("wrote %s through %s", res.Path, a.CollabID)}, nil
	}
	return agent.Output{}, fmt.Errorf("ask_role: unknown action %q (ask, wait, view or write)", a.Action)
}

// wait waits (bounded) for collaboration id and says where it stands.
func (ct *collabTool) wait(ctx context.Context, id string, seconds int) (agent.Output, error) {
	d := ct.o.Wait
	if s := time.Duration(seconds) * time.Second; seconds > 0 && s < d {
		d = s
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	co, err := ct.o.Collaborations.Wait(wctx, ct.e.p, id)
	if err != nil {
		return agent.Output{}, collabErr(err)
	}
	ans := collabAnswer{CollabID: co.ID, Role: co.To, Status: string(co.Status)}
	if co.Status == collab.StatusPending || co.Status == collab.StatusAccepted {
		ans.ExpiresAt = co.ExpiresAt.Format(time.RFC3339)
	}
	switch co.Status {
	case collab.StatusCompleted:
		if co.Result != nil {
			ans.Answer, ans.Artifacts = co.Result.Output, co.Result.Artifacts
		}
		if co.CompletedBy == collab.PersonWriter {
			ans.Note = "the person closed this collaboration"
		}
		return agent.Output{Data: ans, LogSummary: fmt.Sprintf("%s answered (%s)", co.To, co.ID)}, nil
	case collab.StatusDeclined:
		who := co.CompletedBy
		if who == collab.PersonWriter {
			who = "the person"
		}
		ans.Note = fmt.Sprintf("%s declined the collaboration; do not ask again for the same task unless the person asks you to", who)
		return agent.Output{Data: ans, LogSummary: fmt.Sprintf("%s declined (%s)", who, co.ID)}, nil
	case collab.StatusExpired:
		ans.Note = "the collaboration expired without an answer"
		return agent.Output{Data: ans, LogSummary: "expired (" + co.ID + ")"}, nil
	case collab.StatusPending:
		if co.NeedsPerson {
			ans.Note = fmt.Sprintf("still waiting for the person to accept, collaboration id %s; call ask_role with action wait and this collabId later", co.ID)
		} else {
			ans.Note = fmt.Sprintf("still waiting for %s to accept, collaboration id %s; call ask_role with action wait and this collabId later", co.To, co.ID)
		}
		return agent.Output{Data: ans, LogSummary: "waiting for acceptance (" + co.ID + ")"}, nil
	}
	ans.Note = fmt.Sprintf("%s is still working, collaboration id %s; call ask_role with action wait and this collabId later", co.To, co.ID)
	return agent.Output{Data: ans, LogSummary: "still working (" + co.ID + ")"}, nil
}

// collabErr classifies a collaboration error for the registry: refusals
// are denials; the rest as mapErr.
func collabErr(err error) error {
	switch {
	case errors.Is(err, collab.ErrForbidden), errors.Is(err, collab.ErrExpired):
		return fmt.Errorf("%w: ask_role: %w", agent.ErrDenied, err)
	case errors.Is(err, collab.ErrInvalidInput), errors.Is(err, collab.ErrNotFound), errors.Is(err, collab.ErrState):
		return fmt.Errorf("ask_role: %w", err)
	}
	return fmt.Errorf("ask_role: %w", mapErr(err))
}
