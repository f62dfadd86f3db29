package route

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/atrium-dev/atrium/backend/memory/embed"
)

// seedRoles are the seed's roles (S000 §5.1) with bilingual keywords and
// descriptions, as config.md front matter would hold them.
var seedRoles = []Role{
	{Name: "code-expert", Description: "Code expert: reviews programs, fixes bugs, tunes databases and servers. 代码专家：审查程序，修复缺陷，调优数据库和服务器。",
		Capabilities: []string{"code", "debug", "performance", "optimize", "代码", "调试", "性能", "优化"}},
	{Name: "writer", Description: "Writer: drafts blog posts, tutorials and release notes in a clear style. 写手：撰写博客、教程和发布说明。",
		Capabilities: []string{"write", "edit", "publish", "article", "写作", "文章", "发布", "编辑"}},
	{Name: "analyst", Description: "Analyst: studies metrics, builds dashboards and forecasts trends. 分析师：研究指标，制作仪表盘，预测趋势。",
		Capabilities: []string{"analyze", "data", "report", "statistics", "分析", "数据", "报告", "统计"}},
	{Name: "main", Description: ""},
}

func TestRoute(t *testing.T) {
	emb := embed.NewBuiltin(embed.BuiltinOptions{})
	for _, tc := range []struct {
		name, text, current string
		role                string
		reason              Reason
		candidates          []string
	}{
		// 1. mentions
		{"mention en", "@code-expert please review this function", "main", "code-expert", ReasonMention, nil},
		{"mention zh", "@code-expert 请帮我审查这段代码", "main", "code-expert", ReasonMention, nil},
		{"mention beats capability", "@writer 优化这段代码的性能", "main", "writer", ReasonMention, nil},
		{"mention case-insensitive", "hey @Writer, thoughts?", "main", "writer", ReasonMention, nil},
		{"mention full-width at", "＠analyst 看一下", "main", "analyst", ReasonMention, nil},
		{"mention after CJK punctuation", "请，@analyst看一下", "main", "analyst", ReasonMention, nil},
		{"two mentions ask", "@writer and @analyst, who is free?", "main", "main", ReasonAsk, []string{"analyst", "writer"}},
		{"same mention twice", "@writer @writer", "main", "writer", ReasonMention, nil},
		{"e-mail is no mention", "mail bob@analyst.example.com today", "main", "main", ReasonStay, nil},
		{"prefix of a role is no mention", "@analy 你好", "main", "main", ReasonStay, nil},
		{"unknown mention falls through", "@nobody 今天天气怎么样", "main", "main", ReasonStay, nil},
		// 2. capabilities
		{"capability zh", "我需要优化这段Python代码的性能", "main", "code-expert", ReasonCapability, nil},
		{"capability en", "Can you debug the crash?", "main", "code-expert", ReasonCapability, nil},
		{"capability en upper case", "PUBLISH the post tomorrow", "main", "writer", ReasonCapability, nil},
		{"capability full-width", "ＤＥＢＵＧ this", "main", "code-expert", ReasonCapability, nil},
		{"capability word start", "debugging session", "main", "code-expert", ReasonCapability, nil},
		{"capability not mid-word", "the antidebug flag", "main", "main", ReasonStay, nil},
		{"capability most keywords win", "写作一篇文章并发布，顺便分析代码", "main", "writer", ReasonCapability, nil},
		{"capability tie asks", "分析 代码", "main", "main", ReasonAsk, []string{"analyst", "code-expert"}},
		{"capability tie en", "edit the data", "writer", "writer", ReasonAsk, []string{"analyst", "writer"}},
		{"capability current role", "统计报告", "analyst", "analyst", ReasonCapability, nil},
		// 3. similarity (no capability keyword in the message)
		{"similarity en", "please draft a blog post for the release", "main", "writer", ReasonSimilarity, nil},
		{"similarity zh", "研究一下指标趋势", "main", "analyst", ReasonSimilarity, nil},
		{"similarity zh servers", "服务器很慢，程序总是崩溃", "main", "code-expert", ReasonSimilarity, nil},
		// 4. stay
		{"stay zh", "今天天气怎么样", "main", "main", ReasonStay, nil},
		{"stay en", "what's the weather today", "writer", "writer", ReasonStay, nil},
		{"stay empty", "", "main", "main", ReasonStay, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Route(context.Background(), tc.text, tc.current, seedRoles, Options{Embedder: emb})
			if err != nil {
				t.Fatal(err)
			}
			if d.Role != tc.role || d.Reason != tc.reason || !slices.Equal(d.Candidates, tc.candidates) {
				t.Errorf("Route(%q, %q) = %+v, want role %q reason %s candidates %v", tc.text, tc.current, d, tc.role, tc.reason, tc.candidates)
			}
		})
	}
}

// TestSimilarityThreshold pins DefaultThreshold's margin for the builtin
// embedder: related messages score above it, unrelated ones below.
func TestSimilarityThreshold(t *testing.T) {
	emb := embed.NewBuiltin(embed.BuiltinOptions{})
	descs := map[string]string{}
	for _, r := range seedRoles {
		descs[r.Name] = r.Description
	}
	for _, tc := range []struct {
		text, role string
		above      bool
	}{
		{"please draft a blog post for the release", "writer", true},
		{"帮我写一篇博客教程", "writer", true},
		{"the dashboard metrics look odd, can you forecast the trend", "analyst", true},
		{"my server keeps crashing, fix the bug", "code-expert", true},
		{"帮我写一篇博客教程", "code-expert", false},
		{"what's the weather today", "writer", false},
		{"今天天气怎么样", "analyst", false},
		{"我们晚上吃什么", "code-expert", false},
		{"hello there", "analyst", false},
	} {
		v, err := emb.Embed(context.Background(), []string{tc.text, descs[tc.role]})
		if err != nil {
			t.Fatal(err)
		}
		c := cosine(v[0], v[1])
		if (c >= DefaultThreshold) != tc.above {
			t.Errorf("cosine(%q, %s) = %.3f; want above %.2f: %v", tc.text, tc.role, c, DefaultThreshold, tc.above)
		}
	}
}

// tieEmbedder gives every input the same vector: every description ties.
type tieEmbedder struct{ embed.Embedder }

func (tieEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, 0}
	}
	return out, nil
}

type failEmbedder struct{ embed.Embedder }

func (failEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, errors.New("provider down")
}

func TestRouteEdges(t *testing.T) {
	roles := []Role{{Name: "a", Description: "x"}, {Name: "b", Description: "y"}}
	d, err := Route(context.Background(), "anything", "main", roles, Options{Embedder: tieEmbedder{}})
	if err != nil || d.Reason != ReasonAsk || d.Role != "main" || !slices.Equal(d.Candidates, []string{"a", "b"}) {
		t.Errorf("equal similarity: %+v %v, want ask [a b]", d, err)
	}
	// A threshold above every score: stay.
	d, err = Route(context.Background(), "anything", "main", roles, Options{Embedder: tieEmbedder{}, Threshold: 1.01})
	if err != nil || d.Reason != ReasonStay {
		t.Errorf("threshold above: %+v %v", d, err)
	}
	if _, err := Route(context.Background(), "anything", "main", roles, Options{Embedder: failEmbedder{}}); err == nil {
		t.Error("embedder failure not reported")
	}
	// Steps 1–2 do not need the embedder.
	if d, err := Route(context.Background(), "@a hi", "main", roles, Options{Embedder: failEmbedder{}}); err != nil || d.Role != "a" {
		t.Errorf("mention with a failing embedder: %+v %v", d, err)
	}
	if _, err := Route(context.Background(), "\xff", "main", roles, Options{}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if d, _ := Route(context.Background(), "please draft a blog post", "main", seedRoles, Options{}); d.Reason != ReasonStay {
		t.Errorf("no embedder: %+v, want stay", d)
	}
	if d, _ := Route(context.Background(), "@writer", "main", nil, Options{}); d.Reason != ReasonStay {
		t.Errorf("no roles: %+v", d)
	}
}
