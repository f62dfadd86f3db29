package retrieval

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/atrium-dev/atrium/backend/memory"
)

// plan is a loaded set: what to index and which queries to run where.
type plan struct {
	name, kind, level, qrels   string
	parts                      []*partition
	skipped, excluded, missing int
}

// partition is one index and the queries run against it.
type partition struct {
	name string
	// BEIR sets: the documents to write, and once written the
	// workspace-relative path of each file → its document id.
	docs  []doc
	paths map[string]string
	// Workspaces sets: the workspace folder, its Markdown lines by
	// workspace-relative path, the id prefix (the conversation) and whether
	// tags are judged as sessions.
	workspace string
	lines     map[string][]string
	session   bool
	// Judged sets (judged.go): the judged answer spans by
	// workspace-relative path.
	spans map[string][]span
	// ids are the judgeable document ids of the partition; docCount their
	// number.
	ids      map[string]bool
	docCount int
	queries  []query
	// absent are the questions asked with the answer absent (defaults.go);
	// holdOut says their judged documents are deleted first.
	absent  []query
	holdOut bool
}

// prepare loads the set named by o (see the package doc).
func prepare(o Options) (*plan, error) {
	set, err := filepath.Abs(o.Set)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSet, err)
	}
	if st, err := os.Stat(set); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a folder", ErrInvalidSet, o.Set)
	}
	if isJudged(set) {
		p := &plan{name: filepath.Base(set)}
		if err := p.loadJudged(o, set, o.Workspaces); err != nil {
			return nil, err
		}
		return p.keepUsed()
	}
	beirDir, wsDir := set, o.Workspaces
	var files []string
	if wsDir == "" {
		if files, err = corpusFiles(set); err != nil {
			return nil, err
		}
		if len(files) == 0 {
			if !isWorkspaces(set) {
				return nil, fmt.Errorf("%w: no corpus*.jsonl in %s", ErrInvalidSet, o.Set)
			}
			wsDir, beirDir = set, filepath.Dir(set)
		}
	}
	qpath, err := queriesFile(beirDir)
	if err != nil {
		return nil, err
	}
	rpath, err := qrelsFile(beirDir, o.Qrels)
	if err != nil {
		return nil, err
	}
	raw, err := loadQueries(qpath)
	if err != nil {
		return nil, err
	}
	qrels, err := loadQrels(rpath)
	if err != nil {
		return nil, err
	}
	p := &plan{qrels: filepath.Base(rpath)}
	if wsDir != "" {
		if wsDir, err = filepath.Abs(wsDir); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidSet, err)
		}
		p.name = filepath.Base(filepath.Dir(wsDir)) + "/" + filepath.Base(wsDir)
		err = p.loadWorkspaces(o, wsDir, raw, qrels)
	} else {
		p.name = filepath.Base(set)
		err = p.loadBEIR(o, files, raw, qrels)
	}
	if err != nil {
		return nil, err
	}
	return p.keepUsed()
}

// keepUsed drops the partitions without queries; none left is
// ErrInvalidSet.
func (p *plan) keepUsed() (*plan, error) {
	var used []*partition
	for _, part := range p.parts {
		if len(part.queries) > 0 {
			used = append(used, part)
		}
	}
	p.parts = used
	if len(p.parts) == 0 {
		return nil, fmt.Errorf("%w: no query of %s has a judged document in %s", ErrInvalidSet, p.name, p.qrels)
	}
	return p, nil
}

// judgedIDs returns every document id judged relevant in qrels.
func judgedIDs(qrels map[string]Judgments) map[string]bool {
	out := map[string]bool{}
	for _, rel := range qrels {
		for id := range rel {
			out[id] = true
		}
	}
	return out
}

// loadBEIR builds the documents (one per record, or per session) and the
// partitions (one per conversation when records and queries carry one).
func (p *plan) loadBEIR(o Options, files []string, raw []rawQuery, qrels map[string]Judgments) error {
	recs, err := loadRecords(files)
	if err != nil {
		return err
	}
	p.kind = "beir"
	judged := judgedIDs(qrels)
	var docs []doc
	for _, r := range recs {
		if judged[r.ID] {
			p.level = "doc"
			break
		}
	}
	if p.level == "doc" {
		for _, r := range recs {
			docs = append(docs, doc{id: r.ID, conv: r.Conv, text: r.render()})
		}
	} else {
		docs = sessionDocs(recs)
		hit := false
		for _, d := range docs {
			if judged[d.id] {
				hit = true
				break
			}
		}
		if !hit {
			return fmt.Errorf("%w: no id judged in %s is a corpus id (or a %q session id)", ErrInvalidSet, p.qrels, "<conv>:session_<n>")
		}
		p.level = "session"
	}

	partitioned := true
	for _, d := range docs {
		if d.conv == "" {
			partitioned = false
			break
		}
	}
	for _, q := range raw {
		if q.Conv == "" {
			partitioned = false
			break
		}
	}
	byName := map[string]*partition{}
	for _, d := range docs {
		name := ""
		if partitioned {
			name = d.conv
		}
		part := byName[name]
		if part == nil {
			part = &partition{name: name, ids: map[string]bool{}}
			byName[name] = part
			p.parts = append(p.parts, part)
		}
		part.docs = append(part.docs, d)
		part.ids[d.id] = true
		part.docCount++
	}
	p.selectQueries(o, raw, qrels, func(q rawQuery) *partition {
		if partitioned {
			return byName[q.Conv]
		}
		return byName[""]
	})
	return nil
}

// sessionDocs groups turn records into session documents
// "<conv>:session_<n>" in order of first appearance, turns in corpus order,
// under the first turn's date heading. Records without a session are left
// out.
func sessionDocs(recs []record) []doc {
	var order []string
	texts := map[string]*strings.Builder{}
	conv := map[string]string{}
	for _, r := range recs {
		sid := r.sessionID()
		if sid == "" {
			continue
		}
		b := texts[sid]
		if b == nil {
			b = &strings.Builder{}
			texts[sid] = b
			conv[sid] = r.Conv
			order = append(order, sid)
			if r.DateTime != "" {
				fmt.Fprintf(b, "# %s\n\n", r.DateTime)
			}
		}
		text := strings.TrimSpace(r.Text)
		if r.Speaker != "" {
			text = r.Speaker + ": " + text
		}
		b.WriteString(text + "\n")
	}
	docs := make([]doc, 0, len(order))
	for _, sid := range order {
		docs = append(docs, doc{id: sid, conv: conv[sid], text: texts[sid].String()})
	}
	return docs
}

// loadWorkspaces makes one partition per workspace under dir; the queries
// go to the workspace named by their "conv".
func (p *plan) loadWorkspaces(o Options, dir string, raw []rawQuery, qrels map[string]Judgments) error {
	dirs, err := workspaceDirs(dir)
	if err != nil {
		return err
	}
	p.kind = "workspaces"
	sessions := 0
	judged := judgedIDs(qrels)
	for id := range judged {
		if strings.Contains(id, ":session_") {
			sessions++
		}
	}
	p.level = "turn"
	if sessions*2 > len(judged) {
		p.level = "session"
	}
	names := make([]string, 0, len(dirs))
	for name := range dirs {
		names = append(names, name)
	}
	sort.Strings(names)
	byName := map[string]*partition{}
	for _, name := range names {
		lines, err := workspaceLines(dirs[name])
		if err != nil {
			return err
		}
		part := &partition{name: name, workspace: dirs[name], lines: lines, session: p.level == "session", ids: map[string]bool{}}
		for _, ls := range lines {
			for _, l := range ls {
				for _, m := range tagRe.FindAllStringSubmatch(l, -1) {
					part.ids[part.tagID(m[1], m[2])] = true
				}
			}
		}
		part.docCount = len(part.ids)
		byName[name] = part
		p.parts = append(p.parts, part)
	}
	p.selectQueries(o, raw, qrels, func(q rawQuery) *partition { return byName[q.Conv] })
	return nil
}

// tagID is the judged id of the tag [D<session>:<turn>] in this workspace.
func (part *partition) tagID(session, turn string) string {
	if part.session {
		return part.name + ":session_" + session
	}
	return part.name + ":D" + session + ":" + turn
}

// selectQueries applies the filters and the limit in file order and hands
// each kept query to its partition (route returns nil when it has none).
func (p *plan) selectQueries(o Options, raw []rawQuery, qrels map[string]Judgments, route func(rawQuery) *partition) {
	n := 0
	for _, q := range raw {
		if o.Limit > 0 && n >= o.Limit {
			break
		}
		if (q.Category != nil && !slices.Contains(o.Categories, *q.Category)) || q.Abstention || strings.HasSuffix(q.ID, "_abs") {
			p.excluded++
			continue
		}
		rel := qrels[q.ID]
		text := strings.TrimSpace(q.Text)
		part := route(q)
		if text == "" || len(rel) == 0 || part == nil {
			p.skipped++
			continue
		}
		for id := range rel {
			if !part.ids[id] {
				p.missing++
			}
		}
		part.queries = append(part.queries, query{id: q.ID, text: text, group: q.group(), rel: rel})
		n++
	}
}

// write puts the partition's documents into ws as memory/<safe id>.md and
// records the path → id map.
func (part *partition) write(ws string) error {
	dir := filepath.Join(ws, "memory")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench retrieval: write workspace: %w", err)
	}
	used := map[string]bool{}
	part.paths = make(map[string]string, len(part.docs))
	for _, d := range part.docs {
		name := safeName(d.id, used) + ".md"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(d.text), 0o644); err != nil {
			return fmt.Errorf("bench retrieval: write workspace: %w", err)
		}
		part.paths["memory/"+name] = d.id
	}
	return nil
}

// rank turns ranked result chunks into the ranked distinct document ids:
// the document of each chunk (BEIR) followed by those of the copies folded
// into it (AlsoIn: the same text in other documents ranks the same), or
// the tags in each chunk's lines in text order (workspaces), first
// occurrence kept.
func (part *partition) rank(results []memory.SearchResult) []string {
	seen := map[string]bool{}
	var out []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, r := range results {
		if part.spans != nil {
			// A chunk that overlaps no judged span still takes its rank.
			if !part.spanIDs(r.Path, r.StartLine, r.EndLine, add) {
				add(fmt.Sprintf("chunk %s:%d-%d", r.Path, r.StartLine, r.EndLine))
			}
			continue
		}
		if part.lines == nil {
			add(part.paths[r.Path])
			for _, p := range r.AlsoIn {
				add(part.paths[p])
			}
			continue
		}
		lines := part.lines[r.Path]
		for i := max(r.StartLine, 1) - 1; i < min(r.EndLine, len(lines)); i++ {
			for _, m := range tagRe.FindAllStringSubmatch(lines[i], -1) {
				add(part.tagID(m[1], m[2]))
			}
		}
	}
	return out
}
