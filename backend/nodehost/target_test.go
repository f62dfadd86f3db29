package nodehost

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseGatewayURL(t *testing.T) {
	id, fp := strings.Repeat("ab", 32), strings.Repeat("CD", 32)
	tg, err := ParseGatewayURL("https://127.0.0.2:18789/pair#c=ABCD-EFGH&g=" + id + "&f=" + fp)
	if err != nil {
		t.Fatal(err)
	}
	if tg.URL != "wss://127.0.0.2:18789/ws" || tg.SetupCode != "ABCD-EFGH" || tg.GatewayID != id || tg.TLSSHA256 != strings.ToLower(fp) {
		t.Fatalf("%+v", tg)
	}
	for raw, want := range map[string]string{
		"https://10.0.0.5:18789":      "wss://10.0.0.5:18789/ws",
		"wss://[::1]:18789/ws":        "wss://[::1]:18789/ws",
		"http://127.0.0.1:18789/":     "ws://127.0.0.1:18789/ws",
		"http://localhost:18789/?x=1": "ws://localhost:18789/ws",
	} {
		tg, err := ParseGatewayURL(raw)
		if err != nil || tg.URL != want {
			t.Errorf("%s: %+v %v, want %s", raw, tg, err, want)
		}
	}
	for _, bad := range []string{
		"http://10.0.0.5:18789", // plain HTTP off loopback
		"ftp://127.0.0.1/",
		"127.0.0.1:18789",
		"https://127.0.0.2:1/pair#g=xyz",                      // bad id
		"https://127.0.0.2:1/pair#f=1234",                     // bad fingerprint
		"https://127.0.0.2:1/pair#c=A&g=" + id + "&f=" + "zz", // bad fingerprint
	} {
		if _, err := ParseGatewayURL(bad); !errors.Is(err, ErrBadURL) {
			t.Errorf("%s: %v, want ErrBadURL", bad, err)
		}
	}
	// The setup code in a fragment is never repeated in an error.
	if _, err := ParseGatewayURL("http://10.0.0.5:1/pair#c=SECRETCODE"); err == nil || strings.Contains(err.Error(), "SECRETCODE") {
		t.Errorf("error %v repeats the setup code", err)
	}
}

func TestBackoff(t *testing.T) {
	minD, maxD := 500*time.Millisecond, 30*time.Second
	prevHi := time.Duration(0)
	for n := 0; n < 20; n++ {
		lo, hi := Backoff(n, minD, maxD, 0), Backoff(n, minD, maxD, 0.999999)
		if lo > hi || hi > maxD || lo < minD/2 {
			t.Fatalf("attempt %d: range [%v, %v]", n, lo, hi)
		}
		if hi < prevHi {
			t.Fatalf("attempt %d: ceiling fell from %v to %v", n, prevHi, hi)
		}
		prevHi = hi
	}
	if got := Backoff(0, minD, maxD, 0); got != minD/2 {
		t.Fatalf("first delay floor %v", got)
	}
	if got := Backoff(100, minD, maxD, 0); got != maxD/2 {
		t.Fatalf("capped floor %v, want %v", got, maxD/2)
	}
	if a, b := Backoff(3, minD, maxD, 0.1), Backoff(3, minD, maxD, 0.9); a == b {
		t.Fatal("no jitter")
	}
}
