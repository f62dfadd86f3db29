package nodes

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Figures for docs/BENCHMARKS.md ("Nodes and presence"):
//
//	go test ./backend/nodes -run '^$' -bench . -benchtime 2000x

// fill200 fills a presence table with 200 node entries shaped like real
// ones (host, ip, version, platform, three commands).
func fill200(p *Presence) {
	for i := range DefaultPresenceMax {
		p.Seen(fmt.Sprintf("conn-%d", i), PresenceEntry{
			InstanceID: fmt.Sprintf("9b2f6c1e-%04d-4d3a-9a57-6f0e8c1d2b3a", i), Host: fmt.Sprintf("workstation-%03d", i),
			IP: fmt.Sprintf("192.168.1.%d", i%250), Version: "0.16.0", Platform: "linux", Mode: "node", Role: "node",
			DeviceID: strings.Repeat("ab", 32), Caps: []string{"system"}, Commands: []string{"system.notify", "system.run", "system.which"},
		})
	}
}

// BenchmarkPresenceSnapshot200: building the list of 200 entries and
// encoding the presence event (what hello-ok and each event cost).
func BenchmarkPresenceSnapshot200(b *testing.B) {
	p := NewPresence(PresenceOptions{})
	fill200(p)
	var size int
	for b.Loop() {
		body, err := json.Marshal(PresenceEvent{Entries: p.List()})
		if err != nil {
			b.Fatal(err)
		}
		size = len(body)
	}
	b.ReportMetric(float64(size), "event-bytes")
}

// BenchmarkPresenceTable200Memory: heap held by a table of 200 entries.
func BenchmarkPresenceTable200Memory(b *testing.B) {
	var per float64
	for b.Loop() {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		p := NewPresence(PresenceOptions{})
		fill200(p)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		per = float64(m1.HeapAlloc) - float64(m0.HeapAlloc)
		runtime.KeepAlive(p)
	}
	b.ReportMetric(per, "heap-bytes")
}

func rssKB(b *testing.B) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status: ", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb
		}
	}
	b.Skip("VmRSS not found")
	return 0
}

// BenchmarkPresence200Nodes: 200 real node connections over loopback
// WebSockets (client and server in this process): RSS and heap growth, the presence event an operator
// receives, and building + encoding the snapshot for hello-ok.
func BenchmarkPresence200Nodes(b *testing.B) {
	f := newFixture(b, Options{})
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	rss0 := rssKB(b)
	start := time.Now()
	for i := range DefaultPresenceMax {
		f.node(fmt.Sprintf("n%03d", i), []string{"system"}, []string{"system.notify", "system.run", "system.which"})
	}
	connect := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	rss1 := rssKB(b)
	op := f.operator("bench-ui")
	if n := len(op.Hello().Snapshot.Presence); n != DefaultPresenceMax {
		b.Fatalf("snapshot has %d entries", n)
	}
	var evBytes int
	for ev := range op.Events() {
		if ev.Event == EventPresence {
			var p PresenceEvent
			_ = json.Unmarshal(ev.Payload, &p)
			if len(p.Entries) == DefaultPresenceMax {
				evBytes = len(ev.Payload)
				break
			}
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := json.Marshal(f.svc.PresenceSnapshot()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric((rss1-rss0)/1024, "rss-MiB-200conns")
	b.ReportMetric((float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/(1<<20), "heap-MiB-200conns")
	b.ReportMetric(float64(evBytes), "event-bytes")
	b.ReportMetric(float64(connect.Milliseconds()), "connect-200-ms")
}

// BenchmarkInvokeRoundTrip: node.invoke → node.invoke.request →
// node.invoke.result → response, one at a time over loopback WebSockets;
// p50 and p99 of the round trips.
func BenchmarkInvokeRoundTrip(b *testing.B) {
	f := newFixture(b, Options{})
	n := f.node("bench-node", []string{"system"}, []string{"system.which"})
	n.serve(func(InvokeRequestEvent) any { return map[string]string{"path": "/usr/bin/git"} })
	op := f.operator("bench-ui")
	p := map[string]any{"nodeId": n.id, "command": "system.which", "params": map[string]string{"name": "git"}}
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		var r InvokeResult
		if err := op.Call(context.Background(), MethodNodeInvoke, p, &r); err != nil || !r.OK {
			b.Fatalf("%+v %v", r, err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}
