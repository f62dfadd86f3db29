package agent

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// DefaultResultChars caps the text of one tool result given to the model
// (characters of ForModel's output body).
const DefaultResultChars = 8000

// Truncate cuts s to at most max characters as head + marker + tail
// (SPEC §6: the model sees a truncated body, the transcript keeps it all):
// the first and last parts are kept whole characters, split about evenly
// around "\n…[N characters cut]…\n". s is returned unchanged when it fits;
// max below 64 is taken as 64. cut reports whether anything was cut.
func Truncate(s string, max int) (out string, cut bool) {
	max = maxInt(max, 64)
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s, false
	}
	r := []rune(s)
	// The marker's length depends on the number it names; size it for n.
	marker := func(k int) string { return fmt.Sprintf("\n…[%d characters cut]…\n", k) }
	keep := max - utf8.RuneCountInString(marker(n))
	head := keep - keep/2
	tail := keep / 2
	return string(r[:head]) + marker(n-head-tail) + string(r[n-tail:]), true
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// modelView is the tool message the model reads.
type modelView struct {
	CallID  string          `json:"callId"`
	Status  Status          `json:"status"`
	Summary string          `json:"summary"`
	Error   string          `json:"error,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Truncated: Data is a JSON string holding head + marker + tail of
	// the output's JSON text, which had FullChars characters.
	Truncated bool `json:"truncated,omitempty"`
	FullChars int  `json:"fullChars,omitempty"`
}

// ForModel renders r for the model: a JSON object {callId, status,
// summary, error?, data} whose data is the whole output when its JSON
// text has at most max characters, else a string with its head and tail
// (Truncate) and "truncated": true, "fullChars": N. The Result itself is
// not changed (the transcript keeps the whole output).
func ForModel(r Result, max int) string {
	v := modelView{CallID: r.CallID, Status: r.Status, Summary: r.LogSummary, Error: r.Error}
	if r.Error != "" {
		v.Error, _ = Truncate(r.Error, max)
	}
	if len(r.Data) > 0 {
		text := string(r.Data)
		if cut, did := Truncate(text, max); did {
			s, _ := encode(cut)
			v.Data, v.Truncated, v.FullChars = s, true, utf8.RuneCountInString(text)
		} else {
			v.Data = r.Data
		}
	}
	b, err := encode(v)
	if err != nil { // cannot happen: every field encodes
		return fmt.Sprintf(`{"callId":%q,"status":"error","error":"result could not be encoded"}`, r.CallID)
	}
	return string(b)
}
