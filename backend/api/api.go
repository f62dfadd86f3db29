// Package api binds the gateway's methods (docs/PROTOCOL.md, SPEC §3 method
// table) to the services that implement them: it decodes params, calls the
// service, and maps the service's sentinel errors to protocol error codes.
// It holds no state of its own.
package api

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/collab"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/memory/embed"
)

// Memory is what the memory.* methods need (implemented by *memory.Manager).
type Memory interface {
	Search(ctx context.Context, o memory.SearchOptions) (memory.SearchResponse, error)
	Get(ctx context.Context, o memory.GetOptions) (memory.GetResponse, error)
	Import(ctx context.Context, r memory.ImportRequest) (memory.ImportResult, error)
	Files(ctx context.Context) ([]memory.FileInfo, error)
	Status() memory.Status
	Sync(ctx context.Context) error
	Version(ctx context.Context, path string) (string, error)
	Write(ctx context.Context, r memory.WriteRequest) (memory.WriteResult, error)
	Note(ctx context.Context, r memory.NoteRequest) (memory.WriteResult, error)
	ListConflicts(ctx context.Context, f memory.ConflictFilter) ([]memory.Conflict, error)
	ResolveConflict(ctx context.Context, id int64, r memory.Resolution) (memory.Conflict, error)
}

// Options names the services to bind. All fields are required except
// Layers (nil uses Memory when it implements Layers, else the layer
// methods are not registered) and Guard.
type Options struct {
	Gateway *gateway.Server
	Memory  Memory
	Layers  Layers
	// Guard enforces the ACL and audits every memory method (SPEC §5.1;
	// access.go). nil: no ACL checks, `as` and audit.tail are refused
	// (tests of the bare bindings only; the app always sets it).
	Guard *guard.Guard
	// DeviceScope resolves a paired operator device's memory scope on
	// each of its calls and events (scope.go; the app reads the device's
	// record through package devices). nil: every paired operator device
	// is `authenticated` (never admin).
	DeviceScope DeviceScope
	// Messages finds a chat message's profile for message.delete by a
	// device scoped below admin (the app: its history store). nil: such a
	// device may not delete messages.
	Messages Messages
	Chat     *chat.Service
	// Collab runs collaborations (SPEC §5.4; collab.go); nil: the collab.*
	// methods are not registered.
	Collab *collab.Service
	// Embedder is chat.route's similarity step (the memory engine's
	// embedder); nil skips that step. RouteThreshold is its cosine floor
	// (0: route.DefaultThreshold).
	Embedder       embed.Embedder
	RouteThreshold float64
	// Instances runs profile instances as worker processes (SPEC §6;
	// instances.go); nil: profiles.spawn/stop are not registered and
	// profiles.list has no index or instances.
	Instances Instances
	// Roles is the app's side of a role for profiles.update (its model)
	// and profiles.delete (its settings, MCP tokens and devices;
	// roleadmin.go); nil: profiles.update refuses a model and
	// profiles.delete removes the role from memory alone.
	Roles RoleApp
	// Settings reads and changes config.json (SPEC §9; settings.go); nil:
	// the config.* methods are not registered.
	Settings Settings
	// Focus brings the desktop window to the front (app.focus); nil: no
	// window (atrium serve), app.focus answers {focused: false}.
	Focus func()
	// Setup answers setup.status (and refuses setup.choose: the workspace
	// is chosen) in the running app (setup.go); nil: not registered.
	Setup Setup
	// Media serves media.list, media.get and media.delete (media.go) from
	// the media store, and media.attach when Memory implements Attacher;
	// nil: none of them is registered.
	Media   MediaFiles
	Version string
	Started time.Time // process start, for health.uptimeMs
}

// Events lists the events the services emit through the gateway.
var Events = []string{
	"tick", "chat.thinking", "chat.reasoning", "chat.chunk", "chat.final", "chat.cancelled",
	"chat.error", chat.EventMessageDeleted, "memory.changed", "memory.progress",
	chat.EventState, chat.EventTool, chat.EventPermission, chat.EventPermissionAnswered,
	EventSettingsChanged,
}

// Register adds every method to the gateway. Call it before the gateway runs.
func Register(o Options) {
	g := o.Gateway
	g.DeclareEvents(Events...)
	// Who a call acts as (access.go); a paired operator device acts as
	// its memory scope, and its connections get of each event what that
	// scope covers (scope.go).
	ac := &access{g: o.Guard, scope: o.DeviceScope}
	g.OnDeviceEvent(ac.deviceEvent)
	// Every method states its kind (gateway.Read or gateway.Write of the
	// principals that may call it; docs/PROTOCOL.md "Who may call"):
	// methods with side effects require an idempotencyKey, and the gateway
	// refuses every other principal. Such a refusal, and every refused
	// connect, is audited like the ACL's own (operation: the method;
	// principal: authenticated for paired devices and nodes, anonymous
	// for unpaired devices and refused connects; target: the method and
	// the device id when there is one).
	// Anonymous refusals (refused connects, unpaired devices) cost the
	// caller nothing: past anonBudget they are summarised, not recorded
	// one by one (access.go).
	if o.Guard != nil {
		anon := newAnonBudget()
		g.OnForbidden(func(c *gateway.Call, reason string) {
			who := forbiddenPrincipal(c)
			if !who.Admin && !who.Authenticated {
				skipped, ok := anon.admit(c.RemoteIP, time.Now())
				if !ok {
					return
				}
				if skipped > 0 {
					reason += fmt.Sprintf(" (%d more anonymous refusals from this address in the previous minute were not audited one by one)", skipped)
				}
			}
			_ = o.Guard.Deny(who, c.Method, forbiddenTarget(c), reason)
		})
	}

	// health: the memory's detail and the ACL's state (paths in this
	// machine's workspace) only to the person's connections; nodes and
	// unpaired devices learn that the gateway is up.
	g.Handle("health", gateway.Read(gateway.Everyone), func(ctx context.Context, c *gateway.Call) (any, error) {
		st := o.Memory.Status()
		mem := map[string]any{"state": st.State}
		out := map[string]any{
			"ok":       true,
			"version":  o.Version,
			"uptimeMs": time.Since(o.Started).Milliseconds(),
			"memory":   mem,
		}
		if !gateway.Operators.Has(c.Principal.Class()) {
			return out, nil
		}
		if st.Degraded != "" {
			// Why search runs on one leg alone (a damaged vector or
			// keyword index being rebuilt).
			mem["reason"] = st.Degraded
		}
		out["acl"] = aclStatus(o.Guard)
		if c.Principal.Class() == gateway.Admin {
			// The app process's goroutines and live Go heap, for the
			// person at this machine alone (`atrium bench soak` samples
			// them to find leaks).
			live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			metrics.Read(live)
			var heap uint64
			if live[0].Value.Kind() == metrics.KindUint64 {
				heap = live[0].Value.Uint64()
			}
			out["process"] = map[string]any{"goroutines": runtime.NumGoroutine(), "heapLiveBytes": heap}
		}
		return out, nil
	})

	g.Handle("memory.search", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p memory.SearchOptions
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if err := memory.CheckQuery(p.Query); err != nil {
			return nil, mapErr(fmt.Errorf("memory.search: %w", err))
		}
		ctx, who, err := principal(ctx, ac, c)
		if err != nil {
			return nil, err
		}
		if o.Guard != nil {
			p.Readable = func(rel string) bool { return o.Guard.Readable(who, rel) }
		}
		res, err := o.Memory.Search(ctx, p)
		if err != nil || o.Guard == nil {
			return res, mapErr(err)
		}
		// Readable is the search's scope (ranked over readable files
		// alone); FilterSearch audits (and re-checks); see package guard.
		res, err = o.Guard.FilterSearch(who, p.Query, res)
		return res, mapErr(err)
	})
	g.Handle("memory.get", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p memory.GetOptions
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		ctx, who, err := principal(ctx, ac, c)
		if err != nil {
			return nil, err
		}
		if o.Guard != nil {
			if p.Path, err = o.Guard.Check(who, "get", acl.Read, p.Path); err != nil {
				return nil, mapErr(err)
			}
		}
		return getWithVersion(ctx, o.Memory, p)
	})
	g.Handle("memory.import", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p memory.ImportRequest
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		ctx, who, err := principal(ctx, ac, c)
		if err != nil {
			return nil, err
		}
		if p.Role == "" && who.Role != "" {
			p.Role = who.Role // a role imports into its own folder
		}
		if o.Guard != nil {
			if err := checkImport(o.Guard, who, p); err != nil {
				return nil, mapErr(err)
			}
		}
		res, err := o.Memory.Import(ctx, p)
		return res, mapErr(err)
	})
	g.Handle("memory.status", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		ctx, who, err := principal(ctx, ac, c)
		if err != nil {
			return nil, err
		}
		st := o.Memory.Status()
		if !who.Admin {
			if st, err = scopedStatus(ctx, o.Memory, o.Guard, who, st); err != nil {
				return nil, mapErr(err)
			}
		}
		return statusWithACL(st, o.Guard, !who.Admin), nil
	})
	g.Handle("memory.sync", gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		if err := o.Memory.Sync(ctx); err != nil {
			return nil, mapErr(err)
		}
		return o.Memory.Status(), nil
	})
	g.Handle("memory.files", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		ctx, who, err := principal(ctx, ac, c)
		if err != nil {
			return nil, err
		}
		files, err := o.Memory.Files(ctx)
		if err != nil {
			return nil, mapErr(err)
		}
		if o.Guard != nil {
			if files, err = o.Guard.FilterFiles(who, files); err != nil {
				return nil, mapErr(err)
			}
		}
		return map[string]any{"files": fileEntries(o.Guard, files)}, nil
	})

	g.Handle("audit.tail", gateway.Read(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		return auditTail(ctx, o.Guard, c)
	})

	registerWrites(g, o.Memory, ac)
	if o.Layers == nil {
		o.Layers, _ = o.Memory.(Layers)
	}
	if o.Layers != nil {
		registerLayers(g, o.Layers, o.Memory, ac, o.Instances)
		registerRoute(g, o.Layers, o.Embedder, o.RouteThreshold)
	}
	if o.Collab != nil {
		registerCollab(g, o.Collab, ac)
	}
	{
		ed, _ := o.Layers.(RoleEditor)
		ren, _ := o.Memory.(Renamer)
		registerRoleAdmin(g, ed, ren, o.Roles, o.Instances, ac)
	}

	if o.Instances != nil {
		registerInstances(g, o.Instances, ac)
	}
	if o.Media != nil {
		// media.attach writes through the memory engine when it can.
		att, _ := o.Memory.(Attacher)
		registerMedia(g, o.Media, att, ac)
	}
	if o.Settings != nil {
		registerSettings(g, o.Settings)
	}
	registerFocus(g, o.Focus)
	if o.Setup != nil {
		registerSetup(g, o.Setup)
	}
	g.Handle("profiles.list", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		return profilesList(o), nil
	})
	g.Handle("chat.send", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p chat.SendRequest
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if err := ac.chatScope(ctx, c, p.ProfileID); err != nil {
			return nil, err
		}
		// The service remembers keys too (per profile): scope them by
		// principal, so a node never gets the operator's run for its key.
		p.IdempotencyKey = c.Principal.Key() + "\x00" + p.IdempotencyKey
		// A send to an instance that is not running starts it: only the
		// person does that (like profiles.spawn); devices get UNAVAILABLE.
		p.StartInstance = c.Principal.Class() == gateway.Admin
		// The run outlives this request: it belongs to the service, not to
		// the connection that started it (SPEC §3: a run survives its UI).
		res, err := o.Chat.Send(context.WithoutCancel(ctx), p)
		return res, mapErr(err)
	})
	g.Handle("chat.cancel", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p chat.CancelRequest
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if err := ac.chatScope(ctx, c, p.ProfileID); err != nil {
			return nil, err
		}
		ok, err := o.Chat.Cancel(p)
		if err != nil {
			return nil, mapErr(err)
		}
		return map[string]any{"cancelled": ok}, nil
	})
	// The agent loop's questions to the person (SPEC §6): open ones, and
	// the y/n answer. Only the person answers: node connections may not.
	g.Handle("agent.permissions", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		if err := ac.personOnly(ctx, c, "permissions"); err != nil {
			return nil, err
		}
		return map[string]any{"requests": o.Chat.Permissions()}, nil
	})
	g.Handle("agent.permission.answer", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ID    string `json:"id"`
			Allow *bool  `json:"allow"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if !gateway.Operators.Has(c.Principal.Class()) {
			return nil, gateway.Errorf(gateway.CodeForbidden, "agent.permission.answer: only the person (operator connections) answers permission questions")
		}
		if err := ac.personOnly(ctx, c, "permission "+p.ID); err != nil {
			return nil, err
		}
		if p.Allow == nil {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "agent.permission.answer: allow (true or false) is required")
		}
		res, err := o.Chat.AnswerPermission(p.ID, *p.Allow)
		return res, mapErr(err)
	})
	g.Handle("history.profile", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ProfileID string `json:"profileId"`
			Before    string `json:"before"`
			Limit     int    `json:"limit"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if p.ProfileID == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "history.profile: profileId is required")
		}
		if err := ac.chatScope(ctx, c, p.ProfileID); err != nil {
			return nil, err
		}
		page, err := o.Chat.History(ctx, p.ProfileID, p.Before, p.Limit)
		return page, mapErr(err)
	})
	g.Handle("history.conversation", gateway.Read(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ConversationID string `json:"conversationId"`
			Before         string `json:"before"`
			Limit          int    `json:"limit"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		page, err := o.Chat.ConversationHistory(ctx, p.ConversationID, p.Before, p.Limit)
		if err != nil {
			return nil, mapErr(err)
		}
		// A conversation is one profile's: all of it, or nothing.
		if err := ac.pageScope(ctx, c, page); err != nil {
			return nil, err
		}
		return page, nil
	})
	g.Handle("message.delete", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			MessageID string `json:"messageId"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if !gateway.Operators.Has(c.Principal.Class()) {
			return nil, gateway.Errorf(gateway.CodeForbidden, "message.delete: devices (node connections) do not delete history")
		}
		if err := ac.messageScope(ctx, c, o.Messages, p.MessageID); err != nil {
			return nil, err
		}
		deleted, err := o.Chat.Delete(ctx, p.MessageID)
		if err != nil {
			return nil, mapErr(err)
		}
		return map[string]any{"deleted": deleted}, nil
	})
}

// decode unmarshals the call's params (see gateway.DecodeParams).
func decode(c *gateway.Call, v any) error { return gateway.DecodeParams(c, v) }

// mapErr turns a service error into a protocol error (nil stays nil).
// UNAVAILABLE, TIMEOUT and chat.Retryable errors are marked retryable.
// The message is the service's own wrapped error text, which already says
// what failed and on which input.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	var gerr *gateway.Error
	if errors.As(err, &gerr) {
		return gerr
	}
	code := gateway.CodeInternal
	if cc := collabCode(err); cc != "" {
		// collab's sentinels first: they may wrap memory's (a refused
		// path is also memory.ErrInvalidPath).
		return &gateway.Error{Code: cc, Message: err.Error(), Retryable: errors.Is(err, memory.ErrUnavailable)}
	}
	switch {
	case errors.Is(err, memory.ErrNotFound), errors.Is(err, chat.ErrNotFound):
		code = gateway.CodeNotFound
	case errors.Is(err, memory.ErrInvalidPath), errors.Is(err, memory.ErrInvalidInput), errors.Is(err, memory.ErrFrontMatter),
		errors.Is(err, chat.ErrInvalidInput):
		code = gateway.CodeInvalidRequest
	case errors.Is(err, chat.ErrForbidden), errors.Is(err, memory.ErrForbidden):
		code = gateway.CodeForbidden
	case errors.Is(err, chat.ErrBusy), errors.Is(err, memory.ErrConflict), errors.Is(err, memory.ErrExists):
		code = gateway.CodeConflict
	case errors.Is(err, memory.ErrClosed), errors.Is(err, memory.ErrUnavailable), errors.Is(err, chat.ErrUnavailable):
		code = gateway.CodeUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = gateway.CodeTimeout
	}
	// A busy session (CONFLICT) is retryable too: the same send succeeds
	// once the session's run has ended.
	retryable := code == gateway.CodeUnavailable || code == gateway.CodeTimeout || chat.Retryable(err)
	return &gateway.Error{Code: code, Message: err.Error(), Retryable: retryable}
}
