package cli

import (
	"context"
	"errors"
)

// runBenchRetrieval is `atrium bench retrieval` (being built on a branch).
func runBenchRetrieval(ctx context.Context, args []string, o Options) error {
	return errors.New("bench retrieval: not built yet")
}
