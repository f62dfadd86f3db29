package rtc

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"
)

// Defaults of Config.
const (
	DefaultConnectTimeout = 15 * time.Second
	DefaultIdleTimeout    = 30 * time.Second
	DefaultBlockSize      = 128 << 10 // fits Chromium's 262144-byte maxMessageSize
	DefaultMaxMessageSize = 256 << 10 // what this side accepts, like Chromium
	DefaultReceiveBuffer  = 4 << 20   // SCTP receive buffer
	DefaultLowWater       = 1 << 20
	DefaultHighWater      = 4 << 20
	DefaultMaxRounds      = 8
)

// Config is what both sides of a transfer share. Zero values take the
// defaults named on each field.
type Config struct {
	// BindIPs are the addresses the gateway (or node) is bound to; ICE
	// offers host candidates on these only. An unspecified address
	// (0.0.0.0, ::) allows every non-loopback address of its family.
	// Loopback candidates are gathered only when a loopback address is
	// listed. Empty: 127.0.0.1.
	BindIPs []net.IP
	// ConnectTimeout bounds gathering, ICE, DTLS and the channel opening
	// (0: DefaultConnectTimeout, 15 s).
	ConnectTimeout time.Duration
	// IdleTimeout bounds the silence between two messages of a transfer
	// (0: DefaultIdleTimeout, 30 s).
	IdleTimeout time.Duration
	// BlockSize is the largest block the sender cuts (0: DefaultBlockSize,
	// 128 KiB); the peer's maxMessageSize minus 5 lowers it.
	BlockSize int
	// MaxMessageSize is the largest message this side accepts, announced in
	// its SDP (0: DefaultMaxMessageSize, 256 KiB).
	MaxMessageSize uint32
	// ReceiveBuffer is the SCTP receive buffer in bytes (0: DefaultReceiveBuffer, 4 MiB).
	ReceiveBuffer uint32
	// LowWater and HighWater bound the sender's queue on the channel: it
	// stops above HighWater and resumes when OnBufferedAmountLow fires at
	// LowWater (0: DefaultLowWater 1 MiB, DefaultHighWater 4 MiB).
	LowWater, HighWater int
	// MaxRounds bounds the need/end rounds of one connection (0: DefaultMaxRounds, 8).
	MaxRounds int
}

func (c Config) withDefaults() Config {
	if len(c.BindIPs) == 0 {
		c.BindIPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.BlockSize <= 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.ReceiveBuffer == 0 {
		c.ReceiveBuffer = DefaultReceiveBuffer
	}
	if c.LowWater <= 0 {
		c.LowWater = DefaultLowWater
	}
	if c.HighWater <= c.LowWater {
		c.HighWater = max(DefaultHighWater, 2*c.LowWater)
	}
	if c.MaxRounds <= 0 {
		c.MaxRounds = DefaultMaxRounds
	}
	return c
}

// allowIP reports whether a local address may carry a host candidate.
func (c Config) allowIP(ip net.IP) bool {
	for _, b := range c.BindIPs {
		switch {
		case b.Equal(ip):
			return true
		case b.IsUnspecified() && !ip.IsLoopback() && (b.To4() != nil) == (ip.To4() != nil):
			return true
		}
	}
	return false
}

// api builds the pion API of one peer connection: host candidates on the
// bound addresses only, no mDNS, bounded ICE, this side's SCTP limits.
func (c Config) api() *webrtc.API {
	var se webrtc.SettingEngine
	se.SetIPFilter(c.allowIP)
	se.SetIncludeLoopbackCandidate(slices.ContainsFunc(c.BindIPs, net.IP.IsLoopback))
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4, webrtc.NetworkTypeUDP6})
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetICETimeouts(c.ConnectTimeout/3, c.ConnectTimeout, time.Second)
	se.SetSCTPMaxMessageSize(c.MaxMessageSize)
	se.SetSCTPMaxReceiveBufferSize(c.ReceiveBuffer)
	return webrtc.NewAPI(webrtc.WithSettingEngine(se))
}

// newPC makes a peer connection with no ICE servers (no STUN, no TURN).
func (c Config) newPC() (*webrtc.PeerConnection, error) {
	pc, err := c.api().NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return nil, fmt.Errorf("rtc: new peer connection: %w", err)
	}
	return pc, nil
}

// gather sets desc as the local description and waits, within ctx, until
// every candidate is in it (non-trickle); it returns the complete SDP.
func gather(ctx context.Context, pc *webrtc.PeerConnection, desc webrtc.SessionDescription) (string, error) {
	done := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(desc); err != nil {
		return "", fmt.Errorf("rtc: set local description: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return "", fmt.Errorf("rtc: gathering candidates: %w", ctx.Err())
	}
	return pc.LocalDescription().SDP, nil
}
