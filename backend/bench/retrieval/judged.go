package retrieval

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// JudgedFile names the question file of a judged set (issue 25): a folder
// holding it is read as questions people asked about real workspaces,
// judged by path and line span, not as a BEIR set. Each line is one
// question:
//
//	{"_id": "sean-003", "workspace": "seanfzc-openclaw-workspace",
//	 "text": "…", "lang": "en", "type": "fact", "paraphrase": true,
//	 "answers": [{"path": "memory/2026-04-16.md", "start": 169, "end": 176}]}
//
// "workspace" names a sub-folder of Options.Workspaces, indexed as it is
// (one partition each); "lang" is en, zh, zh-Hant or mixed; "type" is
// fact, date, multi or absent; "paraphrase" says the question shares few
// words with its answer. "answers" are workspace-relative paths with
// 1-based inclusive line spans; an absent question has none and is asked
// as an absent one (defaults.go). A result chunk answers when it is in an
// answer's file and its lines overlap the span; the judged "document" of a
// span is its id "<workspace>:<path>:<start>-<end>".
const JudgedFile = "judged.jsonl"

// Question types of a judged set.
const (
	TypeFact   = "fact"
	TypeDate   = "date"
	TypeMulti  = "multi"
	TypeAbsent = "absent"
)

// judgedQuestion is one line of JudgedFile.
type judgedQuestion struct {
	ID         string `json:"_id"`
	Workspace  string `json:"workspace"`
	Text       string `json:"text"`
	Lang       string `json:"lang"`
	Type       string `json:"type"`
	Paraphrase bool   `json:"paraphrase"`
	Answers    []span `json:"answers"`
}

// span is a judged answer: lines Start..End (1-based, inclusive) of Path.
type span struct {
	Path  string `json:"path"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

func (s span) id(ws string) string { return fmt.Sprintf("%s:%s:%d-%d", ws, s.Path, s.Start, s.End) }

// isJudged reports whether dir holds a judged set (JudgedFile).
func isJudged(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, JudgedFile))
	return err == nil && !st.IsDir()
}

// judgedGroup is the group of a question in the reports: its language and
// whether it is a paraphrase ("paraphrase zh", "direct en").
func judgedGroup(q judgedQuestion) string {
	kind := "direct"
	if q.Paraphrase {
		kind = "paraphrase"
	}
	return kind + " " + q.Lang
}

// loadJudged reads a judged set from setDir against the workspaces under
// wsDir: one partition per workspace with questions, answerable questions
// as queries, absent ones as the partition's absent questions.
func (p *plan) loadJudged(o Options, setDir, wsDir string) error {
	if wsDir == "" {
		return fmt.Errorf("%w: the judged set %s needs the folder of its workspaces (Options.Workspaces, --workspaces)", ErrInvalidSet, setDir)
	}
	dirs, err := workspaceDirs(wsDir)
	if err != nil {
		return err
	}
	p.kind, p.level, p.qrels = "judged", "span", JudgedFile
	var qs []judgedQuestion
	seen := map[string]bool{}
	err = readJSONL(filepath.Join(setDir, JudgedFile), func(line []byte) error {
		var q judgedQuestion
		if err := json.Unmarshal(line, &q); err != nil {
			return err
		}
		switch {
		case q.ID == "":
			return errors.New(`question without "_id"`)
		case seen[q.ID]:
			return fmt.Errorf("duplicate _id %q", q.ID)
		case dirs[q.Workspace] == "":
			return fmt.Errorf("question %s: workspace %q is not in %s", q.ID, q.Workspace, wsDir)
		case q.Type == TypeAbsent && len(q.Answers) > 0:
			return fmt.Errorf("question %s: an absent question has no answers", q.ID)
		case q.Type != TypeAbsent && len(q.Answers) == 0:
			return fmt.Errorf("question %s: no answers (type %q)", q.ID, q.Type)
		}
		for _, a := range q.Answers {
			if a.Path == "" || a.Start < 1 || a.End < a.Start {
				return fmt.Errorf("question %s: answer %+v is not a path with a line span", q.ID, a)
			}
		}
		seen[q.ID] = true
		qs = append(qs, q)
		return nil
	})
	if err != nil {
		return err
	}
	byName := map[string]*partition{}
	n := 0
	for _, q := range qs {
		part := byName[q.Workspace]
		if part == nil {
			part = &partition{name: q.Workspace, workspace: dirs[q.Workspace], ids: map[string]bool{}, spans: map[string][]span{}}
			byName[q.Workspace] = part
		}
		text := strings.TrimSpace(q.Text)
		if text == "" {
			p.skipped++
			continue
		}
		if q.Type == TypeAbsent {
			part.absent = append(part.absent, query{id: q.ID, text: text, group: q.Lang})
			continue
		}
		if o.Limit > 0 && n >= o.Limit {
			continue
		}
		rel := Judgments{}
		for _, a := range q.Answers {
			id := a.id(q.Workspace)
			rel[id] = 1
			if !part.ids[id] {
				part.ids[id] = true
				part.spans[a.Path] = append(part.spans[a.Path], a)
			}
			if _, err := os.Stat(filepath.Join(dirs[q.Workspace], filepath.FromSlash(a.Path))); err != nil {
				p.missing++
			}
		}
		part.queries = append(part.queries, query{id: q.ID, text: text, group: judgedGroup(q), rel: rel})
		n++
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		part := byName[name]
		part.docCount = len(part.ids)
		p.parts = append(p.parts, part)
	}
	return nil
}

// spanIDs passes to add the judged spans of path that lines start..end
// overlap, in the set's order, and reports whether there was one.
func (part *partition) spanIDs(path string, start, end int, add func(string)) bool {
	any := false
	for _, s := range part.spans[path] {
		if start <= s.End && s.Start <= end {
			add(s.id(part.name))
			any = true
		}
	}
	return any
}
