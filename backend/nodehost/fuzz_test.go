package nodehost

import (
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseGatewayURL feeds the pairing URL from a QR code (or what a person
// types as the gateway) to ParseGatewayURL, built from a fuzzed base and
// fragment fields. Properties: a refusal is ErrBadURL and its message never
// repeats the setup code; an accepted target's URL is ws(s)://host/ws, plain
// ws only on loopback, parses again to itself; the gateway id and
// fingerprint are "" or 64 lowercase hex characters.
func FuzzParseGatewayURL(f *testing.F) {
	id, fp := strings.Repeat("ab", 32), strings.Repeat("CD", 32)
	f.Add("https://127.0.0.2:18789/pair", "ABCD-EFGH", id, fp, "")
	f.Add("https://10.0.0.5:18789", "", "", "", "")
	f.Add("wss://[::1]:18789/ws", "", "", "", "")
	f.Add("http://127.0.0.1:18789/", "", "", "", "")
	f.Add("http://localhost:18789/?x=1", "", "", "", "")
	f.Add("http://10.0.0.5:18789", "SECRETCODE", "", "", "")
	f.Add("ftp://127.0.0.1/", "", "", "", "")
	f.Add("127.0.0.1:18789", "", "", "", "")
	f.Add("https://127.0.0.2:1/pair", "A", id, "zz", "&x=%zz")
	f.Add("https://user:pw@host:1/pair?q=1", "SECRET%41", "XYZ", "", ";")
	f.Fuzz(func(t *testing.T, base, code, g, fpr, extra string) {
		if len(base)+len(code)+len(g)+len(fpr)+len(extra) > 4096 || strings.Contains(base, "#") {
			return
		}
		raw := base + "#c=" + code + "&g=" + g + "&f=" + fpr + extra
		tg, err := ParseGatewayURL(raw)
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("ParseGatewayURL(%q): %v is not ErrBadURL", raw, err)
			}
			// A code as codes are (letters, digits, dashes) shows in the
			// error only if it came from another field: the same URL with
			// another code of that length gives an error holding it too.
			if len(code) >= 6 && codeLike(code) && strings.Contains(err.Error(), code) {
				_, err2 := ParseGatewayURL(base + "#c=" + strings.Repeat("Q", len(code)) + "&g=" + g + "&f=" + fpr + extra)
				if err2 == nil || !strings.Contains(err2.Error(), code) {
					t.Fatalf("error %q repeats the setup code %q", err, code)
				}
			}
			return
		}
		u, err := url.Parse(tg.URL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Path != "/ws" || u.Host == "" ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("ParseGatewayURL(%q).URL = %q (%v)", raw, tg.URL, err)
		}
		if u.Scheme == "ws" {
			ip := net.ParseIP(u.Hostname())
			if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
				t.Fatalf("plain ws to %q from %q", u.Hostname(), raw)
			}
		}
		again, err := ParseGatewayURL(tg.URL)
		if err != nil || again.URL != tg.URL {
			t.Fatalf("URL %q does not parse to itself: %+v, %v", tg.URL, again, err)
		}
		for _, h := range []string{tg.GatewayID, tg.TLSSHA256} {
			if h != "" && !isHex64(h) {
				t.Fatalf("ParseGatewayURL(%q) = %+v: %q is not 64 lowercase hex", raw, tg, h)
			}
		}
	})
}

// codeLike reports whether s is made of letters, digits and dashes only.
func codeLike(s string) bool {
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
