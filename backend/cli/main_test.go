package cli

import (
	"os"
	"testing"
)

// TestMain lets the test binary be re-executed as a worker, exactly as the
// app re-executes `atrium worker` (SPEC §3): the app under test spawns
// os.Executable(), which is this binary, with the arguments `worker
// --profile … --instance …`. Without this, the child would run the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(Main(os.Args[1:], Options{}))
	}
	os.Exit(m.Run())
}
