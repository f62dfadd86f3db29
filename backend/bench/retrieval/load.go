package retrieval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// maxLine is the longest JSONL line read (a LongMemEval session is ~50 kB).
const maxLine = 64 << 20

// record is one corpus line; which fields are set depends on the set.
type record struct {
	ID       string          `json:"_id"`
	Title    string          `json:"title"`
	Text     string          `json:"text"`
	Conv     string          `json:"conv"`
	Session  json.RawMessage `json:"session"` // number or string
	DateTime string          `json:"date_time"`
	Speaker  string          `json:"speaker"`
	Date     string          `json:"date"`
	Turns    []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"turns"`
}

// sessionID is the id of the session document a turn record belongs to
// ("<conv>:session_<n>", the form of LoCoMo's qrels_session.tsv), or "".
func (r *record) sessionID() string {
	s := strings.Trim(string(r.Session), `" `)
	if s == "" || s == "null" || r.Conv == "" {
		return ""
	}
	return r.Conv + ":session_" + s
}

// render is the Markdown of one record as its own document.
func (r *record) render() string {
	var b strings.Builder
	switch {
	case len(r.Turns) > 0: // LongMemEval session
		if r.Date != "" {
			fmt.Fprintf(&b, "# %s\n\n", r.Date)
		}
		for _, t := range r.Turns {
			fmt.Fprintf(&b, "%s: %s\n", t.Role, strings.TrimSpace(t.Content))
		}
	case r.Speaker != "": // LoCoMo-style turn
		if r.DateTime != "" {
			fmt.Fprintf(&b, "# %s\n\n", r.DateTime)
		}
		fmt.Fprintf(&b, "%s: %s\n", r.Speaker, strings.TrimSpace(r.Text))
	default: // BEIR passage
		if r.Title != "" {
			fmt.Fprintf(&b, "# %s\n\n", r.Title)
		}
		if t := strings.TrimSpace(r.Text); t != "" {
			b.WriteString(t + "\n")
		}
	}
	return b.String()
}

// doc is one document written as one Markdown file.
type doc struct {
	id, conv, text string
}

// query is one evaluated query.
type query struct {
	id, text, group string
	rel             Judgments
}

// rawQuery is one queries.jsonl / questions.jsonl line.
type rawQuery struct {
	ID         string `json:"_id"`
	QuestionID string `json:"question_id"`
	Text       string `json:"text"`
	Question   string `json:"question"`
	Conv       string `json:"conv"`
	Category   *int   `json:"category"`
	Abstention bool   `json:"abstention"`
	// QuestionType (LongMemEval) or Category and CategoryName (LoCoMo)
	// name the query's group in Report.Groups.
	QuestionType string `json:"question_type"`
	CategoryName string `json:"category_name"`
}

// group is the query's group name for Report.Groups, or "".
func (q *rawQuery) group() string {
	switch {
	case q.QuestionType != "":
		return q.QuestionType
	case q.Category != nil && q.CategoryName != "":
		return fmt.Sprintf("category %d (%s)", *q.Category, q.CategoryName)
	case q.Category != nil:
		return fmt.Sprintf("category %d", *q.Category)
	}
	return ""
}

// readJSONL calls fn for every non-blank line of path.
func readJSONL(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("%w: %s line %d: %v", ErrInvalidSet, path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// corpusFiles returns the corpus*.jsonl files of dir, sorted.
func corpusFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "corpus*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("list corpus: %w", err)
	}
	sort.Strings(files)
	return files, nil
}

// loadRecords reads every corpus record of files.
func loadRecords(files []string) ([]record, error) {
	var recs []record
	seen := map[string]bool{}
	for _, f := range files {
		err := readJSONL(f, func(line []byte) error {
			var r record
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			if r.ID == "" {
				return errors.New(`record without "_id"`)
			}
			if seen[r.ID] {
				return fmt.Errorf("duplicate _id %q", r.ID)
			}
			seen[r.ID] = true
			recs = append(recs, r)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// queriesFile returns queries.jsonl or questions.jsonl of dir.
func queriesFile(dir string) (string, error) {
	for _, name := range []string{"queries.jsonl", "questions.jsonl"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: no queries.jsonl or questions.jsonl in %s", ErrInvalidSet, dir)
}

// loadQueries reads the queries in file order.
func loadQueries(path string) ([]rawQuery, error) {
	var qs []rawQuery
	err := readJSONL(path, func(line []byte) error {
		var q rawQuery
		if err := json.Unmarshal(line, &q); err != nil {
			return err
		}
		if q.ID == "" {
			q.ID = q.QuestionID
		}
		if q.Text == "" {
			q.Text = q.Question
		}
		if q.ID == "" {
			return errors.New(`query without "_id" or "question_id"`)
		}
		qs = append(qs, q)
		return nil
	})
	return qs, err
}

// qrelsFile resolves Options.Qrels against dir: a given name (or path),
// else qrels.tsv, else the first qrels*.tsv in name order.
func qrelsFile(dir, name string) (string, error) {
	if name != "" {
		p := name
		if !filepath.IsAbs(p) && !strings.ContainsRune(p, filepath.Separator) {
			p = filepath.Join(dir, name)
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: qrels %s: %v", ErrInvalidSet, p, err)
		}
		return p, nil
	}
	p := filepath.Join(dir, "qrels.tsv")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "qrels*.tsv"))
	if err != nil {
		return "", fmt.Errorf("list qrels: %w", err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("%w: no qrels*.tsv in %s", ErrInvalidSet, dir)
	}
	sort.Strings(files)
	return files[0], nil
}

// loadQrels reads a TREC/BEIR qrels TSV (query-id, corpus-id, score; a
// header line is skipped; a 4-column TREC line "qid 0 docid score" is
// accepted too). Rows with score ≤ 0 are dropped; a repeated pair keeps its
// highest score.
func loadQrels(path string) (map[string]Judgments, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read qrels: %w", err)
	}
	out := map[string]Judgments{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) == 1 {
			f = strings.Fields(line)
		}
		if len(f) == 4 {
			f = []string{f[0], f[2], f[3]}
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: %s line %d: want query-id, corpus-id, score", ErrInvalidSet, path, i+1)
		}
		score, err := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		if err != nil {
			if i == 0 {
				continue // header
			}
			return nil, fmt.Errorf("%w: %s line %d: score %q", ErrInvalidSet, path, i+1, f[2])
		}
		if score <= 0 {
			continue
		}
		qid, did := strings.TrimSpace(f[0]), strings.TrimSpace(f[1])
		if out[qid] == nil {
			out[qid] = Judgments{}
		}
		out[qid][did] = max(out[qid][did], score)
	}
	return out, nil
}

// tagRe finds the LoCoMo turn tags ("[D3:12]") in a daily-log line.
var tagRe = regexp.MustCompile(`\[D(\d+):(\d+)\]`)

// isWorkspaces reports whether dir holds workspaces (sub-folders with a
// memory/ folder) rather than a BEIR set.
func isWorkspaces(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() {
			if st, err := os.Stat(filepath.Join(dir, e.Name(), "memory")); err == nil && st.IsDir() {
				return true
			}
		}
	}
	return false
}

// workspaceDirs lists the workspaces under dir by name (sub-folders with a
// memory/ folder).
func workspaceDirs(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read workspaces: %w", err)
	}
	out := map[string]string{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if st, err := os.Stat(filepath.Join(p, "memory")); e.IsDir() && err == nil && st.IsDir() {
			out[e.Name()] = p
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no workspace (a folder with memory/) in %s", ErrInvalidSet, dir)
	}
	return out, nil
}

// workspaceLines reads every Markdown file of a workspace's memory/ tree:
// workspace-relative slash path → lines.
func workspaceLines(ws string) (map[string][]string, error) {
	out := map[string][]string{}
	root := filepath.Join(ws, "memory")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(p), ".md") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(ws, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = strings.Split(string(data), "\n")
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read workspace %s: %w", ws, err)
	}
	return out, nil
}

// safeName turns a document id into a file name stem: letters, digits, '.',
// '-' and '_' are kept, anything else becomes '_'; a leading '.' (hidden
// files are not indexed) becomes '_'. used (lower-cased stems, for
// case-insensitive file systems) makes it unique with a "~n" suffix.
func safeName(id string, used map[string]bool) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || s[0] == '.' {
		s = "_" + s
	}
	if len(s) > 120 {
		s = s[:120]
	}
	name := s
	for n := 2; used[strings.ToLower(name)]; n++ {
		name = s + "~" + strconv.Itoa(n)
	}
	used[strings.ToLower(name)] = true
	return name
}
