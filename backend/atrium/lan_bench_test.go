package atrium

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/atrium-dev/atrium/backend/gwid"
	"github.com/atrium-dev/atrium/backend/paths"
)

// BenchmarkLANConnect: one new gateway connection up to the server's first
// frame (connect.challenge): a WSS connection pinning the certificate on
// the TLS listener of a 127.0.0.2 bind (TCP, full TLS 1.3 handshake with
// the ECDSA P-256 certificate, WebSocket upgrade), and the same over plain
// ws:// on 127.0.0.1 for comparison; and the pinned TLS handshake alone
// (docs/BENCHMARKS.md, "LAN").
//
//	go test -run '^$' -bench BenchmarkLANConnect ./backend/atrium
func BenchmarkLANConnect(b *testing.B) {
	dir := b.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "memory"), 0o755); err != nil {
		b.Fatal(err)
	}
	a, err := New(context.Background(), Options{Layout: paths.Layout{Home: filepath.Join(dir, "home"), Workspace: ws},
		Port: -1, Version: "bench", Getenv: func(string) string { return "" }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Bind: lanTestBind, MDNSInterfaces: []string{"atrium-none0"}})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	if err := a.Listen(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	fp, err := gwid.ParseFingerprint(a.LAN().TLSFingerprint)
	if err != nil {
		b.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(a.Gateway.Addr())
	connect := func(b *testing.B, url string, opts *websocket.DialOptions) {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		c, _, err := websocket.Dial(dctx, url, opts)
		if err != nil {
			b.Fatal(err)
		}
		_, data, err := c.Read(dctx)
		if err != nil || !strings.Contains(string(data), "connect.challenge") {
			b.Fatalf("first frame %s (%v)", data, err)
		}
		c.Close(websocket.StatusNormalClosure, "")
	}
	b.Run("wss-pinned", func(b *testing.B) {
		url := "wss://" + net.JoinHostPort(lanTestBind, port) + "/ws"
		for b.Loop() {
			// A new client each time: no TLS session to resume.
			connect(b, url, &websocket.DialOptions{HTTPClient: httpsClient(gwid.PinnedClientConfig(fp))})
		}
	})
	b.Run("tls-handshake", func(b *testing.B) {
		addr := net.JoinHostPort(lanTestBind, port)
		for b.Loop() {
			c, err := tls.Dial("tcp", addr, gwid.PinnedClientConfig(fp))
			if err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
	b.Run("ws-plain", func(b *testing.B) {
		url := "ws://" + a.Gateway.Addr() + "/ws"
		for b.Loop() {
			connect(b, url, nil)
		}
	})
}
