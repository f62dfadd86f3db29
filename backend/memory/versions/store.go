package versions

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Conflict kinds (SPEC §5.3).
const (
	// KindOverwrite: a write based on a stale version replaced the file
	// (the last write wins); Other holds the text it replaced.
	KindOverwrite = "overwrite"
	// KindPending: a write based on a stale version of a decision file was
	// not applied; Other holds the text it proposed, and the person chooses.
	KindPending = "pending"
)

// Conflict states.
const (
	StateOpen     = "open"
	StateResolved = "resolved"
)

// Resolution choices (see Resolution).
const (
	// ChoiceCurrent keeps the file as it is.
	ChoiceCurrent = "current"
	// ChoiceOther writes the conflict's Other text.
	ChoiceOther = "other"
	// ChoiceMerged writes a text the person composed.
	ChoiceMerged = "merged"
)

// FileVersion is the stored version of one file. Path is the
// workspace-relative slash path; Hash the hex SHA-256 of the content the
// vector describes ("" when the file does not exist); Updated Unix ms.
type FileVersion struct {
	Path    string `json:"path"`
	Vector  Vector `json:"version"`
	Hash    string `json:"hash"`
	Updated int64  `json:"updated"`
}

// Conflict is one conflict record (SPEC §5.3). Base is the version the
// write named, Current the version of the file when it arrived; Other is
// the full text of the side that is not in the file (Kind says which);
// File is the workspace-relative `*.conflict-<ts>.md` file holding Other
// beside the original ("" when none was written); TS is Unix ms.
type Conflict struct {
	ID         int64       `json:"id"`
	Path       string      `json:"path"`
	Kind       string      `json:"kind"`
	Base       Vector      `json:"base"`
	Current    Vector      `json:"current"`
	Writer     string      `json:"writer"`
	Session    string      `json:"session,omitempty"`
	Other      string      `json:"other"`
	File       string      `json:"file,omitempty"`
	TS         int64       `json:"ts"`
	State      string      `json:"state"`
	Resolution *Resolution `json:"resolution,omitempty"`
}

// Resolution says how a conflict was resolved: Choice (ChoiceCurrent,
// ChoiceOther or ChoiceMerged), By (the writer who chose), Version (the
// file's version after the resolution) and TS (Unix ms).
type Resolution struct {
	Choice  string `json:"choice"`
	By      string `json:"by"`
	Version Vector `json:"version"`
	TS      int64  `json:"ts"`
}

// Filter selects conflicts for Conflicts: Path ("" = all files), State
// ("" = both, StateOpen or StateResolved), Limit (0 = DefaultLimit,
// capped at MaxLimit).
type Filter struct {
	Path  string
	State string
	Limit int
}

// Listing limits of Conflicts.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Options configure Open.
type Options struct {
	// Workspace scopes every record: one state.db may hold the versions of
	// several workspaces (the caller passes the workspace's absolute
	// path). Required.
	Workspace string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Store keeps version vectors and conflict records. Safe for concurrent use
// (and for use by several processes on the same database).
type Store struct {
	db  *sql.DB
	ws  string
	now func() time.Time
}

var migrations = []string{
	`CREATE TABLE IF NOT EXISTS versions_files (
		workspace TEXT    NOT NULL,
		path      TEXT    NOT NULL,
		vector    TEXT    NOT NULL,
		hash      TEXT    NOT NULL,
		updated   INTEGER NOT NULL,
		PRIMARY KEY (workspace, path)
	);
	CREATE TABLE IF NOT EXISTS versions_conflicts (
		id               INTEGER PRIMARY KEY AUTOINCREMENT,
		workspace        TEXT    NOT NULL,
		path             TEXT    NOT NULL,
		kind             TEXT    NOT NULL,
		base             TEXT    NOT NULL,
		current          TEXT    NOT NULL,
		writer           TEXT    NOT NULL,
		session          TEXT    NOT NULL DEFAULT '',
		other            TEXT    NOT NULL,
		file             TEXT    NOT NULL DEFAULT '',
		ts               INTEGER NOT NULL,
		state            TEXT    NOT NULL,
		choice           TEXT    NOT NULL DEFAULT '',
		resolved_by      TEXT    NOT NULL DEFAULT '',
		resolved_version TEXT    NOT NULL DEFAULT '',
		resolved_at      INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX IF NOT EXISTS versions_conflicts_path ON versions_conflicts(workspace, path, state);
	CREATE INDEX IF NOT EXISTS versions_conflicts_state ON versions_conflicts(workspace, state, id);`,
}

// Open creates or upgrades the versions_* tables in db (typically from
// statedb.Open; the caller closes it) and returns a Store for
// o.Workspace. It is idempotent.
func Open(db *sql.DB, o Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("open versions: nil database")
	}
	if o.Workspace == "" {
		return nil, errors.New("open versions: Options.Workspace is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Store{db: db, ws: o.Workspace, now: o.Now}
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS versions_schema (
		version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL DEFAULT (unixepoch()))`); err != nil {
		return nil, fmt.Errorf("open versions: create schema table: %w", err)
	}
	for i, stmt := range migrations {
		err := s.tx(ctx, func(q *sql.Conn) error {
			var n int
			if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM versions_schema WHERE version = ?`, i+1).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := q.ExecContext(ctx, stmt); err != nil {
				return err
			}
			_, err := q.ExecContext(ctx, `INSERT INTO versions_schema(version) VALUES (?)`, i+1)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("open versions: migration %d: %w", i+1, err)
		}
	}
	return s, nil
}

// tx runs fn in a transaction that holds the database's write lock from its
// start (BEGIN IMMEDIATE; the connection's busy timeout applies), so that a
// read-modify-write in fn is never interleaved with another writer's. fn's
// error rolls the transaction back and is returned as is.
func (s *Store) tx(ctx context.Context, fn func(c *sql.Conn) error) (err error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err
	}
	done := false
	defer func() {
		if done {
			return
		}
		// Not with ctx: a cancelled request must still release the lock.
		if _, err := c.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`); err != nil {
			// Never hand a connection with an open transaction back to
			// the pool: ErrBadConn makes database/sql discard it.
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	if err := fn(c); err != nil {
		return err
	}
	if _, err := c.ExecContext(context.WithoutCancel(ctx), `COMMIT`); err != nil {
		return err
	}
	done = true
	return nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) file(ctx context.Context, q querier, path string) (FileVersion, bool, error) {
	var vec string
	fv := FileVersion{Path: path}
	err := q.QueryRowContext(ctx, `SELECT vector, hash, updated FROM versions_files WHERE workspace = ? AND path = ?`, s.ws, path).
		Scan(&vec, &fv.Hash, &fv.Updated)
	if errors.Is(err, sql.ErrNoRows) {
		fv.Vector = Vector{}
		return fv, false, nil
	}
	if err != nil {
		return fv, false, err
	}
	if fv.Vector, err = Parse(vec); err != nil {
		return fv, false, fmt.Errorf("stored version of %s: %w", path, err)
	}
	return fv, true, nil
}

func (s *Store) putFile(ctx context.Context, c *sql.Conn, fv FileVersion) error {
	_, err := c.ExecContext(ctx, `INSERT INTO versions_files(workspace, path, vector, hash, updated) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(workspace, path) DO UPDATE SET vector = excluded.vector, hash = excluded.hash, updated = excluded.updated`,
		s.ws, fv.Path, fv.Vector.String(), fv.Hash, fv.Updated)
	return err
}

// File returns the stored version of path; ok is false (and the Vector
// empty) when none is stored.
func (s *Store) File(ctx context.Context, path string) (fv FileVersion, ok bool, err error) {
	fv, ok, err = s.file(ctx, s.db, path)
	if err != nil {
		return fv, false, fmt.Errorf("version of %s: %w", path, err)
	}
	return fv, ok, nil
}

// Increment raises writer's counter of path by one and records hash as the
// content the new version describes, atomically: concurrent increments are
// never lost. It returns the new version.
func (s *Store) Increment(ctx context.Context, path, writer, hash string) (FileVersion, error) {
	if err := ValidateWriter(writer); err != nil {
		return FileVersion{}, fmt.Errorf("increment version of %s: %w", path, err)
	}
	var out FileVersion
	err := s.tx(ctx, func(c *sql.Conn) error {
		cur, _, err := s.file(ctx, c, path)
		if err != nil {
			return err
		}
		out = FileVersion{Path: path, Vector: cur.Vector.Inc(writer), Hash: hash, Updated: s.now().UnixMilli()}
		return s.putFile(ctx, c, out)
	})
	if err != nil {
		return FileVersion{}, fmt.Errorf("increment version of %s: %w", path, err)
	}
	return out, nil
}

// Reconcile brings the stored version of path in line with the content on
// disk (hash; "" when the file does not exist), counting a difference as a
// write by writer (SPEC §5.3: a hand edit is a write by admin). When no
// version is stored, create says whether to start one ({writer: 1}) for an
// existing file; a missing file without a stored version stays without
// one. changed reports whether anything was stored.
func (s *Store) Reconcile(ctx context.Context, path, hash, writer string, create bool) (fv FileVersion, changed bool, err error) {
	if err := ValidateWriter(writer); err != nil {
		return FileVersion{}, false, fmt.Errorf("reconcile version of %s: %w", path, err)
	}
	// The common case (nothing changed) needs no write lock.
	cur, ok, err := s.file(ctx, s.db, path)
	if err != nil {
		return cur, false, fmt.Errorf("reconcile version of %s: %w", path, err)
	}
	if (ok && cur.Hash == hash) || (!ok && (!create || hash == "")) {
		return cur, false, nil
	}
	err = s.tx(ctx, func(c *sql.Conn) error {
		cur, ok, err := s.file(ctx, c, path)
		if err != nil {
			return err
		}
		fv = cur
		if (ok && cur.Hash == hash) || (!ok && (!create || hash == "")) {
			return nil
		}
		fv = FileVersion{Path: path, Vector: cur.Vector.Inc(writer), Hash: hash, Updated: s.now().UnixMilli()}
		changed = true
		return s.putFile(ctx, c, fv)
	})
	if err != nil {
		return FileVersion{}, false, fmt.Errorf("reconcile version of %s: %w", path, err)
	}
	return fv, changed, nil
}

// Commit is one write's change to the store: the version it expects to be
// stored now (Expect; the empty vector for none), the version and content
// hash after it (Next, Hash; Next nil leaves the stored version as it is),
// and an optional conflict record to add (its ID, TS and State are set by
// Commit).
type Commit struct {
	Path     string
	Expect   Vector
	Next     Vector
	Hash     string
	Conflict *Conflict
}

// Commit applies c in one transaction: it checks that the stored version
// still equals c.Expect (else ErrChanged), adds c.Conflict, runs apply (the
// caller's file system change, e.g. the rename that puts a file in place;
// may be nil) and stores c.Next. An error from apply rolls everything back
// and is returned wrapped. It returns the stored version and the added
// conflict (nil when none).
func (s *Store) Commit(ctx context.Context, c Commit, apply func() error) (FileVersion, *Conflict, error) {
	var out FileVersion
	var added *Conflict
	err := s.tx(ctx, func(q *sql.Conn) error {
		cur, _, err := s.file(ctx, q, c.Path)
		if err != nil {
			return err
		}
		if Compare(cur.Vector, c.Expect) != Equal {
			return fmt.Errorf("%w: stored %q, expected %q", ErrChanged, cur.Vector, c.Expect)
		}
		out = cur
		now := s.now().UnixMilli()
		if c.Conflict != nil {
			cf := *c.Conflict
			cf.Path, cf.TS, cf.State, cf.Resolution = c.Path, now, StateOpen, nil
			res, err := q.ExecContext(ctx, `INSERT INTO versions_conflicts(workspace, path, kind, base, current, writer, session, other, file, ts, state)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				s.ws, cf.Path, cf.Kind, cf.Base.String(), cf.Current.String(), cf.Writer, cf.Session, cf.Other, cf.File, cf.TS, cf.State)
			if err != nil {
				return err
			}
			if cf.ID, err = res.LastInsertId(); err != nil {
				return err
			}
			added = &cf
		}
		if apply != nil {
			if err := apply(); err != nil {
				return err
			}
		}
		if c.Next != nil {
			out = FileVersion{Path: c.Path, Vector: c.Next.Clone(), Hash: c.Hash, Updated: now}
			return s.putFile(ctx, q, out)
		}
		return nil
	})
	if err != nil {
		return FileVersion{}, nil, fmt.Errorf("commit version of %s: %w", c.Path, err)
	}
	return out, added, nil
}

const conflictCols = `id, path, kind, base, current, writer, session, other, file, ts, state, choice, resolved_by, resolved_version, resolved_at`

type scanner interface{ Scan(dest ...any) error }

func scanConflict(r scanner) (Conflict, error) {
	var c Conflict
	var base, cur, choice, by, rver string
	var rat int64
	if err := r.Scan(&c.ID, &c.Path, &c.Kind, &base, &cur, &c.Writer, &c.Session, &c.Other, &c.File, &c.TS, &c.State,
		&choice, &by, &rver, &rat); err != nil {
		return c, err
	}
	var err error
	if c.Base, err = Parse(base); err != nil {
		return c, fmt.Errorf("conflict %d base: %w", c.ID, err)
	}
	if c.Current, err = Parse(cur); err != nil {
		return c, fmt.Errorf("conflict %d current: %w", c.ID, err)
	}
	if c.State == StateResolved {
		r := &Resolution{Choice: choice, By: by, TS: rat}
		if r.Version, err = Parse(rver); err != nil {
			return c, fmt.Errorf("conflict %d resolution: %w", c.ID, err)
		}
		c.Resolution = r
	}
	return c, nil
}

// Conflict returns one conflict record (ErrNotFound when there is none).
func (s *Store) Conflict(ctx context.Context, id int64) (Conflict, error) {
	c, err := scanConflict(s.db.QueryRowContext(ctx, `SELECT `+conflictCols+` FROM versions_conflicts WHERE workspace = ? AND id = ?`, s.ws, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Conflict{}, fmt.Errorf("conflict %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Conflict{}, fmt.Errorf("conflict %d: %w", id, err)
	}
	return c, nil
}

// Conflicts lists conflict records, newest first (see Filter).
func (s *Store) Conflicts(ctx context.Context, f Filter) ([]Conflict, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	if f.Limit > MaxLimit {
		f.Limit = MaxLimit
	}
	where := []string{"workspace = ?"}
	args := []any{s.ws}
	if f.Path != "" {
		where = append(where, "path = ?")
		args = append(args, f.Path)
	}
	switch f.State {
	case "":
	case StateOpen, StateResolved:
		where = append(where, "state = ?")
		args = append(args, f.State)
	default:
		return nil, fmt.Errorf("list conflicts: unknown state %q (want %q or %q)", f.State, StateOpen, StateResolved)
	}
	args = append(args, f.Limit)
	rows, err := s.db.QueryContext(ctx, `SELECT `+conflictCols+` FROM versions_conflicts WHERE `+strings.Join(where, " AND ")+
		` ORDER BY id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list conflicts: %w", err)
	}
	defer rows.Close()
	var out []Conflict
	for rows.Next() {
		c, err := scanConflict(rows)
		if err != nil {
			return nil, fmt.Errorf("list conflicts: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list conflicts: %w", err)
	}
	return out, nil
}

// Resolve marks an open conflict resolved with r (r.TS is set to now when
// 0). ErrNotFound: no such conflict; ErrResolved: it was already resolved
// (the first resolution stays).
func (s *Store) Resolve(ctx context.Context, id int64, r Resolution) (Conflict, error) {
	if r.TS == 0 {
		r.TS = s.now().UnixMilli()
	}
	var out Conflict
	err := s.tx(ctx, func(q *sql.Conn) error {
		c, err := scanConflict(q.QueryRowContext(ctx, `SELECT `+conflictCols+` FROM versions_conflicts WHERE workspace = ? AND id = ?`, s.ws, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if c.State != StateOpen {
			return ErrResolved
		}
		if _, err := q.ExecContext(ctx, `UPDATE versions_conflicts SET state = ?, choice = ?, resolved_by = ?, resolved_version = ?, resolved_at = ?
			WHERE workspace = ? AND id = ?`, StateResolved, r.Choice, r.By, r.Version.String(), r.TS, s.ws, id); err != nil {
			return err
		}
		c.State = StateResolved
		rr := r
		rr.Version = r.Version.Clone()
		c.Resolution = &rr
		out = c
		return nil
	})
	if err != nil {
		return Conflict{}, fmt.Errorf("resolve conflict %d: %w", id, err)
	}
	return out, nil
}

// Move moves the stored version of from to to, for a rename (SPEC §5.3: a
// file's history goes with its content): in one transaction it checks that
// from's stored version still equals expect (else ErrChanged), runs apply
// (the caller's file system change; may be nil), moves from's open
// conflicts to to (resolved ones keep the old path), removes from's record and
// stores for to the version that dominates both from's and any record to
// still has (a file of that name deleted earlier), with writer's counter
// raised by one, so that no client holding a version of either file can
// write over the renamed one unseen. hash is the content's hash. An error
// from apply rolls everything back and is returned wrapped. It returns
// to's new version.
func (s *Store) Move(ctx context.Context, from, to string, expect Vector, writer, hash string, apply func() error) (FileVersion, error) {
	if err := ValidateWriter(writer); err != nil {
		return FileVersion{}, fmt.Errorf("move version of %s: %w", from, err)
	}
	var out FileVersion
	err := s.tx(ctx, func(q *sql.Conn) error {
		cur, _, err := s.file(ctx, q, from)
		if err != nil {
			return err
		}
		if Compare(cur.Vector, expect) != Equal {
			return fmt.Errorf("%w: stored %q, expected %q", ErrChanged, cur.Vector, expect)
		}
		old, _, err := s.file(ctx, q, to)
		if err != nil {
			return err
		}
		if apply != nil {
			if err := apply(); err != nil {
				return err
			}
		}
		if _, err := q.ExecContext(ctx, `DELETE FROM versions_files WHERE workspace = ? AND path = ?`, s.ws, from); err != nil {
			return err
		}
		// The file's open conflicts go with it (resolving one writes the
		// file); resolved ones stay as the history of the old path.
		if _, err := q.ExecContext(ctx, `UPDATE versions_conflicts SET path = ? WHERE workspace = ? AND path = ? AND state = ?`, to, s.ws, from, StateOpen); err != nil {
			return err
		}
		out = FileVersion{Path: to, Vector: Merge(cur.Vector, old.Vector).Inc(writer), Hash: hash, Updated: s.now().UnixMilli()}
		return s.putFile(ctx, q, out)
	})
	if err != nil {
		return FileVersion{}, fmt.Errorf("move version of %s to %s: %w", from, to, err)
	}
	return out, nil
}
