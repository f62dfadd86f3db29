package cli

import (
	"context"
	"fmt"
)

// runBench dispatches `atrium bench retrieval|scale`: the retrieval quality
// harness (SPEC §4, issue 3) and the index scale benchmark.
func runBench(ctx context.Context, args []string, o Options) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: bench needs a subcommand: retrieval or scale", errUsage)
	}
	switch args[0] {
	case "retrieval":
		return runBenchRetrieval(ctx, args[1:], o)
	case "scale":
		return runBenchScale(ctx, args[1:], o)
	default:
		return fmt.Errorf("%w: unknown bench subcommand %q (retrieval or scale)", errUsage, args[0])
	}
}
