package cli

import (
	"context"
	"fmt"
)

// runBench dispatches `atrium bench retrieval|scale`: the retrieval quality
// harness (SPEC §4, issue 3) and the index scale benchmark.
func runBench(ctx context.Context, args []string, o Options) error {
	sub, args := takeCommand(args)
	switch sub {
	case "":
		return fmt.Errorf("%w: bench needs a subcommand: retrieval or scale", errUsage)
	case "retrieval":
		return runBenchRetrieval(ctx, args, o)
	case "scale":
		return runBenchScale(ctx, args, o)
	default:
		return fmt.Errorf("%w: unknown bench subcommand %q (retrieval or scale)", errUsage, sub)
	}
}
