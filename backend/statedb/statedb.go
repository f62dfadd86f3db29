// Package statedb opens the SQLite database that holds Atrium's own state
// ($ATRIUM_HOME/state.db: chat history, and later profiles, pairing,
// collaborations and conflicts; SPEC §1). Each owning package creates its own
// tables on the *sql.DB this package returns.
package statedb

import (
	"database/sql"
	"fmt"
	"net/url"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

// Open opens (creating if needed) the SQLite file at path in WAL mode with a
// 5 s busy timeout and foreign keys on. The caller closes the returned DB.
func Open(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", "5000")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open state db %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open state db %s: %w", path, err)
	}
	// A read-only file opens and reads; find out now rather than at the
	// first chat message or memory write.
	if err := probeWrite(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open state db %s: not writable: %w", path, err)
	}
	return db, nil
}

// probeWrite writes the header's user_version back unchanged inside a
// transaction that is rolled back: it fails exactly when SQLite cannot
// write the file, and leaves it as it was.
func probeWrite(db *sql.DB) error {
	var v int64
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // the probe changes nothing
	_, err = tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", v))
	return err
}
