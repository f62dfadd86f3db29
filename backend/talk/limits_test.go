package talk

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/atrium-dev/atrium/backend/gateway"
)

type nopChat struct{}

func (nopChat) Send(context.Context, Message) (Sent, error) {
	return Sent{}, errors.New("not in this test")
}
func (nopChat) Cancel(string, string, string) (bool, error) { return false, nil }

// TestTalksPerDevice: a paired phone holds one talk however many
// connections it opens, so it cannot take every talk of the gateway and
// leave none for the person at the desktop; another device and the
// person still get theirs, and the phone gets one again once its talk ends.
func TestTalksPerDevice(t *testing.T) {
	g, err := gateway.New(gateway.Options{Token: "talk-limits-test"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Gateway: g, Chat: nopChat{},
		Accept: func(context.Context, net.IP, string, Hooks) (Conn, string, error) {
			return nil, "", errors.New("no channel in this test")
		},
		Settings: func() Settings { return Settings{STT: STTSettings{BaseURL: "http://127.0.0.1:9/v1"}} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
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
