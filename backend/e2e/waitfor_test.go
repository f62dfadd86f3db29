package e2e

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// TestWaitForAcrossANewDocument: a page that replaces its document while
// waitFor asks it (as the UI does when it drops the token from its
// address) is asked again in the new one — TestScreenshots failed once
// with "waiting for the UI to connect: Cannot find context with specified
// id" as its page did that.
func TestWaitForAcrossANewDocument(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	chromium := chromiumtest.Path(t)
	mux := http.NewServeMux()
	// /a replaces itself with /b once the poll has started; /b is ready a moment later.
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>a</title><script>setTimeout(() => location.replace('/b'), 500)</script>`))
	})
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>b</title><script>setTimeout(() => (window.ready = true), 300)</script>`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := newBrowser(t, chromium, filepath.Join(t.TempDir(), "b"))
	if err := chromedp.Do(bounded(t, ctx, 60*time.Second), chromedp.Navigate(srv.URL+"/a")); err != nil {
		t.Fatalf("open /a: %v", err)
	}
	waitFor(t, ctx, "the new document ready", `location.pathname === '/b' && window.ready === true`, time.Minute)
}
