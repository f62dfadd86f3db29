package cli

import (
	"context"
	"errors"
)

// runBenchScale is `atrium bench scale` (being built on a branch).
func runBenchScale(ctx context.Context, args []string, o Options) error {
	return errors.New("bench scale: not built yet")
}
