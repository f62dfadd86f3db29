// Package history stores chat messages in Atrium's state database
// ($ATRIUM_HOME/state.db, SPEC §1) and pages through them (SPEC §3
// history.profile, §6 "History in two domains").
//
// History has two domains (SPEC §6 "History in two domains"): the
// profile-scoped timeline (by profileId: the same on every device, Profile)
// and the conversation-scoped one (by conversationId: one client's
// continuity, Conversation). Both are kept on the same rows: a message's
// ConversationID puts it in a conversation, so one INSERT writes it to both
// domains and one DELETE removes it from both, atomically. Per-session
// reads (Session) build a model's context. The wire shape of a Message is
// the one in docs/PROTOCOL.md. Per SPEC §3 a user message is stored when it
// is sent and an assistant message only when its run ends (final,
// cancelled or error).
package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Message roles stored in history.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message.Error values that are not failures: the run was stopped and
// Content holds whatever text had arrived (possibly none).
const (
	// ErrorCancelled: the person cancelled the run (chat.cancel).
	ErrorCancelled = "cancelled"
	// ErrorInterrupted: the server stopped (shutdown or restart) while the
	// run was in progress.
	ErrorInterrupted = "interrupted"
)

// Paging limits for Profile and Session.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Sentinel errors.
var (
	// ErrInvalid: a message is missing a required field or has an unknown role.
	ErrInvalid = errors.New("invalid message")
	// ErrNotFound: the message (or the paging cursor) does not exist.
	ErrNotFound = errors.New("message not found")
)

// Source points at the memory lines an answer was based on. Lines are
// 1-based and inclusive; Path is workspace-relative with forward slashes.
type Source struct {
	Path      string `json:"path"`
	StartLine int    `json:"startLine"`
	EndLine   int    `json:"endLine"`
}

// Message is one chat message (docs/PROTOCOL.md "Message"). TS is Unix
// milliseconds. RunID links a message to the run that answered it (user
// message) or produced it (assistant message). Error is set on assistant
// messages whose run failed (the failure text), was cancelled
// (ErrorCancelled) or was interrupted by a server stop (ErrorInterrupted);
// Content then holds whatever text had arrived. EndedAt (Unix ms, assistant
// messages only, 0 when unknown) is when the run ended; TS places the
// message in the timeline (see the package doc's ordering rule). Usage
// (assistant messages only) is the run's token usage summed over its model
// calls, as the model servers reported it; nil when none was reported.
type Message struct {
	ID        string `json:"id"`
	ProfileID string `json:"profileId"`
	SessionID string `json:"sessionId"`
	// ConversationID is the client conversation the message belongs to
	// ("" when the sender named none): the conversation domain.
	ConversationID string   `json:"conversationId,omitempty"`
	RunID          string   `json:"runId,omitempty"`
	Role           string   `json:"role"`
	Content        string   `json:"content"`
	TS             int64    `json:"ts"`
	Sources        []Source `json:"sources,omitempty"`
	Error          string   `json:"error,omitempty"`
	EndedAt        int64    `json:"endedAt,omitempty"`
	Usage          *Usage   `json:"usage,omitempty"`
	// Tools are the tool calls of the run that produced this assistant
	// message, in call order, each with its whole result (SPEC §6: the
	// model saw a truncated form; the transcript keeps it all). Empty
	// for user messages and runs without tool calls.
	Tools []ToolRecord `json:"tools,omitempty"`
	// ContentBytes and ContentTruncated are set in what clients receive
	// when Content was cut for them (package chat, ForClient): Content is
	// then its first bytes, ContentBytes the stored text's size.
	ContentBytes     int  `json:"contentBytes,omitempty"`
	ContentTruncated bool `json:"contentTruncated,omitempty"`
	// Meta is what the sender attached to a message, a JSON object, e.g.
	// a spoken message's {"talk": {utteranceId, durationMs, mediaId?}}
	// (docs/PROTOCOL.md "Talk"); nil when none.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// ToolRecord is one tool call of a run and its result. Round is the
// 1-based tool round of the call; Args the argument JSON as the model sent
// it (kept verbatim even when it is not valid JSON, as a JSON string
// then). Status is the result's: "ok", "error", "denied" or "accepted";
// empty when the run ended before the call had a result (cancelled or
// failed mid-call). Summary is the one-line summary the model saw; Error
// the error text of an error or denial; Data the tool's whole output.
type ToolRecord struct {
	CallID  string          `json:"callId"`
	Tool    string          `json:"tool"`
	Round   int             `json:"round"`
	Args    json.RawMessage `json:"args,omitempty"`
	Status  string          `json:"status,omitempty"`
	Summary string          `json:"summary,omitempty"`
	Error   string          `json:"error,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	// Images are the pictures the call returned, by reference (the
	// file's path and the media store's id), never their bytes.
	Images []ImageRef `json:"images,omitempty"`
	// DataBytes and DataTruncated are set in what clients receive when Data
	// was cut for them (package chat, ForClient): Data is then a JSON
	// string holding the first bytes of the output's JSON text, DataBytes the
	// whole size.
	DataBytes     int  `json:"dataBytes,omitempty"`
	DataTruncated bool `json:"dataTruncated,omitempty"`
}

// ImageRef is a picture a tool call returned: Path the file (in the media
// folder or the workspace), MIME its type, MediaID the media store's id
// (clients show it through media.get), Width and Height in pixels and
// Bytes its size, when known.
type ImageRef struct {
	Path    string `json:"path"`
	MIME    string `json:"mime,omitempty"`
	MediaID string `json:"mediaId,omitempty"`
	Width   int    `json:"width,omitempty"`
	Height  int    `json:"height,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"`
}

// Usage counts the tokens of a run: PromptTokens sent to the model (every
// model call of the run, so a prompt resent after a tool call counts
// again) and CompletionTokens it generated.
type Usage struct {
	PromptTokens     int `json:"promptTokens"`
	CompletionTokens int `json:"completionTokens"`
}

// Page is one page of a profile's timeline, oldest message first.
// NextBefore, when not empty, is the cursor for the next older page (pass it
// as before); it is empty when there is nothing older.
type Page struct {
	Messages   []Message `json:"messages"`
	NextBefore string    `json:"nextBefore,omitempty"`
}

// Store reads and writes chat history. It is safe for concurrent use.
type Store struct {
	db *sql.DB
}

// migrations are applied in order, once each; version = index+1.
var migrations = []string{
	`CREATE TABLE IF NOT EXISTS history_messages (
		seq        INTEGER PRIMARY KEY AUTOINCREMENT,
		id         TEXT    NOT NULL UNIQUE,
		profile_id TEXT    NOT NULL,
		session_id TEXT    NOT NULL,
		run_id     TEXT    NOT NULL DEFAULT '',
		role       TEXT    NOT NULL,
		content    TEXT    NOT NULL,
		ts         INTEGER NOT NULL,
		sources    TEXT    NOT NULL DEFAULT '',
		error      TEXT    NOT NULL DEFAULT ''
	);
	CREATE INDEX IF NOT EXISTS history_messages_profile ON history_messages(profile_id, ts, seq);
	CREATE INDEX IF NOT EXISTS history_messages_session ON history_messages(session_id, ts, seq);`,
	// 2: completion time, and the ordering rule for messages stored before
	// it (their assistant ts was the completion time): the answer moves to
	// just after its question and the old ts becomes ended_at.
	`ALTER TABLE history_messages ADD COLUMN ended_at INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX IF NOT EXISTS history_messages_run ON history_messages(run_id);
	UPDATE history_messages AS a
		SET ended_at = a.ts,
		    ts = (SELECT u.ts + 1 FROM history_messages AS u
		          WHERE u.run_id = a.run_id AND u.role = 'user' ORDER BY u.seq LIMIT 1)
		WHERE a.role = 'assistant' AND a.run_id != ''
		  AND EXISTS (SELECT 1 FROM history_messages AS u WHERE u.run_id = a.run_id AND u.role = 'user');`,
	// 3: token usage of a run (assistant messages); 0 = not reported.
	`ALTER TABLE history_messages ADD COLUMN prompt_tokens INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE history_messages ADD COLUMN completion_tokens INTEGER NOT NULL DEFAULT 0;`,
	// 4: the conversation domain (SPEC §6): '' = in no conversation.
	`ALTER TABLE history_messages ADD COLUMN conversation_id TEXT NOT NULL DEFAULT '';
	CREATE INDEX IF NOT EXISTS history_messages_conversation ON history_messages(conversation_id, ts, seq);`,
	// 5: a run's tool calls and their whole results (JSON array of
	// ToolRecord; '' = none), and each session's compaction summary.
	`ALTER TABLE history_messages ADD COLUMN tools TEXT NOT NULL DEFAULT '';
	CREATE TABLE IF NOT EXISTS history_summaries (
		session_id  TEXT    PRIMARY KEY,
		summary     TEXT    NOT NULL DEFAULT '',
		compactions INTEGER NOT NULL DEFAULT 0,
		through_ts  INTEGER NOT NULL DEFAULT 0,
		flushed     INTEGER NOT NULL DEFAULT 0,
		updated_at  INTEGER NOT NULL DEFAULT 0
	);`,
	// 6: closed sessions (SPEC §6 session lifecycle: /new, /reset, the
	// daily and idle resets) and the session that followed each, so that a
	// send naming a closed session still moves on after a restart.
	`CREATE TABLE IF NOT EXISTS history_closed_sessions (
		session_id      TEXT    PRIMARY KEY,
		next_session_id TEXT    NOT NULL,
		profile_id      TEXT    NOT NULL,
		reason          TEXT    NOT NULL DEFAULT '',
		closed_at       INTEGER NOT NULL
	);
	CREATE INDEX IF NOT EXISTS history_closed_sessions_at ON history_closed_sessions(closed_at);`,
	// 7: a message's meta (JSON object; '' = none), e.g. Talk's.
	`ALTER TABLE history_messages ADD COLUMN meta TEXT NOT NULL DEFAULT '';`,
}

// Open creates or upgrades the history tables (history_*) in db and returns
// a Store. It is idempotent: opening the same database again applies only
// missing migrations. db is typically from statedb.Open; the caller closes it.
func Open(db *sql.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("open history: nil database")
	}
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS history_schema (
		version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL DEFAULT (unixepoch()))`); err != nil {
		return nil, fmt.Errorf("open history: create schema table: %w", err)
	}
	for i, stmt := range migrations {
		if err := migrate(ctx, db, i+1, stmt); err != nil {
			return nil, fmt.Errorf("open history: migration %d: %w", i+1, err)
		}
	}
	return &Store{db: db}, nil
}

func migrate(ctx context.Context, db *sql.DB, version int, stmt string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM history_schema WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, stmt); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO history_schema(version) VALUES (?)`, version); err != nil {
		return err
	}
	return tx.Commit()
}

// Validate reports (as ErrInvalid) what is wrong with m, if anything: ID,
// ProfileID and SessionID are required, Role must be "user" or "assistant",
// TS must be positive, Usage's counts must not be negative and Meta, when
// set, must be a JSON object.
func Validate(m Message) error {
	var missing []string
	if m.ID == "" {
		missing = append(missing, "id")
	}
	if m.ProfileID == "" {
		missing = append(missing, "profileId")
	}
	if m.SessionID == "" {
		missing = append(missing, "sessionId")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s", ErrInvalid, strings.Join(missing, ", "))
	}
	if m.Role != RoleUser && m.Role != RoleAssistant {
		return fmt.Errorf("%w: role %q (want %q or %q)", ErrInvalid, m.Role, RoleUser, RoleAssistant)
	}
	if m.TS <= 0 {
		return fmt.Errorf("%w: ts %d must be a positive Unix time in milliseconds", ErrInvalid, m.TS)
	}
	if len(m.Meta) > 0 && (m.Meta[0] != '{' || !json.Valid(m.Meta)) {
		return fmt.Errorf("%w: meta must be a JSON object", ErrInvalid)
	}
	if u := m.Usage; u != nil && (u.PromptTokens < 0 || u.CompletionTokens < 0) {
		return fmt.Errorf("%w: negative token usage %+v", ErrInvalid, *u)
	}
	return nil
}

// Append stores m. It is idempotent by ID: appending a message whose ID is
// already stored does nothing and returns nil (the first version wins).
// Errors: ErrInvalid (see Validate), or a wrapped database error.
func (s *Store) Append(ctx context.Context, m Message) error {
	if err := Validate(m); err != nil {
		return fmt.Errorf("append message: %w", err)
	}
	sources := ""
	if len(m.Sources) > 0 {
		b, err := json.Marshal(m.Sources)
		if err != nil {
			return fmt.Errorf("append message %s: encode sources: %w", m.ID, err)
		}
		sources = string(b)
	}
	var usage Usage
	if m.Usage != nil {
		usage = *m.Usage
	}
	tools := ""
	if len(m.Tools) > 0 {
		b, err := json.Marshal(m.Tools)
		if err != nil {
			return fmt.Errorf("append message %s: encode tool calls: %w", m.ID, err)
		}
		tools = string(b)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO history_messages
		(id, profile_id, session_id, run_id, role, content, ts, sources, error, ended_at, prompt_tokens, completion_tokens, conversation_id, tools, meta)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
		m.ID, m.ProfileID, m.SessionID, m.RunID, m.Role, m.Content, m.TS, sources, m.Error, m.EndedAt,
		usage.PromptTokens, usage.CompletionTokens, m.ConversationID, tools, string(m.Meta))
	if err != nil {
		return fmt.Errorf("append message %s: %w", m.ID, err)
	}
	return nil
}

const cols = `seq, id, profile_id, session_id, run_id, role, content, ts, sources, error, ended_at, prompt_tokens, completion_tokens, conversation_id, tools, meta`

func scanMessage(rows interface{ Scan(...any) error }) (Message, int64, error) {
	var (
		m       Message
		seq     int64
		sources string
		usage   Usage
		tools   string
		meta    string
	)
	if err := rows.Scan(&seq, &m.ID, &m.ProfileID, &m.SessionID, &m.RunID, &m.Role, &m.Content, &m.TS, &sources, &m.Error, &m.EndedAt,
		&usage.PromptTokens, &usage.CompletionTokens, &m.ConversationID, &tools, &meta); err != nil {
		return Message{}, 0, err
	}
	if meta != "" {
		m.Meta = json.RawMessage(meta)
	}
	if tools != "" {
		if err := json.Unmarshal([]byte(tools), &m.Tools); err != nil {
			return Message{}, 0, fmt.Errorf("decode tool calls of message %s: %w", m.ID, err)
		}
	}
	if usage != (Usage{}) {
		m.Usage = &usage
	}
	if sources != "" {
		if err := json.Unmarshal([]byte(sources), &m.Sources); err != nil {
			return Message{}, 0, fmt.Errorf("decode sources of message %s: %w", m.ID, err)
		}
	}
	return m, seq, nil
}

// Get returns the message with the given id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Message, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+cols+` FROM history_messages WHERE id = ?`, id)
	m, _, err := scanMessage(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Message{}, fmt.Errorf("get message %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Message{}, fmt.Errorf("get message %s: %w", id, err)
	}
	return m, nil
}

// Delete removes the message with the given id from both domains (one
// row, one statement: the profile timeline and its conversation lose it
// together) and reports whether it existed. Deleting an id that is not
// stored is not an error: it reports false.
func (s *Store) Delete(ctx context.Context, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM history_messages WHERE id = ?`, id)
	if err != nil {
		return false, fmt.Errorf("delete message %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func clampLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultLimit
	case limit > MaxLimit:
		return MaxLimit
	}
	return limit
}

// Profile returns up to limit messages of profileID's timeline (the
// profile domain), oldest first.
// With before empty it returns the newest page; with before set to a message
// id (normally the previous Page.NextBefore) it returns the page of messages
// just older than that message. Messages are ordered by TS, then by the order
// they were stored (see the package doc's ordering rule). limit <= 0 means DefaultLimit; it is capped at MaxLimit.
// An unknown cursor, or one from another profile, is ErrNotFound.
func (s *Store) Profile(ctx context.Context, profileID, before string, limit int) (Page, error) {
	page, err := s.page(ctx, "profile_id", profileID, before, limit)
	if err != nil {
		return Page{}, fmt.Errorf("profile %s history: %w", profileID, err)
	}
	return page, nil
}

// ConversationProfile returns the profile of conversation conversationID's
// messages (a conversation belongs to the profile of its first message),
// or ok false for a conversation without stored messages.
func (s *Store) ConversationProfile(ctx context.Context, conversationID string) (profileID string, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT profile_id FROM history_messages WHERE conversation_id = ? ORDER BY ts, seq LIMIT 1", conversationID).Scan(&profileID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("conversation %s: %w", conversationID, err)
	}
	return profileID, true, nil
}

// Conversation pages through conversationID's messages (the conversation
// domain) exactly as Profile pages through a profile's: oldest first,
// before a message id cursor, limit defaulted and capped the same way. An
// empty conversationID is ErrInvalid; an unknown cursor, or one from
// another conversation, is ErrNotFound; an unknown conversation is an
// empty page.
func (s *Store) Conversation(ctx context.Context, conversationID, before string, limit int) (Page, error) {
	if conversationID == "" {
		return Page{}, fmt.Errorf("conversation history: %w: conversationId is empty", ErrInvalid)
	}
	page, err := s.page(ctx, "conversation_id", conversationID, before, limit)
	if err != nil {
		return Page{}, fmt.Errorf("conversation %s history: %w", conversationID, err)
	}
	return page, nil
}

// page is one page of the messages whose column key (profile_id or
// conversation_id, never caller input) equals value; see Profile.
func (s *Store) page(ctx context.Context, key, value, before string, limit int) (Page, error) {
	limit = clampLimit(limit)
	var (
		rows *sql.Rows
		err  error
	)
	if before == "" {
		rows, err = s.db.QueryContext(ctx, `SELECT `+cols+` FROM history_messages
			WHERE `+key+` = ? ORDER BY ts DESC, seq DESC LIMIT ?`, value, limit+1)
	} else {
		var ts, seq int64
		err = s.db.QueryRowContext(ctx, `SELECT ts, seq FROM history_messages WHERE id = ? AND `+key+` = ?`,
			before, value).Scan(&ts, &seq)
		if errors.Is(err, sql.ErrNoRows) {
			return Page{}, fmt.Errorf("before %s: cursor: %w", before, ErrNotFound)
		}
		if err != nil {
			return Page{}, fmt.Errorf("before %s: %w", before, err)
		}
		rows, err = s.db.QueryContext(ctx, `SELECT `+cols+` FROM history_messages
			WHERE `+key+` = ? AND (ts < ? OR (ts = ? AND seq < ?))
			ORDER BY ts DESC, seq DESC LIMIT ?`, value, ts, ts, seq, limit+1)
	}
	if err != nil {
		return Page{}, err
	}
	msgs, err := collect(rows)
	if err != nil {
		return Page{}, err
	}
	page := Page{Messages: msgs}
	if len(msgs) > limit {
		page.Messages = msgs[:limit]
	}
	reverse(page.Messages)
	if len(msgs) > limit {
		page.NextBefore = page.Messages[0].ID
	}
	return page, nil
}

// Session returns the newest limit messages of one session, oldest first
// (for building a model's context). limit <= 0 means DefaultLimit; it is
// capped at MaxLimit. An unknown session yields an empty slice.
func (s *Store) Session(ctx context.Context, sessionID string, limit int) ([]Message, error) {
	limit = clampLimit(limit)
	rows, err := s.db.QueryContext(ctx, `SELECT `+cols+` FROM history_messages
		WHERE session_id = ? ORDER BY ts DESC, seq DESC LIMIT ?`, sessionID, limit)
	if err != nil {
		return nil, fmt.Errorf("session %s history: %w", sessionID, err)
	}
	msgs, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("session %s history: %w", sessionID, err)
	}
	reverse(msgs)
	return msgs, nil
}

// Unanswered returns the user messages that started a run (RunID set) but
// have no assistant message for that run — runs whose process was killed
// before it could store an answer. Oldest first.
func (s *Store) Unanswered(ctx context.Context) ([]Message, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+cols+` FROM history_messages AS u
		WHERE u.role = 'user' AND u.run_id != ''
		  AND NOT EXISTS (SELECT 1 FROM history_messages AS a WHERE a.run_id = u.run_id AND a.role = 'assistant')
		ORDER BY u.ts, u.seq`)
	if err != nil {
		return nil, fmt.Errorf("unanswered messages: %w", err)
	}
	msgs, err := collect(rows)
	if err != nil {
		return nil, fmt.Errorf("unanswered messages: %w", err)
	}
	return msgs, nil
}

func collect(rows *sql.Rows) ([]Message, error) {
	defer rows.Close()
	msgs := []Message{}
	for rows.Next() {
		m, _, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}

func reverse(m []Message) {
	for i, j := 0, len(m)-1; i < j; i, j = i+1, j-1 {
		m[i], m[j] = m[j], m[i]
	}
}

// Summary is a session's compaction state (SPEC §6 context economy):
// Text stands for every message of the session with TS ≤ ThroughTS;
// Compactions counts the compactions that produced it; Flushed says the
// memory flush turn has run since the last compaction. UpdatedAt is Unix
// ms. The zero Summary means the session was never compacted.
type Summary struct {
	SessionID   string `json:"sessionId"`
	Text        string `json:"text"`
	Compactions int    `json:"compactions"`
	ThroughTS   int64  `json:"throughTs"`
	Flushed     bool   `json:"flushed"`
	UpdatedAt   int64  `json:"updatedAt"`
}

// Summary returns sessionID's compaction state; a session never compacted
// (or flushed) yields Summary{SessionID: sessionID} and no error.
func (s *Store) Summary(ctx context.Context, sessionID string) (Summary, error) {
	out := Summary{SessionID: sessionID}
	var flushed int
	err := s.db.QueryRowContext(ctx, `SELECT summary, compactions, through_ts, flushed, updated_at
		FROM history_summaries WHERE session_id = ?`, sessionID).Scan(&out.Text, &out.Compactions, &out.ThroughTS, &flushed, &out.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return Summary{}, fmt.Errorf("session %s summary: %w", sessionID, err)
	}
	out.Flushed = flushed != 0
	return out, nil
}

// SetSummary stores sm as its session's compaction state, replacing the
// previous one. Errors: ErrInvalid without a SessionID, or a wrapped
// database error.
func (s *Store) SetSummary(ctx context.Context, sm Summary) error {
	if sm.SessionID == "" {
		return fmt.Errorf("set summary: %w: missing sessionId", ErrInvalid)
	}
	flushed := 0
	if sm.Flushed {
		flushed = 1
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO history_summaries (session_id, summary, compactions, through_ts, flushed, updated_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET summary = excluded.summary,
		compactions = excluded.compactions, through_ts = excluded.through_ts, flushed = excluded.flushed, updated_at = excluded.updated_at`,
		sm.SessionID, sm.Text, sm.Compactions, sm.ThroughTS, flushed, sm.UpdatedAt)
	if err != nil {
		return fmt.Errorf("set summary of session %s: %w", sm.SessionID, err)
	}
	return nil
}

// Closed is a closed session (SPEC §6 session lifecycle): SessionID was
// closed at ClosedAt (Unix ms) for Reason ("manual", "daily", "idle") and
// NextSessionID followed it.
type Closed struct {
	SessionID     string `json:"sessionId"`
	NextSessionID string `json:"nextSessionId"`
	ProfileID     string `json:"profileId"`
	Reason        string `json:"reason,omitempty"`
	ClosedAt      int64  `json:"closedAt"`
}

// CloseSession records c. A session closes once: recording it again keeps
// the first record and returns nil. Errors: ErrInvalid without SessionID,
// NextSessionID or ProfileID, or a wrapped database error.
func (s *Store) CloseSession(ctx context.Context, c Closed) error {
	if c.SessionID == "" || c.NextSessionID == "" || c.ProfileID == "" {
		return fmt.Errorf("close session: %w: sessionId, nextSessionId and profileId are required", ErrInvalid)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO history_closed_sessions
		(session_id, next_session_id, profile_id, reason, closed_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(session_id) DO NOTHING`, c.SessionID, c.NextSessionID, c.ProfileID, c.Reason, c.ClosedAt); err != nil {
		return fmt.Errorf("close session %s: %w", c.SessionID, err)
	}
	return nil
}

// ClosedSessions returns the newest limit (1 … 100000) closed sessions,
// oldest first.
func (s *Store) ClosedSessions(ctx context.Context, limit int) ([]Closed, error) {
	limit = max(1, min(limit, 100000))
	rows, err := s.db.QueryContext(ctx, `SELECT session_id, next_session_id, profile_id, reason, closed_at FROM
		(SELECT *, rowid AS rid FROM history_closed_sessions ORDER BY closed_at DESC, rowid DESC LIMIT ?) ORDER BY closed_at, rid`, limit)
	if err != nil {
		return nil, fmt.Errorf("closed sessions: %w", err)
	}
	defer rows.Close()
	var out []Closed
	for rows.Next() {
		var c Closed
		if err := rows.Scan(&c.SessionID, &c.NextSessionID, &c.ProfileID, &c.Reason, &c.ClosedAt); err != nil {
			return nil, fmt.Errorf("closed sessions: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("closed sessions: %w", err)
	}
	return out, nil
}
