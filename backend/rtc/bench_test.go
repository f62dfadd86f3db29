package rtc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/media"
)

// benchSize is the file every benchmark moves: 32 MiB of random bytes.
const benchSize = 32 << 20

// BenchmarkTransfer sends one file pion → pion on 127.0.0.1 through the
// whole path (SHA-256 of every block and of the file on both sides, the
// partial file on disk, its rename and sidecar), per configuration:
// block size (the receiver's maxMessageSize follows it), SCTP receive
// buffer, sender high water (low water a quarter of it), UDP socket
// buffers. MB/s = 10^6 bytes per second.
//
//	go test -run '^$' -bench 'Transfer|TCPCopy' -benchtime 3x -count 3 ./backend/rtc
func BenchmarkTransfer(b *testing.B) {
	data := randomData(benchSize, 11)
	for _, c := range []struct {
		block, rbuf, high, udp int
	}{
		{64 << 10, 2 << 20, 2 << 20, 0},         // the defaults
		{64 << 10, 2 << 20, 2 << 20, 208 << 10}, // the kernel's default UDP buffer
		{32 << 10, 1 << 20, 1 << 20, 0},
		{128 << 10, 2 << 20, 2 << 20, 0},
		{128 << 10, 4 << 20, 4 << 20, 0},
		{256<<10 - headerLen, 4 << 20, 4 << 20, 0},
	} {
		name := fmt.Sprintf("block=%dK/rbuf=%dM/high=%dM/udp=%dK", (c.block+headerLen)>>10, c.rbuf>>20, c.high>>20,
			Config{UDPBuffer: c.udp}.withDefaults().UDPBuffer>>10)
		b.Run(name, func(b *testing.B) {
			cfg := Config{BlockSize: c.block, MaxMessageSize: uint32(c.block + headerLen), ReceiveBuffer: uint32(c.rbuf),
				LowWater: c.high / 4, HighWater: c.high, UDPBuffer: c.udp}
			dir := filepath.Join(b.TempDir(), "media")
			st, err := media.Open(dir, media.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			r := NewReceiver(st, cfg, nil)
			defer r.Close()
			s := Sender{Config: cfg}
			b.SetBytes(benchSize)
			b.ResetTimer()
			for range b.N {
				tr, err := r.Expect(Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.clip"})
				if err != nil {
					b.Fatal(err)
				}
				signal := func(ctx context.Context, offer string) (string, error) {
					return r.Answer(ctx, "dev1", tr.ID(), offer)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				if _, err := s.Send(ctx, File{ID: tr.ID(), Name: "clip.webm", Data: bytes.NewReader(data), Size: benchSize}, signal); err != nil {
					b.Fatal(err)
				}
				out, err := tr.Wait(ctx)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := st.Delete(out.Meta.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkPhoto2MB is one 2 MB photo from offer to the stored file with
// the defaults: a new peer connection (gathering, ICE, DTLS, SCTP), the
// transfer, the checks and the sidecar, as a camera.snap will pay it.
//
//	go test -run '^$' -bench Photo2MB -benchtime 20x -count 3 ./backend/rtc
func BenchmarkPhoto2MB(b *testing.B) {
	const size = 2_000_000
	data := randomData(size, 12)
	st, err := media.Open(filepath.Join(b.TempDir(), "media"), media.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r := NewReceiver(st, Config{}, nil)
	defer r.Close()
	var s Sender
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		tr, err := r.Expect(Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.snap"})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		signal := func(ctx context.Context, offer string) (string, error) { return r.Answer(ctx, "dev1", tr.ID(), offer) }
		if _, err := s.Send(ctx, File{ID: tr.ID(), Name: "photo.jpg", Data: bytes.NewReader(data), Size: size}, signal); err != nil {
			b.Fatal(err)
		}
		if _, err := tr.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}

// BenchmarkTCPCopy moves the same file over a plain TCP connection on
// 127.0.0.1 into a file on disk (fsynced), with one SHA-256 on the
// receiving side: the floor the data channel is compared with.
func BenchmarkTCPCopy(b *testing.B) {
	data := randomData(benchSize, 11)
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	b.SetBytes(benchSize)
	b.ResetTimer()
	for i := range b.N {
		done := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
			if err != nil {
				done <- err
				return
			}
			h := sha256.New()
			_, err = io.Copy(io.MultiWriter(f, h), c)
			if err == nil {
				err = f.Sync()
			}
			f.Close()
			done <- err
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(data); err != nil {
			b.Fatal(err)
		}
		c.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}
