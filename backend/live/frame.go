package live

import "encoding/json"

// Message types on the live channel, the first byte of every message
// (docs/PROTOCOL.md "Live view").
const (
	msgChunk = 'C' // node → gateway: uint32 seq, float64 capture time (node's Unix ms), WebM bytes
	msgPing  = 'P' // gateway → node: JSON {t: gateway's Unix ms}
	msgPong  = 'Q' // node → gateway: JSON {t: the ping's t, n: node's Unix ms when it answered}
	msgStop  = 'X' // either way: JSON {reason, by?}; the sender closes after it
)

// chunkHeader is the bytes of a chunk message before its data.
const chunkHeader = 1 + 4 + 8

type pingMsg struct {
	T float64 `json:"t"`
}

type pongMsg struct {
	T float64 `json:"t"`
	N float64 `json:"n"`
}

type stopMsg struct {
	Reason string `json:"reason"`
	By     string `json:"by,omitempty"`
}

func jsonMsg(t byte, v any) []byte {
	b, _ := json.Marshal(v) // fixed structs: no error
	return append([]byte{t}, b...)
}
