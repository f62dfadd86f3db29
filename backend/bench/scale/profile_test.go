package scale

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
	"github.com/atrium-dev/atrium/backend/memory/embed"
	"github.com/atrium-dev/atrium/backend/memory/index"
)

// TestProfileSearch runs the benchmark queries against an existing index
// (ATRIUM_SCALE_INDEX=<dir>/index of an earlier `atrium bench scale --dir`)
// for profiling:
//
//	ATRIUM_SCALE_INDEX=... go test -run TestProfileSearch -cpuprofile cpu.out ./backend/bench/scale
//
// With ATRIUM_SCALE_SCOPE=<path prefix> every search is scoped to the files
// under that prefix (a role's view, SPEC §5.1), e.g.
// ATRIUM_SCALE_SCOPE=memory/roles/agent0 (ten of the 32 roles).
// It prints the slowest queries; it asserts nothing about time.
func TestProfileSearch(t *testing.T) {
	dir := os.Getenv("ATRIUM_SCALE_INDEX")
	if dir == "" {
		t.Skip("ATRIUM_SCALE_INDEX not set (an index folder of an earlier scale run)")
	}
	root := corporaOrSkip(t)
	qs, err := loadQueries(root, 100, DefaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	emb := embed.NewBuiltin(embed.BuiltinOptions{})
	vs, err := emb.Embed(context.Background(), queryTexts(qs))
	if err != nil {
		t.Fatal(err)
	}
	s, err := index.Open(index.Options{Dir: dir, Provider: emb.Provider(), Model: emb.Model(), Dims: emb.Dims(),
		Chunking: fmt.Sprintf("lines/%d/%d", chunk.DefaultMaxTokens, chunk.DefaultOverlapTokens), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	type timing struct {
		q string
		d time.Duration
	}
	var ts []timing
	var scope func(string) bool
	if p := os.Getenv("ATRIUM_SCALE_SCOPE"); p != "" {
		scope = func(path string) bool { return strings.HasPrefix(path, p) }
	}
	rounds := 3
	for r := 0; r < rounds; r++ {
		for i, q := range qs {
			t0 := time.Now()
			if _, err := s.Search(context.Background(), index.Query{Text: q.Text, Vector: vs[i], MaxResults: 6, MinScore: 0.35, Scope: scope}); err != nil {
				t.Fatal(err)
			}
			if r == rounds-1 {
				ts = append(ts, timing{q.Text, time.Since(t0)})
			}
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].d > ts[j].d })
	for _, x := range ts[:10] {
		t.Logf("%8.2f ms  %s", ms(x.d), x.q)
	}
	t.Logf("p50 %.2f ms", ms(ts[len(ts)/2].d))
}
