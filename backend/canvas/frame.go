package canvas

import (
	"net/http"
	"strings"
)

// FramePath is where presented html is served: FramePath + token.
const FramePath = "/canvas/frame/"

// FrameCSP is the Content-Security-Policy of a presented page
// (docs/PROTOCOL.md "Presented pages"): sandboxed into an opaque origin
// (no cookies, storage, IndexedDB of the app; no parent DOM; no top
// navigation, popups or same-origin access), inline code only, nothing
// loaded or fetched from anywhere, the gateway included, and framed only
// by the gateway's own pages ('self') and Options.FrameAncestors (the
// desktop window's origins), appended.
const FrameCSP = "sandbox allow-scripts allow-forms; default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; " +
	"style-src 'unsafe-inline'; img-src data: blob:; media-src data: blob:; font-src data:; connect-src 'none'; " +
	"form-action 'none'; base-uri 'none'; frame-src 'none'; worker-src 'none'; manifest-src 'none'; frame-ancestors 'self'"

// validSource reports whether s may be put in a CSP source list as it is:
// a scheme, host, port or wildcard of letters, digits and . - : / * only.
func validSource(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-:/*", r)) {
			return false
		}
	}
	return true
}

// evalBridge is put first in a presented page: it runs what the parent
// (the Canvas that shows the frame) posts as {atrium:"canvas.eval", id, js}
// inside this frame and answers {atrium:"canvas.eval.result", id, ok,
// value | error}, the value as JSON (at most 256 KiB).
const evalBridge = `<script>(function(){var P=window.parent;` +
	`function reply(m){try{P.postMessage(m,"*")}catch(x){}}` +
	`window.addEventListener("message",function(e){var d=e.data;if(e.source!==P||!d||d.atrium!=="canvas.eval")return;var id=d.id;` +
	`Promise.resolve().then(function(){return (0,eval)(String(d.js))}).then(function(v){var s;` +
	`try{s=JSON.stringify(v===undefined?null:v)}catch(x){s=JSON.stringify(String(v))}` +
	`if(s===undefined)s="null";` +
	`if(s.length>262144){reply({atrium:"canvas.eval.result",id:id,ok:false,error:"the value is over 256 KiB as JSON"});return}` +
	`reply({atrium:"canvas.eval.result",id:id,ok:true,value:JSON.parse(s)})},` +
	`function(err){reply({atrium:"canvas.eval.result",id:id,ok:false,error:String(err&&err.message||err)})})})})();</script>`

// FrameHandler serves the presented html pages at FramePath<token>, each
// with FrameCSP, as long as it is presented (404 after hide or another
// present). The gateway's own security headers are replaced for them.
func (s *Service) FrameHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := strings.TrimPrefix(r.URL.Path, FramePath)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		html, ok := s.frame(token)
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", s.frameCSP)
		h.Del("X-Frame-Options") // frame-ancestors 'self' says who may frame it
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write([]byte(withBridge(html)))
	})
}

// frame is the html presented under token.
func (s *Service) frame(token string) (string, bool) {
	if len(token) != 32 {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.presented {
		if p.Token == token {
			return p.HTML, true
		}
	}
	return "", false
}

// withBridge puts evalBridge after a leading doctype (so the page keeps
// its mode), else first.
func withBridge(html string) string {
	t := strings.TrimLeft(html, " \t\r\n\ufeff")
	if len(t) >= 9 && strings.EqualFold(t[:9], "<!doctype") {
		if i := strings.IndexByte(t, '>'); i >= 0 {
			return t[:i+1] + evalBridge + t[i+1:]
		}
	}
	return evalBridge + html
}
