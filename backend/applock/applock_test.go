package applock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// envHolder makes the re-executed test binary hold the lock named by the
// variable's value until it is killed (see TestMain).
const envHolder = "ATRIUM_APPLOCK_TEST_HOLDER"

func TestMain(m *testing.M) {
	if path := os.Getenv(envHolder); path != "" {
		if _, err := Acquire(path); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		time.Sleep(time.Hour) // held until the process is killed
	}
	os.Exit(m.Run())
}

func TestAcquireInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) || held.PID != os.Getpid() || held.Path != path {
		t.Fatalf("second Acquire: %v (%+v), want a HeldError naming pid %d", err, held, os.Getpid())
	}
	if !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("the error does not name the holder: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	l2, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	defer l2.Release()
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v %v", st, err)
	}
}

func TestAcquireMissingFolder(t *testing.T) {
	_, err := Acquire(filepath.Join(t.TempDir(), "nope", "app.lock"))
	if err == nil || errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire in a missing folder: %v", err)
	}
}

// TestAcquireAcrossProcesses: another process holding the lock refuses
// this one with its pid; once it is killed (SIGKILL: no clean-up of any
// kind) the lock is free again, although the file with its pid stays.
func TestAcquireAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHolder+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("holder: %q %v", line, err)
	}
	_, err = Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != cmd.Process.Pid {
		t.Fatalf("Acquire while another process holds it: %v, want a HeldError naming pid %d", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	if pid := ReadPID(path); pid != cmd.Process.Pid {
		t.Fatalf("the killed holder's pid is not in the file: %d", pid)
	}
	l, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	defer l.Release()
	if pid := ReadPID(path); pid != os.Getpid() {
		t.Fatalf("lock file names pid %d, want %d", pid, os.Getpid())
	}
}
