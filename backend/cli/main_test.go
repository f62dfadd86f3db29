package cli

import (
	"os"
	"testing"
)

// envCLIMain makes the re-executed test binary run the command line with
// its arguments (`atrium serve …` in another process; see startAtrium).
const envCLIMain = "ATRIUM_CLI_TEST_MAIN"

// TestMain lets the test binary be re-executed as a worker, exactly as the
// app re-executes `atrium worker` (SPEC §3): the app under test spawns
// os.Executable(), which is this binary, with the arguments `worker
// --profile … --instance …`. Without this, the child would run the tests.
// With envCLIMain set it is the whole command line instead (a second app,
// a killed app: real processes).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" || os.Getenv(envCLIMain) != "" {
		os.Exit(Main(os.Args[1:], Options{Version: "test"}))
	}
	os.Exit(m.Run())
}
