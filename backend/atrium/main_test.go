package atrium

import (
	"os"
	"testing"

	"github.com/atrium-dev/atrium/backend/worker"
)

// TestMain lets the test binary be re-executed as a worker, exactly as the
// app re-executes `atrium worker` (SPEC §3): the pool of the app under test
// starts os.Executable(), which is this binary, with the arguments `worker
// --profile … --instance …`. Without this, the child would run the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(worker.Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == lanAttackerArg { // another machine on the LAN (adversarial_listen_test.go)
		os.Exit(lanAttacker(os.Args[2:]))
	}
	os.Exit(m.Run())
}
