package live

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestPublisher: the node's side sends what the encoder gives as chunk
// messages (seq, the read's time, at most MaxChunk each), answers pings
// with its clock, stops on the gateway's stop, and tells the gateway when
// the node ends the view.
func TestPublisher(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	p := &Publisher{MaxChunk: 1000, Now: func() time.Time { return at }}
	conn := &fakeConn{shut: make(chan struct{})}
	conn.hooks = p.Hooks()
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), conn, r) }()
	if _, err := w.Write(make([]byte, 2500)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(conn.sentOf(msgChunk)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("chunks sent: %d", len(conn.sentOf(msgChunk)))
		}
		time.Sleep(2 * time.Millisecond)
	}
	total := 0
	for i, m := range conn.sentOf(msgChunk) {
		if binary.BigEndian.Uint32(m[1:]) != uint32(i) || math.Float64frombits(binary.BigEndian.Uint64(m[5:])) != 1_700_000_000_000 || len(m)-chunkHeader > 1000 {
			t.Fatalf("chunk %d: % x", i, m[:chunkHeader])
		}
		total += len(m) - chunkHeader
	}
	if total != 2500 {
		t.Fatalf("%d bytes sent, 2500 written", total)
	}
	conn.hooks.Message(jsonMsg(msgPing, pingMsg{T: 42}))
	var pong pongMsg
	if q := conn.sentOf(msgPong); len(q) != 1 || json.Unmarshal(q[0][1:], &pong) != nil || pong.T != 42 || pong.N != 1_700_000_000_000 {
		t.Fatalf("pong %q", q)
	}
	conn.hooks.Message(jsonMsg(msgStop, stopMsg{Reason: ReasonStopped, By: ByViewer}))
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after the gateway's stop: %v", err)
	}
	if len(conn.sentOf(msgStop)) != 0 {
		t.Fatal("the node answered the gateway's stop with a stop")
	}

	// The node ends it: the gateway is told.
	p2 := &Publisher{}
	c2 := &fakeConn{shut: make(chan struct{})}
	c2.hooks = p2.Hooks()
	ctx, cancel := context.WithCancel(context.Background())
	r2, _ := io.Pipe()
	go func() { done <- p2.Run(ctx, c2, r2) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || len(c2.sentOf(msgStop)) != 1 {
		t.Fatalf("Run after the node's end: %v, stops sent %d", err, len(c2.sentOf(msgStop)))
	}
	// The connection closing ends it too.
	p3 := &Publisher{}
	c3 := &fakeConn{shut: make(chan struct{})}
	c3.hooks = p3.Hooks()
	go func() { done <- p3.Run(context.Background(), c3, r2) }()
	c3.Close()
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after the connection closed: %v", err)
	}
}

// TestParserFollowsFFmpeg: the WebM of `atrium node`'s live encoder
// (ffmpeg, known-size clusters of ≤ 250 ms, a keyframe a second) is cut
// the same way: one header, keyframe clusters about a second apart, and a
// clip from the ring that ffprobe decodes.
func TestParserFollowsFFmpeg(t *testing.T) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg not installed (Debian ffmpeg; `make deps` installs it)")
	}
	out := filepath.Join(t.TempDir(), "live.webm")
	cmd := exec.Command(ff, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10", "-t", "4",
		"-an", "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "1M", "-g", "10", "-auto-alt-ref", "0",
		"-f", "webm", "-live", "1", "-cluster_time_limit", "250", "-y", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v %s", err, b)
	}
	src, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	segs := feedAll(t, newWebmParser(), src, 3)
	inits, keys, clusters := 0, 0, 0
	for _, s := range segs {
		switch s.kind {
		case segInit:
			inits++
		case segCluster:
			clusters++
			if s.key {
				keys++
			}
		}
	}
	if inits != 1 || keys != 4 || clusters <= keys {
		t.Fatalf("%d headers, %d clusters of which %d start on a keyframe; want 1, more than 4, 4", inits, clusters, keys)
	}
	r := ring{keep: time.Minute, maxBytes: 1 << 30}
	r.add(segs, time.Now())
	clip, _, err := r.last(time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	probe(t, clip)
}
