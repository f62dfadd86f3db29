package chromiumtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/atrium-dev/atrium/backend/chromiumtest"
)

// TestNew: the browser opens a page of a local server, the extra options
// reach it (a user agent), its profile is in Dir/chromium, and two
// browsers of one test run side by side.
func TestNew(t *testing.T) {
	exe := chromiumtest.Path(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>chromiumtest-ok</title>"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	tabs := []context.Context{
		chromiumtest.New(t, chromiumtest.Options{Exec: exe, Dir: dir, Extra: []chromedp.ExecAllocatorOption{chromedp.UserAgent("atrium-chromiumtest/1")}}),
		chromiumtest.New(t, chromiumtest.Options{}),
	}
	for i, tab := range tabs {
		ctx, cancel := context.WithTimeout(tab, 2*time.Minute)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL)); err != nil {
			t.Fatalf("browser %d: navigate: %v", i, err)
		}
		title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.title`))
		if err != nil || title != "chromiumtest-ok" {
			t.Fatalf("browser %d: title %q, %v", i, title, err)
		}
		if i == 0 {
			ua, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.userAgent`))
			if err != nil || ua != "atrium-chromiumtest/1" {
				t.Fatalf("the extra option did not reach the browser: user agent %q, %v", ua, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "chromium")); err != nil {
		t.Fatalf("the profile is not in Dir/chromium: %v", err)
	}
}

// TestPathFromEnv: $ATRIUM_CHROMIUM comes first.
func TestPathFromEnv(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "my-chromium")
	if err := os.WriteFile(exe, nil, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(chromiumtest.EnvPath, exe)
	if got := chromiumtest.Path(t); got != exe {
		t.Fatalf("Path = %q, want $%s = %q", got, chromiumtest.EnvPath, exe)
	}
}
