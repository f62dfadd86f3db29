package gwid_test

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/gwid"
)

// TestChromiumTrustsExactlyThePinnedKey: headless Chromium given the
// certificate's SPKIBase64 in --ignore-certificate-errors-spki-list (how the
// tests will play the phone) opens pages served with this certificate and
// with its renewal (same key), and refuses a server with another key.
func TestChromiumTrustsExactlyThePinnedKey(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode (starts Chromium)")
	}
	exe := ""
	for _, p := range []string{os.Getenv("ATRIUM_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); p != "" && err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Skip("no Chromium found (install Debian's chromium, or set ATRIUM_CHROMIUM)")
	}
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

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", cert.SPKIBase64()),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium")))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
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
