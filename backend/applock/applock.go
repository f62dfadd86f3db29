// Package applock keeps one running Atrium app per state dir. The app
// holds an advisory lock on $ATRIUM_HOME/app.lock (paths.Layout.LockFile)
// from its start until it stops: flock(2) on Unix, LockFileEx on Windows,
// through github.com/gofrs/flock. The operating system releases the lock
// when the process ends in any way (a crash, SIGKILL), so an app that was
// killed never blocks the next start; the file itself stays and is reused.
//
// The holder writes its process id into the file (best effort: a reader
// may see it empty for a moment, and Windows may refuse the read while
// the lock is held), so that a refused start can name the running app.
package applock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/gofrs/flock"
)

// ErrHeld is what a HeldError wraps: another process holds the lock.
var ErrHeld = errors.New("another Atrium app is running on this state dir")

// HeldError is Acquire's error when another process holds the lock.
type HeldError struct {
	// Path is the lock file.
	Path string
	// PID is the holder's process id as it wrote it in the file; 0 when
	// it could not be read.
	PID int
}

func (e *HeldError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%v (pid %d holds %s)", ErrHeld, e.PID, e.Path)
	}
	return fmt.Sprintf("%v (%s is held)", ErrHeld, e.Path)
}

// Unwrap makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Lock is a held app lock. Release it once; it is also released when the
// process ends.
type Lock struct {
	fl   *flock.Flock
	once sync.Once
	err  error
}

// Acquire takes the lock on path (created with mode 0600 when missing; its
// folder must exist) without waiting. It returns a *HeldError when another
// process, or another Lock in this process, holds it, and another error
// when the file cannot be opened or locked at all.
func Acquire(path string) (*Lock, error) {
	fl := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o600))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("app lock %s: %w", path, err)
	}
	if !ok {
		return nil, &HeldError{Path: path, PID: ReadPID(path)}
	}
	// Best effort: the pid only helps a refused start name this process.
	_ = os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	return &Lock{fl: fl}, nil
}

// ReadPID returns the process id written in the lock file at path, 0 when
// there is none (no file, empty, unreadable). A pid read from a file that
// nobody holds is stale: only a HeldError's PID names a running app.
func ReadPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Release unlocks and closes the file (which stays on disk). Calling it
// again does nothing and returns the first call's error; a nil Lock is
// released already.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		if err := l.fl.Close(); err != nil {
			l.err = fmt.Errorf("app lock %s: release: %w", l.fl.Path(), err)
		}
	})
	return l.err
}
