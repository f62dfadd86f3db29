package canvas

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/audit"
	"github.com/atrium-dev/atrium/backend/gateway"
	"github.com/atrium-dev/atrium/backend/media"
	"github.com/atrium-dev/atrium/backend/nodes"
	"github.com/atrium-dev/atrium/backend/statedb"
)

const testToken = "test-operator-token-0123456789abcdef"

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fixture is a real gateway on 127.0.0.1 with the real nodes service and
// the canvas service wired through its hooks (as backend/atrium does), a
// real state.db, media store and audit log.
type fixture struct {
	t     testing.TB
	dir   string
	db    *sql.DB
	gw    *gateway.Server
	nodes *nodes.Service
	svc   *Service
	al    *audit.Log
	media *media.Store
	url   string
	chat  *fakeChat
}

// fakeChat records the messages actions become; busy sessions refuse.
type fakeChat struct {
	mu   sync.Mutex
	busy map[string]bool
	sent []sentMsg
}

type sentMsg struct{ profile, session, message, key string }

func newFakeChat() *fakeChat { return &fakeChat{busy: map[string]bool{}} }

func (c *fakeChat) SendAction(_ context.Context, profile, session, message, key string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy[profile+"/"+session] {
		return "", ErrBusy
	}
	c.sent = append(c.sent, sentMsg{profile, session, message, key})
	return "run-" + key, nil
}

func (c *fakeChat) Busy(profile, session string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy[profile+"/"+session]
}

func (c *fakeChat) setBusy(key string, b bool) {
	c.mu.Lock()
	c.busy[key] = b
	c.mu.Unlock()
}

func (c *fakeChat) messages() []sentMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sentMsg(nil), c.sent...)
}

func newFixture(t testing.TB, dir string, o Options) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: dir, chat: newFakeChat()}
	var err error
	if f.db, err = statedb.Open(filepath.Join(dir, "state.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.db.Close() })
	if f.al, err = audit.New(audit.Options{Dir: filepath.Join(dir, "audit"), Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	if f.media, err = media.Open(filepath.Join(dir, "media"), media.Options{Log: quiet()}); err != nil {
		t.Fatal(err)
	}
	var svc *Service
	gwo := gateway.Options{Addr: "127.0.0.1:0", Token: testToken, Logger: quiet(),
		OnAuthenticated: func(ci gateway.ConnInfo) { f.nodes.Connected(ci); svc.Connected(ci) },
		OnClosed:        func(ci gateway.ConnInfo) { f.nodes.Disconnected(ci) },
	}
	if f.gw, err = gateway.New(gwo); err != nil {
		t.Fatal(err)
	}
	if f.nodes, err = nodes.New(nodes.Options{Gateway: f.gw, Audit: f.al, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	f.nodes.Register()
	o.Gateway, o.DB, o.Schemas, o.Nodes, o.Media, o.Audit, o.Logger = f.gw, f.db, schemas(t), f.nodes, f.media, f.al, quiet()
	if o.Chat == nil {
		o.Chat = f.chat
	}
	if svc, err = New(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	svc.Register()
	f.gw.HandlePages(FramePath, svc.FrameHandler())
	if err := f.gw.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- f.gw.Run(ctx) }()
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v", err)
			}
		}
	})
	f.url = "ws://" + f.gw.Addr() + "/ws"
	return f
}

func (f *fixture) dial(o gateway.ClientOptions) *gateway.Client {
	f.t.Helper()
	o.URL, o.Token = f.url, testToken
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := gateway.Dial(ctx, o)
	if err != nil {
		f.t.Fatalf("dial: %v", err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

// ui connects as the person's UI (admin).
func (f *fixture) ui() *gateway.Client {
	return f.dial(gateway.ClientOptions{Client: gateway.ClientInfo{ID: "test-ui", Mode: "ui", Platform: "linux"}})
}

// operator connects as the person, not as a UI (as the CLI does).
func (f *fixture) operator() *gateway.Client {
	return f.dial(gateway.ClientOptions{Client: gateway.ClientInfo{ID: "test-cli", Mode: "cli", Platform: "linux"}})
}

// node connects as a local node that runs the canvas commands.
func (f *fixture) node(name string) (*gateway.Client, string) {
	c := f.dial(gateway.ClientOptions{Role: gateway.RoleNode, Caps: []string{"canvas"},
		Commands: []string{"canvas.a2ui.push", "canvas.a2ui.reset", "canvas.present", "canvas.navigate", "canvas.hide", "canvas.eval", "canvas.snapshot"},
		Client:   gateway.ClientInfo{ID: "test-phone", DisplayName: name, InstanceID: "inst-" + name, Mode: "node", Platform: "linux"}})
	return c, "local:" + c.Hello().Server.ConnID
}

func call[T any](t testing.TB, c *gateway.Client, method string, params any) T {
	t.Helper()
	var out T
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Call(ctx, method, params, &out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return out
}

func callErr(c *gateway.Client, method string, params any) *gateway.Error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := c.Call(ctx, method, params, nil)
	var ge *gateway.Error
	if errors.As(err, &ge) {
		return ge
	}
	if err != nil {
		return &gateway.Error{Code: "client", Message: err.Error()}
	}
	return nil
}

// nextEvent returns the next event named name (others are skipped).
func nextEvent(t testing.TB, c *gateway.Client, name string) gateway.EventFrame {
	t.Helper()
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection closed while waiting for %s", name)
			}
			if ev.Event == name {
				return ev
			}
		case <-timeout.C:
			t.Fatalf("no %s event", name)
		}
	}
}

// waitFor polls cond until it holds (a generous bound for a loaded
// machine, not a timing assertion).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func jsonl(lines ...string) string { return strings.Join(lines, "\n") }

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
