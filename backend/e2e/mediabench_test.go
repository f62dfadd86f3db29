package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// procSample is one reading of a process's /proc/<pid>/stat and status:
// its own CPU time and its waited-for children's (clock ticks), and its
// resident set (KiB).
type procSample struct {
	at               time.Time
	cpu, childrenCPU int64
	rssKiB           int64
}

// readProc reads pid's CPU times (utime+stime, cutime+cstime: fields 14–17
// of /proc/<pid>/stat, after the command in parentheses) and VmRSS.
func readProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat)[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k-3], 10, 64); return v }
	s.cpu, s.childrenCPU = n(14)+n(15), n(16)+n(17)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			s.rssKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return s, nil
}

// clockTicks is the kernel's USER_HZ (/proc times are in its ticks): 100
// on every Linux this runs on (getconf CLK_TCK says so).
const clockTicks = 100

// TestMediaBench (issue 22, docs/BENCHMARKS.md "Media through the whole
// gateway"): with ATRIUM_BENCH_MEDIA=1, against `atrium serve` as its own
// process (bound to 127.0.0.2) and a phone Chromium paired over TLS whose
// fake camera shows noise at 1600×1200 (photos of about 2 MB):
//
//   - invoke → file on disk for a photo: the admin's node.invoke
//     camera.snap (maxWidth 1600, quality 0.95) until its answer, which
//     comes once the file and its sidecar are in $ATRIUM_HOME/media; N runs
//     (ATRIUM_BENCH_MEDIA_N, default 20) after one to warm up; median, p95;
//   - the gateway process's CPU and RSS during a 60 s camera.clip
//     (/proc/<pid>/stat and status every 250 ms, from the invoke to its
//     answer: the recording, the transfer, the remux by ffmpeg, whose CPU
//     shows as the gateway's children's).
//
// The figures are logged, never asserted.
func TestMediaBench(t *testing.T) {
	if os.Getenv("ATRIUM_BENCH_MEDIA") != "1" {
		t.Skip("set ATRIUM_BENCH_MEDIA=1 to run the media benchmark (about 2 minutes)")
	}
	chromium := chromiumtest.Path(t)
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg is needed for the camera's picture (make deps installs it)")
	}
	runs := 20
	if v, err := strconv.Atoi(os.Getenv("ATRIUM_BENCH_MEDIA_N")); err == nil && v > 0 {
		runs = v
	}
	tmp := t.TempDir()
	noise := noiseCamera(t, ffmpeg, tmp, 1600, 1200, 5)
	g := startMediaGateway(t, tmp)
	var info struct{ PID int }
	b, err := os.ReadFile(filepath.Join(g.home, "gateway.json"))
	if err != nil || json.Unmarshal(b, &info) != nil || info.PID <= 0 {
		t.Fatalf("the gateway's pid from gateway.json: %s %v", b, err)
	}
	_, phoneID := g.pairBrowser(t, chromium, filepath.Join(tmp, "phone"), []string{"camera.snap", "camera.clip"}, []string{"camera"},
		chromedp.UserAgent(phoneUA), chromedp.WindowSize(412, 915), chromedp.Flag("use-file-for-fake-video-capture", noise))

	snap := func() (time.Duration, int64) {
		t.Helper()
		start := time.Now()
		res := g.invokeMedia(t, phoneID, "camera.snap", map[string]any{"maxWidth": 1600, "quality": 0.95}, 60000)
		took := time.Since(start)
		if !res.OK || res.Media == nil {
			t.Fatalf("camera.snap: %+v %+v", res, res.Error)
		}
		if st, err := os.Stat(res.Media.Path); err != nil || st.Size() != res.Media.Size {
			t.Fatalf("the photo on disk: %v", err)
		}
		return took, res.Media.Size
	}
	snap() // the camera opens, the page's code is warm
	var times []time.Duration
	var bytes int64
	for range runs {
		d, n := snap()
		times = append(times, d)
		bytes += n
	}
	slices.Sort(times)
	pct := func(p float64) time.Duration { return times[min(len(times)-1, int(p*float64(len(times))))] }
	t.Logf("invoke → file on disk, camera.snap %d×, %.2f MB average: median %v, p95 %v, min %v, max %v",
		runs, float64(bytes)/float64(runs)/1e6, pct(0.5).Round(time.Millisecond), pct(0.95).Round(time.Millisecond),
		times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))

	// The gateway during a 60 s clip.
	before, err := readProc(info.PID)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	samples := []procSample{before}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(250 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if s, err := readProc(info.PID); err == nil {
					mu.Lock()
					samples = append(samples, s)
					mu.Unlock()
				}
			}
		}
	})
	res := g.invokeMedia(t, phoneID, "camera.clip", map[string]any{"durationMs": 60000, "includeAudio": true}, 120000)
	close(stop)
	wg.Wait()
	after, err := readProc(info.PID)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Media == nil {
		t.Fatalf("camera.clip: %+v %+v", res, res.Error)
	}
	wall := after.at.Sub(before.at).Seconds()
	peak := before.rssKiB
	var busiest float64 // the highest CPU share over one second of samples
	for i, s := range samples {
		peak = max(peak, s.rssKiB)
		for j := i + 1; j < len(samples); j++ {
			if dt := samples[j].at.Sub(s.at).Seconds(); dt >= 1 {
				busiest = max(busiest, float64(samples[j].cpu-s.cpu)/clockTicks/dt)
				break
			}
		}
	}
	own, kids := float64(after.cpu-before.cpu)/clockTicks, float64(after.childrenCPU-before.childrenCPU)/clockTicks
	t.Logf("gateway during camera.clip 60 s (%.1f MB %s, %.1f s from invoke to answer): CPU %.2f s (%.1f %% of one CPU on average, busiest second %.0f %%), children (ffmpeg remux) %.2f s; RSS %.1f MiB before, %.1f MiB peak, %.1f MiB after",
		float64(res.Media.Size)/1e6, res.Media.MIME, wall, own, 100*own/wall, 100*busiest, kids,
		float64(before.rssKiB)/1024, float64(peak)/1024, float64(after.rssKiB)/1024)
}
