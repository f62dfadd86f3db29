package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestInjectBoot(t *testing.T) {
	boot, err := bootScript("ws://127.0.0.1:1/ws", `to"ken`, []string{"zh-CN", "en"})
	if err != nil {
		t.Fatal(err)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><head><title>x</title></head></html>"))
	})
	h := injectBoot(boot)(next)
	for _, tc := range []struct {
		path string
		want bool
	}{{"/", true}, {"/index.html", true}, {"/assets/app.js", false}} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		got := strings.Contains(rec.Body.String(), `window.__ATRIUM__={"languages":["zh-CN","en"],"token":"to\"ken","wsUrl":"ws://127.0.0.1:1/ws"}`)
		if got != tc.want {
			t.Errorf("%s: injected=%v want %v; body %q", tc.path, got, tc.want, rec.Body.String())
		}
		if tc.want && !strings.HasPrefix(rec.Body.String(), "<html><head><script>") {
			t.Errorf("%s: boot script not right after <head>: %q", tc.path, rec.Body.String())
		}
	}
}
