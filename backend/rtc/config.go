package rtc

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/transport/v5"
	"github.com/pion/transport/v5/stdnet"
	"github.com/pion/webrtc/v4"
)

// Defaults of Config.
const (
	DefaultConnectTimeout = 15 * time.Second
	DefaultIdleTimeout    = 30 * time.Second
	DefaultBlockSize      = 64 << 10  // the fastest on loopback (docs/BENCHMARKS.md); fits Chromium's 262144-byte maxMessageSize
	DefaultMaxMessageSize = 256 << 10 // what this side accepts, like Chromium
	DefaultReceiveBuffer  = 2 << 20   // SCTP receive buffer; 4 MiB and more were slower on loopback
	DefaultLowWater       = 512 << 10
	DefaultHighWater      = 2 << 20
	DefaultMaxRounds      = 8
	DefaultUDPBuffer      = 4 << 20 // socket buffers; the kernel caps them (net.core.rmem_max)
	DefaultMaxTickets     = 64
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
	// 64 KiB); the peer's maxMessageSize minus 5 lowers it.
	BlockSize int
	// MaxMessageSize is the largest message this side accepts, announced in
	// its SDP (0: DefaultMaxMessageSize, 256 KiB).
	MaxMessageSize uint32
	// ReceiveBuffer is the SCTP receive buffer in bytes (0: DefaultReceiveBuffer, 2 MiB).
	ReceiveBuffer uint32
	// LowWater and HighWater bound the sender's queue on the channel: it
	// stops above HighWater and resumes when OnBufferedAmountLow fires at
	// LowWater (0: DefaultLowWater 512 KiB, DefaultHighWater 2 MiB).
	LowWater, HighWater int
	// MaxRounds bounds the need/end rounds of one connection (0: DefaultMaxRounds, 8).
	MaxRounds int
	// UDPBuffer is the receive and send buffer asked for each ICE UDP
	// socket, in bytes (0: DefaultUDPBuffer, 4 MiB; Linux caps it at
	// net.core.rmem_max / wmem_max). The default 208 KiB dropped ~1.5 % of
	// the datagrams of a loopback transfer, and SCTP slowed down for each
	// loss (docs/BENCHMARKS.md "Media over a data channel").
	UDPBuffer int
	// MaxTickets bounds the transfers a Receiver expects at once, each
	// holding a timer until its deadline (0: DefaultMaxTickets, 64).
	MaxTickets int
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
	if c.UDPBuffer <= 0 {
		c.UDPBuffer = DefaultUDPBuffer
	}
	if c.MaxTickets <= 0 {
		c.MaxTickets = DefaultMaxTickets
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

// allowRemote is the policy for the peer's candidates (offered or
// peer-reflexive): from peer only when it is known, and never an
// unspecified, multicast or broadcast address.
func allowRemote(peer net.IP) func(net.IP) bool {
	return func(ip net.IP) bool {
		if ip.IsUnspecified() || ip.IsMulticast() || ip.Equal(net.IPv4bcast) {
			return false
		}
		return peer == nil || peer.Equal(ip)
	}
}

// api builds the pion API of one peer connection: host candidates on the
// bound addresses only, the peer's candidates from peer only (nil: any
// unicast address), no mDNS, bounded ICE, this side's SCTP limits.
func (c Config) api(peer net.IP) (*webrtc.API, error) {
	var se webrtc.SettingEngine
	n, err := stdnet.NewNet()
	if err != nil {
		return nil, fmt.Errorf("rtc: network: %w", err)
	}
	se.SetNet(bufNet{Net: n, size: c.UDPBuffer})
	se.SetIPFilter(c.allowIP)
	se.SetRemoteIPFilter(allowRemote(peer))
	se.SetIncludeLoopbackCandidate(slices.ContainsFunc(c.BindIPs, net.IP.IsLoopback))
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4, webrtc.NetworkTypeUDP6})
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetICETimeouts(c.ConnectTimeout/3, c.ConnectTimeout, time.Second)
	se.SetSCTPMaxMessageSize(c.MaxMessageSize)
	se.SetSCTPMaxReceiveBufferSize(c.ReceiveBuffer)
	return webrtc.NewAPI(webrtc.WithSettingEngine(se)), nil
}

// bufNet is the standard network whose UDP sockets get larger buffers.
type bufNet struct {
	*stdnet.Net
	size int
}

func (n bufNet) ListenUDP(network string, addr *net.UDPAddr) (transport.UDPConn, error) {
	c, err := n.Net.ListenUDP(network, addr)
	if err != nil {
		return nil, err
	}
	// Best effort: the kernel caps the sizes, and a refusal leaves its defaults.
	_ = c.SetReadBuffer(n.size)
	_ = c.SetWriteBuffer(n.size)
	return c, nil
}

// newPC makes a peer connection with no ICE servers (no STUN, no TURN)
// whose ICE talks to peer only (nil: any unicast address).
func (c Config) newPC(peer net.IP) (*webrtc.PeerConnection, error) {
	api, err := c.api(peer)
	if err != nil {
		return nil, err
	}
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
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
