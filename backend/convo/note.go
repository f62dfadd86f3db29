package convo

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/atrium-dev/atrium/backend/model"
)

// `/new` note defaults (SPEC §6 "Session lifecycle").
const (
	// DefaultNoteMessages is how many of the newest messages a note keeps.
	DefaultNoteMessages = 15
	// DefaultNoteMessageChars cuts each message in a note.
	DefaultNoteMessageChars = 4000
	// MaxSlugChars bounds a slug (characters; at most 4 bytes each, so a
	// file name stays far below the usual 255-byte limit).
	MaxSlugChars = 48
	// FallbackSlug names a note whose first user message yields no slug.
	FallbackSlug = "session"
)

// ErrNothingToSave: the session has no user or assistant text to note.
var ErrNothingToSave = errors.New("convo: nothing to save")

// NoteOptions configure NewNote.
type NoteOptions struct {
	// Role is the role (profile) folder the note goes to. Required: not
	// empty, no '/' or '\', not starting with '.', no control characters.
	Role string
	// Date is when the note is made; its calendar day in Location names the
	// file. Required (not zero).
	Date time.Time
	// Location is the time zone of the date and of the message times shown.
	// Default time.Local.
	Location *time.Location
	// SessionID, when set, is shown in the note.
	SessionID string
	// MaxMessages: how many of the newest messages to keep. Default
	// DefaultNoteMessages (15).
	MaxMessages int
	// MessageChars cuts each message. Default DefaultNoteMessageChars (4000).
	MessageChars int
}

// Note is a rendered `/new` note. Path is workspace-relative,
// "memory/roles/<role>/YYYY-MM-DD-<slug>.md"; Markdown is the file text
// (ends with a newline). The name starts with a date, so memory.Write
// treats it as a daily log (append-only): write it with mode append, which
// creates it, and a second note with the same name on the same day adds a
// section instead of replacing the first.
type Note struct {
	Path     string `json:"path"`
	Slug     string `json:"slug"`
	Markdown string `json:"markdown"`
	// Messages is how many messages the note holds, of Total notable ones.
	Messages int `json:"messages"`
	Total    int `json:"total"`
}

// NewNote renders the newest MaxMessages user and assistant messages of
// msgs (oldest first) as the note `/new` saves (SPEC §6). System and tool
// messages, and assistant messages without text (pure tool calls), are
// left out. The slug comes from the first user message kept (Slug). Each
// message appears under "## User" or "## Assistant" with its local time
// (HH:MM) when its TS is set. Errors: ErrInvalid for a bad Role or zero
// Date; ErrNothingToSave when no message has text.
func NewNote(msgs []Message, o NoteOptions) (Note, error) {
	if err := checkRole(o.Role); err != nil {
		return Note{}, fmt.Errorf("new note: %w", err)
	}
	if o.Date.IsZero() {
		return Note{}, fmt.Errorf("new note: %w: Date is required", ErrInvalid)
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.MaxMessages <= 0 {
		o.MaxMessages = DefaultNoteMessages
	}
	if o.MessageChars <= 0 {
		o.MessageChars = DefaultNoteMessageChars
	}
	var notable []Message
	for _, m := range msgs {
		if (m.Role == model.RoleUser || m.Role == model.RoleAssistant) && !blank(m.Content) {
			notable = append(notable, m)
		}
	}
	if len(notable) == 0 {
		return Note{}, fmt.Errorf("new note for role %s: %w", o.Role, ErrNothingToSave)
	}
	kept := notable[max(0, len(notable)-o.MaxMessages):]
	first := ""
	for _, m := range kept {
		if m.Role == model.RoleUser {
			first = m.Content
			break
		}
	}
	if first == "" {
		first = kept[0].Content
	}
	day := o.Date.In(o.Location).Format("2006-01-02")
	slug := Slug(first)
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", title(first))
	fmt.Fprintf(&b, "- Date: %s\n- Role: %s\n", day, o.Role)
	if o.SessionID != "" {
		fmt.Fprintf(&b, "- Session: %s\n", o.SessionID)
	}
	if len(kept) < len(notable) {
		fmt.Fprintf(&b, "- Messages: the last %d of %d\n", len(kept), len(notable))
	} else {
		fmt.Fprintf(&b, "- Messages: %d\n", len(kept))
	}
	for _, m := range kept {
		who := "User"
		if m.Role == model.RoleAssistant {
			who = "Assistant"
		}
		b.WriteString("\n## " + who)
		if m.TS > 0 {
			b.WriteString(" · " + time.UnixMilli(m.TS).In(o.Location).Format("15:04"))
		}
		b.WriteString("\n\n")
		text := strings.TrimSpace(strings.ReplaceAll(m.Content, "\r\n", "\n"))
		b.WriteString(cutRunes(text, o.MessageChars))
		b.WriteString("\n")
	}
	return Note{
		Path:     "memory/roles/" + o.Role + "/" + day + "-" + slug + ".md",
		Slug:     slug,
		Markdown: b.String(),
		Messages: len(kept),
		Total:    len(notable),
	}, nil
}

// checkRole applies memory's rules for a role folder name.
func checkRole(role string) error {
	switch {
	case role == "":
		return fmt.Errorf("%w: Role is required", ErrInvalid)
	case len(role) > 255, !utf8.ValidString(role), strings.ContainsAny(role, `/\`), strings.HasPrefix(role, "."):
		return fmt.Errorf("%w: role %q is not a valid folder name", ErrInvalid, role)
	}
	for _, r := range role {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: role %q contains a control character", ErrInvalid, role)
		}
	}
	return nil
}

// title is the note heading: the first non-blank line of s, cut at 80
// characters, with Markdown heading marks removed.
func title(s string) string {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#>"))
		if line != "" {
			return cutRunes(line, 80)
		}
	}
	return "Session"
}

// Slug makes a file-name-safe slug of text, Chinese-safe: letters and
// digits of every script are kept (Latin lower-cased, so "API 设计" becomes
// "api-设计"), every other run of characters becomes one '-', and '-' is
// trimmed from both ends. It keeps at most MaxSlugChars characters, cut
// back to the last '-' when that keeps at least half. FallbackSlug when
// nothing is left (emoji or punctuation only, empty text).
func Slug(text string) string {
	var b strings.Builder
	n, dash := 0, false
	for _, r := range text {
		if n >= MaxSlugChars {
			break
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if dash && n > 0 {
				b.WriteByte('-')
				n++
				if n >= MaxSlugChars {
					break
				}
			}
			dash = false
			b.WriteRune(unicode.ToLower(r))
			n++
			continue
		}
		dash = true
	}
	s := strings.TrimRight(b.String(), "-")
	if n >= MaxSlugChars {
		if i := strings.LastIndexByte(s, '-'); i > 0 && utf8.RuneCountInString(s[:i]) >= MaxSlugChars/2 {
			s = s[:i]
		}
	}
	if s == "" {
		return FallbackSlug
	}
	return s
}
