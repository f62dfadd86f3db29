// Package rtc moves media files from a node to the gateway over a WebRTC
// data channel (SPEC §7, issue 22), with pion (github.com/pion/webrtc/v4)
// on the Go side; the phone page speaks the same framing with the
// browser's RTCPeerConnection. It is the only package that imports pion,
// so nodes and the gateway stay free of it.
//
// # Signalling
//
// Non-trickle: the sender (the node) makes the SDP offer with every host
// candidate gathered, the receiver (the gateway) answers with all of its
// own. Both travel over the node's already-authenticated gateway
// WebSocket (docs/PROTOCOL.md, "Media transfers"), so the DTLS fingerprint
// in the offer is the one of that device's session; pion checks the
// peer's DTLS certificate against it. A Receiver answers only an offer for
// a transfer it was told to Expect, from the device it expects it from
// (ErrUnrequested otherwise). ICE gathers host candidates only, on the
// addresses the gateway is bound to (Config.BindIPs): no STUN, no TURN, no
// mDNS, loopback candidates only when a bound address is loopback; and it
// accepts the node's candidates from the address of its gateway connection
// only (Ticket.PeerIP), so an offer cannot aim the gateway at other hosts.
//
// # Framing
//
// One ordered, reliable data channel labelled "atrium-media" per
// connection. Every message is binary; its first byte is its type:
//
//	'O' offer   sender → receiver  JSON Offer: transfer id, name, size, SHA-256 of the file,
//	                               block size, block count, MIME type, dimensions, duration
//	'H' hashes  sender → receiver  uint32 big-endian index of the first block, then 32-byte
//	                               SHA-256 digests of consecutive blocks; sent right after
//	                               'O' until every block has its digest
//	'N' need    receiver → sender  JSON Need: the missing blocks as half-open ranges [a, b)
//	'B' block   sender → receiver  uint32 big-endian block index, then the block's bytes
//	'E' end     sender → receiver  no payload: every block of the last 'N' was sent
//	'F' final   receiver → sender  JSON Final: the file is stored (its id, size and SHA-256)
//	'X' cancel  either way         JSON Cancel: a code (TOO_LARGE, BUSY, DISK_FULL, INVALID,
//	                               UNREQUESTED_BLOCK, PROTOCOL, TIMEOUT, CHECKSUM,
//	                               CANCELLED) and a message; the channel is closed after it
//
// After 'O' and 'H' the receiver answers 'N' with what it lacks (on a
// resume, only the blocks a cut connection did not deliver) or 'F' at once.
// The sender sends those blocks and 'E'; a block whose SHA-256 does not
// match is dropped and named again in the next 'N'; a block that was not
// asked for in the current round is a protocol violation (the transfer is
// cancelled). At most Config.MaxRounds rounds per connection.
//
// A block is at most the peer's SCTP maxMessageSize (from its SDP
// `a=max-message-size`) minus the 5-byte header, and at most
// Config.BlockSize; Chromium's limit is 262144. The sender keeps at most
// Config.HighWater bytes queued on the channel and waits for
// OnBufferedAmountLow (threshold Config.LowWater) before sending more.
//
// # Deadlines and bounds
//
// Config.ConnectTimeout bounds ICE + DTLS + the channel opening;
// Config.IdleTimeout the silence between two messages; a Ticket's Deadline
// the whole transfer, resumes included. Sizes are bounded by the Ticket and
// the media.Store (file size, transfers in flight in total and per device,
// free space). A connection cut in the middle leaves the partial file for a
// resume while the ticket lives; a cancelled, refused or expired transfer
// leaves nothing.
package rtc

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// Message types, the first byte of every message.
const (
	msgOffer  = 'O'
	msgHashes = 'H'
	msgNeed   = 'N'
	msgBlock  = 'B'
	msgEnd    = 'E'
	msgFinal  = 'F'
	msgCancel = 'X'
)

// headerLen is the bytes before a block's data: type and uint32 index.
const headerLen = 5

// ChannelLabel is the data channel's label.
const ChannelLabel = "atrium-media"

// Version is the framing version in Offer.V.
const Version = 1

// Offer is the 'O' message.
type Offer struct {
	V          int    `json:"v"`         // Version
	ID         string `json:"id"`        // the transfer id the gateway gave
	Name       string `json:"name"`      // file name (its extension is kept)
	Size       int64  `json:"size"`      // bytes
	SHA256     string `json:"sha256"`    // hex SHA-256 of the file
	BlockSize  int    `json:"blockSize"` // bytes per block (the last may be shorter)
	Blocks     int    `json:"blocks"`    // ceil(size / blockSize)
	MIME       string `json:"mime,omitempty"`
	Width      int    `json:"width,omitempty"`
	Height     int    `json:"height,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
}

// Need is the 'N' message: half-open block ranges [a, b), ascending.
type Need struct {
	Ranges [][2]int `json:"ranges"`
}

// Final is the 'F' message.
type Final struct {
	ID     string `json:"id"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Cancel codes, in Cancel.Code and in CancelError.
const (
	CodeTooLarge         = "TOO_LARGE"
	CodeBusy             = "BUSY"
	CodeDiskFull         = "DISK_FULL"
	CodeInvalid          = "INVALID"
	CodeUnrequestedBlock = "UNREQUESTED_BLOCK"
	CodeProtocol         = "PROTOCOL"
	CodeTimeout          = "TIMEOUT"
	CodeChecksum         = "CHECKSUM"
	CodeCancelled        = "CANCELLED"
)

// Cancel is the 'X' message.
type Cancel struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// CancelError is a transfer ended by a Cancel, sent or received.
type CancelError struct {
	Code    string
	Message string
	Remote  bool // the peer sent it
}

func (e *CancelError) Error() string {
	who := "refused"
	if e.Remote {
		who = "refused by the peer"
	}
	return fmt.Sprintf("media transfer %s: %s (%s)", who, e.Message, e.Code)
}

// errFrame: a message that does not parse.
var errFrame = errors.New("malformed media transfer message")

func jsonMsg(t byte, v any) []byte {
	b, _ := json.Marshal(v) // the message structs always marshal
	return append([]byte{t}, b...)
}

func parseJSON(b []byte, v any) error {
	if err := json.Unmarshal(b[1:], v); err != nil {
		return fmt.Errorf("%w: %c: %w", errFrame, b[0], err)
	}
	return nil
}

func blockMsg(i int, data []byte) []byte {
	b := make([]byte, headerLen+len(data))
	b[0] = msgBlock
	binary.BigEndian.PutUint32(b[1:], uint32(i))
	copy(b[headerLen:], data)
	return b
}

// indexed splits a 'B' or 'H' message into its index and payload.
func indexed(b []byte) (int, []byte, error) {
	if len(b) < headerLen {
		return 0, nil, fmt.Errorf("%w: %c of %d bytes", errFrame, b[0], len(b))
	}
	return int(binary.BigEndian.Uint32(b[1:headerLen])), b[headerLen:], nil
}

// ranges turns ascending block indexes into half-open ranges.
func ranges(idx []int) [][2]int {
	var out [][2]int
	for _, i := range idx {
		if n := len(out); n > 0 && out[n-1][1] == i {
			out[n-1][1] = i + 1
			continue
		}
		out = append(out, [2]int{i, i + 1})
	}
	return out
}
