package cli

import (
	"context"
	"fmt"
	"os"
)

// runBench dispatches `atrium bench retrieval|scale|control`: the
// retrieval quality harness (SPEC §4, issue 3), the index scale benchmark
// and the control-center benchmark (SPEC §6, issue 5).
func runBench(ctx context.Context, args []string, o Options) error {
	sub, args := takeCommand(args)
	switch sub {
	case "":
		return fmt.Errorf("%w: bench needs a subcommand: retrieval, scale or control", errUsage)
	case "retrieval":
		return runBenchRetrieval(ctx, args, o)
	case "scale":
		return runBenchScale(ctx, args, o)
	case "control":
		return runBenchControl(ctx, args, o)
	default:
		return fmt.Errorf("%w: unknown bench subcommand %q (retrieval, scale or control)", errUsage, sub)
	}
}

// benchDir is a benchmark's working folder: dir when set (kept), else a
// new folder under the system temp dir that cleanup removes.
func benchDir(dir, bench string) (work string, cleanup func(), err error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "atrium-bench-"+bench+"-")
	if err != nil {
		return "", nil, fmt.Errorf("bench %s: %w", bench, err)
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}
