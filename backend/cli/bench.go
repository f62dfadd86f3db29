package cli

import (
	"context"
	"fmt"
	"os"
)

// runBench dispatches `atrium bench retrieval|scale|control|soak`: the
// retrieval quality harness (SPEC §4, issue 3), the index scale benchmark,
// the control-center benchmark (SPEC §6, issue 5) and the soak (issue 26).
func runBench(ctx context.Context, args []string, o Options) error {
	sub, args := takeCommand(args)
	if ok, err := group("bench", sub, args, o); !ok {
		return err
	}
	switch sub {
	case "retrieval":
		return runBenchRetrieval(ctx, args, o)
	case "scale":
		return runBenchScale(ctx, args, o)
	case "soak":
		return runBenchSoak(ctx, args, o)
	default: // control
		return runBenchControl(ctx, args, o)
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
