package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/debugger"
	"github.com/chromedp/cdproto/domdebugger"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// TestPhoneTransferCutAndResume (issue 22): a transfer cut in the middle
// resumes and completes with the right checksum, from a real phone page
// (headless Chromium, fake camera) recording camera.clip.
//
// The page is stopped in the middle of its send deterministically: a
// DevTools breakpoint on the data channel's first bufferedamountlow event
// (the page had queued its 2 MiB high-water mark and the browser had sent
// at least 1.5 MiB of it), and the test waits, bounded, until the gateway
// has stored blocks of it (media/.partial/<id>/data). Then:
//
//  1. the page's data channel is closed (Runtime.queryObjects finds it):
//     the page resumes on a new connection by itself, sending only the
//     blocks the gateway lacks, and node.invoke answers with the clip;
//  2. the page's renderer is crashed (Page.crash) and the page opened
//     again: node.invoke keeps waiting, the new page finds the file it was
//     sending in IndexedDB and resumes the transfer on its new node
//     connection, again with only the missing blocks; node.invoke answers
//     {resumed:true} with the clip, whose sourceSha256 is the page's.
func TestPhoneTransferCutAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("e2e: ffmpeg is needed for the camera's picture (make deps installs it)")
	}
	tmp := t.TempDir()
	// The fake camera shows noise: its clips are megabytes, where
	// Chromium's own fake picture compresses to almost nothing.
	noise := noiseCamera(t, ffmpeg, tmp, 320, 240, 15)
	g := startMediaGateway(t, tmp)
	phone, phoneID := g.pairBrowser(t, chromium, filepath.Join(tmp, "phone"), []string{"camera.clip"}, []string{"camera"},
		chromedp.UserAgent(phoneUA), chromedp.WindowSize(412, 915), chromedp.Flag("use-file-for-fake-video-capture", noise))
	pageURL := js[string](t, phone, `location.href`)

	paused, crashed := make(chan struct{}, 4), make(chan struct{}, 1)
	if err := chromedp.Listen(phone, func(ev any) {
		switch ev.(type) {
		case *debugger.EventPaused:
			select {
			case paused <- struct{}{}:
			default:
			}
		case *inspector.EventTargetCrashed:
			select {
			case crashed <- struct{}{}:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	// clip invokes a 20 s camera.clip in the background and returns where
	// its answer comes; the page is stopped at its first bufferedamountlow.
	clip := func() chan mediaResult {
		t.Helper()
		if _, err := chromedp.Call(phone, debugger.Enable, debugger.EnableParams{}); err != nil {
			t.Fatalf("Debugger.enable: %v", err)
		}
		if _, err := chromedp.Call(phone, domdebugger.SetEventListenerBreakpoint, domdebugger.SetEventListenerBreakpointParams{EventName: "bufferedamountlow"}); err != nil {
			t.Fatalf("the bufferedamountlow breakpoint: %v", err)
		}
		out := make(chan mediaResult, 1)
		go func() {
			raw, err := g.admin.try("node.invoke", map[string]any{"nodeId": phoneID, "command": "camera.clip",
				"params": map[string]any{"durationMs": 20000, "includeAudio": false}, "timeoutMs": 85000})
			var res mediaResult
			if err == nil {
				err = json.Unmarshal(raw, &res)
			}
			if err != nil {
				res.Error = &struct{ Code, Message string }{"TEST", err.Error()}
			}
			out <- res
		}()
		select {
		case <-paused:
		case r := <-out:
			size := int64(0)
			if r.Media != nil {
				size = r.Media.Size
			}
			t.Fatalf("camera.clip ended (%d bytes) before its send reached the high-water mark: %+v %+v", size, r, r.Error)
		case <-time.After(80 * time.Second):
			t.Fatal("the page never waited for bufferedamountlow")
		}
		return out
	}
	// partial waits (bounded) until the gateway stored blocks of the
	// transfer under way and returns its id and the bytes it holds.
	partial := func() (string, int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ents, _ := os.ReadDir(filepath.Join(g.home, "media", ".partial"))
			for _, e := range ents {
				if st, err := os.Stat(filepath.Join(g.home, "media", ".partial", e.Name(), "data")); err == nil && st.Size() > 0 {
					return e.Name(), st.Size()
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("the gateway stored no block of the transfer")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// unpause removes the breakpoint and resumes the page; mustResume: it
	// is paused (else it may or may not be).
	unpause := func(mustResume bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(phone, 20*time.Second)
		defer cancel()
		if _, err := chromedp.Call(ctx, domdebugger.RemoveEventListenerBreakpoint, domdebugger.RemoveEventListenerBreakpointParams{EventName: "bufferedamountlow"}); err != nil {
			t.Fatalf("remove the breakpoint: %v", err)
		}
		if _, err := chromedp.Call(ctx, debugger.Resume, debugger.ResumeParams{}); err != nil && mustResume {
			t.Fatalf("Debugger.resume: %v", err)
		}
		if _, err := chromedp.Call(ctx, debugger.Disable, cdp.Empty{}); err != nil {
			t.Fatalf("Debugger.disable: %v", err)
		}
	}
	attr := func(sel, name string) string {
		t.Helper()
		return js[string](t, phone, `document.querySelector('[data-testid=`+sel+`]')?.dataset.`+name+` ?? ''`)
	}
	checkClip := func(res mediaResult, pageSum string) {
		t.Helper()
		if !res.OK || res.Media == nil {
			t.Fatalf("camera.clip after the cut: %+v %+v", res, res.Error)
		}
		m := res.Media
		data, err := os.ReadFile(filepath.Join(g.home, "media", m.File))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		sent := m.SHA256
		if m.SourceSHA256 != "" {
			sent = m.SourceSHA256
		}
		if hex.EncodeToString(sum[:]) != m.SHA256 || sent != pageSum || m.Size != int64(len(data)) {
			t.Fatalf("the stored clip: on disk %x, the sidecar %s (source %s), the page sent %s", sum, m.SHA256, m.SourceSHA256, pageSum)
		}
	}

	// 1. The data channel closes in the middle: the page resumes by itself.
	answer := clip()
	t.Log("paused at bufferedamountlow")
	id, have := partial()
	t.Logf("the gateway holds %d bytes of %s", have, id)
	dcs, err := chromedp.Call(phone, runtime.Evaluate, runtime.EvaluateParams{Expression: `RTCDataChannel.prototype`})
	if err != nil || dcs.Result == nil {
		t.Fatalf("RTCDataChannel.prototype: %v", err)
	}
	found, err := chromedp.Call(phone, runtime.QueryObjects, runtime.QueryObjectsParams{PrototypeObjectID: dcs.Result.ObjectID})
	if err != nil || found.Objects == nil {
		t.Fatalf("Runtime.queryObjects: %v", err)
	}
	yes := true
	closed, err := chromedp.Call(phone, runtime.CallFunctionOn, runtime.CallFunctionOnParams{ObjectID: found.Objects.ObjectID, ReturnByValue: &yes,
		FunctionDeclaration: `function () { let n = 0; for (const dc of this) if (dc.readyState === 'open') { dc.close(); n++; } return n; }`})
	if err != nil || closed.Result == nil || string(closed.Result.Value) != "1" {
		t.Fatalf("close the page's data channel: %v (%+v)", err, closed)
	}
	unpause(true)
	res := <-answer
	waitFor(t, phone, "the page to say its send went on after the cut", `!!document.querySelector('[data-testid=phone-send-retried]')`, 30*time.Second)
	blocks, _ := strconv.Atoi(attr("phone-send-retried", "blocks"))
	again, _ := strconv.Atoi(attr("phone-send-retried", "blocksSent"))
	if attr("phone-send-retried", "attempts") != "2" || again <= 0 || again >= blocks {
		t.Errorf("after the channel closed the page sent %d of %d blocks again in %s attempts, want only the missing ones in 2",
			again, blocks, attr("phone-send-retried", "attempts"))
	}
	checkClip(res, attr("phone-send-retried", "sha256"))
	if res.Media.ID != id {
		t.Errorf("the clip %s, the transfer cut %s", res.Media.ID, id)
	}
	t.Logf("channel closed: %d bytes stored before the cut, %d of %d blocks sent again", have, again, blocks)

	// 2. The page dies in the middle and is opened again.
	answer = clip()
	id, have = partial()
	// The renderer dies before it can answer: the call ends at its deadline.
	cctx, ccancel := context.WithTimeout(phone, 5*time.Second)
	_, err = chromedp.Call(cctx, page.Crash, cdp.Empty{})
	ccancel()
	t.Logf("Page.crash: %v", err)
	select {
	case <-crashed:
	case <-time.After(30 * time.Second):
		t.Fatal("the page's renderer did not crash")
	}
	select {
	case r := <-answer:
		t.Fatalf("node.invoke ended when the page died mid-transfer: %+v %+v", r, r.Error)
	default:
	}
	if err := chromedp.Do(phone, chromedp.Navigate(pageURL)); err != nil {
		t.Fatalf("open the page again: %v", err)
	}
	// The DevTools session gives the new renderer the breakpoint again:
	// remove it (and resume, should the page have reached it already).
	unpause(false)
	waitFor(t, phone, "the page opened again to finish the send it was killed in", `!!document.querySelector('[data-testid=phone-send-resumed]')`, 60*time.Second)
	res = <-answer
	blocks, _ = strconv.Atoi(attr("phone-send-resumed", "blocks"))
	again, _ = strconv.Atoi(attr("phone-send-resumed", "blocksSent"))
	if attr("phone-send-resumed", "id") != id || again <= 0 || again >= blocks {
		t.Errorf("the page opened again sent %d of %d blocks of %s, want only the missing ones of %s", again, blocks, attr("phone-send-resumed", "id"), id)
	}
	checkClip(res, attr("phone-send-resumed", "sha256"))
	if res.Media.ID != id || !res.Payload.Resumed {
		t.Errorf("the clip %s (payload %+v), the transfer cut %s", res.Media.ID, res.Payload, id)
	}
	t.Logf("page killed: %d bytes stored before, %d of %d blocks sent by the page opened again", have, again, blocks)
	if files := g.mediaFiles(t); len(files) != 4 {
		t.Errorf("$ATRIUM_HOME/media holds %v, want the two clips and their sidecars", files)
	}
}

// noiseCamera writes a 1 s Y4M of random pictures w×h at fps (the loop
// Chromium's --use-file-for-fake-video-capture plays) and returns its path.
func noiseCamera(t *testing.T, ffmpeg, dir string, w, h, fps int) string {
	t.Helper()
	p := filepath.Join(dir, "noise.y4m")
	src := fmt.Sprintf("nullsrc=s=%dx%d:r=%d,geq=lum='random(1)*255':cb='128+random(2)*32':cr=128", w, h, fps)
	if out, err := exec.Command(ffmpeg, "-nostdin", "-v", "error", "-f", "lavfi", "-i", src, "-t", "1", "-pix_fmt", "yuv420p", p).CombinedOutput(); err != nil {
		t.Fatalf("make the camera's noise: %v\n%s", err, out)
	}
	return p
}
