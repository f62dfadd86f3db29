package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
	"github.com/atrium-dev/atrium/backend/gwid"
)

// Talk (issue 27) in headless Chromium: the microphone is a WAV of speech made by espeak-ng
// (--use-file-for-fake-audio-capture), the transcription server is scripted (it decodes what it
// gets with ffmpeg and records how long it lasts), the speech server too (it answers with a WAV
// tone), and the page records what it plays (data-talk-events on [data-testid=talk]).

// speechWAV writes leadSeconds of silence, espeak-ng's speech of text (voice "en" or "cmn") and
// padSeconds of silence to dir and returns its path and the speech's length in seconds. It skips
// t when espeak-ng or ffmpeg is absent (`make deps-system-test` installs them).
func speechWAV(t *testing.T, dir, voice, text string, leadSeconds, padSeconds float64) (string, float64) {
	t.Helper()
	espeak, err := exec.LookPath("espeak-ng")
	if err != nil {
		t.Skip("e2e: espeak-ng not found (Debian espeak-ng; `make deps-test` installs it)")
	}
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("e2e: ffmpeg not found (Debian ffmpeg; `make deps-test` installs it)")
	}
	raw := filepath.Join(dir, voice+"-raw.wav")
	if out, err := exec.Command(espeak, "-v", voice, "-s", "150", "-w", raw, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng -v %s: %v\n%s", voice, err, out)
	}
	secs := decodedSeconds(t, raw)
	out := filepath.Join(dir, fmt.Sprintf("%s-%.0f-%.0f.wav", voice, leadSeconds, padSeconds))
	if b, err := exec.Command("ffmpeg", "-v", "error", "-y", "-i", raw, "-af", fmt.Sprintf("adelay=%d:all=1,apad=pad_dur=%.2f", int(leadSeconds*1000), padSeconds), "-ar", "48000", "-ac", "1", out).CombinedOutput(); err != nil {
		t.Fatalf("pad the speech: %v\n%s", err, b)
	}
	return out, secs
}

// decodedSeconds decodes path with ffmpeg (any format it knows: WAV, WebM/Opus, Ogg/Opus) to
// 16 kHz mono samples and returns how long they last; it fails t when ffmpeg cannot decode it.
func decodedSeconds(t *testing.T, path string) float64 {
	t.Helper()
	secs, _, err := decode(path)
	if err != nil {
		t.Fatal(err)
	}
	return secs
}

// decode returns the length (s) and RMS (0…1) of the audio in path, decoded by ffmpeg.
func decode(path string) (float64, float64, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("ffmpeg", "-v", "error", "-i", path, "-f", "s16le", "-ac", "1", "-ar", "16000", "-")
	cmd.Stderr = &stderr
	pcm, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("ffmpeg cannot decode %s: %v: %s", path, err, stderr.String())
	}
	n := len(pcm) / 2
	if n == 0 {
		return 0, 0, fmt.Errorf("%s decodes to no samples", path)
	}
	var sum float64
	for i := 0; i < n; i++ {
		v := float64(int16(binary.LittleEndian.Uint16(pcm[2*i:]))) / 32768
		sum += v * v
	}
	return float64(n) / 16000, math.Sqrt(sum / float64(n)), nil
}

// toneWAV is a 16-bit mono 22.05 kHz WAV of a 440 Hz tone lasting secs.
func toneWAV(secs float64) []byte {
	const rate = 22050
	n := int(secs * rate)
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + 2*n))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1))
	le(uint16(1))
	le(uint32(rate))
	le(uint32(2 * rate))
	le(uint16(2))
	le(uint16(16))
	b.WriteString("data")
	le(uint32(2 * n))
	for i := 0; i < n; i++ {
		le(int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate)))
	}
	return b.Bytes()
}

// silentWAV writes secs of digital silence as a WAV to dir.
func silentWAV(t *testing.T, dir string, secs float64) string {
	t.Helper()
	p := filepath.Join(dir, "silence.wav")
	w := toneWAV(secs)
	for i := 44; i < len(w); i++ {
		w[i] = 0
	}
	if err := os.WriteFile(p, w, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// heard is one upload the scripted transcription server got.
type heard struct {
	Seconds, RMS float64
	Model        string
	Language     string
	Err          string
}

// scriptedSTT is an OpenAI-compatible /v1/audio/transcriptions server: it decodes each upload
// with ffmpeg, records its length, and answers text (verbose_json: with the language).
type scriptedSTT struct {
	dir  string
	text func() (string, string) // the transcript and its language
	mu   sync.Mutex
	got  []heard
}

func (s *scriptedSTT) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/audio/transcriptions" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		http.Error(w, "bad multipart", http.StatusBadRequest)
		return
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		http.Error(w, "no file", http.StatusBadRequest)
		return
	}
	data, _ := io.ReadAll(f)
	tmp, err := os.CreateTemp(s.dir, "utterance-*")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = tmp.Write(data)
	tmp.Close()
	h := heard{Model: r.FormValue("model"), Language: r.FormValue("language")}
	h.Seconds, h.RMS, err = decode(tmp.Name())
	if err != nil {
		h.Err = err.Error()
	}
	s.mu.Lock()
	s.got = append(s.got, h)
	s.mu.Unlock()
	text, lang := s.text()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"text": text, "language": lang, "duration": h.Seconds})
}

func (s *scriptedSTT) uploads() []heard {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]heard(nil), s.got...)
}

// scriptedTTS is an OpenAI-compatible /v1/audio/speech server answering a WAV tone of secs()
// seconds for every sentence, recording the sentences.
type scriptedTTS struct {
	secs   func() float64
	mu     sync.Mutex
	inputs []string
}

func (s *scriptedTTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/audio/speech" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Input string `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.inputs = append(s.inputs, req.Input)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "audio/wav")
	_, _ = w.Write(toneWAV(s.secs()))
}

func (s *scriptedTTS) said() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.inputs...)
}

// talkSpeechConfig starts the scripted transcription server stt and, unless tts is nil, the speech
// server tts, and returns config.json's "talk" pointing at them: whisper-1 and, with tts, its
// "openai" voice alloy as WAV (without, the voice is the device's own speechSynthesis); interrupt
// as given ("" leaves the default, cancel).
func talkSpeechConfig(t *testing.T, stt *scriptedSTT, tts *scriptedTTS, interrupt string) map[string]any {
	t.Helper()
	s := httptest.NewServer(stt)
	t.Cleanup(s.Close)
	cfg := map[string]any{"stt": map[string]any{"baseUrl": s.URL, "model": "whisper-1"}}
	if tts != nil {
		v := httptest.NewServer(tts)
		t.Cleanup(v.Close)
		cfg["tts"] = map[string]any{"provider": "openai", "baseUrl": v.URL, "model": "tts-1", "voice": "alloy", "format": "wav"}
	}
	if interrupt != "" {
		cfg["interrupt"] = interrupt
	}
	return cfg
}

// startTalk starts the scripted model (its chat completions at /v1), the speech servers of
// talkSpeechConfig (none when stt is nil: Talk is not set up) and the app using them (startTalkApp).
func startTalk(t *testing.T, tmp string, model http.Handler, stt *scriptedSTT, tts *scriptedTTS, interrupt string) *mediaGateway {
	t.Helper()
	m := httptest.NewServer(model)
	t.Cleanup(m.Close)
	config := ""
	if stt != nil {
		b, err := json.Marshal(map[string]any{"talk": talkSpeechConfig(t, stt, tts, interrupt)})
		if err != nil {
			t.Fatal(err)
		}
		config = string(b)
	}
	return startTalkApp(t, tmp, config, m.URL+"/v1")
}

// openTalkPage opens g's UI in a new headless Chromium (its profile in dir, its microphone and other
// flags as given, e.g. micFlags) and waits until the UI is connected.
func openTalkPage(t *testing.T, chromium, dir string, g *mediaGateway, flags ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	ctx := newBrowser(t, chromium, dir, flags...)
	if err := chromedp.Do(ctx, chromedp.Navigate(g.uiURL)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	waitFor(t, ctx, "the UI to connect", connected, 30*time.Second)
	return ctx
}

// startTalkApp runs the app with config in its home, on 127.0.0.2 (a phone may pair), the model
// at modelURL.
func startTalkApp(t *testing.T, tmp, config, modelURL string) *mediaGateway {
	t.Helper()
	bin := buildAtrium(t)
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "workspace")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if config != "" {
		if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	env := []string{"OPENAI_BASE_URL=" + modelURL, "OPENAI_API_KEY=k", "OPENAI_MODEL=scripted"}
	uiURL, _ := serve(t, bin, home, ws, port, env, "--bind", "127.0.0.2")
	g := &mediaGateway{bin: bin, port: port, home: home, uiURL: uiURL, admin: newAdminSession(t, uiURL)}
	cert, err := gwid.LoadCert(gwid.Options{Dir: filepath.Join(home, "keys")})
	if err != nil {
		t.Fatalf("the gateway's certificate: %v", err)
	}
	g.spkiPin = cert.SPKIBase64()
	return g
}

// axeCheckIn is axeCheck on the part of the page css selects (Settings → Talk, not the other
// sections' own findings).
func axeCheckIn(t *testing.T, ctx context.Context, css, what string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "frontend", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core: %v (run npm ci in frontend/)", err)
	}
	if _, err := chromedp.Run(bounded(t, ctx, 30*time.Second), chromedp.Evaluate[bool](string(src)+";true")); err != nil {
		t.Fatalf("inject axe-core: %v", err)
	}
	q, _ := json.Marshal(css)
	out, err := chromedp.Run(bounded(t, ctx, 120*time.Second), chromedp.Evaluate[string](`axe.run(document.querySelector(`+string(q)+`), {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe.run: %v", err)
	}
	if out != "[]" {
		t.Errorf("axe-core (%s): serious or critical violations: %s", what, out)
	}
}

// micFlags make Chromium's microphone the WAV at path (looped unless noloop) and grant it.
func micFlags(path string, noloop bool) []chromedp.ExecAllocatorOption {
	f := path
	if noloop {
		f += "%noloop"
	}
	return []chromedp.ExecAllocatorOption{
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-file-for-fake-audio-capture", f),
		chromedp.Flag("allow-loopback-in-peer-connection", true),
	}
}

// talkEvents is the page's record of what it played and heard (newest last).
func talkEvents(t *testing.T, ctx context.Context) string {
	return js[string](t, ctx, `document.querySelector('[data-testid=chat-view]:not([hidden]) [data-testid=talk]')?.dataset.talkEvents ?? ''`)
}

const talkSel = `document.querySelector('[data-testid=chat-view]:not([hidden]) [data-testid=talk]')`

// waitTalk is waitFor that, on a timeout, says what the page's talk did (its state and events).
func waitTalk(t *testing.T, ctx context.Context, what, predicate string, timeout time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(bounded(t, ctx, timeout+10*time.Second), chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		state, _ := chromedp.Run(bounded(t, ctx, 10*time.Second), chromedp.Evaluate[string](talkSel+`?.dataset.talkState ?? '(no talk controls)'`))
		t.Fatalf("waiting for %s: %v\nthe talk: state %s, events %s", what, err, state, talkEvents(t, ctx))
	}
}

// pushToTalk records one utterance with the talk button: pressed, held until the page's VAD has
// heard speech start and end (the looping WAV says it whole at least once), pressed again; the
// transcript must land in the input as want. Then Enter sends it.
func pushToTalk(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	before := len(strings.Fields(talkEvents(t, ctx)))
	click(t, ctx, `[data-testid=chat-view]:not([hidden]) [data-testid=talk-button]`)
	waitFor(t, ctx, "recording", talkSel+`?.dataset.talkState === 'recording'`, 60*time.Second)
	// Speech heard from its start to its end while recording (events after the press).
	waitTalk(t, ctx, "a whole utterance heard while recording",
		fmt.Sprintf(`(() => { const e = (%s?.dataset.talkEvents ?? '').split(' ').slice(%d); const s = e.indexOf('vad-start'); return s >= 0 && e.indexOf('vad-end', s) > s; })()`, talkSel, before), 60*time.Second)
	click(t, ctx, `[data-testid=chat-view]:not([hidden]) [data-testid=talk-button]`)
	q, _ := json.Marshal(want)
	waitFor(t, ctx, "the transcript in the input", `document.querySelector('[data-testid=chat-view]:not([hidden]) [data-testid=chat-input]')?.value === `+string(q), 60*time.Second)
	if got := js[bool](t, ctx, `document.activeElement === document.querySelector('[data-testid=chat-view]:not([hidden]) [data-testid=chat-input]')`); !got {
		t.Errorf("the input does not have the focus after the transcript landed (Enter would not send it)")
	}
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.KeyEvent("\r")); err != nil {
		t.Fatalf("press Enter: %v", err)
	}
	waitFor(t, ctx, "the transcript sent as the person's message", hasUserMessage(want), 30*time.Second)
}

// TestTalkDesktopAndPhone: push-to-talk on the desktop in English and in Chinese, and on a
// paired phone: espeak-ng's speech reaches the scripted transcription server whole (it decodes,
// and lasts at least as long as the speech), the transcript lands in the input, Enter sends it,
// the model gets it, and the scripted speech server's audio for the answer is played by the page
// (play, then ended). The talk ends with a mouse click where End talk was while the voice played
// (nothing moves as the voice stops). Screenshots of the button's states and Settings → Talk, en and zh.
func TestTalkDesktopAndPhone(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	// Said once (no loop), two seconds after the microphone opens: the person presses, speaks, stops,
	// and the room is quiet while the answer plays.
	enWAV, enSecs := speechWAV(t, tmp, "en", "Please tell me about the weather today.", 2, 1)
	zhWAV, zhSecs := speechWAV(t, tmp, "cmn", "请告诉我今天的天气。", 2, 1)
	var mu sync.Mutex
	transcript, tlang := "Tell me about the weather today.", "en"
	stt := &scriptedSTT{dir: tmp, text: func() (string, string) { mu.Lock(); defer mu.Unlock(); return transcript, tlang }}
	tts := &scriptedTTS{secs: func() float64 { return 1.5 }}
	model := &scriptedModel{reply: "It is sunny. 天气晴朗。", delay: 20 * time.Millisecond}
	g := startTalk(t, tmp, model, stt, tts, "cancel")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the speech server was asked for %q; the transcription server got %+v", tts.said(), stt.uploads())
		}
	})

	for _, c := range []struct {
		lang, wav, text, tlang string
		secs                   float64
	}{
		{"en", enWAV, "Tell me about the weather today.", "en", enSecs},
		{"zh", zhWAV, "请告诉我今天的天气。", "zh", zhSecs},
	} {
		mu.Lock()
		transcript, tlang = c.text, c.tlang
		mu.Unlock()
		n := len(stt.uploads())
		ctx := openTalkPage(t, chromium, filepath.Join(tmp, "desk-"+c.lang), g, micFlags(c.wav, true)...)
		js[bool](t, ctx, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = '`+c.lang+`'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
		shot(t, ctx, "talk-button-off-"+c.lang+".png")
		pushToTalk(t, ctx, c.text)
		endX, endY := endWhileSpeaking(t, ctx)
		up := stt.uploads()[n:]
		if len(up) != 1 {
			t.Fatalf("%s: the transcription server got %d uploads, want 1: %+v", c.lang, len(up), up)
		}
		if up[0].Err != "" || up[0].RMS < 0.01 {
			t.Errorf("%s: the utterance does not decode to sound: %+v", c.lang, up[0])
		}
		// Held from before a whole utterance until after it: at least the speech, at most a loop and a bit.
		if up[0].Seconds < c.secs*0.9 || up[0].Seconds > c.secs+30 {
			t.Errorf("%s: the utterance lasts %.2f s, the speech %.2f s", c.lang, up[0].Seconds, c.secs)
		}
		waitTalk(t, ctx, "the answer played to its end", talkSel+`?.dataset.talkEvents.split(' ').some(e => e.startsWith('ended:'))`, 60*time.Second)
		// Asked once the answer was spoken: the page shows the message before chat.send reaches the model.
		if !model.sawMessage(c.text) {
			t.Errorf("%s: the model was not sent the transcript %q", c.lang, c.text)
		}
		ev := talkEvents(t, ctx)
		if !strings.Contains(ev, "play:") || strings.Index(ev, "play:") > strings.Index(ev, "ended:") {
			t.Errorf("%s: the page's events %q: want play, then ended", c.lang, ev)
		}
		if len(tts.said()) == 0 {
			t.Errorf("%s: the speech server was asked for nothing", c.lang)
		}
		shotViewport(t, ctx, "talk-button-on-"+c.lang+".png")
		axeCheck(t, ctx, "the talk controls ("+c.lang+")")
		clickEndAt(t, ctx, endX, endY)
		// Settings → Talk, for the closing note's screenshots.
		click(t, ctx, `[data-testid=open-settings]`)
		waitFor(t, ctx, "Settings → Talk", `document.querySelector('[data-testid=talk-stt-base]')?.value.startsWith('http://127.0.0.1:')`, 30*time.Second)
		js[bool](t, ctx, `(document.getElementById('s-talk').scrollIntoView(), true)`)
		shotViewport(t, ctx, "talk-settings-desktop-"+c.lang+".png")
		click(t, ctx, `[data-testid=talk-test-stt]`)
		waitFor(t, ctx, "the STT test's answer", `document.querySelector('[data-testid=talk-test-stt-result]')?.dataset.ok === 'true'`, 60*time.Second)
		click(t, ctx, `[data-testid=talk-test-tts]`)
		waitFor(t, ctx, "the TTS test's answer", `document.querySelector('[data-testid=talk-test-tts-result]')?.dataset.ok === 'true'`, 60*time.Second)
		axeCheckIn(t, ctx, "[data-testid=settings-talk]", "Settings → Talk ("+c.lang+")")
	}

	// A paired phone: the same, on the phone's layout (a transcript of its own: the desktop's
	// messages are in the phone's history too).
	const onPhone = "Tell me about the weather on my phone."
	mu.Lock()
	transcript, tlang = onPhone, "en"
	mu.Unlock()
	n := len(stt.uploads())
	phone, phoneID := g.pairBrowser(t, chromium, filepath.Join(tmp, "phone"), []string{"location.get"}, nil,
		append(micFlags(enWAV, true), chromedp.UserAgent(phoneUA), chromedp.WindowSize(390, 844))...)
	if err := chromedp.Do(phone, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch)); err != nil {
		t.Fatalf("emulate 390×844: %v", err)
	}
	// A device approved with the default scope (authenticated) chats with no agent, so it may not
	// talk either (talk.open is chat.send's rule): the person scopes it to role main.
	g.admin.call("device.scope.set", map[string]any{"deviceId": phoneID, "scope": "role:main", "idempotencyKey": "talk-phone-scope"})
	waitFor(t, phone, "the chat on the phone", `!!document.querySelector('[data-testid=chat-input]')?.offsetParent && !document.querySelector('[data-testid=chat-unavailable]') && !!document.querySelector('[data-testid=chat-view]:not([hidden]) [data-testid=talk-button]')`, 30*time.Second)
	shotViewport(t, phone, "talk-phone-off-en.png")
	pushToTalk(t, phone, onPhone)
	endX, endY := endWhileSpeaking(t, phone)
	if up := stt.uploads()[n:]; len(up) != 1 || up[0].Err != "" || up[0].Seconds < enSecs*0.9 {
		t.Errorf("the phone's utterance at the transcription server: %+v (the speech lasts %.2f s)", up, enSecs)
	}
	waitTalk(t, phone, "the answer played on the phone", talkSel+`?.dataset.talkEvents.split(' ').some(e => e.startsWith('ended:'))`, 60*time.Second)
	if !model.sawMessage(onPhone) {
		t.Errorf("the model was not sent the phone's transcript %q", onPhone)
	}
	shotViewport(t, phone, "talk-phone-on-en.png")
	axeCheck(t, phone, "the talk controls on the phone")
	clickEndAt(t, phone, endX, endY)
	setLang(t, phone, "zh")
	shotViewport(t, phone, "talk-phone-off-zh.png")
}

// TestTalkContinuousInterrupt: continuous mode sends what was heard as the person's message; the
// answer's voice (a long tone) is stopped by the next words heard (the looping WAV speaks again
// during it): the audio element is stopped before its end, and with interrupt "cancel" the run is
// cancelled. A silent microphone sends no utterance at all.
func TestTalkContinuousInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	// Said again and again, three seconds apart (the file loops).
	wav, secs := speechWAV(t, tmp, "en", "What is on my calendar?", 0, 3)
	stt := &scriptedSTT{dir: tmp, text: func() (string, string) { return "What is on my calendar?", "en" }}
	// Each sentence's voice lasts a minute: the next loop of the speech comes while it plays.
	tts := &scriptedTTS{secs: func() float64 { return 60 }}
	// The answer streams slowly (its first sentence first): the run is still going when it is interrupted.
	model := &scriptedModel{reply: "Your calendar is full today. " + strings.Repeat("And then there is more. ", 120), delay: 250 * time.Millisecond}
	g := startTalk(t, tmp, model, stt, tts, "cancel")
	ctx := openTalkPage(t, chromium, filepath.Join(tmp, "desk"), g, micFlags(wav, false)...)
	click(t, ctx, `[data-testid=talk-continuous]`)
	waitFor(t, ctx, "the person's words sent", hasUserMessage("What is on my calendar?"), 90*time.Second)
	shot(t, ctx, "talk-button-continuous-en.png")
	waitTalk(t, ctx, "the voice playing", talkSel+`?.dataset.talkEvents.split(' ').some(e => e.startsWith('play:'))`, 90*time.Second)
	waitTalk(t, ctx, "the voice stopped by speech", talkSel+`?.dataset.talkEvents.split(' ').some(e => e.startsWith('interrupted:'))`, 120*time.Second)
	ev := strings.Fields(talkEvents(t, ctx))
	for _, e := range ev {
		if !strings.HasPrefix(e, "interrupted:") {
			continue
		}
		// interrupted:<replyId>:<seq>:<at>/<duration>: stopped before its end.
		var at, dur float64
		parts := strings.Split(e, ":")
		if _, err := fmt.Sscanf(parts[len(parts)-1], "%f/%f", &at, &dur); err != nil || at >= dur-0.5 {
			t.Errorf("the voice was not stopped before its end: %q", e)
		}
		break
	}
	for _, e := range ev {
		if strings.HasPrefix(e, "ended:") {
			t.Errorf("a minute-long voice played to its end instead of being interrupted: %v", ev)
		}
	}
	waitFor(t, ctx, "the interrupted run cancelled", `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant]')].some(m => m.dataset.state === 'cancelled')`, 60*time.Second)
	for _, h := range stt.uploads() {
		if h.Err != "" || h.Seconds < secs*0.8 || h.Seconds > secs+3 {
			t.Errorf("an utterance at the transcription server: %+v (the speech lasts %.2f s; an utterance is the speech and its hangover)", h, secs)
		}
	}
	endTalk(t, ctx, `[data-testid=talk-end]`)

	// Silence: continuous mode hears no utterance in 5 s of it (250 frames analysed).
	n := len(stt.uploads())
	quiet := openTalkPage(t, chromium, filepath.Join(tmp, "quiet"), g, micFlags(silentWAV(t, tmp, 30), false)...)
	click(t, quiet, `[data-testid=talk-continuous]`)
	waitFor(t, quiet, "5 s of silence analysed", talkSel+`?.dataset.talkFrames >= 250`, 120*time.Second)
	if ev := talkEvents(t, quiet); strings.Contains(ev, "vad-") {
		t.Errorf("silence was heard as speech: %q", ev)
	}
	if got := len(stt.uploads()) - n; got != 0 {
		t.Errorf("silence sent %d utterances to the transcription server", got)
	}
}

// TestTalkNothingConfigured: with no transcription server set, the talk button says what is
// missing (TALK_NO_STT in words) at once, its link opens Settings → Talk with the focus there,
// the button stays usable; in English and Chinese, axe-clean.
func TestTalkNothingConfigured(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	g := startTalk(t, tmp, &scriptedModel{reply: "ok", delay: time.Millisecond}, nil, nil, "")
	ctx := openTalkPage(t, chromium, filepath.Join(tmp, "desk"), g, micFlags(silentWAV(t, tmp, 5), false)...)
	for _, c := range []struct{ lang, says string }{{"en", "speech-to-text server"}, {"zh", "语音转文字服务器"}} {
		js[bool](t, ctx, `(() => { const s = document.querySelector('[data-testid=lang-select]'); s.value = '`+c.lang+`'; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
		click(t, ctx, `[data-testid=talk-button]`)
		waitFor(t, ctx, "the talk button's explanation", `document.querySelector('[data-testid=talk-problem]')?.dataset.code === 'TALK_NO_STT'`, 30*time.Second)
		if got := text(t, ctx, `[data-testid=talk-problem]`); !strings.Contains(got, c.says) {
			t.Errorf("%s: the explanation %q does not say %q", c.lang, got, c.says)
		}
		if js[bool](t, ctx, `document.querySelector('[data-testid=talk-button]').disabled`) {
			t.Errorf("%s: the talk button stays disabled after the refusal", c.lang)
		}
		shot(t, ctx, "talk-not-configured-"+c.lang+".png")
		axeCheck(t, ctx, "the talk button's explanation ("+c.lang+")")
		click(t, ctx, `[data-testid=talk-open-settings]`)
		waitFor(t, ctx, "Settings → Talk focused", `document.activeElement?.id === 's-talk'`, 30*time.Second)
		click(t, ctx, `[data-testid=close-settings]`)
		click(t, ctx, `[data-testid=talk-problem-close]`)
	}
}

// heldTalkModel is a chat-completions server whose first answer streams its first sentence and
// then waits for release (or the request's end) before the rest; later answers stream at once.
// log records each request's start and how it ended: "end" (streamed whole) or "cut" (the client
// went away while the answer was held: the run was cancelled).
type heldTalkModel struct {
	first, rest, later string
	release            chan struct{}
	more               chan struct{} // a request came (buffered; a full one means one is pending)
	mu                 sync.Mutex
	log                []string
	asked              []string
}

func (m *heldTalkModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := readChatRequest(w, r)
	if !ok {
		return
	}
	last := ""
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			last = fmt.Sprint(msg.Content)
		}
	}
	m.mu.Lock()
	n := len(m.asked)
	m.asked = append(m.asked, last)
	m.log = append(m.log, "start")
	m.mu.Unlock()
	select {
	case m.more <- struct{}{}:
	default:
	}
	end := func(how string) {
		m.mu.Lock()
		m.log = append(m.log, how)
		m.mu.Unlock()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(text string, role bool) {
		delta := map[string]any{"content": text}
		if role {
			delta["role"] = "assistant"
		}
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-held", "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	if n == 0 {
		send(m.first, true)
		select {
		case <-m.release:
		case <-r.Context().Done():
			end("cut")
			return
		}
		send(m.rest, false)
	} else {
		send(m.later, true)
	}
	fmt.Fprint(w, "data: {\"id\":\"chatcmpl-held\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
	// Streamed whole: the client may hang up as soon as it read [DONE] (its request's context is
	// then done too), so "cut" is only a request that went away while the answer was held.
	end("end")
}

func (m *heldTalkModel) requests() (asked, log []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.asked...), append([]string(nil), m.log...)
}

// TestTalkInterruptQueue: with Settings → Talk's interrupt "queue", speech during the voice stops
// it at once (the audio element paused before its end), and the new words wait for the answer
// being given: the model is asked them only after its first answer streamed whole (not cancelled;
// the answer is held open until the new words have been heard, so they must queue), in order, and
// the first answer ends final in the chat. While they wait the chat shows them as the person's
// message marked waiting; once sent, the real message takes its place.
func TestTalkInterruptQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	// Said again and again, three seconds apart (the file loops).
	wav, _ := speechWAV(t, tmp, "en", "What is on my calendar?", 0, 3)
	const first, second = "What is on my calendar?", "And what about tomorrow?"
	var mu sync.Mutex
	n := 0
	stt := &scriptedSTT{dir: tmp, text: func() (string, string) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return first, "en"
		}
		if n == 2 {
			return second, "en"
		}
		return fmt.Sprintf("And one more thing number %d?", n), "en"
	}}
	// Each sentence's voice lasts a minute: the next loop of the speech comes while it plays.
	tts := &scriptedTTS{secs: func() float64 { return 60 }}
	model := &heldTalkModel{first: "Your calendar is full today. ", rest: "You have three meetings.", later: "Tomorrow is free.", release: make(chan struct{}), more: make(chan struct{}, 1)}
	released := false
	release := func() {
		if !released {
			released = true
			close(model.release)
		}
	}
	t.Cleanup(release)
	g := startTalk(t, tmp, model, stt, tts, "queue")
	ctx := openTalkPage(t, chromium, filepath.Join(tmp, "desk"), g, micFlags(wav, false)...)
	click(t, ctx, `[data-testid=talk-continuous]`)
	waitFor(t, ctx, "the person's words sent", hasUserMessage(first), 90*time.Second)
	waitTalk(t, ctx, "the first answer's voice playing", talkSel+`?.dataset.talkEvents.split(' ').some(e => e.startsWith('play:'))`, 90*time.Second)
	waitTalk(t, ctx, "the voice stopped by speech", talkSel+`?.dataset.talkEvents.split(' ').some(e => e.startsWith('interrupted:'))`, 120*time.Second)
	ev := strings.Fields(talkEvents(t, ctx))
	var played, stopped string
	for _, e := range ev {
		p := strings.Split(e, ":")
		switch {
		case p[0] == "play" && played == "":
			played = p[1]
		case p[0] == "interrupted" && stopped == "":
			stopped = p[1]
			// interrupted:<replyId>:<seq>:<at>/<duration>: stopped before its end.
			var at, dur float64
			if _, err := fmt.Sscanf(p[len(p)-1], "%f/%f", &at, &dur); err != nil || at >= dur-0.5 {
				t.Errorf("the voice was not stopped before its end: %q", e)
			}
		case p[0] == "ended":
			t.Errorf("a minute-long voice played to its end instead of being interrupted: %v", ev)
		}
	}
	if played == "" || stopped != played {
		t.Errorf("the interrupted voice (%q) is not the first answer's (%q): %v", stopped, played, ev)
	}
	// The new words are heard while the first answer is still held open: they wait, shown in the
	// chat as the person's message marked waiting.
	waitTalk(t, ctx, "the new words heard and queued", talkSel+`?.dataset.talkEvents.split(' ').some(e => e.startsWith('heard:') && e.endsWith(':queued'))`, 120*time.Second)
	waitFor(t, ctx, "the queued words in the chat, waiting", waitingBubble(second)+` !== null`, 30*time.Second)
	if got := js[string](t, ctx, waitingBubble(second)+`?.textContent ?? ''`); !strings.Contains(got, "sent when the current answer ends") {
		t.Errorf("the waiting words' bubble says %q: want it marked as waiting", got)
	}
	if js[bool](t, ctx, hasUserMessage(second)) {
		t.Errorf("the queued words show as a sent message before they were sent")
	}
	shootWaiting(t, ctx)
	if asked, log := model.requests(); len(asked) != 1 || !slices.Equal(log, []string{"start"}) {
		t.Fatalf("the model was asked %q (%v) before the first answer ended: the new words did not wait", asked, log)
	}
	release()
	waitFor(t, ctx, "the queued words in the chat as sent, no longer waiting", hasUserMessage(second)+` && `+waitingBubble(second)+` === null`, 90*time.Second)
	waitFor(t, ctx, "the first answer final", `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant]')].some(m => m.dataset.state === 'final' && m.textContent.includes('three meetings'))`, 60*time.Second)
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	for {
		asked, log := model.requests()
		if len(asked) >= 2 {
			if !strings.Contains(asked[0], first) || !strings.Contains(asked[1], second) {
				t.Errorf("the model was asked %q, want %q then %q", asked, first, second)
			}
			if len(log) < 3 || !slices.Equal(log[:3], []string{"start", "end", "start"}) {
				t.Errorf("the model's requests went %v: want the first answer streamed whole (not cancelled) before the second was asked", log)
			}
			break
		}
		select {
		case <-model.more:
		case <-deadline.C:
			t.Fatalf("the queued words never reached the model: asked %q (%v)", asked, log)
		}
	}
	if js[bool](t, ctx, `[...document.querySelectorAll('[data-testid=chat-message][data-role=assistant]')].some(m => m.dataset.state === 'cancelled')`) {
		t.Errorf("an answer was cancelled with interrupt \"queue\"")
	}
	endTalk(t, ctx, `[data-testid=talk-end]`)
}

// TestTalkBrowserVoice: with no speech server set (Settings → Talk's voice "this device"), the
// answer comes as T sentences and the page speaks them with window.speechSynthesis: its record
// says speak() was called with the scripted model's answer, sentence by sentence, in order (en
// and zh, each with its language). Whether headless Chromium then fires the utterances' start and
// end events depends on a speech engine behind it: the test logs what it fired and checks only
// that each utterance was settled (said, or an error) before the next was spoken.
func TestTalkBrowserVoice(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	tmp := t.TempDir()
	enWAV, _ := speechWAV(t, tmp, "en", "Please tell me about the weather today.", 2, 1)
	const heard, answer = "Tell me about the weather today.", "It is sunny and warm. 天气晴朗，很暖和。"
	stt := &scriptedSTT{dir: tmp, text: func() (string, string) { return heard, "en" }}
	g := startTalk(t, tmp, &scriptedModel{reply: answer, delay: 20 * time.Millisecond}, stt, nil, "")
	ctx := openTalkPage(t, chromium, filepath.Join(tmp, "desk"), g, micFlags(enWAV, true)...)
	pushToTalk(t, ctx, heard)
	// Every sentence handed to speechSynthesis, and the last one settled.
	spoken := func() (texts []string, settled bool, ev []string) {
		ev = strings.Fields(talkEvents(t, ctx))
		last := -1
		for i, e := range ev {
			p := strings.SplitN(e, ":", 4)
			if p[0] == "speak" && len(p) == 4 {
				txt, err := url.PathUnescape(p[3])
				if err != nil {
					t.Fatalf("the record %q: %v", e, err)
				}
				texts = append(texts, txt)
				last = i
			}
		}
		if last >= 0 {
			for _, e := range ev[last+1:] {
				settled = settled || strings.HasPrefix(e, "said:") || strings.HasPrefix(e, "error:")
			}
		}
		return texts, settled, ev
	}
	want := strings.ReplaceAll(answer, " ", "")
	waitTalk(t, ctx, "the whole answer handed to speechSynthesis",
		`(() => { const e = (`+talkSel+`?.dataset.talkEvents ?? '').split(' ').filter(x => x.startsWith('speak:')).map(x => decodeURIComponent(x.split(':').slice(3).join(':'))); return e.join('').replaceAll(' ', '') === `+jsString(want)+`; })()`, 180*time.Second)
	waitTalk(t, ctx, "the last sentence settled", `(() => { const e = (`+talkSel+`?.dataset.talkEvents ?? '').split(' '); const i = e.findLastIndex(x => x.startsWith('speak:')); return i >= 0 && e.slice(i + 1).some(x => x.startsWith('said:') || x.startsWith('error:')); })()`, 180*time.Second)
	texts, settled, ev := spoken()
	if len(texts) < 2 || !settled {
		t.Fatalf("speechSynthesis was handed %q (settled %v): want the answer's sentences", texts, settled)
	}
	if got := strings.ReplaceAll(strings.Join(texts, ""), " ", ""); got != want {
		t.Errorf("speechSynthesis spoke %q, want the answer %q in order", texts, answer)
	}
	// Each utterance settles (said or error) before the next is spoken: one at a time, in order.
	seq, open := 0, false
	for _, e := range ev {
		p := strings.Split(e, ":")
		switch p[0] {
		case "speak":
			if open {
				t.Errorf("a sentence was spoken before the one before it settled: %v", ev)
			}
			if s := fmt.Sprint(seq); p[2] != s {
				t.Errorf("sentence %s spoken as number %d: %v", p[2], seq, ev)
			}
			seq, open = seq+1, true
		case "said", "error":
			open = false
		}
	}
	fired, why := map[string]int{}, map[string]int{}
	for _, e := range ev {
		p := strings.Split(e, ":")
		fired[p[0]]++
		if p[0] == "error" && len(p) == 4 {
			why[p[3]]++
		}
	}
	t.Logf("headless Chromium's speechSynthesis: %d speak() calls, %d start events (say), %d end events (said), %d errors %v; voices: %s",
		fired["speak"], fired["say"], fired["said"], fired["error"], why, js[string](t, ctx, `JSON.stringify(speechSynthesis.getVoices().map(v => v.lang + ' ' + v.name).slice(0, 5))`))
	if fired["said"] > 0 && fired["say"] != fired["said"] {
		t.Errorf("the utterances ended (%d) without starting (%d): %v", fired["said"], fired["say"], ev)
	}
}

// endTalk ends the talk with the keyboard (the End button focused, Enter) and waits for the
// controls to say it is off. (clickEndAt ends it with the mouse.)
func endTalk(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	waitFor(t, ctx, "the End button", `!!document.querySelector(`+jsString(sel)+`)`, 30*time.Second)
	if !js[bool](t, ctx, `(document.querySelector(`+jsString(sel)+`).focus(), document.activeElement === document.querySelector(`+jsString(sel)+`))`) {
		t.Fatalf("%s does not take the focus", sel)
	}
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.KeyEvent("\r")); err != nil {
		t.Fatalf("press Enter on %s: %v", sel, err)
	}
	waitFor(t, ctx, "the talk ended", talkSel+`?.dataset.talkState === 'off'`, 30*time.Second)
}

// endWhileSpeaking waits until the talk's voice plays and returns where End talk is then: the centre
// of its box in the viewport, CSS pixels (read in the same look as the state, so it is the place a
// person sees while the voice plays).
func endWhileSpeaking(t *testing.T, ctx context.Context) (x, y float64) {
	t.Helper()
	where := `(() => { const tk = ` + talkSel + `; const b = tk?.querySelector('[data-testid=talk-end]'); if (tk?.dataset.talkState !== 'speaking' || !b) return '';
		const r = b.getBoundingClientRect(); return JSON.stringify({x: r.left + r.width / 2, y: r.top + r.height / 2}); })()`
	out, err := chromedp.Run(bounded(t, ctx, 100*time.Second), chromedp.Poll[string](where, chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		t.Fatalf("waiting for the voice with End talk shown: %v (events %s)", err, talkEvents(t, ctx))
	}
	var p struct{ X, Y float64 }
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("End talk's place %q: %v", out, err)
	}
	return p.X, p.Y
}

// clickEndAt waits for the voice to stop (played to its end), then ends the talk with a real mouse
// click at (x, y), where End talk was while it played (endWhileSpeaking), and waits for the talk to
// be off: a person aiming at End as the voice stops must not miss it (a CI run's click landed beside
// it when the button moved left as "Stop voice" went away, and the talk stayed open).
func clickEndAt(t *testing.T, ctx context.Context, x, y float64) {
	t.Helper()
	waitTalk(t, ctx, "the voice stopped", talkSel+`?.dataset.talkEvents.split(' ').some(e => e.startsWith('ended:')) && `+talkSel+`?.dataset.talkState !== 'speaking'`, 60*time.Second)
	// The page has laid out what the stopped voice changed (two frames).
	if _, err := chromedp.Run(bounded(t, ctx, 30*time.Second), chromedp.Evaluate[bool](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatalf("wait for the page's layout: %v", err)
	}
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.MouseClickXY(x, y)); err != nil {
		t.Fatalf("click at (%.0f, %.0f): %v", x, y, err)
	}
	if _, err := chromedp.Run(bounded(t, ctx, 40*time.Second), chromedp.Poll[bool](talkSel+`?.dataset.talkState === 'off'`, chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		now := js[string](t, ctx, `(() => { const b = `+talkSel+`?.querySelector('[data-testid=talk-end]'); if (!b) return 'gone'; const r = b.getBoundingClientRect(); return '(' + Math.round(r.left) + '…' + Math.round(r.right) + ', ' + Math.round(r.top) + '…' + Math.round(r.bottom) + ')'; })()`)
		t.Fatalf("a click at (%.0f, %.0f), where End talk was while the voice played, did not end the talk once the voice stopped: End talk is now at %s (state %s)",
			x, y, now, js[string](t, ctx, talkSel+`?.dataset.talkState ?? ''`))
	}
}

// waitingBubble is a JS expression: the visible chat's waiting-words bubble (Talk, interrupt
// "queue") that says words, or null.
func waitingBubble(words string) string {
	return `([...document.querySelectorAll('[data-testid=chat-view]:not([hidden]) [data-testid=chat-talk-waiting]')].find(e => e.textContent.includes(` + jsString(words) + `)) ?? null)`
}

// shootWaiting saves screenshots of the chat with words waiting (ATRIUM_E2E_OUT set): the desktop
// and a 390×844 phone viewport, in English and Chinese; it leaves the page as it found it (English,
// the desktop's size).
func shootWaiting(t *testing.T, ctx context.Context) {
	t.Helper()
	if os.Getenv("ATRIUM_E2E_OUT") == "" {
		return
	}
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1440, 900}, {"phone", 390, 844}} {
		if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.EmulateViewport(size.w, size.h)); err != nil {
			t.Fatalf("viewport %s: %v", size.name, err)
		}
		for _, lang := range []string{"en", "zh"} {
			setLang(t, ctx, lang)
			js[bool](t, ctx, `(() => { const l = document.querySelector('[data-testid=chat-view]:not([hidden]) ol.messages'); if (l) l.scrollTop = l.scrollHeight; return true; })()`)
			shotViewport(t, ctx, "talk-waiting-"+size.name+"-"+lang+".png")
		}
	}
	setLang(t, ctx, "en")
	if err := chromedp.Do(bounded(t, ctx, 30*time.Second), chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("viewport back: %v", err)
	}
}
