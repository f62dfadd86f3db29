package atrium

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/atrium-dev/atrium/backend/api"
)

// roleApp is api.RoleApp over the app's settings (config.json profiles),
// its MCP tokens and its paired devices (profiles.update, profiles.delete;
// docs/PROTOCOL.md).
type roleApp struct {
	a        *App
	settings *settings
}

// SetModel implements api.RoleApp: a merge patch of config.json, applied
// as config.patch applies it (new instances of the role use it).
func (r roleApp) SetModel(ctx context.Context, role, model string) error {
	var m any // null removes the key
	if model != "" {
		m = model
	}
	patch, err := json.Marshal(map[string]any{"profiles": map[string]any{role: map[string]any{"model": map[string]any{"model": m}}}})
	if err != nil {
		return err
	}
	if _, err := r.settings.Patch(ctx, patch); err != nil {
		return fmt.Errorf("set the model of %s: %w", role, err)
	}
	return nil
}

// ForgetRole implements api.RoleApp: config.json's profiles.<role> is
// removed, the MCP tokens acting as the role are revoked (a token is a
// credential a program holds: it must not gain the rights of a role
// created later under the same name), and the paired devices scoped to
// the role are listed (their scope is the person's choice; see
// docs/PROTOCOL.md profiles.delete).
func (r roleApp) ForgetRole(ctx context.Context, role string, dryRun bool) (api.RoleCleanup, error) {
	out := api.RoleCleanup{MCPTokens: []string{}, Devices: []api.OrphanDevice{}}
	_, out.Config = r.a.config().Profiles[role]
	if r.a.MCPTokens != nil {
		ts, err := r.a.MCPTokens.List(ctx)
		if err != nil {
			return out, fmt.Errorf("forget role %s: %w", role, err)
		}
		for _, t := range ts {
			if t.Role != role || t.RevokedMs != 0 {
				continue
			}
			if !dryRun {
				if _, err := r.a.MCPTokens.Revoke(ctx, t.ID); err != nil {
					return out, fmt.Errorf("forget role %s: revoke MCP token %s: %w", role, t.ID, err)
				}
			}
			out.MCPTokens = append(out.MCPTokens, t.ID)
		}
	}
	if r.a.Pairing != nil {
		ds, err := r.a.Pairing.Devices(ctx)
		if err != nil {
			return out, fmt.Errorf("forget role %s: %w", role, err)
		}
		for _, d := range ds {
			if d.Scope.Role() == role {
				out.Devices = append(out.Devices, api.OrphanDevice{DeviceID: d.DeviceID, DisplayName: d.DisplayName})
			}
		}
	}
	if out.Config && !dryRun {
		patch, _ := json.Marshal(map[string]any{"profiles": map[string]any{role: nil}})
		if _, err := r.settings.Patch(ctx, patch); err != nil {
			return out, fmt.Errorf("forget role %s: settings: %w", role, err)
		}
	}
	return out, nil
}

var _ api.RoleApp = roleApp{}
