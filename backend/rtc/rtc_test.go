package rtc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/media"
)

type rig struct {
	t     *testing.T
	store *media.Store
	r     *Receiver
	dir   string
}

func newRig(t *testing.T, o media.Options, cfg Config) *rig {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "media")
	if o.FreeSpace == nil {
		o.FreeSpace = func(string) (int64, error) { return 1 << 40, nil }
	}
	s, err := media.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReceiver(s, cfg, nil)
	t.Cleanup(func() { r.Close(); s.Close() })
	return &rig{t: t, store: s, r: r, dir: dir}
}

func (g *rig) expect(device string, maxSize int64) *Transfer {
	g.t.Helper()
	tr, err := g.r.Expect(Ticket{ID: media.NewID(), Device: device, Command: "camera.snap", MaxSize: maxSize})
	if err != nil {
		g.t.Fatal(err)
	}
	return tr
}

func (g *rig) signal(device, id string) Signal {
	return func(ctx context.Context, offer string) (string, error) { return g.r.Answer(ctx, device, id, offer) }
}

// left lists what is in the media folder and its partial area.
func (g *rig) left() []string {
	var out []string
	filepath.WalkDir(g.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func file(id string, data []byte) File {
	return File{ID: id, Name: "photo.jpg", Data: bytes.NewReader(data), Size: int64(len(data)), MIME: "image/jpeg", Width: 640, Height: 480}
}

func checkStored(t *testing.T, g *rig, out Outcome, data []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	if out.Meta.SHA256 != hex.EncodeToString(sum[:]) || out.Meta.Size != int64(len(data)) || out.Meta.Transport != media.TransportWebRTC {
		t.Fatalf("meta %+v", out.Meta)
	}
	p, err := g.store.Path(out.Meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256.Sum256(b); got != sum {
		t.Fatalf("stored file's sha256 %x, want %x", got, sum)
	}
	if m, err := g.store.Get(out.Meta.ID); err != nil || m.Device != "dev1" || m.Command != "camera.snap" || m.Width != 640 {
		t.Fatalf("sidecar %+v %v", m, err)
	}
}

func TestSend5MiB(t *testing.T) {
	g := newRig(t, media.Options{}, Config{})
	data := randomData(5<<20, 1)
	tr := g.expect("dev1", 0)
	var s Sender
	sent, err := s.Send(ctx(t), file(tr.ID(), data), g.signal("dev1", tr.ID()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := tr.Wait(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, g, out, data)
	if sent.BlocksSent != sent.Blocks || sent.Rounds != 1 || len(out.Conns) != 1 || out.Conns[0].Received != sent.Blocks {
		t.Fatalf("sent %+v, conns %+v", sent, out.Conns)
	}
	if sent.BlockSize != DefaultBlockSize {
		t.Fatalf("block size %d, want %d", sent.BlockSize, DefaultBlockSize)
	}
	if len(g.left()) != 2 {
		t.Fatalf("media folder holds %v, want the file and its sidecar", g.left())
	}
}

// The block size follows the receiver's maxMessageSize (its SDP's
// a=max-message-size), not the sender's wish.
func TestBlockSizeFromPeerMaxMessageSize(t *testing.T) {
	g := newRig(t, media.Options{}, Config{MaxMessageSize: 16 << 10})
	data := randomData(100_000, 2)
	tr := g.expect("dev1", 0)
	s := Sender{Config: Config{BlockSize: 1 << 20}}
	sent, err := s.Send(ctx(t), file(tr.ID(), data), g.signal("dev1", tr.ID()))
	if err != nil {
		t.Fatal(err)
	}
	if sent.BlockSize != 16<<10-headerLen {
		t.Fatalf("block size %d, want %d", sent.BlockSize, 16<<10-headerLen)
	}
	out, err := tr.Wait(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, g, out, data)
}

// A connection cut in the middle resumes on a new one: only the blocks the
// first did not store are sent again.
func TestResumeAfterCut(t *testing.T) {
	g := newRig(t, media.Options{}, Config{})
	data := randomData(3<<20+1234, 3)
	tr := g.expect("dev1", 0)
	cut := Sender{testAfterBlock: func(i int) bool {
		if i < 10 {
			return false
		}
		// Cut once the receiver stored a few blocks (bounded wait).
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if n, _ := tr.Progress(); n >= 5 {
				break
			}
		}
		return true
	}}
	if _, err := cut.Send(ctx(t), file(tr.ID(), data), g.signal("dev1", tr.ID())); err == nil {
		t.Fatal("the cut send succeeded")
	}
	var s Sender
	sent, err := s.Send(ctx(t), file(tr.ID(), data), g.signal("dev1", tr.ID()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := tr.Wait(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, g, out, data)
	if len(out.Conns) != 2 {
		t.Fatalf("conns %+v, want 2", out.Conns)
	}
	first, second := out.Conns[0], out.Conns[1]
	if first.Received < 5 || first.Received >= sent.Blocks {
		t.Fatalf("first connection stored %d of %d blocks", first.Received, sent.Blocks)
	}
	if second.Resumed != first.Received || sent.BlocksSent != sent.Blocks-first.Received || second.Received != sent.BlocksSent {
		t.Fatalf("resume: first %+v, second %+v, sent %+v; want only the %d missing blocks sent", first, second, sent, sent.Blocks-first.Received)
	}
	if len(g.left()) != 2 {
		t.Fatalf("media folder holds %v, want the file and its sidecar", g.left())
	}
}

// A corrupted block is detected by its SHA-256 and asked for again.
func TestCorruptBlockResent(t *testing.T) {
	g := newRig(t, media.Options{}, Config{})
	data := randomData(1<<20, 4)
	tr := g.expect("dev1", 0)
	done := false
	s := Sender{testCorrupt: func(i int, b []byte) {
		if i == 3 && !done {
			b[100] ^= 0x40
			done = true
		}
	}}
	sent, err := s.Send(ctx(t), file(tr.ID(), data), g.signal("dev1", tr.ID()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := tr.Wait(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, g, out, data)
	if c := out.Conns[0]; c.Corrupt != 1 || c.Rounds != 2 || sent.BlocksSent != sent.Blocks+1 {
		t.Fatalf("conn %+v, sent %+v; want one corrupt block resent in a second round", c, sent)
	}
}

func wantCancel(t *testing.T, err error, code string, remote bool) {
	t.Helper()
	var ce *CancelError
	if !errors.As(err, &ce) || ce.Code != code || ce.Remote != remote {
		t.Fatalf("error %v, want a cancel %s (remote %v)", err, code, remote)
	}
}

func TestOversizedRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		store  int64
		ticket int64
		size   int
	}{{"ticket", 0, 10_000, 10_001}, {"store", 50_000, 0, 50_001}} {
		t.Run(c.name, func(t *testing.T) {
			g := newRig(t, media.Options{MaxFileSize: c.store}, Config{})
			tr := g.expect("dev1", c.ticket)
			var s Sender
			_, err := s.Send(ctx(t), file(tr.ID(), randomData(c.size, 5)), g.signal("dev1", tr.ID()))
			wantCancel(t, err, CodeTooLarge, true)
			_, err = tr.Wait(ctx(t))
			wantCancel(t, err, CodeTooLarge, false)
			if l := g.left(); len(l) != 0 {
				t.Fatalf("left after a refusal: %v", l)
			}
		})
	}
}

// A sender that keeps sending blocks nobody asked for (here: every block
// twice) is refused, and nothing is left.
func TestEndlessSenderRefused(t *testing.T) {
	g := newRig(t, media.Options{}, Config{})
	tr := g.expect("dev1", 0)
	s := Sender{testBlockMsgs: func(i int, m []byte) [][]byte { return [][]byte{m, m} }}
	_, err := s.Send(ctx(t), file(tr.ID(), randomData(300_000, 6)), g.signal("dev1", tr.ID()))
	if err == nil {
		t.Fatal("an endless sender succeeded")
	}
	_, err = tr.Wait(ctx(t))
	wantCancel(t, err, CodeUnrequestedBlock, false)
	if l := g.left(); len(l) != 0 {
		t.Fatalf("left after a refusal: %v", l)
	}
}

// A sender that never finishes is stopped by the ticket's deadline and
// nothing is left.
func TestStalledSenderExpires(t *testing.T) {
	g := newRig(t, media.Options{}, Config{})
	tr, err := g.r.Expect(Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.snap", Deadline: time.Now().Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	s := Sender{testAfterBlock: func(i int) bool {
		if i == 2 {
			<-release
		}
		return false
	}}
	sendErr := make(chan error, 1)
	go func() {
		_, err := s.Send(ctx(t), file(tr.ID(), randomData(1<<20, 7)), g.signal("dev1", tr.ID()))
		sendErr <- err
	}()
	_, err = tr.Wait(ctx(t))
	close(release)
	wantCancel(t, err, CodeTimeout, false)
	if err := <-sendErr; err == nil {
		t.Fatal("the stalled send succeeded")
	}
	if l := g.left(); len(l) != 0 {
		t.Fatalf("left after expiry: %v", l)
	}
	if _, err := g.r.Answer(ctx(t), "dev1", tr.ID(), "v=0"); !errors.Is(err, ErrUnrequested) {
		t.Fatalf("offer after expiry: %v, want ErrUnrequested", err)
	}
}

// Offers nobody asked for are refused before any connection is made: an
// unknown id, another device, a finished transfer, an SDP without a
// single SHA-256 fingerprint.
func TestUnrequestedRefused(t *testing.T) {
	g := newRig(t, media.Options{}, Config{})
	var s Sender
	_, err := s.Send(ctx(t), file(media.NewID(), randomData(5000, 8)), g.signal("dev1", media.NewID()))
	if !errors.Is(err, ErrUnrequested) {
		t.Fatalf("unknown transfer: %v, want ErrUnrequested", err)
	}
	tr := g.expect("dev1", 0)
	_, err = s.Send(ctx(t), file(tr.ID(), randomData(5000, 8)), g.signal("dev2", tr.ID()))
	if !errors.Is(err, ErrUnrequested) {
		t.Fatalf("another device: %v, want ErrUnrequested", err)
	}
	if _, err := s.Send(ctx(t), file(tr.ID(), randomData(5000, 8)), g.signal("dev1", tr.ID())); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	_, err = s.Send(ctx(t), file(tr.ID(), randomData(5000, 8)), g.signal("dev1", tr.ID()))
	if !errors.Is(err, ErrUnrequested) {
		t.Fatalf("a finished transfer again: %v, want ErrUnrequested", err)
	}
	// The sender's offer must name the expected transfer inside the channel too.
	tr2 := g.expect("dev1", 0)
	_, err = s.Send(ctx(t), file(media.NewID(), randomData(5000, 8)), g.signal("dev1", tr2.ID()))
	wantCancel(t, err, CodeInvalid, true)
	for _, sdp := range []string{"v=0\r\n", "a=fingerprint:sha-1 AA:BB\r\n",
		"a=fingerprint:sha-256 AA:BB\r\na=fingerprint:sha-256 CC:DD\r\n"} {
		tr3 := g.expect("dev1", 0)
		if _, err := g.r.Answer(ctx(t), "dev1", tr3.ID(), sdp); !errors.Is(err, ErrOffer) {
			t.Errorf("offer %q: %v, want ErrOffer", sdp, err)
		}
	}
}

func TestAllowIP(t *testing.T) {
	c := Config{BindIPs: []net.IP{net.ParseIP("127.0.0.2"), net.ParseIP("::")}}.withDefaults()
	for ip, want := range map[string]bool{"127.0.0.2": true, "127.0.0.1": false, "192.0.2.2": false,
		"fd00::1": true, "::1": false} {
		if got := c.allowIP(net.ParseIP(ip)); got != want {
			t.Errorf("allowIP(%s) = %v, want %v", ip, got, want)
		}
	}
	c = Config{}.withDefaults()
	if !c.allowIP(net.ParseIP("127.0.0.1")) || c.allowIP(net.ParseIP("192.0.2.2")) {
		t.Error("the default binds 127.0.0.1 only")
	}
}

func TestRanges(t *testing.T) {
	got := ranges([]int{0, 1, 2, 5, 7, 8})
	want := [][2]int{{0, 3}, {5, 6}, {7, 9}}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
}

// ICE talks to the node's own address only: an offer whose candidates are
// elsewhere (here 127.0.0.1 while the node connected from 127.0.0.2) gets no
// connection, and nothing is stored; from the right address it works.
func TestPeerIPBindsICE(t *testing.T) {
	g := newRig(t, media.Options{}, Config{ConnectTimeout: 3 * time.Second})
	data := randomData(50_000, 9)
	tr, err := g.r.Expect(Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.snap", PeerIP: net.ParseIP("127.0.0.2")})
	if err != nil {
		t.Fatal(err)
	}
	s := Sender{Config: Config{ConnectTimeout: 3 * time.Second}}
	if _, err := s.Send(ctx(t), file(tr.ID(), data), g.signal("dev1", tr.ID())); err == nil {
		t.Fatal("a sender on another address connected")
	}
	tr.Abort()
	if _, err := tr.Wait(ctx(t)); err == nil {
		t.Fatal("the aborted transfer succeeded")
	}
	if l := g.left(); len(l) != 0 {
		t.Fatalf("left: %v", l)
	}
	tr, err = g.r.Expect(Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.snap", PeerIP: net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx(t), file(tr.ID(), data), g.signal("dev1", tr.ID())); err != nil {
		t.Fatal(err)
	}
	out, err := tr.Wait(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, g, out, data)
}

func TestAllowRemote(t *testing.T) {
	any, one := allowRemote(nil), allowRemote(net.ParseIP("192.0.2.7"))
	for ip, want := range map[string][2]bool{
		"192.0.2.7": {true, true}, "192.0.2.8": {true, false}, "0.0.0.0": {false, false},
		"224.0.0.251": {false, false}, "255.255.255.255": {false, false}, "::": {false, false},
	} {
		if got := [2]bool{any(net.ParseIP(ip)), one(net.ParseIP(ip))}; got != want {
			t.Errorf("%s: %v, want %v", ip, got, want)
		}
	}
}

func TestTicketsBounded(t *testing.T) {
	g := newRig(t, media.Options{}, Config{MaxTickets: 3})
	var trs []*Transfer
	for range 3 {
		trs = append(trs, g.expect("dev1", 0))
	}
	if _, err := g.r.Expect(Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.snap"}); !errors.Is(err, media.ErrBusy) {
		t.Fatalf("fourth ticket: %v, want media.ErrBusy", err)
	}
	if _, err := g.r.Expect(Ticket{ID: trs[0].ID(), Device: "dev1", Command: "camera.snap"}); !errors.Is(err, media.ErrInvalid) {
		t.Fatalf("a ticket twice: %v, want media.ErrInvalid", err)
	}
	trs[0].Abort()
	if _, err := g.r.Expect(Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.snap"}); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
}
