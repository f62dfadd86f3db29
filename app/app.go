// Package app is the Wails v2 desktop shell and nothing else: it opens a
// native window that shows the embedded UI, and hands the UI the address and
// token of the in-process gateway. All logic lives in backend/; the UI talks
// to it over the gateway protocol (SPEC §1, §3), never through Wails bindings.
package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
	"github.com/wailsapp/wails/v2/pkg/runtime"
)

// Options configures the window.
type Options struct {
	Title  string // default "Atrium"
	UI     fs.FS  // the built frontend (index.html at its root); required
	WSURL  string // gateway WebSocket URL, e.g. ws://127.0.0.1:18789/ws; required
	Token  string // local operator token handed to the UI; required
	Width  int    // default 1280
	Height int    // default 820
	Logger *slog.Logger
	// Focus brings the window to the front each time it receives (a
	// second start of the app asked for it); nil: never.
	Focus <-chan struct{}
	// OnPicker, when set, is handed the window's native folder dialog once
	// the window is up (title in; the folder chosen out, "" when
	// cancelled): the first start's "another folder" (setup.pick).
	OnPicker func(pick func(title string) (string, error))
	// Languages are the system's languages (BCP 47 tags, preferred
	// first), handed to the UI, which picks its language from them: the
	// web view's own navigator.languages does not follow the system's.
	Languages []string
}

// Run opens the window and blocks until it is closed or ctx is done.
func Run(ctx context.Context, opts Options) error {
	if opts.UI == nil || opts.WSURL == "" || opts.Token == "" {
		return fmt.Errorf("desktop window: UI, WSURL and Token are required")
	}
	if opts.Title == "" {
		opts.Title = "Atrium"
	}
	if opts.Width == 0 {
		opts.Width = 1280
	}
	if opts.Height == 0 {
		opts.Height = 820
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	boot, err := bootScript(opts.WSURL, opts.Token, opts.Languages)
	if err != nil {
		return err
	}
	// When ctx ends (a signal, the gateway failing), close the window too.
	stopQuit := func() bool { return false }
	defer func() { stopQuit() }()
	return wails.Run(&options.App{
		Title:     opts.Title,
		Width:     opts.Width,
		Height:    opts.Height,
		MinWidth:  720,
		MinHeight: 480,
		AssetServer: &assetserver.Options{
			Assets:     opts.UI,
			Middleware: injectBoot(boot),
		},
		OnStartup: func(wctx context.Context) {
			stopQuit = context.AfterFunc(ctx, func() { runtime.Quit(wctx) })
			if opts.Focus != nil {
				go raise(wctx, opts.Focus)
			}
			if opts.OnPicker != nil {
				opts.OnPicker(func(title string) (string, error) {
					home, _ := os.UserHomeDir()
					return runtime.OpenDirectoryDialog(wctx, runtime.OpenDialogOptions{Title: title, DefaultDirectory: home, CanCreateDirectories: true})
				})
			}
		},
		Linux: &linux.Options{ProgramName: "atrium"},
	})
}

// bootScript is the <script> that gives the UI its connection settings
// and the system's languages (window.__ATRIUM__, read by
// frontend/src/lib/settings.ts and i18n.svelte.ts).
func bootScript(wsURL, token string, languages []string) ([]byte, error) {
	cfg, err := json.Marshal(map[string]any{"wsUrl": wsURL, "token": token, "languages": languages})
	if err != nil {
		return nil, fmt.Errorf("encode boot config: %w", err)
	}
	return []byte("<script>window.__ATRIUM__=" + string(cfg) + ";</script>"), nil
}

// injectBoot inserts boot right after <head> in index.html responses and
// leaves every other asset alone.
func injectBoot(boot []byte) assetserver.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/" && r.URL.Path != "/index.html" {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if i := bytes.Index(body, []byte("<head>")); i >= 0 {
				i += len("<head>")
				body = append(body[:i:i], append(append([]byte{}, boot...), body[i:]...)...)
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
		})
	}
}

// raise shows, unminimises and raises the window on every value of focus
// until the window's context ends.
func raise(wctx context.Context, focus <-chan struct{}) {
	for {
		select {
		case <-wctx.Done():
			return
		case <-focus:
			runtime.WindowUnminimise(wctx)
			runtime.WindowShow(wctx)
			// Some window managers only raise a window that asks to be on top.
			runtime.WindowSetAlwaysOnTop(wctx, true)
			runtime.WindowSetAlwaysOnTop(wctx, false)
		}
	}
}
