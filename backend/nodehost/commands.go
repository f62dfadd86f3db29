package nodehost

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/capture"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// Commands and capabilities this host declares at connect.
const (
	CmdRun    = "system.run"
	CmdWhich  = "system.which"
	CmdNotify = "system.notify"
	CapSystem = "system"
)

// Commands is the list every host declares at connect; Host.Commands adds
// MediaCommands when ffmpeg is found.
func Commands() []string { return []string{CmdRun, CmdWhich, CmdNotify} }

// Caps is the capability list every host declares at connect; Host.Caps
// adds camera and screen when ffmpeg is found.
func Caps() []string { return []string{CapSystem} }

// WhichParams / WhichResult: system.which {name} → {path}.
type WhichParams struct {
	Name string `json:"name"`
}

// WhichResult is system.which's result: the absolute path of the executable.
type WhichResult struct {
	Path string `json:"path"`
}

// NotifyParams / NotifyResult: system.notify {title, body} → {delivered, via}.
type NotifyParams struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

// NotifyResult says whether a desktop notification was shown: Via is
// "notify-send" (Delivered true) or "log" (no notifier on this host: the
// text went to the host's log, Delivered false).
type NotifyResult struct {
	Delivered bool   `json:"delivered"`
	Via       string `json:"via"`
}

// Limits of system.notify's text (bytes).
const (
	maxNotifyTitle = 256
	maxNotifyBody  = 4096
)

// Commander serves the node's commands.
type Commander struct {
	Runner *Runner
	// Notifier is the notify-send executable name (default "notify-send");
	// tests point it elsewhere.
	Notifier string
	Log      *slog.Logger
	// Capture serves the media commands (nil, or ffmpeg not found: they
	// fail FFMPEG_NOT_FOUND).
	Capture *capture.Capturer
	// Send and Signal carry a media command's file to the gateway
	// (rtc.Sender.Send over node.media.offer); set per connection.
	Send   Sender
	Signal rtc.Signal
	// Call calls a gateway method on the node's connection (node.live.offer);
	// Background lives as long as that connection (a live view outlasts its
	// invoke); LiveConfig is the live connection's ICE (the address the
	// gateway is reached on). Set per connection.
	Call       func(ctx context.Context, method string, params, out any) error
	Background context.Context
	LiveConfig rtc.Config
	// transfers are the media transfers running, for node.media.cancel.
	transfers *transfers
}

func (c *Commander) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// served is what this Commander serves: Commands, and MediaCommands when
// ffmpeg is found.
func (c *Commander) served() []string {
	if c.Capture != nil && c.Capture.Available() == nil {
		return append(Commands(), MediaCommands()...)
	}
	return Commands()
}

// Invoke runs command with raw JSON params. The result is JSON-encodable,
// or a *MediaResult for a media command (its payload and the transfer that
// carried the file); errors are *CommandError.
func (c *Commander) Invoke(ctx context.Context, command string, params json.RawMessage) (any, error) {
	switch command {
	case CmdRun:
		var p RunParams
		if err := decodeParams(command, params, &p); err != nil {
			return nil, err
		}
		return c.Runner.Run(ctx, p)
	case CmdWhich:
		var p WhichParams
		if err := decodeParams(command, params, &p); err != nil {
			return nil, err
		}
		return c.which(p)
	case CmdNotify:
		var p NotifyParams
		if err := decodeParams(command, params, &p); err != nil {
			return nil, err
		}
		return c.notify(ctx, p)
	case CmdCameraList, CmdCameraSnap, CmdCameraClip, CmdScreenSnapshot, CmdScreenRecord:
		return c.media(ctx, command, params)
	case CmdCameraLive, CmdScreenLive:
		return c.live(ctx, command, params)
	}
	return nil, cmdErr(CodeNotFound, "%q is not a command of this node (it serves %s)", command, strings.Join(c.served(), ", "))
}

func decodeParams(command string, raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return cmdErr(CodeInvalidRequest, "%s: bad params: %v", command, err)
	}
	return nil
}

func (c *Commander) which(p WhichParams) (WhichResult, error) {
	if p.Name == "" || strings.ContainsAny(p.Name, "/\\\x00") {
		return WhichResult{}, cmdErr(CodeInvalidRequest, "system.which: params.name must be a command name without a path")
	}
	path, err := exec.LookPath(p.Name)
	if err != nil {
		return WhichResult{}, cmdErr(CodeNotFound, "system.which: %q is not in this host's PATH", p.Name)
	}
	return WhichResult{Path: path}, nil
}

func (c *Commander) notify(ctx context.Context, p NotifyParams) (NotifyResult, error) {
	if p.Title == "" && p.Body == "" {
		return NotifyResult{}, cmdErr(CodeInvalidRequest, "system.notify: params.title or params.body is required")
	}
	if len(p.Title) > maxNotifyTitle || len(p.Body) > maxNotifyBody || !utf8.ValidString(p.Title) || !utf8.ValidString(p.Body) {
		return NotifyResult{}, cmdErr(CodeInvalidRequest, "system.notify: title (≤ %d bytes) and body (≤ %d bytes) must be UTF-8 text", maxNotifyTitle, maxNotifyBody)
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := c.Notifier
	if name == "" {
		name = "notify-send"
	}
	if exe, err := exec.LookPath(name); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		title := p.Title
		if title == "" {
			title = "Atrium"
		}
		out, err := exec.CommandContext(ctx, exe, "--app-name=Atrium", "--", title, p.Body).CombinedOutput()
		if err == nil {
			log.Info("system.notify shown", "via", "notify-send")
			return NotifyResult{Delivered: true, Via: "notify-send"}, nil
		}
		log.Warn("notify-send failed; notification logged instead", "err", err, "output", strings.TrimSpace(string(out)))
	}
	log.Info("system.notify (no desktop notifier on this host)", "title", p.Title, "body", p.Body)
	return NotifyResult{Delivered: false, Via: "log"}, nil
}
