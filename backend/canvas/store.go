package canvas

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// The kept surfaces, presented pages and user actions live in state.db
// (docs/PROTOCOL.md "Canvas and A2UI"), so they survive a restart.
const schema = `
CREATE TABLE IF NOT EXISTS canvas_surfaces (
	target     TEXT NOT NULL,
	surface_id TEXT NOT NULL,
	body       TEXT NOT NULL,          -- JSON of the compacted surface
	updated_ms INTEGER NOT NULL,
	PRIMARY KEY (target, surface_id)
);
CREATE TABLE IF NOT EXISTS canvas_presented (
	target     TEXT PRIMARY KEY,
	body       TEXT NOT NULL,          -- JSON of the presented page
	updated_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS canvas_actions (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	id           TEXT NOT NULL UNIQUE,
	session_key  TEXT NOT NULL,        -- <profileId>/<sessionId>
	target       TEXT NOT NULL,
	message      TEXT NOT NULL,        -- the user message it becomes
	created_ms   INTEGER NOT NULL,
	sent_ms      INTEGER NOT NULL DEFAULT 0,  -- 0: waiting
	run_id       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS canvas_actions_waiting ON canvas_actions(sent_ms, session_key, seq);
`

type store struct{ db *sql.DB }

func openStore(ctx context.Context, db *sql.DB) (*store, error) {
	if db == nil {
		return nil, errors.New("canvas: Options.DB is required")
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("canvas: create tables: %w", err)
	}
	return &store{db: db}, nil
}

// loadSurfaces reads every kept surface, by target.
func (st *store) loadSurfaces(ctx context.Context) (map[string]map[string]*surface, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT target, surface_id, body FROM canvas_surfaces`)
	if err != nil {
		return nil, fmt.Errorf("canvas: load surfaces: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]*surface{}
	for rows.Next() {
		var target, id, body string
		if err := rows.Scan(&target, &id, &body); err != nil {
			return nil, fmt.Errorf("canvas: load surfaces: %w", err)
		}
		s := &surface{}
		if err := json.Unmarshal([]byte(body), s); err != nil {
			return nil, fmt.Errorf("canvas: surface %s of %s: %w", id, target, err)
		}
		if out[target] == nil {
			out[target] = map[string]*surface{}
		}
		out[target][id] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("canvas: load surfaces: %w", err)
	}
	return out, nil
}

// saveSurfaces writes the surfaces of target that changed (nil: deleted)
// in one transaction.
func (st *store) saveSurfaces(ctx context.Context, target string, changed map[string]*surface, nowMs int64) error {
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("canvas: save surfaces: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	for id, s := range changed {
		if s == nil {
			if _, err := tx.ExecContext(ctx, `DELETE FROM canvas_surfaces WHERE target = ? AND surface_id = ?`, target, id); err != nil {
				return fmt.Errorf("canvas: delete surface %s: %w", id, err)
			}
			continue
		}
		body, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("canvas: encode surface %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO canvas_surfaces (target, surface_id, body, updated_ms) VALUES (?, ?, ?, ?)
			ON CONFLICT (target, surface_id) DO UPDATE SET body = excluded.body, updated_ms = excluded.updated_ms`,
			target, id, string(body), nowMs); err != nil {
			return fmt.Errorf("canvas: save surface %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("canvas: save surfaces: %w", err)
	}
	return nil
}

func (st *store) loadPresented(ctx context.Context) (map[string]*Presented, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT target, body FROM canvas_presented`)
	if err != nil {
		return nil, fmt.Errorf("canvas: load presented pages: %w", err)
	}
	defer rows.Close()
	out := map[string]*Presented{}
	for rows.Next() {
		var target, body string
		if err := rows.Scan(&target, &body); err != nil {
			return nil, fmt.Errorf("canvas: load presented pages: %w", err)
		}
		p := &Presented{}
		if err := json.Unmarshal([]byte(body), p); err != nil {
			return nil, fmt.Errorf("canvas: presented page of %s: %w", target, err)
		}
		out[target] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("canvas: load presented pages: %w", err)
	}
	return out, nil
}

// savePresented stores target's page (nil: none).
func (st *store) savePresented(ctx context.Context, target string, p *Presented, nowMs int64) error {
	if p == nil {
		if _, err := st.db.ExecContext(ctx, `DELETE FROM canvas_presented WHERE target = ?`, target); err != nil {
			return fmt.Errorf("canvas: hide page of %s: %w", target, err)
		}
		return nil
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("canvas: encode page of %s: %w", target, err)
	}
	if _, err := st.db.ExecContext(ctx, `INSERT INTO canvas_presented (target, body, updated_ms) VALUES (?, ?, ?)
		ON CONFLICT (target) DO UPDATE SET body = excluded.body, updated_ms = excluded.updated_ms`, target, string(body), nowMs); err != nil {
		return fmt.Errorf("canvas: save page of %s: %w", target, err)
	}
	return nil
}

// waitingAction is a stored action not yet sent.
type waitingAction struct {
	Seq        int64
	ID         string
	SessionKey string
	Message    string
}

// addAction stores an action (before it is acknowledged) unless the
// session already has max waiting (ErrTooManyActions). It returns how
// many of the session's actions wait, this one included.
func (st *store) addAction(ctx context.Context, id, sessionKey, target, message string, max int, nowMs int64) (int, error) {
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("canvas: store action: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM canvas_actions WHERE sent_ms = 0 AND session_key = ?`, sessionKey).Scan(&n); err != nil {
		return 0, fmt.Errorf("canvas: store action: %w", err)
	}
	if n >= max {
		return n, fmt.Errorf("%w: %d actions already wait for session %s", ErrTooManyActions, n, sessionKey)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO canvas_actions (id, session_key, target, message, created_ms) VALUES (?, ?, ?, ?, ?)`,
		id, sessionKey, target, message, nowMs); err != nil {
		return 0, fmt.Errorf("canvas: store action: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("canvas: store action: %w", err)
	}
	return n + 1, nil
}

// waiting lists the oldest waiting action of each session, oldest first.
func (st *store) waiting(ctx context.Context) ([]waitingAction, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT a.seq, a.id, a.session_key, a.message FROM canvas_actions a
		WHERE a.sent_ms = 0 AND a.seq = (SELECT MIN(b.seq) FROM canvas_actions b WHERE b.sent_ms = 0 AND b.session_key = a.session_key)
		ORDER BY a.seq`)
	if err != nil {
		return nil, fmt.Errorf("canvas: waiting actions: %w", err)
	}
	defer rows.Close()
	var out []waitingAction
	for rows.Next() {
		var w waitingAction
		if err := rows.Scan(&w.Seq, &w.ID, &w.SessionKey, &w.Message); err != nil {
			return nil, fmt.Errorf("canvas: waiting actions: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("canvas: waiting actions: %w", err)
	}
	return out, nil
}

// markSent records that action seq became run runID, and forgets actions
// sent more than a day before.
func (st *store) markSent(ctx context.Context, seq int64, runID string, nowMs int64) error {
	if _, err := st.db.ExecContext(ctx, `UPDATE canvas_actions SET sent_ms = ?, run_id = ? WHERE seq = ?`, nowMs, runID, seq); err != nil {
		return fmt.Errorf("canvas: mark action sent: %w", err)
	}
	if _, err := st.db.ExecContext(ctx, `DELETE FROM canvas_actions WHERE sent_ms > 0 AND sent_ms < ?`, nowMs-24*3600*1000); err != nil {
		return fmt.Errorf("canvas: forget sent actions: %w", err)
	}
	return nil
}
