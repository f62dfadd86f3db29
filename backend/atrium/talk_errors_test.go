package atrium

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/talk"
)

// TestTalkServerWordsStayInTheLog (issue 27): a transcription server's
// failure reaches the page as a fixed code and sentence (errorCode
// TALK_STT_FAILED), never as the server's words, which may echo the request
// or the key; talk.test says which URL answered what status (code, status)
// for both servers, again without their words. The gateway's log has the
// server's words for whoever runs it, with the configured API keys
// replaced by [redacted].
func TestTalkServerWordsStayInTheLog(t *testing.T) {
	const (
		sttKey = "k-stt-secret-4471"
		ttsKey = "k-tts-secret-9913"
		words  = "model file missing at /srv/private/whisper"
	)
	// Both servers refuse, saying where their files are and echoing the key they were sent.
	refuse := func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		http.Error(w, `{"error":"`+words+`","key":"`+key+`"}`, http.StatusServiceUnavailable)
	}
	stt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		refuse(w, r)
	}))
	t.Cleanup(stt.Close)
	tts := httptest.NewServer(http.HandlerFunc(refuse))
	t.Cleanup(tts.Close)
	logs := &syncBuffer{}
	model := newScriptedModel(t, nil, nil)
	env := map[string]string{"OPENAI_BASE_URL": model.BaseURL(), "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}
	a, _ := startAppWith(t, func(k string) string { return env[k] }, func(_ string, o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := gwDial(ctx, t, a, gateway.RoleOperator, "talk-errors")
	ev := recordEvents(admin)
	must(t, admin.Call(ctx, "config.patch", map[string]any{"patch": map[string]any{"talk": map[string]any{
		"stt": map[string]any{"baseUrl": stt.URL, "apiKey": sttKey},
		"tts": map[string]any{"provider": "openai", "baseUrl": tts.URL, "apiKey": ttsKey},
	}}}, nil))
	leaks := func(what, s string) {
		t.Helper()
		for _, secret := range []string{words, "/srv/private", sttKey, ttsKey} {
			if strings.Contains(s, secret) {
				t.Errorf("%s shows the server's words or a key (%q): %s", what, secret, s)
			}
		}
	}

	var open talk.OpenResult
	must(t, admin.Call(ctx, "talk.open", map[string]any{"sessionKey": "main/", "mode": "continuous"}, &open))
	peer := dialTalk(ctx, t, admin, open.TalkID)
	peer.send(t, talk.JSONMessage(talk.MsgUtterance, talk.UtteranceStart{UtteranceID: "u1", MimeType: "audio/webm;codecs=opus", Send: true}))
	peer.send(t, talk.AudioMessage(0, []byte("\x1a\x45\xdf\xa3 not really opus")))
	peer.send(t, talk.JSONMessage(talk.MsgEnd, talk.UtteranceEnd{UtteranceID: "u1", DurationMs: 900}))
	raw := ev.wait(ctx, t, "talk.transcript", `"utteranceId":"u1"`)
	var tr talk.TranscriptEvent
	must(t, json.Unmarshal(raw, &tr))
	if tr.ErrorCode != talk.CodeSTTFailed || tr.Error != talk.ErrorText(talk.CodeSTTFailed) || tr.Text != "" || tr.Sent {
		t.Errorf("the failed transcription's event: %s, want errorCode %s and its fixed sentence", raw, talk.CodeSTTFailed)
	}
	leaks("talk.transcript", string(raw))

	for _, c := range []struct{ kind, code string }{{"stt", talk.CodeSTTFailed}, {"tts", talk.CodeTTSFailed}} {
		var res talk.TestResult
		must(t, admin.Call(ctx, "talk.test", map[string]any{"kind": c.kind}, &res))
		if res.OK || res.Code != c.code || res.Status != http.StatusServiceUnavailable || !strings.Contains(res.Detail, "HTTP 503") || res.Why != talk.WhyStatus || res.URL == "" {
			t.Errorf("talk.test %s: %+v, want code %s, status 503 said in the detail", c.kind, res, c.code)
		}
		b, _ := json.Marshal(res)
		leaks("talk.test "+c.kind, string(b))
	}

	// The log has the servers' words (whoever runs the gateway may read them), never a key.
	log := logs.String()
	if strings.Count(log, words) < 3 {
		t.Errorf("the log does not say what the servers answered (3 failures):\n%s", log)
	}
	for _, key := range []string{sttKey, ttsKey} {
		if strings.Contains(log, key) {
			t.Errorf("the log shows an API key:\n%s", log)
		}
	}
}
