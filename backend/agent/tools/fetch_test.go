package tools

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/agent"
	"github.com/atrium-dev/atrium/backend/audit"
)

type fetchOut struct {
	URL       string `json:"url"`
	Status    int    `json:"status"`
	Text      string `json:"text"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated"`
	Binary    bool   `json:"binary"`
}

func TestWebFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, "hello from the web, UA="+r.UserAgent())
		case "/big":
			fmt.Fprint(w, strings.Repeat("é", 3000)) // 6000 bytes
		case "/slow":
			// Only the fetch's timeout ends it: the minute is a bound
			// for a broken timeout, which then answers "late".
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
				fmt.Fprint(w, "late")
			}
		case "/redirect":
			http.Redirect(w, r, "/page", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	t.Run("private addresses refused by default", func(t *testing.T) {
		e := newTestEnv(t, Options{Fetch: &FetchOptions{}})
		res := e.call(WebFetch, map[string]any{"url": srv.URL + "/page"})
		if res.Status != agent.StatusDenied || !strings.Contains(res.Error, "local or private") {
			t.Fatalf("loopback: %+v", res)
		}
		if a := e.newest(); a.Result != audit.Denied || a.Operation != WebFetch {
			t.Errorf("audit %+v", a)
		}
	})
	e := newTestEnv(t, Options{Fetch: &FetchOptions{AllowPrivate: true, MaxBytes: 1001, Timeout: 500 * time.Millisecond}})
	res := e.call(WebFetch, map[string]any{"url": srv.URL + "/redirect"})
	if o := dataOf[fetchOut](t, res); res.Status != agent.StatusOK || o.Status != 200 || !strings.Contains(o.Text, "hello from the web, UA="+FetchUserAgent) ||
		o.URL != srv.URL+"/page" {
		t.Fatalf("page: %+v", res)
	}
	res = e.call(WebFetch, map[string]any{"url": srv.URL + "/big"})
	if o := dataOf[fetchOut](t, res); !o.Truncated || o.Bytes != 1001 || len(o.Text) != 1000 || strings.ContainsRune(o.Text, '\uFFFD') {
		t.Fatalf("big: truncated %v bytes %d text %d", o.Truncated, o.Bytes, len(o.Text))
	}
	if o := dataOf[fetchOut](t, e.call(WebFetch, map[string]any{"url": srv.URL + "/big", "maxBytes": 10})); o.Bytes != 10 {
		t.Errorf("maxBytes: %+v", o)
	}
	if o := dataOf[fetchOut](t, e.call(WebFetch, map[string]any{"url": srv.URL + "/png"})); !o.Binary || o.Text != "" {
		t.Errorf("png: %+v", o)
	}
	if res := e.call(WebFetch, map[string]any{"url": srv.URL + "/slow"}); res.Status != agent.StatusError {
		t.Errorf("slow: %+v, want the 500 ms timeout's error", res)
	}
	if res := e.call(WebFetch, map[string]any{"url": srv.URL + "/missing"}); res.Status != agent.StatusError || !strings.Contains(res.Error, "HTTP 404") {
		t.Errorf("404: %+v", res)
	}
	for _, u := range []string{"ftp://example.com/x", "file:///etc/passwd", "/relative", "http://user:pw@" + srv.Listener.Addr().String() + "/page"} {
		if res := e.call(WebFetch, map[string]any{"url": u}); res.Status != agent.StatusDenied {
			t.Errorf("%s: %+v", u, res)
		}
	}
	if res := e.call(WebFetch, map[string]any{"url": srv.URL + "/to-file"}); res.Status != agent.StatusDenied {
		t.Errorf("redirect to file: %+v", res)
	}
}
