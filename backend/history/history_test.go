package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/atrium-dev/atrium/backend/statedb"
)

func openStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := statedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	return st, path
}

func msg(i int, session string) Message {
	role := RoleUser
	if i%2 == 1 {
		role = RoleAssistant
	}
	return Message{
		ID: fmt.Sprintf("m%02d", i), ProfileID: "main", SessionID: session,
		RunID: fmt.Sprintf("r%02d", i/2), Role: role, Content: fmt.Sprintf("text %d", i),
		TS: 1_700_000_000_000 + int64(i/3), // several messages share a timestamp
	}
}

func ids(ms []Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// openAtVersion opens a new state.db with the history schema up to
// version (as an older Atrium left it).
func openAtVersion(t *testing.T, version int) *sql.DB {
	t.Helper()
	db, err := statedb.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE history_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL DEFAULT (unixepoch()))`); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= version; v++ {
		if err := migrate(context.Background(), db, v, migrations[v-1]); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func TestOpenIsIdempotentAndPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	ctx := context.Background()
	for round := range 3 {
		db, err := statedb.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := Open(db)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := st.Append(ctx, msg(round, "s1")); err != nil {
			t.Fatal(err)
		}
		page, err := st.Profile(ctx, "main", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) != round+1 {
			t.Fatalf("round %d: %d messages after reopen", round, len(page.Messages))
		}
		var versions int
		if err := db.QueryRow(`SELECT COUNT(*) FROM history_schema`).Scan(&versions); err != nil || versions != len(migrations) {
			t.Fatalf("schema versions = %d, %v", versions, err)
		}
		db.Close()
	}
}

func TestAppendValidatesAndIsIdempotent(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	good := Message{ID: "a", ProfileID: "main", SessionID: "s", Role: "user", Content: "hi", TS: 5,
		Sources: []Source{{Path: "MEMORY.md", StartLine: 1, EndLine: 3}}}
	tests := []struct {
		name  string
		edit  func(*Message)
		valid bool
	}{
		{"ok", func(*Message) {}, true},
		{"no id", func(m *Message) { m.ID = "" }, false},
		{"no profile", func(m *Message) { m.ProfileID = "" }, false},
		{"no session", func(m *Message) { m.SessionID = "" }, false},
		{"bad role", func(m *Message) { m.Role = "tool" }, false},
		{"zero ts", func(m *Message) { m.TS = 0 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := good
			tc.edit(&m)
			err := st.Append(ctx, m)
			if tc.valid != (err == nil) {
				t.Fatalf("err = %v, want valid=%v", err, tc.valid)
			}
			if !tc.valid && !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
	dup := good
	dup.Content = "changed"
	if err := st.Append(ctx, dup); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != "hi" || len(got.Sources) != 1 || got.Sources[0].EndLine != 3 {
		t.Fatalf("got %+v", got)
	}
	page, _ := st.Profile(ctx, "main", "", 0)
	if len(page.Messages) != 1 {
		t.Fatalf("duplicate stored: %v", ids(page.Messages))
	}
	if _, err := st.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get unknown: %v", err)
	}
	if ok, err := st.Delete(ctx, "a"); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if ok, _ := st.Delete(ctx, "a"); ok {
		t.Fatal("second Delete reported true")
	}
}

func TestProfilePaging(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	for i := range 11 {
		if err := st.Append(ctx, msg(i, fmt.Sprintf("s%d", i%2))); err != nil {
			t.Fatal(err)
		}
	}
	// Another profile must never show up.
	other := msg(99, "s0")
	other.ProfileID = "writer"
	if err := st.Append(ctx, other); err != nil {
		t.Fatal(err)
	}

	var pages [][]string
	before := ""
	for {
		page, err := st.Profile(ctx, "main", before, 4)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids(page.Messages))
		if page.NextBefore == "" {
			break
		}
		before = page.NextBefore
	}
	want := [][]string{{"m07", "m08", "m09", "m10"}, {"m03", "m04", "m05", "m06"}, {"m00", "m01", "m02"}}
	if fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Fatalf("pages = %v, want %v", pages, want)
	}

	// Exactly one full page: no cursor.
	page, err := st.Profile(ctx, "main", "m03", 3)
	if err != nil || fmt.Sprint(ids(page.Messages)) != "[m00 m01 m02]" || page.NextBefore != "" {
		t.Fatalf("page = %+v, %v", page, err)
	}

	if _, err := st.Profile(ctx, "main", "unknown", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown cursor: %v", err)
	}
	if _, err := st.Profile(ctx, "main", "m99", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cursor of another profile: %v", err)
	}
	empty, err := st.Profile(ctx, "nobody", "", 3)
	if err != nil || empty.Messages == nil || len(empty.Messages) != 0 {
		t.Fatalf("empty profile = %+v, %v", empty, err)
	}
	b, _ := json.Marshal(empty)
	if string(b) != `{"messages":[]}` {
		t.Fatalf("empty page JSON = %s", b)
	}
}

func TestSession(t *testing.T) {
	st, _ := openStore(t)
	ctx := context.Background()
	for i := range 9 {
		if err := st.Append(ctx, msg(i, fmt.Sprintf("s%d", i%3))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Session(ctx, "s1", 2)
	if err != nil || fmt.Sprint(ids(got)) != "[m04 m07]" {
		t.Fatalf("Session = %v, %v", ids(got), err)
	}
	got, err = st.Session(ctx, "none", 2)
	if err != nil || len(got) != 0 {
		t.Fatalf("Session(none) = %v, %v", got, err)
	}
}

func TestMessageJSONShape(t *testing.T) {
	m := Message{ID: "1", ProfileID: "main", SessionID: "s", RunID: "r", Role: "assistant", Content: "c", TS: 7,
		Sources: []Source{{Path: "a.md", StartLine: 1, EndLine: 2}}, Error: "cancelled", EndedAt: 9}
	b, _ := json.Marshal(m)
	want := `{"id":"1","profileId":"main","sessionId":"s","runId":"r","role":"assistant","content":"c","ts":7,"sources":[{"path":"a.md","startLine":1,"endLine":2}],"error":"cancelled","endedAt":9}`
	if string(b) != want {
		t.Fatalf("JSON = %s\nwant  %s", b, want)
	}
	// Stored and read back unchanged.
	st, _ := openStore(t)
	if err := st.Append(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(context.Background(), "1"); err != nil || got.EndedAt != 9 || got.Error != "cancelled" || len(got.Sources) != 1 {
		t.Fatalf("read back = %+v, %v", got, err)
	}
	b, _ = json.Marshal(Message{ID: "1", ProfileID: "main", SessionID: "s", Role: "user", Content: "c", TS: 7})
	if string(b) != `{"id":"1","profileId":"main","sessionId":"s","role":"user","content":"c","ts":7}` {
		t.Fatalf("JSON = %s", b)
	}
}

// TestMigrationAppliesOrderingRule: a database written before the ordering
// rule (assistant ts = completion time) is upgraded so that each answer sits
// right after its question, and the old ts is kept as endedAt.
func TestMigrationAppliesOrderingRule(t *testing.T) {
	ctx := context.Background()
	// Schema version 1 only, with overlapping runs stored the old way.
	db := openAtVersion(t, 1)
	rows := []struct {
		id, run, role string
		ts            int64
	}{
		{"uA", "rA", RoleUser, 1000},
		{"uB", "rB", RoleUser, 2000},
		{"aB", "rB", RoleAssistant, 3000}, // B ended first
		{"aA", "rA", RoleAssistant, 4000},
		{"aX", "", RoleAssistant, 5000}, // no run: left alone
	}
	for _, r := range rows {
		if _, err := db.Exec(`INSERT INTO history_messages (id, profile_id, session_id, run_id, role, content, ts)
			VALUES (?, 'main', 's', ?, ?, 'x', ?)`, r.id, r.run, r.role, r.ts); err != nil {
			t.Fatal(err)
		}
	}
	st, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	page, err := st.Profile(ctx, "main", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(ids(page.Messages)), "[uA aA uB aB aX]"; got != want {
		t.Fatalf("order after migration = %s, want %s", got, want)
	}
	aA, _ := st.Get(ctx, "aA")
	aX, _ := st.Get(ctx, "aX")
	if aA.TS != 1001 || aA.EndedAt != 4000 || aX.TS != 5000 || aX.EndedAt != 0 {
		t.Fatalf("aA = %+v, aX = %+v", aA, aX)
	}
}

// TestUsage: a run's token usage is stored, paged and encoded with its
// message; none reported stays absent; a database of schema 2 gains the
// columns with 0 (= absent) for the messages it holds.
func TestUsage(t *testing.T) {
	ctx := context.Background()
	db := openAtVersion(t, 2)
	if _, err := db.Exec(`INSERT INTO history_messages (id, profile_id, session_id, run_id, role, content, ts)
		VALUES ('old', 'main', 's', 'r0', 'assistant', 'before usage', 10)`); err != nil {
		t.Fatal(err)
	}
	st, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	a := Message{ID: "a1", ProfileID: "main", SessionID: "s", RunID: "r1", Role: RoleAssistant, Content: "北京晴。", TS: 20,
		Usage: &Usage{PromptTokens: 1072, CompletionTokens: 101}}
	if err := st.Append(ctx, a); err != nil {
		t.Fatal(err)
	}
	bad := a
	bad.ID, bad.Usage = "a2", &Usage{PromptTokens: -1}
	if err := st.Append(ctx, bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative usage: %v", err)
	}
	page, err := st.Profile(ctx, "main", "", 10)
	if err != nil || len(page.Messages) != 2 {
		t.Fatalf("page = %+v, %v", page, err)
	}
	if old := page.Messages[0]; old.ID != "old" || old.Usage != nil {
		t.Fatalf("old = %+v", old)
	}
	got := page.Messages[1]
	if got.Usage == nil || *got.Usage != *a.Usage {
		t.Fatalf("usage = %+v", got.Usage)
	}
	b, _ := json.Marshal(got)
	want := `{"id":"a1","profileId":"main","sessionId":"s","runId":"r1","role":"assistant","content":"北京晴。","ts":20,"usage":{"promptTokens":1072,"completionTokens":101}}`
	if string(b) != want {
		t.Fatalf("JSON = %s\nwant  %s", b, want)
	}
}

func TestToolRecordsAndSummary(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	full := `{"text":"whole output, not cut"}`
	tools := []ToolRecord{
		{CallID: "c1", Tool: "web_fetch", Round: 1, Args: json.RawMessage(`{"url":"https://example.com/"}`), Status: "ok", Summary: "GET …: HTTP 200", Data: json.RawMessage(full)},
		{CallID: "c2", Tool: "exec", Round: 2, Args: json.RawMessage(`"{broken"`), Status: "denied", Error: "the person did not grant L2"},
		{CallID: "c3", Tool: "memory_search", Round: 3, Args: json.RawMessage(`{"query":"x"}`)}, // the run ended mid-call
	}
	m := Message{ID: "a1", ProfileID: "main", SessionID: "s", Role: RoleAssistant, Content: "done", TS: 10, Tools: tools}
	if err := s.Append(ctx, m); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got.Tools)
	wb, _ := json.Marshal(tools)
	if string(gb) != string(wb) {
		t.Fatalf("tools = %s\nwant %s", gb, wb)
	}
	// Summaries: none yet, then stored and replaced.
	sm, err := s.Summary(ctx, "s")
	if err != nil || sm != (Summary{SessionID: "s"}) {
		t.Fatalf("summary = %+v, %v", sm, err)
	}
	for _, want := range []Summary{
		{SessionID: "s", Flushed: true, UpdatedAt: 5},
		{SessionID: "s", Text: "摘要 one", Compactions: 1, ThroughTS: 10, UpdatedAt: 6},
	} {
		if err := s.SetSummary(ctx, want); err != nil {
			t.Fatal(err)
		}
		if sm, err = s.Summary(ctx, "s"); err != nil || sm != want {
			t.Fatalf("summary = %+v, %v; want %+v", sm, err, want)
		}
	}
	if err := s.SetSummary(ctx, Summary{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("summary without session: %v", err)
	}
}

// TestMeta: a message's meta (a spoken message's talk block) is kept, a
// database from before it reads as none, and meta that is not a JSON
// object is refused.
func TestMeta(t *testing.T) {
	ctx := context.Background()
	db := openAtVersion(t, 6)
	if _, err := db.Exec(`INSERT INTO history_messages (id, profile_id, session_id, role, content, ts) VALUES ('old', 'main', 's', 'user', 'typed', 10)`); err != nil {
		t.Fatal(err)
	}
	st, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	m := Message{ID: "u1", ProfileID: "main", SessionID: "s", Role: RoleUser, Content: "spoken", TS: 20,
		Meta: json.RawMessage(`{"talk":{"utteranceId":"u-1","durationMs":1450}}`)}
	if err := st.Append(ctx, m); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`[1]`, `{"talk":`, `"x"`} {
		b := m
		b.ID, b.Meta = "bad", json.RawMessage(bad)
		if err := st.Append(ctx, b); !errors.Is(err, ErrInvalid) {
			t.Fatalf("meta %s: %v", bad, err)
		}
	}
	page, err := st.Session(ctx, "s", 10)
	if err != nil || len(page) != 2 {
		t.Fatalf("%+v %v", page, err)
	}
	if page[0].Meta != nil || string(page[1].Meta) != string(m.Meta) {
		t.Fatalf("meta %q, %q", page[0].Meta, page[1].Meta)
	}
	b, _ := json.Marshal(page[1])
	want := `{"id":"u1","profileId":"main","sessionId":"s","role":"user","content":"spoken","ts":20,"meta":{"talk":{"utteranceId":"u-1","durationMs":1450}}}`
	if string(b) != want {
		t.Fatalf("JSON = %s\nwant  %s", b, want)
	}
}
