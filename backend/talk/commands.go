package talk

import (
	"strings"
	"unicode"
)

// Voice command kinds (talk.transcript's voiceCommand.kind).
const (
	CommandSlower = "slower"
	CommandFaster = "faster"
	CommandVoice  = "voice"
)

// ParseCommand recognises a voice command: the whole utterance, without
// punctuation, case, a leading "please"/"请" or a trailing "please"/"吧",
// is one of the phrases (en and zh). It returns the kind, or "".
func ParseCommand(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		case unicode.IsSpace(r):
			b.WriteByte(' ')
		}
	}
	s := strings.Join(strings.Fields(b.String()), " ")
	for _, p := range []string{"please ", "can you ", "could you ", "请你", "请", "麻烦"} {
		s = strings.TrimPrefix(s, p)
	}
	for _, p := range []string{" please", "吧", "好吗", "一些"} {
		s = strings.TrimSuffix(s, p)
	}
	switch s {
	case "speak slower", "talk slower", "slower", "slow down", "speak more slowly", "说慢一点", "说慢点", "慢一点", "慢点", "讲慢一点", "说话慢一点":
		return CommandSlower
	case "speak faster", "talk faster", "faster", "speed up", "speak more quickly", "说快一点", "说快点", "快一点", "快点", "讲快一点", "说话快一点":
		return CommandFaster
	case "change the voice", "change voice", "change your voice", "another voice", "different voice", "next voice",
		"换个声音", "换一个声音", "换声音", "换个嗓音", "换一种声音":
		return CommandVoice
	}
	return ""
}

// confirmation is the short spoken answer to a command, in lang ("zh" or
// anything else for English); applied false says it is already at the
// bound.
func confirmation(kind, lang string, applied bool) string {
	zh := lang == "zh"
	switch {
	case !applied && kind == CommandSlower && zh:
		return "已经是最慢了。"
	case !applied && kind == CommandSlower:
		return "That is already the slowest."
	case !applied && kind == CommandFaster && zh:
		return "已经是最快了。"
	case !applied && kind == CommandFaster:
		return "That is already the fastest."
	case kind == CommandSlower && zh:
		return "好的，我说慢一点。"
	case kind == CommandSlower:
		return "Okay, I will speak slower."
	case kind == CommandFaster && zh:
		return "好的，我说快一点。"
	case kind == CommandFaster:
		return "Okay, I will speak faster."
	case zh:
		return "好的，换个声音。"
	}
	return "Okay, here is another voice."
}
