package talk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCutter: sentences come out as the deltas complete them (en and zh),
// the first one early at a clause, numbers and Markdown marks survive as
// speech, the rest on Flush.
func TestCutter(t *testing.T) {
	var c Cutter
	var got []string
	for _, d := range []string{"Well, let me think about it, ", "really. It costs 3.5 dollars", " today! **Bold** ", "next?", " 你好，世界。我们", "走吧！最后"} {
		got = append(got, c.Add(d)...)
	}
	got = append(got, c.Flush()...)
	want := []string{"Well, let me think about it,", "really.", "It costs 3.5 dollars today!", "Bold next?", "你好，世界。", "我们走吧！", "最后"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	var z Cutter
	if got := z.Add("好的，我们开始吧，第一步是准备材料。"); !slices.Equal(got, []string{"好的，我们开始吧，第一步是准备材料。"}) {
		t.Fatalf("a short first clause is not cut: %q", got)
	}
	var long Cutter
	out := long.Add(strings.Repeat("word ", 200))
	if len(out) == 0 || len([]rune(out[0])) > MaxRunes {
		t.Fatalf("a sentence without an end is cut at MaxRunes: %d pieces", len(out))
	}
	var dots Cutter
	if got := append(dots.Add("... ** !"), dots.Flush()...); len(got) != 0 {
		t.Fatalf("punctuation alone is not spoken: %q", got)
	}
}

// TestParseCommand: the commands in English and Chinese, with politeness
// and punctuation; ordinary sentences that contain the words are not.
func TestParseCommand(t *testing.T) {
	for text, want := range map[string]string{
		"Speak slower.": CommandSlower, "please speak faster!": CommandFaster, "Change the voice": CommandVoice,
		"说慢一点。": CommandSlower, "请说快一点": CommandFaster, "换个声音吧": CommandVoice, "换个声音！": CommandVoice,
		"Can you speak slower about the budget?": "", "I want to change the voice of the report": "", "今天天气怎么样": "",
	} {
		if got := ParseCommand(text); got != want {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
	}
}

// sttServer is a scripted transcription server: it answers verbose_json
// with text and language, or refuses verbose_json with 400 when
// noVerbose, and records what it got.
func sttServer(t *testing.T, noVerbose bool, got chan<- map[string]string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if err := r.ParseMultipartForm(4 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f, fh, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		data, _ := io.ReadAll(f)
		rec := map[string]string{"file": string(data), "name": fh.Filename, "type": fh.Header.Get("Content-Type"), "auth": r.Header.Get("Authorization")}
		for _, k := range []string{"model", "language", "response_format"} {
			rec[k] = r.FormValue(k)
		}
		got <- rec
		if rec["response_format"] == "verbose_json" {
			if noVerbose {
				http.Error(w, `{"error":"response_format verbose_json is not supported"}`, http.StatusBadRequest)
				return
			}
			_, _ = io.WriteString(w, `{"text":" hello there ","language":"english","duration":1.2}`)
			return
		}
		_, _ = io.WriteString(w, `{"text":"你好"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSTTClient: the multipart request (file, model, language,
// verbose_json), the server's language mapped to ISO 639-1, the json
// fallback with the language detected from the text, a server's error and
// an unreachable one said in a sentence with the URL.
func TestSTTClient(t *testing.T) {
	got := make(chan map[string]string, 4)
	ctx := context.Background()
	srv := sttServer(t, false, got)
	c := STTClient{BaseURL: srv.URL + "/v1", Model: "whisper-1", APIKey: "k"}
	tr, err := c.Transcribe(ctx, []byte("\x1a\x45\xdf\xa3audio"), "utterance.webm", "audio/webm", "en")
	if err != nil || tr != (Transcript{Text: "hello there", Lang: "en"}) {
		t.Fatalf("%+v %v", tr, err)
	}
	rec := <-got
	if rec["file"] != "\x1a\x45\xdf\xa3audio" || rec["name"] != "utterance.webm" || rec["type"] != "audio/webm" || rec["model"] != "whisper-1" ||
		rec["language"] != "en" || rec["response_format"] != "verbose_json" || rec["auth"] != "Bearer k" {
		t.Fatalf("request %q", rec)
	}
	plain := STTClient{BaseURL: sttServer(t, true, got).URL, Model: "m"}
	tr, err = plain.Transcribe(ctx, []byte("OggS"), "u.ogg", "audio/ogg", "")
	if err != nil || tr != (Transcript{Text: "你好", Lang: "zh"}) {
		t.Fatalf("json fallback: %+v %v", tr, err)
	}
	if a, b := <-got, <-got; a["response_format"] != "verbose_json" || b["response_format"] != "json" || b["language"] != "" {
		t.Fatalf("fallback requests %q then %q", a, b)
	}
	down := STTClient{BaseURL: closedURL(t), Model: "m"}
	if _, err := down.Transcribe(ctx, []byte("x"), "u.webm", "audio/webm", ""); !errors.Is(err, ErrSTT) || !strings.Contains(err.Error(), "could not be reached") {
		t.Fatalf("a closed port: %v", err)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no model", http.StatusInternalServerError)
	}))
	defer bad.Close()
	if _, err := (STTClient{BaseURL: bad.URL}).Transcribe(ctx, []byte("x"), "u.webm", "audio/webm", ""); !errors.Is(err, ErrSTT) ||
		!strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), bad.URL+"/v1/audio/transcriptions") {
		t.Fatalf("a 500: %v", err)
	}
}

// closedURL is the URL of a port that was just closed on 127.0.0.1.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestSpeechClients: OpenAI's /v1/audio/speech body and ElevenLabs'
// path, xi-api-key and voice_settings; the audio is read as it arrives
// (the first bytes are read while the server still holds the rest); an
// answer that is not audio is refused.
func TestSpeechClients(t *testing.T) {
	release := make(chan struct{})
	reqs := make(chan map[string]any, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		body["path"], body["xi"], body["auth"] = r.URL.Path, r.Header.Get("xi-api-key"), r.Header.Get("Authorization")
		reqs <- body
		if body["input"] == "not audio" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"error":"x"}`)
			return
		}
		w.Header().Set("Content-Type", "audio/mpeg")
		_, _ = w.Write([]byte("ID3first"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = w.Write([]byte("rest"))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	oa := OpenAISpeech{BaseURL: srv.URL, Model: "tts-1", Format: "mp3", APIKey: "sk"}
	a, err := oa.Synthesize(ctx, "Hello.", Voice{Name: "nova", Speed: 1.25})
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 8)
	if _, err := io.ReadFull(a.Body, first); err != nil || string(first) != "ID3first" || a.MimeType != "audio/mpeg" {
		t.Fatalf("first bytes %q %v %q", first, err, a.MimeType)
	}
	close(release)
	rest, _ := io.ReadAll(a.Body)
	a.Body.Close()
	if string(rest) != "rest" {
		t.Fatalf("rest %q", rest)
	}
	if r := <-reqs; r["path"] != "/v1/audio/speech" || r["model"] != "tts-1" || r["input"] != "Hello." || r["voice"] != "nova" ||
		r["speed"] != 1.25 || r["response_format"] != "mp3" || r["auth"] != "Bearer sk" {
		t.Fatalf("openai request %v", r)
	}

	el := ElevenLabs{BaseURL: srv.URL, ModelID: "eleven_multilingual_v2", APIKey: "xi-key", Stability: 0.3}
	a, err = el.Synthesize(ctx, "你好。", Voice{Name: "voice1", Speed: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(a.Body)
	a.Body.Close()
	r := <-reqs
	vs, _ := r["voice_settings"].(map[string]any)
	if r["path"] != "/v1/text-to-speech/voice1/stream" || r["xi"] != "xi-key" || r["text"] != "你好。" || r["model_id"] != "eleven_multilingual_v2" ||
		vs["stability"] != 0.3 || vs["speed"] != 1.2 {
		t.Fatalf("elevenlabs request %v", r)
	}
	if _, err := oa.Synthesize(ctx, "not audio", Voice{Name: "nova", Speed: 1}); !errors.Is(err, ErrTTS) || !strings.Contains(err.Error(), "not audio") {
		t.Fatalf("a JSON answer: %v", err)
	}
	<-reqs
}

// TestSettings: defaults, and NextVoice steps through a provider's list.
func TestSettings(t *testing.T) {
	s := Settings{TTS: TTSSettings{Provider: ProviderOpenAI, BaseURL: "http://127.0.0.1:1"}}.WithDefaults()
	if s.STT.Model != DefaultSTTModel || s.TTS.Voice != "alloy" || s.TTS.Speed != 1 || s.Interrupt != InterruptCancel || s.Continuous.SilenceMs != 800 {
		t.Fatalf("%+v", s)
	}
	if (Settings{}).WithDefaults().TTS.Provider != ProviderBrowser {
		t.Fatal("no provider is the browser")
	}
	if NextVoice(ProviderOpenAI, "alloy") != "echo" || NextVoice(ProviderOpenAI, "shimmer") != "alloy" || NextVoice(ProviderOpenAI, "af_heart") != "alloy" {
		t.Fatal("NextVoice")
	}
	if err := (Settings{TTS: TTSSettings{Provider: ProviderOpenAI}}).Validate(); !errors.Is(err, ErrSettings) {
		t.Fatalf("openai without baseUrl: %v", err)
	}
}

// TestFrames: an S message round-trips; the magic of WebM and Ogg.
func TestFrames(t *testing.T) {
	h := SpeechHeader{ReplyID: "r", Seq: 2, Part: 1, Last: true, MimeType: "audio/mpeg", Text: "Hi."}
	got, audio, ok := ParseSpeech(SpeechMessage(h, []byte("mp3")))
	if !ok || got != h || string(audio) != "mp3" {
		t.Fatalf("%+v %q %v", got, audio, ok)
	}
	if _, _, ok := ParseSpeech([]byte{MsgSpeech, 0, 0, 1, 0}); ok {
		t.Fatal("a header longer than the message")
	}
	if !containerMagic("audio/webm;codecs=opus", []byte{0x1a, 0x45, 0xdf, 0xa3, 1}) || containerMagic("audio/webm", []byte("OggS")) ||
		!containerMagic("audio/ogg;codecs=opus", []byte("OggS\x00")) {
		t.Fatal("containerMagic")
	}
}
