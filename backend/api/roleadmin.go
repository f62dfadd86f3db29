package api

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/guard"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/worker"
)

// This file binds profiles.update, profiles.delete (issue 24 item 1) and
// memory.rename (item 5; docs/PROTOCOL.md).

// RoleMethods lists the methods registerRoleAdmin adds.
var RoleMethods = []string{"profiles.update", "profiles.delete", "memory.rename"}

// RoleEditor is what profiles.update and profiles.delete need of the
// memory engine (implemented by *memory.Manager).
type RoleEditor interface {
	UpdateRole(ctx context.Context, r memory.UpdateRoleRequest) (memory.UpdateRoleResult, error)
	DeleteRole(ctx context.Context, r memory.DeleteRoleRequest) (memory.DeleteRoleResult, error)
}

// Renamer is memory.rename's engine (implemented by *memory.Manager).
type Renamer interface {
	Rename(ctx context.Context, r memory.RenameRequest) (memory.RenameResult, error)
}

// RoleApp is the app's side of a role, outside memory (implemented by the
// wiring, package atrium, over config.json, the MCP tokens and the paired
// devices).
type RoleApp interface {
	// SetModel sets config.json profiles.<role>.model.model to model, or
	// removes it when model is "" (the role then uses the persona's or
	// the app's model). Errors wrapping config.ErrInvalid are the
	// caller's.
	SetModel(ctx context.Context, role, model string) error
	// ForgetRole removes what the app keeps for a role being deleted:
	// config.json profiles.<role>, and its MCP tokens, revoked. With
	// dryRun it changes nothing and says what it would do.
	ForgetRole(ctx context.Context, role string, dryRun bool) (RoleCleanup, error)
}

// RoleCleanup is what ForgetRole did (or would do): the ids of the MCP
// tokens acting as the role that were revoked (not those revoked before),
// the paired devices whose memory scope names the role (left as they are:
// see docs/PROTOCOL.md profiles.delete) and whether config.json had
// settings for the role.
type RoleCleanup struct {
	MCPTokens []string       `json:"mcpTokensRevoked"`
	Devices   []OrphanDevice `json:"orphanedDevices"`
	Config    bool           `json:"configRemoved"`
}

// OrphanDevice is a paired device scoped to a deleted role.
type OrphanDevice struct {
	DeviceID    string `json:"deviceId"`
	DisplayName string `json:"displayName,omitempty"`
}

// starter is an Instances that starts an instance under a given id
// (worker.Pool.Start): profiles.update's restart.
type starter interface {
	Start(instanceID string) (worker.Status, error)
}

// running lists the instances of profile that are not stopped.
func running(in Instances, profile string) []string {
	out := []string{}
	if in == nil {
		return out
	}
	for _, st := range in.List() {
		if st.ProfileID == profile && st.State != worker.StateStopped {
			out = append(out, st.InstanceID)
		}
	}
	return out
}

// adminWriter is the check of profiles.update and profiles.delete: an
// operator connection acting as itself (no `as`; a device scoped admin
// counts) — the same rule as profiles.create.
func adminWriter(ctx context.Context, ac *access, c *gateway.Call, target string) (context.Context, acl.Principal, error) {
	ctx, w, err := writer(ctx, ac, c, target)
	if err != nil {
		return ctx, acl.Principal{}, err
	}
	if w != memory.AdminWriter {
		return ctx, acl.Principal{}, gateway.Errorf(gateway.CodeForbidden, "%s: only admin changes roles", c.Method)
	}
	who, _ := guard.PrincipalFrom(ctx)
	return ctx, who, nil
}

func registerRoleAdmin(g *gateway.Server, ed RoleEditor, ren Renamer, app RoleApp, inst Instances, ac *access) {
	gd := ac.g
	record := func(who acl.Principal, op, target, reason string) error {
		if gd == nil {
			return nil
		}
		return mapErr(gd.Record(who, op, target, true, reason))
	}
	if ed != nil {
		g.Handle("profiles.update", gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
			var p struct {
				Role         string    `json:"role"`
				Description  *string   `json:"description"`
				Capabilities *[]string `json:"capabilities"`
				Persona      *string   `json:"persona"`
				Model        *string   `json:"model"`
				BaseVersion  string    `json:"baseVersion"`
				Restart      bool      `json:"restart"`
			}
			if err := decode(c, &p); err != nil {
				return nil, err
			}
			ctx, who, err := adminWriter(ctx, ac, c, "profiles.update "+p.Role)
			if err != nil {
				return nil, err
			}
			if strings.TrimSpace(p.Role) == "" {
				return nil, gateway.Errorf(gateway.CodeInvalidRequest, "profiles.update: role is required")
			}
			if p.Model != nil && app == nil {
				return nil, gateway.Errorf(gateway.CodeUnavailable, "profiles.update: this gateway keeps no profile settings (model)")
			}
			res, err := ed.UpdateRole(ctx, memory.UpdateRoleRequest{Role: p.Role, Description: p.Description, Capabilities: p.Capabilities,
				Persona: p.Persona, BaseVersion: p.BaseVersion, Writer: memory.AdminWriter})
			if err != nil {
				return nil, mapErr(err)
			}
			if p.Model != nil {
				if err := app.SetModel(ctx, p.Role, strings.TrimSpace(*p.Model)); err != nil {
					return nil, settingsErr(fmt.Errorf("profiles.update %s: model: %w", p.Role, err))
				}
				res.Changed = append(res.Changed, "model")
			}
			if r, ok := inst.(rescanner); ok && len(res.Changed) > 0 {
				if err := r.Rescan(); err != nil {
					slog.Warn("profile index rescan failed", "role", p.Role, "error", err.Error())
				}
			}
			ids := running(inst, p.Role)
			out := map[string]any{"role": res.Role, "path": res.Path, "version": res.Version, "changed": res.Changed,
				"instances": ids, "restartRequired": []string{}, "restarted": []string{}}
			if p.Restart {
				restarted, err := restartAll(ctx, inst, ids)
				out["restarted"] = restarted
				if err != nil {
					return nil, err
				}
			} else if slices.Contains(res.Changed, "model") {
				// The persona is read at each run; the model when the
				// instance's process starts.
				out["restartRequired"] = ids
			}
			reason := "changed: " + strings.Join(res.Changed, ", ")
			if p.Restart {
				reason += fmt.Sprintf("; %d instances restarted", len(ids))
			}
			if err := record(who, "profiles.update", res.Path, reason); err != nil {
				return nil, err
			}
			return out, nil
		})
		g.Handle("profiles.delete", gateway.Write(gateway.Admin), func(ctx context.Context, c *gateway.Call) (any, error) {
			var p struct {
				Role         string `json:"role"`
				DeleteMemory bool   `json:"deleteMemory"`
				DryRun       bool   `json:"dryRun"`
			}
			if err := decode(c, &p); err != nil {
				return nil, err
			}
			ctx, who, err := adminWriter(ctx, ac, c, "profiles.delete "+p.Role)
			if err != nil {
				return nil, err
			}
			if strings.TrimSpace(p.Role) == "" {
				return nil, gateway.Errorf(gateway.CodeInvalidRequest, "profiles.delete: role is required")
			}
			if p.Role == memory.MainRole {
				return nil, gateway.Errorf(gateway.CodeInvalidRequest, "profiles.delete: role main is the app's own and cannot be deleted")
			}
			// What it would do first: an unknown role is refused before
			// any instance is stopped.
			plan, err := ed.DeleteRole(ctx, memory.DeleteRoleRequest{Role: p.Role, DeleteMemory: p.DeleteMemory, DryRun: true})
			if err != nil {
				return nil, mapErr(err)
			}
			ids := running(inst, p.Role)
			clean := RoleCleanup{MCPTokens: []string{}, Devices: []OrphanDevice{}}
			if app != nil {
				if clean, err = app.ForgetRole(ctx, p.Role, true); err != nil {
					return nil, mapErr(err)
				}
			}
			out := func(res memory.DeleteRoleResult, stopped []string) map[string]any {
				return map[string]any{"role": res.Role, "path": res.Path, "files": res.Files, "notes": res.Notes, "bytes": res.Bytes,
					"kept": res.Kept, "archivePath": res.ArchivePath, "dryRun": res.DryRun, "instances": ids, "stopped": stopped,
					"mcpTokensRevoked": clean.MCPTokens, "orphanedDevices": clean.Devices, "configRemoved": clean.Config}
			}
			if p.DryRun {
				return out(plan, []string{}), nil
			}
			stopped := []string{}
			for _, id := range ids {
				sctx, cancel := context.WithTimeout(ctx, stopWait)
				err := inst.Stop(sctx, id)
				cancel()
				if err != nil {
					return nil, instanceErr(fmt.Errorf("profiles.delete %s: stop %s: %w", p.Role, id, err))
				}
				stopped = append(stopped, id)
			}
			res, err := ed.DeleteRole(ctx, memory.DeleteRoleRequest{Role: p.Role, DeleteMemory: p.DeleteMemory})
			if err != nil {
				return nil, mapErr(err)
			}
			if app != nil {
				if clean, err = app.ForgetRole(ctx, p.Role, false); err != nil {
					// The role is gone from memory; say what is left.
					return nil, mapErr(fmt.Errorf("profiles.delete %s: the role was deleted but its settings or tokens were not all removed: %w", p.Role, err))
				}
			}
			if r, ok := inst.(rescanner); ok {
				if err := r.Rescan(); err != nil {
					slog.Warn("profile index rescan failed", "role", p.Role, "error", err.Error())
				}
			}
			reason := fmt.Sprintf("memory deleted (%d files)", res.Files)
			if res.Kept {
				reason = fmt.Sprintf("memory kept in %s (%d files)", res.ArchivePath, res.Files)
			}
			reason += fmt.Sprintf("; %d instances stopped, %d MCP tokens revoked, %d devices still scoped to it", len(stopped), len(clean.MCPTokens), len(clean.Devices))
			if err := record(who, "profiles.delete", res.Path, reason); err != nil {
				return nil, err
			}
			return out(res, stopped), nil
		})
	}
	if ren != nil {
		g.Handle("memory.rename", gateway.Write(gateway.Operators), func(ctx context.Context, c *gateway.Call) (any, error) {
			var p struct {
				Path        string `json:"path"`
				To          string `json:"to"`
				BaseVersion string `json:"baseVersion"`
			}
			if err := decode(c, &p); err != nil {
				return nil, err
			}
			if p.Path == "" || p.To == "" {
				return nil, gateway.Errorf(gateway.CodeInvalidRequest, "memory.rename: path and to are required")
			}
			ctx, w, err := writer(ctx, ac, c, p.Path)
			if err != nil {
				return nil, err
			}
			// The engine asks the guard about both paths (write on each,
			// audited as operation "rename": Options.Authorize).
			res, err := ren.Rename(ctx, memory.RenameRequest{From: p.Path, To: p.To, BaseVersion: p.BaseVersion, Writer: w})
			return res, mapErr(err)
		})
	}
}

// restartAll stops each instance and starts it again under its id, so it
// reads its profile's settings (model) anew; it returns those restarted.
func restartAll(ctx context.Context, in Instances, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return []string{}, nil
	}
	st, ok := in.(starter)
	if !ok {
		return []string{}, gateway.Errorf(gateway.CodeUnavailable, "profiles.update: instances cannot be restarted here")
	}
	done := []string{}
	for _, id := range ids {
		sctx, cancel := context.WithTimeout(ctx, stopWait)
		err := in.Stop(sctx, id)
		cancel()
		if err != nil {
			return done, instanceErr(fmt.Errorf("restart %s: stop: %w", id, err))
		}
		if _, err := st.Start(id); err != nil {
			return done, instanceErr(fmt.Errorf("restart %s: start: %w", id, err))
		}
		done = append(done, id)
	}
	return done, nil
}
