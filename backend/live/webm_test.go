package live

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromiumWebM is 4.2 s of Chromium 156's MediaRecorder (fake camera,
// video/webm;codecs=vp8, timeslice 250 ms, a keyframe every second).
func chromiumWebM(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "chromium-vp8.webm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// feedAll feeds b in random pieces (as MediaRecorder's chunks fall).
func feedAll(t *testing.T, p *webmParser, b []byte, seed uint64) []segment {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var out []segment
	for len(b) > 0 {
		n := min(len(b), 1+r.IntN(20000))
		segs, err := p.feed(b[:n])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, segs...)
		b = b[n:]
	}
	return out
}

func TestParserCutsChromiumStream(t *testing.T) {
	src := chromiumWebM(t)
	for seed := range uint64(20) {
		segs := feedAll(t, newWebmParser(), src, seed)
		var all []byte
		inits, keys := 0, 0
		var times []int64
		for i, s := range segs {
			all = append(all, s.data...)
			switch s.kind {
			case segInit:
				inits++
				if i != 0 {
					t.Fatalf("seed %d: the header is segment %d", seed, i)
				}
			case segCluster:
				if s.key {
					keys++
					times = append(times, s.tcMs)
				}
			}
		}
		// The last cluster's tail stays in the parser until the next
		// element shows that it ended; everything before it is out, in order.
		if !bytes.HasPrefix(src, all) || len(src)-len(all) > 64<<10 {
			t.Fatalf("seed %d: segments are not the stream's bytes in order (%d of %d)", seed, len(all), len(src))
		}
		if inits != 1 || keys != 4 {
			t.Fatalf("seed %d: %d headers, %d keyframe clusters; want 1 and 4", seed, inits, keys)
		}
		for i := 1; i < len(times); i++ {
			if d := times[i] - times[i-1]; d < 500 || d > 2000 {
				t.Fatalf("seed %d: keyframe clusters at %v ms", seed, times)
			}
		}
	}
}

func TestParserRefusesOtherBytes(t *testing.T) {
	src := chromiumWebM(t)
	for name, b := range map[string][]byte{
		"not webm":          []byte("GIF89a and some more bytes"),
		"zero id":           {0, 0, 0, 0},
		"no segment":        append(append([]byte(nil), src[:bytes.Index(src, []byte{0x18, 0x53, 0x80, 0x67})]...), 0x1F, 0x43, 0xB6, 0x75, 0x81, 0x00),
		"huge header child": append(append([]byte(nil), src[:bytes.Index(src, []byte{0x18, 0x53, 0x80, 0x67})+12]...), 0x15, 0x49, 0xA9, 0x66, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01),
	} {
		p := newWebmParser()
		_, err := p.feed(b)
		if !errors.Is(err, ErrStream) {
			t.Errorf("%s: err %v, want ErrStream", name, err)
		}
	}
}

// TestRingSavesFromKeyframe: the ring keeps what a clip of up to keep
// needs, starts every clip on a keyframe cluster with the header, stays
// under its byte bound, and ffprobe accepts a saved clip.
func TestRingSavesFromKeyframe(t *testing.T) {
	src := chromiumWebM(t)
	segs := feedAll(t, newWebmParser(), src, 7)
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	r := ring{keep: 2 * time.Second, maxBytes: 1 << 30}
	// Arrival times follow the stream's own clock.
	for _, s := range segs {
		at := t0
		if s.kind == segCluster {
			at = t0.Add(time.Duration(s.tcMs) * time.Millisecond)
		}
		r.add([]segment{s}, at)
	}
	now := t0.Add(4200 * time.Millisecond)
	r.trim(now)
	if len(r.clusters) == 0 || !r.clusters[0].key {
		t.Fatal("the ring does not start on a keyframe cluster")
	}
	// keep = 2 s at 4.2 s: the keyframe cluster at ~2 s is the oldest needed.
	if first := r.clusters[0].tcMs; first < 1500 || first > 2500 {
		t.Fatalf("oldest cluster kept at %d ms, want the keyframe near 2000", first)
	}
	clip, dur, err := r.last(time.Second, now)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(clip, src[:100]) || dur < 500 || dur > 2500 {
		t.Fatalf("clip of %d bytes, %d ms", len(clip), dur)
	}
	probe(t, clip)

	// The byte bound drops whole clusters up to the next keyframe one.
	small := ring{keep: time.Hour, maxBytes: 60 << 10}
	for _, s := range segs {
		small.add([]segment{s}, t0)
		if small.bytes > small.maxBytes && len(small.clusters) > 1 {
			t.Fatalf("ring holds %d bytes over its bound %d", small.bytes, small.maxBytes)
		}
		if len(small.clusters) > 0 && !small.clusters[0].key {
			t.Fatal("ring starts on a cluster without a keyframe")
		}
	}
	empty := ring{keep: time.Minute, maxBytes: 1 << 20}
	if _, _, err := empty.last(time.Second, now); !errors.Is(err, ErrNothingToSave) {
		t.Fatalf("empty ring: %v", err)
	}
}

// probe runs ffprobe on a WebM (skipped without ffprobe).
func probe(t *testing.T, b []byte) {
	t.Helper()
	ff, err := exec.LookPath("ffprobe")
	if err != nil {
		t.Log("no ffprobe: the clip is not decoded")
		return
	}
	f := filepath.Join(t.TempDir(), "clip.webm")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ff, "-v", "error", "-count_frames", "-select_streams", "v", "-show_entries", "stream=codec_name,nb_read_frames", "-of", "csv=p=0", f).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "vp8,") {
		t.Fatalf("ffprobe: %v: %s", err, out)
	}
}
