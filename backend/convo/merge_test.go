package convo

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOverlapAndMerge(t *testing.T) {
	tests := []struct {
		name           string
		server, client []Message
		omega          int
		want           string
	}{
		{"both empty", nil, nil, 0, ""},
		{"server empty", nil, []Message{u("1", "hi"), a("2", "hello")}, 0, "u:1(hi) a:2(hello)"},
		{"client empty", []Message{u("1", "hi"), a("2", "hello")}, nil, 0, "u:1(hi) a:2(hello)"},
		{"no overlap", []Message{u("1", "hi"), a("2", "hello")}, []Message{u("3", "again"), a("4", "yes")}, 0,
			"u:1(hi) a:2(hello) u:3(again) a:4(yes)"},
		{"partial overlap, client ahead", []Message{u("1", "hi"), a("2", "hello"), u("3", "q")},
			[]Message{a("2", "hello"), u("3", "q"), a("4", "answer"), u("5", "next")}, 2,
			"u:1(hi) a:2(hello) u:3(q) a:4(answer) u:5(next)"},
		{"full overlap", []Message{u("1", "hi"), a("2", "hello")}, []Message{u("1", "hi"), a("2", "hello")}, 2,
			"u:1(hi) a:2(hello)"},
		{"client is a suffix", []Message{u("1", "hi"), a("2", "hello"), u("3", "q")}, []Message{u("3", "q")}, 1,
			"u:1(hi) a:2(hello) u:3(q)"},
		{"server ahead: client is inside server", []Message{u("1", "a"), a("2", "b"), u("3", "c"), a("4", "d")},
			[]Message{a("2", "b"), u("3", "c")}, 0, "u:1(a) a:2(b) u:3(c) a:4(d)"},
		{"server ahead without ids", []Message{u("", "a"), a("", "b"), u("", "c"), a("", "d")},
			[]Message{a("", "b"), u("", "c")}, 0, "u(a) a(b) u(c) a(d)"},
		{"known ids in the tail are not duplicated", []Message{u("1", "a"), a("2", "b"), u("3", "c")},
			[]Message{u("1", "a"), u("9", "new")}, 0, "u:1(a) a:2(b) u:3(c) u:9(new)"},
		{"by content when the client has no ids", []Message{u("1", "你好"), a("2", "你好！有什么可以帮你？")},
			[]Message{a("", "你好！有什么可以帮你？"), u("", "今天天气怎么样")}, 1,
			"u:1(你好) a:2(你好！有什么可以帮你？) u(今天天气怎么样)"},
		{"ids differ though content is equal", []Message{u("1", "ok")}, []Message{u("7", "ok")}, 0, "u:1(ok) u:7(ok)"},
		{"role matters", []Message{u("", "ok")}, []Message{a("", "ok"), u("", "next")}, 0, "u(ok) a(ok) u(next)"},
		{"duplicates inside the server side: largest k wins",
			[]Message{u("", "x"), a("", "y"), u("", "x"), a("", "y")},
			[]Message{u("", "x"), a("", "y"), u("", "x"), a("", "y"), u("", "z")}, 4,
			"u(x) a(y) u(x) a(y) u(z)"},
		{"duplicates inside the client side",
			[]Message{u("", "go"), a("", "done")},
			[]Message{a("", "done"), u("", "go"), a("", "done"), u("", "go")}, 1,
			"u(go) a(done) u(go) a(done) u(go)"},
		{"tool turn across the overlap", []Message{u("1", "find"), call("2", "", "c1"), res("c1", "hit")},
			[]Message{call("2", "", "c1"), res("c1", "hit"), a("3", "found it")}, 2,
			"u:1(find) a:2+c1() t=c1(hit) a:3(found it)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Overlap(tc.server, tc.client); got != tc.omega {
				t.Errorf("Overlap = %d, want %d", got, tc.omega)
			}
			srv, cli := deepCopy(tc.server), deepCopy(tc.client)
			if got := show(Merge(tc.server, tc.client)); got != tc.want {
				t.Errorf("Merge =\n  %s\nwant\n  %s", got, tc.want)
			}
			if !sameMessages(t, srv, tc.server) || !sameMessages(t, cli, tc.client) {
				t.Error("Merge changed its input")
			}
		})
	}
}

func TestMergeDoesNotAliasServer(t *testing.T) {
	server := make([]Message, 2, 10) // spare capacity: an append would write into it
	server[0], server[1] = u("1", "a"), a("2", "b")
	m := Merge(server, []Message{u("3", "c")})
	m[0].Content = "changed"
	if server[0].Content != "a" {
		t.Fatal("Merge result aliases the server slice")
	}
	if got := server[:3][2].Content; got != "" {
		t.Fatalf("Merge wrote into server's spare capacity: %q", got)
	}
}

func TestFit(t *testing.T) {
	long := strings.Repeat("汉", 2500) // 7500 bytes
	turns := func(n int) []Message {
		var out []Message
		for i := range n {
			out = append(out, u("", "q"+string(rune('a'+i))), a("", "r"+string(rune('a'+i))))
		}
		return out
	}
	tests := []struct {
		name string
		in   []Message
		b    Budget
		want string
	}{
		{"empty", nil, Budget{}, ""},
		{"at most U user turns", turns(12), Budget{},
			"u(qc) a(rc) u(qd) a(rd) u(qe) a(re) u(qf) a(rf) u(qg) a(rg) u(qh) a(rh) u(qi) a(ri) u(qj) a(rj) u(qk) a(rk) u(ql) a(rl)"},
		{"U from options", turns(4), Budget{UserTurns: 2}, "u(qc) a(rc) u(qd) a(rd)"},
		{"the reply before the oldest kept user turn goes with it", append([]Message{a("", "greeting")}, turns(10)...), Budget{},
			strings.TrimSpace(show(turns(10)))},
		{"fewer than U turns keeps a leading reply", append([]Message{a("", "greeting")}, turns(2)...), Budget{},
			"a(greeting) u(qa) a(ra) u(qb) a(rb)"},
		{"blank messages are dropped", []Message{u("", "q"), a("e", " \n"), u("", "q2")}, Budget{}, "u(q) u(q2)"},
		{"system messages count as messages", []Message{sys("summary"), u("", "q")}, Budget{}, "s(summary) u(q)"},
		{"each message cut at L runes", []Message{u("", long)}, Budget{}, "u(汉汉汉汉汉汉汉汉汉汉汉汉…2000)"},
		{"whole cut at B, oldest dropped", []Message{u("", long), a("", long), u("", long), a("", long), u("", long), a("", long), u("", long)},
			Budget{}, "a(汉汉汉汉汉汉汉汉汉汉汉汉…2000) u(汉汉汉汉汉汉汉汉汉汉汉汉…2000) a(汉汉汉汉汉汉汉汉汉汉汉汉…2000) u(汉汉汉汉汉汉汉汉汉汉汉汉…2000) a(汉汉汉汉汉汉汉汉汉汉汉汉…2000) u(汉汉汉汉汉汉汉汉汉汉汉汉…2000)"},
		{"B stops at the first unit that does not fit", []Message{u("", "old"), u("", strings.Repeat("x", 30)), u("", "new")},
			Budget{TotalChars: 10}, "u(new)"},
		{"MaxMessages", turns(5), Budget{MaxMessages: 3}, "a(rd) u(qe) a(re)"},
		{"tool call and results are kept together",
			[]Message{u("", "q1"), call("", "", "c1", "c2"), res("c1", strings.Repeat("r", 5)), res("c2", strings.Repeat("s", 5)), a("", "done")},
			Budget{TotalChars: 4 + 2*5 + 2*(13+13)},
			"a+c1+c2() t=c1(rrrrr) t=c2(sssss) a(done)"},
		{"a tool unit that does not fit is dropped whole, never split",
			[]Message{u("", "q1"), call("", "", "c1", "c2"), res("c1", strings.Repeat("r", 5)), res("c2", strings.Repeat("s", 5)), a("", "done")},
			Budget{TotalChars: 4 + 2*5 + 2*(13+13) - 1},
			"a(done)"},
		{"dangling call (aborted run) is removed", []Message{u("", "q"), call("", "", "c1")}, Budget{}, "u(q)"},
		{"dangling call keeps the assistant text", []Message{u("", "q"), call("", "let me look", "c1", "c2"), res("c2", "r2")}, Budget{},
			"u(q) a+c2(let me look) t=c2(r2)"},
		{"orphan tool result is dropped", []Message{u("", "q"), res("c9", "stray"), a("", "ok")}, Budget{}, "u(q) a(ok)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(tc.in)
			got := Fit(tc.in, tc.b)
			if s := show(got); s != tc.want {
				t.Errorf("Fit =\n  %s\nwant\n  %s", s, tc.want)
			}
			if !sameMessages(t, before, tc.in) {
				t.Error("Fit changed its input")
			}
			b := tc.b.withDefaults()
			total := 0
			for _, m := range got {
				if n := utf8.RuneCountInString(m.Content); n > b.MessageChars {
					t.Errorf("message of %d runes > L", n)
				}
				if !utf8.ValidString(m.Content) {
					t.Errorf("invalid UTF-8 after cut")
				}
				total += utf8.RuneCountInString(m.Content) + callChars(m)
			}
			if total > b.TotalChars {
				t.Errorf("total %d > B %d", total, b.TotalChars)
			}
		})
	}
}

func TestCutRunes(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"", 5, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
		{"汉字汉字", 4, "汉字汉字"}, // 12 bytes, 4 runes: not cut
		{"汉字汉字", 3, "汉字…"},  // cut between characters, never inside one
		{"é́x", 2, "é…"},    // e + combining accent count as two runes
		{"😀😀😀", 2, "😀…"},
		{"abc", 1, "…"},
		{"abc", 0, ""},
		{"a\xffb\xffc", 3, "a\xff…"}, // invalid bytes count one each and are kept
	}
	for _, tc := range tests {
		if got := cutRunes(tc.s, tc.n); got != tc.want {
			t.Errorf("cutRunes(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestFitCutsInsideMultiByteRun(t *testing.T) {
	// 1999 ASCII bytes then Chinese: byte 2000 falls inside the 3-byte
	// character "中", rune 2000 is the character after it.
	s := strings.Repeat("a", 1999) + "中文内容"
	got := Fit([]Message{u("", s)}, Budget{})
	c := got[0].Content
	if !utf8.ValidString(c) || utf8.RuneCountInString(c) != 2000 || c != strings.Repeat("a", 1999)+Ellipsis {
		t.Fatalf("cut = …%q (%d runes)", c[len(c)-8:], utf8.RuneCountInString(c))
	}
	s = strings.Repeat("中", 1998) + "文内容"
	c = Fit([]Message{u("", s)}, Budget{})[0].Content
	if !utf8.ValidString(c) || c != strings.Repeat("中", 1998)+"文"+Ellipsis {
		t.Fatalf("Chinese cut = …%q", c[len(c)-9:])
	}
}

func TestBuildContext(t *testing.T) {
	server := []Message{u("1", "我们来构建一个 API 吧"), a("2", "好的！你需要什么端点？")}
	client := []Message{a("2", "好的！你需要什么端点？"), u("3", "用户和认证"), a("4", strings.Repeat("代码", 3000))}
	got := BuildContext(server, client, Budget{TotalChars: 2010})
	if s := show(got); s != "u:3(用户和认证) a:4(代码代码代码代码代码代码…2000)" {
		t.Fatalf("BuildContext = %s", s)
	}
}
