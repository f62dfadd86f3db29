package atrium

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/agent/tools"
	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/collab"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/worker"
)

// This file is the collaboration broker (issue 24 item 4): what lets
// agents collaborate on their own through the ask_role tool
// (agent/tools collab.go), with every step visible.
//
//   - Ask: the asking agent's role opens a collaboration
//     (collab.Service.Request: it must hold collaborate on the context
//     files; default its own config.md). The broker keeps the token in
//     this process only (never logged, never sent to a client; a restart
//     forgets it, and the collaboration then expires or is closed by the
//     person).
//   - Acceptance: when the ACL lets the invited role collaborate on every
//     context file, its agent accepts at once; otherwise the collaboration
//     stays pending with needsPerson and the person accepts or declines it
//     (collab.decide; the UI's prompt over any panel).
//   - The task: once accepted, the invited role's instance gets it as a
//     visible turn (chat.send to a running instance of that role, else a
//     newly spawned one; main answers in this process), in a session of
//     its own named after the collaboration ("collab-<id>").
//   - The answer: the turn's final message completes the collaboration as
//     the invited role (result output = the answer, importance as asked);
//     a failed or cancelled turn completes it saying so. Wait returns it
//     to the asking agent.
//   - Every change is broadcast as collab.changed (api.CollabEvent).

// collabTurnPrefix starts the session id of a collaboration's turn.
const collabTurnPrefix = "collab-"

// maxCollabChain bounds how many collaborations deep agents may ask one
// another: main asks writer (1), writer asks editor within that task (2),
// editor asks critic (3); a fourth is refused. With the cycle rule in
// collabChain it keeps agents from asking each other back and forth,
// each ask a model run, without end.
const maxCollabChain = 3

// collabSendTimeout bounds handing the task to the invited role's
// instance (spawning it included; its answer is not waited for here).
const collabSendTimeout = 90 * time.Second

// collabAsk is one collaboration an agent opened.
type collabAsk struct {
	from       acl.Principal
	token      string
	importance float64
	c          collab.Collaboration
	changed    chan struct{} // closed (and replaced) on every change
	chain      []string      // the roles that asked, first first, ending with from.Role
	accepting  bool          // the invited role's accept was tried
	delivered  bool          // the task was handed to an instance
	messageID  string        // the id the invited role's answer will have
}

// collabBroker implements tools.Collaborations over the app's
// collaboration service and chat.
type collabBroker struct {
	a   *App
	log *slog.Logger

	// send hands a turn to chat: a.Chat.Send (tests wrap it).
	send func(context.Context, chat.SendRequest) (chat.SendResult, error)

	mu   sync.Mutex
	asks map[string]*collabAsk // by collaboration id
	// turns: a turn's session id → its collaboration id, from before its
	// task is sent until the turn ends — its run may end, and its
	// terminal event reach onChat, before chat.Send has returned.
	turns map[string]string
	byMsg map[string]string // answer message id → collaboration id, for a turn chat moved to another session
}

func newCollabBroker(a *App, log *slog.Logger) *collabBroker {
	b := &collabBroker{a: a, log: log.With("component", "collab-broker"), asks: map[string]*collabAsk{},
		turns: map[string]string{}, byMsg: map[string]string{}}
	b.send = func(ctx context.Context, r chat.SendRequest) (chat.SendResult, error) { return a.Chat.Send(ctx, r) }
	return b
}

// onChange is collab.Options.OnChange: broadcast, and move the agents'
// collaborations on.
func (b *collabBroker) onChange(c collab.Collaboration) {
	if b.a.Gateway != nil {
		b.a.Gateway.Broadcast(api.CollabEvent, c)
	}
	b.mu.Lock()
	ask := b.asks[c.ID]
	if ask != nil {
		ask.c = c
		close(ask.changed)
		ask.changed = make(chan struct{})
	}
	b.mu.Unlock()
	if ask != nil {
		go b.advance(c.ID)
	}
}

// Ask implements tools.Collaborations.
func (b *collabBroker) Ask(ctx context.Context, who acl.Principal, r collab.Request, importance float64) (collab.Collaboration, error) {
	if len(r.Context) == 0 {
		r.Context = []string{"memory/roles/" + who.Role + "/config.md"}
	}
	if importance < 0 || importance > 1 {
		return collab.Collaboration{}, fmt.Errorf("%w: importance %v is outside [0,1]", collab.ErrInvalidInput, importance)
	}
	chain, err := b.collabChain(who, r.To)
	if err != nil {
		return collab.Collaboration{}, err
	}
	req, err := b.a.Collab.Request(ctx, acl.Principal{Role: who.Role, Session: who.Session}, r)
	if err != nil {
		return collab.Collaboration{}, err
	}
	b.mu.Lock()
	b.asks[req.ID] = &collabAsk{from: who, token: req.Token, importance: importance, c: req.Collaboration, changed: make(chan struct{}), chain: chain}
	b.mu.Unlock()
	b.log.Info("agent asked a role", "id", req.ID, "from", who.Role, "to", r.To, "needs_person", req.Collaboration.NeedsPerson)
	go b.advance(req.ID)
	return req.Collaboration, nil
}

// collabChain returns the chain of roles an ask by who to role to
// extends: who.Role alone for an ask from an ordinary session; for an ask
// made while answering a collaboration (who.Session is that
// collaboration's turn, "collab-<id>"), that collaboration's chain plus
// who.Role. It refuses (collab.ErrInvalidInput) an ask back to a role
// already in the chain, which is waiting for this one's answer, and a
// chain longer than maxCollabChain.
func (b *collabBroker) collabChain(who acl.Principal, to string) ([]string, error) {
	chain := []string{who.Role}
	if id, ok := strings.CutPrefix(who.Session, collabTurnPrefix); ok {
		b.mu.Lock()
		parent := b.asks["c-"+id]
		if parent != nil && parent.c.To == who.Role {
			chain = append(append([]string(nil), parent.chain...), who.Role)
		}
		b.mu.Unlock()
	}
	for _, role := range chain {
		if role == to {
			return nil, fmt.Errorf("%w: %s is waiting for %s's answer (%s); answer it instead of asking back", collab.ErrInvalidInput, to, who.Role, strings.Join(append(chain, to), " → "))
		}
	}
	if len(chain) > maxCollabChain {
		return nil, fmt.Errorf("%w: collaborations nest at most %d deep (%s); answer with what you have", collab.ErrInvalidInput, maxCollabChain, strings.Join(append(chain, to), " → "))
	}
	return chain, nil
}

// advance takes the next step of collaboration id: the invited role's
// accept where the ACL allows it, the task's delivery once accepted.
func (b *collabBroker) advance(id string) {
	b.mu.Lock()
	ask := b.asks[id]
	if ask == nil {
		b.mu.Unlock()
		return
	}
	c, token := ask.c, ask.token
	var accept, deliver bool
	switch {
	case c.Status == collab.StatusPending && !c.NeedsPerson && !ask.accepting:
		ask.accepting, accept = true, true
	case c.Status == collab.StatusAccepted && !ask.delivered:
		ask.delivered, deliver = true, true
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), collabSendTimeout)
	defer cancel()
	switch {
	case accept:
		if _, err := b.a.Collab.Accept(ctx, acl.Principal{Role: c.To}, id, token); err != nil {
			b.log.Warn("collab not accepted by the invited role", "id", id, "err", err)
		}
	case deliver:
		if err := b.deliver(ctx, c); err != nil {
			b.log.Warn("collab task not delivered", "id", id, "to", c.To, "err", err)
			b.finish(id, fmt.Sprintf("%s could not take the task: %v", c.To, err))
		}
	}
}

// instanceOf returns the profile id that answers for role: main, or a
// running instance of role, or a new one.
func (b *collabBroker) instanceOf(role string) (string, error) {
	if role == acl.MainRole {
		return chat.ProfileMain, nil
	}
	if b.a.Pool == nil {
		return "", errors.New("no instances run in this app")
	}
	for _, st := range b.a.Pool.List() {
		if st.ProfileID == role && st.State != worker.StateStopped {
			return st.InstanceID, nil
		}
	}
	st, err := b.a.Pool.Spawn(role)
	if err != nil {
		return "", fmt.Errorf("spawn an instance of %s: %w", role, err)
	}
	return st.InstanceID, nil
}

// deliver hands c's task to the invited role as a visible turn.
func (b *collabBroker) deliver(ctx context.Context, c collab.Collaboration) error {
	profile, err := b.instanceOf(c.To)
	if err != nil {
		return err
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "[Collaboration %s] Role %s asks for your help:\n\n%s\n\n", c.ID, c.From, c.Task)
	fmt.Fprintf(&msg, "Files it is about: %s.\nAnswer in this turn: your answer goes back to %s as the collaboration's result.", strings.Join(c.Context, ", "), c.From)
	session := collabTurnPrefix + strings.TrimPrefix(c.ID, "c-")
	b.mu.Lock()
	b.turns[session] = c.ID
	b.mu.Unlock()
	res, err := b.send(ctx, chat.SendRequest{ProfileID: profile, SessionID: session,
		Message: msg.String(), IdempotencyKey: "collab:" + c.ID, StartInstance: true})
	if err != nil {
		b.mu.Lock()
		if b.turns[session] == c.ID {
			delete(b.turns, session)
		}
		b.mu.Unlock()
		return fmt.Errorf("send to %s: %w", profile, err)
	}
	b.mu.Lock()
	if ask := b.asks[c.ID]; ask != nil {
		ask.messageID = res.MessageID
	}
	if res.SessionID != session && b.turns[session] == c.ID {
		// Chat moved the turn on (its session was closed): its answer
		// is known by its message id.
		delete(b.turns, session)
		b.byMsg[res.MessageID] = c.ID
	}
	b.mu.Unlock()
	b.log.Info("collab task delivered", "id", c.ID, "profile", profile, "run", res.RunID)
	return nil
}

// onChat takes the end of a collaboration's turn (called with every chat
// event by the app's Emit).
func (b *collabBroker) onChat(event string, payload any) {
	var ref chat.RunRef
	var out string
	switch ev := payload.(type) {
	case chat.FinalEvent:
		ref, out = ev.RunRef, ev.Message.Content
	case chat.ErrorEvent:
		ref, out = ev.RunRef, "the turn failed: "+ev.Error.Message
	case chat.CancelledEvent:
		ref, out = ev.RunRef, "the turn was cancelled"
		if ev.Reason != "" {
			out += ": " + ev.Reason
		}
	default:
		return
	}
	b.mu.Lock()
	id, ok := b.byMsg[ref.MessageID]
	if ok {
		delete(b.byMsg, ref.MessageID)
	} else if id, ok = b.turns[ref.SessionID]; ok {
		delete(b.turns, ref.SessionID)
	}
	b.mu.Unlock()
	if !ok {
		return
	}
	if event != chat.EventFinal {
		b.mu.Lock()
		to := b.asks[id].c.To
		b.mu.Unlock()
		out = to + " could not answer: " + out
	}
	go b.finish(id, out)
}

// finish completes collaboration id as its invited role with output.
func (b *collabBroker) finish(id, output string) {
	b.mu.Lock()
	ask := b.asks[id]
	b.mu.Unlock()
	if ask == nil {
		return
	}
	if strings.TrimSpace(output) == "" {
		output = "(no answer)"
	}
	if len(output) > collab.MaxOutputBytes {
		output = cutUTF8(output, collab.MaxOutputBytes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), collabSendTimeout)
	defer cancel()
	if _, err := b.a.Collab.Complete(ctx, acl.Principal{Role: ask.c.To}, id, ask.token, collab.Result{Output: output, Importance: ask.importance}); err != nil {
		b.log.Warn("collab not completed", "id", id, "err", err)
	}
}

// cutUTF8 cuts s to at most n bytes on a character boundary.
func cutUTF8(s string, n int) string {
	for n > 0 && n < len(s) && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}

// ask returns who's collaboration id (ErrNotFound if it is not one).
func (b *collabBroker) ask(who acl.Principal, id string) (*collabAsk, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ask := b.asks[id]
	if ask == nil || ask.from.Role != who.Role {
		return nil, fmt.Errorf("%w: %s is not a collaboration role %s asked for since the app started", collab.ErrNotFound, id, who.Role)
	}
	return ask, nil
}

// Wait implements tools.Collaborations.
func (b *collabBroker) Wait(ctx context.Context, who acl.Principal, id string) (collab.Collaboration, error) {
	ask, err := b.ask(who, id)
	if err != nil {
		return collab.Collaboration{}, err
	}
	for {
		b.mu.Lock()
		c, ch := ask.c, ask.changed
		b.mu.Unlock()
		now := time.Now()
		if (c.Status == collab.StatusPending || c.Status == collab.StatusAccepted) && !now.Before(c.ExpiresAt) {
			c.Status = collab.StatusExpired
		}
		switch c.Status {
		case collab.StatusCompleted, collab.StatusDeclined, collab.StatusExpired:
			return c, nil
		}
		expiry := time.NewTimer(c.ExpiresAt.Sub(now))
		select {
		case <-ch:
		case <-expiry.C:
		case <-ctx.Done():
			expiry.Stop()
			return c, nil
		}
		expiry.Stop()
	}
}

// View implements tools.Collaborations.
func (b *collabBroker) View(ctx context.Context, who acl.Principal, id, query string) (collab.View, error) {
	ask, err := b.ask(who, id)
	if err != nil {
		return collab.View{}, err
	}
	return b.a.Collab.View(ctx, acl.Principal{Role: who.Role, Session: who.Session}, id, ask.token, query, 0)
}

// Write implements tools.Collaborations.
func (b *collabBroker) Write(ctx context.Context, who acl.Principal, id string, w collab.WriteRequest) (memory.WriteResult, error) {
	ask, err := b.ask(who, id)
	if err != nil {
		return memory.WriteResult{}, err
	}
	return b.a.Collab.Write(ctx, acl.Principal{Role: who.Role, Session: who.Session}, id, ask.token, w)
}

// collabTool is the ask_role tool's settings for a run of role: nil
// before the broker exists, and when the workspace has no other role to
// ask (the tool would only take room in the model's context).
func (a *App) collabTool(role string) *tools.CollabOptions {
	if a.collabs == nil || a.Collab == nil || a.Memory == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), collabSendTimeout)
	defer cancel()
	roles, err := a.Memory.ListRoles(ctx)
	if err != nil {
		a.log.Warn("ask_role not offered: roles not listed", "err", err)
		return nil
	}
	for _, r := range roles {
		if r.Role != role {
			return &tools.CollabOptions{Collaborations: a.collabs}
		}
	}
	return nil
}
