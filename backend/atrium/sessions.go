package atrium

import (
	"context"
	"fmt"
	"slices"

	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/convo"
	"github.com/atrium-dev/atrium/backend/memory"
)

// ResetPolicy turns the "sessions" settings into chat's reset policy
// (SPEC §6 "Session lifecycle"): nil for "off"; "" means daily at
// DailyAt ("04:00" when empty) in the machine's local time. Errors: the
// settings are invalid (convo.ErrInvalid).
func ResetPolicy(s config.Sessions) (*convo.ResetPolicy, error) {
	if s.Reset == config.ResetOff {
		return nil, nil
	}
	p, err := convo.NewResetPolicy(convo.ResetOptions{Mode: s.Reset, DailyAt: s.DailyAt, IdleMinutes: s.IdleMinutes})
	if err != nil {
		return nil, fmt.Errorf("sessions settings: %w", err)
	}
	return p, nil
}

// applySessions hands chat the reset policy of the settings in force; an
// invalid one (config validates it, so only a hand-edited file read at
// start) turns automatic resets off and is logged.
func (a *App) applySessions() {
	p, err := ResetPolicy(a.config().Sessions)
	if err != nil {
		a.log.Warn("session resets off", "error", err.Error())
		p = nil
	}
	a.Chat.SetResetPolicy(p)
}

// runSessions applies the settings' reset policy and closes due sessions
// every minute until ctx ends (chat.Service.RunLifecycle).
func (a *App) runSessions(ctx context.Context) error {
	a.applySessions()
	a.Chat.RunLifecycle(ctx, 0)
	<-ctx.Done() // the chat service may close first: the app is stopping
	return nil
}

// saveSessionNote writes a closed session's note into its role's memory
// (chat.Options.SaveNote) as admin: the app does it for the person (their
// `/new`) or by the reset policy they set, as profiles.create writes a
// role's config; the role's own rights may not cover its folder (an .acl
// created before the role had one). An append, since the name is a daily
// log's (a second note of the same name that day adds a section). A role
// that is no longer in the workspace (profiles.delete ran while its
// session was open, then a reset closed it) gets no note: writing it would
// make memory/roles/<role>/ again, a folder roles.list shows as a role,
// that devices scoped to the old role read and .acl's old rules govern
// (the error becomes the reset's noteError; the messages stay in history).
func (a *App) saveSessionNote(ctx context.Context, role string, note convo.Note) error {
	roles, err := a.Memory.ListRoles(ctx)
	if err != nil {
		return fmt.Errorf("session note %s: %w", note.Path, err)
	}
	if !slices.ContainsFunc(roles, func(r memory.RoleInfo) bool { return r.Role == role }) {
		return fmt.Errorf("session note %s: %w: role %s is not in the workspace (deleted?); the note is not saved", note.Path, memory.ErrNotFound, role)
	}
	_, err = a.Memory.Write(ctx, memory.WriteRequest{Path: note.Path, Content: note.Markdown, Mode: memory.WriteAppend, Writer: memory.AdminWriter})
	if err != nil {
		return fmt.Errorf("session note %s: %w", note.Path, err)
	}
	return nil
}
