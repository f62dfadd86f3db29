package cli

import (
	"context"
	"fmt"
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
