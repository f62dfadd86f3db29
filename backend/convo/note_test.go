package convo

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Fatalf("%s differs from the golden file:\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

func TestNewNoteGolden(t *testing.T) {
	sh := zone(t, "Asia/Shanghai")
	ts := func(hm string) int64 {
		tm, err := time.ParseInLocation("2006-01-02 15:04", "2026-01-26 "+hm, sh)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	at := func(m Message, hm string) Message { m.TS = ts(hm); return m }

	var zh []Message
	zh = append(zh, at(u("z0", "## 我们来设计 API 吧：用户和认证"), "09:00"))
	for i := 1; i <= 17; i++ {
		if i%2 == 1 {
			zh = append(zh, at(a(fmt.Sprintf("z%d", i), fmt.Sprintf("第 %d 条回复：好的，我们继续。\n\n- 端点 /users\n- 端点 /auth", i)), fmt.Sprintf("09:%02d", i)))
		} else {
			zh = append(zh, at(u(fmt.Sprintf("z%d", i), fmt.Sprintf("第 %d 个问题：速率限制怎么做？", i)), fmt.Sprintf("09:%02d", i)))
		}
	}
	zh = append(zh, call("zc", "", "c1"), res("c1", "tool output is not noted"), sys("system text is not noted"))

	en := []Message{
		u("e1", "# Plan the Heron launch: QK-7731 checklist"),
		call("e2", "", "c1"), res("c1", `{"results":[]}`),
		a("e3", "Here is the checklist:\r\n1. Freeze the API\r\n2. Tag v2.4.0"),
		u("e4", "Thanks!"),
		a("e5", strings.Repeat("long answer ", 50)),
	}
	en[0].TS = ts("21:05")

	tests := []struct {
		name   string
		msgs   []Message
		o      NoteOptions
		path   string
		counts [2]int
	}{
		{"new-note-zh.md", zh, NoteOptions{Role: "writer", Date: time.Date(2026, 1, 26, 23, 10, 0, 0, sh), Location: sh, SessionID: "s-42"},
			// The oldest kept user message is question 4.
			"memory/roles/writer/2026-01-26-第-4-个问题-速率限制怎么做.md", [2]int{15, 18}},
		// 16:10 UTC on the 26th is already the 27th in Shanghai: the day is the Location's.
		{"new-note-en.md", en, NoteOptions{Role: "main", Date: time.Date(2026, 1, 26, 16, 10, 0, 0, time.UTC), Location: sh, MessageChars: 100},
			"memory/roles/main/2026-01-27-plan-the-heron-launch-qk-7731-checklist.md", [2]int{4, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(tc.msgs)
			n, err := NewNote(tc.msgs, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if n.Path != tc.path || n.Messages != tc.counts[0] || n.Total != tc.counts[1] {
				t.Errorf("path %q messages %d/%d, want %q %v", n.Path, n.Messages, n.Total, tc.path, tc.counts)
			}
			if !strings.HasSuffix(n.Markdown, "\n") || strings.Contains(n.Markdown, "\r") {
				t.Error("note must end with a newline and hold no CR")
			}
			if !sameMessages(t, before, tc.msgs) {
				t.Error("NewNote changed its input")
			}
			golden(t, tc.name, n.Markdown)
		})
	}
}

func TestNewNoteErrors(t *testing.T) {
	day := time.Date(2026, 1, 26, 12, 0, 0, 0, time.UTC)
	msgs := []Message{u("1", "hi")}
	tests := []struct {
		name string
		msgs []Message
		o    NoteOptions
		want error
	}{
		{"no role", msgs, NoteOptions{Date: day}, ErrInvalid},
		{"role with a slash", msgs, NoteOptions{Role: "a/b", Date: day}, ErrInvalid},
		{"dot role", msgs, NoteOptions{Role: "..", Date: day}, ErrInvalid},
		{"control character", msgs, NoteOptions{Role: "a\nb", Date: day}, ErrInvalid},
		{"no date", msgs, NoteOptions{Role: "main"}, ErrInvalid},
		{"nothing to save", []Message{sys("x"), a("2", "  "), call("3", "", "c"), res("c", "r")}, NoteOptions{Role: "main", Date: day}, ErrNothingToSave},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewNote(tc.msgs, tc.o); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// Without a user message the slug comes from the first message kept.
	n, err := NewNote([]Message{a("1", "Résumé of the week")}, NoteOptions{Role: "main", Date: day, Location: time.UTC})
	if err != nil || n.Slug != "résumé-of-the-week" {
		t.Fatalf("slug %q, %v", n.Slug, err)
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"API design", "api-design"},
		{"我们来构建一个 API 吧", "我们来构建一个-api-吧"},
		{"  --Hello,   World!!  ", "hello-world"},
		{"速率限制（100 请求/分钟）", "速率限制-100-请求-分钟"},
		{"日本語とカタカナ、한국어", "日本語とカタカナ-한국어"},
		{"../../etc/passwd", "etc-passwd"},
		{"C:\\Windows\\con", "c-windows-con"},
		{"😀🎉", FallbackSlug},
		{"", FallbackSlug},
		{"#!?", FallbackSlug},
		{"ÉCOLE Ünïcode", "école-ünïcode"},
		{strings.Repeat("汉", 100), strings.Repeat("汉", MaxSlugChars)},
		{strings.Repeat("word ", 20), strings.TrimSuffix(strings.Repeat("word-", 9), "-")}, // cut back to a word end
		{"tab\tand\nnewline", "tab-and-newline"},
	}
	for _, tc := range tests {
		got := Slug(tc.in)
		if got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if n := len([]rune(got)); n > MaxSlugChars {
			t.Errorf("Slug(%q) has %d characters", tc.in, n)
		}
	}
}
