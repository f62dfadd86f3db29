package collab

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// This file keeps collaborations in state.db (SPEC §1: "collaborations";
// tables collab_collaborations and collab_events), so that they survive a
// restart and List shows their history. Only the SHA-256 of a token is
// stored.

const schema = `
CREATE TABLE IF NOT EXISTS collab_collaborations (
	id              TEXT PRIMARY KEY,
	from_role       TEXT NOT NULL,
	to_role         TEXT NOT NULL,
	task            TEXT NOT NULL,
	context         TEXT NOT NULL,          -- JSON array of workspace-relative paths
	token_hash      TEXT NOT NULL,          -- hex SHA-256 of the token
	status          TEXT NOT NULL,          -- pending | accepted | completed
	created_ms      INTEGER NOT NULL,
	expires_ms      INTEGER NOT NULL,
	accepted_ms     INTEGER NOT NULL DEFAULT 0,
	completed_ms    INTEGER NOT NULL DEFAULT 0,
	completed_by    TEXT NOT NULL DEFAULT '',
	result          TEXT NOT NULL DEFAULT '', -- JSON Result, '' until completed
	summary_path    TEXT NOT NULL DEFAULT '',
	summary_version TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS collab_by_created ON collab_collaborations(created_ms);
CREATE TABLE IF NOT EXISTS collab_events (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	collab_id TEXT NOT NULL REFERENCES collab_collaborations(id),
	at_ms     INTEGER NOT NULL,
	role      TEXT NOT NULL,
	action    TEXT NOT NULL,
	detail    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS collab_events_by_collab ON collab_events(collab_id, seq);
`

// row is a stored collaboration with its token hash.
type row struct {
	Collaboration
	tokenHash string
}

func createTables(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("collab: create tables: %w", err)
	}
	return nil
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// insert stores a new collaboration and its first event in one transaction.
func insert(ctx context.Context, db *sql.DB, r row, ev Event) error {
	ctxJSON, err := json.Marshal(r.Context)
	if err != nil {
		return fmt.Errorf("collab: encode context: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("collab: store %s: %w", r.ID, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO collab_collaborations
		(id, from_role, to_role, task, context, token_hash, status, created_ms, expires_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.From, r.To, r.Task, string(ctxJSON), r.tokenHash, string(r.Status), ms(r.CreatedAt), ms(r.ExpiresAt)); err != nil {
		return fmt.Errorf("collab: store %s: %w", r.ID, err)
	}
	if err := addEvent(ctx, tx, r.ID, ev); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("collab: store %s: %w", r.ID, err)
	}
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

func addEvent(ctx context.Context, x execer, id string, ev Event) error {
	if _, err := x.ExecContext(ctx, `INSERT INTO collab_events (collab_id, at_ms, role, action, detail) VALUES (?, ?, ?, ?, ?)`,
		id, ms(ev.At), ev.Role, ev.Action, ev.Detail); err != nil {
		return fmt.Errorf("collab: record %s of %s: %w", ev.Action, id, err)
	}
	return nil
}

// update applies a state change (set, with args) to collaboration id if it
// is still in state from, and records ev, in one transaction. ok is false
// when the collaboration was no longer in state from.
func update(ctx context.Context, db *sql.DB, id string, from Status, set string, args []any, ev Event) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("collab: update %s: %w", id, err)
	}
	defer tx.Rollback()
	q := "UPDATE collab_collaborations SET " + set + " WHERE id = ? AND status = ?"
	res, err := tx.ExecContext(ctx, q, append(args, id, string(from))...)
	if err != nil {
		return false, fmt.Errorf("collab: update %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return false, err
	}
	if err := addEvent(ctx, tx, id, ev); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("collab: update %s: %w", id, err)
	}
	return true, nil
}

// event records ev alone (a write through a collaboration).
func event(ctx context.Context, db *sql.DB, id string, ev Event) error {
	return addEvent(ctx, db, id, ev)
}

const selectCols = `id, from_role, to_role, task, context, token_hash, status, created_ms, expires_ms,
	accepted_ms, completed_ms, completed_by, result, summary_path, summary_version`

type scanner interface{ Scan(dest ...any) error }

func scanRow(s scanner) (row, error) {
	var r row
	var ctxJSON, status, result string
	var created, expires, accepted, completed int64
	if err := s.Scan(&r.ID, &r.From, &r.To, &r.Task, &ctxJSON, &r.tokenHash, &status, &created, &expires,
		&accepted, &completed, &r.CompletedBy, &result, &r.SummaryPath, &r.SummaryVersion); err != nil {
		return row{}, err
	}
	r.Status = Status(status)
	r.CreatedAt, r.ExpiresAt, r.AcceptedAt, r.CompletedAt = fromMS(created), fromMS(expires), fromMS(accepted), fromMS(completed)
	if err := json.Unmarshal([]byte(ctxJSON), &r.Context); err != nil {
		return row{}, fmt.Errorf("collab %s: stored context: %w", r.ID, err)
	}
	if result != "" {
		var res Result
		if err := json.Unmarshal([]byte(result), &res); err != nil {
			return row{}, fmt.Errorf("collab %s: stored result: %w", r.ID, err)
		}
		r.Result = &res
	}
	return r, nil
}

// load reads one collaboration; ok is false when there is none.
func load(ctx context.Context, db *sql.DB, id string) (row, bool, error) {
	r, err := scanRow(db.QueryRowContext(ctx, "SELECT "+selectCols+" FROM collab_collaborations WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, false, nil
	}
	if err != nil {
		return row{}, false, fmt.Errorf("collab: load %s: %w", id, err)
	}
	return r, true, nil
}

// list reads the newest collaborations (role "" = all; else those where
// role is a party) with their events, newest first: by creation time, and
// among those created in the same millisecond by insertion order (rowid;
// ids are random, so ordering by id made such ties come out either way).
func list(ctx context.Context, db *sql.DB, role string, limit int) ([]Collaboration, error) {
	q := "SELECT " + selectCols + " FROM collab_collaborations"
	var args []any
	if role != "" {
		q += " WHERE from_role = ? OR to_role = ?"
		args = append(args, role, role)
	}
	q += " ORDER BY created_ms DESC, rowid DESC LIMIT ?"
	args = append(args, limit)
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("collab: list: %w", err)
	}
	var out []Collaboration
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("collab: list: %w", err)
		}
		out = append(out, r.Collaboration)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("collab: list: %w", err)
	}
	for i := range out {
		if out[i].History, err = events(ctx, db, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func events(ctx context.Context, db *sql.DB, id string) ([]Event, error) {
	rows, err := db.QueryContext(ctx, `SELECT at_ms, role, action, detail FROM collab_events WHERE collab_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("collab: history of %s: %w", id, err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var ev Event
		var at int64
		if err := rows.Scan(&at, &ev.Role, &ev.Action, &ev.Detail); err != nil {
			return nil, fmt.Errorf("collab: history of %s: %w", id, err)
		}
		ev.At = fromMS(at)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("collab: history of %s: %w", id, err)
	}
	return out, nil
}
