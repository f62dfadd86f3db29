package rtc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/upload"
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
// The data channel, the HTTPS fallback and the raw TCP copy in one run:
//
//	go test -run '^$' -bench 'Transfer|HTTPSUpload|TCPCopy' -benchtime 3x -count 3 ./backend/rtc
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

// benchTickets is upload.Tickets for one expected transfer at a time.
type benchTickets struct {
	t      upload.Ticket
	stored chan media.Meta
}

func (b *benchTickets) Take(device, id string) (upload.Ticket, context.Context, error) {
	if id != b.t.ID || device != b.t.Device {
		return upload.Ticket{}, nil, upload.ErrUnrequested
	}
	return b.t, context.Background(), nil
}
func (b *benchTickets) Let(string) {}
func (b *benchTickets) Stored(_ string, m media.Meta) error {
	b.stored <- m
	return nil
}
func (b *benchTickets) Failed(id, code, message string) {}

// BenchmarkHTTPSUpload moves the same file over the HTTPS fallback
// (package upload) on 127.0.0.1: TLS (net/http's test certificate), the
// plan, then one PUT per 1 MiB block (the phone page's default) on one
// keep-alive connection, each block's declared SHA-256 checked, read with
// its deadline and written through media.Partial, the file checked and
// stored with its sidecar. The device check is a constant-time compare
// (the app's asks the pairing store).
func BenchmarkHTTPSUpload(b *testing.B) {
	const block = 1 << 20
	data := randomData(benchSize, 11)
	st, err := media.Open(filepath.Join(b.TempDir(), "media"), media.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	tk := &benchTickets{stored: make(chan media.Meta, 1)}
	const token = "bench-device-token"
	up, err := upload.New(upload.Options{Store: st, Tickets: tk, Authenticate: func(_ context.Context, device, tok string) error {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(token)) != 1 {
			return upload.ErrUnauthorized
		}
		return nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(up)
	srv.StartTLS()
	defer srv.Close()
	hc := srv.Client()
	sum := sha256.Sum256(data)
	plan := upload.Plan{V: upload.Version, Name: "clip.webm", Size: benchSize, SHA256: hex.EncodeToString(sum[:]), BlockSize: block}
	do := func(method, path string, body []byte, hdr ...string) {
		req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(upload.HeaderDevice, "dev1")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
	}
	b.SetBytes(benchSize)
	b.ResetTimer()
	for range b.N {
		tk.t = upload.Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.clip"}
		// The sender's hashing is part of the path, as in the data channel's.
		p := plan
		p.Blocks = nil
		for off := 0; off < benchSize; off += block {
			h := sha256.Sum256(data[off:min(off+block, benchSize)])
			p.Blocks = append(p.Blocks, hex.EncodeToString(h[:]))
		}
		pj, err := json.Marshal(p)
		if err != nil {
			b.Fatal(err)
		}
		do(http.MethodPost, "/media/upload/"+tk.t.ID, pj, "Content-Type", "application/json")
		for i, h := range p.Blocks {
			do(http.MethodPut, fmt.Sprintf("/media/upload/%s/%d", tk.t.ID, i), data[i*block:min((i+1)*block, benchSize)], upload.HeaderBlockHash, h)
		}
		m := <-tk.stored
		b.StopTimer()
		if m.Transport != media.TransportHTTPS {
			b.Fatalf("stored over %q", m.Transport)
		}
		if err := st.Delete(m.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
