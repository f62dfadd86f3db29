// Package xvfbtest is a test helper: it starts Xvfb (Debian xvfb, which
// `make deps` installs) with the screens a test asks for on a display
// number Xvfb picks itself (-displayfd), and stops it when the test ends.
// Without Xvfb the test is skipped with a message.
package xvfbtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Start runs Xvfb with one X screen per size ("640x480"; depth 24) and
// returns its display name (":N"). It fails the test when Xvfb does not
// say its display within 60 s.
func Start(t testing.TB, sizes ...string) string {
	t.Helper()
	exe, err := exec.LookPath("Xvfb")
	if err != nil {
		t.Skip("Xvfb not installed (Debian xvfb; `make deps` installs it)")
	}
	if len(sizes) == 0 {
		sizes = []string{"640x480"}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-displayfd", "3", "-nolisten", "tcp", "-noreset"}
	for i, s := range sizes {
		args = append(args, "-screen", fmt.Sprint(i), s+"x24")
	}
	cmd := exec.Command(exe, args...)
	cmd.ExtraFiles = []*os.File{w}
	stderr := &lockedBuf{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Xvfb: %v", err)
	}
	w.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("Xvfb did not exit after SIGKILL")
		}
	})
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		r.Close()
		got <- strings.TrimSpace(line)
	}()
	select {
	case n := <-got:
		if n == "" {
			t.Fatalf("Xvfb said no display number; its stderr: %s", stderr.String())
		}
		return ":" + n
	case <-time.After(60 * time.Second):
		t.Fatalf("Xvfb did not say its display within 60 s")
	}
	return ""
}

// lockedBuf is a strings.Builder safe to read while Xvfb writes to it.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
