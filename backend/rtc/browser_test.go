package rtc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
	"github.com/atrium-dev/atrium/backend/media"
)

// buildMediaSend compiles the phone page's frontend/src/lib/mediasend.ts
// to one ES module with the frontend's own bundler (rolldown, installed by
// `npm ci` in frontend/), or skips the test when it is not installed.
func buildMediaSend(t *testing.T) []byte {
	t.Helper()
	fe, err := filepath.Abs(filepath.Join("..", "..", "frontend"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(fe, "node_modules", ".bin", "rolldown")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node to build frontend/src/lib/mediasend.ts")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skip("frontend/node_modules has no rolldown: run `npm ci` in frontend/")
	}
	out := filepath.Join(t.TempDir(), "mediasend.js")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, bin, filepath.Join("src", "lib", "mediasend.ts"), "--format", "esm", "--file", out)
	cmd.Dir = fe
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build mediasend.ts: %v\n%s", err, b)
	}
	js, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// pattern is the test file's content, computed the same way in the page.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((uint32(i) * 2654435761) >> 24)
	}
	return b
}

const browserPage = `<!doctype html><meta charset="utf-8"><title>media</title>
<script type="module">
import { sendMedia } from '/mediasend.js';
// CutPC closes its connection right after the cutAfter-th block message is
// queued: a transfer cut in the middle.
const cutPC = (cutAfter) => class extends RTCPeerConnection {
  createDataChannel(...args) {
    const dc = super.createDataChannel(...args);
    const send = dc.send.bind(dc);
    let blocks = 0;
    dc.send = (m) => {
      send(m);
      if (m[0] === 66 && ++blocks === cutAfter) this.close();
    };
    return dc;
  }
};
window.send = async (id, size, blockSize, cutAfter) => {
  // Chromium gathers loopback candidates only for a page with media permission.
  const stream = await navigator.mediaDevices.getUserMedia({ video: true });
  stream.getTracks().forEach((t) => t.stop());
  const data = new Uint8Array(size);
  for (let i = 0; i < size; i++) data[i] = Math.imul(i, 2654435761) >>> 24;
  const signal = async (sdp) => {
    const r = await fetch('/offer', { method: 'POST', body: JSON.stringify({ id, sdp }) });
    if (!r.ok) throw new Error('offer refused: ' + (await r.text()));
    return r.text();
  };
  try {
    const opts = {};
    if (blockSize) opts.blockSize = blockSize;
    if (cutAfter) opts.RTCPeerConnection = cutPC(cutAfter);
    const start = performance.now();
    const sent = await sendMedia({ id, name: 'photo.jpg', data, mime: 'image/jpeg', width: 640, height: 480 }, signal, opts);
    return JSON.stringify({ ...sent, ms: performance.now() - start });
  } catch (e) {
    return JSON.stringify({ error: String(e && e.code), message: String(e && e.message) });
  }
};
window.ready = true;
</script>`

// browserResult is what the page's window.send returns.
type browserResult struct {
	SHA256     string
	BlockSize  int
	Blocks     int
	BlocksSent int
	Rounds     int
	Ms         float64 // sendMedia's time in the page
	Error      string
	Message    string
}

// browserRig serves the page and mediasend.ts on 127.0.0.1, answers its
// offers with g's Receiver as device "dev1", and opens the page in headless
// Chromium (loopback WebRTC, fake media). send runs window.send in the page.
func browserRig(t *testing.T, g *rig) (ctx context.Context, send func(id string, size, blockSize, cutAfter int) browserResult) {
	t.Helper()
	exe := chromiumtest.Path(t)
	js := buildMediaSend(t)

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, browserPage)
	})
	mux.HandleFunc("/mediasend.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(js)
	})
	mux.HandleFunc("/offer", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ ID, SDP string }
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer, err := g.r.Answer(r.Context(), "dev1", req.ID, req.SDP)
		if err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		io.WriteString(w, answer)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	ctx = chromiumtest.New(t, chromiumtest.Options{Exec: exe, Extra: []chromedp.ExecAllocatorOption{
		chromedp.Flag("allow-loopback-in-peer-connection", true),
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-fake-ui-for-media-stream", true),
	}})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancel)
	if _, err := chromedp.Run(ctx, chromedp.Navigate("http://"+ln.Addr().String()+"/")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.ready === true`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatal(err)
	}
	send = func(id string, size, blockSize, cutAfter int) browserResult {
		t.Helper()
		expr, _ := json.Marshal([]any{id, size, blockSize, cutAfter})
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string]("window.send(..."+string(expr)+")", chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		var r browserResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return r
	}
	return ctx, send
}

// TestBrowserSendsToPion: the phone page's sender (mediasend.ts) in headless
// Chromium sends 5 MiB over RTCPeerConnection to the pion Receiver on
// 127.0.0.1; the file lands with the SHA-256 the page computed, in blocks
// that fit Chromium's view of pion's maxMessageSize. An oversized file and
// an unrequested transfer are refused; a transfer the page cuts in the
// middle resumes from the missing blocks.
func TestBrowserSendsToPion(t *testing.T) {
	g := newRig(t, media.Options{}, Config{})
	ctx, send := browserRig(t, g)
	const size = 5 << 20
	tr := g.expect("dev1", 0)
	r := send(tr.ID(), size, 1<<20, 0) // asks for 1 MiB blocks: the maxMessageSize lowers them
	if r.Error != "" {
		t.Fatalf("the page's transfer: %s %s", r.Error, r.Message)
	}
	out, err := tr.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pattern(size))
	if want := hex.EncodeToString(sum[:]); r.SHA256 != want || out.Meta.SHA256 != want {
		t.Fatalf("sha256: page %s, stored %s, want %s", r.SHA256, out.Meta.SHA256, want)
	}
	if r.BlockSize != DefaultMaxMessageSize-headerLen || r.BlocksSent != r.Blocks || r.Rounds != 1 {
		t.Fatalf("page sent %+v; want blocks of maxMessageSize-5 = %d, each once", r, DefaultMaxMessageSize-headerLen)
	}
	b, err := os.ReadFile(filepath.Join(g.dir, out.Meta.File))
	if err != nil || sha256.Sum256(b) != sum {
		t.Fatalf("stored file: %v", err)
	}
	if out.Meta.Width != 640 || out.Meta.MIME != "image/jpeg" || out.Meta.Transport != media.TransportWebRTC {
		t.Fatalf("sidecar %+v", out.Meta)
	}

	// Refusals reach the page as codes.
	small, err := g.r.Expect(Ticket{ID: media.NewID(), Device: "dev1", Command: "camera.snap", MaxSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if r := send(small.ID(), 5000, 0, 0); r.Error != CodeTooLarge {
		t.Fatalf("oversized: %+v, want %s", r, CodeTooLarge)
	}
	if _, err := small.Wait(ctx); err == nil {
		t.Fatal("the oversized transfer succeeded")
	}
	if r := send(media.NewID(), 5000, 0, 0); r.Error == "" {
		t.Fatalf("unrequested transfer: %+v, want a refusal", r)
	}
	if files, _ := g.store.List(); len(files) != 1 {
		t.Fatalf("media %+v, want only the 5 MiB file", files)
	}

	// A transfer cut in the middle (the page closes its connection after
	// 200 blocks) resumes on a new connection: only the blocks the gateway
	// lacks are sent again, and the file arrives whole.
	cut := g.expect("dev1", 0)
	r = send(cut.ID(), size, 16<<10, 200)
	if r.Error != "CLOSED" {
		t.Fatalf("the cut transfer: %+v, want CLOSED", r)
	}
	r = send(cut.ID(), size, 16<<10, 0)
	if r.Error != "" {
		t.Fatalf("the resumed transfer: %s %s", r.Error, r.Message)
	}
	out, err = cut.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Conns) != 2 || out.Meta.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("resume: %+v", out)
	}
	first, second := out.Conns[0], out.Conns[1]
	t.Logf("cut after 200 blocks queued: the gateway had %d of %d; the resume sent %d", first.Received, r.Blocks, r.BlocksSent)
	if first.Received > 200 || second.Resumed != first.Received || r.BlocksSent != r.Blocks-first.Received || second.Received != r.BlocksSent {
		t.Fatalf("resume: first %+v, second %+v, page %+v; want only the %d missing blocks sent", first, second, r, r.Blocks-first.Received)
	}
}

// TestBrowserThroughput measures Chromium → pion on 127.0.0.1 for the
// benchmark page (docs/BENCHMARKS.md): a 32 MiB file per block size, three
// times each, MB/s from sendMedia's own time in the page (hashing included,
// generating the data not). It measures, it asserts nothing about speed:
//
//	ATRIUM_BENCH_BROWSER=1 go test -run TestBrowserThroughput -v ./backend/rtc
func TestBrowserThroughput(t *testing.T) {
	if os.Getenv("ATRIUM_BENCH_BROWSER") == "" {
		t.Skip("set ATRIUM_BENCH_BROWSER=1 to measure")
	}
	g := newRig(t, media.Options{}, Config{})
	ctx, send := browserRig(t, g)
	// A 2 MB photo, connection setup included (sendMedia's time: gathering,
	// signalling, ICE, DTLS, the channel, hashing, the transfer, the final).
	for range 5 {
		tr := g.expect("dev1", 0)
		r := send(tr.ID(), 2_000_000, 0, 0)
		if r.Error != "" {
			t.Fatalf("%s %s", r.Error, r.Message)
		}
		if _, err := tr.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("2 MB photo: %.0f ms", r.Ms)
	}
	const size = 32 << 20
	for _, bs := range []int{16 << 10, 64 << 10, 256<<10 - headerLen} {
		for range 3 {
			tr := g.expect("dev1", 0)
			r := send(tr.ID(), size, bs, 0)
			if r.Error != "" {
				t.Fatalf("%s %s", r.Error, r.Message)
			}
			out, err := tr.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("block %d: %.1f MB/s (%.0f ms)", r.BlockSize, float64(size)/1e6/(r.Ms/1000), r.Ms)
			if err := g.store.Delete(out.Meta.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}
