package pairing

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Code is a stored setup code: its hash, never the code.
type Code struct {
	Hash       string    // hex SHA-256 of the normalised code
	ID         string    // random, 16 hex characters ("" for a code stored before ids existed)
	CreatedAt  time.Time //
	ExpiresAt  time.Time // CreatedAt + CodeTTL
	UsedBy     string    // deviceId of the first device that redeemed it ("" unused)
	UsedAt     time.Time // when it was first redeemed
	WrongTries int       // failed tries on the network while it was live
	LockedAt   time.Time // when WrongTries reached MaxWrongTries (zero: not locked)
}

// Store keeps codes and pending requests. The Service serialises its calls.
type Store interface {
	// PutCode inserts or replaces the code with c.Hash.
	PutCode(ctx context.Context, c Code) error
	// Code returns the code with this hash, found=false when there is none.
	Code(ctx context.Context, hash string) (c Code, found bool, err error)
	// Codes lists every stored code, oldest CreatedAt first.
	Codes(ctx context.Context) ([]Code, error)
	// DeleteCodesExpired removes codes that expired before t.
	DeleteCodesExpired(ctx context.Context, t time.Time) error
	// PutRequest inserts or replaces the request with r.ID.
	PutRequest(ctx context.Context, r Request) error
	// Requests lists every stored request, oldest CreatedAt first.
	Requests(ctx context.Context) ([]Request, error)
	// DeleteRequest removes the request id (no error if absent).
	DeleteRequest(ctx context.Context, id string) error
	// PutDevice inserts or replaces the paired device d.DeviceID.
	PutDevice(ctx context.Context, d Device) error
	// Device returns the paired device id, found=false when there is none.
	Device(ctx context.Context, id string) (d Device, found bool, err error)
	// Devices lists the paired devices, oldest CreatedAt first.
	Devices(ctx context.Context) ([]Device, error)
	// DeleteDevice removes the paired device id (no error if absent).
	DeleteDevice(ctx context.Context, id string) error
}

// MemStore is a Store in memory (lost at exit), for tests and for a
// gateway without a state.db.
type MemStore struct {
	mu      sync.Mutex
	codes   map[string]Code
	reqs    map[string]Request
	devices map[string]Device
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{codes: map[string]Code{}, reqs: map[string]Request{}, devices: map[string]Device{}}
}

func cloneDevice(d Device) Device {
	d.Roles, d.Commands, d.Caps = slices.Clone(d.Roles), slices.Clone(d.Commands), slices.Clone(d.Caps)
	d.Tokens = maps.Clone(d.Tokens)
	return d
}

// PutDevice implements Store.
func (m *MemStore) PutDevice(_ context.Context, d Device) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.devices[d.DeviceID] = cloneDevice(d)
	return nil
}

// Device implements Store.
func (m *MemStore) Device(_ context.Context, id string) (Device, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.devices[id]
	return cloneDevice(d), ok, nil
}

// Devices implements Store.
func (m *MemStore) Devices(_ context.Context) ([]Device, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Device, 0, len(m.devices))
	for _, d := range m.devices {
		out = append(out, cloneDevice(d))
	}
	slices.SortFunc(out, func(a, b Device) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.DeviceID, b.DeviceID)
	})
	return out, nil
}

// DeleteDevice implements Store.
func (m *MemStore) DeleteDevice(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.devices, id)
	return nil
}

// PutCode implements Store.
func (m *MemStore) PutCode(_ context.Context, c Code) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.codes[c.Hash] = c
	return nil
}

// Code implements Store.
func (m *MemStore) Code(_ context.Context, hash string) (Code, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.codes[hash]
	return c, ok, nil
}

// Codes implements Store.
func (m *MemStore) Codes(_ context.Context) ([]Code, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Code, 0, len(m.codes))
	for _, c := range m.codes {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Code) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Hash, b.Hash)
	})
	return out, nil
}

// DeleteCodesExpired implements Store.
func (m *MemStore) DeleteCodesExpired(_ context.Context, t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for h, c := range m.codes {
		if c.ExpiresAt.Before(t) {
			delete(m.codes, h)
		}
	}
	return nil
}

// PutRequest implements Store.
func (m *MemStore) PutRequest(_ context.Context, r Request) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r.Roles, r.Commands, r.Caps = slices.Clone(r.Roles), slices.Clone(r.Commands), slices.Clone(r.Caps)
	m.reqs[r.ID] = r
	return nil
}

// Requests implements Store.
func (m *MemStore) Requests(_ context.Context) ([]Request, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Request, 0, len(m.reqs))
	for _, r := range m.reqs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Request) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// DeleteRequest implements Store.
func (m *MemStore) DeleteRequest(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.reqs, id)
	return nil
}

// SQLStore is a Store in state.db (tables pairing_codes, pairing_requests
// and pairing_devices; times in Unix milliseconds), so codes (with their
// wrong tries), pending requests and paired devices survive a restart of
// the app. A device's token hashes are in its row's JSON body (never a
// token).
type SQLStore struct{ db *sql.DB }

// codeColumnsAdded are the pairing_codes columns added after the table
// first shipped (issue 21: code ids and locking), with their definitions.
var codeColumnsAdded = [][2]string{
	{"id", "TEXT NOT NULL DEFAULT ''"},
	{"wrong_tries", "INTEGER NOT NULL DEFAULT 0"},
	{"locked_ms", "INTEGER NOT NULL DEFAULT 0"},
}

// OpenSQLStore creates the tables if needed and adds the columns an older
// pairing_codes lacks. db is state.db (statedb.Open).
func OpenSQLStore(ctx context.Context, db *sql.DB) (*SQLStore, error) {
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS pairing_codes (
		hash TEXT PRIMARY KEY, created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,
		used_by TEXT NOT NULL DEFAULT '', used_ms INTEGER NOT NULL DEFAULT 0);
	CREATE TABLE IF NOT EXISTS pairing_requests (
		id TEXT PRIMARY KEY, device_id TEXT NOT NULL, created_ms INTEGER NOT NULL,
		expires_ms INTEGER NOT NULL, body TEXT NOT NULL);
	CREATE TABLE IF NOT EXISTS pairing_devices (
		device_id TEXT PRIMARY KEY, created_ms INTEGER NOT NULL, body TEXT NOT NULL)`)
	if err != nil {
		return nil, fmt.Errorf("create pairing tables: %w", err)
	}
	if err := migrateScopes(ctx, db); err != nil {
		return nil, err
	}
	if err := addColumns(ctx, db, "pairing_codes", codeColumnsAdded); err != nil {
		return nil, fmt.Errorf("migrate pairing_codes: %w", err)
	}
	return &SQLStore{db: db}, nil
}

// addColumns adds to table each of cols ({name, definition}) it lacks.
func addColumns(ctx context.Context, db *sql.DB, table string, cols [][2]string) error {
	rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", table)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		have[name] = true
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, c := range cols {
		if have[c[0]] {
			continue
		}
		if _, err := db.ExecContext(ctx, "ALTER TABLE "+table+" ADD COLUMN "+c[0]+" "+c[1]); err != nil {
			return fmt.Errorf("add column %s: %w", c[0], err)
		}
	}
	return nil
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// PutCode implements Store.
func (s *SQLStore) PutCode(ctx context.Context, c Code) error {
	_, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO pairing_codes
		(hash, id, created_ms, expires_ms, used_by, used_ms, wrong_tries, locked_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		c.Hash, c.ID, ms(c.CreatedAt), ms(c.ExpiresAt), c.UsedBy, ms(c.UsedAt), c.WrongTries, ms(c.LockedAt))
	return err
}

const codeColumns = `hash, id, created_ms, expires_ms, used_by, used_ms, wrong_tries, locked_ms`

// scanCode reads a row of codeColumns.
func scanCode(scan func(...any) error) (Code, error) {
	var c Code
	var created, expires, used, locked int64
	if err := scan(&c.Hash, &c.ID, &created, &expires, &c.UsedBy, &used, &c.WrongTries, &locked); err != nil {
		return Code{}, err
	}
	c.CreatedAt, c.ExpiresAt, c.UsedAt, c.LockedAt = fromMs(created), fromMs(expires), fromMs(used), fromMs(locked)
	return c, nil
}

// Code implements Store.
func (s *SQLStore) Code(ctx context.Context, hash string) (Code, bool, error) {
	c, err := scanCode(s.db.QueryRowContext(ctx, `SELECT `+codeColumns+` FROM pairing_codes WHERE hash = ?`, hash).Scan)
	if err == sql.ErrNoRows {
		return Code{}, false, nil
	}
	if err != nil {
		return Code{}, false, err
	}
	return c, true, nil
}

// Codes implements Store.
func (s *SQLStore) Codes(ctx context.Context) ([]Code, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+codeColumns+` FROM pairing_codes ORDER BY created_ms, hash`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Code
	for rows.Next() {
		c, err := scanCode(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeleteCodesExpired implements Store.
func (s *SQLStore) DeleteCodesExpired(ctx context.Context, t time.Time) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM pairing_codes WHERE expires_ms < ?`, ms(t))
	return err
}

// PutRequest implements Store.
func (s *SQLStore) PutRequest(ctx context.Context, r Request) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT OR REPLACE INTO pairing_requests (id, device_id, created_ms, expires_ms, body)
		VALUES (?, ?, ?, ?, ?)`, r.ID, r.DeviceID, ms(r.CreatedAt), ms(r.ExpiresAt), string(body))
	return err
}

// Requests implements Store.
func (s *SQLStore) Requests(ctx context.Context) ([]Request, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM pairing_requests ORDER BY created_ms, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Request
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		var r Request
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			return nil, fmt.Errorf("pairing request: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteRequest implements Store.
func (s *SQLStore) DeleteRequest(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM pairing_requests WHERE id = ?`, id)
	return err
}

// PutDevice implements Store.
func (s *SQLStore) PutDevice(ctx context.Context, d Device) error {
	body, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT OR REPLACE INTO pairing_devices (device_id, created_ms, body) VALUES (?, ?, ?)`,
		d.DeviceID, ms(d.CreatedAt), string(body))
	return err
}

func decodeDevice(body string) (Device, error) {
	var d Device
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		return Device{}, fmt.Errorf("paired device: %w", err)
	}
	if d.Tokens == nil {
		d.Tokens = map[string]Token{}
	}
	return withScope(d), nil
}

// Device implements Store.
func (s *SQLStore) Device(ctx context.Context, id string) (Device, bool, error) {
	var body string
	err := s.db.QueryRowContext(ctx, `SELECT body FROM pairing_devices WHERE device_id = ?`, id).Scan(&body)
	if err == sql.ErrNoRows {
		return Device{}, false, nil
	}
	if err != nil {
		return Device{}, false, err
	}
	d, err := decodeDevice(body)
	return d, err == nil, err
}

// Devices implements Store.
func (s *SQLStore) Devices(ctx context.Context) ([]Device, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM pairing_devices ORDER BY created_ms, device_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Device
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		d, err := decodeDevice(body)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// DeleteDevice implements Store.
func (s *SQLStore) DeleteDevice(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM pairing_devices WHERE device_id = ?`, id)
	return err
}
