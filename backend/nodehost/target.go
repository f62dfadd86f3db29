package nodehost

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/atrium-dev/atrium/backend/gwid"
)

// ErrBadURL: a gateway or pairing URL this host cannot use.
var ErrBadURL = errors.New("bad gateway URL")

// Target is a gateway to connect to as first-contact input: from the
// pairing URL, flags, or mDNS. Empty fields are unknown.
type Target struct {
	// URL is the gateway's WebSocket URL (wss://host:port/ws; ws:// only on
	// loopback).
	URL string
	// GatewayID is the gateway's id (hex).
	GatewayID string
	// TLSSHA256 is the certificate fingerprint (64 lowercase hex).
	TLSSHA256 string
	// SetupCode is the one-time code of a pairing URL.
	SetupCode string
}

// ParseGatewayURL reads what a person gives as the gateway: the pairing URL
// from the QR code (https://host:port/pair#c=CODE&g=GATEWAYID&f=FINGERPRINT),
// a base URL (https://host:port), or a WebSocket URL (wss://host:port/ws).
// Plain http/ws is accepted for loopback hosts only (anything else is
// served over TLS). Errors: ErrBadURL.
// Error messages never repeat the fragment (it holds the setup code).
func ParseGatewayURL(raw string) (Target, error) {
	shown, _, cut := strings.Cut(strings.TrimSpace(raw), "#")
	if cut {
		shown += "#…"
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return Target{}, fmt.Errorf("%w: %q (want https://host:port or the pairing URL)", ErrBadURL, shown)
	}
	var t Target
	switch u.Scheme {
	case "https", "wss":
		u.Scheme = "wss"
	case "http", "ws":
		ip := net.ParseIP(u.Hostname())
		if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return Target{}, fmt.Errorf("%w: %q: plain %s is for loopback only; a gateway on the network serves https", ErrBadURL, shown, u.Scheme)
		}
		u.Scheme = "ws"
	default:
		return Target{}, fmt.Errorf("%w: %q: scheme %q (want https)", ErrBadURL, shown, u.Scheme)
	}
	if u.Fragment != "" {
		q, err := url.ParseQuery(u.Fragment)
		if err != nil {
			return Target{}, fmt.Errorf("%w: pairing URL fragment: %v", ErrBadURL, err)
		}
		t.SetupCode, t.GatewayID = q.Get("c"), strings.ToLower(q.Get("g"))
		if f := q.Get("f"); f != "" {
			fp, err := gwid.ParseFingerprint(f)
			if err != nil {
				return Target{}, fmt.Errorf("%w: pairing URL: %v", ErrBadURL, err)
			}
			t.TLSSHA256 = fmt.Sprintf("%x", fp)
		}
	}
	if t.GatewayID != "" && !isHex64(t.GatewayID) {
		return Target{}, fmt.Errorf("%w: gateway id %q is not 64 hex characters", ErrBadURL, t.GatewayID)
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment, u.User = "/ws", "", "", "", nil
	t.URL = u.String()
	return t, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// merge fills t's empty fields from o (o is the less trusted source).
func (t Target) merge(o Target) Target {
	if t.URL == "" {
		t.URL = o.URL
	}
	if t.GatewayID == "" {
		t.GatewayID = o.GatewayID
	}
	if t.TLSSHA256 == "" {
		t.TLSSHA256 = o.TLSSHA256
	}
	if t.SetupCode == "" {
		t.SetupCode = o.SetupCode
	}
	return t
}
