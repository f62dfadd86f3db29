package index

import (
	"context"
	"errors"
	"testing"
)

// TestWarm: Warm loads the quantized copy and fills the postings cache with
// the frequent terms' lists (within half the cache), a warmed Store
// answers exactly as a cold one, and a cancelled or closed Store stops it
// with the matching error.
func TestWarm(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openBuiltinQuant(t, dir, 1)
	fillZipf(t, b, 400)
	queries := []string{"the release rollback", "数据库 索引 的", "sourdough bread garden", "发布 了 cache latency"}
	var cold []string
	for _, q := range queries {
		cold = append(cold, describeHits(b.search(t, q, 5, -1)))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	w := openBuiltinQuant(t, dir, 1)
	if w.quant.isLoaded() {
		t.Fatal("quantized copy loaded before any search or Warm")
	}
	if err := w.Warm(ctx); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	if !w.quant.isLoaded() {
		t.Fatal("Warm did not load the quantized copy")
	}
	n, used := w.postings.stats()
	if n == 0 || used > w.postings.budget.Load()/2 {
		t.Fatalf("after Warm the cache holds %d lists, %d bytes (budget %d): want some, within half", n, used, w.postings.budget.Load())
	}
	for i, q := range queries {
		if got := describeHits(w.search(t, q, 5, -1)); got != cold[i] {
			t.Fatalf("%q warmed:\n%s\ncold:\n%s", q, got, cold[i])
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.Warm(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Warm with a cancelled context: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Warm(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Warm after Close: %v", err)
	}
}
