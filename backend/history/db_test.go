package history

import (
	"database/sql"
	"net/url"

	_ "github.com/mattn/go-sqlite3" // the real SQLite driver
)

// openTestDB opens a real SQLite file the way statedb.Open does (WAL, busy
// timeout, foreign keys). Tests may not import backend/statedb: the import
// rules of docs/ARCHITECTURE.md (backend/architecture_test.go) cover test files.
func openTestDB(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", "5000")
	q.Set("_foreign_keys", "on")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}
