package convo

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/model"
)

func u(id, text string) Message {
	return Message{ID: id, Message: model.Message{Role: model.RoleUser, Content: text}}
}

func a(id, text string) Message {
	return Message{ID: id, Message: model.Message{Role: model.RoleAssistant, Content: text}}
}

func sys(text string) Message {
	return Message{Message: model.Message{Role: model.RoleSystem, Content: text}}
}

// call is an assistant turn calling memory_search once per call id.
func call(id, text string, callIDs ...string) Message {
	m := a(id, text)
	for _, c := range callIDs {
		m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: c, Name: "memory_search", Arguments: json.RawMessage(`{"query":"q"}`)})
	}
	return m
}

// res is the tool result of call callID.
func res(callID, text string) Message {
	return Message{Message: model.Message{Role: model.RoleTool, ToolCallID: callID, Name: "memory_search", Content: text}}
}

// show renders messages compactly for comparisons: role[:id][calls](content).
func show(msgs []Message) string {
	var parts []string
	for _, m := range msgs {
		s := m.Role[:1]
		if m.ID != "" {
			s += ":" + m.ID
		}
		for _, c := range m.ToolCalls {
			s += "+" + c.ID
		}
		if m.ToolCallID != "" {
			s += "=" + m.ToolCallID
		}
		c := m.Content
		if len([]rune(c)) > 12 {
			c = string([]rune(c)[:12]) + fmt.Sprintf("…%d", len([]rune(c)))
		}
		parts = append(parts, s+"("+c+")")
	}
	return strings.Join(parts, " ")
}

// deepCopy copies msgs including their tool call slices.
func deepCopy(msgs []Message) []Message {
	if msgs == nil {
		return nil
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		m.ToolCalls = append([]model.ToolCall(nil), m.ToolCalls...)
		out[i] = m
	}
	return out
}

// sameMessages compares two transcripts field by field.
func sameMessages(t *testing.T, got, want []Message) bool {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return string(g) == string(w)
}
