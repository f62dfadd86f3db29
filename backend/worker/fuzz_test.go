package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// chunkReader returns at most n bytes per Read, as a pipe from a worker
// process may.
type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.b))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

// FuzzReader feeds any byte stream, in reads of any size, to the worker
// line protocol Reader (what a worker process writes on its stdout; a
// crashed or compromised worker may write anything) with a small or the
// default line limit. Oracle: the input split at newlines, where a line
// longer than the limit is a *LineTooLongError (its length, the limit and
// at most 512 bytes of head), a blank line is skipped, a line that is not
// a JSON object with a type is ErrMalformed, and any other line is the Msg
// json.Unmarshal makes of it; the Reader returns exactly that sequence and
// then io.EOF, and each Msg written by a Writer reads back the same.
func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"type":"ready","payload":{"pid":1},"ts":1}`+"\n"+`{"type":"chunk","id":"r1","payload":{"delta":"你好","seq":1}}`+"\n"), uint8(0), uint16(7))
	f.Add([]byte("\n\n  \r\n{\"type\":\"\"}\nnot json\n{\"type\":\"pong\",\"id\":\"p\"}"), uint8(10), uint16(1))
	f.Add([]byte(`{"type":"final","id":"r","payload":{"content":"`+string(bytes.Repeat([]byte("x"), 100))+`"}}`+"\n{\"type\":\"a\"}"), uint8(40), uint16(3))
	f.Add([]byte("{\"type\":\"a\"}12"), uint8(12), uint16(5))
	f.Add([]byte("{\"type\":\"\xff\"}\n[1]\n"), uint8(0), uint16(2))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8, chunk uint16) {
		if len(data) > 256<<10 {
			return
		}
		max := int(limit)
		if max == 0 {
			max = DefaultMaxLineBytes
		}
		type outcome struct {
			msg     *Msg
			tooLong *LineTooLongError
			line    []byte
			bad     bool
		}
		var want []outcome
		lines := bytes.Split(data, []byte("\n"))
		for i, l := range lines {
			last := i == len(lines)-1
			if last && len(l) == 0 {
				break
			}
			switch {
			case len(l) > max:
				want = append(want, outcome{tooLong: &LineTooLongError{Len: len(l), Limit: max, Unterminated: last}, line: l})
			case len(bytes.TrimSpace(l)) == 0:
			default:
				var m Msg
				if json.Unmarshal(l, &m) != nil || m.Type == "" {
					want = append(want, outcome{bad: true})
				} else {
					want = append(want, outcome{msg: &m})
				}
			}
		}
		r := NewReader(&chunkReader{b: data, n: 1 + int(chunk)%4096}, ReaderOptions{MaxLineBytes: int(limit)})
		for i := 0; ; i++ {
			m, err := r.Read()
			if i == len(want) {
				if err != io.EOF {
					t.Fatalf("after %d outcomes: %+v, %v; want io.EOF", i, m, err)
				}
				return
			}
			w := want[i]
			var tl *LineTooLongError
			switch {
			case w.tooLong != nil:
				if !errors.As(err, &tl) || !errors.Is(err, ErrLineTooLong) || tl.Len != w.tooLong.Len || tl.Limit != w.tooLong.Limit ||
					tl.Unterminated != w.tooLong.Unterminated {
					t.Fatalf("outcome %d: %+v, %v; want %+v", i, m, err, w.tooLong)
				}
				// Head: the line's first bytes (its newline may follow).
				if len(tl.Head) > 512 || len(tl.Head) < min(len(w.line), 512) || !bytes.HasPrefix(append(w.line, '\n'), tl.Head) {
					t.Fatalf("outcome %d: head %q of line %q", i, tl.Head, w.line)
				}
			case w.bad:
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("outcome %d: %+v, %v; want ErrMalformed", i, m, err)
				}
			default:
				if err != nil || !reflect.DeepEqual(m, *w.msg) {
					t.Fatalf("outcome %d: %+v, %v; want %+v", i, m, err, *w.msg)
				}
				var buf bytes.Buffer
				if err := NewWriter(&buf).Write(m); err != nil {
					t.Fatalf("write %+v: %v", m, err)
				}
				back, err := NewReader(&buf, ReaderOptions{}).Read()
				if m.TS == 0 {
					back.TS = 0
				}
				var p1, p2 any
				_ = json.Unmarshal(m.Payload, &p1)
				_ = json.Unmarshal(back.Payload, &p2)
				if err != nil || back.Type != m.Type || back.ID != m.ID || back.ProfileID != m.ProfileID || back.SessionID != m.SessionID ||
					back.TS != m.TS || !reflect.DeepEqual(p1, p2) {
					t.Fatalf("written %+v reads back as %+v, %v", m, back, err)
				}
			}
		}
	})
}
