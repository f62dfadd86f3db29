package worker

import (
	"github.com/atrium-dev/atrium/backend/model"

	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"
)

// Message types (docs/PROTOCOL.md, "Worker line protocol").
const (
	// Parent → worker.
	TypeRun    = "run"    // payload RunRequest; id names the run
	TypeCancel = "cancel" // id: the run to cancel
	TypePing   = "ping"   // answered by TypePong with the same id

	// Worker → parent.
	TypeReady     = "ready"     // once, when the worker accepts requests; payload ReadyInfo
	TypeHeartbeat = "heartbeat" // every heartbeat interval; payload {}
	TypePong      = "pong"      // answer to ping, same id
	TypeThinking  = "thinking"  // a run was accepted; id = run id
	TypeChunk     = "chunk"     // payload Chunk: a text delta, not cumulative
	TypeFinal     = "final"     // payload Final: the whole answer; the run ended
	TypeError     = "error"     // payload ErrorInfo: the run (or, with no id, the request) failed
	TypeCancelled = "cancelled" // the run was cancelled; payload Final with the text so far
)

// Msg is one line of the worker protocol (SPEC §3): Type is one of the Type
// constants, ID the request or run it belongs to ("" for heartbeats), TS
// the sender's clock in Unix milliseconds.
type Msg struct {
	Type      string          `json:"type"`
	ID        string          `json:"id,omitempty"`
	ProfileID string          `json:"profileId,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	TS        int64           `json:"ts"`
}

// RunRequest is a run's payload: the messages in order and optional model
// settings (Model overrides the worker's default model name).
type RunRequest struct {
	Messages []RunMessage `json:"messages"`
	Model    string       `json:"model,omitempty"`
	// Tools the model may call in this model call (the agent loop in the
	// app runs them and sends the next call with their results).
	Tools []model.Tool `json:"tools,omitempty"`
}

// RunMessage is one message of a run's context: the model's message shape
// (an assistant turn may carry tool calls, a tool turn answers one).
type RunMessage struct {
	Role       string           `json:"role"` // system, user, assistant, tool
	Content    string           `json:"content"`
	ToolCalls  []model.ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string           `json:"toolCallId,omitempty"`
	Name       string           `json:"name,omitempty"`
}

// Chunk is a chunk event's payload: Delta is new text, Seq counts the
// run's chunks from 1; Reasoning marks reasoning text (not answer text).
type Chunk struct {
	Delta     string `json:"delta"`
	Seq       int    `json:"seq"`
	Reasoning bool   `json:"reasoning,omitempty"`
}

// Final is a final (or cancelled) event's payload: the whole answer text
// and the token usage the model server reported.
type Final struct {
	Content          string `json:"content"`
	PromptTokens     int    `json:"promptTokens,omitempty"`
	CompletionTokens int    `json:"completionTokens,omitempty"`
	// ToolCalls the model asked for, and the server's finish reason.
	ToolCalls    []model.ToolCall `json:"toolCalls,omitempty"`
	FinishReason string           `json:"finishReason,omitempty"`
}

// ErrorInfo is an error event's payload: a human-readable message, the
// error's kind ("model", "request", "crashed", "protocol") and whether
// the same request may succeed later.
type ErrorInfo struct {
	Message   string `json:"message"`
	Kind      string `json:"kind"`
	Retryable bool   `json:"retryable,omitempty"`
}

// ReadyInfo is the ready event's payload.
type ReadyInfo struct {
	PID         int    `json:"pid"`
	InstanceID  string `json:"instanceId"`
	Provider    string `json:"provider"`
	Model       string `json:"model"`
	HeartbeatMs int64  `json:"heartbeatMs"`
}

// DefaultMaxLineBytes is the default longest line a Reader accepts (64 MiB,
// the newline not counted).
const DefaultMaxLineBytes = 64 << 20

// Errors of the line codec. A Reader's error other than io.EOF wraps one of
// these (or the underlying read error); after ErrLineTooLong and
// ErrMalformed the Reader can go on reading.
var (
	// ErrLineTooLong: a line exceeded the limit; it was read to its end and
	// discarded.
	ErrLineTooLong = errors.New("worker protocol: line too long")
	// ErrMalformed: a line is not a JSON message with a type.
	ErrMalformed = errors.New("worker protocol: malformed line")
)

// LineTooLongError is the error for an over-long line: its length, the
// limit, and the line's first bytes (up to 512; a Msg's type and id come
// first in its JSON, see HeadID). It matches ErrLineTooLong.
type LineTooLongError struct {
	Len, Limit   int
	Unterminated bool
	Head         []byte
}

func (e *LineTooLongError) Error() string {
	u := ""
	if e.Unterminated {
		u = " (unterminated)"
	}
	return fmt.Sprintf("%s: %d bytes%s, limit %d", ErrLineTooLong, e.Len, u, e.Limit)
}

// Is makes errors.Is(err, ErrLineTooLong) true.
func (e *LineTooLongError) Is(target error) bool { return target == ErrLineTooLong }

var headRe = regexp.MustCompile(`^\{"type":"([^"\\]*)","id":"([^"\\]*)"`)

// HeadID returns the type and id at the start of an over-long line when it
// was written by a Writer (which puts them first); ok false otherwise.
func (e *LineTooLongError) HeadID() (typ, id string, ok bool) {
	m := headRe.FindSubmatch(e.Head)
	if m == nil {
		return "", "", false
	}
	return string(m[1]), string(m[2]), true
}

// ReaderOptions tune a Reader. The zero value is ready to use.
type ReaderOptions struct {
	// MaxLineBytes is the longest line accepted, in bytes without the
	// newline. Default DefaultMaxLineBytes.
	MaxLineBytes int
}

// Reader reads Msgs, one per line. It never buffers more than
// MaxLineBytes plus its 64 KiB read buffer, whatever the input. Not safe
// for concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader, o ReaderOptions) *Reader {
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), max: o.MaxLineBytes}
}

// Read returns the next message. Empty lines are skipped. Errors: io.EOF
// at the end of input (a last line without a newline is still returned
// first); a *LineTooLongError (matches ErrLineTooLong), an error wrapping
// ErrMalformed, after which Read may be called again; or the
// underlying read error.
func (r *Reader) Read() (Msg, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			return Msg{}, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m Msg
		if err := json.Unmarshal(line, &m); err != nil {
			return Msg{}, fmt.Errorf("%w (%d bytes): %v", ErrMalformed, len(line), err)
		}
		if m.Type == "" {
			return Msg{}, fmt.Errorf("%w (%d bytes): no type", ErrMalformed, len(line))
		}
		return m, nil
	}
}

// readLine returns one line without its newline, or an ErrLineTooLong
// error after discarding the rest of an over-long line.
func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	total := 0
	tooLong := false
	var head []byte
	for {
		frag, err := r.br.ReadSlice('\n')
		total += len(frag)
		if !tooLong {
			if len(r.buf)+len(frag) > r.max+1 { // +1: the newline
				tooLong = true
				head = append(r.buf[:0:0], r.buf[:min(len(r.buf), 512)]...)
				if len(head) < 512 {
					head = append(head, frag[:min(len(frag), 512-len(head))]...)
				}
				r.buf = r.buf[:0]
			} else {
				r.buf = append(r.buf, frag...)
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return nil, &LineTooLongError{Len: total - 1, Limit: r.max, Head: head}
			}
			return r.buf[:len(r.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			// The check above leaves room for a newline that an
			// unterminated last line does not have.
			if !tooLong && len(r.buf) > r.max {
				tooLong, head = true, append([]byte(nil), r.buf[:min(len(r.buf), 512)]...)
			}
			if tooLong {
				return nil, &LineTooLongError{Len: total, Limit: r.max, Unterminated: true, Head: head}
			}
			if len(r.buf) > 0 {
				return r.buf, nil
			}
			return nil, io.EOF
		default:
			return nil, fmt.Errorf("worker protocol: read: %w", err)
		}
	}
}

// Writer writes Msgs, one per line. It is safe for concurrent use: lines
// never interleave.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, now: time.Now} }

// Write sets m.TS when it is zero and writes m as one line.
func (w *Writer) Write(m Msg) error {
	if m.TS == 0 {
		m.TS = w.now().UnixMilli()
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("worker protocol: encode %s: %w", m.Type, err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("worker protocol: write %s: %w", m.Type, err)
	}
	return nil
}

// NewMsg builds a message with payload v encoded as JSON (nil: no payload).
func NewMsg(typ, id string, v any) (Msg, error) {
	m := Msg{Type: typ, ID: id}
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return Msg{}, fmt.Errorf("worker protocol: encode %s payload: %w", typ, err)
		}
		m.Payload = b
	}
	return m, nil
}
