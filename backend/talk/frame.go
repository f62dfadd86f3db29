package talk

import (
	"encoding/binary"
	"encoding/json"
)

// Message types on the talk channel, the first byte of every message
// (docs/PROTOCOL.md "Talk").
const (
	MsgUtterance = 'U' // page → gw: JSON UtteranceStart
	MsgAudio     = 'A' // page → gw: uint32 BE seq, then audio bytes
	MsgEnd       = 'E' // page → gw: JSON UtteranceEnd
	MsgInterrupt = 'I' // page → gw: JSON {replyId?}
	MsgSpeech    = 'S' // gw → page: uint32 BE header length, JSON SpeechHeader, audio bytes
	MsgSay       = 'T' // gw → page: JSON Say
	MsgReplyEnd  = 'R' // gw → page: JSON ReplyEnd
	MsgStop      = 'X' // either way: JSON {reason}; the sender closes
)

// UtteranceStart is U's payload.
type UtteranceStart struct {
	UtteranceID string `json:"utteranceId"`
	MimeType    string `json:"mimeType"`
	Send        bool   `json:"send"`
}

// UtteranceEnd is E's payload.
type UtteranceEnd struct {
	UtteranceID string `json:"utteranceId"`
	DurationMs  int64  `json:"durationMs"`
}

// Interrupt is I's payload.
type Interrupt struct {
	ReplyID string `json:"replyId,omitempty"`
}

// SpeechHeader is the JSON header of an S message: part Part of sentence
// Seq of reply ReplyID; Last marks the sentence's final part (which may
// carry no audio bytes).
type SpeechHeader struct {
	ReplyID  string `json:"replyId"`
	Seq      int    `json:"seq"`
	Part     int    `json:"part"`
	Last     bool   `json:"last"`
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
}

// Say is T's payload: a sentence for the page's speechSynthesis. Rate is
// the speed (0.5…2); Voice the page's voice index ("" = its default for
// Lang), stepped by "change the voice".
type Say struct {
	ReplyID string  `json:"replyId"`
	Seq     int     `json:"seq"`
	Text    string  `json:"text"`
	Lang    string  `json:"lang"`
	Rate    float64 `json:"rate"`
	Voice   string  `json:"voice,omitempty"`
}

// ReplyEnd is R's payload.
type ReplyEnd struct {
	ReplyID     string `json:"replyId"`
	Interrupted bool   `json:"interrupted"`
}

// Stop is X's payload.
type Stop struct {
	Reason string `json:"reason"`
}

// JSONMessage is typ followed by v's JSON.
func JSONMessage(typ byte, v any) []byte {
	b, _ := json.Marshal(v) // the package's plain structs: no error
	return append([]byte{typ}, b...)
}

// AudioMessage is an A message: seq and the bytes.
func AudioMessage(seq uint32, data []byte) []byte {
	b := make([]byte, 5, 5+len(data))
	b[0] = MsgAudio
	binary.BigEndian.PutUint32(b[1:], seq)
	return append(b, data...)
}

// SpeechMessage is an S message.
func SpeechMessage(h SpeechHeader, audio []byte) []byte {
	hb, _ := json.Marshal(h) // plain struct: no error
	b := make([]byte, 5, 5+len(hb)+len(audio))
	b[0] = MsgSpeech
	binary.BigEndian.PutUint32(b[1:], uint32(len(hb)))
	b = append(b, hb...)
	return append(b, audio...)
}

// ParseSpeech splits an S message into its header and audio bytes; ok
// false for a malformed one.
func ParseSpeech(b []byte) (SpeechHeader, []byte, bool) {
	var h SpeechHeader
	if len(b) < 5 || b[0] != MsgSpeech {
		return h, nil, false
	}
	n := binary.BigEndian.Uint32(b[1:])
	if uint64(n) > uint64(len(b)-5) || json.Unmarshal(b[5:5+n], &h) != nil {
		return h, nil, false
	}
	return h, b[5+n:], true
}
