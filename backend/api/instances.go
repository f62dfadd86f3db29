package api

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/worker"
)

// This file binds profile instances (SPEC §6 "Profile = template +
// instances", SPEC §3 "Gateway ↔ agent worker"; docs/PROTOCOL.md):
// profiles.spawn, profiles.stop, the instances and the light profile index
// in profiles.list, and the profiles.instance event.

// Instances is what the instance methods need (implemented by *worker.Pool).
type Instances interface {
	Profiles() []worker.ProfileEntry
	List() []worker.Status
	Spawn(profileID string) (worker.Status, error)
	Stop(ctx context.Context, instanceID string) error
}

// InstanceMethods lists the methods registerInstances adds;
// InstanceEvent is the status event (payload worker.Status).
var (
	InstanceMethods = []string{"profiles.spawn", "profiles.stop"}
	InstanceEvent   = "profiles.instance"
)

// stopWait bounds profiles.stop's wait for the process to be gone.
const stopWait = 15 * time.Second

func registerInstances(g *gateway.Server, in Instances, ac *access) {
	g.DeclareEvents(InstanceEvent)
	g.Handle("profiles.spawn", gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			ProfileID string `json:"profileId"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if err := adminOnly(ctx, ac, c); err != nil {
			return nil, err
		}
		if p.ProfileID == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "profiles.spawn: profileId is required")
		}
		if strings.ContainsAny(p.ProfileID, "/\\") || strings.HasPrefix(p.ProfileID, ".") {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "profiles.spawn: profileId %q is not a role name (a folder under memory/roles)", p.ProfileID)
		}
		st, err := in.Spawn(p.ProfileID)
		if err != nil {
			return nil, instanceErr(err)
		}
		return map[string]any{"instance": st}, nil
	})
	g.Handle("profiles.stop", gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
		var p struct {
			InstanceID string `json:"instanceId"`
		}
		if err := decode(c, &p); err != nil {
			return nil, err
		}
		if err := adminOnly(ctx, ac, c); err != nil {
			return nil, err
		}
		if p.InstanceID == "" {
			return nil, gateway.Errorf(gateway.CodeInvalidRequest, "profiles.stop: instanceId is required")
		}
		ctx, cancel := context.WithTimeout(ctx, stopWait)
		defer cancel()
		if err := in.Stop(ctx, p.InstanceID); err != nil {
			return nil, instanceErr(err)
		}
		return map[string]any{"stopped": true, "instanceId": p.InstanceID}, nil
	})
}

// adminOnly refuses the call unless it comes from an operator connection
// acting as itself (no `as`): starting and stopping processes is the
// person's decision.
func adminOnly(ctx context.Context, ac *access, c *gateway.Call) error {
	_, who, err := principal(ctx, ac, c)
	if err != nil {
		return err
	}
	if c.Principal.Class() != gateway.Admin || who.Role != "" {
		return gateway.Errorf(gateway.CodeForbidden, "%s: only the operator starts and stops instances", c.Method)
	}
	return nil
}

// instanceErr maps package worker's errors to protocol codes.
func instanceErr(err error) error {
	switch {
	case errors.Is(err, worker.ErrUnknownProfile), errors.Is(err, worker.ErrUnknownInstance):
		return gateway.Errorf(gateway.CodeNotFound, "%v", err)
	case errors.Is(err, worker.ErrTooManyInstance):
		return gateway.Errorf(gateway.CodeConflict, "%v", err)
	case errors.Is(err, worker.ErrPoolNotRunning):
		return &gateway.Error{Code: gateway.CodeUnavailable, Message: err.Error(), Retryable: true}
	case errors.Is(err, context.DeadlineExceeded):
		return &gateway.Error{Code: gateway.CodeTimeout, Message: err.Error(), Retryable: true}
	}
	return mapErr(err)
}

// profilesList is profiles.list's payload: the chat profiles, and with
// instances the light index and the running instances.
func profilesList(o Options) map[string]any {
	out := map[string]any{"profiles": []any{}}
	if o.Chat != nil {
		out["profiles"] = o.Chat.Profiles()
	}
	if o.Instances != nil {
		out["index"] = o.Instances.Profiles()
		out["instances"] = o.Instances.List()
	}
	return out
}
