package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/atrium-dev/atrium/backend/capture"
	"github.com/atrium-dev/atrium/backend/live"
	"github.com/atrium-dev/atrium/backend/rtc"
)

// Live view commands (issue 22 item 3; docs/PROTOCOL.md "Live view"),
// served through ffmpeg like the media commands.
const (
	CmdCameraLive = "camera.live"
	CmdScreenLive = "screen.live"
	// MethodLiveOffer signals a live view's connection.
	MethodLiveOffer = "node.live.offer"
)

// liveParams are camera.live's and screen.live's params (the gateway's).
type liveParams struct {
	ViewID        string `json:"viewId"`
	FPS           int    `json:"fps"`
	MaxWidth      int    `json:"maxWidth"`
	Facing        string `json:"facing,omitempty"`
	Screen        *int   `json:"screen,omitempty"`
	TimesliceMs   int    `json:"timesliceMs,omitempty"` // the phone page's MediaRecorder; ffmpeg's output is sent as it comes
	MaxChunkBytes int    `json:"maxChunkBytes,omitempty"`
}

// LiveResult is what camera.live and screen.live answer once the live
// connection is open.
type LiveResult struct {
	MimeType string `json:"mimeType"`
	Device   string `json:"device,omitempty"`
}

// live starts a live view: ffmpeg encodes (capture.Live) for as long as
// the view lasts — past this invoke, until the gateway stops it, the
// connection to the gateway ends (c.Background) or ffmpeg does — and its
// WebM goes out on an rtc.DialStream connection signalled with
// node.live.offer, through a live.Publisher.
func (c *Commander) live(ctx context.Context, command string, raw json.RawMessage) (any, error) {
	if c.Capture == nil {
		return nil, cmdErr(CodeFFmpegNotFound, "%s: this node has no capture set up", command)
	}
	if err := c.Capture.Available(); err != nil {
		return nil, cmdErr(CodeFFmpegNotFound, "%s: %v", command, err)
	}
	var p liveParams
	if err := decodeParams(command, raw, &p); err != nil {
		return nil, err
	}
	if p.ViewID == "" {
		return nil, cmdErr(CodeInvalidRequest, "%s: params.viewId is required", command)
	}
	if c.Call == nil || c.Background == nil {
		return nil, cmdErr(CodeInternal, "%s: this node cannot stream (no gateway connection)", command)
	}
	src := "camera"
	if command == CmdScreenLive {
		src = "screen"
	}
	lv, err := c.Capture.Live(c.Background, capture.LiveRequest{Source: src, Facing: p.Facing, Screen: p.Screen, FPS: p.FPS, MaxWidth: p.MaxWidth})
	if err != nil {
		return nil, captureError(command, err)
	}
	pub := &live.Publisher{MaxChunk: p.MaxChunkBytes}
	h := pub.Hooks()
	signal := func(ctx context.Context, sdp string) (string, error) {
		var out struct {
			SDP string `json:"sdp"`
		}
		if err := c.Call(ctx, MethodLiveOffer, map[string]string{"viewId": p.ViewID, "sdp": sdp}, &out); err != nil {
			return "", fmt.Errorf("node.live.offer: %w", err)
		}
		return out.SDP, nil
	}
	stream, err := rtc.DialStream(ctx, c.LiveConfig, rtc.StreamLabel, signal, rtc.StreamHooks{Message: h.Message, Closed: h.Closed})
	if err != nil {
		if serr := lv.Stop(); serr != nil {
			c.logger().Warn("live encoder failed", "command", command, "err", serr)
		}
		return nil, cmdErr(CodeTransferFailed, "%s: the live connection was not set up: %v", command, err)
	}
	go func() {
		err := pub.Run(c.Background, stream, lv.Stdout)
		serr := lv.Stop()
		stream.Close()
		if serr != nil {
			c.logger().Warn("live encoder failed", "command", command, "view", p.ViewID, "err", serr)
		}
		c.logger().Info("live view ended", "command", command, "view", p.ViewID, "why", err, "stopped", errors.Is(err, live.ErrStopped))
	}()
	c.logger().Info("live view started", "command", command, "view", p.ViewID, "device", lv.Device)
	return LiveResult{MimeType: capture.LiveMIME, Device: lv.Device}, nil
}
