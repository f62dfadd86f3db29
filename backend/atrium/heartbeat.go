package atrium

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/config"
	"github.com/atrium-dev/atrium/backend/heartbeat"
)

// heartbeatFile is the workspace file a heartbeat turn reads (OpenClaw's
// convention; main's prompt carries it, memory.Manager.MainContext).
const heartbeatFile = "HEARTBEAT.md"

// heartbeatUsed reports whether the workspace uses HEARTBEAT.md: the file
// holds something besides blank lines, Markdown headings and HTML
// comments (OpenClaw skips such an "effectively empty" file too).
func heartbeatUsed(workspace string) bool {
	b, err := os.ReadFile(filepath.Join(workspace, heartbeatFile))
	if err != nil {
		return false
	}
	inComment := false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if inComment {
			if i := strings.Index(l, "-->"); i >= 0 {
				inComment, l = false, strings.TrimSpace(l[i+3:])
			} else {
				continue
			}
		}
		if strings.HasPrefix(l, "<!--") {
			if i := strings.Index(l, "-->"); i >= 0 {
				l = strings.TrimSpace(l[i+3:])
			} else {
				inComment = true
				continue
			}
		}
		if l != "" && !strings.HasPrefix(l, "#") {
			return true
		}
	}
	return false
}

// heartbeatSettings is the schedule the settings in force describe (an
// unset agents.heartbeat.enabled follows the workspace's HEARTBEAT.md).
func (a *App) heartbeatSettings(c config.Config) (heartbeat.Settings, error) {
	return c.Agents.Heartbeat.Settings(heartbeatUsed(a.Layout.Workspace))
}

// newHeartbeat builds the scheduler of main's heartbeat turn (issue 24
// item 7): each turn is chat.Service.Heartbeat.
func (a *App) newHeartbeat(o Options) (*heartbeat.Scheduler, error) {
	set, err := a.heartbeatSettings(a.config())
	if err != nil {
		return nil, err
	}
	return heartbeat.New(heartbeat.Options{
		Clock:    o.HeartbeatClock,
		Location: o.HeartbeatLocation,
		Logger:   o.Logger,
		Turn: func(ctx context.Context) (heartbeat.Outcome, error) {
			res, err := a.Chat.Heartbeat(ctx, "")
			switch {
			case err != nil:
				return heartbeat.OutcomeFailed, err
			case res.Outcome != "final":
				return heartbeat.OutcomeFailed, fmt.Errorf("heartbeat run %s ended %s", res.RunID, res.Outcome)
			case res.Silent:
				return heartbeat.OutcomeSilent, nil
			}
			return heartbeat.OutcomeShown, nil
		},
	}, set)
}

// applyHeartbeat puts agents.heartbeat of the settings in force in force.
func (a *App) applyHeartbeat() error {
	if a.Heartbeat == nil {
		return nil
	}
	set, err := a.heartbeatSettings(a.config())
	if err != nil {
		return err
	}
	return a.Heartbeat.Update(set)
}

// runHeartbeat runs the scheduler until ctx ends. Whether the workspace
// uses HEARTBEAT.md (what an unset agents.heartbeat.enabled follows) is
// read at start and at each config.patch.
func (a *App) runHeartbeat(ctx context.Context) error {
	if a.Heartbeat == nil {
		<-ctx.Done()
		return nil
	}
	return a.Heartbeat.Run(ctx)
}

// heartbeatInUse is Settings' view of the schedule in force.
func (a *App) heartbeatInUse(c config.Config) api.HeartbeatInUse {
	used := heartbeatUsed(a.Layout.Workspace)
	hb := api.HeartbeatInUse{FileUsed: used, Auto: c.Agents.Heartbeat.Enabled == nil}
	if a.Heartbeat == nil {
		return hb
	}
	st := a.Heartbeat.Status()
	hb.On = st.Settings.On
	every := st.Settings.Every
	if every == 0 {
		every = heartbeat.DefaultEvery
	}
	hb.EveryMinutes = int(every.Minutes())
	hb.Start, hb.End = st.Settings.Window()
	if !st.LastRun.IsZero() {
		hb.LastRun, hb.LastOutcome = st.LastRun.UnixMilli(), string(st.LastOutcome)
	}
	if !st.Next.IsZero() {
		hb.Next = st.Next.UnixMilli()
	}
	return hb
}
