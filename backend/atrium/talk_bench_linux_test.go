package atrium

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/talk"
)

// TestTalkBench is Talk's measurement for docs/BENCHMARKS.md "Talk", run on
// purpose with ATRIUM_BENCH_TALK=1: the real app with scripted
// transcription, model and speech servers (no real whisper or Kokoro: the
// machine part only) and a Go page sending espeak-ng's speech.
//   - latency: end of speech (E sent) → the first S audio byte at the page,
//     over ATRIUM_BENCH_TALK_N utterances (default 40), p50/p95;
//   - load: an utterance every 3 s for ATRIUM_BENCH_TALK_SECONDS (default
//     300), CPU time and the largest RSS of the test process (the app and
//     the page and the scripted servers: one process).
func TestTalkBench(t *testing.T) {
	if os.Getenv("ATRIUM_BENCH_TALK") == "" {
		t.Skip("a measurement: set ATRIUM_BENCH_TALK=1 (docs/BENCHMARKS.md)")
	}
	n, secs := 40, 300
	if v, err := strconv.Atoi(os.Getenv("ATRIUM_BENCH_TALK_N")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("ATRIUM_BENCH_TALK_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	sp := speech(t, "en", "What is the weather in Paris?")
	ta := newTalkApp(t, map[string]string{
		"What is the weather in Paris?": "It is sunny in Paris today. The temperature is mild, about twenty degrees! Enjoy your walk.",
	}, nil)
	ta.stt.fixed = &sttAnswer{text: "What is the weather in Paris?", language: "english"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second+10*time.Minute)
	defer cancel()
	ta.ctx = ctx
	open := ta.open(t, ta.admin, map[string]any{"sessionKey": "main/", "mode": "continuous", "lang": "en"})
	peer := dialTalk(ctx, t, ta.admin, open.TalkID)

	// One utterance: U, A…, E, then the reply to its R; the time from E
	// to the first S.
	one := func(i int) time.Duration {
		id := fmt.Sprintf("b%d", i)
		peer.send(t, talk.JSONMessage(talk.MsgUtterance, talk.UtteranceStart{UtteranceID: id, MimeType: "audio/webm;codecs=opus", Send: true}))
		for seq, off := uint32(0), 0; off < len(sp.webm); seq, off = seq+1, off+16<<10 {
			peer.send(t, talk.AudioMessage(seq, sp.webm[off:min(off+16<<10, len(sp.webm))]))
		}
		peer.send(t, talk.JSONMessage(talk.MsgEnd, talk.UtteranceEnd{UtteranceID: id, DurationMs: sp.dur.Milliseconds()}))
		sent := time.Now()
		var first time.Duration
		for {
			b := peer.next(ctx, t)
			if b[0] == talk.MsgSpeech && first == 0 {
				first = time.Since(sent)
			}
			if b[0] == talk.MsgReplyEnd {
				return first
			}
		}
	}
	one(-1) // warm-up: the first run's connections
	lat := make([]time.Duration, 0, n)
	for i := range n {
		lat = append(lat, one(i))
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	t.Logf("BENCH talk latency E→first S: n=%d p50=%v p95=%v min=%v max=%v", n, pct(0.50).Round(100*time.Microsecond),
		pct(0.95).Round(100*time.Microsecond), lat[0].Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond))

	// Load: an utterance every 3 s.
	cpu0, start := cpuTime(t), time.Now()
	var maxRSS, utterances int
	for i := 0; time.Since(start) < time.Duration(secs)*time.Second; i++ {
		next := start.Add(time.Duration(i+1) * 3 * time.Second)
		one(n + i)
		utterances++
		maxRSS = max(maxRSS, rssKiB(t))
		if d := time.Until(next); d > 0 {
			time.Sleep(d) // the pace of a conversation, not a wait for a result
		}
	}
	wall := time.Since(start)
	cpu := cpuTime(t) - cpu0
	t.Logf("BENCH talk load: %d utterances in %v, CPU %v (%.1f%% of one core), RSS max %d MiB, now %d MiB, %d talks open",
		utterances, wall.Round(time.Second), cpu.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds(), maxRSS>>10, rssKiB(t)>>10, ta.a.Talk.Talks())
}

// cpuTime is the process's user and system CPU time.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	must(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssKiB is the process's resident set (VmRSS, KiB).
func rssKiB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	must(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			k, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return k
		}
	}
	return 0
}
