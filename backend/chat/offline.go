package chat

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/history"
	"github.com/atrium-dev/atrium/backend/memory"
	"github.com/atrium-dev/atrium/backend/model"
)

// Offline defaults.
const (
	// OfflineModel is what the offline provider reports as its model.
	OfflineModel = "memory-search"
	// DefaultOfflineResults is how many passages an offline answer quotes.
	DefaultOfflineResults = 4
	// OfflineSnippetChars cuts each quoted snippet (characters).
	OfflineSnippetChars = 400
	// offlineQueryChars cuts the user message used as the search query.
	offlineQueryChars = 500
)

// OfflineOptions configure the offline provider.
type OfflineOptions struct {
	// Memory is searched for every answer. Required.
	Memory Searcher
	// MaxResults is how many passages to quote. Default DefaultOfflineResults.
	MaxResults int
	// MinScore is the search floor; 0 means the memory engine's default
	// (memory.DefaultMinScore), negative means no floor.
	MinScore float64
}

// Offline is the built-in "offline" provider (SPEC §6): with no model
// configured it answers from memory search. Its answer says plainly that no
// model is configured and how to configure one, then quotes the best
// matching memory passages, each with its source as path:startLine-endLine.
// It streams the answer in several chunks like a real model. It never calls
// tools and is safe for concurrent use.
type Offline struct {
	opts OfflineOptions
	// traditional is offlineChinese in Traditional characters, converted
	// on the first question written in Traditional (offline_script.go).
	traditional func() (offlineText, error)
}

// NewOffline returns the offline provider.
func NewOffline(opts OfflineOptions) *Offline {
	if opts.MaxResults <= 0 {
		opts.MaxResults = DefaultOfflineResults
	}
	return &Offline{opts: opts, traditional: sync.OnceValues(offlineTraditional)}
}

// Name reports "offline".
func (o *Offline) Name() string { return model.ProviderOffline }

// Model reports OfflineModel.
func (o *Offline) Model() string { return OfflineModel }

// Stream implements model.Provider: it answers the last user message of req.
func (o *Offline) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	resp, _, err := o.Answer(ctx, lastUserText(req), onDelta)
	return resp, err
}

// lastUserText is the content of req's last user message ("" when none).
func lastUserText(req model.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			return req.Messages[i].Content
		}
	}
	return ""
}

// Answer searches memory for query and streams the offline answer through
// onDelta (paragraph by paragraph). It returns the whole answer and the
// sources it quoted. A failed search is reported inside the answer, not as
// an error; the only error is ctx's (the partial answer is returned with it).
func (o *Offline) Answer(ctx context.Context, query string, onDelta func(model.Delta)) (model.Response, []history.Source, error) {
	resp, src, _, err := o.answer(ctx, query, onDelta)
	return resp, src, err
}

// OfflineCard is what an offline answer found, for the Canvas card the
// wiring shows beside it (Options.OfflineCard): the question (cut as the
// search used it), the passages, and whether the answer is in Chinese.
type OfflineCard struct {
	ProfileID, SessionID string
	Query                string
	Results              []memory.SearchResult
	Chinese              bool
}

// answer is Answer that also returns the search results it quoted.
func (o *Offline) answer(ctx context.Context, query string, onDelta func(model.Delta)) (model.Response, []history.Source, []memory.SearchResult, error) {
	if onDelta == nil {
		onDelta = func(model.Delta) {}
	}
	q := strings.TrimSpace(query)
	if utf8.RuneCountInString(q) > offlineQueryChars {
		q = string([]rune(q)[:offlineQueryChars])
	}
	var (
		results   []memory.SearchResult
		searchErr error
	)
	if q != "" && o.opts.Memory != nil {
		res, err := o.opts.Memory.Search(ctx, memory.SearchOptions{Query: q, MaxResults: o.opts.MaxResults, MinScore: o.opts.MinScore})
		if err != nil && ctx.Err() != nil {
			return model.Response{}, nil, nil, fmt.Errorf("offline answer: %w", ctx.Err())
		}
		results, searchErr = res.Results, err
		if len(results) > o.opts.MaxResults {
			results = results[:o.opts.MaxResults]
		}
	}

	msg := o.wording(q)
	var parts []string
	parts = append(parts, msg.noModel)
	var sources []history.Source
	switch {
	case searchErr != nil:
		parts = append(parts, fmt.Sprintf(msg.failed, searchErr))
	case len(results) == 0:
		parts = append(parts, fmt.Sprintf(msg.nothing, oneLine(q, 120)))
	default:
		parts = append(parts, msg.found(oneLine(q, 120), len(results)))
		for i, r := range results {
			src := history.Source{Path: r.Path, StartLine: r.StartLine, EndLine: r.EndLine}
			sources = append(sources, src)
			parts = append(parts, fmt.Sprintf(msg.passage, i+1, r.Path, r.StartLine, r.EndLine, r.Score, quote(r.Snippet)))
		}
	}
	parts = append(parts, msg.configure)

	var text strings.Builder
	for _, p := range parts {
		if err := ctx.Err(); err != nil {
			return model.Response{Content: text.String()}, sources, results, fmt.Errorf("offline answer: %w", err)
		}
		text.WriteString(p)
		onDelta(model.Delta{Content: p})
	}
	if searchErr != nil {
		results = nil
	}
	return model.Response{Content: text.String(), FinishReason: "stop"}, sources, results, nil
}

// offlineText is the offline answer's wording in one language. The answer is
// in Chinese when the question contains Han characters, else in English; in
// Traditional characters when the question is written in them (wording).
type offlineText struct {
	noModel, failed, nothing, passage, configure string
	found                                        func(query string, n int) string
}

const configExample = "`\"model\": {\"provider\": \"openai\", \"baseUrl\": \"https://api.openai.com/v1\", \"apiKey\": \"sk-...\", \"model\": \"gpt-4o-mini\"}`"

var offlineEnglish = offlineText{
	noModel: "**No model is configured**, so I cannot think about your message; " +
		"this answer comes straight from a search of your memory (offline mode).\n\n",
	failed:  "Memory search failed: %v.\n\n",
	nothing: "I found nothing in memory that matches “%s”.\n\n",
	found: func(q string, n int) string {
		noun := "passages"
		if n == 1 {
			noun = "passage"
		}
		return fmt.Sprintf("Here is what I found in memory for “%s” (%d %s):\n\n", q, n, noun)
	},
	passage: "%d. `%s:%d-%d` (score %.2f)\n%s\n\n",
	configure: "To get real answers, configure a model in one of these ways:\n" +
		"- open **Settings → Model**, pick a server and a model and save: it applies at once, no restart;\n" +
		"- or add a `model` block to config.json, e.g. " + configExample + ";\n" +
		"- or set OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible server such as llama.cpp, vLLM, LM Studio or DeepSeek);\n" +
		"- or run a local Ollama at 127.0.0.1:11434 with a model pulled (`ollama pull llama3.2`).\n" +
		"A hand-edited config.json and the environment are read when Atrium starts; Settings needs no restart.",
}

// offlineChineseFound is the Chinese "found" line: the question, the count.
const offlineChineseFound = "关于“%s”，我在记忆中找到 %d 段内容：\n\n"

// chineseFound returns a "found" line from a format with the question (%s)
// and the count (%d).
func chineseFound(format string) func(string, int) string {
	return func(q string, n int) string { return fmt.Sprintf(format, q, n) }
}

var offlineChinese = offlineText{
	noModel: "**尚未配置模型**（No model is configured），所以我无法思考你的问题；" +
		"以下内容直接来自对记忆的搜索（离线模式）。\n\n",
	failed:  "记忆搜索失败：%v。\n\n",
	nothing: "记忆中没有找到与“%s”相关的内容。\n\n",
	found:   chineseFound(offlineChineseFound),
	passage: "%d. `%s:%d-%d`（得分 %.2f）\n%s\n\n",
	configure: "要得到真正的回答，请用以下任一方式配置模型：\n" +
		"- 打开 **设置 → 模型**，选择服务器和模型后保存：立即生效，无需重启；\n" +
		"- 或在 config.json 中加入 `model` 配置，例如 " + configExample + "；\n" +
		"- 或设置 OPENAI_API_KEY（连接其他 OpenAI 兼容服务，如 llama.cpp、vLLM、LM Studio、DeepSeek 时再设置 OPENAI_BASE_URL）；\n" +
		"- 或在 127.0.0.1:11434 运行本地 Ollama 并拉取一个模型（`ollama pull qwen2.5`）。\n" +
		"手动编辑的 config.json 和环境变量在 Atrium 启动时读取；在设置中保存则无需重启。",
}

// hasHan reports whether s contains a Han (Chinese) character.
func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

// quote renders a snippet as a Markdown block quote, cut at OfflineSnippetChars.
func quote(snippet string) string {
	s := strings.TrimSpace(snippet)
	if utf8.RuneCountInString(s) > OfflineSnippetChars {
		s = string([]rune(s)[:OfflineSnippetChars]) + "…"
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			lines[i] = ">"
		} else {
			lines[i] = "> " + l
		}
	}
	return strings.Join(lines, "\n")
}

// oneLine flattens s to one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}
