package memory

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// FuzzParseFrontMatter feeds any text as a memory file (role configs,
// session files, notes: anything written to the workspace, by hand or by a
// synced tool). Properties: without front matter the body is the whole
// text; a malformed block is a *FrontMatterError (ErrFrontMatter) with the
// whole text as body; otherwise the body is the text's tail starting at
// bodyLine, list values are trimmed and non-empty, ttl is ≥ 0, and the
// block re-encoded as the role template does it (yaml.Node → yaml.Marshal,
// memory/roles.go) parses to the same fields.
func FuzzParseFrontMatter(f *testing.F) {
	for _, s := range []string{
		"---\ntype: role\nrole: writer\ndescription: 写作助手\ncapabilities: [memory, exec]\ntags: a, b ,\ncreated: 2026-02-11T14:30:22Z\nttl: 86400\n---\n# Writer\n\nbody\n",
		"\uFEFF---\r\ntype: session\r\nowner: main\r\nmodified: 2026-02-11\r\n...\r\nbody",
		"---\n- a\n- b\n---\n", "---\ntype: [x]\n---\n", "---\nttl: -1\n---\n", "---\ncreated: yesterday\n---\n",
		"---\nno end", "---", "# just text\n---\n", "---\n---\n", "---\nkey: |\n  ---\n  x\n---\nbody",
		"---\na: &x 1\nb: *x\n---\n", "---\n\"---\": 1\n---\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 64<<10 {
			return
		}
		fm, body, bodyLine, ok, err := ParseFrontMatter(text)
		if !ok {
			if err != nil || body != text || bodyLine != 1 {
				t.Fatalf("no front matter: body %q line %d err %v", body, bodyLine, err)
			}
			return
		}
		if err != nil {
			var fe *FrontMatterError
			if !errors.As(err, &fe) || !errors.Is(err, ErrFrontMatter) || body != text || fe.Line < 0 {
				t.Fatalf("refusal %v (%T) with body %q", err, err, body)
			}
			return
		}
		if !strings.HasSuffix(text, body) {
			t.Fatalf("body %q is not the tail of the text", body)
		}
		head := text[:len(text)-len(body)]
		// (An empty body after a closing line without a newline starts on
		// the line after it, which the text does not have.)
		if want := strings.Count(head, "\n") + 1; bodyLine != want && (body != "" || strings.HasSuffix(head, "\n") || bodyLine != want+1) {
			t.Fatalf("bodyLine %d, want %d for head %q", bodyLine, want, head)
		}
		for _, l := range [][]string{fm.Tags, fm.Capabilities} {
			for _, s := range l {
				if s == "" || strings.TrimSpace(s) != s {
					t.Fatalf("list value %q is empty or untrimmed", s)
				}
			}
		}
		if fm.TTL < 0 {
			t.Fatalf("ttl %d", fm.TTL)
		}
		// The role template's path: decode the block as a node, marshal it.
		block := head[strings.Index(head, "\n")+1:]
		block = block[:strings.LastIndex(strings.TrimSuffix(block, "\n"), "\n")+1]
		var doc yaml.Node
		if yaml.Unmarshal([]byte(block), &doc) != nil || len(doc.Content) == 0 {
			return
		}
		y, err := yaml.Marshal(&doc)
		if err != nil {
			return // yaml cannot write some nodes it read; the template refuses those
		}
		fm2, body2, _, ok2, err := ParseFrontMatter("---\n" + string(y) + "---\n" + body)
		if err != nil || !ok2 || body2 != body {
			t.Fatalf("re-encoded front matter does not parse (%v, ok %v):\n%s", err, ok2, y)
		}
		if fm.Type != fm2.Type || fm.Role != fm2.Role || fm.Owner != fm2.Owner || fm.Session != fm2.Session ||
			fm.Description != fm2.Description || !slices.Equal(fm.Tags, fm2.Tags) || !slices.Equal(fm.Capabilities, fm2.Capabilities) ||
			!fm.Created.Equal(fm2.Created) || !fm.Modified.Equal(fm2.Modified) || fm.TTL != fm2.TTL {
			t.Fatalf("re-encoded front matter changed:\n%+v\n%+v\n%s", fm, fm2, y)
		}
	})
}

// FuzzNamedDays feeds any question to the date reader memory_search uses to
// prefer a day's log (namedDays, dates.go), at any moment from 1970 to
// 2100. Properties: every day named is a real calendar day, none repeats,
// a day read from a month and day alone is not after today, and the rest
// of the question is never longer than the question and has no runs of
// spaces.
func FuzzNamedDays(f *testing.F) {
	at := time.Date(2026, 4, 16, 15, 0, 0, 0, time.UTC).Unix()
	for _, q := range []string{
		"what happened on 2025-11-03", "2025年11月3日的会议", "11月3日做了什么", "What did we do on Nov 3?",
		"November 3rd, 2024 retro", "the 3rd of November", "the day before yesterday", "3 days ago", "3天前的日志",
		"上上周三", "上週三做了什麼", "本周一的计划", "周日", "last Wednesday", "this Sunday", "2025-02-30", "2024-02-29 and 2月29日",
		"version 1.2.3", "may 3", "99 days ago", "1999/12/31", "２０２５-11-03",
	} {
		f.Add(q, at)
	}
	f.Fuzz(func(t *testing.T, q string, unix int64) {
		if len(q) > 4096 {
			return
		}
		now := time.Unix(unix%(130*365*86400), 0).UTC()
		if now.Year() < 1970 {
			now = now.AddDate(130, 0, 0)
		}
		days, rest := namedDays(q, now)
		for i, d := range days {
			if c, ok := validDay(d.y, int(d.m), d.d); !ok || c != d {
				t.Fatalf("namedDays(%q) named %v, not a calendar day", q, d)
			}
			if slices.Contains(days[:i], d) {
				t.Fatalf("namedDays(%q) repeats %v", q, d)
			}
		}
		if len(rest) > len(q) {
			t.Fatalf("rest %q is longer than %q", rest, q)
		}
		if rest != strings.Join(strings.FieldsFunc(rest, unicode.IsSpace), " ") {
			t.Fatalf("rest %q keeps runs of spaces", rest)
		}
		days2, rest2 := namedDays(q, now)
		if !slices.Equal(days, days2) || rest != rest2 {
			t.Fatalf("namedDays(%q) is not deterministic", q)
		}
	})
}
