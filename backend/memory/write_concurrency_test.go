package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atrium-dev/atrium/backend/memory/versions"
)

// writeRecord is one successful write of the concurrency test.
type writeRecord struct {
	path, content, base, version string
	conflict                     bool
}

// TestConcurrentWritersLoseNothing is issue 4's concurrency test: 8 writers
// append to one daily log and rewrite two notes, with fresh, stale and
// missing base versions, while the watcher and the periodic rescan run.
// Afterwards every append is in the log exactly once, and every version a
// note ever had is the final text, or the other side of a conflict record
// (and its conflict file), or was overwritten by a write based on exactly
// that version (its writer had seen it). No write of ours is ever counted
// as a hand edit.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	const (
		writers = 8
		ops     = 30
		logPath = "memory/roles/main/2026-03-04.md"
	)
	notes := []string{"memory/global/project-status.md", "memory/roles/code-expert/experience.md"}
	f := newWriteFixture(t, baseFiles, func(o *Options) {
		o.Debounce = 30 * time.Millisecond
		o.RescanInterval = 200 * time.Millisecond
	})
	runManager(t, f.m)
	ctx := context.Background()

	// The notes exist before the writers start, so that every note write
	// names a version (a write without one is unconditional: it is based
	// on whatever is current, and may overwrite it).
	var records []writeRecord
	for _, p := range notes {
		content := "# note\n\nfirst text of " + p + ": N-init\n"
		res := f.write(t, WriteRequest{Path: p, Mode: WriteReplace, Writer: "setup", Content: content})
		records = append(records, writeRecord{path: p, content: content, version: res.Version})
	}

	var (
		mu      sync.Mutex
		appends []string // tokens of successful appends
		wg      sync.WaitGroup
		errs    = make(chan error, writers*ops)
	)
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			seen := map[string][]string{} // versions this writer has read, per path
			writer := fmt.Sprintf("agent-%d", g)
			read := func(p string) string {
				v, err := f.m.Version(ctx, p)
				if err != nil {
					errs <- err
					return ""
				}
				if v != "" {
					seen[p] = append(seen[p], v)
				}
				return v
			}
			// base picks a fresh version, a stale one this writer saw
			// earlier, or (allowNone) none.
			base := func(p string, allowNone bool) string {
				switch n := rng.IntN(3); {
				case n == 0 && allowNone:
					return ""
				case n == 1 && len(seen[p]) > 0:
					return seen[p][rng.IntN(len(seen[p]))]
				}
				return read(p)
			}
			for i := 0; i < ops; i++ {
				if rng.IntN(2) == 0 {
					tok := fmt.Sprintf("L-%d-%d", g, i)
					_, err := f.m.Write(ctx, WriteRequest{Path: logPath, Mode: WriteAppend, Writer: writer, BaseVersion: base(logPath, true),
						Content: fmt.Sprintf("- %s 日志 entry %s", writer, tok)})
					if err != nil {
						errs <- err
						continue
					}
					mu.Lock()
					appends = append(appends, tok)
					mu.Unlock()
					continue
				}
				p := notes[rng.IntN(len(notes))]
				b := base(p, false)
				content := fmt.Sprintf("# note\n\n共享笔记 written by %s, op %d: N-%d-%d\n", writer, i, g, i)
				res, err := f.m.Write(ctx, WriteRequest{Path: p, Mode: WriteReplace, Writer: writer, BaseVersion: b, Content: content})
				if err != nil {
					errs <- err
					continue
				}
				seen[p] = append(seen[p], res.Version)
				mu.Lock()
				records = append(records, writeRecord{path: p, content: content, base: b, version: res.Version, conflict: res.Conflict != nil})
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("write failed: %v", err)
	}

	// Every append is in the log exactly once.
	log := f.read(t, logPath)
	for _, tok := range appends {
		if n := strings.Count(log, " "+tok+"\n"); n != 1 {
			t.Errorf("append %s is in the log %d times", tok, n)
		}
	}
	if n := strings.Count(log, "\n"); n != len(appends) {
		t.Errorf("log has %d lines, %d appends succeeded", n, len(appends))
	}

	conflicts := 0
	for _, p := range notes {
		final := f.read(t, p)
		list := f.conflicts(t, ConflictFilter{Path: p, Limit: versions.MaxLimit})
		others := map[string]bool{}
		for _, c := range list {
			others[c.Other] = true
			if c.Kind != versions.KindOverwrite || c.State != versions.StateOpen {
				t.Errorf("%s: conflict %+v", p, c)
			}
			if b, err := os.ReadFile(filepath.Join(f.ws, filepath.FromSlash(c.File))); err != nil || string(b) != c.Other {
				t.Errorf("%s: conflict file %s: %v (holds %q, record %q)", p, c.File, err, b, c.Other)
			}
		}
		conflicts += len(list)
		// Versions knowingly overwritten: the base of every write that was
		// applied without a conflict (its base was the current version).
		knew := map[string]bool{}
		written := map[string]bool{}
		recorded := 0
		for _, r := range records {
			if r.path != p {
				continue
			}
			written[r.content] = true
			if !r.conflict {
				knew[r.base] = true
			} else {
				recorded++
			}
		}
		if recorded != len(list) {
			t.Errorf("%s: %d writes reported a conflict, %d records", p, recorded, len(list))
		}
		for _, r := range records {
			if r.path == p && r.content != final && !others[r.content] && !knew[r.version] {
				t.Errorf("%s: lost write (version %s): %q", p, r.version, r.content)
			}
		}
		for o := range others {
			if !written[o] {
				t.Errorf("%s: a conflict record holds a text nobody wrote: %q", p, o)
			}
		}
	}
	t.Logf("%d appends, %d note writes, %d conflict records", len(appends), len(records), conflicts)
	if conflicts == 0 {
		t.Error("no conflict at all: the test did not exercise stale bases")
	}

	// The watcher and rescans ran all along: none of our writes was
	// counted as a hand edit.
	for _, p := range append([]string{logPath}, notes...) {
		if v := f.version(t, p); strings.Contains(v, AdminWriter+"=") {
			t.Errorf("%s: version %s counts a write by admin; nobody edited by hand", p, v)
		}
	}
	// The final texts are indexed.
	for _, p := range notes {
		final := f.read(t, p)
		tok := final[strings.LastIndex(final, "N-"):]
		if rs := f.search(t, strings.TrimSpace(tok)); len(rs) == 0 || rs[0].Path != p {
			t.Errorf("final text of %s (%s) not found first: %v", p, tok, resultPaths(rs))
		}
	}
}
