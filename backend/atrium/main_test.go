package atrium

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/atrium-dev/atrium/backend/worker"
)

// TestMain lets the test binary be re-executed as a worker, exactly as the
// app re-executes `atrium worker` (SPEC §3): the pool of the app under test
// starts os.Executable(), which is this binary, with the arguments `worker
// --profile … --instance …`. Without this, the child would run the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := worker.Command(ctx, worker.CommandOptions{Args: os.Args[2:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
