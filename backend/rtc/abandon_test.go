package rtc

import (
	"runtime"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/media"
)

// TestTransferAbandonedCycles: 200 media transfers expected and abandoned
// — half whose node opened the channel and vanished, half whose node
// offered and never connected — each aborted by the gateway (as
// node.invoke does when it gives up). A connection of an ended transfer is
// not held by its connect timer (Config.ConnectTimeout, 15 s by default):
// right after, the heap has not grown by 200 dead peer connections and the
// goroutines are back where they were.
func TestTransferAbandonedCycles(t *testing.T) {
	// A connect bound no run of this test reaches: a timer that held its
	// connection would hold all 200, however slow the machine.
	g := newRig(t, media.Options{}, Config{ConnectTimeout: 5 * time.Minute})
	c := ctx(t)
	// offerOnly is a node that offers a transfer and goes away before
	// the connection is made.
	offerOnly := func(tr *Transfer) {
		pc, err := Config{}.withDefaults().newPC(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pc.CreateDataChannel(ChannelLabel, nil); err != nil {
			t.Fatal(err)
		}
		offer, err := pc.CreateOffer(nil)
		if err != nil {
			t.Fatal(err)
		}
		sdp, err := gather(c, pc, offer)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.r.Answer(c, "dev1", tr.ID(), sdp); err != nil {
			t.Fatal(err)
		}
		_ = pc.Close()
	}
	// connected is a node whose channel opens, then vanishes without a word.
	connected := func(tr *Transfer) {
		s, err := DialStream(c, Config{}, ChannelLabel, g.signal("dev1", tr.ID()), StreamHooks{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	cycle := func(i int) {
		tr := g.expect("dev1", 0)
		if i%2 == 0 {
			connected(tr)
		} else {
			offerOnly(tr)
		}
		tr.Abort()
		if _, err := tr.Wait(c); err == nil {
			t.Fatalf("transfer %d: an abandoned transfer stored something", i)
		}
	}
	// A first cycle of each kind warms up what lives once.
	cycle(0)
	cycle(1)
	// What the warm-up left may still be ending: the base is at most high.
	runtime.GC()
	base := runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapInuse
	for i := range 200 {
		cycle(i)
	}
	// Each peer connection holds a dozen goroutines: 200 leaked would be
	// thousands; a few may still be finishing their last reads.
	deadline := time.Now().Add(90 * time.Second)
	n := runtime.NumGoroutine()
	for n > base+20 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		n = runtime.NumGoroutine()
	}
	if n > base+20 {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines %d before, %d after 200 abandoned transfers:\n%s", base, n, buf[:runtime.Stack(buf, true)])
	}
	// 200 dead connections held would be many MiB.
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("goroutines %d before, %d after; heap in use %d → %d KiB", base, n, heap0>>10, ms.HeapInuse>>10)
	if grew := int64(ms.HeapInuse) - int64(heap0); grew > 6<<20 {
		t.Fatalf("heap in use grew %d KiB over 200 abandoned transfers", grew>>10)
	}
}
