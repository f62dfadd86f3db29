package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/atrium-dev/atrium/backend/capture"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// Media commands (issue 22), served through ffmpeg (package capture) and
// declared only when ffmpeg is found.
const (
	CmdCameraList     = "camera.list"
	CmdCameraSnap     = "camera.snap"
	CmdCameraClip     = "camera.clip"
	CmdScreenSnapshot = "screen.snapshot"
	CmdScreenRecord   = "screen.record"
	CapCamera         = "camera"
	CapScreen         = "screen"
	// MethodMediaOffer signals a transfer (docs/PROTOCOL.md "Media transfers").
	MethodMediaOffer = "node.media.offer"
	// EventMediaCancel: the gateway gave up a transfer {transferId, code}.
	EventMediaCancel = "node.media.cancel"
)

// Error codes of the media commands (node.invoke.result error.code).
const (
	CodeFFmpegNotFound    = "FFMPEG_NOT_FOUND"
	CodeNoCamera          = "NO_CAMERA"
	CodeCameraBusy        = "CAMERA_BUSY"
	CodeNoScreen          = "NO_SCREEN"
	CodeScreenUnavailable = "SCREEN_CAPTURE_UNAVAILABLE" // as the phone page's: no display, Wayland's portal
	CodeCaptureFailed     = "CAPTURE_FAILED"
	CodeTooLarge          = "TOO_LARGE"
	CodeCancelled         = "CANCELLED"
	CodeTimeout           = "TIMEOUT"
	CodeTransferFailed    = "TRANSFER_FAILED"
)

// MediaCommands are the commands served through ffmpeg (the live view's
// too: live.go).
func MediaCommands() []string {
	return []string{CmdCameraList, CmdCameraSnap, CmdCameraClip, CmdScreenSnapshot, CmdScreenRecord, CmdCameraLive, CmdScreenLive}
}

// sendAttempts bounds the sends of one file: the first and two resumes
// with the same transfer id after a cut connection.
const sendAttempts = 3

// transferParams is the "transfer" the gateway adds to a media command's
// params: the id to offer and the largest file it takes (0: its store's limit).
type transferParams struct {
	ID      string `json:"id"`
	MaxSize int64  `json:"maxSize"`
}

// MediaRef is node.invoke.result's media: the transfer that carried the file.
type MediaRef struct {
	ID        string `json:"id"`
	Transport string `json:"transport"`
}

// MediaResult is what a media command returns to Host.invoke: the payload
// and the media of node.invoke.result.
type MediaResult struct {
	Payload any
	Media   MediaRef
}

// MediaPayload is a media command's payload, the phone page's fields:
// the file's size in pixels (width, height), bytes, SHA-256 (hex, as the
// gateway confirmed it), MIME type, duration of a clip in ms, and where it
// came from.
type MediaPayload struct {
	Width      int    `json:"width,omitempty"`
	Height     int    `json:"height,omitempty"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	MIME       string `json:"mime"`
	DurationMs int64  `json:"durationMs,omitempty"`
	Facing     string `json:"facing,omitempty"`
	Audio      *bool  `json:"audio,omitempty"`
	FPS        int    `json:"fps,omitempty"`
	Format     string `json:"format,omitempty"`
	Device     string `json:"device"`
}

// CameraListResult is camera.list's result.
type CameraListResult struct {
	Cameras []capture.Camera `json:"cameras"`
}

// Sender sends one file over a media transfer (rtc.Sender.Send).
type Sender func(ctx context.Context, f rtc.File, signal rtc.Signal) (rtc.Sent, error)

// transfers are the media transfers this host is sending, by transfer id,
// so that node.media.cancel stops the right one.
type transfers struct {
	mu     sync.Mutex
	cancel map[string]context.CancelCauseFunc
}

func (t *transfers) add(id string, cancel context.CancelCauseFunc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel == nil {
		t.cancel = map[string]context.CancelCauseFunc{}
	}
	t.cancel[id] = cancel
}

func (t *transfers) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.cancel, id)
}

// stop cancels transfer id (node.media.cancel); false when none runs.
func (t *transfers) stop(id, code string) bool {
	t.mu.Lock()
	cancel := t.cancel[id]
	t.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel(&CommandError{Code: CodeCancelled, Message: fmt.Sprintf("the gateway cancelled transfer %s (%s)", id, code)})
	return true
}

// splitTransfer takes "transfer" out of a media command's params.
func splitTransfer(command string, raw json.RawMessage) (json.RawMessage, transferParams, error) {
	var m map[string]json.RawMessage
	if len(strings.TrimSpace(string(raw))) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, transferParams{}, cmdErr(CodeInvalidRequest, "%s: params must be a JSON object", command)
		}
	}
	var t transferParams
	if tr, ok := m["transfer"]; ok {
		if err := json.Unmarshal(tr, &t); err != nil {
			return nil, transferParams{}, cmdErr(CodeInvalidRequest, "%s: bad transfer: %v", command, err)
		}
		delete(m, "transfer")
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return nil, transferParams{}, fmt.Errorf("%s: params: %w", command, err)
	}
	return rest, t, nil
}

// captureError maps a capture failure to a command error.
func captureError(command string, err error) *CommandError {
	var ce *CommandError
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, capture.ErrInvalid):
		return cmdErr(CodeInvalidRequest, "%v", err)
	case errors.Is(err, capture.ErrFFmpegNotFound):
		return cmdErr(CodeFFmpegNotFound, "%s: %v", command, err)
	case errors.Is(err, capture.ErrNoCamera):
		return cmdErr(CodeNoCamera, "%s: %v", command, err)
	case errors.Is(err, capture.ErrCameraBusy):
		return cmdErr(CodeCameraBusy, "%s: %v", command, err)
	case errors.Is(err, capture.ErrNoScreen):
		return cmdErr(CodeNoScreen, "%s: %v", command, err)
	case errors.Is(err, capture.ErrNoDisplay), errors.Is(err, capture.ErrPortalUnsupported):
		return cmdErr(CodeScreenUnavailable, "%s: %v", command, err)
	case errors.Is(err, context.DeadlineExceeded):
		return cmdErr(CodeTimeout, "%s: the invoke's time ran out: %v", command, err)
	case errors.Is(err, context.Canceled):
		return cmdErr(CodeCancelled, "%s: %v", command, err)
	case errors.Is(err, capture.ErrFailed):
		return cmdErr(CodeCaptureFailed, "%s: %v", command, err)
	}
	return cmdErr(CodeInternal, "%s: %v", command, err)
}

// media serves a media command: capture through ffmpeg into a temporary
// file, send it on the gateway's transfer (resumed with the same id after
// a cut, at most sendAttempts sends), remove the file.
func (c *Commander) media(ctx context.Context, command string, raw json.RawMessage) (any, error) {
	if c.Capture == nil {
		return nil, cmdErr(CodeFFmpegNotFound, "%s: this node has no capture set up", command)
	}
	if err := c.Capture.Available(); err != nil {
		return nil, cmdErr(CodeFFmpegNotFound, "%s: %v", command, err)
	}
	params, tr, err := splitTransfer(command, raw)
	if err != nil {
		return nil, err
	}
	if command == CmdCameraList {
		if err := decodeParams(command, params, &struct{}{}); err != nil {
			return nil, err
		}
		cams, err := c.Capture.Cameras(ctx)
		if err != nil {
			return nil, captureError(command, err)
		}
		return CameraListResult{Cameras: append([]capture.Camera{}, cams...)}, nil
	}
	if tr.ID == "" {
		return nil, cmdErr(CodeInvalidRequest, "%s: params.transfer.id is missing (the gateway adds it to a media command)", command)
	}
	if c.Send == nil || c.Signal == nil {
		return nil, cmdErr(CodeInternal, "%s: this node cannot send media (no sender)", command)
	}
	// node.media.cancel for this transfer ends the capture or the send.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if c.transfers != nil {
		c.transfers.add(tr.ID, cancel)
		defer c.transfers.remove(tr.ID)
	}
	var res *capture.Result
	pay := MediaPayload{}
	switch command {
	case CmdCameraSnap:
		var p capture.SnapRequest
		if err := decodeParams(command, params, &p); err != nil {
			return nil, err
		}
		res, err = c.Capture.Snap(ctx, p)
		pay.Facing = p.Facing
		if pay.Facing == "" {
			pay.Facing = "back"
		}
	case CmdCameraClip:
		var p capture.ClipRequest
		if err := decodeParams(command, params, &p); err != nil {
			return nil, err
		}
		res, err = c.Capture.Clip(ctx, p)
		pay.Facing = p.Facing
		if pay.Facing == "" {
			pay.Facing = "back"
		}
	case CmdScreenSnapshot:
		var p capture.SnapshotRequest
		if err := decodeParams(command, params, &p); err != nil {
			return nil, err
		}
		res, err = c.Capture.ScreenSnapshot(ctx, p)
	case CmdScreenRecord:
		var p capture.RecordRequest
		if err := decodeParams(command, params, &p); err != nil {
			return nil, err
		}
		res, err = c.Capture.ScreenRecord(ctx, p)
		pay.FPS = p.FPS
		if pay.FPS == 0 {
			pay.FPS = capture.DefaultFPS
		}
	default:
		return nil, cmdErr(CodeNotFound, "%q is not a media command", command)
	}
	if err != nil {
		return nil, captureError(command, cause(ctx, err))
	}
	defer func() {
		if rerr := res.Remove(); rerr != nil {
			c.logger().Warn("capture file not removed", "command", command, "err", rerr)
		}
	}()
	if tr.MaxSize > 0 && res.Size > tr.MaxSize {
		return nil, cmdErr(CodeTooLarge, "%s: the file is %d bytes, the gateway takes at most %d", command, res.Size, tr.MaxSize)
	}
	sum, err := c.sendFile(ctx, tr.ID, res)
	if err != nil {
		return nil, err
	}
	pay.Width, pay.Height, pay.Size, pay.SHA256, pay.MIME, pay.DurationMs, pay.Device = res.Width, res.Height, res.Size, sum, res.MIME, res.DurationMs, res.Device
	if command == CmdCameraClip {
		a := res.Audio
		pay.Audio = &a
	}
	if command == CmdScreenSnapshot {
		pay.Format = capture.FormatPNG
		if res.MIME == "image/jpeg" {
			pay.Format = capture.FormatJPEG
		}
	}
	c.logger().Info("media sent", "command", command, "transfer", tr.ID, "bytes", res.Size)
	return &MediaResult{Payload: pay, Media: MediaRef{ID: tr.ID, Transport: "webrtc"}}, nil
}

// cause is ctx's cancel cause when ctx ended (node.media.cancel's
// CommandError), else err.
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		var ce *CommandError
		if errors.As(context.Cause(ctx), &ce) {
			return ce
		}
	}
	return err
}

// sendFile sends res on transfer id through node.media.offer and returns
// the SHA-256 the gateway confirmed; a cut connection is resumed with the
// same id, a refusal (rtc.CancelError) is not.
func (c *Commander) sendFile(ctx context.Context, id string, res *capture.Result) (string, error) {
	f, err := os.Open(res.Path)
	if err != nil {
		return "", cmdErr(CodeInternal, "open the captured file: %v", err)
	}
	defer f.Close()
	file := rtc.File{ID: id, Name: res.Name, Data: f, Size: res.Size, MIME: res.MIME, Width: res.Width, Height: res.Height, DurationMs: res.DurationMs}
	var last error
	for attempt := range sendAttempts {
		sent, err := c.Send(ctx, file, c.Signal)
		if err == nil {
			return sent.SHA256, nil
		}
		last = cause(ctx, err)
		var ce *rtc.CancelError
		if errors.As(err, &ce) {
			return "", cmdErr(ce.Code, "media transfer %s: %s", id, ce.Message)
		}
		var cmd *CommandError
		if errors.As(last, &cmd) {
			return "", cmd
		}
		if ctx.Err() != nil {
			break
		}
		c.logger().Warn("media transfer cut; resuming", "transfer", id, "attempt", attempt+1, "err", err)
	}
	if errors.Is(last, context.DeadlineExceeded) {
		return "", cmdErr(CodeTimeout, "media transfer %s: the invoke's time ran out: %v", id, last)
	}
	return "", cmdErr(CodeTransferFailed, "media transfer %s failed after %d tries: %v", id, sendAttempts, last)
}

// bindIPFor is the local address this computer reaches the gateway at
// rawURL from (a UDP "connect" sends nothing; it asks the routing table),
// the address the gateway's receiver expects ICE candidates from (it
// takes them only from the node's WebSocket address). Unknown: nil.
func bindIPFor(rawURL string) net.IP {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	conn, err := net.Dial("udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return nil
	}
	defer conn.Close()
	if a, ok := conn.LocalAddr().(*net.UDPAddr); ok {
		return a.IP
	}
	return nil
}
