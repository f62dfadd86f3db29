package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeDisplay makes displayUsable succeed: a Wayland socket of the test's own.
func fakeDisplay(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "wl.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix sockets here: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return sock
}

// TestSecondStartFocusesWindow: a second start of the desktop app on the
// same state dir opens no window and no app; it asks the running app to
// bring its window to the front, and exits 0. The log file is the running
// app's alone (the second start says what it did on stderr).
func TestSecondStartFocusesWindow(t *testing.T) {
	home, ws := workspace(t)
	env := map[string]string{"WAYLAND_DISPLAY": fakeDisplay(t)}
	getenv := func(k string) string { return env[k] }
	args := []string{"--home", home, "--workspace", ws, "--port", "0"}

	opened := make(chan struct{})
	focused := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan int, 1)
	go func() {
		first <- Main(args, Options{Version: "test", Context: ctx, Stdout: &bytes.Buffer{}, Stderr: &syncWriter{w: &bytes.Buffer{}}, Getenv: getenv,
			Desktop: func(ctx context.Context, o DesktopOptions) error {
				close(opened)
				for {
					select {
					case <-o.Focus:
						focused <- struct{}{}
					case <-ctx.Done():
						return nil
					}
				}
			}})
	}()
	select {
	case <-opened:
	case code := <-first:
		t.Fatalf("the first app exited with %d before opening its window", code)
	case <-time.After(60 * time.Second):
		t.Fatal("the first app opened no window within 60 s")
	}

	var errb bytes.Buffer
	code := Main(args, Options{Version: "test", Stdout: &bytes.Buffer{}, Stderr: &errb, Getenv: getenv,
		Desktop: func(ctx context.Context, o DesktopOptions) error {
			t.Error("the second start opened a window")
			return nil
		},
		Fatal: func(title, msg string) { t.Errorf("the second start showed an error: %s", msg) },
	})
	if code != 0 {
		t.Fatalf("second start: exit %d, stderr:\n%s", code, errb.String())
	}

	select {
	case <-focused:
	case <-time.After(30 * time.Second):
		t.Fatal("the running window was not asked to come to the front")
	}
	cancel()
	if code := <-first; code != 0 {
		t.Fatalf("first app: exit %d", code)
	}
	logText, err := os.ReadFile(filepath.Join(home, "logs", LogFileName))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "its window was brought to the front") {
		t.Errorf("the second start did not say what it did:\n%s", errb.String())
	}
	for _, want := range []string{"gateway listening", "window brought to the front: the app was started again"} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("the log file lacks %q:\n%s", want, logText)
		}
	}
}

// TestDesktopStartFailureShowsDialog: an app that cannot start tells the
// person in a dialog (Options.Fatal), not only on a terminal they may not
// have, and logs it to $ATRIUM_HOME/logs.
func TestDesktopStartFailureShowsDialog(t *testing.T) {
	home, _ := workspace(t)
	missing := filepath.Join(t.TempDir(), "no-such-workspace")
	env := map[string]string{"WAYLAND_DISPLAY": fakeDisplay(t)}
	var shown []string
	code := Main([]string{"--home", home, "--workspace", missing}, Options{Version: "test", Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{},
		Getenv:  func(k string) string { return env[k] },
		Desktop: func(ctx context.Context, o DesktopOptions) error { t.Error("a window opened"); return nil },
		Fatal:   func(title, msg string) { shown = append(shown, title+": "+msg) },
	})
	if code != 1 || len(shown) != 1 || !strings.Contains(shown[0], missing) {
		t.Fatalf("exit %d, dialogs %q", code, shown)
	}
	if logText, _ := os.ReadFile(filepath.Join(home, "logs", LogFileName)); !strings.Contains(string(logText), "app failed") {
		t.Fatalf("the failure is not in the log file:\n%s", logText)
	}
}
