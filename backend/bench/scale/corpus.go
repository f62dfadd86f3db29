package scale

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/memory/chunk"
)

// ErrNoCorpora is returned (wrapped) when the shared corpora cannot be found.
var ErrNoCorpora = errors.New("scale bench: corpora not found (set ATRIUM_CORPORA or put shared/corpora next to the repository)")

// FindCorpora returns the corpora directory: $ATRIUM_CORPORA when set, else
// ../shared/corpora relative to the repository root (the first folder above
// the working directory that holds go.mod). Errors wrap ErrNoCorpora.
func FindCorpora() (string, error) {
	if d := os.Getenv("ATRIUM_CORPORA"); d != "" {
		if st, err := os.Stat(filepath.Join(d, "bench")); err == nil && st.IsDir() {
			return d, nil
		}
		return "", fmt.Errorf("%w: ATRIUM_CORPORA=%s has no bench/ folder", ErrNoCorpora, d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoCorpora, err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			c := filepath.Join(filepath.Dir(d), "shared", "corpora")
			if st, err := os.Stat(filepath.Join(c, "bench")); err == nil && st.IsDir() {
				return c, nil
			}
			return "", fmt.Errorf("%w: no %s", ErrNoCorpora, c)
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%w: no go.mod above %s", ErrNoCorpora, wd)
		}
	}
}

// source is one body of real text cut into lines ("units"): consecutive
// units are consecutive text of the source (turns of one conversation,
// sentences of one paragraph).
type source struct {
	name  string
	units []string
}

// corpus is the real text the generator recombines.
type corpus struct {
	sources []source
}

// readJSONL calls fn for each JSON object of the .jsonl files matching glob.
func readJSONL(glob string, fn func(raw []byte) error) error {
	files, err := filepath.Glob(glob)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: no %s", ErrNoCorpora, glob)
	}
	sort.Strings(files)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if len(strings.TrimSpace(sc.Text())) == 0 {
				continue
			}
			if err := fn(sc.Bytes()); err != nil {
				fh.Close()
				return fmt.Errorf("%s: %w", f, err)
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// lines splits text into trimmed non-empty lines.
func lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// zhLines cuts a Chinese paragraph into lines of whole sentences, at least
// 60 characters each (the last may be shorter).
func zhLines(text string) []string {
	var out []string
	var cur strings.Builder
	for _, r := range text {
		cur.WriteRune(r)
		if strings.ContainsRune("。！？；", r) && utf8.RuneCountInString(cur.String()) >= 60 {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// maxUnitTokens bounds the estimated tokens of one unit (cut at sentence
// ends where possible).
const maxUnitTokens = 100

// sentences cuts line into pieces of whole sentences of at most max
// estimated tokens (a single longer sentence stays whole).
func sentences(line string, max int) []string {
	if chunk.EstimateTokens(line) <= max {
		return []string{line}
	}
	var out []string
	var cur, sent strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	rs := []rune(line)
	for i, r := range rs {
		sent.WriteRune(r)
		end := strings.ContainsRune("。！？；", r) ||
			(strings.ContainsRune(".!?", r) && (i+1 == len(rs) || rs[i+1] == ' '))
		if end || i+1 == len(rs) {
			if cur.Len() > 0 && chunk.EstimateTokens(cur.String()+sent.String()) > max {
				flush()
			}
			cur.WriteString(sent.String())
			sent.Reset()
		}
	}
	flush()
	return out
}

// loadCorpus reads the real text: LongMemEval sessions, CMRC 2018 and DRCD
// paragraphs, LoCoMo turns and the OpenClaw workspaces' Markdown.
func loadCorpus(root string) (*corpus, error) {
	c := &corpus{}
	bench := filepath.Join(root, "bench")

	var lme source
	lme.name = "longmemeval"
	err := readJSONL(filepath.Join(bench, "longmemeval", "corpus-*.jsonl"), func(raw []byte) error {
		var s struct {
			Turns []struct{ Role, Content string }
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		for _, t := range s.Turns {
			for i, l := range lines(t.Content) {
				if i == 0 {
					l = t.Role + ": " + l
				}
				lme.units = append(lme.units, l)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load longmemeval: %w", err)
	}
	c.sources = append(c.sources, lme)

	for _, name := range []string{"cmrc2018", "drcd"} {
		src := source{name: name}
		err := readJSONL(filepath.Join(bench, name, "corpus.jsonl"), func(raw []byte) error {
			var p struct{ Title, Text string }
			if err := json.Unmarshal(raw, &p); err != nil {
				return err
			}
			src.units = append(src.units, "【"+p.Title+"】")
			src.units = append(src.units, zhLines(p.Text)...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", name, err)
		}
		c.sources = append(c.sources, src)
	}

	loc := source{name: "locomo"}
	err = readJSONL(filepath.Join(bench, "locomo", "corpus.jsonl"), func(raw []byte) error {
		var t struct{ Speaker, Text string }
		if err := json.Unmarshal(raw, &t); err != nil {
			return err
		}
		if s := strings.TrimSpace(t.Text); s != "" {
			loc.units = append(loc.units, t.Speaker+": "+s)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load locomo: %w", err)
	}
	c.sources = append(c.sources, loc)

	ws := source{name: "openclaw"}
	var mdFiles []string
	err = filepath.WalkDir(filepath.Join(root, "workspaces"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") && d.Name() != "SOURCE.md" {
			mdFiles = append(mdFiles, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: load workspaces: %v", ErrNoCorpora, err)
	}
	sort.Strings(mdFiles)
	for _, f := range mdFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("load workspaces: %w", err)
		}
		for _, l := range lines(string(b)) {
			if l != "---" && utf8.RuneCountInString(l) >= 8 {
				ws.units = append(ws.units, l)
			}
		}
	}
	c.sources = append(c.sources, ws)
	for i := range c.sources {
		// One unit, one line of a file: split any unit holding a line break.
		s := &c.sources[i]
		// A unit longer than maxUnitTokens is cut at sentence ends: a long
		// line alone fills a chunk, and the same line drawn twice would
		// make two identical chunks.
		var us []string
		for _, u := range s.units {
			for _, l := range lines(u) {
				us = append(us, sentences(l, maxUnitTokens)...)
			}
		}
		s.units = us
	}
	for _, s := range c.sources {
		if len(s.units) < 100 {
			return nil, fmt.Errorf("%w: source %s has only %d lines", ErrNoCorpora, s.name, len(s.units))
		}
	}
	return c, nil
}

// sourceWeights: the share of entries drawn from each source (same order as
// loadCorpus): English conversations dominate, Chinese is a third.
var sourceWeights = []int{35, 15, 15, 20, 15}

// generator writes dated daily logs (memory/roles/<role>/YYYY-MM-DD.md)
// recombined from the corpus: each entry is a run of consecutive lines of
// one source starting at a random line, 60–200 estimated tokens (at most
// maxEntryLines lines), under a "## HH:MM source" heading. A 400-token
// chunk thus spans at least two independent draws and a heading, so every
// chunk is real text and (with overwhelming probability) a text that occurs
// nowhere else; distinctness is counted, not assumed.
type generator struct {
	c      *corpus
	rng    *rand.Rand
	ws     string
	roles  int
	files  int // files written so far
	chunks int // chunks of the files written so far (chunk.Split)
	bytes  int64
	hashes map[uint64]struct{} // first 64 bits of each chunk hash
	dups   int
	copts  chunk.Options
	total  int
}

func newGenerator(c *corpus, ws string, seed int64, roles int) *generator {
	t := 0
	for _, w := range sourceWeights {
		t += w
	}
	return &generator{c: c, rng: rand.New(rand.NewSource(seed)), ws: ws, roles: roles, hashes: map[uint64]struct{}{}, total: t}
}

// maxEntryLines bounds the lines of one log entry.
const maxEntryLines = 8

// fileTokens is the size of one daily log (estimated tokens): about six
// chunks of 400 tokens with 80 overlapping.
const fileTokens = 2000

var day0 = time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC)

// path returns the workspace-relative path of the i-th file.
func (g *generator) path(i int) string {
	role := fmt.Sprintf("agent%02d", i%g.roles)
	day := day0.AddDate(0, 0, i/g.roles).Format("2006-01-02")
	return filepath.Join("memory", "roles", role, day+".md")
}

// grow writes files until they hold at least target chunks.
func (g *generator) grow(target int) error {
	for g.chunks < target {
		rel := g.path(g.files)
		text := g.daily(rel)
		abs := filepath.Join(g.ws, rel)
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		if err := os.WriteFile(abs, []byte(text), 0o644); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		for _, ch := range chunk.Split(text, g.copts) {
			h, err := strconv.ParseUint(ch.Hash[:16], 16, 64)
			if err != nil {
				return fmt.Errorf("generate: chunk hash %q: %w", ch.Hash, err)
			}
			if _, ok := g.hashes[h]; ok {
				g.dups++
			} else {
				g.hashes[h] = struct{}{}
			}
			g.chunks++
		}
		g.files++
		g.bytes += int64(len(text))
	}
	return nil
}

// daily returns the text of one daily log.
func (g *generator) daily(rel string) string {
	var b strings.Builder
	day := strings.TrimSuffix(filepath.Base(rel), ".md")
	fmt.Fprintf(&b, "# %s\n\n", day)
	tokens := 0
	minute := 8*60 + g.rng.Intn(60)
	for tokens < fileTokens {
		src := g.pick()
		start := g.rng.Intn(len(src.units) - maxEntryLines)
		fmt.Fprintf(&b, "## %02d:%02d %s\n", (minute/60)%24, minute%60, src.name)
		target, entry := 60+g.rng.Intn(140), 0
		for _, u := range src.units[start : start+maxEntryLines] {
			b.WriteString(u)
			b.WriteByte('\n')
			entry += chunk.EstimateTokens(u)
			if entry >= target {
				break
			}
		}
		tokens += entry
		b.WriteByte('\n')
		minute += 5 + g.rng.Intn(40)
	}
	return b.String()
}

func (g *generator) pick() *source {
	x := g.rng.Intn(g.total)
	for i, w := range sourceWeights {
		if x < w {
			return &g.c.sources[i]
		}
		x -= w
	}
	return &g.c.sources[len(g.c.sources)-1]
}

// query is one benchmark query.
type query struct {
	Text string
	Lang string // "en" or "zh"
}

// loadQueries picks n real queries, half English (LongMemEval questions,
// LoCoMo questions) and half Chinese (CMRC 2018, DRCD), deterministically
// for seed.
func loadQueries(root string, n int, seed int64) ([]query, error) {
	bench := filepath.Join(root, "bench")
	type set struct {
		glob, field, lang string
		texts             []string
	}
	sets := []*set{
		{glob: filepath.Join(bench, "longmemeval", "questions.jsonl"), field: "question", lang: "en"},
		{glob: filepath.Join(bench, "locomo", "queries.jsonl"), field: "text", lang: "en"},
		{glob: filepath.Join(bench, "cmrc2018", "queries.jsonl"), field: "text", lang: "zh"},
		{glob: filepath.Join(bench, "drcd", "queries.jsonl"), field: "text", lang: "zh"},
	}
	for _, s := range sets {
		err := readJSONL(s.glob, func(raw []byte) error {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			if t, ok := m[s.field].(string); ok && strings.TrimSpace(t) != "" {
				s.texts = append(s.texts, strings.TrimSpace(t))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("load queries: %w", err)
		}
	}
	rng := rand.New(rand.NewSource(seed))
	var out []query
	for i := 0; len(out) < n; i++ {
		s := sets[i%len(sets)]
		out = append(out, query{Text: s.texts[rng.Intn(len(s.texts))], Lang: s.lang})
	}
	return out, nil
}
