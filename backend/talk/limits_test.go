package talk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/atrium-dev/atrium/backend/gateway"
)

type nopChat struct{}

func (nopChat) Send(context.Context, Message) (Sent, error) {
	return Sent{}, errors.New("not in this test")
}
func (nopChat) Cancel(string, string, string) (bool, error) { return false, nil }

// testService is a Service on a gateway of its own with o's options and,
// where o leaves them out, a Chat that sends nothing, no channels and a
// transcription server set (talk.open needs one); closed with the test.
func testService(t *testing.T, o Options) *Service {
	t.Helper()
	g, err := gateway.New(gateway.Options{Token: "talk-unit-test"})
	if err != nil {
		t.Fatal(err)
	}
	o.Gateway = g
	if o.Chat == nil {
		o.Chat = nopChat{}
	}
	if o.Accept == nil {
		o.Accept = func(context.Context, net.IP, string, Hooks) (Conn, string, error) {
			return nil, "", errors.New("no channel in this test")
		}
	}
	if o.Settings == nil {
		o.Settings = func() Settings { return Settings{STT: STTSettings{BaseURL: "http://127.0.0.1:9/v1"}} }
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestTalksPerDevice: a paired phone holds one talk however many
// connections it opens, so it cannot take every talk of the gateway and
// leave none for the person at the desktop; another device and the
// person still get theirs, and the phone gets one again once its talk ends.
func TestTalksPerDevice(t *testing.T) {
	s := testService(t, Options{})
	open := func(conn, device string) (OpenResult, error) {
		c := &gateway.Call{ConnID: conn, Method: MethodOpen, Role: gateway.RoleOperator,
			Principal: gateway.Principal{Role: gateway.RoleOperator, Device: device}}
		return s.Open(context.Background(), c, OpenParams{SessionKey: "main/", Mode: "ptt"})
	}
	unavailable := func(err error) bool {
		var ge *gateway.Error
		return errors.As(err, &ge) && ge.Code == gateway.CodeUnavailable && ge.Retryable
	}
	first, err := open("phone-1", "phone")
	if err != nil {
		t.Fatal(err)
	}
	for _, conn := range []string{"phone-2", "phone-3", "phone-4"} {
		if _, err := open(conn, "phone"); !unavailable(err) {
			t.Fatalf("the same phone's talk on connection %s: %v, want UNAVAILABLE (one talk per device)", conn, err)
		}
	}
	if _, err := open("tablet-1", "tablet"); err != nil {
		t.Fatalf("another device's talk: %v", err)
	}
	if _, err := open("desktop-1", ""); err != nil {
		t.Fatalf("the person's talk beside two devices': %v", err)
	}
	if _, err := open("desktop-2", ""); err != nil {
		t.Fatalf("the person's second window: %v", err)
	}
	if n := s.Talks(); n != 4 {
		t.Fatalf("%d talks open, want 4", n)
	}
	s.CloseTalk(&gateway.Call{ConnID: "phone-1"}, first.TalkID)
	if _, err := open("phone-2", "phone"); err != nil {
		t.Fatalf("the phone's talk after its first ended: %v", err)
	}
}

// lockedBuffer is a log sink safe for the talk's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBadStreamLogsWhy: a message that breaks the page's stream is logged
// with its type, size, an A's seq and where the utterance was (never its
// bytes), so a bad_stream seen in a log says which check it failed.
func TestBadStreamLogsWhy(t *testing.T) {
	for _, c := range []struct {
		name string
		msgs [][]byte
		want []string
	}{
		{"audio before its utterance", [][]byte{append([]byte{MsgAudio, 0, 0, 0, 0}, 0x1A, 0x45, 0xDF, 0xA3)},
			[]string{`reason=bad_stream`, `type='A'`, `seq=0`, `utterance=none`}},
		{"audio that is not WebM", [][]byte{
			JSONMessage(MsgUtterance, UtteranceStart{UtteranceID: "u1", MimeType: "audio/webm;codecs=opus"}),
			append([]byte{MsgAudio, 0, 0, 0, 0}, []byte("secret-voice")...)},
			[]string{`reason=bad_stream`, `seq=0`, `utterance_next_seq=0`, `utterance_bytes=0`}},
		{"audio out of order", [][]byte{
			JSONMessage(MsgUtterance, UtteranceStart{UtteranceID: "u1", MimeType: "audio/webm;codecs=opus"}),
			append([]byte{MsgAudio, 0, 0, 0, 0}, 0x1A, 0x45, 0xDF, 0xA3),
			append([]byte{MsgAudio, 0, 0, 0, 2}, 1, 2, 3)},
			[]string{`reason=bad_stream`, `seq=2`, `utterance_next_seq=1`, `utterance_bytes=4`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs lockedBuffer
			s := testService(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			c0 := &gateway.Call{ConnID: "desk", Method: MethodOpen, Role: gateway.RoleOperator, Principal: gateway.Principal{Role: gateway.RoleOperator}}
			res, err := s.Open(context.Background(), c0, OpenParams{SessionKey: "main/", Mode: "ptt"})
			if err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			tk := s.talks[res.TalkID]
			s.mu.Unlock()
			for _, m := range c.msgs {
				tk.message(m)
			}
			if s.Talks() != 0 {
				t.Fatalf("the talk is still open after %s", c.name)
			}
			got := logs.String()
			line := ""
			for _, l := range strings.Split(got, "\n") {
				if strings.Contains(l, `msg="talk stream refused"`) {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no \"talk stream refused\" line in the log:\n%s", got)
			}
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("the log line %q lacks %s", line, w)
				}
			}
			if strings.Contains(got, "secret-voice") {
				t.Errorf("the log shows the audio's bytes:\n%s", got)
			}
		})
	}
}

// TestSpeedCommandsAtTheBound: "faster" and "slower" step the speed within
// what the provider speaks (ElevenLabs 0.7…1.2, the others 0.5…2), clamped
// at its ends; one that changes nothing is not applied (the page and the
// spoken answer say the limit was reached), and a configured speed out of
// the provider's range starts clamped.
func TestSpeedCommandsAtTheBound(t *testing.T) {
	s := testService(t, Options{})
	type step struct {
		kind    string
		applied bool
		speed   float64
	}
	for _, c := range []struct {
		provider string
		start    float64
		steps    []step
	}{
		{ProviderElevenLabs, 1, []step{{CommandFaster, true, 1.2}, {CommandFaster, false, 1.2},
			{CommandSlower, true, 0.95}, {CommandSlower, true, 0.7}, {CommandSlower, false, 0.7}}},
		{ProviderElevenLabs, 2, []step{{CommandFaster, false, 1.2}, {CommandSlower, true, 0.95}}},
		{ProviderOpenAI, 1.75, []step{{CommandFaster, true, 2}, {CommandFaster, false, 2}}},
		{ProviderBrowser, 0.75, []step{{CommandSlower, true, 0.5}, {CommandSlower, false, 0.5}, {CommandFaster, true, 0.75}}},
	} {
		st := Settings{STT: STTSettings{BaseURL: "http://127.0.0.1:9/v1"}, TTS: TTSSettings{Provider: c.provider, BaseURL: "http://127.0.0.1:9", Speed: c.start}}.WithDefaults()
		tk := newTalk(s, "conn", "main", "s1", OpenParams{Mode: "ptt", Lang: "en"}, st)
		for i, want := range c.steps {
			vc := tk.command(want.kind, "en", fmt.Sprint("u", i))
			if vc.Applied != want.applied || math.Abs(vc.Speed-want.speed) > 1e-9 {
				t.Errorf("%s from %v, step %d (%s): applied %v speed %v, want applied %v speed %v", c.provider, c.start, i, want.kind, vc.Applied, vc.Speed, want.applied, want.speed)
			}
			tk.mu.Lock()
			said := tk.speakQ[len(tk.speakQ)-2].text
			tk.mu.Unlock()
			if want.applied == strings.Contains(said, "already") {
				t.Errorf("%s step %d: the spoken answer %q (applied %v)", c.provider, i, said, want.applied)
			}
		}
	}
}
