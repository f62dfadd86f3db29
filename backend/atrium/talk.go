package atrium

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/atrium-dev/atrium/backend/api"
	"github.com/atrium-dev/atrium/backend/chat"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/rtc"
	"github.com/atrium-dev/atrium/backend/talk"
)

// newTalk builds Talk (package talk, issue 27) on the gateway: the page's
// channel answered by rtc.AcceptStream labelled talk.ChannelLabel with
// the ICE rules of media transfers, transcripts sent through chat as
// chat.send would (the person's message, both history domains, with
// meta.talk), the same device rule as chat.send (api.MayChat: a paired
// operator device only for the profiles its scope chats with; a refusal
// is FORBIDDEN and audited), the settings in force read at each talk.open,
// kept audio into App.Media, talks ended when their connection closes.
// Chat's events reach it through chatEmit. now, stall and start are
// Options.TalkNow, Options.TalkSpeechStall and Options.TalkSpeechStart
// (zero values: the talk package's defaults).
func (a *App) newTalk(now func() time.Time, stall, start time.Duration, log *slog.Logger) error {
	svc, err := talk.New(talk.Options{
		Gateway:     a.Gateway,
		Chat:        talkChat{c: a.Chat},
		Settings:    func() talk.Settings { return a.config().Talk },
		MayChat:     a.talkMayChat,
		Store:       a.Media,
		Audit:       a.Audit,
		SpeechStall: stall,
		SpeechStart: start,
		Now:         now,
		Logger:      log,
		Accept: func(ctx context.Context, peer net.IP, offer string, h talk.Hooks) (talk.Conn, string, error) {
			s, answer, err := a.acceptStream(ctx, talk.ChannelLabel, peer, offer, rtc.StreamHooks{Message: h.Message, Closed: h.Closed}, talk.ErrOffer)
			if err != nil {
				return nil, "", err
			}
			return s, answer, nil
		},
	})
	if err != nil {
		return fmt.Errorf("talk: %w", err)
	}
	svc.Register()
	a.Talk = svc
	a.onClosed(svc.Disconnected)
	return nil
}

// talkMayChat is chat.send's device rule for talk.open.
func (a *App) talkMayChat(ctx context.Context, c *gateway.Call, profileID string) error {
	if c.Principal.Class() != gateway.OperatorDevice {
		return nil
	}
	who, err := a.deviceScope(ctx, c.Principal.Device)
	if err != nil {
		return gateway.Errorf(gateway.CodeForbidden, "%s: %v", c.Method, err)
	}
	if api.MayChat(who, profileID) {
		return nil
	}
	reason := "this device's memory scope does not chat with profile " + profileID +
		" (it chats only with the profiles of the role it is scoped to); the person can change the scope in Nodes → Paired devices"
	if err := a.Guard.Record(who, c.Method, "profile "+profileID, false, reason); err != nil {
		a.log.Warn("talk refusal not audited", "err", err)
	}
	return gateway.Errorf(gateway.CodeForbidden, "%s: %s", c.Method, reason)
}

// talkChat adapts chat.Service to talk.Chat: a transcript is sent as
// chat.send sends the person's message.
type talkChat struct{ c *chat.Service }

func (t talkChat) Send(ctx context.Context, m talk.Message) (talk.Sent, error) {
	res, err := t.c.Send(context.WithoutCancel(ctx), chat.SendRequest{ProfileID: m.ProfileID, SessionID: m.SessionID,
		ConversationID: m.ConversationID, Message: m.Text, Meta: m.Meta})
	if errors.Is(err, chat.ErrBusy) {
		return talk.Sent{}, fmt.Errorf("%w: %w", talk.ErrBusy, err)
	}
	if err != nil {
		return talk.Sent{}, err
	}
	return talk.Sent{RunID: res.RunID, SessionID: res.SessionID, UserMessageID: res.UserMessageID}, nil
}

func (t talkChat) Cancel(profileID, sessionID, runID string) (bool, error) {
	return t.c.Cancel(chat.CancelRequest{ProfileID: profileID, SessionID: sessionID, RunID: runID})
}

// talkEvent forwards a chat event to Talk (heartbeat turns are not
// spoken).
func (a *App) talkEvent(event string, payload any) {
	if a.Talk == nil {
		return
	}
	var e talk.RunEvent
	var ref chat.RunRef
	switch p := payload.(type) {
	case chat.ThinkingEvent:
		ref, e.Kind = p.RunRef, talk.RunStarted
	case chat.ChunkEvent:
		ref, e.Kind, e.Delta = p.RunRef, talk.RunDelta, p.Delta
	case chat.FinalEvent:
		ref, e.Kind = p.RunRef, talk.RunEnded
	case chat.CancelledEvent:
		ref, e.Kind = p.RunRef, talk.RunEnded
	case chat.ErrorEvent:
		ref, e.Kind = p.RunRef, talk.RunEnded
	default:
		return
	}
	if ref.Heartbeat {
		return
	}
	e.RunID, e.ProfileID, e.SessionID = ref.RunID, ref.ProfileID, ref.SessionID
	a.Talk.ChatEvent(e)
}
