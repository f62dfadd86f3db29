package worker

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func line(t *testing.T, typ, id string, payload any) string {
	t.Helper()
	m, err := NewMsg(typ, id, payload)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := NewWriter(&b).Write(m); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestReaderDeliversTenMegabyteLine(t *testing.T) {
	big := strings.Repeat("é", 5<<20) // 10 MiB of UTF-8
	in := line(t, TypeFinal, "r1", Final{Content: big}) + line(t, TypeHeartbeat, "", nil)
	r := NewReader(strings.NewReader(in), ReaderOptions{})
	m, err := r.Read()
	if err != nil {
		t.Fatalf("10 MiB line under the 64 MiB default: %v", err)
	}
	if m.Type != TypeFinal || m.ID != "r1" || len(m.Payload) < 10<<20 {
		t.Fatalf("got type %q id %q payload %d bytes", m.Type, m.ID, len(m.Payload))
	}
	if m, err = r.Read(); err != nil || m.Type != TypeHeartbeat {
		t.Fatalf("next line: %v %v", m.Type, err)
	}
	if _, err = r.Read(); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}

func TestReaderRejectsOverLongLineAndGoesOn(t *testing.T) {
	const limit = 1 << 20
	in := line(t, TypeFinal, "r7", Final{Content: strings.Repeat("x", 3*limit)}) +
		line(t, TypeChunk, "r8", Chunk{Delta: "after", Seq: 1}) +
		strings.Repeat("y", 2*limit) // over-long and unterminated
	r := NewReader(strings.NewReader(in), ReaderOptions{MaxLineBytes: limit})
	_, err := r.Read()
	var tl *LineTooLongError
	if !errors.Is(err, ErrLineTooLong) || !errors.As(err, &tl) {
		t.Fatalf("over-long line: %v, want ErrLineTooLong", err)
	}
	if tl.Len <= 3*limit || tl.Limit != limit || tl.Unterminated {
		t.Fatalf("error fields %+v", tl)
	}
	if typ, id, ok := tl.HeadID(); !ok || typ != TypeFinal || id != "r7" {
		t.Fatalf("HeadID = %q %q %v", typ, id, ok)
	}
	if c := cap(r.buf); c > limit+1+64<<10 {
		t.Fatalf("reader buffered %d bytes for a %d limit", c, limit)
	}
	m, err := r.Read()
	if err != nil || m.Type != TypeChunk || m.ID != "r8" {
		t.Fatalf("line after the rejected one: %+v %v", m, err)
	}
	_, err = r.Read()
	if !errors.As(err, &tl) || !tl.Unterminated {
		t.Fatalf("unterminated over-long tail: %v", err)
	}
	if _, ok := func() (string, bool) { _, id, ok := tl.HeadID(); return id, ok }(); ok {
		t.Fatal("HeadID found an id in a line of y's")
	}
	if _, err = r.Read(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestReaderMalformedLinesAreErrorsNotTheEnd(t *testing.T) {
	in := "{not json\n\n" + `{"id":"x"}` + "\n" + line(t, TypePong, "p1", nil) + `{"type":"heartbeat","ts":5}` // last line unterminated
	r := NewReader(strings.NewReader(in), ReaderOptions{})
	for i, want := range []string{"malformed", "no type"} {
		if _, err := r.Read(); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), want) {
			t.Fatalf("line %d: %v, want ErrMalformed (%s)", i, err, want)
		}
	}
	if m, err := r.Read(); err != nil || m.Type != TypePong || m.ID != "p1" {
		t.Fatalf("pong: %+v %v", m, err)
	}
	if m, err := r.Read(); err != nil || m.Type != TypeHeartbeat || m.TS != 5 {
		t.Fatalf("unterminated last line: %+v %v", m, err)
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestWriterLinesNeverInterleave(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				m, _ := NewMsg(TypeChunk, "r", Chunk{Delta: strings.Repeat("z", 10000)})
				if err := w.Write(m); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	r := NewReader(&b, ReaderOptions{})
	n := 0
	for {
		m, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil || m.TS == 0 {
			t.Fatalf("line %d: %v (ts %d)", n, err, m.TS)
		}
		n++
	}
	if n != 400 {
		t.Fatalf("%d lines, want 400", n)
	}
}

func TestBackoffDoublesAndIsCapped(t *testing.T) {
	lo, hi := 500*time.Millisecond, 30*time.Second
	for n, want := range map[int]time.Duration{1: lo, 2: time.Second, 3: 2 * time.Second, 7: hi, 60: hi, 1 << 20: hi} {
		if got := backoff(lo, hi, n); got != want {
			t.Errorf("backoff after %d failures = %s, want %s", n, got, want)
		}
	}
}
