package soak

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// lastNotesSearched: how many of the last memory.note lines are searched
// for at the end (every one is checked on disk).
const lastNotesSearched = 10

// check runs after the load: the app syncs its index, then every
// acknowledged write (and every edit made on disk) must be in its file
// and found by memory.search for its token; a file deleted on disk must
// be gone. It returns how many writes it checked and what was lost.
func (r *run) check(ctx context.Context) (checked int, lost []string) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err := r.admin.Call(sctx, "memory.sync", map[string]any{}, nil)
	cancel()
	if err != nil {
		return 0, []string{fmt.Sprintf("memory.sync before the check: %v", err)}
	}
	r.mu.Lock()
	files := maps.Clone(r.files)
	notes := slices.Clone(r.notes)
	r.mu.Unlock()

	for _, rel := range slices.Sorted(maps.Keys(files)) {
		tok := files[rel]
		checked++
		b, err := os.ReadFile(filepath.Join(r.ws, filepath.FromSlash(rel)))
		switch {
		case tok == "":
			if !errors.Is(err, os.ErrNotExist) {
				lost = append(lost, fmt.Sprintf("%s: deleted on disk, but it is there (%v)", rel, err))
			}
			continue
		case err != nil:
			lost = append(lost, fmt.Sprintf("%s: %v", rel, err))
			continue
		case !strings.Contains(string(b), tok):
			lost = append(lost, fmt.Sprintf("%s: the last acknowledged write (%s) is not on disk", rel, tok))
			continue
		}
		if err := r.found(ctx, tok, rel); err != nil {
			lost = append(lost, err.Error())
		}
	}
	text := map[string]string{}
	for i, n := range notes {
		checked++
		if _, ok := text[n.path]; !ok {
			b, err := os.ReadFile(filepath.Join(r.ws, filepath.FromSlash(n.path)))
			if err != nil {
				lost = append(lost, fmt.Sprintf("%s: %v", n.path, err))
			}
			text[n.path] = string(b)
		}
		if !strings.Contains(text[n.path], n.token) {
			lost = append(lost, fmt.Sprintf("%s: the acknowledged note %s is not on disk", n.path, n.token))
			continue
		}
		if i >= len(notes)-lastNotesSearched {
			if err := r.found(ctx, n.token, n.path); err != nil {
				lost = append(lost, err.Error())
			}
		}
	}
	return checked, lost
}

// found searches for tok as admin and says so when rel is not among the
// results.
func (r *run) found(ctx context.Context, tok, rel string) error {
	var res struct {
		Results []struct {
			Path string `json:"path"`
		} `json:"results"`
	}
	if err := r.call(ctx, "memory.search", map[string]any{"query": tok, "maxResults": 10}, &res); err != nil {
		return fmt.Errorf("%s: search for %s: %w", rel, tok, err)
	}
	for _, h := range res.Results {
		if h.Path == rel {
			return nil
		}
	}
	return fmt.Errorf("%s: on disk, but memory.search for its token %s does not find it (%d results)", rel, tok, len(res.Results))
}
