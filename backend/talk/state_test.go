package talk

import (
	"runtime"
	"testing"
)

// TestStateOrder: talk.state follows the talk as it goes — an utterance
// heard (listening), handed to the transcriber (transcribing), its
// transcript done (idle in push-to-talk) — and a state decided earlier
// never goes out after a later one. The test is the transcriber: it takes
// the job and settles the state at once, as a transcription that ends
// quickly does, then lets every runnable goroutine run. Before the fix the
// listening and transcribing states were sent from goroutines of their
// own, which then overwrote idle: the page showed "transcribing" with
// nothing left to transcribe.
func TestStateOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: a goroutine started runs only when the test yields
	tk, _ := attachedTalk(t)
	tk.mode = "ptt"
	states := func() string {
		tk.mu.Lock()
		defer tk.mu.Unlock()
		return tk.uiState
	}
	tk.message(JSONMessage(MsgUtterance, UtteranceStart{UtteranceID: "u1", MimeType: "audio/webm;codecs=opus", Send: true}))
	if got := states(); got != StateListening {
		t.Fatalf("after U the state is %q, want %q", got, StateListening)
	}
	tk.message(AudioMessage(0, []byte{0x1A, 0x45, 0xDF, 0xA3, 1, 2, 3}))
	tk.message(JSONMessage(MsgEnd, UtteranceEnd{UtteranceID: "u1", DurationMs: 800}))
	if got := states(); got != StateTranscribing {
		t.Fatalf("after E the state is %q, want %q", got, StateTranscribing)
	}
	j := <-tk.jobs
	if j.id != "u1" {
		t.Fatalf("job %+v", j)
	}
	tk.state(tk.restState()) // the transcript came back empty
	for range 100 {
		runtime.Gosched()
	}
	if got := states(); got != StateIdle {
		t.Fatalf("the state after the transcript is %q, want %q", got, StateIdle)
	}
}
