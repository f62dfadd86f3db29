// Package chromiumtest starts headless Chromium for tests that need a real
// browser (WebCrypto keys in package device, the SPKI pin in package gwid,
// the UI in package e2e): it finds the binary or skips the test, and starts
// one browser per call with the flags every such test wants, closed when
// the test ends. It is imported by tests only.
//
//	tab := chromiumtest.New(t, chromiumtest.Options{})
//	_, err := chromedp.Run(tab, chromedp.Navigate(url))
package chromiumtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// EnvPath names the environment variable that points at a Chromium
// binary; it is tried before Debian's /usr/bin/chromium and
// /usr/bin/chromium-browser.
const EnvPath = "ATRIUM_CHROMIUM"

// Path returns the Chromium binary to run: $ATRIUM_CHROMIUM, else
// /usr/bin/chromium, else /usr/bin/chromium-browser, the first that
// exists. It skips t in -short mode and when none exists, saying how to
// get one (Debian's chromium package, which `make test` installs).
func Path(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode (starts Chromium)")
	}
	for _, p := range []string{os.Getenv(EnvPath), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no Chromium found (install Debian's chromium, or set " + EnvPath + "; `make test` installs it)")
	return ""
}

// Options are the browser New starts.
type Options struct {
	// Exec is the Chromium binary. Default: Path(t), which may skip t.
	Exec string
	// Dir holds the browser's profile, in Dir/chromium (two browsers of
	// one test need two Dirs). Default: a new t.TempDir().
	Dir string
	// Extra options come after the defaults, so they may override one
	// (the window size, a flag set to false) or add one (a user agent,
	// --ignore-certificate-errors-spki-list). Default: none.
	Extra []chromedp.ExecAllocatorOption
}

// New starts headless Chromium and returns a chromedp context for its
// first tab. The defaults are chromedp's (headless, no first run, no
// default-browser check, …) plus: no sandbox (tests run as root), no GPU,
// no QUIC, and no background networking, component updates or sync, so
// that the browser sends traffic only where the test navigates. The
// browser is closed, and its process ended, when t ends (t.Cleanup); the
// returned context carries no deadline, which the caller sets for its own
// waits.
func New(t testing.TB, o Options) context.Context {
	t.Helper()
	if o.Exec == "" {
		o.Exec = Path(t)
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(o.Exec),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(o.Dir, "chromium")),
	)
	opts = append(opts, o.Extra...)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	return ctx
}
