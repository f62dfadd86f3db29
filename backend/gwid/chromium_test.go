package gwid_test

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
	"github.com/atrium-dev/atrium/backend/gwid"
)

// TestChromiumTrustsExactlyThePinnedKey: headless Chromium given the
// certificate's SPKIBase64 in --ignore-certificate-errors-spki-list (how the
// tests will play the phone) opens pages served with this certificate and
// with its renewal (same key), and refuses a server with another key.
func TestChromiumTrustsExactlyThePinnedKey(t *testing.T) {
	exe := chromiumtest.Path(t)
	dir := keysDir(t)
	cert, err := gwid.LoadCert(gwid.Options{Dir: dir, Hosts: []string{"127.0.0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := gwid.LoadCert(gwid.Options{Dir: dir, Hosts: []string{"127.0.0.2", "box.local"}})
	if err != nil || renewed.SHA256 == cert.SHA256 {
		t.Fatalf("renewal: %v", err)
	}
	other, _ := gwid.LoadCert(gwid.Options{Dir: keysDir(t), Hosts: []string{"127.0.0.2"}})

	serve := func(c *gwid.Cert) string {
		ln, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<!doctype html><title>gateway-ok</title>"))
		}), ErrorLog: log.New(io.Discard, "", 0)}
		go srv.Serve(tls.NewListener(ln, c.ServerConfig()))
		t.Cleanup(func() { srv.Close() })
		return "https://" + ln.Addr().String() + "/"
	}

	ctx := chromiumtest.New(t, chromiumtest.Options{Exec: exe,
		Extra: []chromedp.ExecAllocatorOption{chromedp.Flag("ignore-certificate-errors-spki-list", cert.SPKIBase64())}})
	ctx, tcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer tcancel()

	title := func(url string) (string, error) {
		_, navErr := chromedp.Run(ctx, chromedp.Navigate(url))
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`))
		if err != nil {
			return "", err
		}
		return v, navErr
	}
	for _, c := range []struct {
		name string
		cert *gwid.Cert
		ok   bool
	}{{"pinned certificate", cert, true}, {"renewed certificate, same key", renewed, true}, {"another key", other, false}} {
		got, navErr := title(serve(c.cert))
		if c.ok && (navErr != nil || got != "gateway-ok") {
			t.Fatalf("%s: title %q, navigation error %v", c.name, got, navErr)
		}
		if !c.ok && (got == "gateway-ok" || navErr == nil) {
			t.Fatalf("%s: Chromium opened the page", c.name)
		}
		t.Logf("%s: title %q, navigation error %v", c.name, got, navErr)
	}
}
