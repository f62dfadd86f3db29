package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/worker"
)

// This file is what a paired operator device may reach (issue 21 item 4;
// docs/PROTOCOL.md "Access control" and "Who may call"). The person
// chooses a device's memory scope when approving it and may change it at
// any time (package devices); every call of the device reads it afresh:
//
//   - memory (search, get, files, write, note, import, promote,
//     conflicts.*, sessions.*, collab.*): the device acts as its scope —
//     `authenticated`, one role, or admin — and `as` may only narrow it:
//     an admin-scoped device may name any role, a role-scoped device only
//     its own role, an authenticated device none (a role reads at least
//     what `authenticated` reads);
//   - chat and history: a device chats only with the profiles of the role
//     it is scoped to (that role's instances, and `main` for role main;
//     every profile for admin): chat.send, chat.cancel, history.profile,
//     history.conversation and message.delete of another profile are
//     FORBIDDEN, audited. An agent reads with its role's rights, so
//     chatting with a role is reading as that role: a device scoped
//     `authenticated` reaches no agent, and never one that could tell it
//     what its scope may not read;
//   - permission questions (agent.permissions, agent.permission.answer)
//     grant this computer's powers (exec, web fetch, node commands): only
//     the person answers them, at the desktop or on a device scoped admin;
//   - events: a device scoped below admin gets the run events (chat.*,
//     agent.state) and message.deleted of the profiles it may chat with,
//     memory.changed naming only files it may read, no permission
//     questions, and of the other events only memory.progress,
//     profiles.instance, presence and settings.changed (deviceEvent).

// DeviceScope returns the memory principal a paired operator device acts
// as: acl.Principal{Authenticated: true}, {Role: r} or {Admin: true},
// from the device's scope as stored now. An error refuses the call
// (UNAVAILABLE) and withholds events.
type DeviceScope func(ctx context.Context, deviceID string) (acl.Principal, error)

// DeviceWriter is the memory writer name of a device scoped
// `authenticated` (in version vectors and conflict records). It is a
// reserved word of the ACL, so no role can have it.
const DeviceWriter = "authenticated"

// Messages finds a stored chat message (implemented by *history.Store),
// for message.delete of a scoped device.
type Messages interface {
	Get(ctx context.Context, id string) (history.Message, error)
}

// scopeWait bounds the scope lookup of one event (a database read on a
// cache miss).
const scopeWait = 5 * time.Second

// device returns the principal of c's paired device (its scope; nil
// DeviceScope: authenticated), with the caller's address for the audit.
func (ac *access) device(ctx context.Context, c *gateway.Call) (acl.Principal, error) {
	p, err := ac.devicePrincipal(ctx, c.Principal.Device)
	if err != nil {
		return acl.Principal{Authenticated: true, IP: c.RemoteIP}, &gateway.Error{Code: gateway.CodeUnavailable, Retryable: true,
			Message: fmt.Sprintf("%s: this device's memory scope could not be read: %v", c.Method, err)}
	}
	p.IP = c.RemoteIP
	return p, nil
}

func (ac *access) devicePrincipal(ctx context.Context, deviceID string) (acl.Principal, error) {
	if ac.scope == nil {
		return acl.Principal{Authenticated: true}, nil
	}
	p, err := ac.scope(ctx, deviceID)
	if err != nil {
		return acl.Principal{}, err
	}
	// Exactly one of the three, whatever the hook returned.
	switch {
	case p.Admin:
		return acl.Principal{Admin: true}, nil
	case p.Role != "":
		return acl.Principal{Role: p.Role}, nil
	}
	return acl.Principal{Authenticated: true}, nil
}

// scopeName is how a device's scope is written in messages: the wire
// form of package pairing.
func scopeName(p acl.Principal) string {
	switch {
	case p.Admin:
		return "admin"
	case p.Role != "":
		return "role:" + p.Role
	}
	return "authenticated"
}

// scopeAs is who a device with scope base acts as when it names as
// ("" = base): an admin scope may act as any role (as the person may), a
// role scope only as its own role, an authenticated scope as none — a
// wider `as` is FORBIDDEN, audited as base.
func (ac *access) scopeAs(c *gateway.Call, base acl.Principal, as string) (acl.Principal, error) {
	if as == "" {
		return base, nil
	}
	if err := checkAs(ac.g, base, c, as); err != nil {
		return base, err
	}
	switch {
	case base.Admin:
		return acl.Principal{Role: as, IP: base.IP}, nil
	case base.Role == as:
		return base, nil
	}
	return base, mapErr(ac.g.Deny(base, c.Method, "as "+as, fmt.Sprintf(
		"this device's memory scope is %s: as may only narrow it, and as %s would widen it", scopeName(base), as)))
}

// profileRole is the role a chat profile acts as: an instance
// "<profile>-<k>" its profile, else the id itself (main).
func profileRole(profileID string) string {
	if p, _, ok := worker.SplitInstanceID(profileID); ok {
		return p
	}
	return profileID
}

// MayChat reports whether a device acting as who may chat with profileID
// and read its history (docs/PROTOCOL.md "Device scope"): admin any
// profile, a role its own profile and that profile's instances. Talk's
// talk.open asks the same (the wiring, backend/atrium talk.go).
func MayChat(who acl.Principal, profileID string) bool {
	return who.Admin || (who.Role != "" && profileID != "" && profileRole(profileID) == who.Role)
}

// chatScope refuses (FORBIDDEN, audited) a call of a paired device about
// the chat profile profileID when its scope does not reach it; other
// callers pass.
func (ac *access) chatScope(ctx context.Context, c *gateway.Call, profileID string) error {
	if c.Principal.Class() != gateway.OperatorDevice {
		return nil
	}
	who, err := ac.device(ctx, c)
	if err != nil {
		return err
	}
	if MayChat(who, profileID) {
		return nil
	}
	reason := fmt.Sprintf("this device's memory scope is %s: it chats only with the profiles of the role it is scoped to "+
		"(an agent reads with its role's rights); the person can change the scope in Nodes → Paired devices", scopeName(who))
	if ac.g == nil {
		return gateway.Errorf(gateway.CodeForbidden, "%s: profile %s: %s", c.Method, profileID, reason)
	}
	return mapErr(ac.g.Deny(who, c.Method, "profile "+profileID, reason))
}

// personOnly refuses (FORBIDDEN, audited) a paired device scoped below
// admin: what only the person decides (permission questions).
func (ac *access) personOnly(ctx context.Context, c *gateway.Call, target string) error {
	if c.Principal.Class() != gateway.OperatorDevice {
		return nil
	}
	who, err := ac.device(ctx, c)
	if err != nil || who.Admin {
		return err
	}
	reason := fmt.Sprintf("this device's memory scope is %s: permission questions grant this computer's powers, "+
		"so only the person answers them (at the desktop, or on a device scoped admin)", scopeName(who))
	if ac.g == nil {
		return gateway.Errorf(gateway.CodeForbidden, "%s: %s", c.Method, reason)
	}
	return mapErr(ac.g.Deny(who, c.Method, target, reason))
}

// pageScope refuses a history page holding a message or run of a profile
// the device may not chat with (a conversation is one profile's).
func (ac *access) pageScope(ctx context.Context, c *gateway.Call, page chat.HistoryPage) error {
	if c.Principal.Class() != gateway.OperatorDevice {
		return nil
	}
	seen := map[string]bool{}
	check := func(profileID string) error {
		if seen[profileID] {
			return nil
		}
		seen[profileID] = true
		return ac.chatScope(ctx, c, profileID)
	}
	for _, m := range page.Messages {
		if err := check(m.ProfileID); err != nil {
			return err
		}
	}
	for _, r := range page.Active {
		if err := check(r.ProfileID); err != nil {
			return err
		}
	}
	return nil
}

// messageScope refuses message.delete by a scoped device of a message of
// a profile it may not chat with. An unknown id passes (the delete then
// answers deleted:false); without Messages a device below admin is
// refused (nothing says whose the message is).
func (ac *access) messageScope(ctx context.Context, c *gateway.Call, msgs Messages, id string) error {
	if c.Principal.Class() != gateway.OperatorDevice {
		return nil
	}
	if msgs == nil {
		return ac.chatScope(ctx, c, "")
	}
	m, err := msgs.Get(ctx, id)
	if err != nil {
		return nil // not stored (or unreadable): the delete answers for it
	}
	return ac.chatScope(ctx, c, m.ProfileID)
}

// Events that carry a run's profile (RunRef.profileId), or a message's.
var profileEvents = map[string]bool{
	chat.EventThinking: true, chat.EventReasoning: true, chat.EventChunk: true, chat.EventFinal: true,
	chat.EventCancelled: true, chat.EventError: true, chat.EventState: true, chat.EventTool: true,
	chat.EventMessageDeleted: true, chat.EventReset: true,
}

// openEvents say nothing a device's scope could hide: the index's
// progress, instance states (profiles.list shows them), presence (nodes'
// "presence"), the model in use.
var openEvents = map[string]bool{
	"memory.progress": true, InstanceEvent: true, "presence": true, EventSettingsChanged: true,
}

// deviceEvent is the gateway's OnDeviceEvent filter: what a paired
// operator device gets of a broadcast (see the top of this file). Anything
// not known to be within its scope is withheld.
func (ac *access) deviceEvent(p gateway.Principal, event string, body []byte) ([]byte, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), scopeWait)
	defer cancel()
	who, err := ac.devicePrincipal(ctx, p.Device)
	switch {
	case err != nil:
		return nil, false
	case who.Admin, openEvents[event]:
		return body, true
	case event == "memory.changed":
		return ac.narrowChange(who, body)
	case profileEvents[event]:
		var ref struct {
			ProfileID string `json:"profileId"`
		}
		if json.Unmarshal(body, &ref) != nil {
			return nil, false
		}
		return body, MayChat(who, ref.ProfileID)
	}
	return nil, false
}

// narrowChange keeps the paths of a memory.changed event who may read
// (with their layers); nothing when none is left.
func (ac *access) narrowChange(who acl.Principal, body []byte) ([]byte, bool) {
	var ev memory.ChangeEvent
	if ac.g == nil || json.Unmarshal(body, &ev) != nil {
		return nil, false
	}
	out := memory.ChangeEvent{Reason: ev.Reason, Paths: []string{}, Layers: []string{}}
	for i, path := range ev.Paths {
		if !ac.g.Readable(who, path) {
			continue
		}
		out.Paths = append(out.Paths, path)
		if i < len(ev.Layers) {
			out.Layers = append(out.Layers, ev.Layers[i])
			out.Global = out.Global || ev.Layers[i] == memory.LayerGlobal
		}
	}
	if len(out.Paths) == 0 {
		return nil, false
	}
	b, err := json.Marshal(out)
	return b, err == nil
}

// readableFiles lists the indexed files who may read (Guard.Readable; not
// audited: a count, not a listing). A nil guard (no ACL) leaves every file.
func readableFiles(ctx context.Context, mem Memory, gd *guard.Guard, who acl.Principal) ([]memory.FileInfo, error) {
	files, err := mem.Files(ctx)
	if err != nil || gd == nil {
		return files, err
	}
	out := files[:0]
	for _, f := range files {
		if gd.Readable(who, f.Path) {
			out = append(out, f)
		}
	}
	return out, nil
}

// scopedStatus is memory.status for a caller other than admin (a device
// scoped `authenticated` or to a role, `as` a role): files and chunks
// count what who may read; the workspace's absolute path, its pending
// (dirty) count, the sync progress and the last error (which may name a
// file) are withheld (docs/PROTOCOL.md "Device scope").
func scopedStatus(ctx context.Context, mem Memory, gd *guard.Guard, who acl.Principal, st memory.Status) (memory.Status, error) {
	files, err := readableFiles(ctx, mem, gd, who)
	if err != nil {
		return memory.Status{}, err
	}
	st.Files, st.Chunks = len(files), 0
	for _, f := range files {
		st.Chunks += f.Chunks
	}
	st.Workspace, st.Dirty, st.Progress, st.LastError = "", 0, nil, ""
	return st, nil
}
