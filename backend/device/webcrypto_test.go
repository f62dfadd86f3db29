package device_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
	"github.com/atrium-dev/atrium/backend/device"
)

// webCryptoSign is run in the page: it makes a non-extractable key pair of
// each algorithm the way the phone page will, computes the deviceId from the
// raw export, signs PAYLOAD with DEVICEID replaced, and returns what the
// device would send.
const webCryptoSign = `(async () => {
  const b64 = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf)));
  const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const out = {};
  for (const [name, gen, sign] of [
    ["ed25519", {name: "Ed25519"}, {name: "Ed25519"}],
    ["ecdsa-p256", {name: "ECDSA", namedCurve: "P-256"}, {name: "ECDSA", hash: "SHA-256"}],
  ]) {
    const kp = await crypto.subtle.generateKey(gen, false, ["sign", "verify"]);
    const raw = await crypto.subtle.exportKey("raw", kp.publicKey);
    const id = hex(await crypto.subtle.digest("SHA-256", raw));
    const msg = new TextEncoder().encode(PAYLOAD.replace("DEVICEID", id));
    out[name] = {id, publicKey: b64(raw), signature: b64(await crypto.subtle.sign(sign, kp.privateKey, msg))};
  }
  return JSON.stringify(out);
})()`

// TestWebCryptoInterop: keys and signatures made by Chromium's WebCrypto
// (the phone page's) are read and verified by this package: raw key
// exports, P1363 ECDSA signatures, the deviceId rule, the v2 payload.
func TestWebCryptoInterop(t *testing.T) {
	exe := chromiumtest.Path(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>device</title>"))
	}))
	defer srv.Close()

	signedAt := time.Now().UnixMilli()
	cl := claim()
	p := cl
	p.GatewayID, p.DeviceID, p.Nonce, p.SignedAtMs = gwA, "DEVICEID", nonce, signedAt
	msg, err := p.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	payloadJS, _ := json.Marshal(string(msg))

	ctx := chromiumtest.New(t, chromiumtest.Options{Exec: exe})
	ctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer tcancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatal(err)
	}
	js := "const PAYLOAD = " + string(payloadJS) + ";\n" + webCryptoSign
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("WebCrypto in Chromium: %v", err)
	}
	var got map[string]struct{ ID, PublicKey, Signature string }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, alg := range []string{"ed25519", "ecdsa-p256"} {
		g := got[alg]
		key, err := device.DecodePublicKey(alg, g.PublicKey)
		if err != nil {
			t.Fatalf("%s: the browser's key: %v", alg, err)
		}
		if key.ID() != g.ID {
			t.Fatalf("%s: deviceId %s here, %s in the browser", alg, key.ID(), g.ID)
		}
		sig, err := device.DecodeBase64(g.Signature)
		if err != nil {
			t.Fatal(err)
		}
		proof := device.Proof{ID: g.ID, Key: key, Signature: sig, SignedAt: signedAt, Nonce: nonce}
		w := expect()
		w.Now = time.UnixMilli(signedAt)
		if id, err := device.VerifyConnect(proof, cl, w); err != nil || id != g.ID {
			t.Fatalf("%s: the browser's signature refused: %v", alg, err)
		}
		w.GatewayID = gwB
		if _, err := device.VerifyConnect(proof, cl, w); !errors.Is(err, device.ErrBadSignature) {
			t.Fatalf("%s: the browser's signature accepted for another gateway: %v", alg, err)
		}
	}
}
