package live

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParser feeds any bytes as a phone's live camera stream (WebM from
// MediaRecorder, sent in pieces over the gateway) to the stream parser,
// once whole and once in pieces whose sizes come from seed. Properties:
// errors wrap ErrStream; the parser cuts the same segments whatever the
// pieces (up to the first error); the segments are the stream's own bytes
// in order, the header first and at most once; what it holds back stays
// within one element's bound.
func FuzzParser(f *testing.F) {
	src, err := os.ReadFile(filepath.Join("testdata", "chromium-vp8.webm"))
	if err != nil {
		f.Fatal(err)
	}
	seg := bytes.Index(src, []byte{0x18, 0x53, 0x80, 0x67})
	f.Add(src[:12<<10], uint64(1))
	f.Add(src[:seg+12], uint64(2))
	f.Add(append(append([]byte(nil), src[:seg]...), 0x1F, 0x43, 0xB6, 0x75, 0x81, 0x00), uint64(3))
	f.Add(append(append([]byte(nil), src[:seg+12]...), 0x15, 0x49, 0xA9, 0x66, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01), uint64(4))
	f.Add([]byte("GIF89a and some more bytes"), uint64(5))
	f.Add([]byte{0, 0, 0, 0}, uint64(6))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		if len(b) > 256<<10 {
			return
		}
		whole, werr := newWebmParser().feed(b)
		if werr != nil && !errors.Is(werr, ErrStream) {
			t.Fatalf("error %v does not wrap ErrStream", werr)
		}
		r := rand.New(rand.NewPCG(seed, 2))
		p := newWebmParser()
		var parts []segment
		var perr error
		for rest := b; len(rest) > 0 && perr == nil; {
			n := min(len(rest), 1+r.IntN(1+len(b)/3))
			var segs []segment
			segs, perr = p.feed(rest[:n])
			parts = append(parts, segs...)
			rest = rest[n:]
		}
		if (werr == nil) != (perr == nil) || !reflect.DeepEqual(whole, parts) {
			t.Fatalf("whole: %d segments, %v; in pieces: %d segments, %v", len(whole), werr, len(parts), perr)
		}
		var all []byte
		for i, s := range whole {
			if s.kind == segInit && i != 0 {
				t.Fatalf("the header is segment %d", i)
			}
			all = append(all, s.data...)
		}
		if !bytes.HasPrefix(b, all) {
			t.Fatalf("segments are not the stream's bytes in order (%d of %d)", len(all), len(b))
		}
		if werr == nil && len(p.buf) > maxElement+16 {
			t.Fatalf("the parser holds %d bytes", len(p.buf))
		}
	})
}
